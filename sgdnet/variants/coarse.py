"""The coarse model with heuristics (``granularity="coarse+"``): a step is still a handful of
whole-model phases, but three numbers about the model put back what the plain coarse model
(compute, then communicate, no overlap) leaves out. Reasoning and accuracy: ``docs/coarse.md``.

Heuristics (:class:`Heuristics`, closed forms :func:`overlap_fraction`, :func:`tail_fraction`,
:func:`pull_lag`, :func:`exposed_comm`)
    * ``overlap`` (phi): the fraction of the backward pass still to run when the first
      gradient message (PS: the last layer's tensor; all-reduce: the first DDP bucket) is
      ready. Communication hides behind it. One time stamp of a single-worker run (the first
      gradient hook) measures it.
    * ``tail`` (tau): the fraction of the gradient bytes in the last message, ready only when
      the backward pass ends (PS: layer 0's tensor; all-reduce: the last bucket). Its
      communication can never hide. Tensor sizes (and the bucket cap) give it; no timing.
    * ``pull_lag`` (rho, PS only): the fraction of the model whose pull is still running after
      the last push ends, when every tensor is pulled as soon as it is pushed over full-duplex
      links (a max-plus recursion over the tensor sizes in push order). Tensor sizes give it.
    * ``messages`` (K): how many messages a step sends (all-reduce buckets); each all-reduce
      pays the collective's latency term once, so the coarse net charges ``K`` of them.
    * with flows and per-byte CPU costs in the cluster, a ring all-reduce's CPU work
      (:func:`ring_cpu_time`), which the closed-form coarse collective leaves out.
    * noise: a coarse message's CV is ``comm_cv / sqrt(m)`` for the ``m`` transfers it stands
      for (:func:`aggregate_noise`), as the coarse compute phase has the CV of its layers' sum.

Net (per worker ``i``)
    ``w{i}.compute`` (forward plus the first ``1 - phi`` of the backward) releases the *early*
    message, ``(1 - tau) M`` bytes; ``w{i}.tail`` (the last ``phi`` of the backward, on the same
    GPU, ``step=True``) then releases the *late* message, ``tau M`` bytes. All-reduce: two
    coarse all-reduces (:func:`.collectives.allreduce`), the late one after the early one; the
    next step waits for both. Parameter server: push of the early message, update, pull of
    ``min(rho, 1 - tau) M`` bytes (the part of its pull not hidden behind the pushes), and push,
    update and pull of the late message; all transfers are flows (or NIC transitions) of the
    cluster's network, so PS incast and fair sharing among ``n`` concurrent pushes come from
    the net, not from a formula. Alone on its links a step takes
    ``F + B + exposed_comm(C, B, phi, tau)``.

Supported variants: ``sync-ps``, ``async-ps``, ``allreduce`` (their options apply;
``channels`` must stay 1, as for the plain coarse all-reduce, except on multi-GPU nodes, where
a coarse ring's channels are pipelined rings and NCCL's tree is the fine nets' streamed tree).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile, ring_allreduce_time, tree_allreduce_time
from .collectives import PSExchange, allreduce, ps_cluster
from .compute import apply_straggler
from .durations import duration
from .fabric import Fabric
from .layers import compute_cv, group_layers
from .options import BALANCE, COMPRESSION
from .parameter_server import _chunks
from .rings import multi_gpu_nodes
from .trees import depth_latency, node_tree

__all__ = ["COARSE_PLUS", "SUPPORTED", "Heuristics", "overlap_fraction", "tail_fraction",
           "pull_lag", "exposed_comm", "ring_cpu_time", "aggregate_noise", "heuristics",
           "build"]

#: The granularity name of the coarse model with heuristics.
COARSE_PLUS = "coarse+"
#: Variants with a coarse+ net.
SUPPORTED = ("sync-ps", "async-ps", "allreduce")


@dataclass(frozen=True)
class Heuristics:
    """The parameters of a coarse+ net (see the module docstring).

    Attributes
    ----------
    overlap : float
        phi in [0, 1]: fraction of the backward pass after the first gradient message is ready.
    tail : float
        tau in [0, 1]: fraction of the gradient bytes in the last message.
    pull_lag : float
        rho in [0, 1]: fraction of the model whose pull is exposed after the last push (PS).
    messages : int
        Messages per step (all-reduce buckets; PS tensors), >= 1.
    """

    overlap: float
    tail: float
    pull_lag: float = 0.0
    messages: int = 1

    def __post_init__(self) -> None:
        for f in ("overlap", "tail", "pull_lag"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
                raise VariantError(f"Heuristics.{f}={v!r} must be a number in [0, 1]")
        if isinstance(self.messages, bool) or not isinstance(self.messages, int) \
                or self.messages < 1:
            raise VariantError(f"Heuristics.messages={self.messages!r} must be an integer >= 1")


def overlap_fraction(backward_s: Sequence[float], first: int) -> float:
    """phi: the share of the backward pass left once its first ``first`` operations ran.

    ``backward_s`` lists the backward times in execution order (last layer first); the first
    gradient message is ready after ``first`` of them. ``1 - sum(backward_s[:first]) /
    sum(backward_s)``; 0 when the backward pass takes no time.
    """
    tot = math.fsum(backward_s)
    if tot <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - math.fsum(backward_s[:first]) / tot))


def tail_fraction(message_bytes: Sequence[float]) -> float:
    """tau: the last message's share of the bytes (``message_bytes`` in sending order); 1 for
    a model without bytes (everything waits for the end of the backward pass)."""
    tot = math.fsum(message_bytes)
    return 1.0 if tot <= 0 else message_bytes[-1] / tot


def pull_lag(sizes: Sequence[float]) -> float:
    """rho: the pull time left after the last push ends, over the time of the model's push.

    Tensors of ``sizes`` bytes (push order) are pushed back to back; tensor ``k``'s pull (same
    bandwidth, the other direction of a full-duplex link) starts when its push has ended and the
    previous pull is done::

        push_end[k] = sizes[0] + ... + sizes[k]
        pull_end[k] = max(push_end[k], pull_end[k-1]) + sizes[k]
        rho = (pull_end[K-1] - push_end[K-1]) / sum(sizes)

    So ``rho`` lies between ``sizes[-1] / M`` (the last tensor's pull, always exposed) and 1
    (one tensor). Bandwidth cancels out: ``rho`` depends on the tensor sizes only.
    """
    tot = math.fsum(sizes)
    if tot <= 0:
        return 0.0
    push = pull = 0.0
    for s in sizes:
        push += s
        pull = max(push, pull) + s
    return min(1.0, (pull - push) / tot)


def exposed_comm(comm_s: float, backward_s: float, overlap: float, tail: float) -> float:
    """The communication time a coarse+ step does not hide, alone on its links::

        max(0, (1 - tau) C - phi B) + tau C

    The early ``(1 - tau) C`` runs beside the last ``phi B`` of the backward pass; the late
    ``tau C`` starts when both are done. It is the larger of the two lines of the fluid
    pipeline (first message ready at ``(1 - phi) B``; last message at ``B``), exact at both
    ends (``C`` large, ``C`` small).
    """
    return max(0.0, (1.0 - tail) * comm_s - overlap * backward_s) + tail * comm_s


def ring_cpu_time(nbytes: float, n: int, cluster: Cluster) -> float:
    """The CPU time on one worker's critical path of a ring all-reduce of ``nbytes`` among
    ``n`` workers with the cluster's per-byte costs (flows)::

        2 (n-1) (S/n) (send + recv) + (n-1) (S/n) reduce

    Each of the ``2(n-1)`` rounds sends ``S/n`` bytes after the sender's CPU work and hands
    them to the receiver's CPU work before the next round; the first ``n-1`` rounds reduce.
    The coarse all-reduce's closed form moves bytes only, so coarse+ adds this.
    """
    if n <= 1 or nbytes <= 0:
        return 0.0
    c = nbytes / n
    return (2 * (n - 1) * c * (cluster.send_s_per_byte + cluster.recv_s_per_byte)
            + (n - 1) * c * cluster.reduce_s_per_byte)


def aggregate_noise(cluster: Cluster, transfers: int) -> Cluster:
    """``cluster`` with ``comm_cv / sqrt(transfers)``: the CV of one coarse message that stands
    for ``transfers`` independent transfers of equal mean on a worker's chain (the sum of ``m``
    such transfers has ``1/sqrt(m)`` of their CV), as the coarse compute phase takes the CV of the
    sum of its layers. PS: a push and a pull per tensor (``2K``); all-reduce: one per bucket
    (``K``), not per round: a ring's rounds wait for each other across workers, so their noise
    does not average out the way independent messages' does."""
    if cluster.comm_cv <= 0 or transfers <= 1:
        return cluster
    return cluster.replace(comm_cv=cluster.comm_cv / math.sqrt(transfers))


