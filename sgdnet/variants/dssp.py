"""``dssp``: Dynamic Stale Synchronous Parallel on a parameter server (Zhao et al., 2019).

Modelling choices
-----------------
* The parameter-server net is the asynchronous one of :func:`.parameter_server.build_ps_net` (the
  same pushes, per-worker server updates and pulls as ``async-ps`` / ``ssp``).
* The server counts *push arrivals*: ``dssp.w{i}.push`` (zero duration) fires when the last
  piece of worker ``i``'s gradient of a step has reached its shard (a receipt per piece, from
  the push transfer, or from the backward op when the shard is on the worker's host). These
  are the members' counters of the engine's ``dynamic_lag`` gate ``"dssp"``
  (:class:`sgdnet.net.Gate`), which plays the paper's server: on a push from ``p``, if ``p``
  has allowance left it uses one; else if ``p`` is within ``s_lower`` pushes of the slowest it
  is released; else if ``p`` is the fastest, the controller simulates the next ``r_max``
  pushes of ``p`` and of the slowest from their last push intervals and grants the ``r*`` in
  ``[0, r_max]`` whose push lands closest to one of the slowest's: ``p`` is released now and
  ``r*`` more times; else ``p`` waits until it is within ``s_lower`` of the slowest.
* The release is the paper's OK: ``dssp.w{i}.ok`` (zero duration, guarded by the gate) hands
  worker ``i`` a permit per parameter piece; the pulls of its next step (and, for pieces on
  its own host, the forward op that reads them) wait for it. So a worker pulls after the OK,
  as in the paper, and its first step needs none.
* ``s_upper`` (optional) is a hard cap: no OK while the worker is more than ``s_upper`` pushes
  ahead of the slowest. Without it nothing bounds the lead: the fastest worker beyond
  ``s_lower`` consults the controller at every push whose allowance is spent, and the
  controller always releases it (``r* + 1 >= 1`` releases).
* With ``aggregation="node"`` (:mod:`.ps_aggregate`) the server counts pushes per node: the
  gate's members are the nodes (``dssp.n{m}.push`` waits for the receipts of every part the
  node pushes, ``dssp.n{m}.ok`` releases its pulls), as the node acts as one worker.
* ``Result.gate_stats("dssp")`` holds every ``r*`` and the lead of every push
  (:class:`sgdnet.results.GateStats`; ``metrics.r_star`` the decisions alone).

What holds (tested, or measured by ``scripts/dssp_rstar.py``; ``docs/validation.md``)
-----------------------------------------------------------------------------------
* The r* and lead distributions are those of an independent simulation of the paper's server
  rule (``tests/test_dssp_paper.py``, 2 fast / 2 slow workers, with and without a cap).
* With ``s_upper``, every push arrives at most ``s_upper + 1`` ahead of the slowest and every
  worker runs at the slowest's pace in the long run; ``s_lower = s_upper = 0`` is BSP paced by
  the slowest (exact closed form on free messages).
* Without it, the fastest worker runs free (exact closed form with ``r_max = 0``) and leads grow
  with the run (to 63 pushes or more in 4,000-step runs of 4 workers, speeds 1, 1, 0.4, 0.4).
* Throughput is *not* between SSP(``s_lower``)'s and ASP's in general: uncapped DSSP(3, 12)
  measured above SSP(3) on 4 workers (speeds 1, 1, 0.4, 0.4) and below it on 8 (half at 0.5,
  25 Gb/s); capped at 15 it measured below SSP(3) at 10 and 25 Gb/s (the released fast
  workers' pulls share the server's NIC with the slowest's pull, which SSP's earlier pulls
  avoid). With identical workers it measured as SSP(``s_lower``) within the CIs.
"""

from __future__ import annotations

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .options import PS_OPTIONS, Option, check_int
from .parameter_server import build_ps_net
from .ps_members import members as _members
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS", "GATE"]

#: Name of the DSSP gate in the net.
GATE = "dssp"


OPTIONS = (
    Option("s_lower", 3, "an int >= 0: the staleness lower bound S_L every worker may use",
           check_int(0, limit_name="max_staleness")),
    Option("r_max", 12, "an int >= 0: the largest extra allowance r* the controller may give the "
           "fastest worker (it is released r* + 1 times)",
           check_int(0, limit_name="max_rmax")),
    Option("s_upper", None, "None (as published: no cap) or an int >= s_lower: a hard cap S_U on "
           "how many pushes a worker may be ahead of the slowest when it is released",
           check_int(0, allow_none=True, limit_name="max_staleness")),
    *PS_OPTIONS,
)


def _control(net: Net, n: int) -> list[str]:
    """Receipts, push-arrival joins and OK transitions; returns the joins (the counters)."""
    producers: dict[str, list] = {}
    readers: dict[str, list] = {}
    for t in net.transitions.values():
        for p in t.outputs:
            producers.setdefault(p, []).append(t)
        for p in t.inputs:
            readers.setdefault(p, []).append(t)
    joins = []
    for i, (pre, tag, pieces) in enumerate(_members(net, n)):
        arrived, oks = [], []
        for lab, recv, back, local in pieces:
            made, read = producers.get(recv, []), readers.get(back, [])
            if len(made) != 1 or len(read) != 1:
                raise VariantError(f"dssp: the parameter-server net {net.name!r} has no single "
                                   f"arrival / reader of piece {lab} of {next(iter(tag))} {i}")
            a = net.place(f"{pre}.{lab}.arrived", **tag).name
            made[0].outputs[a] = 1
            ok = net.place(f"{pre}.{lab}.ok", 1 if local else 0, **tag).name
            read[0].inputs[ok] = 1
            arrived.append(a)
            oks.append(ok)
        pushed = net.place(f"{pre}.pushed", **tag).name
        joins.append(net.transition(f"{pre}.push", Deterministic(0.0), inputs=arrived,
                                    outputs=[pushed], tags={**tag, "kind": "sync"}).name)
        net.transition(f"{pre}.ok", Deterministic(0.0), inputs=[pushed], outputs=oks,
                       gate=(GATE, i), tags={**tag, "kind": "sync"})
    return joins


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, s_lower: int, r_max: int,
           s_upper: int | None, **ps) -> Net:
    if s_upper is not None and s_upper < s_lower:
        raise VariantError(f"dssp option s_upper={s_upper!r} is below s_lower={s_lower!r}; give "
                           "s_upper >= s_lower, or None for no cap")
    net = build_ps_net(f"dssp-{'coarse' if coarse else 'fine'}", model, cluster,
                       synchronous=False, coarse=coarse, staleness=None, **ps)
    n = net.meta["cluster"].workers
    joins = _control(net, n)
    net.gate(GATE, "dynamic_lag", joins, s_lower=s_lower, r_max=r_max, s_upper=s_upper)
    net.meta["gate"] = GATE
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained DSSP (compute phase, then push / update / pull)."""
    return _build(model, cluster, coarse=True, **opts)


@register("dssp", summary="Dynamic SSP on a parameter server (Zhao et al.): pushes counted at the "
          "server, staleness S_L plus r* + 1 releases for the fastest worker (r* in [0, r_max]), "
          "optional hard cap S_U", options=OPTIONS, coarse=build_coarse, lockstep=False)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained DSSP (per-layer compute and wait-free per-layer push / pull)."""
    return _build(model, cluster, coarse=False, **opts)
