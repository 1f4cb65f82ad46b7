"""A 3D-parallel plan: tensor (TP), pipeline (PP) and data (DP) parallelism of one job.

:class:`Parallelism` states the plan (``tp x pp x dp`` GPUs, ``microbatches`` per iteration,
the pipeline ``schedule``, ``virtual_stages`` for the interleaved schedule, ``sequence_parallel``
and the ``order`` in which the three dimensions are laid over the ranks); it is placed on the
cluster's ranks (:meth:`Parallelism.rank` / :meth:`Parallelism.coords`), TP innermost by
default so that a TP group is the GPUs of one node on NVLink, as Megatron-LM places it
(``order="tp-dp-pp"``: rank = ``t + tp (d + dp q)``; Megatron-core's ``RankGenerator``,
order ``"tp-cp-ep-dp-pp"``).

Schedules (:func:`schedule_ops`, per pipeline stage, the order of its forward ``F`` and backward
``B`` micro-batch passes in one iteration, ending with a flush):

* ``"gpipe"`` (Huang et al. 2019): every forward, then every backward.
* ``"1f1b"`` (PipeDream-Flush, Narayanan et al. 2021 §2.2.1; Megatron-LM's
  ``forward_backward_pipelining_without_interleaving``): stage ``q`` of ``p`` runs
  ``min(p - q - 1, m)`` warm-up forwards, then alternates one forward and one backward, then
  the remaining backwards; so it holds at most ``p - q`` micro-batches' activations.
* ``"interleaved"`` (Narayanan et al. 2021 §2.2.2; Megatron-LM's
  ``forward_backward_pipelining_with_interleaving``): each device holds ``v`` model chunks
  (chunk ``c`` of ``p v`` on device ``c mod p``); ``(p - q - 1) 2 + (v - 1) p`` warm-up
  forwards, then 1F1B over the ``v m`` chunk passes, chunk order as Megatron's
  ``get_model_chunk_id``; needs ``m`` a multiple of ``p``.

With equal stages and free communication the idle fraction of every stage is
``(p - 1) / (m + p - 1)`` for GPipe and 1F1B and ``(p - 1) / (v m + p - 1)`` interleaved
(:func:`bubble_fraction`; Narayanan et al. 2021, §2.2: bubble time ``(p - 1)(t_f + t_b)``,
divided by ``v`` when interleaved, over an ideal ``m (t_f + t_b)``).

Stage partition (:func:`stage_partition`): ``"blocks"`` gives every chunk the same number of
transformer blocks (Megatron-LM's rule; the embeddings go with the first chunk, the final
LayerNorm and output layer with the last), ``"balanced"`` cuts the layers into contiguous
chunks minimising the slowest chunk's forward + backward time, or a list gives the number of
profile layers of each chunk.

Model FLOPs (:func:`model_flops`): Narayanan et al. 2021, eq. (3): a GPT iteration of batch
``B``, sequence ``s``, ``l`` layers, hidden ``h``, vocabulary ``V`` costs
``96 B s l h^2 (1 + s/(6h) + V/(16 l h))`` FLOPs with activation recomputation and
``72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` without.

References: Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language Models
Using Model Parallelism", arXiv:1909.08053 (2019); Narayanan et al., "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473);
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023
(arXiv:2205.05198).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._check import is_int
from ..errors import ClusterError, VariantError
from .memory import activation_bytes_per_layer
from .profile import ModelProfile

__all__ = ["Parallelism", "SCHEDULES", "DIMENSIONS", "schedule_ops", "bubble_fraction",
           "peak_in_flight", "stage_partition", "block_of_layer", "transformer_shape",
           "model_flops", "activation_bytes_per_layer", "split_layer_bytes", "plan_memory",
           "attention_heads", "memory_for_plan", "grad_dtype_rule"]

#: Pipeline schedules.
SCHEDULES = ("1f1b", "gpipe", "interleaved")
#: The three parallel dimensions (``order`` is a permutation of them, innermost first).
DIMENSIONS = ("tp", "dp", "pp")


def _int(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not is_int(v) or v < lo:
        raise VariantError(f"Parallelism: {name}={v!r} must be an integer >= {lo}")
    return int(v)


@dataclass(frozen=True)
class Parallelism:
    """A 3D-parallel plan (see the module docstring).

    Parameters
    ----------
    tp, pp, dp : int
        Tensor-, pipeline- and data-parallel degrees; ``tp * pp * dp`` GPUs.
    microbatches : int
        Micro-batches per iteration (per pipeline, i.e. per DP replica).
    schedule : {"1f1b", "gpipe", "interleaved"}
        The pipeline schedule.
    virtual_stages : int
        Model chunks per device (``"interleaved"`` only; >= 2 there, 1 otherwise).
    sequence_parallel : bool
        Megatron's sequence parallelism (Korthikanti et al. 2022): LayerNorm and dropout split
        along the sequence over the TP group, each TP all-reduce a reduce-scatter plus an
        all-gather.
    order : str
        The dimensions innermost first, joined by ``-`` (default ``"tp-dp-pp"``).

    Raises
    ------
    VariantError
        A degree that is not a positive integer, an unknown schedule or order, or virtual
        stages that do not match the schedule.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    microbatches: int = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    sequence_parallel: bool = False
    order: str = "tp-dp-pp"

    def __post_init__(self) -> None:
        s = object.__setattr__
        for k in ("tp", "pp", "dp", "microbatches", "virtual_stages"):
            s(self, k, _int(k, getattr(self, k)))
        if self.schedule not in SCHEDULES:
            raise VariantError(f"Parallelism: schedule={self.schedule!r} is unknown; use one of "
                               f"{list(SCHEDULES)}")
        v, p, m = self.virtual_stages, self.pp, self.microbatches
        if self.schedule == "interleaved":
            if v < 2:
                raise VariantError(f"Parallelism: schedule='interleaved' needs virtual_stages >= 2 "
                                   f"(got {v}); give virtual_stages=2 or more, or schedule='1f1b'")
            if p < 2:
                raise VariantError("Parallelism: schedule='interleaved' needs pp >= 2 (got "
                                   f"pp={p}); use schedule='1f1b'")
            if m % p:
                raise VariantError(f"Parallelism: the interleaved schedule needs microbatches a "
                                   f"multiple of pp (Megatron-LM's rule); got microbatches={m}, "
                                   f"pp={p}: use {max(p, m // p * p)} or {(m // p + 1) * p}")
        elif v != 1:
            raise VariantError(f"Parallelism: virtual_stages={v} needs schedule='interleaved' "
                               f"(got {self.schedule!r}); pass schedule='interleaved' or "
                               "virtual_stages=1")
        if not isinstance(self.sequence_parallel, bool):
            raise VariantError(f"Parallelism: sequence_parallel={self.sequence_parallel!r} must "
                               "be True or False")
        dims = str(self.order).split("-")
        if sorted(dims) != sorted(DIMENSIONS):
            raise VariantError(f"Parallelism: order={self.order!r} must list tp, dp and pp once "
                               "each, innermost first, joined by '-' (e.g. 'tp-dp-pp', "
                               "Megatron-LM's)")
        if self.sequence_parallel and self.tp == 1:
            raise VariantError("Parallelism: sequence_parallel=True splits along the sequence "
                               "over the TP group; it needs tp >= 2 (or pass False)")

    # ------------------------------------------------------------------ shape
    @property
    def size(self) -> int:
        """GPUs of the plan, ``tp * pp * dp``."""
        return self.tp * self.pp * self.dp

    @property
    def chunks(self) -> int:
        """Model chunks of a pipeline, ``pp * virtual_stages``."""
        return self.pp * self.virtual_stages

    def check(self, cluster: Any) -> Parallelism:
        """Check the plan against ``cluster`` (its workers and topology); returns itself.

        Raises
        ------
        ClusterError
            ``tp * pp * dp`` is not the cluster's workers, or a TP group would not fit inside
            one node (``tp`` larger than, or not dividing, the GPUs per node).
        """
        n = cluster.workers
        if self.size != n:
            raise ClusterError(f"Parallelism: tp*pp*dp = {self.tp}*{self.pp}*{self.dp} = "
                               f"{self.size} GPUs, but the cluster has {n} workers; give dp="
                               f"{n // (self.tp * self.pp) if n % (self.tp * self.pp) == 0 else '?'}"
                               f" or a cluster of {self.size} workers")
        t = cluster.topology
        if t is not None and self.order.startswith("tp"):
            g = t.gpus_per_node
            if self.tp > g or g % self.tp:
                raise ClusterError(f"Parallelism: tp={self.tp} must divide the {g} GPUs per node "
                                   "(tensor parallelism all-reduces four times per block, so "
                                   "Megatron keeps a TP group inside a node on NVLink); use tp "
                                   f"in {[k for k in range(1, g + 1) if g % k == 0]}")
        return self

    def _strides(self) -> dict[str, int]:
        out, s = {}, 1
        for d in self.order.split("-"):
            out[d] = s
            s *= getattr(self, d)
        return out

    def rank(self, t: int, d: int, q: int) -> int:
        """The rank (worker) of TP rank ``t`` of DP replica ``d`` in pipeline stage ``q``."""
        st = self._strides()
        return t * st["tp"] + d * st["dp"] + q * st["pp"]

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(t, d, q)`` of ``rank`` (the inverse of :meth:`rank`)."""
        st = self._strides()
        return tuple((rank // st[k]) % getattr(self, k) for k in ("tp", "dp", "pp"))  # type: ignore[return-value]

    def tp_group(self, d: int, q: int) -> list[int]:
        """The ranks of the TP group of replica ``d``, stage ``q``."""
        return [self.rank(t, d, q) for t in range(self.tp)]

    def dp_group(self, t: int, q: int) -> list[int]:
        """The ranks that all-reduce TP rank ``t``'s gradients of stage ``q``."""
        return [self.rank(t, d, q) for d in range(self.dp)]

    def device_of_chunk(self, c: int) -> int:
        """The pipeline stage (device) holding model chunk ``c``."""
        return c % self.pp

    @classmethod
    def from_options(cls, cluster: Any, options: Any) -> Parallelism:
        """The plan of the ``pipeline`` variant's options on ``cluster``, checked against it
        (``dp`` None: ``workers / (tp pp)``; ``microbatches`` None: ``4 pp``, 1 without
        pipelining, so that a step of plain data parallelism is one micro-batch)."""
        tp, pp = options.get("tp", 1), options.get("pp", 1)
        dp = options.get("dp")
        if dp is None:
            if cluster.workers % (tp * pp):
                raise ClusterError(f"tp*pp = {tp}*{pp} does not divide the cluster's "
                                   f"{cluster.workers} workers; give workers a multiple of "
                                   f"{tp * pp} or other tp/pp")
            dp = cluster.workers // (tp * pp)
        m = options.get("microbatches")
        if m is None:
            m = 4 * pp if pp > 1 else 1
        return cls(tp=tp, pp=pp, dp=dp, microbatches=m,
                   schedule=options.get("schedule", "1f1b"),
                   virtual_stages=options.get("virtual_stages", 1),
                   sequence_parallel=options.get("sequence_parallel", False),
                   order=options.get("order", "tp-dp-pp")).check(cluster)

    def to_dict(self) -> dict:
        """The plan's fields."""
        return {k: getattr(self, k) for k in ("tp", "pp", "dp", "microbatches", "schedule",
                                              "virtual_stages", "sequence_parallel", "order")}