def _ps_heuristics(prof: ModelProfile, partition_bytes: float | None, timing: bool
                   ) -> Heuristics:
    order = list(range(prof.n_layers - 1, -1, -1))  # push order: last layer first
    sizes = [b for l in order for _, b in _chunks([(0, prof.layers[l].grad_bytes)],
                                                  partition_bytes)]
    with_bytes = [l for l in order if prof.layers[l].grad_bytes > 0]
    first = order.index(with_bytes[0]) + 1 if with_bytes else len(order)
    bwd = [prof.layers[l].backward_s if timing else 1.0 for l in order]
    nz = [s for s in sizes if s > 0] or [0.0]
    return Heuristics(overlap_fraction(bwd, first), tail_fraction(nz), pull_lag(nz), len(nz))


def _ar_heuristics(prof: ModelProfile, bucket_bytes: float, overlap: bool, timing: bool
                   ) -> Heuristics:
    buckets = prof.buckets(bucket_bytes)  # backward order
    sizes = [math.fsum(prof.layers[la].grad_bytes for la in b) for b in buckets]
    if not overlap:
        return Heuristics(0.0, 1.0, 0.0, len(buckets))
    order = list(range(prof.n_layers - 1, -1, -1))
    first = max(order.index(la) for la in buckets[0]) + 1
    bwd = [prof.layers[l].backward_s if timing else 1.0 for l in order]
    return Heuristics(overlap_fraction(bwd, first), tail_fraction(sizes), 0.0, len(buckets))


