"""``local-sgd``: every worker runs ``H`` local SGD steps, then the workers average their models
(a blocking all-reduce or a parameter-server round trip), and start again from the average.

Modelling choices
-----------------
* Worker ``i`` computes ``H`` steps back to back (:func:`.compute.local_loop`): fine nets use
  the per-layer compute chain of :func:`.compute.compute_chain`, coarse nets one compute phase
  per step. The local optimizer update is part of the profiled step (not a separate operation).
* After its ``H``-th step the worker joins the averaging and is blocked until it ends:
  ``sync="allreduce"``: an all-reduce of the whole model (``model.grad_bytes``) with
  :func:`.collectives.allreduce` (ring step by step in fine nets, closed-form per-worker transfer in
  coarse nets); ``sync="ps"``: the worker pushes its model pieces (``cluster.shard_tensor``) to
  the shards, each shard averages a piece once every worker's copy arrived
  (``cluster.update_time`` on its CPU) and sends it back to every worker
  (:func:`.collectives.ps_average`).
* ``H`` may be one integer per worker (``H=[8, 8, 4, 4]``): worker ``i`` runs ``H_i`` steps
  per round, so a fast worker can do more local steps instead of waiting; deterministic
  period ``max_i(H_i T_c / s_i) + T_AR`` with ``sum(H_i)`` steps per round.
* ``balance="batch"``: per-worker batch proportional to speed (:func:`.compute.worker_profiles`).
  ``compression`` (``sync="allreduce"``): the model average is compressed as a gradient would
  be (:mod:`.compression`).
* Deterministic homogeneous period (all-reduce): ``H * T_c + T_AR`` with ``T_AR`` the ring
  all-reduce time of the model; ``H = 1`` with ``sync="ps"`` is synchronous SGD on a PS
  without overlap of communication and compute.
* Every local step is a step (``step=True`` on the step's last compute operation).
"""

from __future__ import annotations

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import ps_average, ps_cluster
from .compression import compressed_allreduce, tensor_sizes
from .compute import local_loop, worker_profiles
from .fabric import Fabric
from .layers import group_layers
from .options import (
    BALANCE,
    COLLECTIVE_OPTIONS,
    COMPRESSION,
    DISCIPLINE,
    MAX_LAYERS,
    Option,
    check_choice,
    check_int,
    check_per_worker_int,
    largest,
    per_worker,
)
from .registry import register

__all__ = ["build_fine", "build_coarse", "ps_average", "OPTIONS"]

OPTIONS = (
    Option("H", 4, "an int >= 1, or one per worker (a list of length workers, e.g. [8, 8, 4, "
           "4]): local steps between two model averagings", check_per_worker_int(1)),
    Option("sync", "allreduce", "'allreduce' (ring all-reduce of the model) or 'ps' (push the "
           "model to parameter-server shards, pull the average)",
           check_choice("allreduce", "ps")),
    Option("shards", None, "None (cluster.ps_shards) or an int >= 1 (sync='ps' only)",
           check_int(1, allow_none=True, limit_name="max_count")),
    Option("placement", None, "None (cluster.ps_placement), 'dedicated' or 'colocated' "
           "(sync='ps' only)", check_choice(None, "dedicated", "colocated")),
    BALANCE,
    COMPRESSION,
    *COLLECTIVE_OPTIONS,
    DISCIPLINE,
    MAX_LAYERS,
)


def _split_join(net: Net, n: int, loops, H: list[int], pieces: int = 1) -> tuple[dict, dict]:
    """Per worker: ``pieces`` places fed after ``H[i]`` steps, and one that gives the budget
    back."""
    ins, outs = {}, {}
    for i in range(n):
        lp = loops[i]
        go = [net.place(f"w{i}.avg.go{c}", worker=i).name for c in range(pieces)]
        done = net.place(f"w{i}.avg.done", worker=i).name
        net.transition(f"w{i}.avg.join", 0.0, inputs={lp.acc: H[i]},
                       outputs={p: 1 for p in go}, tags={"worker": i, "kind": "sync", "step": False})
        net.transition(f"w{i}.avg.resume", 0.0, inputs={done: 1}, outputs={lp.budget: H[i]},
                       tags={"worker": i, "kind": "sync", "step": False})
        ins[i], outs[i] = go, done
    return ins, outs


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, H, sync: str,
           shards, placement, discipline: str, max_layers, balance: str = "none",
           compression=None, **coll) -> Net:
    """``coll``: the collective options (:data:`.options.COLLECTIVE_OPTIONS`) of the
    all-reduce, given to it as they are."""
    if sync != "allreduce":
        given = {"compression": compression, **coll}
        for o in (COMPRESSION, *COLLECTIVE_OPTIONS):
            if given.get(o.name, o.default) != o.default:
                raise VariantError(f"variant 'local-sgd': option {o.name}={given[o.name]!r} "
                                   f"is modelled on the all-reduce; with sync='ps' pass "
                                   f"{o.name}={o.default!r} or use sync='allreduce'")
    cl = ps_cluster(cluster, shards, placement) if sync == "ps" else cluster
    n = cl.workers
    hs = per_worker("H", H, n, "local-sgd")
    net = Net(f"local-sgd-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cl, discipline)
    prof = model if coarse else group_layers(model, max_layers, cl.compute_cv)
    profs, bs = worker_profiles(prof, cl, balance)
    loops = [local_loop(net, fab, profs[i], cl, i, hs[i], coarse=coarse) for i in range(n)]
    pieces = 1 if sync == "allreduce" else len(cl.shard_tensor(0, model.grad_bytes))
    ins, outs = _split_join(net, n, loops, hs, pieces)
    if sync == "allreduce":
        compressed_allreduce(net, fab, cl, model, "avg", model.grad_bytes, tensor_sizes(model),
                             compression, inputs=ins, outputs={i: [outs[i]] for i in range(n)},
                             coarse=coarse, **coll)
    else:
        ps_average(net, fab, cl, model.grad_bytes, ins, outs)
    net.meta["cluster"] = cl
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained local SGD (one compute phase per step)."""
    return _build(model, cluster, coarse=True, **opts)


@register("local-sgd", summary="H local steps, then a blocking model average (all-reduce or PS)",
          options=OPTIONS, coarse=build_coarse, lockstep=True,
          warmup=lambda cluster, o: 2 * largest(o.get("H", 4)))
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained local SGD (per-layer compute, ring all-reduce step by step)."""
    return _build(model, cluster, coarse=False, **opts)