# ---------------------------------------------------------------------- schedules
def schedule_ops(p: int, m: int, stage: int, schedule: str = "1f1b", v: int = 1
                 ) -> list[tuple[str, int, int]]:
    """The passes of pipeline stage ``stage`` in one iteration, in order:
    ``(kind, microbatch, local_chunk)`` with ``kind`` ``"F"`` or ``"B"`` and ``local_chunk``
    in ``0..v-1`` (global chunk ``local_chunk * p + stage``); see the module docstring."""
    if schedule == "gpipe":
        return [("F", j, 0) for j in range(m)] + [("B", j, 0) for j in range(m)]
    if schedule == "1f1b":
        w = min(p - stage - 1, m)
        ops = [("F", j, 0) for j in range(w)]
        for i in range(m - w):
            ops += [("F", w + i, 0), ("B", i, 0)]
        return ops + [("B", j, 0) for j in range(m - w, m)]
    if schedule != "interleaved":
        raise VariantError(f"schedule={schedule!r}: use one of {list(SCHEDULES)}")
    total = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * p, total)

    def op(k: int, forward: bool) -> tuple[str, int, int]:
        # Megatron-LM get_model_chunk_id and the micro-batch of the k-th pass of a kind
        in_group = k % (p * v)
        chunk = in_group // p
        if not forward:
            chunk = v - chunk - 1
        return ("F" if forward else "B", (k // (p * v)) * p + k % p, chunk)

    ops = [op(k, True) for k in range(warm)]
    for i in range(total - warm):
        ops += [op(warm + i, True), op(i, False)]
    return ops + [op(k, False) for k in range(total - warm, total)]


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """The closed-form idle fraction of a stage with equal stages and free communication:
    ``(p - 1) / (v m + p - 1)`` (``v = 1``: GPipe and 1F1B)."""
    return (p - 1) / (v * m + p - 1)


def peak_in_flight(p: int, m: int, stage: int, schedule: str = "1f1b", v: int = 1) -> int:
    """Most micro-batch passes whose forward is done and backward not yet started on
    ``stage``, from the schedule's order (1F1B: ``min(p - stage, m)``; GPipe: ``m``)."""
    held = peak = 0
    for kind, _, _ in schedule_ops(p, m, stage, schedule, v):
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


# ---------------------------------------------------------------------- partition
_BLOCK = re.compile(r"(?:^|\.)(?:h|layer|layers|blocks)\.(\d+)\.")


def block_of_layer(profile: ModelProfile) -> list[int | None]:
    """Each layer's transformer block (the index in names such as ``transformer.h.3.attn``,
    ``encoder.layer.3.``, ``blocks.3.``), None outside the blocks."""
    out: list[int | None] = []
    for la in profile.layers:
        mt = _BLOCK.search(la.name)
        out.append(int(mt.group(1)) if mt else None)
    return out


def stage_partition(profile: ModelProfile, chunks: int, partition: str | Sequence[int] = "blocks"
                    ) -> list[tuple[int, int]]:
    """Contiguous layer ranges ``[lo, hi)`` of the ``chunks`` model chunks (module docstring).

    Raises
    ------
    VariantError
        ``"blocks"`` on a profile without transformer blocks or whose block count is not a
        multiple of ``chunks``; a list that does not add up to the profile's layers; more
        chunks than layers.
    """
    L = profile.n_layers
    if chunks > L:
        raise VariantError(f"{chunks} pipeline chunks but profile {profile.name!r} has only {L} "
                           "layers; use fewer stages (pp * virtual_stages <= layers)")
    if isinstance(partition, str) and partition == "blocks":
        blocks = block_of_layer(profile)
        ids = sorted({b for b in blocks if b is not None})
        if not ids:
            raise VariantError(f"partition='blocks': profile {profile.name!r} has no transformer "
                               "blocks (layer names like 'transformer.h.3.attn'); use "
                               "partition='balanced' or give layers per chunk as a list")
        if len(ids) % chunks:
            raise VariantError(f"partition='blocks': the {len(ids)} transformer blocks of "
                               f"{profile.name!r} are not divisible by pp*virtual_stages = "
                               f"{chunks}; pick pp*virtual_stages dividing {len(ids)}, or "
                               "partition='balanced', or a list of layers per chunk")
        per = len(ids) // chunks
        cuts = [0]
        for c in range(1, chunks):
            first = ids[c * per]
            cuts.append(blocks.index(first))
        return list(zip(cuts, [*cuts[1:], L]))
    if isinstance(partition, str) and partition == "balanced":
        return _balanced(profile, chunks)
    if isinstance(partition, str):
        raise VariantError(f"partition={partition!r}: use 'blocks', 'balanced' or a list of "
                           "layers per chunk")
    sizes = [int(x) for x in partition]
    if len(sizes) != chunks or any(x < 1 for x in sizes) or sum(sizes) != L:
        raise VariantError(f"partition={list(partition)!r}: give {chunks} positive layer counts "
                           f"(one per chunk, pp*virtual_stages) adding up to the profile's {L} "
                           f"layers (got {len(sizes)} adding up to {sum(sizes)})")
    cuts = [0]
    for x in sizes:
        cuts.append(cuts[-1] + x)
    return list(zip(cuts[:-1], cuts[1:]))


def _balanced(profile: ModelProfile, chunks: int) -> list[tuple[int, int]]:
    """Contiguous chunks minimising the largest chunk time (bisection on the bound, greedy
    packing; at least one layer per chunk)."""
    t = [la.forward_s + la.backward_s for la in profile.layers]
    L = len(t)

    def pack(bound: float) -> list[int] | None:
        cuts, acc = [0], 0.0
        for i, x in enumerate(t):
            left_layers, left_chunks = L - i, chunks - len(cuts) + 1
            if (acc + x > bound and i > cuts[-1]) or left_layers < left_chunks:
                if i > cuts[-1]:
                    cuts.append(i)
                    acc = 0.0
            acc += x
        return cuts if len(cuts) <= chunks else None

    lo, hi = max(t), math.fsum(t)
    for _ in range(60):
        mid = (lo + hi) / 2
        if pack(mid) is None:
            lo = mid
        else:
            hi = mid
    cuts = pack(hi) or [0]
    while len(cuts) < chunks:  # split the longest range until there are enough chunks
        ranges = list(zip(cuts, [*cuts[1:], L]))
        a, b = max(ranges, key=lambda r: (r[1] - r[0] > 1, math.fsum(t[r[0]:r[1]])))
        cuts = sorted({*cuts, (a + b) // 2})
    return list(zip(cuts, [*cuts[1:], L]))


# ---------------------------------------------------------------------- transformer facts
def transformer_shape(profile: ModelProfile) -> tuple[int, int, int, int] | None:
    """``(seq_len, hidden, blocks, vocab)`` of a transformer profile built by
    :mod:`sgdnet.workload.transformers` (``meta["seq_len"]``, the hidden size from a block's
    first LayerNorm's parameters ``2 h``, the vocabulary from the token embedding), else None."""
    s = profile.meta.get("seq_len")
    blocks = block_of_layer(profile)
    nb = len({b for b in blocks if b is not None})
    if not s or not nb:
        return None
    h = vocab = None
    for la, b in zip(profile.layers, blocks):
        if b is not None and h is None and la.ops and la.ops[0].name == "layernorm":
            h = int(round(la.grad_bytes / 8))  # weight + bias of h fp32 elements
        if b is None and vocab is None and (la.name.endswith("wte")
                                            or la.name.endswith("word_embeddings")):
            vocab = la.grad_bytes / 4
    if h is None:
        return None
    v = int(round(vocab / h)) if vocab else 0
    return int(s), h, nb, v


def model_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int, *,
                recompute: bool = False) -> float:
    """FLOPs of one training iteration of a GPT model (Narayanan et al. 2021, eq. 3; see the
    module docstring): ``batch`` sequences of ``seq`` tokens."""
    B, s, l, h, V = float(batch), float(seq), float(layers), float(hidden), float(vocab)
    if recompute:
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def _vocab_layer(la: Any) -> bool:
    return la.name.endswith(("wte", "word_embeddings"))


def _layer_split(la: Any) -> bool:
    """Whether a layer's parameters are split over the TP ranks (its GEMMs' weights, the
    vocabulary-parallel embedding); LayerNorms and position embeddings are replicated."""
    if not la.ops:
        return True
    return any(o.kind == "matmul" and o.param_elems > 0 for o in la.ops) or _vocab_layer(la)


def split_layer_bytes(profile: ModelProfile, tp: int, lo: int = 0, hi: int | None = None
                      ) -> float:
    """Gradient bytes one TP rank holds of layers ``lo..hi-1``: split layers' ``1/tp``,
    replicated layers' whole."""
    hi = profile.n_layers if hi is None else hi
    return math.fsum(la.grad_bytes / tp if _layer_split(la) else la.grad_bytes
                     for la in profile.layers[lo:hi])

def plan_memory(profile: ModelProfile, plan: Parallelism, ranges: Sequence[tuple[int, int]], *,
                dtype: str = "fp32", zero_stage: int = 0, recompute: bool = False,
                device: Any = None) -> list[Any]:
    """Memory per GPU of each pipeline stage, a
    :class:`~sgdnet.workload.memory.MemoryBreakdown` each (empty without a parameter count or
    for a profile that is no transformer of :mod:`sgdnet.workload.transformers`).

    Model states (:func:`sgdnet.workload.memory.memory_per_gpu`): one GPU's parameters (its
    chunks' layers, TP-split ones ``1/tp``), in the profile's 16-bit precision, gradients in
    ``dtype``, the optimizer's states (sharded over the DP group with ``zero_stage=1``).
    Activations: the schedule's peak, each forward keeping its chunk's blocks' activations
    (:func:`activation_bytes_per_layer`) until its backward, so 1F1B's first stage holds
    ``p`` micro-batches' and GPipe's ``m`` (Korthikanti et al. 2022, §4.2.3)."""
    import dataclasses

    from .memory import ShardDegrees, memory_per_gpu
    from .optimizer import profile_optimizer

    shape = transformer_shape(profile)
    heads = attention_heads(profile)
    if shape is None or heads is None:
        return []
    s, h = shape[0], shape[1]
    p, m, v = plan.pp, plan.microbatches, plan.virtual_stages
    blocks = block_of_layer(profile)
    per_block = activation_bytes_per_layer(profile.batch_size, s, h, heads, plan.tp,
                                           plan.sequence_parallel, recompute)
    chunk_act = [per_block * len({b for b in blocks[lo:hi] if b is not None})
                 for lo, hi in ranges]
    pdt = profile.precision if profile.precision in ("fp16", "bf16") else "fp32"
    out = []
    for q in range(p):
        held = peak = 0.0
        for kind, _, lc in schedule_ops(p, m, q, plan.schedule, v):
            held += chunk_act[lc * p + q] * (1 if kind == "F" else -1)
            peak = max(peak, held)
        n = math.fsum(split_layer_bytes(profile, plan.tp, lo, hi)
                      for lo, hi in (ranges[c] for c in range(q, plan.chunks, p)))
        n /= 4.0  # the profile's fp32 gradient bytes per parameter
        mem = memory_per_gpu(profile, degrees=ShardDegrees(optimizer=plan.dp if zero_stage
                                                           else 1),
                             optimizer=profile_optimizer(profile), param_dtype=pdt,
                             grad_dtype=dtype, activations=False, buffers=False,
                             device=device, n_params=max(n, 1.0))
        note = (f"stage {q}: activations at the schedule's peak, {per_block:,.0f} B per block "
                "and micro-batch (Korthikanti et al. 2022)")
        out.append(dataclasses.replace(mem, activations=peak, notes=(*mem.notes, note)))
    return out


def grad_dtype_rule(profile: ModelProfile, dtype: str | None = None) -> str:
    """The DP all-reduce's gradient dtype: ``dtype``, else Megatron-LM's rule (fp32 main
    gradients with bf16, ``accumulate_allreduce_grads_in_fp32``; fp16 gradients with fp16)."""
    return dtype or ("fp16" if profile.precision == "fp16" else "fp32")


def memory_for_plan(profile: ModelProfile, cluster: Any, options: Any, device: Any = None
                    ) -> Any:
    """The memory per GPU of the ``pipeline`` variant's ``options``: the stage that needs the
    most (:func:`plan_memory`), or None when it cannot be counted."""
    plan = Parallelism.from_options(cluster, options)
    part = options.get("partition", "auto")
    if part == "auto":
        part = "blocks" if any(b is not None for b in block_of_layer(profile)) else "balanced"
    ranges = stage_partition(profile, plan.chunks, part)
    got = plan_memory(profile, plan, ranges, dtype=grad_dtype_rule(profile,
                                                                   options.get("dtype")),
                      zero_stage=options.get("zero_stage", 0),
                      recompute=bool(options.get("recompute", False)), device=device)
    return max(got, key=lambda mb: mb.total) if got else None


def attention_heads(profile: ModelProfile) -> int | None:
    """Attention heads of a transformer profile of :mod:`sgdnet.workload.transformers`, from
    its first ``scores`` op (``flops = 2 s^2 h``, ``elems = 2 s h + a s^2``), or None."""
    s = profile.meta.get("seq_len")
    for la in profile.layers:
        for o in la.ops or ():
            if o.name == "scores" and s:
                d = o.flops / (2.0 * s * s)
                return max(1, int(round((o.elems - 2.0 * s * d) / (s * s))))
    return None