def heuristics(variant: str, model: ModelProfile, cluster: Cluster, *, timing: bool = True,
               **opts) -> Heuristics:
    """The heuristics of ``variant`` (resolved options ``opts``) from a layer profile.

    ``timing=False`` uses the layers' sizes and order only, taking every layer's backward to
    last as long (phi from layer counts): what a user with tensor shapes but no per-layer timing
    has. A profile with one layer gives ``phi = 0``, ``tau = 1``: the plain coarse net. Give
    measured values with :class:`Heuristics` to :func:`build` instead.
    """
    prof = group_layers(model, opts.get("max_layers"), cluster.compute_cv)
    if variant == "allreduce":
        bb = opts.get("bucket_bytes", 25e6)
        return _ar_heuristics(prof, math.inf if bb == math.inf else bb,
                              bool(opts.get("overlap", True)), timing)
    if variant in ("sync-ps", "async-ps"):
        return _ps_heuristics(prof, opts.get("partition_bytes"), timing)
    raise VariantError(f"granularity={COARSE_PLUS!r} exists for {list(SUPPORTED)}; variant "
                       f"{variant!r} has none: use granularity='fine' or 'coarse'")


def _split_cv(cv: float, total: float, part: float) -> float:
    """CV of a part of a sum so that the parts' variances add up to the total's (variance
    proportional to the mean)."""
    return 0.0 if part <= 0 or total <= 0 else cv * math.sqrt(total / part)


