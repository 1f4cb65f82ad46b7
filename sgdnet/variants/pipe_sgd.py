"""``pipe-sgd``: Pipe-SGD — the all-reduce of step ``t``'s gradients overlaps step ``t+1``'s
compute (a pipeline of ``width`` steps, 2 in the paper).

Modelling choices
-----------------
* Worker ``i``'s step ``t + width`` may start only when the all-reduce of its step ``t``
  gradients has completed (the update it applies is ``width - 1`` steps stale): a credit place
  ``w{i}.cred`` (coarse) or one per fusion bucket ``w{i}.cred.b{j}`` (fine) holds ``width``
  tokens, taken by the forward that first uses the bucket's layers and given back by the bucket's
  all-reduce.
* Fine nets: gradients are fused into buckets (``model.buckets(bucket_bytes)``, in backward
  order); a bucket's all-reduce (ring, step by step) starts as soon as every worker finished the
  backward of its layers (wait-free backprop); collectives run one at a time in the order they
  became ready (one collective stream). Coarse nets: one all-reduce of the whole gradient after
  the compute phase, with the closed-form ring time.
* ``balance="batch"`` (proportional sampling, as the CoCoD paper runs Pipe-SGD on a
  heterogeneous cluster), ``compression`` (Pipe-SGD's own experiments compress gradients;
  :mod:`.compression`) and ``comm_granularity`` are those of ``allreduce``.
* Deterministic homogeneous step time (coarse, or fine with one bucket):
  ``max(T_c, T_AR)`` for ``width >= 2``; ``width = 1`` is synchronous all-reduce without
  overlap, ``T_c + T_AR``.
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .compression import compressed_allreduce, tensor_sizes
from .compute import compute_chain, compute_phase, worker_profiles
from .fabric import Fabric
from .layers import group_layers, message_profile
from .options import (
    BALANCE,
    COLLECTIVE_OPTIONS,
    COMM_GRANULARITY,
    COMPRESSION,
    DISCIPLINE,
    MAX_LAYERS,
    Option,
    check_bytes,
    check_int,
)
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS"]

OPTIONS = (
    Option("width", 2, "an int >= 1: steps in flight (2 = Pipe-SGD; 1 = no overlap)",
           check_int(1, limit_name="max_count")),
    Option("bucket_bytes", 25e6, "a size (e.g. '25MB'), 0 (one bucket per layer) or "
           "float('inf') (one bucket): gradient fusion threshold of fine nets",
           check_bytes(allow_inf=True)),
    BALANCE,
    COMPRESSION,
    COMM_GRANULARITY,
    *COLLECTIVE_OPTIONS,
    DISCIPLINE,
    MAX_LAYERS,
)


def _build(model: ModelProfile, cluster: Cluster, *, coarse: bool, width: int, bucket_bytes,
           discipline: str, max_layers, balance: str = "none", compression=None,
           comm_granularity: str = "layer", **coll) -> Net:
    """``coll``: the collective options (:data:`.options.COLLECTIVE_OPTIONS`) of every
    all-reduce."""
    n = cluster.workers
    net = Net(f"pipe-sgd-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cluster, discipline)
    if coarse:
        profs, bs = worker_profiles(model, cluster, balance)
        grads, creds = {}, {}
        for i in range(n):
            start = net.place(f"w{i}.start", 1, worker=i).name
            cred = net.place(f"w{i}.cred", width, worker=i).name
            grad = net.place(f"w{i}.grad", worker=i).name
            compute_phase(net, fab, profs[i], cluster, i, inputs=[start, cred],
                          outputs=[start, grad])
            grads[i], creds[i] = [grad], [cred]
        compressed_allreduce(net, fab, cluster, model, "ar", model.grad_bytes,
                             tensor_sizes(model), compression, inputs=grads, outputs=creds,
                             coarse=True, **coll)
    else:
        prof, thr = message_profile(model, comm_granularity, bucket_bytes)
        prof = group_layers(prof, max_layers, cluster.compute_cv)
        profs, bs = worker_profiles(prof, cluster, balance)
        buckets = prof.buckets(thr)
        sizes = [sum(prof.layers[la].grad_bytes for la in b) for b in buckets]
        grads = {(i, j): net.place(f"w{i}.grad.b{j}", worker=i).name
                 for i in range(n) for j in range(len(buckets))}
        creds = {(i, j): net.place(f"w{i}.cred.b{j}", width, worker=i).name
                 for i in range(n) for j in range(len(buckets))}
        for i in range(n):
            fin: dict[int, list[str]] = {}
            bout: dict[int, list[str]] = {}
            for j, b in enumerate(buckets):
                lo = min(b)  # first layer of the bucket in forward order, last in backward
                fin.setdefault(lo, []).append(creds[i, j])
                bout.setdefault(lo, []).append(grads[i, j])
            compute_chain(net, fab, profs[i], cluster, i, fwd_inputs=fin, bwd_outputs=bout)
        for j in range(len(buckets)):
            compressed_allreduce(net, fab, cluster, prof, f"ar.b{j}", sizes[j],
                                 tensor_sizes(prof, buckets[j]), compression,
                                 inputs={i: [grads[i, j]] for i in range(n)},
                                 outputs={i: [creds[i, j]] for i in range(n)}, coarse=False,
                                 tags={"bucket": j}, **coll)
        net.meta["buckets"] = buckets
    net.meta["cluster"] = cluster
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained Pipe-SGD (compute phase, then one all-reduce, pipelined)."""
    return _build(model, cluster, coarse=True, **opts)


@register("pipe-sgd", summary="Pipe-SGD: all-reduce of step t overlaps compute of step t+1",
          options=OPTIONS, coarse=build_coarse, lockstep=True,
          warmup=lambda cluster, o: 4 * o.get("width", 2))
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained Pipe-SGD (per-layer compute, bucketed ring all-reduce)."""
    return _build(model, cluster, coarse=False, **opts)
