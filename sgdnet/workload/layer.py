"""The parts of a model profile: :class:`Layer` (forward/backward/update costs, gradient bytes,
its tensors and ops), :class:`Tensor`, :class:`Message` (what one communication carries), the
schema's keys and the validators of their values. :class:`~sgdnet.workload.profile.ModelProfile`
holds the layers."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import units
from ..errors import ProfileError, UnitError
from ..limits import limit_problem
from . import _quantity as _q
from .ops import Op

__all__ = ["Layer", "Tensor", "Message", "SCHEMA_VERSION", "GRANULARITIES", "PRECISIONS"]

SCHEMA_VERSION = 2

#: Communication granularities understood by :meth:`ModelProfile.messages`.
GRANULARITIES = ("layer", "tensor", "bucket")
#: Numeric precisions a profile's times can be stated for (see :mod:`sgdnet.workload.compute`).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")

_LAYER_KEYS = ("name", "forward_s", "backward_s", "grad_bytes", "cv", "tensors", "ops")
_LAYER_V2 = ("tensors", "ops")
_TOP_KEYS = ("schema_version", "name", "batch_size", "device", "source", "cv", "layers",
             "totals", "meta", "precision", "zero_grad_s", "loss_s", "optimizer_s")
_TOP_V2 = ("precision", "zero_grad_s", "loss_s", "optimizer_s")
_STEP_COSTS = ("zero_grad_s", "loss_s", "optimizer_s")
_TENSOR_KEYS = ("name", "bytes", "update_s")


def _where(path: str | os.PathLike | None) -> str:
    return str(path) if path is not None else "<profile>"


def _number(value: Any, field: str, where: str, *, kind: str) -> float:
    """Validate a non-negative finite quantity; strings with units are parsed."""
    if isinstance(value, str):
        try:
            x = _q.seconds(value, what=field) if kind == "time" else units.nbytes(value, what=field)
        except UnitError as e:
            raise ProfileError(f"{where}: field {field!r}: {e}") from None
        return x
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        unit = "seconds" if kind == "time" else "bytes"
        raise ProfileError(
            f"{where}: field {field!r}: expected a number of {unit}, got {value!r} "
            f"({type(value).__name__})"
        )
    x = units.to_float(value, f"{where}: field {field!r}", ProfileError)
    if not math.isfinite(x) or x < 0:
        unit = "seconds" if kind == "time" else "bytes"
        raise ProfileError(
            f"{where}: field {field!r}: {value!r} is not a valid duration/size; give a finite, "
            f"non-negative number of {unit}"
        )
    if kind == "time":
        why = limit_problem(x, "max_firing_s")
        if why is not None:
            raise ProfileError(f"{where}: field {field!r}: {value!r} s {why}")
    return x


def _cv(value: Any, field: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{where}: field {field!r}: CV must be a number or null, got {value!r}")
    x = units.to_float(value, f"{where}: field {field!r}", ProfileError)
    if not math.isfinite(x) or x < 0:
        raise ProfileError(
            f"{where}: field {field!r}: CV {value!r} makes no sense; give a finite coefficient of "
            "variation >= 0 (e.g. 0.05 for 5% noise) or null"
        )
    return x


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor of a layer, as a framework communicates and updates it.

    Parameters
    ----------
    name : str
        Tensor name within its layer (``"weight"``, ``"bias"``).
    nbytes : float or str
        Bytes of its gradient (= bytes of the parameter in the gradient's precision).
    update_s : float or str
        Time the optimizer takes to update this tensor on the reference device, seconds
        (0 when unknown or folded elsewhere).

    Raises
    ------
    ProfileError
        Empty name, negative or non-finite size or time.
    """

    name: str
    nbytes: float
    update_s: float = 0.0

    def __post_init__(self) -> None:
        self._validate("<tensor>", "")

    def _validate(self, where: str, prefix: str) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"{where}: field {prefix + 'name'!r}: tensor name must be a "
                               f"non-empty string, got {self.name!r}")
        label = prefix or f"tensor {self.name!r}."
        object.__setattr__(self, "nbytes",
                           _number(self.nbytes, label + "bytes", where, kind="bytes"))
        object.__setattr__(self, "update_s",
                           _number(self.update_s, label + "update_s", where, kind="time"))

    def to_dict(self) -> dict:
        """JSON-ready dict (``update_s`` omitted when 0)."""
        d = {"name": self.name, "bytes": self.nbytes}
        if self.update_s:
            d["update_s"] = self.update_s
        return d


