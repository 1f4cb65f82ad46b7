"""Decoder-only LLM profiles from their architecture: Llama (1/2/3, Code Llama) and MPT.

The builders follow :mod:`sgdnet.workload.transformers` (one layer per parameter-carrying
module in PyTorch's forward order, exact parameter counts, one :class:`Op` per kernel timed by
the roofline of :mod:`sgdnet.workload.compute`) for the two families that the published FSDP
throughput tables train (``tests/data/published_sharded.yaml``):

* **Llama** (Touvron et al. 2023; Meta's ``llama`` reference code, torchtitan's
  ``models/llama/model.py``, IBM's ``fms`` ``LLaMA``): RMSNorm before attention and MLP,
  rotary position embeddings on queries and keys (no parameters), grouped-query attention
  (``n_kv_heads`` key/value heads), a SwiGLU MLP (``w2(silu(w1 x) * w3 x)``), no biases, an
  untied output projection;
* **MPT** (MosaicML ``llm-foundry`` ``mpt_causal_lm`` as its benchmark tables ran it): GPT-2
  style pre-LayerNorm blocks with biases, a fused ``Wqkv`` projection, GELU MLP of
  ``expansion_ratio * d_model``, learned position embeddings of ``max_seq_len`` rows and the
  output projection tied to the token embedding.

Attention is **fused** (FlashAttention / PyTorch SDPA, which all these sources use): one
kernel reads queries, keys and values and writes the context, the ``s x s`` scores never
reach memory; with the causal mask it computes half of the ``s x s`` blocks, so its forward
FLOPs are ``2 s^2 d`` per sequence (``4 s^2 d`` without the mask). The compute model charges a
backward pass twice the forward; FlashAttention's backward recomputes the scores (five
matrix products for the forward's two, i.e. 2.5x), which the model does not see (under 3 % of
a 7B model's step at 2,048 tokens).

Activation checkpointing (recomputation) is a builder option, ``recompute``: the checkpointed
blocks' forward work is charged again in their backward pass (:func:`with_recompute`).

The FLOP count the sources use for MFU is :func:`train_flops_per_token` (``6 N + 12 L d s``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import ProfileError
from .compute import Device, get_device, op_time
from .ops import Op
from .profile import ModelProfile
from .transformers import _Builder, _check, _ew, _profile

__all__ = ["llama", "mpt", "with_recompute", "train_flops_per_token", "LLAMA_CONFIGS",
           "MPT_CONFIGS", "llama_config", "mpt_config", "RECOMPUTE_POLICIES"]

#: The activation-checkpointing policies :func:`with_recompute` knows (besides an int ``k``:
#: every ``k``-th block, as torchtitan's ``selective_ac_option="k"`` and fms-fsdp's
#: ``selective_checkpointing=k``).
RECOMPUTE_POLICIES = ("none", "full", "op")

#: Llama architectures: (layers, d_model, heads, kv heads, FFN width, vocabulary) as the
#: models' ``params.json`` / the frameworks' flavour tables give them (FFN widths from
#: ``multiple_of`` and ``ffn_dim_multiplier``: Llama 2 7B 11008, 13B 13824, 70B 28672; Llama 3
#: 8B 14336, 70B 28672; Code Llama 34B 22016 as IBM fms-fsdp's ``34b`` with vocabulary 32000).
LLAMA_CONFIGS = {
    "llama2_7b": (32, 4096, 32, 32, 11008, 32000),
    "llama2_13b": (40, 5120, 40, 40, 13824, 32000),
    "llama2_34b": (48, 8192, 64, 8, 22016, 32000),
    "llama2_70b": (80, 8192, 64, 8, 28672, 32000),
    "llama3_8b": (32, 4096, 32, 8, 14336, 128256),
    "llama3_70b": (80, 8192, 64, 8, 28672, 128256),
}

#: MPT sizes of llm-foundry's ``scripts/train/yamls/pretrain/mpt-*.yaml`` (commit 5e85bd62,
#: the benchmark tables' configurations): (layers, d_model, heads); expansion ratio 4,
#: vocabulary 50368 for all.
MPT_CONFIGS = {
    "mpt_125m": (12, 768, 12), "mpt_350m": (24, 1024, 16), "mpt_760m": (24, 1536, 12),
    "mpt_1b": (24, 2048, 16), "mpt_3b": (32, 2560, 20), "mpt_7b": (32, 4096, 32),
    "mpt_13b": (40, 5120, 40), "mpt_30b": (48, 7168, 56), "mpt_70b": (80, 8192, 64),
}


def train_flops_per_token(n_params: float, n_layers: int, d_model: int, seq_len: int) -> float:
    """Training FLOPs per token as the MFU tables count them: ``6 N + 12 L d s``.

    ``6 N``: a multiply-add per parameter in forward, twice that in backward; ``12 L d s``:
    the attention scores and context (``4 s^2 d`` forward FLOPs per layer and sequence, times
    3 for forward + backward, per token), without the causal mask's saving. This is
    llm-foundry's ``scripts/train/benchmarking/README.md`` MFU formula (``3 * flops_per_seq
    + 3 * attn_flops_per_seq``) and torchtitan's ``get_num_flop_per_token`` (``6 * num_params
    + 12 * l * h * q * t``); both take ``N`` with the embeddings.
    """
    return 6.0 * n_params + 12.0 * n_layers * d_model * seq_len


def _flash_attention(b: _Builder, s: int, d: int, kv_dim: int, h: int, causal: bool) -> None:
    """Fused attention: reads q, k, v and writes the context and the per-row log-sum-exp."""
    b.op(Op("flash_attention", "matmul", (2.0 if causal else 4.0) * s * s * d,
            s * (2 * d + 2 * kv_dim) + h * s))


def _rmsnorm(b: _Builder, name: str, d: int, s: int) -> None:
    # square, mean, rsqrt, scale, weight: ~4 FLOPs per element; read x, write y
    b.module(name, [("weight", d)], [Op("rmsnorm", "vector", 4.0 * s * d, 2.0 * s * d, d)])


def _block_index(name: str) -> int | None:
    m = re.search(r"(?:^|\.)(?:layers|blocks|h)\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def with_recompute(profile: ModelProfile, policy: str | int,
                   device: str | Device | None = None) -> ModelProfile:
    """The profile with activation checkpointing: recomputed forward work added to backward.

    Each layer of a checkpointed transformer block (a layer whose name has ``layers.<i>.``,
    ``blocks.<i>.`` or ``h.<i>.``) gets the forward time of its recomputed ops added to its
    backward time, each op timed by the compute model on ``device`` at the profile's
    precision and batch.

    Parameters
    ----------
    profile : ModelProfile
        A profile with ops on its layers (built by this module or by
        :mod:`sgdnet.workload.transformers`).
    policy : {"none", "full", "op"} or int
        ``"full"``: every block's forward is run again (PyTorch ``checkpoint_wrapper`` on each
        block; llm-foundry's ``activation_checkpointing: true``; torchtitan's ``full``).
        ``k`` (int >= 1): blocks ``k-1, 2k-1, ...`` are checkpointed in full, the others not
        (torchtitan's selective layer AC ``selective_ac_option="k"``; fms-fsdp's
        ``selective_checkpointing=k``; 1 = full). ``"op"``: torchtitan's selective op AC
        (``parallelize_llama.py``: outputs of matrix products and attention are saved except
        every second matrix product of a block): in every block, the even-numbered matrix
        products and all elementwise / normalisation ops are recomputed, attention is not.
        ``"none"``: unchanged.
    device : str or Device, optional
        The device the times are for (default: the profile's, which must then be a built-in
        device name).

    Raises
    ------
    ProfileError
        Unknown policy, a profile without ops or without transformer blocks, or no precision.
    """
    if isinstance(policy, bool) or not (policy in RECOMPUTE_POLICIES or (
            isinstance(policy, int) and policy >= 1)):
        raise ProfileError(f"unknown activation-checkpointing policy {policy!r}; use one of "
                           f"{list(RECOMPUTE_POLICIES)} or a positive int k (every k-th block)")
    if policy == "none":
        return profile
    if not profile.has_ops or profile.precision is None:
        raise ProfileError(f"profile {profile.name!r} needs ops on every layer and a precision "
                           "for recomputation to be timed; build it with sgdnet.workload.llms "
                           "or sgdnet.workload.transformers")
    dev = get_device(device if device is not None else profile.device)
    every = 1 if policy == "full" else policy
    blocks = {i for i in map(_block_index, (la.name for la in profile.layers)) if i is not None}
    if not blocks:
        raise ProfileError(f"profile {profile.name!r} has no transformer blocks (layer names "
                           "with 'layers.<i>.', 'blocks.<i>.' or 'h.<i>.') to checkpoint")
    mm_count: dict[int, int] = {}
    lays = []
    for la in profile.layers:
        i = _block_index(la.name)
        extra = 0.0
        if i is not None and policy == "op":
            for o in la.ops or ():
                if o.name == "flash_attention" or o.name == "scores" or o.name == "context":
                    continue
                if o.kind == "matmul":
                    mm_count[i] = mm_count.get(i, 0) + 1
                    if mm_count[i] % 2:
                        continue
                extra += op_time(o, dev, profile.precision, profile.batch_size)
        elif i is not None and isinstance(every, int) and (i + 1) % every == 0:
            extra = sum(op_time(o, dev, profile.precision, profile.batch_size)
                        for o in la.ops or ())
        lays.append(replace(la, backward_s=la.backward_s + extra) if extra else la)
    what = "every block" if every == 1 else (
        "selective op (every second matrix product and the elementwise ops of each block)"
        if policy == "op" else f"every {every}-th block")
    return profile._copy(layers=lays, meta=dict(profile.meta, recompute=policy),
                         source=profile.source + f"; activation checkpointing of {what}")


def llama(name: str = "llama", *, n_layers: int, d_model: int, n_heads: int,
          n_kv_heads: int | None = None, d_ff: int, vocab: int = 32000, seq_len: int = 4096,
          batch_size: int = 1, device: str | Device = "A100", precision: str = "bf16",
          optimizer: str = "adamw", recompute: str | int = "none") -> ModelProfile:
    """Llama language-model training (``Transformer`` of Meta's reference code / torchtitan).

    Layers: ``tok_embeddings``; per block ``attention_norm`` (RMSNorm), ``attention.wq``,
    ``wk``, ``wv`` (``n_kv_heads * head_dim`` outputs), ``wo``, ``ffn_norm``,
    ``feed_forward.w1``, ``w3``, ``w2``; ``norm`` and the untied ``output``. Rotary embeddings
    run on queries and keys after their projections; the loss is cross-entropy over the
    vocabulary at every position.

    Examples
    --------
    >>> llama(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336,
    ...       vocab=128256).meta["parameters"]   # Llama 3 8B
    8030261248
    """
    kv = n_heads if n_kv_heads is None else n_kv_heads
    _check(n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=kv, d_ff=d_ff,
           vocab=vocab, seq_len=seq_len)
    if d_model % n_heads or n_heads % kv:
        raise ProfileError(f"d_model {d_model} must be a multiple of n_heads {n_heads}, and "
                           f"n_heads a multiple of n_kv_heads {kv}")
    s, d, f = seq_len, d_model, d_ff
    kvd = kv * (d // n_heads)
    b = _Builder()
    b.embedding("tok_embeddings", vocab, d, s)
    for i in range(n_layers):
        p = f"layers.{i}."
        _rmsnorm(b, p + "attention_norm", d, s)
        b.linear(p + "attention.wq", d, d, s, bias=False)
        b.linear(p + "attention.wk", d, kvd, s, bias=False)
        b.linear(p + "attention.wv", d, kvd, s, bias=False)
        # rotary on q and k: read, rotate (complex multiply: ~3 FLOPs/element), write
        b.op(_ew("rotary", 2.0 * s * (d + kvd), 3.0 * s * (d + kvd)))
        _flash_attention(b, s, d, kvd, n_heads, causal=True)
        b.linear(p + "attention.wo", d, d, s, bias=False)
        b.op(_ew("residual_add", 3.0 * s * d, s * d))
        _rmsnorm(b, p + "ffn_norm", d, s)
        b.linear(p + "feed_forward.w1", d, f, s, bias=False)
        b.linear(p + "feed_forward.w3", d, f, s, bias=False)
        # silu(w1 x) * w3 x: read both, write one; silu ~4 FLOPs + the product
        b.op(_ew("swiglu", 3.0 * s * f, 5.0 * s * f))
        b.linear(p + "feed_forward.w2", f, d, s, bias=False)
        b.op(_ew("residual_add", 3.0 * s * d, s * d))
    _rmsnorm(b, "norm", d, s)
    b.linear("output", d, vocab, s, bias=False)
    loss = [Op("cross_entropy", "vector", 5.0 * s * vocab, 2.0 * s * vocab)]
    src = (f"compute model (sgdnet.workload.compute) of Llama training: {n_layers} layers, "
           f"hidden {d}, {n_heads} heads ({kv} key/value heads), SwiGLU FFN {f}, vocabulary "
           f"{vocab}, sequence {s} tokens, fused causal attention; parameters exact from the "
           "architecture (Meta llama / torchtitan Transformer module layout, untied output)")
    prof = _profile(name, b.layers, loss, batch_size=batch_size, device=device,
                    precision=precision, optimizer=optimizer, source=src,
                    meta={"architecture": "llama", "seq_len": s, "n_layers": n_layers,
                          "d_model": d, "n_heads": n_heads, "n_kv_heads": kv, "d_ff": f,
                          "vocab": vocab})
    prof = prof._copy(meta=dict(prof.meta, builder="sgdnet.workload.llms"))
    return with_recompute(prof, recompute, device)


def mpt(name: str = "mpt", *, n_layers: int, d_model: int, n_heads: int,
        expansion_ratio: int = 4, vocab: int = 50368, seq_len: int = 2048,
        max_seq_len: int | None = None, batch_size: int = 1, device: str | Device = "A100",
        precision: str = "bf16", optimizer: str = "adamw",
        recompute: str | int = "none") -> ModelProfile:
    """MPT language-model training (llm-foundry ``mpt_causal_lm`` with the defaults of its
    benchmark runs: ``learned_pos_emb``, biases, ``low_precision_layernorm``, fused causal
    attention ``attn_impl: triton``, output tied to ``wte``).

    Layers: ``transformer.wte``, ``transformer.wpe`` (``max_seq_len`` rows, default
    ``seq_len``: the benchmark sets ``max_seq_len`` to the run's sequence length); per block
    ``norm_1``, ``attn.Wqkv``, ``attn.out_proj``, ``norm_2``, ``ffn.up_proj``,
    ``ffn.down_proj``; ``transformer.norm_f`` (which runs the tied output projection).

    Examples
    --------
    >>> mpt(n_layers=32, d_model=4096, n_heads=32).meta["parameters"]   # MPT-7B at 2,048
    6658859008
    """
    msl = seq_len if max_seq_len is None else max_seq_len
    _check(n_layers=n_layers, d_model=d_model, n_heads=n_heads, expansion_ratio=expansion_ratio,
           vocab=vocab, seq_len=seq_len, max_seq_len=msl)
    if seq_len > msl:
        raise ProfileError(f"seq_len {seq_len} exceeds max_seq_len {msl}")
    s, d, f = seq_len, d_model, expansion_ratio * d_model
    b = _Builder()
    b.embedding("transformer.wte", vocab, d, s)
    b.embedding("transformer.wpe", msl, d, s)
    b.op(_ew("embedding_sum", 3.0 * s * d, s * d))
    for i in range(n_layers):
        p = f"transformer.blocks.{i}."
        b.layernorm(p + "norm_1", d, s)
        b.linear(p + "attn.Wqkv", d, 3 * d, s)
        _flash_attention(b, s, d, d, n_heads, causal=True)
        b.linear(p + "attn.out_proj", d, d, s)
        b.op(_ew("residual_add", 3.0 * s * d, s * d))
        b.layernorm(p + "norm_2", d, s)
        b.linear(p + "ffn.up_proj", d, f, s)
        b.op(_ew("gelu", 2.0 * s * f, 8.0 * s * f))
        b.linear(p + "ffn.down_proj", f, d, s)
        b.op(_ew("residual_add", 3.0 * s * d, s * d))
    b.layernorm("transformer.norm_f", d, s)
    b.op(Op("lm_head", "matmul", 2.0 * s * d * vocab, s * (d + vocab), vocab * d))
    loss = [Op("cross_entropy", "vector", 5.0 * s * vocab, 2.0 * s * vocab)]
    src = (f"compute model (sgdnet.workload.compute) of MPT training: {n_layers} layers, hidden "
           f"{d}, {n_heads} heads, MLP {f}, vocabulary {vocab}, sequence {s} tokens "
           f"(learned positions for {msl}), fused causal attention; parameters exact from the "
           "architecture (llm-foundry MPTForCausalLM module layout, output tied to wte)")
    prof = _profile(name, b.layers, loss, batch_size=batch_size, device=device,
                    precision=precision, optimizer=optimizer, source=src,
                    meta={"architecture": "mpt", "seq_len": s, "n_layers": n_layers,
                          "d_model": d, "n_heads": n_heads, "d_ff": f, "vocab": vocab})
    prof = prof._copy(meta=dict(prof.meta, builder="sgdnet.workload.llms"))
    return with_recompute(prof, recompute, device)


def llama_config(size: str, **kw) -> ModelProfile:
    """A Llama of :data:`LLAMA_CONFIGS` by name (``"llama3_8b"``...), other arguments as
    :func:`llama`'s."""
    if size not in LLAMA_CONFIGS:
        raise ProfileError(f"unknown Llama size {size!r}; use one of {list(LLAMA_CONFIGS)}")
    n, d, h, kv, f, v = LLAMA_CONFIGS[size]
    return llama(**{"name": size, "n_layers": n, "d_model": d, "n_heads": h, "n_kv_heads": kv,
                    "d_ff": f, "vocab": v} | kw)


def mpt_config(size: str, **kw) -> ModelProfile:
    """An MPT of :data:`MPT_CONFIGS` by name (``"mpt_7b"``...), other arguments as
    :func:`mpt`'s."""
    if size not in MPT_CONFIGS:
        raise ProfileError(f"unknown MPT size {size!r}; use one of {list(MPT_CONFIGS)}")
    n, d, h = MPT_CONFIGS[size]
    return mpt(**{"name": size, "n_layers": n, "d_model": d, "n_heads": h} | kw)
