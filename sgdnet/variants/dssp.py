"""``dssp``: Dynamic Stale Synchronous Parallel on a parameter server (Zhao et al., 2019).

Modelling choices
-----------------
* The parameter-server net is the asynchronous one of :func:`.parameter_server.build_ps_net` (the same
  pushes, per-worker server updates and pulls as ``async-ps`` / ``ssp``), so ``dssp`` differs
  from ``ssp`` only in its synchronisation controller.
* The controller is the engine's ``dynamic_lag`` gate ``"dssp"`` (see
  :class:`sgdnet.net.Gate`): member ``i`` counts worker ``i``'s completed steps (its *push*: the
  step transition, whose completion releases the step's last gradients — the same counters
  ``ssp``'s ``lag`` gate uses) and guards the first compute operation of its next step. On a
  push from ``p``: if ``p`` has allowance left it uses one and is released; else if ``p`` is
  within ``s_lower`` steps of the slowest it is released; else if ``p`` is the fastest the
  controller picks ``r*`` in ``[0, r_max]`` from the last two push times of the fastest and the
  slowest workers (the ``r`` for which the fastest's predicted push time lands closest to the
  slowest's next one) and releases ``p`` with ``r* - 1`` allowance left if ``r* > 0``; otherwise
  ``p`` waits until it is within ``s_lower`` of the slowest.
* The chosen ``r*`` values are in ``Result.gate_log("dssp")`` (:func:`sgdnet.metrics.r_star`).
* With identical workers DSSP behaves like ``ssp`` with ``staleness = s_lower``; its throughput
  lies between SSP(``s_lower``)'s and ASP's (SSP(``s_lower + r_max``) bounds it from above too).
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .compute import first_compute
from .options import PS_OPTIONS, Option, check_int
from .parameter_server import build_ps_net
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS", "GATE"]

#: Name of the DSSP gate in the net.
GATE = "dssp"

OPTIONS = (
    Option("s_lower", 3, "an int >= 0: the staleness lower bound S_L every worker may use",
           check_int(0)),
    Option("r_max", 12, "an int >= 0: the largest extra allowance r* the controller may give the "
           "fastest worker (the upper bound is s_lower + r_max)", check_int(0)),
    *PS_OPTIONS,
)


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, s_lower: int, r_max: int,
           **ps) -> Net:
    net = build_ps_net(f"dssp-{'coarse' if coarse else 'fine'}", model, cluster,
                       synchronous=False, coarse=coarse, staleness=None, **ps)
    n = net.meta["cluster"].workers
    steps = []
    for i in range(n):
        st = [t.name for t in net.transitions.values()
              if t.is_step and t.tags.get("worker") == i]
        steps.append(st[0])
    net.gate(GATE, "dynamic_lag", steps, s_lower=s_lower, r_max=r_max)
    for i in range(n):
        net.transitions[first_compute(net, i)].gate = (GATE, i)
    net.meta["gate"] = GATE
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained DSSP (compute phase, then push / update / pull)."""
    return _build(model, cluster, coarse=True, **opts)


@register("dssp", summary="Dynamic SSP on a parameter server: staleness S_L plus a run-time "
          "allowance r* in [0, r_max] for the fastest worker", options=OPTIONS,
          coarse=build_coarse, lockstep=False)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained DSSP (per-layer compute and wait-free per-layer push / pull)."""
    return _build(model, cluster, coarse=False, **opts)