def _tensor_from(obj: Any, where: str, prefix: str) -> Tensor:
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (tuple, list)) and len(obj) in (2, 3):
        obj = dict(zip(_TENSOR_KEYS, obj))
    if not isinstance(obj, Mapping):
        raise ProfileError(f"{where}: field {prefix[:-1]!r}: expected a tensor "
                           f"{{name, bytes[, update_s]}} or a tuple, got {obj!r}")
    unknown = sorted(set(obj) - set(_TENSOR_KEYS))
    if unknown or "name" not in obj or "bytes" not in obj:
        raise ProfileError(f"{where}: field {prefix[:-1]!r}: a tensor has keys "
                           f"{list(_TENSOR_KEYS)} (name and bytes required); got "
                           f"{sorted(obj)}")
    t = Tensor.__new__(Tensor)
    object.__setattr__(t, "name", obj["name"])
    object.__setattr__(t, "nbytes", obj["bytes"])
    object.__setattr__(t, "update_s", obj.get("update_s", 0.0))
    t._validate(where, prefix)
    return t


@dataclass(frozen=True)
class Layer:
    """One parameter-carrying layer of a model.

    Parameters
    ----------
    name : str
        Layer name (unique names are recommended but not required).
    forward_s, backward_s : float or str
        Compute time of the forward and backward pass of this layer, in seconds, for the profile's
        batch size on its reference device. Strings with units (``"3ms"``) are accepted.
    grad_bytes : float or str
        Bytes of gradient the layer produces in backward (= bytes of its parameters).
    cv : float or None
        Coefficient of variation of both its times; ``None`` means "use the model's default".
    tensors : sequence of Tensor (or mappings / tuples), optional
        The layer's parameter tensors in registration order (``weight`` then ``bias``, as
        ``module.parameters()`` yields them); their bytes must add up to ``grad_bytes``.
        ``None``: unknown, the layer is communicated as one tensor.
    ops : sequence of Op (or mappings), optional
        The layer's forward operations for the compute model (:mod:`sgdnet.workload.ops`).

    Raises
    ------
    ProfileError
        A time or size is negative, NaN, infinite or not a number; a CV is negative; tensor
        bytes that do not add up to ``grad_bytes``, or duplicate tensor names.
    """

    name: str
    forward_s: float
    backward_s: float
    grad_bytes: float
    cv: float | None = None
    tensors: tuple[Tensor, ...] | None = None
    ops: tuple[Op, ...] | None = None

    def __post_init__(self) -> None:
        self._validate("<layer>")

    def _validate(self, where: str, prefix: str = "") -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"{where}: field {prefix + 'name'!r}: layer name must be a "
                               f"non-empty string, got {self.name!r}")
        label = prefix or f"layer {self.name!r}."
        object.__setattr__(self, "forward_s",
                           _number(self.forward_s, label + "forward_s", where, kind="time"))
        object.__setattr__(self, "backward_s",
                           _number(self.backward_s, label + "backward_s", where, kind="time"))
        object.__setattr__(self, "grad_bytes",
                           _number(self.grad_bytes, label + "grad_bytes", where, kind="bytes"))
        object.__setattr__(self, "cv", _cv(self.cv, label + "cv", where))
        if self.tensors is not None:
            ts = self.tensors
            if isinstance(ts, (str, bytes, Mapping)) or not isinstance(ts, Iterable):
                raise ProfileError(f"{where}: field {label + 'tensors'!r}: must be a list of "
                                   f"tensors, got {ts!r}")
            ts = tuple(_tensor_from(t, where, f"{label}tensors[{k}].")
                       for k, t in enumerate(ts))
            if not ts:
                raise ProfileError(f"{where}: field {label + 'tensors'!r}: empty; omit it (or "
                                   "null) when the layer's tensors are unknown")
            names = [t.name for t in ts]
            if len(set(names)) != len(names):
                raise ProfileError(f"{where}: field {label + 'tensors'!r}: duplicate tensor "
                                   f"names {names}")
            tot = math.fsum(t.nbytes for t in ts)
            if not math.isclose(tot, self.grad_bytes, rel_tol=1e-9, abs_tol=1e-9):
                raise ProfileError(f"{where}: field {label + 'tensors'!r}: tensor bytes add up "
                                   f"to {tot:g}, but grad_bytes is {self.grad_bytes:g}; they "
                                   "must be equal")
            object.__setattr__(self, "tensors", ts)
        if self.ops is not None:
            ops = self.ops
            if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
                raise ProfileError(f"{where}: field {label + 'ops'!r}: must be a list of ops, "
                                   f"got {ops!r}")
            object.__setattr__(self, "ops", tuple(
                Op.from_obj(o, f"{where}: field {label}ops[{k}]") for k, o in enumerate(ops)))

    @property
    def update_s(self) -> float:
        """Optimizer time of this layer's tensors, seconds (0 without tensors)."""
        return math.fsum(t.update_s for t in self.tensors) if self.tensors else 0.0

    def tensor_list(self) -> tuple[Tensor, ...]:
        """The layer's tensors, or one tensor named after the layer when they are unknown."""
        if self.tensors is not None:
            return self.tensors
        return (Tensor(self.name, self.grad_bytes),)

    @property
    def compute_s(self) -> float:
        """Forward plus backward time, seconds."""
        return self.forward_s + self.backward_s

    def to_dict(self) -> dict:
        """JSON-ready dict; ``cv`` is omitted when it is ``None``."""
        d = {"name": self.name, "forward_s": self.forward_s, "backward_s": self.backward_s,
             "grad_bytes": self.grad_bytes}
        if self.cv is not None:
            d["cv"] = self.cv
        if self.tensors is not None:
            d["tensors"] = [t.to_dict() for t in self.tensors]
        if self.ops is not None:
            d["ops"] = [o.to_dict() for o in self.ops]
        return d