def _compute(net: Net, fab: Fabric, model: ModelProfile, cl: Cluster, i: int, h: Heuristics,
             ins: list[str], early: list[str], late: list[str]) -> None:
    """``w{i}.compute`` (F + (1 - phi) B) -> ``early``; ``w{i}.tail`` (phi B) -> ``late``."""
    sp = cl.speed(i)
    tot = model.compute_s / sp
    tail = h.overlap * model.backward_s / sp
    head = tot - tail
    cv = compute_cv(model, cl.compute_cv)
    gpu = fab.gpu(i)
    go = net.place(f"w{i}.tail.go", worker=i).name
    net.transition(f"w{i}.compute", duration(head, _split_cv(cv, tot, head)),
                   inputs={p: 1 for p in ins}, outputs={p: 1 for p in [*early, go]},
                   resources=[gpu], tags={"worker": i, "kind": "compute", "step": False})
    net.transition(f"w{i}.tail", duration(tail, _split_cv(cv, tot, tail)), inputs={go: 1},
                   outputs={p: 1 for p in late}, resources=[gpu],
                   tags={"worker": i, "kind": "compute", "phase": "bwd", "step": True})
    apply_straggler(net, cl, i, f"w{i}.compute", [f"w{i}.compute", f"w{i}.tail"])


def _latency_term(cl: Cluster, fab: Fabric, algorithm: str) -> float:
    """One all-reduce's latency term (its time for zero bytes) among the cluster's workers; for
    NCCL's multi-node tree (``"dbtree"`` on multi-GPU nodes) its deepest path, up and down."""
    n = cl.workers
    if n == 1 or algorithm == "hierarchical":
        return 0.0
    if algorithm == "dbtree" and multi_gpu_nodes(cl):
        return max(2 * depth_latency(fab, node_tree(cl, t)) for t in (0, 1))
    closed = ring_allreduce_time if algorithm == "ring" else tree_allreduce_time
    lat = max(fab.latency(("worker", i), ("worker", (i + 1) % n)) for i in range(n))
    return closed(0.0, n, 1.0, lat)


