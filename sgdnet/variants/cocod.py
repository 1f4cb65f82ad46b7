"""``cocod``: CoCoD-SGD (computation and communication decoupled SGD) over all-reduce.

Modelling choices
-----------------
* Worker ``i`` runs rounds of ``k`` local SGD steps (:func:`.compute.local_loop`; per-layer
  chain in fine nets, one phase per step in coarse nets).
* At the end of a round (its *synchronisation point*) the worker waits for the all-reduce it
  started at the previous synchronisation point, merges (the average of the previous snapshots
  plus its own progress since — a ``w{i}.merge`` operation on its GPU costing
  ``cluster.update_time(model bytes)``, 0 by default), snapshots its model and starts an
  all-reduce of the snapshot (:func:`.collectives.allreduce` of ``model.grad_bytes``) *in the
  background*: the all-reduce uses only the NIC resources, so it runs concurrently with the
  next ``k`` steps on the GPU. The first synchronisation point has nothing to wait for.
* Deterministic homogeneous period after the first round: ``max(k * T_c, T_AR)``.
* ``balance="batch"`` (heterogeneous mode): worker ``i``'s batch is
  ``b_i = B * n * speed_i / sum(speeds)`` (:func:`.compute.batch_sizes`: rounded by largest
  remainder, global batch ``n B``, at least 1), so every worker's compute time is about
  ``T_c * n / sum(speeds)`` and nobody waits at the synchronisation point; the per-worker
  batches are in ``net.meta["batch_sizes"]`` and ``samples_per_s`` weights each worker's steps
  by its batch. ``balance="none"``: every worker uses the profile's batch.
* ``k`` may be one integer per worker (``k=[8, 8, 4, 4]``): worker ``i`` merges after ``k_i``
  local steps (the other heterogeneous mode: equal batches, more local steps on fast workers).
* ``compression``: the snapshot all-reduce is compressed (:mod:`.compression`).
* Every local step is a step (``step=True`` on the step's last compute operation).
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .compression import compressed_allreduce, tensor_sizes
from .compute import batch_sizes, local_loop, worker_profiles
from .durations import duration
from .fabric import Fabric
from .layers import group_layers
from .options import (
    BALANCE,
    COLLECTIVE_OPTIONS,
    COMPRESSION,
    DISCIPLINE,
    MAX_LAYERS,
    Option,
    check_per_worker_int,
    largest,
    per_worker,
)
from .registry import register

__all__ = ["build_fine", "build_coarse", "batch_sizes", "OPTIONS"]

OPTIONS = (
    Option("k", 4, "an int >= 1, or one per worker (a list of length workers, e.g. [8, 8, 4, "
           "4]): local steps between two synchronisation points", check_per_worker_int(1)),
    BALANCE,
    COMPRESSION,
    *COLLECTIVE_OPTIONS,
    DISCIPLINE,
    MAX_LAYERS,
)


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, k, discipline: str,
           max_layers, balance: str = "none", compression=None, **coll) -> Net:
    """``coll``: the collective options (:data:`.options.COLLECTIVE_OPTIONS`) of the
    all-reduce."""
    n = cluster.workers
    ks = per_worker("k", k, n, "cocod")
    net = Net(f"cocod-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cluster, discipline)
    base = model if coarse else group_layers(model, max_layers, cluster.compute_cv)
    profs, bs = worker_profiles(base, cluster, balance)
    ar_in, ar_out = {}, {}
    merge_t = duration(cluster.update_time(model.grad_bytes), cluster.compute_cv)
    for i in range(n):
        lp = local_loop(net, fab, profs[i], cluster, i, ks[i], coarse=coarse)
        done = net.place(f"w{i}.ar.done", 1, worker=i).name  # nothing to wait for at first
        snap = net.place(f"w{i}.snap", worker=i).name
        net.transition(f"w{i}.merge", merge_t, inputs={lp.acc: ks[i], done: 1},
                       outputs={lp.budget: ks[i], snap: 1}, resources=[fab.gpu(i)],
                       tags={"worker": i, "kind": "compute", "phase": "merge", "step": False})
        ar_in[i], ar_out[i] = [snap], [done]
    compressed_allreduce(net, fab, cluster, model, "avg", model.grad_bytes, tensor_sizes(model),
                         compression, inputs=ar_in, outputs=ar_out, coarse=coarse, **coll)
    net.meta["batch_sizes"] = bs
    net.meta["cluster"] = cluster
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained CoCoD-SGD (one compute phase per step)."""
    return _build(model, cluster, coarse=True, **opts)


@register("cocod", summary="CoCoD-SGD: the all-reduce of round r overlaps the k local steps of "
          "round r+1", options=OPTIONS, coarse=build_coarse, lockstep=True,
          warmup=lambda cluster, o: 3 * largest(o.get("k", 4)))
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained CoCoD-SGD (per-layer compute, ring all-reduce step by step)."""
    return _build(model, cluster, coarse=False, **opts)
