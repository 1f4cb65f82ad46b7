"""``pipeline``: 3D-parallel transformer training (tensor x pipeline x data parallelism), as
Megatron-LM runs it (Narayanan et al. 2021). Not ``pipe-sgd`` (:mod:`.pipe_sgd`, which overlaps
one step's all-reduce with the next step's compute).

The plan (:class:`sgdnet.workload.parallelism.Parallelism`) places ``tp x pp x dp`` GPUs; a TP
group (one node's GPUs on NVLink by default) computes in lockstep, so each (stage, replica) is
one compute resource, the GPU of its TP rank 0 (``w{rank}.gpu``), running its share of the
split model (:func:`.tensor_parallel.split_profile`).

Net (fine)
    * Per device (stage ``q``, replica ``d``) its passes in the schedule's order
      (:func:`~sgdnet.workload.parallelism.schedule_ops`): pass ``k`` takes the token pass
      ``k-1`` put in ``s{q}.d{d}.o{k}`` (so the order is the schedule's, as the framework's loop
      enforces it) and, for a forward of chunk ``c > 0``, the activation from chunk ``c-1``, for
      a backward of chunk ``c < C-1`` the gradient from chunk ``c+1``. A forward puts a token
      in ``s{q}.d{d}.inflight`` (its activations held) and a backward takes one: the place's
      marking is the device's micro-batches in flight (1F1B at most ``p - q``, GPipe ``m``).
    * A pass's TP all-reduces (:func:`.tensor_parallel.tp_allreduces`: two per block in forward,
      two in backward, of ``b s h`` each) follow its compute as one streamed ring over the TP
      group's NVLink (:func:`.tensor_parallel.group_collective`); the next pass waits for them.
    * Activations (forward) and their gradients (backward) go to the next (previous) chunk's
      device as point-to-point flows, TP rank ``t`` to TP rank ``t``, over the topology's path
      (NVLink inside a node, the NICs between nodes). With ``scatter_gather`` (Megatron's
      default, Narayanan et al. 2021 §4.1) each rank sends ``1/tp`` of the tensor and the
      receiving group all-gathers it over NVLink; with sequence parallelism the tensor is
      already split (no gather).
    * After its last pass (the flush) each device all-reduces its gradients with the same
      stage of the other replicas at once (Megatron-LM: each stage after its own last
      backward): a ring per TP rank over the DP group of ``grad bytes / tp`` (in ``dtype``), then
      the optimizer step on the GPU (the profile's update times of the device's parameters),
      then a ``step=True`` marker per GPU (``worker`` = its rank), and the next iteration.
    * ``zero_stage=1`` (ZeRO-1, Megatron's distributed optimizer): a reduce-scatter of the
      gradients instead of the all-reduce, the optimizer step on ``1/dp`` of them, then an
      all-gather of the updated 16-bit parameters (:func:`.shard_collectives.ring_phase`).
    * ``tp_ranks="one"`` (default) builds the flows of TP rank 0 only, their bytes scaled so
      that alone each takes as long as all TP ranks' flows sharing the links alike
      (:func:`_scale`: 2 for GPU pairs sharing a NIC, 1 on NVLink's per-GPU links); exact for
      symmetric groups (tests/test_pipeline_tp.py compares it with ``"all"``, every rank's
      flows). The net grows as ``pp x dp x m`` (times ``tp`` with ``"all"``).

Net (coarse)
    The same passes and order, with every communication a closed-form delay: a TP ring
    ``count 2(t-1)(alpha + S/(t B))`` added to its pass, a send ``alpha + S/B`` on the path's
    slowest link, the DP ring ``2(d-1)(alpha + G/(d B))``, without contention.

Closed forms (equal stages, free communication, no update cost): an iteration takes
``(m + p - 1)(t_f + t_b)`` for GPipe and 1F1B and ``(m + (p-1)/v)(t_f + t_b)`` interleaved,
so each stage idles ``(p-1)/(m+p-1)`` (``(p-1)/(v m + p - 1)``) of it
(:func:`~sgdnet.workload.parallelism.bubble_fraction`; tests/test_pipeline_schedules.py).

``accumulate`` is refused: the micro-batches of a pipeline are its accumulation.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from ..workload.compute import BYTES_PER_ELEM, GRAD_DTYPES
from ..workload.parallelism import (
    SCHEDULES,
    Parallelism,
    block_of_layer,
    grad_dtype_rule,
    memory_for_plan,
    schedule_ops,
    stage_partition,
    transformer_shape,
)
from ..workload.profile import Tensor
from .compute import apply_straggler
from .durations import duration
from .fabric import Fabric
from .options import Option, check_bool, check_bytes, check_choice, check_int
from .registry import register
from .shard_collectives import ring_phase
from .tensor_parallel import group_collective, split_layer_bytes, split_profile, tp_allreduces

__all__ = ["build_fine", "build_coarse", "OPTIONS", "plan_of", "stash_step_costs"]


def _check_partition(v: Any) -> Any:
    if isinstance(v, str):
        if v not in ("auto", "blocks", "balanced"):
            raise ValueError("must be 'auto', 'blocks', 'balanced' or a list of layer counts")
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool)
                                            and x >= 1 for x in v):
        return tuple(v)
    raise ValueError("must be 'auto', 'blocks', 'balanced' or a list of layer counts >= 1")


def _check_order(v: Any) -> str:
    if not isinstance(v, str) or sorted(v.split("-")) != ["dp", "pp", "tp"]:
        raise ValueError("must list tp, dp and pp once each, innermost first, e.g. 'tp-dp-pp'")
    return v


OPTIONS = (
    Option("tp", 1, "an int >= 1: tensor-parallel degree (Megatron: inside a node)",
           check_int(1, limit_name="max_count")),
    Option("pp", 1, "an int >= 1: pipeline stages", check_int(1, limit_name="max_count")),
    Option("dp", None, "None (workers / (tp*pp)) or an int >= 1: data-parallel replicas",
           check_int(1, allow_none=True, limit_name="max_count")),
    Option("microbatches", None, "None (4*pp; 1 when pp=1) or an int >= 1: micro-batches per "
           "iteration and replica, each of the profile's batch",
           check_int(1, allow_none=True, limit_name="max_count")),
    Option("schedule", "1f1b", "'1f1b' (PipeDream-Flush, Megatron's default), 'gpipe' or "
           "'interleaved' (needs virtual_stages >= 2)", check_choice(*SCHEDULES)),
    Option("virtual_stages", 1, "an int >= 1: model chunks per device (interleaved schedule)",
           check_int(1, limit_name="max_count")),
    Option("sequence_parallel", False, "True/False: Megatron's sequence parallelism",
           check_bool),
    Option("order", "tp-dp-pp", "the parallel dimensions innermost first (Megatron: "
           "'tp-dp-pp')", _check_order),
    Option("partition", "auto", "'auto' ('blocks' for transformer profiles, else 'balanced'), "
           "'blocks' (equal transformer blocks per chunk), 'balanced' (contiguous layers, "
           "slowest chunk minimised) or a list of layer counts per chunk", _check_partition),
    Option("recompute", False, "True/False: full activation recomputation (each backward "
           "re-runs its forward first)", check_bool),
    Option("dtype", None, "None or 'fp32'/'bf16'/'fp16': gradients on the wire of the DP "
           "all-reduce (None: Megatron's rule, fp32 main gradients with bf16, fp16 with fp16)",
           check_choice(None, *GRAD_DTYPES)),
    Option("scatter_gather", True, "True/False: each TP rank sends 1/tp of an activation "
           "between stages and the receivers all-gather it (Megatron's default)", check_bool),
    Option("tp_ranks", "one", "'one' (the flows of TP rank 0, carrying the bytes of the ranks "
           "sharing its links) or 'all' (every TP rank's flows)", check_choice("one", "all")),
    Option("activation_bytes", None, "None (b*s*h in the profile's precision, transformer "
           "profiles) or a size: one micro-batch's activation sent between stages",
           check_bytes(allow_none=True)),
    Option("zero_stage", 0, "0 (DDP: an all-reduce of each stage's gradients) or 1 (ZeRO-1, "
           "Megatron's distributed optimizer: reduce-scatter, optimizer step on 1/dp, "
           "all-gather of the 16-bit parameters)", check_choice(0, 1)),
    Option("tp_bytes", None, "None (b*s*h in the profile's precision) or a size: one TP "
           "all-reduce", check_bytes(allow_none=True)),
)

_STASH = "pipeline_step_costs"


def stash_step_costs(profile: ModelProfile) -> ModelProfile:
    """``profile`` with its optimizer-step costs (each layer's tensors' ``update_s``, plus
    ``zero_grad_s + optimizer_s``) moved into ``meta["pipeline_step_costs"]``, so that the
    registry does not fold the whole model's update into the first layer's forward (which
    every micro-batch of stage 0 would then pay): the pipeline charges each stage's update once
    per iteration. ``loss_s`` stays (folded into the last layer, on the last stage)."""
    if _STASH in profile.meta or not (profile.update_s or profile.zero_grad_s):
        return profile
    per = [la.update_s for la in profile.layers]
    lays = [dataclasses.replace(la, tensors=tuple(Tensor(t.name, t.nbytes) for t in la.tensors))
            if la.tensors is not None else la for la in profile.layers]
    fixed = profile.zero_grad_s + profile.optimizer_s
    return profile._copy(layers=lays, zero_grad_s=0.0, optimizer_s=0.0,
                         meta=dict(profile.meta, **{_STASH: {"update_s": per, "fixed_s": fixed}}))


def plan_of(cluster: Cluster, opts: dict) -> Parallelism:
    """The :class:`Parallelism` of the options on ``cluster`` (checked against it)."""
    return Parallelism.from_options(cluster, opts)


def _sum_cv(times: list[float], cvs: list[float]) -> tuple[float, float]:
    tot = math.fsum(times)
    var = math.fsum((c * t) ** 2 for c, t in zip(cvs, times))
    return tot, (math.sqrt(var) / tot if tot > 0 else 0.0)


class _Plan:
    """Everything the two builders share: the plan, the split profile, chunk times, bytes."""

    def __init__(self, model: ModelProfile, cluster: Cluster, opts: dict):
        self.plan = pl = plan_of(cluster, opts)
        self.cluster = cluster
        self.opts = opts
        prof, self.tp_note = split_profile(model, pl.tp, pl.sequence_parallel)
        part = opts.get("partition", "auto")
        if part == "auto":
            part = "blocks" if any(b is not None for b in block_of_layer(model)) else "balanced"
        self.ranges = stage_partition(prof, pl.chunks, part)
        rec = opts.get("recompute", False)
        cv0 = cluster.compute_cv
        self.fwd, self.bwd, self.ars = [], [], []
        for lo, hi in self.ranges:
            idx = range(lo, hi)
            cvs = [prof.layer_cv(i, cv0) for i in idx]
            f = [prof.layers[i].forward_s for i in idx]
            b = [prof.layers[i].backward_s + (prof.layers[i].forward_s if rec else 0.0)
                 for i in idx]
            self.fwd.append(_sum_cv(f, cvs))
            self.bwd.append(_sum_cv(b, cvs))
            fa, ba = tp_allreduces(model, lo, hi)
            self.ars.append((fa, ba + (fa if rec else 0)))  # recomputed forwards all-reduce too
        shape = transformer_shape(model)
        self.shape = shape
        prec = BYTES_PER_ELEM.get(model.precision or "fp32", 4)
        bsh = None if shape is None else model.batch_size * shape[0] * shape[1] * prec
        self.act = opts.get("activation_bytes")
        self.tp_bytes = opts.get("tp_bytes")
        if self.act is None or self.tp_bytes is None:
            if bsh is None and (pl.pp > 1 and self.act is None or pl.tp > 1
                                and self.tp_bytes is None):
                raise VariantError(f"profile {model.name!r} is no transformer built by "
                                   "sgdnet.workload.transformers (no seq_len and hidden size), "
                                   "so the bytes between stages and of a TP all-reduce are "
                                   "unknown; pass activation_bytes= and tp_bytes=")
            self.act = bsh if self.act is None else self.act
            self.tp_bytes = bsh if self.tp_bytes is None else self.tp_bytes
        self.act = float(self.act or 0.0)
        self.tp_bytes = float(self.tp_bytes or 0.0)
        dt = grad_dtype_rule(model, opts.get("dtype"))
        self.dtype = dt
        gscale = GRAD_DTYPES[dt] / GRAD_DTYPES.get(model.meta.get("grad_dtype", "fp32"), 4)
        stash = model.meta.get(_STASH, {"update_s": [0.0] * model.n_layers, "fixed_s": 0.0})
        self.grad, self.update, self.param_bytes = [], [], []
        pbytes = 2.0 / GRAD_DTYPES.get(model.meta.get("grad_dtype", "fp32"), 4)
        for q in range(pl.pp):
            rs = [self.ranges[c] for c in range(q, pl.chunks, pl.pp)]
            held = math.fsum(split_layer_bytes(prof, pl.tp, lo, hi) for lo, hi in rs)
            self.grad.append(gscale * held)
            self.param_bytes.append(pbytes * held)  # 16-bit parameters
            u = math.fsum(stash["update_s"][i] * (split_layer_bytes(prof, pl.tp, i, i + 1)
                                                  / max(prof.layers[i].grad_bytes, 1e-300))
                          for lo, hi in rs for i in range(lo, hi))
            self.update.append(u + stash["fixed_s"] / pl.pp)
        self.model = model

    def speed(self, d: int, q: int) -> float:
        """A TP group computes at its slowest GPU's pace."""
        return min(self.cluster.speed(r) for r in self.plan.tp_group(d, q))


