"""``zero``: DeepSpeed ZeRO data parallelism, stages 1, 2 and 3 (Rajbhandari et al., "ZeRO:
Memory Optimizations Toward Training Trillion Parameter Models", SC 2020), the fine net; the
coarse one is :func:`.sharded_coarse.build_coarse_zero`.

Stages 1 and 2
    Each worker runs forward ``0..L-1`` and backward ``L-1..0`` (:func:`.compute.compute_chain`).
    The gradients are fused into buckets in backward order by DeepSpeed's rule (a tensor that
    would push the open bucket past ``reduce_bucket_size`` closes it first:
    ``reduce_independent_p_g_buckets_and_remove_grads`` in
    ``deepspeed/runtime/zero/stage_1_and_2.py``; :meth:`ModelProfile.buckets` ``"horovod"``),
    ``bucket_bytes`` on the wire (default DeepSpeed's ``reduce_bucket_size`` and
    ``allgather_bucket_size``, 5e8 elements, at ``dtype``; the buckets are cut at ``dtype``
    whatever ``reduce_dtype``). Each bucket is reduce-scattered
    (every GPU keeps the reduced ``1/N`` it owns): stage 2 as soon as its last gradient is
    ready, during the backward pass; stage 1 after the whole backward pass (the issue's
    model: stage 1 partitions the optimizer states only, its gradients are reduced once the
    step's backward is done). With ``overlap_comm=True`` the reduce-scatters run on their own
    stream beside the backward pass; with ``False`` (DeepSpeed's default) a bucket's reduction
    runs on the compute stream, so the next backward waits for it (stage 2). Then each GPU
    steps its optimizer on its ``1/N`` (the profile's ``update_s / N``) and the updated
    parameters are all-gathered, bucket by bucket, before the next forward (DeepSpeed's
    ``step()`` returns after the all-gather). All collectives of a step run one at a time on
    the data-parallel communicator, in issue order (a sequence of places, as ``allreduce``'s
    buckets). Bytes per GPU: ``(N-1)/N S`` reduce-scattered and ``(N-1)/N S`` gathered, DDP's
    ``2 (N-1)/N S``. With ``reduce_dtype`` (DeepSpeed's ``communication_data_type``: the
    gradients' reduction in another dtype than the bf16/fp16 parameters, DeepSpeed
    configuration docs) the reduce-scatters move ``S`` scaled to it, the all-gathers ``S`` at
    ``dtype``.

Stage 3
    Parameters sharded too: the net of ``fsdp`` with ``sharding="full"``, one unit per
    transformer block, ``backward_prefetch="pre"`` and ``forward_prefetch=True`` (ZeRO-3
    prefetches the parameters of the modules ahead in its recorded trace, ``stage3_prefetch_
    bucket_size``): ``3 (N-1)/N S`` per GPU and step.

Closed form (deterministic, homogeneous, one ring of alike edges, one bucket, stage 1): a step
is ``F + B + 2 (N-1)(alpha + S/(N B)) + update_s / N``.
"""

from __future__ import annotations

import math

from ..net import Net
from ..workload import Cluster, ModelProfile
from .compute import compute_chain
from .fabric import Fabric
from .fsdp import fsdp_net
from .layers import group_layers
from .options import MAX_LAYERS, Option, check_bool, check_bytes, check_choice
from .registry import register
from .shard_collectives import shard_collective
from .sharded_coarse import (
    SHARDED_OPTIONS,
    build_coarse_zero,
    optimizer_step,
    reduce_factor,
    split_update,
    wire_factor,
)

__all__ = ["build_fine", "OPTIONS", "DEEPSPEED_BUCKET_ELEMENTS"]

#: DeepSpeed's default ``reduce_bucket_size`` and ``allgather_bucket_size``, in elements
#: (DeepSpeed configuration docs, "ZeRO optimizations": 5e8).
DEEPSPEED_BUCKET_ELEMENTS = 5e8

OPTIONS = (
    Option("stage", 2, "1 (optimizer states sharded), 2 (and gradients: reduce-scatter during "
           "backward) or 3 (and parameters: FSDP FULL_SHARD)", check_choice(1, 2, 3)),
    Option("bucket_bytes", None, "None (DeepSpeed's reduce_bucket_size and allgather_bucket_size, "
           "5e8 elements at dtype) or a size on the wire (e.g. '200MB'): the reduce-scatter and "
           "all-gather buckets", check_bytes(allow_none=True, positive=True, allow_inf=True)),
    Option("overlap_comm", False, "True/False: reduce the gradient buckets on their own stream "
           "beside the backward pass (True) or on the compute stream (False, DeepSpeed's "
           "default)", check_bool),
    *SHARDED_OPTIONS,
    MAX_LAYERS,
)


