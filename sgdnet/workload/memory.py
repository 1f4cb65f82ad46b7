"""Memory per GPU of a data-parallel configuration: model states, activations, buffers.

**Model states** follow the ZeRO paper (Rajbhandari, Rasley, Ruwase, He, "ZeRO: Memory
Optimizations Toward Training Trillion Parameter Models", SC 2020, arXiv:1910.02054, Sec. 3.1
and Figure 1): with ``Ψ`` parameters, mixed-precision Adam keeps 16-bit parameters (``2Ψ``
bytes) and gradients (``2Ψ``) and ``KΨ`` bytes of optimizer states (fp32 master weights,
momentum and variance: ``K = 12``); sharded over ``N_d`` GPUs,

=====================  ==============================  =========================
stage                  bytes per GPU                   Ψ = 7.5 B, N_d = 64
=====================  ==============================  =========================
baseline (DDP)         ``(2 + 2 + K) Ψ``               120 GB
``P_os`` (ZeRO-1)      ``2Ψ + 2Ψ + KΨ / N_d``          31.4 GB
``P_os+g`` (ZeRO-2)    ``2Ψ + (2 + K) Ψ / N_d``        16.6 GB
``P_os+g+p`` (ZeRO-3)  ``(2 + 2 + K) Ψ / N_d``         1.9 GB
=====================  ==============================  =========================

(GB = 10^9 bytes, as the paper counts.) :func:`shard_degrees` says over how many GPUs each of
the three is sharded for a variant's options (PyTorch FSDP's strategies too:
``SHARD_GRAD_OP`` = ZeRO-2, ``FULL_SHARD`` = ZeRO-3, ``HYBRID_SHARD`` = ZeRO-3 inside a node);
``K`` and the bytes of parameters and gradients follow the optimizer and the dtypes
(:func:`sgdnet.workload.optimizer.state_bytes_per_param`). Variants that do not shard account
as PyTorch AMP keeps a model: fp32 parameters and gradients, the optimizer's states (Adam
``8Ψ``), the same ``16Ψ`` in total.

**Activations** (what the forward pass keeps for the backward pass, for one micro-batch of the
profile's batch size; gradient accumulation keeps one micro-batch's at a time):

* transformer blocks of the profiles of :mod:`sgdnet.workload.transformers` (GPT-2, BERT,
  ViT): Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
  (MLSys 2023, arXiv:2205.05198), Sec. 4.1, Eq. (1): ``s b h (34 + 5 a s / h)`` bytes per
  block with 16-bit activations, 1-byte dropout masks and no recomputation (sequence ``s``,
  micro-batch ``b``, hidden ``h``, heads ``a``; read from each block's attention-score op).
  Its terms are ``16 s b h + 2 a s^2 b`` elements plus the masks ``2 s b h + a s^2 b`` bytes;
  with fp32 activations the elements count 4 bytes; ViT has no dropout (timm's default): no
  masks and one ``a s^2 b`` (the softmax output), ``32 s b h + 2 a s^2 b`` in 16 bits;
* everything else (the embeddings, heads and loss of a transformer; every layer of a CNN or
  of any profile with ops): each op's output, taken as half the elements it reads and writes
  (an op's output is the next one's input), times the batch and the bytes per element of the
  profile's precision (fp32 when not stated); in-place ops (``relu`` and ``add`` of the CNN
  builders: torchvision's ``ReLU(inplace=True)`` and ``out += identity``) add nothing;
* a profile without ops: not counted (the breakdown's notes say so).

**Activation checkpointing** (recomputation), the policy of the profile's
``meta["recompute"]`` as :func:`sgdnet.workload.llms.with_recompute` records it, counted as
Korthikanti et al. 2022 do (Sec. 4 and Table 2; the pipeline variant counts its plans with
:func:`activation_bytes_per_layer`, whose ``2 s b h`` this reuses):

* ``"full"`` (every block checkpointed): each block keeps its input only, ``2 s b h`` bytes in
  16 bits (``e s b h`` with ``e`` bytes per element; Table 2, "full recomputation"), plus one
  block's activations (Eq. 1) while it is recomputed in the backward pass: ``L 2 s b h +
  s b h (34 + 5 a s / h)`` for ``L`` blocks instead of ``L s b h (34 + 5 a s / h)``;
* an int ``k``: blocks ``k-1, 2k-1, ...`` (llms' numbering, torchtitan's selective layer AC)
  as under ``"full"``, the others as without recomputation, plus one checkpointed block's
  activations (an upper bound of the peak, exact when the last block is checkpointed);
* ``"op"`` (selective recomputation; torchtitan's selective op AC is taken as this): the
  attention scores, softmax and their dropout are recomputed, the ``5 a s / h`` term of Eq. 1
  drops (Sec. 4.2, Table 2): ``34 s b h`` per block (with ViT's no-dropout rule ``32 s b h``);
* the embeddings, output projection and loss are not checkpointed (the ops' rule).

The Llama and MPT profiles of :mod:`sgdnet.workload.llms` have fused attention (no ``s x s``
scores in memory) and no dropout (Meta's reference code; llm-foundry's defaults
``resid_pdrop = emb_pdrop = 0``, ``llmfoundry/models/mpt/configuration_mpt.py``, and
``attn_pdrop = 0``, ``llmfoundry/models/utils/config_defaults.py``): without recomputation their blocks are counted
by the ops' rule; under checkpointing a block's hidden size is ``meta["d_model"]``, a
checkpointed block keeps ``2 s b h`` and one is recomputed (its ops' outputs), ``"op"`` keeps
``32 s b h`` (Eq. 1 without the attention term and the dropout masks).

**Buffers**: with sharded parameters (ZeRO-3, FSDP ``full`` / ``hybrid``) the gathered
parameters of the units in flight: the root unit's (everything outside the wrapped units,
kept unsharded from its forward to the end of the backward, as FSDP does for the root) plus
two units' (``limit_all_gathers=True``: the unit computing and the one prefetched; without
the limit every unit's, the worst case of a CPU running ahead) and one unit's unsharded
gradient before its reduce-scatter. ZeRO-1/2 (DeepSpeed): the gradient reduce bucket (two
with ``overlap_comm``, which alternates between them) and the all-gather bucket of
``bucket_bytes`` each (default DeepSpeed's ``reduce_bucket_size`` = ``allgather_bucket_size``
= 5e8 elements, at most the model's gradient). ZeRO-3 is counted as FSDP ``full`` with one
unit per block (DeepSpeed fetches a module's parameters before it runs and prefetches the
next). Not counted: the CUDA context, allocator fragmentation, DDP's gradient buckets (a
second copy of the gradients unless ``gradient_as_bucket_view=True``, PyTorch's DDP
documentation), temporary buffers of kernels.

**Gradient accumulation** with communication on the last micro-batch only (DDP ``no_sync``,
FSDP ``no_sync`` / ``set_requires_gradient_sync(False)``, as sgdnet's ``accumulate=k`` nets
model it) keeps the whole unsharded gradient between micro-batches: with ``accumulate > 1``
gradients are not sharded (PyTorch FSDP's documentation of ``no_sync``, and pytorch/pytorch
PR #126166 on FSDP2's two flavours of accumulation: without the per-micro-batch
reduce-scatter each GPU stores the unsharded gradients).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProfileError, VariantError
from .compute import BYTES_PER_ELEM, GIB, Device, _builtin, get_device
from .ops import Op
from .optimizer import DTYPE_BYTES, profile_optimizer, profile_parameters, state_bytes_per_param
from .profile import ModelProfile

__all__ = ["ShardDegrees", "MemoryBreakdown", "DeviceMemoryError", "shard_degrees",
           "memory_per_gpu", "activation_bytes", "activation_bytes_per_layer", "memory_for",
           "known_device", "check_fits"]

_GB = 1e9
#: layer names of transformer blocks (GPT-2 ``transformer.h.<i>.``, BERT ``encoder.layer.<i>.``,
#: ViT ``blocks.<i>.``): the pattern of ``fsdp``'s ``wrap="block"`` (sgdnet.variants.fsdp)
_BLOCK = re.compile(r"^(.*?\b(?:h|layer|layers|blocks|block)\.\d+)\.")
#: DeepSpeed's default ``reduce_bucket_size`` and ``allgather_bucket_size``, elements
#: (DeepSpeed configuration docs, "ZeRO optimizations")
_DEEPSPEED_BUCKET_ELEMENTS = 5e8


class DeviceMemoryError(VariantError):
    """A configuration needs more memory per GPU than the device has."""


@dataclass(frozen=True)
class ShardDegrees:
    """Over how many GPUs parameters, gradients and optimizer states are sharded (1: each
    GPU holds all of them)."""

    params: int = 1
    grads: int = 1
    optimizer: int = 1

    def __post_init__(self) -> None:
        for k in ("params", "grads", "optimizer"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise VariantError(f"ShardDegrees.{k}={v!r} must be an integer >= 1 (GPUs the "
                                   "state is sharded over)")


def shard_degrees(variant: str, options: Mapping[str, Any], workers: int,
                  gpus_per_node: int = 1) -> ShardDegrees:
    """The shard degrees of a variant's options on ``workers`` GPUs.

    ``allreduce`` and every other variant, FSDP ``no_shard``: 1, 1, 1; ``zero`` stage 1:
    1, 1, N; stage 2 and FSDP ``shard_grad_op``: 1, N, N; stage 3 and FSDP ``full``: N, N, N;
    FSDP ``hybrid``: G, G, G with ``G = min(gpus_per_node, workers)`` (shard inside a node,
    replicate across nodes; ``gpus_per_node`` is the cluster topology's, 1 without one).
    Options missing take the interface's defaults (stage 2, sharding ``"full"``).

    Raises
    ------
    VariantError
        A bad worker count, an unknown ``stage`` or ``sharding``.
    """
    for what, v in (("workers", workers), ("gpus_per_node", gpus_per_node)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise VariantError(f"shard_degrees(): {what}={v!r} must be an integer >= 1")
    name = str(variant).strip().lower().replace("_", "-")
    n = workers
    if name == "zero":
        stage = options.get("stage", 2)
        table = {1: (1, 1, n), 2: (1, n, n), 3: (n, n, n)}
        if stage not in table or isinstance(stage, bool):
            raise VariantError(f"zero: stage={stage!r} must be 1, 2 or 3")
        return ShardDegrees(*table[stage])
    if name == "fsdp":
        sharding = options.get("sharding", "full")
        g = min(gpus_per_node, n)
        table = {"full": (n, n, n), "shard_grad_op": (1, n, n), "no_shard": (1, 1, 1),
                 "hybrid": (g, g, g)}
        if sharding not in table:
            raise VariantError(f"fsdp: sharding={sharding!r} must be one of {list(table)}")
        return ShardDegrees(*table[sharding])
    return ShardDegrees()


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU of one configuration (see the module docstring for what each counts).

    Attributes
    ----------
    params, grads, optimizer, activations, buffers : float
        Bytes of parameters, gradients, optimizer states (master weights included),
        activations and communication / gathered-parameter buffers.
    notes : tuple of str
        How each figure was counted (the activation rule, accumulation, ...).
    device : Device or None
        The device it was computed for, if any (:meth:`fits` checks against it by default).
    """

    params: float
    grads: float
    optimizer: float
    activations: float
    buffers: float
    notes: tuple[str, ...] = ()
    device: Device | None = field(default=None, compare=False)

    @property
    def total(self) -> float:
        """Sum of the parts, bytes."""
        return math.fsum((self.params, self.grads, self.optimizer, self.activations,
                          self.buffers))

    @property
    def model_states(self) -> float:
        """Parameters, gradients and optimizer states, bytes (the ZeRO paper's figure 1)."""
        return math.fsum((self.params, self.grads, self.optimizer))

    def fits(self, device: str | Device | None = None) -> bool:
        """Whether :attr:`total` is at most the device's memory (default: :attr:`device`).

        Raises
        ------
        ProfileError
            No device, or a device whose memory is unknown (``Device.memory`` None).
        """
        d = get_device(device) if device is not None else self.device
        if d is None or d.memory is None:
            raise ProfileError("fits(): the device's memory is unknown; give a Device with "
                               "memory (a built-in device, Device.from_datasheet(..., "
                               f"memory_gb=...) or a device file's memory_gb), got {d!r}")
        return self.total <= d.memory

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view, bytes (``total`` included)."""
        d: dict[str, Any] = {k: getattr(self, k) for k in ("params", "grads", "optimizer",
                                                          "activations", "buffers")}
        d["total"] = self.total
        d["notes"] = list(self.notes)
        if self.device is not None:
            d["device"] = self.device.name
            d["device_memory"] = self.device.memory
        return d

    def __str__(self) -> str:
        rows = [("parameters", self.params), ("gradients", self.grads),
                ("optimizer states", self.optimizer), ("activations", self.activations),
                ("buffers", self.buffers)]
        lines = [f"memory per GPU: {self.total / _GB:.2f} GB"]
        lines += [f"  {k:<17}{v / _GB:9.2f} GB" for k, v in rows]
        d = self.device
        if d is not None and d.memory is not None:
            verdict = "fits" if self.fits() else "DOES NOT FIT"
            lines.append(f"  {'device ' + d.name:<17}{d.memory / _GB:9.2f} GB "
                         f"({d.memory / GIB:g} GiB): {verdict}")
        lines += [f"  ({n})" for n in self.notes]
        return "\n".join(lines)


def _bytes(dtype: str, what: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ProfileError(f"unknown {what} {dtype!r}; use one of {list(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def _elem_bytes(profile: ModelProfile) -> int:
    return BYTES_PER_ELEM.get(profile.precision or "fp32", 4)


#: ops that write over their input (torchvision's ``ReLU(inplace=True)`` and ``out += identity``,
#: the op names of :mod:`sgdnet.workload.cnns`): no new activation memory
_IN_PLACE = frozenset({"relu", "add"})


def _ops_bytes(ops: Sequence[Op], batch: int, e: int) -> float:
    """Each op's output (half the elements it moves) for ``batch`` samples, bytes; in-place
    ops add nothing."""
    return batch * e * math.fsum(o.elems for o in ops if o.name not in _IN_PLACE) / 2


def _block_shape(ops: Sequence[Op], s: int, d_model: Any) -> tuple[float, float] | None:
    """``(h, a)`` of a transformer block from its attention-score op (``flops = 2 s^2 h``,
    ``elems = 2 s h + a s^2``), or ``(d_model, 0)`` for a block of fused attention (no
    score op, ``meta["d_model"]`` of :mod:`sgdnet.workload.llms`), or None."""
    sc = next((o for o in ops if o.name == "scores" and o.kind == "matmul"), None)
    if sc is None:
        fused = any(o.name == "flash_attention" for o in ops)
        ok = fused and isinstance(d_model, int) and d_model > 0
        return (float(d_model), 0.0) if ok else None
    if s < 1:
        return None
    h = sc.flops / (2.0 * s * s)
    a = (sc.elems - 2.0 * s * h) / (s * s)
    return (h, a) if h > 0 and a > 0 else None


def _block_bytes(h: float, a: float, s: int, b: int, e: int, dropout: bool,
                 selective: bool = False) -> float:
    """Korthikanti et al.'s activations of one transformer block (see the module docstring);
    ``selective``: without the attention terms ``a s^2 b`` (their Table 2)."""
    sbh, as2b = s * b * h, 0.0 if selective else a * s * s * b
    if dropout:
        return e * (16 * sbh + 2 * as2b) + (2 * sbh + as2b)
    return e * (16 * sbh + as2b)


def _policy(profile: ModelProfile, recompute: str | int | None) -> str | int:
    pol = profile.meta.get("recompute", "none") if recompute is None else recompute
    if pol is None or pol is False:
        return "none"
    if pol is True:
        return "full"
    if pol == 1:
        return "full"
    if not (pol in ("none", "full", "op")
            or (isinstance(pol, int) and not isinstance(pol, bool) and pol >= 1)):
        raise ProfileError(f"profile {profile.name!r}: activation-checkpointing policy "
                           f"{pol!r} is unknown; use 'none', 'full', 'op' or a positive int k "
                           "(every k-th block), as sgdnet.workload.llms.with_recompute records "
                           "it in meta['recompute']")
    return pol


def activation_bytes(profile: ModelProfile, recompute: str | int | None = None
                     ) -> tuple[float, str]:
    """Activations kept for the backward pass of one step of ``profile`` (one micro-batch of
    its batch size), bytes, and the rule used (see the module docstring).

    ``recompute`` is the activation-checkpointing policy (default the profile's
    ``meta["recompute"]``, as :func:`sgdnet.workload.llms.with_recompute` records it):
    ``"none"``, ``"full"``, ``"op"`` (selective) or an int ``k`` (blocks ``k-1, 2k-1, ...``
    checkpointed in full).

    Raises
    ------
    ProfileError
        An unknown policy.
    """
    e, b = _elem_bytes(profile), profile.batch_size
    meta = profile.meta
    pol = _policy(profile, recompute)
    every = 1 if pol == "full" else pol if isinstance(pol, int) else 0
    arch, s = meta.get("architecture"), meta.get("seq_len")
    transformer = isinstance(s, int) and s > 0 and (
        arch in ("gpt2", "bert", "vit") or (arch in ("llama", "mpt") and pol != "none"))
    loss = [Op.from_obj(o, f"profile {profile.name!r}: meta.loss_ops")
            for o in meta.get("loss_ops") or ()]
    blocks: dict[str, list[Op]] = {}
    other: list[Op] = list(loss)
    missing = 0
    for la in profile.layers:
        if la.ops is None:
            missing += 1
            continue
        m = _BLOCK.match(la.name) if transformer else None
        if m is None:
            other.extend(la.ops)
        else:
            blocks.setdefault(m.group(1), []).extend(la.ops)
    dropout = arch not in ("vit", "llama", "mpt")
    total, n_blocks, n_ckpt, n_fused, recomputed = 0.0, 0, 0, 0, 0.0
    for key, ops in blocks.items():
        shape = _block_shape(ops, s, meta.get("d_model"))
        if shape is None:
            other.extend(ops)
            continue
        h, a = shape
        # a fused-attention block (a = 0) keeps what its ops write
        full = _block_bytes(h, a, s, b, e, dropout) if a else _ops_bytes(ops, b, e)
        n_fused += 0 if a else 1
        index = int(re.search(r"(\d+)$", key).group(1))
        if every and (index + 1) % every == 0:
            # the block's input only, 2 s b h in 16 bits (parallelism's per-layer rule)
            total += activation_bytes_per_layer(b, s, h, 1, recompute=True) * e / 2
            recomputed = max(recomputed, full)
            n_ckpt += 1
        elif pol == "op":
            total += _block_bytes(h, a, s, b, e, dropout, selective=True)
        else:
            total += full
        n_blocks += 1
    total += recomputed + _ops_bytes(other, b, e)
    if missing == profile.n_layers and not loss:
        return 0.0, "activations not counted: the profile has no ops"
    rule = (f"activations: {n_blocks} transformer blocks by Korthikanti et al. 2022 Eq. 1, "
            f"the rest from the ops' outputs" if n_blocks else
            "activations: the ops' outputs (half the elements they move)")
    if n_fused:
        rule += f" ({n_fused} blocks of fused attention from their ops' outputs)"
    if n_ckpt:
        rule += (f"; activation checkpointing of {n_ckpt} blocks: their inputs kept, one "
                 "recomputed at a time")
    elif pol == "op" and n_blocks:
        rule += "; selective recomputation of the attention scores (Korthikanti Table 2)"
    rule += f", micro-batch {b}, {e} B per element"
    if missing:
        rule += f"; {missing} layers without ops not counted"
    return total, rule


def _units(profile: ModelProfile, wrap: Any, eb: float) -> tuple[list[float], float]:
    """Parameters of each wrapped unit and of the root (layers outside every unit)."""
    params = [la.grad_bytes / eb for la in profile.layers]
    names = [la.name for la in profile.layers]
    if wrap == "block":
        units: dict[str, float] = {}
        root = 0.0
        for name, p in zip(names, params):
            m = _BLOCK.match(name)
            if m is None:
                root += p
            else:
                units[m.group(1)] = units.get(m.group(1), 0.0) + p
        if not units:  # no transformer blocks: one unit per layer
            return params, 0.0
        return list(units.values()), root
    if isinstance(wrap, int) and not isinstance(wrap, bool) and wrap >= 1:
        return [math.fsum(params[i:i + wrap]) for i in range(0, len(params), wrap)], 0.0
    if isinstance(wrap, Sequence) and not isinstance(wrap, str):
        index = {n: i for i, n in enumerate(names)}
        seen: set[int] = set()
        out = []
        for unit in wrap:
            ids = [index[n] for n in unit if n in index]
            seen.update(ids)
            out.append(math.fsum(params[i] for i in ids))
        return out, math.fsum(p for i, p in enumerate(params) if i not in seen)
    raise VariantError(f"wrap={wrap!r} must be 'block', an integer >= 1 (layers per unit) or "
                       "a list of lists of layer names")


def memory_per_gpu(profile: ModelProfile, *, degrees: ShardDegrees = ShardDegrees(),
                   optimizer: str = "adamw", param_dtype: str = "bf16",
                   grad_dtype: str = "bf16", master_dtype: str = "fp32", accumulate: int = 1,
                   activations: bool = True, device: str | Device | None = None,
                   buffers: bool = True, wrap: Any = "block", limit_all_gathers: bool = True,
                   bucket_bytes: float | None = None, overlap_comm: bool = False,
                   n_params: float | None = None) -> MemoryBreakdown:
    """Bytes per GPU of training ``profile`` with these shard degrees and dtypes.

    Parameters
    ----------
    profile : ModelProfile
        One micro-batch's profile (its batch size is the micro-batch).
    degrees : ShardDegrees
        :func:`shard_degrees` of the configuration.
    optimizer : {"sgd", "momentum", "adam", "adamw", "lamb"}
        Sets the optimizer states (:func:`~sgdnet.workload.optimizer.state_bytes_per_param`).
    param_dtype, grad_dtype, master_dtype : {"fp32", "bf16", "fp16"}
        Dtypes of the parameters the model computes with, of the gradients, and of the
        weights the optimizer updates (a master copy when it differs from ``param_dtype``).
    accumulate : int
        Micro-batches per step; ``> 1`` keeps the whole gradient (see the module docstring).
    activations, buffers : bool
        Count them (False: 0).
    device : str or Device, optional
        Recorded in the breakdown (:meth:`MemoryBreakdown.fits`, ``str``).
    wrap, limit_all_gathers : optional
        FSDP's wrapping (``"block"``, layers per unit, or lists of layer names) and
        all-gather limit, for the buffers of sharded parameters.
    bucket_bytes, overlap_comm : optional
        ZeRO-1/2's communication buckets (bytes) and whether the reduce bucket is doubled.
    n_params : float, optional
        Parameter count (default :func:`~sgdnet.workload.optimizer.profile_parameters`).

    Raises
    ------
    ProfileError
        No parameter count, unknown optimizer or dtype.
    VariantError
        Bad ``accumulate`` or ``wrap``.
    """
    if isinstance(accumulate, bool) or not isinstance(accumulate, int) or accumulate < 1:
        raise VariantError(f"accumulate={accumulate!r} must be an integer >= 1")
    psi = profile_parameters(profile) if n_params is None else float(n_params)
    if psi is None or not psi > 0:
        raise ProfileError(f"profile {profile.name!r} has no parameter count (meta.parameters "
                           "or gradient bytes); memory per GPU needs one")
    pb, gb = _bytes(param_dtype, "parameter dtype"), _bytes(grad_dtype, "gradient dtype")
    _bytes(master_dtype, "master dtype")
    k = state_bytes_per_param(optimizer, master_dtype=master_dtype, param_dtype=param_dtype)
    notes = [f"{psi:,.0f} parameters, {optimizer}: K = {k} B per parameter of optimizer "
             f"states, parameters {param_dtype}, gradients {grad_dtype}"]
    g_deg = degrees.grads
    if accumulate > 1 and g_deg > 1:
        g_deg = 1
        notes.append(f"accumulate={accumulate}: the unsharded gradient is kept between "
                     "micro-batches")
    act = 0.0
    if activations:
        act, rule = activation_bytes(profile)
        notes.append(rule)
    buf = 0.0
    if buffers and degrees.params > 1:
        eb = profile.grad_bytes / psi if profile.grad_bytes > 0 else 4.0
        units, root = _units(profile, wrap, eb)
        big = max(units, default=0.0)
        flight = min(2, len(units)) if limit_all_gathers else len(units)
        buf = pb * (root + flight * big) + gb * max(big, root)
        notes.append(f"buffers: {len(units)} units (largest {big:,.0f} parameters), "
                     f"{flight} in flight, root unit of {root:,.0f} unsharded")
    elif buffers and bucket_bytes:
        buf = (3.0 if overlap_comm else 2.0) * float(bucket_bytes)
        notes.append("buffers: reduce bucket" + (" (x2, overlap_comm)" if overlap_comm else "")
                     + " and all-gather bucket")
    dev = get_device(device) if device is not None else None
    return MemoryBreakdown(psi * pb / degrees.params, psi * gb / g_deg,
                           psi * k / degrees.optimizer, act, buf, tuple(notes), dev)


def known_device(profile: ModelProfile, device: str | Device | None = None) -> Device | None:
    """The device a prediction runs on: ``device`` when given (a name, file or Device), else
    the profile's when it is a built-in device name (profiles of the builders and of
    :func:`~sgdnet.workload.compute.retime` record it), else None."""
    if device is not None:
        return get_device(device)
    return _builtin(profile.device) if isinstance(profile.device, str) else None


def memory_for(variant: str, options: Mapping[str, Any], profile: ModelProfile, cluster: Any,
               device: str | Device | None = None) -> MemoryBreakdown | None:
    """The memory per GPU of ``variant`` with its resolved ``options`` on ``cluster``, or None
    when the profile has no parameter count.

    ``zero`` / ``fsdp`` (and any variant with a ``dtype`` option): parameters and gradients
    in ``dtype`` (default bf16; gradients in ``reduce_dtype`` when given, FSDP's
    ``MixedPrecision.reduce_dtype``), fp32 master weights (none when ``dtype`` is fp32); other
    variants: fp32 parameters and gradients, no separate master copy (PyTorch AMP).
    The optimizer is the ``optimizer`` option, else the profile's (``meta["optimizer"]``),
    else AdamW.
    """
    if profile_parameters(profile) is None:
        return None
    topo = getattr(cluster, "topology", None)
    g = topo.gpus_per_node if topo is not None else 1
    name = str(variant).strip().lower().replace("_", "-")
    degrees = shard_degrees(name, options, cluster.workers, g)
    dt = options.get("dtype")
    if dt is None and name in ("zero", "fsdp"):
        dt = "bf16"
    pdt = gdt = dt if dt is not None else "fp32"
    if options.get("reduce_dtype") is not None:  # FSDP MixedPrecision.reduce_dtype
        gdt = options["reduce_dtype"]
    opt = options.get("optimizer") or profile_optimizer(profile)
    bucket = None
    if name == "zero" and options.get("stage", 2) in (1, 2):
        bucket = options.get("bucket_bytes")
        if bucket is None:
            bucket = _DEEPSPEED_BUCKET_ELEMENTS * DTYPE_BYTES[gdt]
        bucket = min(float(bucket), profile_parameters(profile) * DTYPE_BYTES[gdt])
    return memory_per_gpu(profile, degrees=degrees, optimizer=opt, param_dtype=pdt,
                          grad_dtype=gdt, master_dtype="fp32",
                          accumulate=int(options.get("accumulate", 1) or 1),
                          device=device, wrap=options.get("wrap", "block"),
                          limit_all_gathers=bool(options.get("limit_all_gathers", True)),
                          bucket_bytes=bucket, overlap_comm=bool(options.get("overlap_comm")))


def check_fits(memory: MemoryBreakdown | None, what: str = "this configuration") -> None:
    """Raise :class:`DeviceMemoryError` when ``memory`` is known, its device's memory is known
    and the total exceeds it; the message names the parts, the device and the fixes."""
    if memory is None or memory.device is None or memory.device.memory is None:
        return
    if memory.fits():
        return
    d = memory.device
    parts = ", ".join(f"{k} {v / _GB:.2f}" for k, v in (
        ("parameters", memory.params), ("gradients", memory.grads),
        ("optimizer states", memory.optimizer), ("activations", memory.activations),
        ("buffers", memory.buffers)))
    raise DeviceMemoryError(
        f"{what} needs {memory.total / _GB:.2f} GB per GPU ({parts} GB) but the {d.name} has "
        f"{d.memory / _GB:.2f} GB ({d.memory / GIB:g} GiB); fixes: shard more (variant "
        "'fsdp' with sharding='full', or 'zero' with stage=3, on more GPUs), accumulate=k "
        "with a k times smaller batch per GPU (activations of one micro-batch), a smaller "
        "batch per GPU, a device with more memory, or check_memory=False to predict the "
        "throughput anyway")


def activation_bytes_per_layer(micro_batch: int, seq: int, hidden: int, heads: int, tp: int = 1,
                               sequence_parallel: bool = False, recompute: bool = False) -> float:
    """Activation bytes one transformer layer keeps for its backward, per micro-batch (16-bit
    activations; Korthikanti et al. 2022, eqs. 1-2 and Table 2): ``s b h (34 + 5 a s / h)``
    without parallelism, ``s b h (10 + 24/t + 5 a s/(h t))`` with TP, ``s b h (34/t +
    5 a s/(h t))`` with TP and sequence parallelism, ``2 s b h`` with full recomputation (the
    layer's input only)."""
    s, b, h, a, t = float(seq), float(micro_batch), float(hidden), float(heads), float(tp)
    if recompute:
        return 2 * s * b * h
    if sequence_parallel:
        return s * b * h * (34 / t + 5 * a * s / (h * t))
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
