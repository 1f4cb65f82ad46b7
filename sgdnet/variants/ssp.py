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

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .dssp import _members
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


def count_at_server(net: Net, impl: str) -> None:
    """Count worker ``i``'s step when the server has every piece of its gradient (with
    per-node aggregation: every piece its node pushes): a join ``ssp.w{i}.push`` of per-piece
    receipts becomes the gate's counter of ``i`` (``impl="gate"``) or gives back the credits
    ``ssp.credit.w{j}.w{i}`` (``"places"``) in place of ``i``'s step transition."""
    cl = net.meta["cluster"]
    n = cl.workers
    g = cl.topology.gpus_per_node if net.meta.get("ps_members") is not None else 1
    producers: dict[str, list] = {}
    for t in net.transitions.values():
        for p in t.outputs:
            producers.setdefault(p, []).append(t)
    arrived: dict[int, list[str]] = {i: [] for i in range(n)}
    for m, (_pre, _tag, pieces) in enumerate(_members(net, n if g == 1 else n // g)):
        for lab, recv, _back, _local in pieces:
            made = producers.get(recv, [])
            if len(made) != 1:
                raise VariantError(f"ssp: the parameter-server net {net.name!r} has no single "
                                   f"arrival of piece {lab} of member {m}")
            for i in range(m * g, (m + 1) * g):
                a = net.place(f"ssp.w{i}.{lab}.arrived", worker=i).name
                made[0].outputs[a] = 1
                arrived[i].append(a)
    joins = []
    for i in range(n):
        credits = []
        if impl == "places":  # the credits others take from i, given back by i's step so far
            mine = {f"ssp.credit.w{j}.w{i}" for j in range(n) if j != i}
            for t in [t for t in net.transitions.values() if mine.intersection(t.outputs)]:
                for p in mine.intersection(t.outputs):
                    del t.outputs[p]
            credits = sorted(mine, key=lambda p: int(p.split(".w")[1]))
        joins.append(net.transition(f"ssp.w{i}.push", Deterministic(0.0), inputs=arrived[i],
                                    outputs=credits, tags={"worker": i, "kind": "sync"}).name)
    if impl == "gate":
        net.gates["ssp"].counters = tuple(joins)


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained SSP: compute phase, then push / per-worker update / pull."""
    return _build(model, cluster, True, **opts)


@register("ssp", summary="stale-synchronous PS: a worker may be at most s steps ahead of the "
          "slowest", options=OPTIONS, coarse=build_coarse, lockstep=False)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained SSP: per-layer compute and wait-free per-layer push / pull."""
    return _build(model, cluster, False, **opts)