def _scale(fab: Fabric, pl: Parallelism, pairs: list[tuple[int, int]]) -> float:
    """What rank 0's flow (``pairs[0]``) stands for with ``tp_ranks="one"``: the TP ranks'
    flows (``pairs``) sharing the links alike, each link ``l`` of bandwidth ``B_l`` crossed by
    ``c_l`` of them, all of them take ``S / min_l(B_l / c_l)`` alone; rank 0's flow alone
    takes ``k S / min_l(B_l)`` with ``k`` the returned factor, so ``k = min_l(B_l) /
    min_l(B_l / c_l)`` (2 for GPU pairs sharing a NIC, 1 for NVLink's links of their own)."""
    t = fab.topo
    if t is None or len(pairs) == 1:
        return 1.0
    count: dict[str, int] = {}
    bw: dict[str, float] = {}
    for a, b in pairs:
        for name, rate, _ in t.path(a, b):
            count[name] = count.get(name, 0) + 1
            bw[name] = rate
    own = [name for name, _, _ in t.path(*pairs[0])]
    return min(bw[x] for x in own) / min(bw[x] / count[x] for x in count)


def _build(model: ModelProfile, cluster: Cluster, coarse: bool, **opts) -> Net:
    P = _Plan(model, cluster, opts)
    pl = P.plan
    p, m, v, C, tp = pl.pp, pl.microbatches, pl.virtual_stages, pl.chunks, pl.tp
    net = Net(f"pipeline-{pl.schedule}-{'coarse' if coarse else 'fine'}")
    fab = Fabric(net, cluster, "flows")
    every = opts.get("tp_ranks", "one") == "all"
    groups: dict[tuple[int, int], list[int]] = {}
    scales: dict[tuple, float] = {}

    def tp_group(d: int, q: int) -> list[int]:
        got = groups.get((d, q))
        if got is None:
            got = groups[d, q] = pl.tp_group(d, q)
        return got

    uniform = fab.topo is None or (fab.topo.fabric == "switch"
                                   and fab.topo.node_nic_bandwidth is None)

    def scale(pairs: list[tuple[int, int]], what: tuple = (), closed: bool = False) -> float:
        """:func:`_scale`, by the pairs' pattern: their offsets from the first rank and their
        nodes' offsets (a translation by whole nodes keeps the links' sharing)."""
        if every and not closed:  # each rank's own flow
            return 1.0
        if uniform and what:  # every replica's nodes alike: one answer per stage and kind
            got = scales.get(what)
            if got is None:
                got = scales[what] = _scale(fab, pl, pairs)
            return got
        key: tuple = tuple(pairs)
        t = fab.topo
        if t is not None:  # the same sharing where the nodes' offsets, racks and NICs agree
            base = t.node_of(pairs[0][0]) * t.gpus_per_node
            nodes = {t.node_of(x) for ab in pairs for x in ab}
            key = (tuple((a - base, b - base) for a, b in pairs),
                   tuple(sorted((t.node_of(x) - base // t.gpus_per_node, t.rack_of(t.node_of(x)),
                                 t.nic_rate(t.node_of(x))) for x in {pairs[0][0], pairs[0][1]})),
                   len({t.rack_of(k) for k in nodes}))
        got = scales.get(key)
        if got is None:
            got = scales[key] = _scale(fab, pl, pairs)
        return got

    ranks_t = list(range(tp)) if every else [0]
    sg = opts.get("scatter_gather", True) and tp > 1
    split_send = sg or pl.sequence_parallel
    per_rank = P.act / tp if split_send else P.act
    gather = sg and not pl.sequence_parallel
    cv_comm = cluster.comm_cv

    def ring_time(members: list[int], nbytes: float, rounds_factor: int, count: int) -> float:
        k = len(members)
        if k == 1 or nbytes == 0 or count == 0:
            return 0.0
        hops = [(members[x], members[(x + 1) % k]) for x in range(k)]
        bw = min(fab.bandwidth(("worker", a), ("worker", b)) for a, b in hops)
        lat = math.fsum(fab.latency(("worker", a), ("worker", b)) for a, b in hops) / k
        r = rounds_factor * (k - 1)
        return count * r * (lat + nbytes / (k * bw))

    def tp_comm(prefix: str, d: int, q: int, count: int, ready: str, done: dict,
                tags: dict) -> None:
        grp = tp_group(d, q)
        kinds = (["reduce_scatter", "all_gather"] if pl.sequence_parallel else ["allreduce"])
        if coarse or count == 0 or tp == 1 or P.tp_bytes == 0:
            net.transition(f"{prefix}.go", 0.0, inputs={ready: 1}, outputs=done,
                           tags={**tags, "kind": "sync", "step": False})
            return
        sc = scale([(grp[t], grp[(t + 1) % tp]) for t in range(tp)], ("tp", q))
        cur = ready
        for x, kind in enumerate(kinds):
            last = x == len(kinds) - 1
            nxt = done if last else {net.place(f"{prefix}.{kind}:done").name: 1}
            group_collective(net, fab, f"{prefix}.{kind}", grp, P.tp_bytes, ready=cur,
                             done=nxt, kind=kind, count=count,
                             senders=None if every else [grp[0]], scale=sc,
                             tags={**tags, "group": "tp"})
            cur = next(iter(nxt))

    def send(prefix: str, d: int, q: int, q2: int, src: str, dst: str, tags: dict) -> int:
        """Activation (or gradient) of one micro-batch from device (q, d) to (q2, d): tokens
        ``len(ranks_t)`` in ``src``; returns the tokens ``dst`` receives."""
        g1, g2 = tp_group(d, q), tp_group(d, q2)
        if per_rank == 0:
            net.transition(f"{prefix}.go", 0.0, inputs={src: len(ranks_t)}, outputs={dst: 1},
                           tags={**tags, "kind": "sync", "step": False})
            return 1
        if coarse:  # rank 0's send alone, with the bytes of the ranks sharing its links
            sc = scale([(g1[t], g2[t]) for t in range(tp)], ("p2p", q, q2), closed=True)
            t = fab.latency(("worker", g1[0]), ("worker", g2[0])) + per_rank * sc / \
                fab.bandwidth(("worker", g1[0]), ("worker", g2[0]))
            t += ring_time(g2, P.act, 1, 1) if gather else 0.0
            net.transition(prefix, duration(t, cv_comm), inputs={src: len(ranks_t)},
                           outputs={dst: 1}, servers=math.inf,
                           tags={**tags, "kind": "comm", "worker": g1[0], "step": False})
            return 1
        sc = scale([(g1[t], g2[t]) for t in range(tp)], ("p2p", q, q2))
        arrived = net.place(f"{prefix}:arrived").name if gather else dst
        for t in ranks_t:
            fab.transfer(f"{prefix}.t{t}", per_rank * sc, ("worker", g1[t]), ("worker", g2[t]),
                         inputs=[src], outputs=[arrived],
                         tags={**tags, "worker": g1[t], "p2p": True})
        if not gather:
            return len(ranks_t)
        group_collective(net, fab, f"{prefix}.gather", g2, P.act, ready=arrived,
                         ready_weight=len(ranks_t), done=dst, kind="all_gather",
                         senders=None if every else [g2[0]],
                         scale=scale([(g2[t], g2[(t + 1) % tp]) for t in range(tp)],
                                     ("tp", q2)),
                         tags={**tags, "group": "tp"})
        return 1

    # arrival places of activations (chunk c's input) and gradients (chunk c's output grad)
    act_in: dict[tuple[int, int, int], tuple[str, int]] = {}
    grad_in: dict[tuple[int, int, int], tuple[str, int]] = {}
    act_out: dict[tuple[int, int, int], tuple[str, int]] = {}
    grad_out: dict[tuple[int, int, int], tuple[str, int]] = {}
    devices = [(q, d) for d in range(pl.dp) for q in range(p)]
    start = {(q, d): net.place(f"s{q}.d{d}.start", tp, stage=q, replica=d).name
             for q, d in devices}
    for q, d in devices:  # the sends of every chunk boundary, both directions
        for c in range(q, C, p):
            for j in range(m):
                tg = {"pipe_stage": q, "replica": d, "microbatch": j, "chunk": c}
                if c < C - 1:
                    src = net.place(f"s{q}.d{d}.F{j}.c{c}:out").name
                    dst = net.place(f"c{c + 1}.d{d}.F{j}:in").name
                    w = send(f"s{q}.d{d}.F{j}.c{c}.send", d, q, (c + 1) % p, src, dst,
                             {**tg, "direction": "forward"})
                    act_in[c + 1, j, d] = (dst, w)
                    act_out[c, j, d] = (src, len(ranks_t))
                if c > 0:
                    src = net.place(f"s{q}.d{d}.B{j}.c{c}:out").name
                    dst = net.place(f"c{c - 1}.d{d}.B{j}:in").name
                    w = send(f"s{q}.d{d}.B{j}.c{c}.send", d, q, (c - 1) % p, src, dst,
                             {**tg, "direction": "backward"})
                    grad_in[c - 1, j, d] = (dst, w)
                    grad_out[c, j, d] = (src, len(ranks_t))
    rings = ranks_t  # one DP ring per TP rank built
    zero = opts.get("zero_stage", 0) == 1 and pl.dp > 1
    flush_to: dict[tuple[int, int], dict[str, int]] = {}
    opt_in: dict[tuple[int, int], dict[str, int]] = {}
    opt_out: dict[tuple[int, int], dict[str, int]] = {}
    stepped = {(q, d): net.place(f"s{q}.d{d}.stepped").name for q, d in devices}

    def dp_ring(name: str, q: int, t: int, nbytes: float, op: str, ready: str,
                done: dict[int, str]) -> None:
        """A ring of ``op`` over the DP group of TP rank ``t`` of stage ``q``: takes ``dp``
        tokens of ``ready``, gives one to each replica's ``done``."""
        members = pl.dp_group(t, q)
        k = len(members)
        rounds, red = {"allreduce": (2 * (k - 1), k - 1), "reduce_scatter": (k - 1, k - 1),
                       "all_gather": (k - 1, 0)}[op]
        tags = {"pipe_stage": q, "group": "dp", "tp_rank": t, "op": op}
        outs = {done[d]: 1 for d in done}
        if nbytes == 0:
            net.transition(name, 0.0, inputs={ready: pl.dp}, outputs=outs,
                           tags={**tags, "kind": "sync", "step": False})
            return
        if coarse:
            tt = ring_time(members, nbytes, 2 if op == "allreduce" else 1, 1)
            net.transition(name, duration(tt, cv_comm), inputs={ready: pl.dp}, outputs=outs,
                           tags={**tags, "kind": "comm", "worker": members[0], "step": False})
            return
        sc = scale([(pl.rank(x, 0, q), pl.rank(x, 1, q)) for x in range(tp)], ("dp", q))
        ring_phase(net, fab, name, members, nbytes * sc / k, rounds, red, {ready: pl.dp},
                   outs, {"collective": name, "step": False, **tags},
                   {"kind": "sync", "step": False, "collective": name, **tags}, "pipelined")

    for q in range(p):
        if pl.dp == 1:
            for d in range(pl.dp):
                pl_ = net.place(f"s{q}.d{d}.flushed").name
                flush_to[q, d], opt_in[q, d] = {pl_: 1}, {pl_: 1}
                opt_out[q, d] = {stepped[q, d]: tp}
            continue
        done = {d: net.place(f"s{q}.d{d}.reduced").name for d in range(pl.dp)}
        gathered = {d: net.place(f"s{q}.d{d}.gathered").name for d in range(pl.dp)}
        for d in range(pl.dp):
            opt_in[q, d] = {done[d]: len(rings)}
            flush_to[q, d], opt_out[q, d] = {}, {}
        for t in rings:
            ready = net.place(f"s{q}.t{t}.dp:ready").name
            for d in range(pl.dp):
                flush_to[q, d][ready] = 1
            if not zero:  # Megatron's DDP: an all-reduce of the stage's gradients
                dp_ring(f"s{q}.t{t}.dp", q, t, P.grad[q], "allreduce", ready, done)
                continue
            # ZeRO-1 (Megatron's distributed optimizer): reduce-scatter the gradients, step on
            # the shard, all-gather the updated 16-bit parameters
            dp_ring(f"s{q}.t{t}.dp.rs", q, t, P.grad[q], "reduce_scatter", ready, done)
            agr = net.place(f"s{q}.t{t}.dp.ag:ready").name
            for d in range(pl.dp):
                opt_out[q, d][agr] = 1
            dp_ring(f"s{q}.t{t}.dp.ag", q, t, P.param_bytes[q], "all_gather", agr, gathered)
        for d in range(pl.dp):
            if not zero:
                opt_out[q, d] = {stepped[q, d]: tp}
            else:
                net.transition(f"s{q}.d{d}.params", 0.0, inputs={gathered[d]: len(rings)},
                               outputs={stepped[q, d]: tp},
                               tags={"kind": "sync", "pipe_stage": q, "replica": d, "step": False})
    meta_dev: dict[str, Any] = {}
    for q, d in devices:
        r0 = pl.rank(0, d, q)
        gpu = fab.gpu(r0)
        sp = P.speed(d, q)
        ops = schedule_ops(p, m, q, pl.schedule, v)
        inflight = net.place(f"s{q}.d{d}.inflight", stage=q, replica=d).name
        prev: dict[str, int] = {start[q, d]: tp}
        names = []
        for k, (kind, j, lc) in enumerate(ops):
            c = lc * p + q
            last = k == len(ops) - 1
            nxt = (flush_to[q, d] if last else
                   {net.place(f"s{q}.d{d}.o{k + 1}").name: 1})
            ins = dict(prev)
            outs: dict[str, int] = {}
            if kind == "F":
                if c > 0:
                    a, w = act_in[c, j, d]
                    ins[a] = w
                outs[inflight] = 1
                if c < C - 1:
                    src, w = act_out[c, j, d]
                    outs[src] = w
                mean, cv = P.fwd[c]
                count = P.ars[c][0]
            else:
                ins[inflight] = 1
                if c < C - 1:
                    a, w = grad_in[c, j, d]
                    ins[a] = w
                if c > 0:
                    src, w = grad_out[c, j, d]
                    outs[src] = w
                mean, cv = P.bwd[c]
                count = P.ars[c][1]
            name = f"s{q}.d{d}.{kind}{j}.c{c}"
            tags = {"worker": r0, "kind": "compute", "phase": "fwd" if kind == "F" else "bwd",
                    "pipe_stage": q, "replica": d, "microbatch": j, "chunk": c, "step": False}
            dur_mean = mean / sp
            if coarse and count and tp > 1:
                dur_mean += ring_time(tp_group(d, q), P.tp_bytes, 2, count)
            if count and tp > 1 and P.tp_bytes > 0 and not coarse:
                mid = net.place(f"{name}:computed").name
                net.transition(name, duration(dur_mean, cv), inputs=ins, outputs={mid: 1},
                               resources=[gpu], tags=tags)
                tp_comm(f"{name}.tp", d, q, count, mid, {**outs, **nxt},
                        {"pipe_stage": q, "replica": d, "microbatch": j, "chunk": c,
                         "worker": r0})
            else:
                net.transition(name, duration(dur_mean, cv), inputs=ins,
                               outputs={**outs, **nxt}, resources=[gpu], tags=tags)
            names.append(name)
            prev = nxt
        # the optimizer step of the device's parameters, then one step marker per GPU
        upd = P.update[q] / (pl.dp if zero else 1) / sp
        net.transition(f"s{q}.d{d}.optimizer", duration(upd, cluster.compute_cv),
                       inputs=opt_in[q, d], outputs=opt_out[q, d], resources=[gpu],
                       tags={"worker": r0, "kind": "update", "pipe_stage": q, "replica": d,
                             "step": False})
        for t in range(tp):
            r = pl.rank(t, d, q)
            net.transition(f"w{r}.step", 0.0, inputs={stepped[q, d]: 1},
                           outputs={start[q, d]: 1},
                           tags={"worker": r, "kind": "sync", "pipe_stage": q, "replica": d,
                                 "step": True})
        apply_straggler(net, cluster, r0, names[0], names)
        meta_dev[f"{q},{d}"] = {"gpu": gpu, "passes": names}
    bs = [0] * cluster.workers
    for d in range(pl.dp):
        bs[pl.rank(0, d, 0)] = m * model.batch_size
    net.meta.update(
        cluster=cluster, parallelism=pl.to_dict(), chunks=[list(r) for r in P.ranges],
        chunk_forward_s=[f for f, _ in P.fwd], chunk_backward_s=[b for b, _ in P.bwd],
        tp_allreduces=[list(a) for a in P.ars], tp_note=P.tp_note, activation_bytes=P.act,
        tp_bytes=P.tp_bytes, dp_grad_bytes=P.grad, param_bytes=P.param_bytes,
        zero_stage=1 if zero else 0, update_s=P.update, dtype=P.dtype,
        devices=meta_dev, batch_sizes=bs, samples_per_iteration=pl.dp * m * model.batch_size,
        transformer=None if P.shape is None else dict(zip(("seq_len", "hidden", "blocks",
                                                           "vocab"), P.shape)),
        recompute=opts.get("recompute", False))
    return net


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """The coarse pipeline net: the schedule's passes, closed-form communication."""
    return _build(model, cluster, True, **opts)


def _prepare(model: ModelProfile, granularity: str, options: dict) -> ModelProfile:
    """The registry's ``prepare`` hook of ``pipeline``: step costs kept out of the layers
    (:func:`stash_step_costs`), ``accumulate`` and ``coarse+`` refused."""
    acc = options.get("accumulate", 1)
    if acc != 1:
        raise VariantError(f"variant 'pipeline': accumulate={acc!r} is not modelled (the "
                           "micro-batches of an iteration are the pipeline's accumulation); "
                           "give microbatches= instead")
    if granularity == "coarse+":
        raise VariantError("variant 'pipeline' has no 'coarse+' model; use granularity="
                           "'fine' or 'coarse'")
    return stash_step_costs(model)


@register("pipeline", summary="3D-parallel transformer training (tensor x pipeline x data "
          "parallelism, Megatron-LM): GPipe, 1F1B, interleaved 1F1B", options=OPTIONS,
          coarse=build_coarse, lockstep=True, warmup=lambda cluster, o: 2, prepare=_prepare,
          memory=memory_for_plan)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """The fine pipeline net (module docstring)."""
    return _build(model, cluster, False, **opts)