@register("zero", summary="DeepSpeed ZeRO stages 1/2/3: reduce-scatter of gradient buckets, "
          "the optimizer on the shard, all-gather of the parameters", options=OPTIONS,
          coarse=build_coarse_zero, lockstep=True, own_step_costs=True,
          warmup=lambda cluster, o: 3)
def build_fine(model: ModelProfile, cluster: Cluster, *, stage: int, bucket_bytes,
               overlap_comm: bool, dtype: str, reduce_dtype: str | None, optimizer: str,
               algorithm: str, channels: int, ring_form: str, discipline: str,
               max_layers) -> Net:
    """Fine ZeRO net (see the module docstring); ``optimizer`` is recorded, its step time is
    the profile's ``update_s``."""
    del optimizer
    if stage == 3:
        return fsdp_net(model, cluster, sharding="full", backward_prefetch="pre",
                        forward_prefetch=True, limit_all_gathers=True, wrap="block",
                        dtype=dtype, reduce_dtype=reduce_dtype, algorithm=algorithm,
                        channels=channels,
                        ring_form=ring_form, discipline=discipline, name="zero3-fine")
    n = cluster.workers
    net = Net(f"zero{stage}-fine")
    fab = Fabric(net, cluster, discipline)
    prof, upd = split_update(model)
    w = wire_factor(prof, dtype)
    rw = reduce_factor(prof, dtype, reduce_dtype)
    prof = group_layers(prof, max_layers, cluster.compute_cv)
    if bucket_bytes is None:
        from ..workload.compute import GRAD_DTYPES

        bucket_bytes = DEEPSPEED_BUCKET_ELEMENTS * GRAD_DTYPES[dtype]
    buckets = prof.buckets(bucket_bytes / w, "horovod")
    grads = [math.fsum(prof.layers[la].grad_bytes for la in b) for b in buckets]
    sizes = [g * w for g in grads]  # the all-gathers' bytes
    rsizes = [g * rw for g in grads]  # the reduce-scatters'
    B = len(buckets)
    C = 2 * B  # B reduce-scatters then B all-gathers, one at a time
    seq = [net.place(f"z.seq{c}", 1 if c == 0 else 0).name for c in range(C)]
    # one place per bucket that every worker's backward feeds (a barrier of one arc)
    grad = {b: net.place(f"z.b{b}.grad", bucket=b).name for b in range(B)}
    reduced = {i: net.place(f"w{i}.reduced", worker=i).name for i in range(n)}
    stepped = net.place("z.stepped").name
    params = {i: net.place(f"w{i}.params", 1, worker=i).name for i in range(n)}
    blocking = stage == 2 and not overlap_comm
    freed = {}
    for i in range(n):
        bout: dict[int, list[str]] = {}
        for b, lays in enumerate(buckets):
            at = min(lays) if stage == 2 else 0
            bout.setdefault(at, []).append(grad[b])
        ch = compute_chain(net, fab, prof, cluster, i, fwd_inputs={0: [params[i]]},
                           bwd_outputs=bout)
        if blocking:  # the reduction on the compute stream: the next backward waits for it
            for b, lays in enumerate(buckets):
                if min(lays) > 0:
                    freed[i, b] = net.place(f"w{i}.b{b}.freed", worker=i).name
                    net.transitions[ch.bwd[min(lays) - 1]].inputs[freed[i, b]] = 1
    net.touch()
    for b in range(B):
        outs = {i: [freed[i, b]] for i in range(n) if (i, b) in freed}
        if b == B - 1:
            outs = {i: [*outs.get(i, []), reduced[i]] for i in range(n)}
        shard_collective(net, fab, cluster, f"z.rs.b{b}", "reduce_scatter", rsizes[b],
                         inputs={}, outputs=outs, before={grad[b]: n, seq[b]: 1},
                         after=[seq[b + 1]], tags={"bucket": b},
                         algorithm=algorithm, channels=channels, ring_form=ring_form)
    for i in range(n):
        optimizer_step(net, fab, cluster, i, upd / n, inputs=[reduced[i]], outputs=[stepped])
    for b in range(B):  # the updated parameters, in forward order
        outs = {i: [params[i]] for i in range(n)} if b == B - 1 else {}
        shard_collective(net, fab, cluster, f"z.ag.b{b}", "all_gather", sizes[B - 1 - b],
                         inputs={}, outputs=outs,
                         before={stepped: n, seq[B + b]: 1} if b == 0 else [seq[B + b]],
                         after=[seq[(B + b + 1) % C]], tags={"bucket": B - 1 - b},
                         algorithm=algorithm, channels=channels, ring_form=ring_form)
    net.meta.update(cluster=cluster, buckets=buckets, bucket_bytes=sizes, reduce_bytes=rsizes,
                    stage=stage)
    return net
