"""Architecture-level cost of one operation: what the compute model needs to time it.

An :class:`Op` is one kernel-sized piece of a layer's forward pass (a matrix multiply, a
softmax, a LayerNorm...), described by what it costs *per sample* and what it costs once per
pass, independently of any device:

* ``flops``: floating-point operations of the forward pass per sample (a multiply-add is 2);
* ``elems``: tensor elements read plus written by the forward pass per sample (activations);
* ``param_elems``: parameter elements read once per forward pass (independent of the batch).

``kind`` says which peak applies: ``"matmul"`` runs on the matrix units (tensor cores) where
the precision allows it, ``"vector"`` on the ordinary ALUs (elementwise ops, reductions,
normalisations). Bytes follow from elements and the precision; times from a
:class:`~sgdnet.workload.compute.Device` (see :mod:`sgdnet.workload.compute`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ProfileError

__all__ = ["Op", "OP_KINDS", "conv2d_op", "linear_op", "batchnorm_op", "eltwise_op",
           "pool_op", "softmax_xent_op", "matmul_flops"]

#: The two kinds of operation the compute model distinguishes.
OP_KINDS = ("matmul", "vector")
_OP_KEYS = ("name", "kind", "flops", "elems", "param_elems")


@dataclass(frozen=True)
class Op:
    """Forward cost of one operation of a layer, per sample (see the module docstring).

    Parameters
    ----------
    name : str
        Short label (``"qkv"``, ``"softmax"``...).
    kind : {"matmul", "vector"}
        Which peak FLOP rate applies.
    flops : float
        Forward FLOPs per sample (>= 0).
    elems : float
        Activation elements read + written per sample in forward (>= 0).
    param_elems : float
        Parameter elements read per forward pass, batch-independent (>= 0).

    Raises
    ------
    ProfileError
        Unknown kind, or a negative / non-finite number.
    """

    name: str
    kind: str
    flops: float
    elems: float
    param_elems: float = 0.0

    def __post_init__(self) -> None:
        self._check("<op>")

    def _check(self, where: str) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"{where}: op name must be a non-empty string, got {self.name!r}")
        if self.kind not in OP_KINDS:
            raise ProfileError(f"{where}: op {self.name!r}: kind {self.kind!r} is not one of "
                               f"{list(OP_KINDS)}")
        for f in ("flops", "elems", "param_elems"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ProfileError(f"{where}: op {self.name!r}: field {f!r}: {v!r} is not a "
                                   "finite non-negative number")
            object.__setattr__(self, f, float(v))

    def to_dict(self) -> dict:
        """JSON-ready dict (``param_elems`` omitted when 0)."""
        d = {"name": self.name, "kind": self.kind, "flops": self.flops, "elems": self.elems}
        if self.param_elems:
            d["param_elems"] = self.param_elems
        return d

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> Op:
        """An Op from an Op or a mapping with the keys of :meth:`to_dict`."""
        if isinstance(obj, Op):
            return obj
        if not isinstance(obj, Mapping):
            raise ProfileError(f"{where}: expected an op object {{name, kind, flops, elems"
                               f"[, param_elems]}}, got {obj!r}")
        unknown = sorted(set(obj) - set(_OP_KEYS))
        missing = [k for k in ("name", "kind", "flops", "elems") if k not in obj]
        if unknown or missing:
            raise ProfileError(f"{where}: op keys: unknown {unknown}, missing {missing}; an op "
                               f"has {list(_OP_KEYS)}")
        op = cls.__new__(cls)
        for k in _OP_KEYS:
            object.__setattr__(op, k, obj.get(k, 0.0))
        op._check(where)
        return op


# ----------------------------------------------------------------- CNN building blocks
# One op per kernel of an eager PyTorch / cuDNN training step, per sample. FLOPs count a
# multiply-add as 2; a convolution's or linear layer's bias add (fused into its epilogue by
# cuDNN / cuBLAS) is not counted, so ``matmul_flops / 2`` is the multiply-accumulate count
# that torchvision's model table reports (its ``GFLOPS`` column, ``_ops`` in the weights'
# metadata, counts multiply-accumulates of convolutions and linear layers).


def conv2d_op(c_in: int, c_out: int, kh: int, kw: int, out_hw: float, in_elems: float, *,
              groups: int = 1, bias: bool = False, name: str = "conv") -> Op:
    """A 2-D convolution: ``2 * (c_in / groups) * kh * kw`` FLOPs per output element.

    Parameters
    ----------
    c_in, c_out, kh, kw : int
        Channels in and out, kernel height and width.
    out_hw : float
        Output spatial positions per sample (``H_out * W_out``).
    in_elems : float
        Input activation elements per sample (read once).
    groups : int
        Convolution groups (ResNeXt: 32).
    bias : bool
        Whether the layer has a bias (read as a parameter).
    """
    if groups < 1 or c_in % groups or c_out % groups:
        raise ProfileError(f"conv {name!r}: groups {groups} does not divide channels "
                           f"{c_in} -> {c_out}")
    out = c_out * out_hw
    w = c_out * (c_in // groups) * kh * kw
    return Op(name, "matmul", 2.0 * (c_in // groups) * kh * kw * out, in_elems + out,
              w + (c_out if bias else 0))


def linear_op(n_in: int, n_out: int, *, bias: bool = True, tokens: float = 1,
              name: str = "linear") -> Op:
    """A fully connected layer on ``tokens`` rows per sample."""
    return Op(name, "matmul", 2.0 * tokens * n_in * n_out, tokens * (n_in + n_out),
              n_in * n_out + (n_out if bias else 0))


def batchnorm_op(elems: float, channels: int, name: str = "batchnorm") -> Op:
    """Training-mode batch normalisation of ``elems`` elements per sample: one read and one
    write per element, 8 FLOPs per element (mean, variance, normalise, scale and shift; the
    same count as the transformers' LayerNorm), gamma/beta (2 per channel) read."""
    return Op(name, "vector", 8.0 * elems, 2.0 * elems, 2 * channels)


def eltwise_op(name: str, elems_in: float, elems_out: float, flops_per_out: float = 1.0
               ) -> Op:
    """An elementwise kernel (ReLU, residual add, dropout, concatenation copy): reads
    ``elems_in``, writes ``elems_out`` elements per sample."""
    return Op(name, "vector", flops_per_out * elems_out, elems_in + elems_out)


def pool_op(name: str, in_elems: float, out_elems: float, window: int) -> Op:
    """Max / average pooling: ``window`` (kernel area) FLOPs per output element."""
    return Op(name, "vector", float(window) * out_elems, in_elems + out_elems)


def softmax_xent_op(classes: int, name: str = "cross_entropy") -> Op:
    """Softmax cross-entropy over ``classes`` logits per sample (5 FLOPs per logit, read and
    written once; the count the transformer builders use)."""
    return Op(name, "vector", 5.0 * classes, 2.0 * classes)


def matmul_flops(ops: Any) -> float:
    """Total forward FLOPs per sample of the ``matmul`` ops of an iterable of ops."""
    return math.fsum(o.flops for o in ops if o.kind == "matmul")
