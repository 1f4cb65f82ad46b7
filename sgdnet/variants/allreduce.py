"""``allreduce``: decentralised data-parallel SGD with ring (or tree) all-reduce.

Fine-grained net
    Each worker runs forward ``0..L-1`` and backward ``L-1..0`` on its GPU
    (:func:`.compute.compute_chain`). Gradients are fused into buckets in backward order
    (:meth:`ModelProfile.buckets`, PyTorch-DDP rule, threshold ``bucket_bytes``). With
    ``overlap=True`` a bucket's all-reduce starts as soon as every worker finished the backward
    of the bucket's last layer, so communication overlaps the rest of the backward pass; with
    ``overlap=False`` every bucket waits for the whole backward. Rings of more than
    ``LOOP_ROUNDS`` rounds are streamed, one flow of ``2(m-1)/m`` of the message per ring
    edge (``ring_form="pipelined"``, as NCCL pipelines a ring), so the net and the events of
    a step grow as O(workers x buckets), not O(workers^2 x buckets). All-reduces run one at a time,
    in bucket order (one collective stream, as NCCL runs the collectives of one communicator);
    the order is enforced with a ring of sequence places, so the net stays a timed event graph.
    Each all-reduce is :func:`.collectives.allreduce`: ring (``2(n-1)`` dependent rounds of
    ``S/n`` bytes from each worker to its successor, over the sender's uplink and the
    receiver's downlink), binary tree (reduce up, broadcast down) or, on a Cluster topology,
    hierarchical (intra-node reduce-scatter, inter-node ring all-reduce of ``1/g`` per local
    rank, intra-node all-gather; ``chunks`` pipelines the three phases). When
    ``cluster.update_time`` of a bucket is positive, each worker then applies the averaged
    bucket on its GPU (``kind="update"``). The next forward of layer ``l`` waits for its bucket.

Framework engines (issue #36)
    ``fusion="horovod"`` buckets by Horovod's rule; ``first_bucket_bytes`` gives PyTorch DDP's
    smaller first bucket (:func:`fusion_buckets`); ``cycle_time`` fuses the gradients that
    become ready within one of Horovod's cycles and delays each fused all-reduce to its cycle
    tick (:func:`cycle_buckets`, on the profile's mean times). ``algorithm="nccl"`` and
    ``channels="auto"`` give each bucket's all-reduce the algorithm, protocol and channels
    NCCL's tuning model picks for its size (:func:`sgdnet.workload.nccl.nccl_plan`).
    Framework defaults: :mod:`sgdnet.workload.frameworks`.

Coarse-grained net
    Compute phase (profile totals), then one all-reduce of the whole model with the closed-form
    time (:func:`sgdnet.workload.ring_allreduce_time` or ``tree_allreduce_time``) holding each
    worker's NICs, then the update; no overlap (TPDS 2022). ``"hierarchical"`` has no single
    closed form on a shared topology, so its coarse net runs its three phases as pipelined
    rings (one flow per ring edge, so shared NICs and spines still congest).

Options of issue #16
    ``balance="batch"``: proportional sampling (worker ``i``'s batch ``B n s_i / sum(s)``,
    :func:`.compute.worker_profiles`), so the slowest worker no longer sets the pace; the
    deterministic coarse step is ``T_c n / sum(s) + T_AR`` and throughput is counted in samples.
    ``compression``: top-k (all-gather), PowerSGD (all-reduces of P and Q) or 1-bit (all-reduce
    of 1/32), with compress / decompress work on the GPU (:mod:`.compression`).
    ``comm_granularity``: what ``bucket_bytes`` fuses (:func:`.layers.message_profile`).

Closed form (deterministic, homogeneous, one bucket, no overlap, no update cost): a step takes
``T_fwd+bwd + 2(n-1)(alpha + M/(n B))`` exactly (ring). Bucketing with overlap is never
slower. Without update cost the fine net's resources are never contended (each worker's
compute is a chain, each link carries one collective at a time), so
:func:`without_resources` of it is an event graph with the same timing, solvable
exactly by :func:`sgdnet.analysis.cycle_time`.
"""

from __future__ import annotations

import math