def _build_allreduce(model: ModelProfile, cl: Cluster, h: Heuristics, *, algorithm: str,
                     discipline: str, chunks: int = 1, channels: int = 1, **_) -> Net:
    n = cl.workers
    net = Net(f"allreduce-{algorithm}-coarse+")
    fab = Fabric(net, aggregate_noise(cl, h.messages), discipline)
    M = model.grad_bytes
    parts = [(p, b) for p, b in (("e", (1 - h.tail) * M), ("l", h.tail * M)) if b > 0]
    if not parts:
        parts = [("l", 0.0)]
    per = {i: {p: net.place(f"w{i}.{p}.grad", worker=i).name for p, _ in parts}
           for i in range(n)}
    done = {i: net.place(f"w{i}.e.done", worker=i).name for i in range(n)}
    start = {i: net.place(f"w{i}.start", 1, worker=i).name for i in range(n)}
    for i in range(n):
        first = parts[0][0]
        _compute(net, fab, model, cl, i, h, [start[i]], [per[i][first]],
                 [per[i]["l"]] if len(parts) == 2 else [done[i]])
    extra = (h.messages - len(parts)) * _latency_term(cl, fab, algorithm)
    for x, (p, b) in enumerate(parts):
        last = x == len(parts) - 1
        ins = {i: [per[i][p]] + ([done[i]] if last else []) for i in range(n)}
        dst = {i: [start[i]] if last else [done[i]] for i in range(n)}
        for i in range(n):
            if cl.update_time(b) > 0:  # each worker applies the averaged message on its GPU
                avg = net.place(f"w{i}.{p}.avg", worker=i).name
                net.transition(f"w{i}.update.{p}", duration(cl.update_time(b), cl.compute_cv),
                               inputs={avg: 1}, outputs={q: 1 for q in dst[i]},
                               resources=[fab.gpu(i)],
                               modulator=net.transitions[f"w{i}.compute"].modulator,
                               tags={"worker": i, "kind": "update", "role": "apply",
                                     "step": False})
                dst[i] = [avg]
            cpu = ring_cpu_time(b, n, cl) if algorithm == "ring" and fab.flows else 0.0
            if cpu > 0:  # the ring's per-byte CPU work, serial with its rounds in a fine ring
                got = net.place(f"w{i}.{p}.moved", worker=i).name
                net.transition(f"ar.{p}.w{i}.cpu", duration(cpu, fab.cluster.comm_cv),
                               inputs={got: 1}, outputs={q: 1 for q in dst[i]},
                               resources=[fab.gpu(i)],
                               tags={"worker": i, "kind": "comm", "stage": "cpu",
                                     "step": False})
                dst[i] = [got]
            if extra > 0 and x == 0:  # the latency terms of the other K - len(parts) buckets
                lat = net.place(f"w{i}.{p}.lat", worker=i).name
                net.transition(f"ar.{p}.w{i}.latencies", Deterministic(extra),
                               inputs={lat: 1}, outputs={q: 1 for q in dst[i]},
                               servers=math.inf,
                               tags={"worker": i, "kind": "comm", "stage": "latency",
                                     "step": False})
                dst[i] = [lat]
        allreduce(net, fab, cl, f"ar.{p}", b, inputs=ins, outputs=dst, coarse=True,
                  stream=None, algorithm=algorithm, chunks=chunks, channels=channels)
    net.meta["heuristics"] = dataclasses.asdict(h)
    net.meta["cluster"] = cl
    return net


def _build_ps(model: ModelProfile, cl: Cluster, h: Heuristics, *, synchronous: bool,
              shards: int | None = None, placement: str | None = None,
              discipline: str = "flows", priority: bool = False, **_) -> Net:
    cl = ps_cluster(cl, shards, placement)
    n = cl.workers
    net = Net(f"{'sync' if synchronous else 'async'}-ps-coarse+")
    fab = Fabric(net, aggregate_noise(cl, 2 * h.messages), discipline, priority)
    ex = PSExchange(fab)
    M = model.grad_bytes
    # (part, push bytes, pull bytes): the early message's pull is the part not hidden
    parts = [(p, b, q) for p, b, q in (("e", (1 - h.tail) * M, min(h.pull_lag, 1 - h.tail) * M),
                                       ("l", h.tail * M, h.tail * M)) if b > 0] or [("l", 0, 0)]
    pieces = {p: [(k, b, q * (b / tot) if tot > 0 else 0.0)
                  for k, b in cl.shard_tensor(0, tot)]
              for p, tot, q in parts}
    param, grad, recv, back = {}, {}, {}, {}
    for i in range(n):
        for p, _, _ in parts:
            for c, (k, _b, q) in enumerate(pieces[p]):
                param[i, p, c] = net.place(f"w{i}.{p}.c{c}.param", 1, worker=i).name
                if ex.local(i, k):
                    recv[i, p, c] = grad[i, p, c] = net.place(f"ps{k}.{p}.c{c}.from{i}",
                                                              shard=k).name
                else:
                    grad[i, p, c] = net.place(f"w{i}.{p}.c{c}.grad", worker=i).name
                    recv[i, p, c] = net.place(f"ps{k}.{p}.c{c}.from{i}", shard=k).name
                back[i, p, c] = (param[i, p, c] if ex.local(i, k) or q <= 0
                                 else net.place(f"ps{k}.{p}.c{c}.to{i}", shard=k).name)
    names = [p for p, _, _ in parts]
    for i in range(n):
        g = {p: [grad[i, p, c] for c in range(len(pieces[p]))] for p in names}
        ins = [param[i, p, c] for p in names for c in range(len(pieces[p]))]
        if len(names) == 2:
            _compute(net, fab, model, cl, i, h, ins, g["e"], g["l"])
        else:
            late = g[names[0]] if names[0] == "l" else []
            early = g[names[0]] if names[0] == "e" else []
            _compute(net, fab, model, cl, i, h, ins, early, late)
    with ex.bulk():  # pushes, updates and pulls added at once
        _exchange(ex, n, names, pieces, synchronous, grad, recv, back, param)
    net.meta["heuristics"] = dataclasses.asdict(h)
    net.meta["cluster"] = cl
    return net


