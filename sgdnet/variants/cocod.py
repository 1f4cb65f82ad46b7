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
  ``b_i = round(B * n * speed_i / sum(speeds))`` (at least 1), so every worker's compute time
  is about ``T_c * n / sum(speeds)`` and nobody waits at the synchronisation point; the
  per-worker batches are in ``net.meta["batch_sizes"]`` and ``samples_per_s`` must weight each
  worker's steps by its batch. ``balance="none"``: every worker uses the profile's batch.
* Every local step is a step (``step=True`` on the step's last compute operation).
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import allreduce
from .compute import local_loop
from .durations import duration
from .fabric import Fabric
from .layers import group_layers
from .options import DISCIPLINE, MAX_LAYERS, Option, check_choice, check_int
from .registry import register

__all__ = ["build_fine", "build_coarse", "batch_sizes", "OPTIONS"]

OPTIONS = (
    Option("k", 4, "an int >= 1: local steps between two synchronisation points", check_int(1)),
    Option("balance", "none", "'none' (same batch everywhere) or 'batch' (heterogeneous mode: "
           "per-worker batch proportional to speed)", check_choice("none", "batch")),
    DISCIPLINE,
    MAX_LAYERS,
)


def batch_sizes(model: ModelProfile, cluster: Cluster, balance: str) -> list[int]:
    """Per-worker batch sizes: the profile's, or proportional to speed (``balance="batch"``)."""
    n = cluster.workers
    if balance == "none":
        return [model.batch_size] * n
    sp = [cluster.speed(i) for i in range(n)]
    tot = sum(sp)
    return [max(1, round(model.batch_size * n * s / tot)) for s in sp]


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, k: int, balance: str,
           discipline: str, max_layers) -> Net:
    n = cluster.workers
    net = Net(f"cocod-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cluster, discipline)
    base = model if coarse else group_layers(model, max_layers, cluster.compute_cv)
    bs = batch_sizes(model, cluster, balance)
    ar_in, ar_out = {}, {}
    merge_t = duration(cluster.update_time(model.grad_bytes), cluster.compute_cv)
    for i in range(n):
        prof = base if bs[i] == base.batch_size else base.scaled(batch_size=bs[i])
        lp = local_loop(net, fab, prof, cluster, i, k, coarse=coarse)
        done = net.place(f"w{i}.ar.done", 1, worker=i).name  # nothing to wait for at first
        snap = net.place(f"w{i}.snap", worker=i).name
        net.transition(f"w{i}.merge", merge_t, inputs={lp.acc: k, done: 1},
                       outputs={lp.budget: k, snap: 1}, resources=[fab.gpu(i)],
                       tags={"worker": i, "kind": "compute", "phase": "merge", "step": False})
        ar_in[i], ar_out[i] = [snap], [done]
    allreduce(net, fab, cluster, "avg", model.grad_bytes, inputs=ar_in, outputs=ar_out,
              coarse=coarse)
    net.meta["batch_sizes"] = bs
    net.meta["cluster"] = cluster
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained CoCoD-SGD (one compute phase per step)."""
    return _build(model, cluster, coarse=True, **opts)


@register("cocod", summary="CoCoD-SGD: the all-reduce of round r overlaps the k local steps of "
          "round r+1", options=OPTIONS, coarse=build_coarse, lockstep=True,
          warmup=lambda cluster, o: 3 * o.get("k", 4))
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained CoCoD-SGD (per-layer compute, ring all-reduce step by step)."""
    return _build(model, cluster, coarse=False, **opts)