from .. import units
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from ..workload.layer import _bucket
from .compression import compressed_allreduce, tensor_sizes
from .compute import compute_chain, compute_phase, worker_profiles
from .durations import duration
from .fabric import Fabric
from .layers import group_layers, merge_groups, message_profile
from .options import (
    ALLREDUCE_ALGORITHM,
    BALANCE,
    CHANNELS,
    CHUNKS,
    COMM_GRANULARITY,
    COMPRESSION,
    DISCIPLINE,
    MAX_LAYERS,
    RING_FORM,
    Option,
    check_bool,
    check_bytes,
    check_choice,
    check_int,
)
from .registry import register

__all__ = ["build_fine", "build_coarse", "without_resources", "fuse_buckets", "fusion_buckets",
           "cycle_buckets", "OPTIONS"]


def _check_channels(v):
    """``channels``: an integer >= 1 or ``"auto"``."""
    return v if v == "auto" else CHANNELS.check(v)


def _check_seconds(v):
    """A duration >= 0 (``"1ms"`` or seconds; :func:`sgdnet.units.seconds` checks both)."""
    return units.seconds(v, what="cycle_time")


OPTIONS = (
    Option("algorithm", ALLREDUCE_ALGORITHM.default, ALLREDUCE_ALGORITHM.doc + "; 'nccl': each "
           "all-reduce gets ring or dbtree as NCCL's tuning model picks it for its size and the "
           "cluster, with its protocol's wire bytes (LL 2x, LL128 128/120) and base latency "
           "(sgdnet.workload.nccl)",
           check_choice("ring", "tree", "dbtree", "hierarchical", "nccl")),
    Option("bucket_bytes", 25e6, "a size (e.g. '25MB'; PyTorch DDP's bucket_cap_mb=25 is 25 MiB = "
           "26214400, its smaller first bucket is first_bucket_bytes), 0 (one bucket per layer) "
           "or float('inf') (one bucket): gradient fusion threshold of fine nets",
           check_bytes(allow_inf=True)),
    Option("fusion", "ddp", "'ddp' (a bucket closes once it holds bucket_bytes, PyTorch DDP's "
           "rule) or 'horovod' (a tensor that would push the bucket above bucket_bytes opens a "
           "new one, Horovod's tensor fusion): ModelProfile.buckets' policy",
           check_choice("ddp", "horovod")),
    Option("first_bucket_bytes", 0.0, "a size: PyTorch DDP's first bucket (the last layers' "
           "gradients) closes at this size instead of bucket_bytes "
           "(torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB); 0: no smaller first bucket",
           check_bytes()),
    Option("cycle_time", 0.0, "seconds (e.g. '1ms'), Horovod's HOROVOD_CYCLE_TIME: every cycle "
           "the tensors that became ready since the last one are fused (up to bucket_bytes, "
           "fusion='horovod') and all-reduced, so a bucket waits for the next cycle tick "
           "(cycle_buckets, on the profile's mean times); 0: fused statically by bucket_bytes, "
           "started at once", _check_seconds),
    Option("inflight", 1, "an integer >= 1: all-reduces in flight at once, started in bucket "
           "order (fine nets): bucket b begins once bucket b - inflight has ended. PyTorch's "
           "ProcessGroupGloo runs its work queue on 2 threads by default "
           "(ProcessGroupGloo._Options()._threads == 2), so gloo has 2 collectives in flight; "
           "NCCL runs a process group's collectives one after another on its stream (1)",
           check_int(1, limit_name="max_count")),
    Option("overlap", True, "True/False: start a bucket's all-reduce as soon as its gradients "
           "are ready (True) or after the whole backward pass (False)", check_bool),
    CHUNKS,
    Option("channels", CHANNELS.default, CHANNELS.doc + "; 'auto': NCCL's channels for each "
           "message, up to the NICs of a node (sgdnet.workload.nccl.nccl_plan)", _check_channels),
    BALANCE,
    COMPRESSION,
    COMM_GRANULARITY,
    RING_FORM,
    DISCIPLINE,
    MAX_LAYERS,
    Option("fuse_layers", False, "True/False: merge the layers of each gradient bucket into one "
           "forward and one backward transition per worker (fine nets): a bucket's layers run "
           "back to back on the GPU between the same two events (its parameters arrive together, "
           "its gradients are ready after its last backward), so without compute noise, GPU-side "
           "work between layers (updates, compression, per-byte CPU costs) or Markov stragglers "
           "the times are those of the per-layer "
           "net (tests/test_fuse_layers.py); with noise the merged layers keep the mean and "
           "variance of their sum. Per-layer trace entries are lost", check_bool),
)


