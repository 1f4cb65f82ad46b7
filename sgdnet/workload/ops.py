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

__all__ = ["Op", "OP_KINDS"]

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
