"""Transformer profiles from their architecture: BERT, GPT-2 and ViT.

A builder turns an architecture (layers, hidden size, heads, vocabulary, sequence length) into
a :class:`~sgdnet.workload.profile.ModelProfile` whose

* **layers** are the parameter-carrying modules in forward order, as PyTorch registers them
  (Hugging Face ``transformers`` for BERT and GPT-2, ``timm`` for ViT): every ``Linear``,
  ``LayerNorm`` and ``Embedding``; parameterless work (attention scores, softmax, dropout,
  GELU, residual adds) is folded into the preceding parameter module, as in the rest of the
  library;
* **tensors** are each module's ``weight`` and ``bias`` (fp32 gradients, 4 bytes per
  parameter), so the parameter count is exact from the architecture;
* **ops** are the kernels of an eager PyTorch implementation, one :class:`Op` per kernel, with
  FLOPs and elements moved per sample; the **times** are those ops on a
  :class:`~sgdnet.workload.compute.Device` by the roofline of :mod:`sgdnet.workload.compute`;
* **step costs**: the loss (cross-entropy over the output logits) as ``loss_s``, the
  optimizer's per-tensor update (memory-bound, :func:`~sgdnet.workload.optimizer.update_time`)
  as each tensor's ``update_s``; ``zero_grad`` is free (``set_to_none=True``, PyTorch's
  default since 2.0).

Shared weights (GPT-2's output projection is the token embedding) are counted once, in the
module that owns them first; the compute of the tied output projection runs in the final
LayerNorm's layer, where it happens in forward order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ProfileError
from .compute import Device, get_device, ops_time
from .ops import Op
from .optimizer import update_time
from .profile import Layer, ModelProfile, Tensor

__all__ = ["ArchLayer", "bert", "gpt2", "vit", "bert_large", "gpt2_medium", "gpt2_xl",
           "vit_l16", "BUILTIN"]

_GRAD_BYTES = 4  # fp32 gradients (AMP keeps fp32 parameters)


@dataclass
class ArchLayer:
    """A parameter module under construction: its tensors (parameter counts) and ops."""

    name: str
    params: list[tuple[str, int]]
    ops: list[Op]

    @property
    def n_params(self) -> int:
        """Parameters of the module."""
        return sum(n for _, n in self.params)


class _Builder:
    """Collects parameter modules; parameterless ops join the last module added."""

    def __init__(self) -> None:
        self.layers: list[ArchLayer] = []

    def module(self, name: str, params: list[tuple[str, int]], ops: list[Op]) -> None:
        self.layers.append(ArchLayer(name, params, ops))

    def op(self, *ops: Op) -> None:
        self.layers[-1].ops.extend(ops)

    def linear(self, name: str, n_in: int, n_out: int, tokens: int, bias: bool = True) -> None:
        params = [("weight", n_in * n_out)] + ([("bias", n_out)] if bias else [])
        self.module(name, params, [Op("matmul", "matmul", 2.0 * tokens * n_in * n_out,
                                      tokens * (n_in + n_out), n_in * n_out + n_out * bias)])

    def layernorm(self, name: str, d: int, tokens: int) -> None:
        self.module(name, [("weight", d), ("bias", d)],
                    [Op("layernorm", "vector", 8.0 * tokens * d, 2.0 * tokens * d, 2 * d)])

    def embedding(self, name: str, n: int, d: int, tokens: int) -> None:
        # forward gathers `tokens` rows; param_elems stands for the dense n x d gradient
        # PyTorch's embedding backward writes (it is doubled for the backward pass)
        self.module(name, [("weight", n * d)],
                    [Op("gather", "vector", 0.0, 2.0 * tokens * d, n * d / 2)])


def _ew(name: str, elems: float, flops: float = 0.0) -> Op:
    return Op(name, "vector", flops, elems)


def _attention_core(b: _Builder, s: int, d: int, h: int, *, mask: bool, dropout: bool,
                    fused: bool) -> None:
    """Scores, scale, mask, softmax, dropout, context and head merge.

    ``fused=False``: one kernel per eager PyTorch op; ``fused=True``: scale, mask, softmax
    and dropout in one kernel that reads the scores once and writes the probabilities once
    (NVIDIA's fused scale-mask-softmax, or what a graph fuser produces).
    """
    hs2 = h * s * s
    b.op(Op("scores", "matmul", 2.0 * s * s * d, 2.0 * s * d + hs2))
    if fused:
        b.op(_ew("fused_softmax", 2.0 * hs2, (7.0 + mask + dropout) * hs2))
    else:
        b.op(_ew("scale", 2.0 * hs2, hs2))
        if mask:
            b.op(_ew("mask", 2.0 * hs2, hs2))
        b.op(_ew("softmax", 2.0 * hs2, 5.0 * hs2))
        if dropout:
            b.op(_ew("attn_dropout", 2.0 * hs2, hs2))
    b.op(Op("context", "matmul", 2.0 * s * s * d, hs2 + 2.0 * s * d),
         _ew("merge_heads", 2.0 * s * d))


def _residual(b: _Builder, s: int, d: int, dropout: bool, fused: bool) -> None:
    if fused:  # dropout and residual add in one kernel: read two inputs, write one
        b.op(_ew("dropout_residual", 3.0 * s * d, 2.0 * s * d))
        return
    if dropout:
        b.op(_ew("dropout", 2.0 * s * d, s * d))
    b.op(_ew("residual_add", 3.0 * s * d, s * d))


def _gelu(b: _Builder, s: int, f: int, fused: bool = False) -> None:
    # fused: bias + GELU in the matmul's epilogue / one kernel with the bias (no extra pass)
    if not fused:
        b.op(_ew("gelu", 2.0 * s * f, 8.0 * s * f))


def _profile(name: str, arch: list[ArchLayer], loss_ops: list[Op], *, batch_size: int,
             device: str | Device, precision: str, optimizer: str, source: str,
             meta: dict) -> ModelProfile:
    dev = get_device(device)
    dev.check_precision(precision)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ProfileError(f"batch_size must be a positive integer, got {batch_size!r}")
    layers = []
    for la in arch:
        f, bwd = ops_time(la.ops, dev, precision, batch_size)
        tensors = tuple(Tensor(t, _GRAD_BYTES * n, update_time(n, dev, optimizer))
                        for t, n in la.params)
        layers.append(Layer(la.name, f, bwd, _GRAD_BYTES * la.n_params, None, tensors,
                            tuple(la.ops)))
    lf, lb = ops_time(loss_ops, dev, precision, batch_size)
    n = sum(la.n_params for la in arch)
    meta = dict(meta, builder="sgdnet.workload.transformers", parameters=n, optimizer=optimizer,
                compute_device=dev.name, efficiency=dev.efficiency,
                loss_ops=[o.to_dict() for o in loss_ops])
    return ModelProfile(name, layers, batch_size, dev.name, source, None, meta,
                        precision=precision, loss_s=lf + lb)


def _check(**kw: int) -> None:
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ProfileError(f"{k} must be a positive integer, got {v!r}")


def bert(name: str = "bert", *, n_layers: int, d_model: int, n_heads: int, d_ff: int | None = None,
         vocab: int = 30522, max_positions: int = 512, type_vocab: int = 2, seq_len: int = 128,
         mlm_positions: int | None = None, batch_size: int = 32, device: str | Device = "A100",
         precision: str = "fp16", optimizer: str = "lamb", fused: bool = True) -> ModelProfile:
    """BERT pre-training (``BertForPreTraining``: encoder, pooler, MLM and NSP heads).

    Post-LayerNorm encoder blocks with separate query/key/value projections. The MLM head
    runs on ``mlm_positions`` masked tokens per sequence (default ``ceil(0.15 * seq_len)``,
    the gathered masked positions of NVIDIA's implementation); its decoder weight is the
    word embedding (tied), its bias its own. The loss is MLM cross-entropy over the vocabulary
    at the masked positions plus the 2-way NSP loss.
    """
    d_ff = 4 * d_model if d_ff is None else d_ff
    _check(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff, vocab=vocab,
           seq_len=seq_len)
    if seq_len > max_positions:
        raise ProfileError(f"seq_len {seq_len} exceeds max_positions {max_positions}")
    s, d = seq_len, d_model
    m = math.ceil(0.15 * s) if mlm_positions is None else mlm_positions
    b = _Builder()
    b.embedding("embeddings.word_embeddings", vocab, d, s)
    b.embedding("embeddings.position_embeddings", max_positions, d, s)
    b.embedding("embeddings.token_type_embeddings", type_vocab, d, s)
    b.op(_ew("embedding_sum", 4.0 * s * d, 2.0 * s * d))
    b.layernorm("embeddings.LayerNorm", d, s)
    b.op(_ew("dropout", 2.0 * s * d, s * d))
    for i in range(n_layers):
        p = f"encoder.layer.{i}."
        for x in ("query", "key", "value"):
            b.linear(p + f"attention.self.{x}", d, d, s)
        _attention_core(b, s, d, n_heads, mask=True, dropout=True, fused=fused)
        b.linear(p + "attention.output.dense", d, d, s)
        _residual(b, s, d, dropout=True, fused=fused)
        b.layernorm(p + "attention.output.LayerNorm", d, s)
        b.linear(p + "intermediate.dense", d, d_ff, s)
        _gelu(b, s, d_ff, fused)
        b.linear(p + "output.dense", d_ff, d, s)
        _residual(b, s, d, dropout=True, fused=fused)
        b.layernorm(p + "output.LayerNorm", d, s)
    b.linear("pooler.dense", d, d, 1)
    b.op(_ew("tanh", 2.0 * d, 4.0 * d))
    b.op(_ew("gather_masked", 2.0 * m * d))
    b.linear("cls.predictions.transform.dense", d, d, m)
    _gelu(b, m, d, fused)
    b.layernorm("cls.predictions.transform.LayerNorm", d, m)
    b.module("cls.predictions.bias", [("bias", vocab)],
             [Op("decoder", "matmul", 2.0 * m * d * vocab, m * (d + vocab), vocab * d + vocab)])
    b.linear("cls.seq_relationship", d, 2, 1)
    loss = [Op("mlm_cross_entropy", "vector", 5.0 * m * vocab, 2.0 * m * vocab)]
    src = (f"compute model (sgdnet.workload.compute) of BERT pre-training: {n_layers} layers, "
           f"hidden {d}, {n_heads} heads, FFN {d_ff}, vocabulary {vocab}, sequence {s} tokens, "
           f"MLM on {m} masked positions; parameters exact from the architecture "
           "(Hugging Face BertForPreTraining module layout)")
    return _profile(name, b.layers, loss, batch_size=batch_size, device=device,
                    precision=precision, optimizer=optimizer, source=src,
                    meta={"architecture": "bert", "seq_len": s, "mlm_positions": m})


def gpt2(name: str = "gpt2", *, n_layers: int, d_model: int, n_heads: int, vocab: int = 50257,
         n_ctx: int = 1024, seq_len: int = 1024, batch_size: int = 8,
         device: str | Device = "A100", precision: str = "fp16",
         optimizer: str = "adamw", fused: bool = True) -> ModelProfile:
    """GPT-2 language-model training (``GPT2LMHeadModel``): pre-LayerNorm decoder blocks with a
    fused QKV projection, causal mask, tied output projection, cross-entropy over the
    vocabulary at every position."""
    _check(n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab=vocab, seq_len=seq_len)
    if seq_len > n_ctx:
        raise ProfileError(f"seq_len {seq_len} exceeds the context n_ctx {n_ctx}")
    s, d, f = seq_len, d_model, 4 * d_model
    b = _Builder()
    b.embedding("transformer.wte", vocab, d, s)
    b.embedding("transformer.wpe", n_ctx, d, s)
    b.op(_ew("embedding_sum", 3.0 * s * d, s * d), _ew("dropout", 2.0 * s * d, s * d))
    for i in range(n_layers):
        p = f"transformer.h.{i}."
        b.layernorm(p + "ln_1", d, s)
        b.linear(p + "attn.c_attn", d, 3 * d, s)
        _attention_core(b, s, d, n_heads, mask=True, dropout=True, fused=fused)
        b.linear(p + "attn.c_proj", d, d, s)
        _residual(b, s, d, dropout=True, fused=fused)
        b.layernorm(p + "ln_2", d, s)
        b.linear(p + "mlp.c_fc", d, f, s)
        _gelu(b, s, f, fused)
        b.linear(p + "mlp.c_proj", f, d, s)
        _residual(b, s, d, dropout=True, fused=fused)
    b.layernorm("transformer.ln_f", d, s)
    b.op(Op("lm_head", "matmul", 2.0 * s * d * vocab, s * (d + vocab), vocab * d))
    loss = [Op("cross_entropy", "vector", 5.0 * s * vocab, 2.0 * s * vocab)]
    src = (f"compute model (sgdnet.workload.compute) of GPT-2 training: {n_layers} layers, "
           f"hidden {d}, {n_heads} heads, vocabulary {vocab}, sequence {s} tokens; parameters "
           "exact from the architecture (Hugging Face GPT2LMHeadModel module layout, output "
           "projection tied to wte)")
    return _profile(name, b.layers, loss, batch_size=batch_size, device=device,
                    precision=precision, optimizer=optimizer, source=src,
                    meta={"architecture": "gpt2", "seq_len": s})


def vit(name: str = "vit", *, n_layers: int, d_model: int, n_heads: int, d_ff: int | None = None,
        patch: int = 16, image: int = 224, channels: int = 3, n_classes: int = 1000,
        batch_size: int = 64, device: str | Device = "A100", precision: str = "fp16",
        optimizer: str = "adamw", fused: bool = True) -> ModelProfile:
    """Vision Transformer image classification (``timm`` VisionTransformer): patch embedding
    (a stride-``patch`` convolution, i.e. a matmul per patch), class token and learned
    position embeddings, pre-LayerNorm blocks with fused QKV, no dropout (timm's default),
    final LayerNorm and a linear head on the class token."""
    d_ff = 4 * d_model if d_ff is None else d_ff
    _check(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff, patch=patch,
           image=image, channels=channels, n_classes=n_classes)
    if image % patch:
        raise ProfileError(f"image size {image} is not a multiple of the patch size {patch}")
    n_patch = (image // patch) ** 2
    s, d = n_patch + 1, d_model
    b = _Builder()
    b.linear("patch_embed.proj", channels * patch * patch, d, n_patch)
    b.op(_ew("im2col", 2.0 * channels * image * image))
    b.module("embed", [("cls_token", d), ("pos_embed", s * d)],
             [_ew("cat_cls", 2.0 * s * d), _ew("add_pos_embed", 3.0 * s * d, s * d)])
    for i in range(n_layers):
        p = f"blocks.{i}."
        b.layernorm(p + "norm1", d, s)
        b.linear(p + "attn.qkv", d, 3 * d, s)
        _attention_core(b, s, d, n_heads, mask=False, dropout=False, fused=fused)
        b.linear(p + "attn.proj", d, d, s)
        _residual(b, s, d, dropout=False, fused=fused)
        b.layernorm(p + "norm2", d, s)
        b.linear(p + "mlp.fc1", d, d_ff, s)
        _gelu(b, s, d_ff, fused)
        b.linear(p + "mlp.fc2", d_ff, d, s)
        _residual(b, s, d, dropout=False, fused=fused)
    b.layernorm("norm", d, s)
    b.linear("head", d, n_classes, 1)
    loss = [Op("cross_entropy", "vector", 5.0 * n_classes, 2.0 * n_classes)]
    src = (f"compute model (sgdnet.workload.compute) of ViT training: {n_layers} layers, "
           f"hidden {d}, {n_heads} heads, MLP {d_ff}, {image}x{image} images in {patch}x{patch} "
           f"patches ({s} tokens), {n_classes} classes; parameters exact from the architecture "
           "(timm VisionTransformer module layout)")
    return _profile(name, b.layers, loss, batch_size=batch_size, device=device,
                    precision=precision, optimizer=optimizer, source=src,
                    meta={"architecture": "vit", "seq_len": s, "image": image, "patch": patch})


def bert_large(**kw) -> ModelProfile:
    """BERT-large: 24 layers, hidden 1024, 16 heads (Devlin et al. 2019)."""
    return bert(**{"name": "bert_large", "n_layers": 24, "d_model": 1024, "n_heads": 16} | kw)


def gpt2_medium(**kw) -> ModelProfile:
    """GPT-2 medium: 24 layers, hidden 1024, 16 heads (Radford et al. 2019)."""
    return gpt2(**{"name": "gpt2_medium", "n_layers": 24, "d_model": 1024, "n_heads": 16} | kw)


def gpt2_xl(**kw) -> ModelProfile:
    """GPT-2 XL: 48 layers, hidden 1600, 25 heads (Radford et al. 2019)."""
    return gpt2(**{"name": "gpt2_xl", "n_layers": 48, "d_model": 1600, "n_heads": 25} | kw)


def vit_l16(**kw) -> ModelProfile:
    """ViT-L/16: 24 layers, hidden 1024, 16 heads, MLP 4096, 16x16 patches (Dosovitskiy et al.
    2021)."""
    return vit(**{"name": "vit_l16", "n_layers": 24, "d_model": 1024, "n_heads": 16} | kw)


#: The built-in transformer profiles shipped in ``models/`` (name -> builder keyword arguments
#: on top of the architecture): the configuration each file states.
BUILTIN = {
    "bert_large": (bert_large, {"seq_len": 128, "batch_size": 256, "device": "A100",
                                "precision": "fp16"}),
    "gpt2_medium": (gpt2_medium, {"seq_len": 1024, "batch_size": 8, "device": "A100",
                                  "precision": "fp16"}),
    "gpt2_xl": (gpt2_xl, {"seq_len": 1024, "batch_size": 4, "device": "H100",
                          "precision": "bf16"}),
    "vit_l16": (vit_l16, {"batch_size": 64, "device": "A100", "precision": "fp16"}),
}