def fuse_buckets(prof: ModelProfile, buckets: list[list[int]], default_cv: float
                 ) -> tuple[ModelProfile, list[list[int]]]:
    """``prof`` with each bucket merged into one layer (:func:`.layers.merge_groups`) and the
    buckets of the merged profile (one layer each, in the same ready order)."""
    fwd = sorted((sorted(b) for b in buckets), key=lambda g: g[0])
    for g in fwd:
        if g[-1] - g[0] != len(g) - 1:
            raise VariantError(f"fuse_layers=True merges a bucket's consecutive layers, but a "
                               f"bucket holds layers {g}; pass fuse_layers=False")
    merged = merge_groups(prof, fwd, default_cv, "one layer per gradient bucket")
    first = {g[0]: k for k, g in enumerate(fwd)}
    return merged, [[first[min(b)]] for b in buckets]


def fusion_buckets(prof: ModelProfile, threshold: float, fusion: str = "ddp",
                   first_bytes: float = 0.0) -> list[list[int]]:
    """The gradient buckets of ``prof`` (:meth:`ModelProfile.buckets` with ``fusion`` as the
    policy), the first of them closed at ``first_bytes`` when that is > 0 (PyTorch DDP: its
    bucket size limits are ``[first_bucket_bytes, bucket_cap]``, the first limit for the first
    bucket filled, in reverse parameter order; ``fusion="ddp"`` only)."""
    if first_bytes <= 0 or threshold == 0 or prof.n_layers == 1:
        return prof.buckets(threshold, fusion)
    if fusion != "ddp":
        raise VariantError(f"first_bucket_bytes={first_bytes:g} is PyTorch DDP's first bucket; "
                           f"with fusion={fusion!r} pass first_bucket_bytes=0")
    order = prof.backward_order()
    sizes = [prof.layers[i].grad_bytes for i in order]
    head = _bucket(first_bytes, "ddp", sizes)[0]
    k = len(head)
    rest = _bucket(threshold, "ddp", sizes[k:]) if k < len(sizes) else []
    return [[order[j] for j in head]] + [[order[k + j] for j in g] for g in rest]


def cycle_buckets(prof: ModelProfile, cycle: float, threshold: float, overlap: bool = True
                  ) -> tuple[list[list[int]], list[float]]:
    """Horovod's tensor fusion on its background cycle, on the profile's mean times.

    Horovod's background thread wakes every ``cycle`` seconds (``HOROVOD_CYCLE_TIME``), takes
    the tensors that became ready since its last cycle and all-reduces them fused, cut where a
    tensor would push a buffer above ``threshold`` (``HOROVOD_FUSION_THRESHOLD``,
    :meth:`ModelProfile.buckets` ``policy="horovod"``) (horovod ``docs/tensor-fusion.rst``,
    ``RunLoopOnce`` in ``horovod/common/operations.cc``). With the cycle started with the step,
    layer ``l``'s gradient is ready at ``T_fwd + sum of the backward times of layers L-1..l``
    (all at the end of the backward pass with ``overlap=False``) and is reduced at the next
    multiple of ``cycle``.

    Returns
    -------
    (buckets, delays)
        The buckets in ready order (layer indices in backward order) and, for each, the seconds
        from its last gradient being ready to its cycle tick.
    """
    order = prof.backward_order()
    t = prof.forward_s
    ready = []
    for i in order:
        t += prof.layers[i].backward_s
        ready.append(t)
    if not overlap:
        ready = [t] * len(order)
    ticks = [math.ceil(r / cycle - 1e-9) for r in ready]
    buckets: list[list[int]] = []
    delays: list[float] = []
    k = 0
    while k < len(order):
        j = k
        while j < len(order) and ticks[j] == ticks[k]:
            j += 1
        for g in _bucket(threshold, "horovod", [prof.layers[order[m]].grad_bytes
                                                for m in range(k, j)]):
            buckets.append([order[k + m] for m in g])
            delays.append(max(0.0, ticks[k] * cycle - ready[k + g[-1]]))
        k = j
    return buckets, delays


