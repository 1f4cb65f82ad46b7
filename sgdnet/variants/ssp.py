"""``ssp``: stale-synchronous parallel SGD on a parameter server (Ho et al., 2013).

The server side is ``async-ps``'s (each push applied on arrival and returned to its worker);
in addition worker ``i`` may start step ``c + 1`` only when every worker has completed at
least ``c - s`` steps (``s`` = ``staleness``). ``s = 0`` makes the workers advance in lockstep
(BSP-like pacing with asynchronous updates); a large ``s`` tends to ``async-ps``.

Two implementations, which must give the same results (tests check it):

``impl="gate"``
    the engine's ``lag`` gate ``"ssp"`` over the workers' step transitions, guarding the first
    compute operation of each step;
``impl="places"``
    plain Petri-net credits: a place ``ssp.credit.w{i}.w{j}`` per ordered pair with ``s + 1``
    tokens, taken by ``i``'s step start and given back by ``j``'s step completion
    (``n (n - 1)`` places, so prefer the gate for large clusters).

A step counts as *completed* when the server has received every piece of that step's gradient
(``ssp.w{i}.push``, a zero-duration join of the pieces' receipts at their shards, as DSSP's server
counts pushes, :mod:`.dssp`): Ho et al.'s guarantee is that a worker at clock ``c`` sees every
update of clocks ``<= c - s - 1`` (NIPS 2013, section 2), which the server can give only once it
has them. Counting at the end of the worker's backward instead released the fast workers while
the slow worker's push was still on the wire, so their pushes shared the server's NIC with it
(on the emulated testbed of ``docs/time_to_accuracy.md`` that made the slow worker's step 0.43 s
against 0.28 s measured). The join's completions are the gate's counters (``"gate"``) or give
the credits back (``"places"``).

With ``aggregation="node"`` the server side is ``async-ps``'s per-node one (:mod:`.ps_aggregate`:
a node's GPUs sum each piece and step together); the bound still counts every GPU's steps, a
GPU's step when the server has every piece its node pushes.
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .options import PS_OPTIONS, Option, check_choice, check_int
from .parameter_server import build_ps_net
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS"]

OPTIONS = (
    Option("staleness", 3, "an int >= 0: how many steps a worker may run ahead of the slowest",
           check_int(0, limit_name="max_staleness")),
    Option("impl", "gate", "'gate' (the engine's lag gate) or 'places' (pairwise credit places)",
           check_choice("gate", "places")),
    *PS_OPTIONS,
)


def _build(model: ModelProfile, cluster: Cluster, coarse: bool, staleness: int, impl: str,
           **ps) -> Net:
    net = build_ps_net(f"ssp-{'coarse' if coarse else 'fine'}", model, cluster,
                       synchronous=False, coarse=coarse, staleness=staleness,
                       staleness_impl=impl, **ps)  # counted at the server (count_at_server)
    net.meta["staleness"] = staleness
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained SSP: compute phase, then push / per-worker update / pull."""
    return _build(model, cluster, True, **opts)


@register("ssp", summary="stale-synchronous PS: a worker may be at most s steps ahead of the "
          "slowest", options=OPTIONS, coarse=build_coarse, lockstep=False)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained SSP: per-layer compute and wait-free per-layer push / pull."""
    return _build(model, cluster, False, **opts)