def _bucket(threshold_bytes: float | str, policy: str, sizes: Sequence[float]
            ) -> list[list[int]]:
    """Group items of ``sizes`` (in ready order) into fusion buffers; see ModelProfile.buckets."""
    if isinstance(threshold_bytes, float) and math.isinf(threshold_bytes) and threshold_bytes > 0:
        thr = math.inf
    else:
        thr = units.nbytes(threshold_bytes, what="bucket threshold")
    if policy not in ("ddp", "horovod"):
        raise ProfileError(f"unknown bucketing policy {policy!r}; use 'ddp' or 'horovod'")
    out: list[list[int]] = []
    cur: list[int] = []
    size = 0.0
    for k, b in enumerate(sizes):
        if policy == "horovod" and cur and size + b > thr:
            out.append(cur)
            cur, size = [], 0.0
        cur.append(k)
        size += b
        if policy == "ddp" and size >= thr:
            out.append(cur)
            cur, size = [], 0.0
    if cur:
        out.append(cur)
    return out


@dataclass(frozen=True)
class Message:
    """One gradient message a worker sends per step (see :meth:`ModelProfile.messages`).

    Attributes
    ----------
    name : str
        ``"<layer>"`` (granularity ``"layer"``), ``"<layer>.<tensor>"`` (``"tensor"``) or
        ``"bucket<k>"`` (``"bucket"``).
    nbytes : float
        Bytes of the message.
    ready_after : int
        Index of the layer whose backward pass completes the message: it can be sent as soon
        as that layer's backward has finished (the message's last gradient in backward order).
    layers : tuple of int
        Layers that contribute gradients, in backward order (``ready_after`` is the last).
    tensors : tuple of str
        ``"<layer>.<tensor>"`` names of the gradients it carries, in backward order.
    update_s : float
        Optimizer time of the tensors it carries, seconds (apply it when the message has been
        reduced: per-tensor updates, as a fused optimizer over a bucket would do).
    """

    name: str
    nbytes: float
    ready_after: int
    layers: tuple[int, ...]
    tensors: tuple[str, ...]
    update_s: float = 0.0


def _layer_from(obj: Any, i: int, where: str) -> Layer:
    if isinstance(obj, Layer):
        return obj
    if isinstance(obj, Mapping):
        unknown = sorted(set(obj) - set(_LAYER_KEYS))
        if unknown:
            raise ProfileError(f"{where}: field 'layers[{i}]': unknown key(s) {unknown}; "
                               f"allowed keys are {list(_LAYER_KEYS)}")
        missing = [k for k in ("name", "forward_s", "backward_s", "grad_bytes") if k not in obj]
        if missing:
            raise ProfileError(f"{where}: field 'layers[{i}].{missing[0]}': missing; every layer "
                               "needs name, forward_s, backward_s and grad_bytes")
        lay = Layer.__new__(Layer)
        for k in _LAYER_KEYS:
            object.__setattr__(lay, k, obj.get(k))
        lay._validate(where, prefix=f"layers[{i}].")
        return lay
    if isinstance(obj, (tuple, list)) and len(obj) in (4, 5):
        return _layer_from(dict(zip(_LAYER_KEYS, obj)), i, where)
    raise ProfileError(f"{where}: field 'layers[{i}]': expected a Layer, a mapping or a tuple "
                       f"(name, forward_s, backward_s, grad_bytes[, cv]), got {obj!r}")