def _update(net: Net, fab: Fabric, cluster: Cluster, i: int, name: str, nbytes: float,
            src: str, outs: list[str], modulator: str | None) -> None:
    """Worker ``i`` applies an averaged tensor of ``nbytes`` on its GPU: ``src`` -> ``outs``."""
    net.transition(name, duration(cluster.update_time(nbytes), cluster.compute_cv),
                   inputs={src: 1}, outputs={p: 1 for p in outs}, resources=[fab.gpu(i)],
                   modulator=modulator,
                   tags={"worker": i, "kind": "update", "role": "apply", "step": False})


def build_coarse(model: ModelProfile, cluster: Cluster, *, algorithm: str, discipline: str,
                 chunks: int = 1, channels: int = 1, bucket_bytes=None, overlap=None, inflight: int = 1,
                 max_layers=None, balance: str = "none", compression=None,
                 comm_granularity: str = "layer", ring_form: str = "auto",
                 fuse_layers: bool = False, fusion: str = "ddp", first_bucket_bytes: float = 0.0,
                 cycle_time: float = 0.0) -> Net:
    """Coarse-grained all-reduce SGD: compute phase, all-reduce of the model, update (the
    fusion options of fine nets do not apply: one all-reduce of the whole model)."""
    n = cluster.workers
    net = Net(f"allreduce-{algorithm}-coarse")
    fab = Fabric(net, cluster, discipline)
    upd = cluster.update_time(model.grad_bytes) > 0
    profs, bs = worker_profiles(model, cluster, balance)
    grads, backs = {}, {}
    for i in range(n):
        start = net.place(f"w{i}.start", 1, worker=i).name
        grad = net.place(f"w{i}.grad", worker=i).name
        compute_phase(net, fab, profs[i], cluster, i, inputs=[start], outputs=[grad])
        grads[i] = [grad]
        if upd:
            avg = net.place(f"w{i}.avg", worker=i).name
            _update(net, fab, cluster, i, f"w{i}.update", model.grad_bytes, avg, [start],
                    net.transitions[f"w{i}.compute"].modulator)
            backs[i] = [avg]
        else:
            backs[i] = [start]
    compressed_allreduce(net, fab, cluster, model, "ar", model.grad_bytes, tensor_sizes(model),
                         compression, inputs=grads, outputs=backs, coarse=True, stream=None,
                         algorithm=algorithm, chunks=chunks, channels=channels, ring_form=ring_form)
    net.meta["buckets"] = [list(range(model.n_layers - 1, -1, -1))]
    net.meta["cluster"] = cluster
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net


@register("allreduce", summary="decentralised SGD with ring/tree all-reduce, DDP-style "
          "gradient buckets overlapping backward", options=OPTIONS, coarse=build_coarse,
          lockstep=True)