def _exchange(ex: PSExchange, n: int, names: list[str], pieces: dict, synchronous: bool,
              grad: dict, recv: dict, back: dict, param: dict) -> None:
    """The pushes, updates and pulls of :func:`_build_ps`, part by part and piece by piece."""
    for p in names:
        for c, (k, b, q) in enumerate(pieces[p]):
            for i in range(n):
                if not ex.local(i, k):
                    ex.push(i, k, b, f"{p}.c{c}", chunk=c, inputs=[grad[i, p, c]],
                            outputs=[recv[i, p, c]], tags={"part": p})
            if synchronous:
                ex.update(f"ps{k}.update.{p}.c{c}", k, b, chunk=c,
                          inputs=[recv[i, p, c] for i in range(n)],
                          outputs=[back[i, p, c] for i in range(n)], tags={"part": p})
            else:
                for i in range(n):
                    ex.update(f"ps{k}.update.w{i}.{p}.c{c}", k, b, chunk=c,
                              inputs=[recv[i, p, c]], outputs=[back[i, p, c]],
                              tags={"worker": i, "part": p})
            for i in range(n):
                if not ex.local(i, k) and q > 0:
                    ex.pull(i, k, q, f"{p}.c{c}", chunk=c, inputs=[back[i, p, c]],
                            outputs=[param[i, p, c]], tags={"part": p})


def build(variant: str, model: ModelProfile, cluster: Cluster, *,
          heuristics_: Heuristics | None = None, **opts) -> Net:
    """The coarse+ net of ``variant`` (``opts``: its resolved options).

    ``heuristics_`` (default :func:`heuristics` of the profile) sets phi, tau, rho and K.

    Raises
    ------
    VariantError
        ``variant`` has no coarse+ net, or an option it cannot honour (``balance='batch'``,
        ``compression``; ``channels > 1`` off nodes of several GPUs, which the all-reduce
        refuses).
    """
    if heuristics_ is not None and not isinstance(heuristics_, Heuristics):
        raise VariantError(f"heuristics={heuristics_!r} is not a sgdnet.CoarseHeuristics; give "
                           "CoarseHeuristics(overlap, tail, pull_lag, messages) or leave it out")
    for o in (BALANCE, COMPRESSION):  # the heuristics are derived for the plain scheme
        if opts.get(o.name, o.default) != o.default:
            raise VariantError(f"granularity={COARSE_PLUS!r} does not model {o.name}="
                               f"{opts[o.name]!r} (its heuristics are derived for {o.name}="
                               f"{o.default!r}); use granularity='fine' (or 'coarse')")
    h = heuristics_ if heuristics_ is not None else heuristics(variant, model, cluster, **opts)
    if variant == "allreduce":
        return _build_allreduce(model, cluster, h, **opts)
    if variant in ("sync-ps", "async-ps"):
        return _build_ps(model, cluster, h, synchronous=variant == "sync-ps", **opts)
    raise VariantError(f"granularity={COARSE_PLUS!r} exists for {list(SUPPORTED)}; variant "
                       f"{variant!r} has none: use granularity='fine' or 'coarse'")