def build_fine(model: ModelProfile, cluster: Cluster, *, algorithm: str, bucket_bytes,
               overlap: bool, discipline: str, max_layers, chunks: int = 1,
               channels: int = 1, balance: str = "none", compression=None,
               comm_granularity: str = "layer", ring_form: str = "auto",
               fuse_layers: bool = False, fusion: str = "ddp", first_bucket_bytes: float = 0.0,
               cycle_time: float = 0.0, inflight: int = 1) -> Net:
    """Fine-grained all-reduce SGD: per-layer compute, bucketed all-reduces, per-bucket update.

    Buckets: :func:`fusion_buckets` (``fusion``, ``first_bucket_bytes``) or, with
    ``cycle_time > 0``, :func:`cycle_buckets`, each bucket's all-reduce then waiting for its
    cycle tick (a deterministic delay per worker after its gradients are ready)."""
    n = cluster.workers
    net = Net(f"allreduce-{algorithm}-fine")
    fab = Fabric(net, cluster, discipline)
    prof, thr = message_profile(model, comm_granularity, bucket_bytes)
    prof = group_layers(prof, max_layers, cluster.compute_cv)
    delays: list[float] = []
    if cycle_time > 0:
        if fuse_layers:
            raise VariantError("cycle_time > 0 groups tensors by the cycle they become ready in, "
                               "which fuse_layers=True cannot merge; pass fuse_layers=False")
        buckets, delays = cycle_buckets(prof, cycle_time, thr, overlap)
    else:
        buckets = fusion_buckets(prof, thr, fusion, first_bucket_bytes)
    if fuse_layers:
        prof, buckets = fuse_buckets(prof, buckets, cluster.compute_cv)
    profs, bs = worker_profiles(prof, cluster, balance)
    L = prof.n_layers
    sizes = [math.fsum(prof.layers[la].grad_bytes for la in b) for b in buckets]
    B = len(buckets)
    keys = [(i, l) for i in range(n) for l in range(L)]
    param = dict(zip(keys, net.add_places((f"w{i}.l{l}.param", 1, {"worker": i, "layer": l})
                                          for i, l in keys)))
    keys = [(i, b) for i in range(n) for b in range(B)]
    grad = dict(zip(keys, net.add_places((f"w{i}.b{b}.grad", 0, {"worker": i, "bucket": b})
                                         for i, b in keys)))
    # ``inflight`` collectives at a time, begun in bucket order: sequence place b enables bucket
    # b's begin, bucket b's end marks the place of bucket b + k (k = inflight, at most B)
    k = min(int(inflight), B)
    seq = [net.place(f"ar.seq{b}", 1 if b < k else 0).name for b in range(B)]
    chains = []
    for i in range(n):
        bout: dict[int, list[str]] = {}
        for b, layers in enumerate(buckets):
            at = min(layers) if overlap else 0  # the bucket's last backward, or the step's
            bout.setdefault(at, []).append(grad[i, b])
        fin = {l: [param[i, l]] for l in range(L)}
        chains.append(compute_chain(net, fab, profs[i], cluster, i, fwd_inputs=fin,
                                    bwd_outputs=bout))
    for b, layers in enumerate(buckets):
        outs: dict[int, list[str]] = {}
        for i in range(n):
            dst = [param[i, l] for l in sorted(layers)]
            if cluster.update_time(sizes[b]) > 0:
                avg = net.place(f"w{i}.b{b}.avg", worker=i, bucket=b).name
                _update(net, fab, cluster, i, f"w{i}.update.b{b}", sizes[b], avg, dst,
                        net.transitions[chains[i].fwd[0]].modulator)
                outs[i] = [avg]
            else:
                outs[i] = dst
        ins = {i: [grad[i, b]] for i in range(n)}
        if delays and delays[b] > 0:  # Horovod: wait for the next cycle tick
            for i in range(n):
                tick = net.place(f"w{i}.b{b}.tick", worker=i, bucket=b).name
                net.transition(f"w{i}.b{b}.cycle", delays[b], inputs={grad[i, b]: 1},
                               outputs={tick: 1}, servers=math.inf,
                               tags={"worker": i, "kind": "sync", "step": False, "bucket": b})
                ins[i] = [tick]
        ins[0] = [*ins[0], seq[b]]
        outs[0] = [*outs[0], seq[(b + k) % B]]
        compressed_allreduce(net, fab, cluster, prof, f"ar.b{b}", sizes[b],
                             tensor_sizes(prof, layers), compression, inputs=ins, outputs=outs,
                             coarse=False, stream=None, tags={"bucket": b},
                             algorithm=algorithm, chunks=chunks, channels=channels, ring_form=ring_form)
    net.meta["buckets"] = buckets
    net.meta["bucket_bytes"] = sizes
    net.meta["cluster"] = cluster
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net


def without_resources(net: Net) -> Net:
    """A copy of ``net`` with every resource removed.

    Only meaningful where the net's own dependencies already serialise each resource's users
    (e.g. ring all-reduce nets: a worker's compute chain, and its sends, are totally ordered by
    places), so timing is unchanged and the copy is a timed event graph that
    :func:`sgdnet.analysis.cycle_time` can solve exactly.
    """
    links = [r.name for r in net.resources.values() if r.discipline == "flow"]
    if links:
        raise VariantError(
            f"net {net.name!r} moves its data as flows over links ({links[:3]}...): a transfer's "
            "duration is its bytes and its rate comes from the links, so they cannot be dropped; "
            "build it with discipline='fifo' for an event graph"
        )
    looped = [t.name for t in net.transitions.values() if t.inhibitors]
    if looped:
        raise VariantError(
            f"net {net.name!r} has looped rings ({looped[:2]}...: a round counter with inhibitor "
            "and weighted arcs), so it is no event graph; build it with ring_form='unrolled'"
        )
    out = net.copy(name=net.name + ":no-resources")
    for t in out.transitions.values():
        t.resources = ()
    out.resources = {}
    return out
