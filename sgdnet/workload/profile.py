"""Per-layer model profiles: what one training step of a DNN costs on one device.

A :class:`ModelProfile` is an ordered list of :class:`Layer` objects (forward order), each with
its forward and backward compute time in seconds for the profile's batch size on its reference
device, and the bytes of gradient it produces. Everything else (totals, the order in which
gradients become ready, fusion buckets, scaled copies) is derived.

On disk a profile is JSON::

    {"schema_version": 1, "name": "resnet50", "batch_size": 128, "device": "...",
     "source": "...", "cv": null,
     "layers": [{"name": "conv1", "forward_s": 0.0021, "backward_s": 0.0043,
                 "grad_bytes": 37632.0}, ...],
     "totals": {...}}

``totals`` is written for human readers and ignored on load; ``meta`` (any JSON object) is kept
as provenance detail.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import units
from ..errors import ProfileError, UnitError
from . import _quantity as _q

__all__ = ["Layer", "ModelProfile", "SCHEMA_VERSION"]

#: Version of the JSON layout written by :meth:`ModelProfile.save`.
SCHEMA_VERSION = 1

_LAYER_KEYS = ("name", "forward_s", "backward_s", "grad_bytes", "cv")
_TOP_KEYS = ("schema_version", "name", "batch_size", "device", "source", "cv", "layers",
             "totals", "meta")


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
    x = float(value)
    if not math.isfinite(x) or x < 0:
        unit = "seconds" if kind == "time" else "bytes"
        raise ProfileError(
            f"{where}: field {field!r}: {value!r} is not a valid duration/size; give a finite, "
            f"non-negative number of {unit}"
        )
    return x


def _cv(value: Any, field: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{where}: field {field!r}: CV must be a number or null, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ProfileError(
            f"{where}: field {field!r}: CV {value!r} makes no sense; give a finite coefficient of "
            "variation >= 0 (e.g. 0.05 for 5% noise) or null"
        )
    return x


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

    Raises
    ------
    ProfileError
        A time or size is negative, NaN, infinite or not a number; a CV is negative.
    """

    name: str
    forward_s: float
    backward_s: float
    grad_bytes: float
    cv: float | None = None

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
        return d


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


class ModelProfile:
    """Per-layer cost of one training step of a model on a reference device.

    Parameters
    ----------
    name : str
        Model name, e.g. ``"resnet50"``.
    layers : iterable of Layer (or mappings / tuples)
        Layers in forward order. At least one.
    batch_size : int
        Samples per step (per worker) the times were measured for.
    device : str
        Reference device the times were measured on.
    source : str
        Where the numbers came from (kept through :meth:`scaled` and JSON round trips).
    cv : float or None
        Model-wide default coefficient of variation of layer times; a layer's own ``cv`` wins.
    meta : mapping, optional
        Free-form JSON-serialisable provenance (kept on save/load, not interpreted).

    Raises
    ------
    ProfileError
        Empty layer list, bad batch size, or any invalid layer field.
    """

    __slots__ = ("name", "batch_size", "device", "source", "cv", "layers", "meta")

    def __init__(self, name: str, layers: Iterable[Layer | Mapping | Sequence], batch_size: int,
                 device: str = "unknown", source: str = "", cv: float | None = None,
                 meta: Mapping | None = None, *, _where_: str | None = None) -> None:
        where = _where(_where_)
        if not isinstance(name, str) or not name:
            raise ProfileError(f"{where}: field 'name': must be a non-empty string, got {name!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            if isinstance(batch_size, float) and batch_size.is_integer() and batch_size >= 1:
                batch_size = int(batch_size)
            else:
                raise ProfileError(f"{where}: field 'batch_size': must be a positive integer "
                                   f"(samples per step), got {batch_size!r}")
        for field, val in (("device", device), ("source", source)):
            if not isinstance(val, str):
                raise ProfileError(f"{where}: field {field!r}: must be a string, got {val!r}")
        if isinstance(layers, (str, bytes, Mapping)) or not isinstance(layers, Iterable):
            raise ProfileError(f"{where}: field 'layers': must be a list of layers, got "
                               f"{type(layers).__name__}")
        lays = tuple(_layer_from(x, i, where) for i, x in enumerate(layers))
        if not lays:
            raise ProfileError(f"{where}: field 'layers': a profile needs at least one layer")
        if meta is not None and not isinstance(meta, Mapping):
            raise ProfileError(f"{where}: field 'meta': must be an object, got {meta!r}")
        s = object.__setattr__
        s(self, "name", name)
        s(self, "batch_size", int(batch_size))
        s(self, "device", device)
        s(self, "source", source)
        s(self, "cv", _cv(cv, "cv", where))
        s(self, "layers", lays)
        s(self, "meta", MappingProxyType(dict(meta) if meta else {}))

    def __setattr__(self, key, value):
        raise AttributeError("ModelProfile is immutable; use scaled() or build a new one")

    # ------------------------------------------------------------------ views
    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return len(self.layers)

    @property
    def forward_s(self) -> float:
        """Total forward time, seconds."""
        return math.fsum(la.forward_s for la in self.layers)

    @property
    def backward_s(self) -> float:
        """Total backward time, seconds."""
        return math.fsum(la.backward_s for la in self.layers)

    @property
    def compute_s(self) -> float:
        """Forward plus backward total, seconds (one step's compute, no communication)."""
        return math.fsum(la.forward_s + la.backward_s for la in self.layers)

    @property
    def grad_bytes(self) -> float:
        """Total gradient bytes per step (= model size)."""
        return math.fsum(la.grad_bytes for la in self.layers)

    def layer_cv(self, i: int, default: float = 0.0) -> float:
        """Effective CV of layer ``i``: its own, else the model's, else ``default``."""
        c = self.layers[i].cv
        if c is None:
            c = self.cv
        return default if c is None else c

    def backward_order(self) -> list[int]:
        """Layer indices in the order their gradients become ready: last layer first."""
        return list(range(self.n_layers - 1, -1, -1))

    def buckets(self, threshold_bytes: float | str, policy: str = "ddp") -> list[list[int]]:
        """Group gradients into fusion buffers, in backward (gradient-ready) order.

        Parameters
        ----------
        threshold_bytes : float or str
            Bucket capacity in bytes (``"25MB"`` accepted). ``0`` puts every layer in its own
            bucket; ``float('inf')`` puts the whole model in one bucket.
        policy : {"ddp", "horovod"}
            ``"ddp"`` (PyTorch DistributedDataParallel): layers are appended to the open bucket
            in backward order, and the bucket is closed as soon as its size reaches the
            threshold, so every bucket but the last holds at least ``threshold`` bytes and
            would drop below it without its last layer. ``"horovod"`` (tensor fusion): a layer
            that would push the open bucket above the threshold starts a new bucket, so no
            bucket exceeds the threshold unless it is a single layer larger than it.
            (DDP's smaller first bucket, ``first_bucket_cap``, is not modelled.)

        Returns
        -------
        list of list of int
            Buckets in the order they become ready; each lists layer indices in backward order.
            Together they partition ``range(n_layers)``.
        """
        if isinstance(threshold_bytes, float) and math.isinf(threshold_bytes) and threshold_bytes > 0:
            thr = math.inf
        else:
            thr = units.nbytes(threshold_bytes, what="bucket threshold")
        if policy not in ("ddp", "horovod"):
            raise ProfileError(f"unknown bucketing policy {policy!r}; use 'ddp' or 'horovod'")
        out: list[list[int]] = []
        cur: list[int] = []
        size = 0.0
        for i in self.backward_order():
            b = self.layers[i].grad_bytes
            if policy == "horovod" and cur and size + b > thr:
                out.append(cur)
                cur, size = [], 0.0
            cur.append(i)
            size += b
            if policy == "ddp" and size >= thr:
                out.append(cur)
                cur, size = [], 0.0
        if cur:
            out.append(cur)
        return out

    def bucket_bytes(self, threshold_bytes: float | str, policy: str = "ddp") -> list[float]:
        """Bytes of each bucket of :meth:`buckets`."""
        return [math.fsum(self.layers[i].grad_bytes for i in b)
                for b in self.buckets(threshold_bytes, policy)]

    def scaled(self, batch_size: int | None = None, speed: float = 1.0) -> ModelProfile:
        """A copy for another batch size and/or a faster or slower device.

        Assumptions (first-order, state them when you use this):

        * compute time is linear in the batch size (``t' = t * batch_size / self.batch_size``);
          real devices are less efficient at small batches, so scaling *down* tends to
          underestimate time and scaling up from a small, under-utilised batch to overestimate;
        * the device speed factor divides every time uniformly (``t' = t / speed``), i.e. the new
          device is uniformly faster on every layer type;
        * gradient bytes do not depend on batch size or device; CVs are unchanged.

        Raises
        ------
        ProfileError
            Non-positive batch size or speed.
        """
        b = self.batch_size if batch_size is None else batch_size
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ProfileError(f"scaled(): batch_size must be a positive integer, got {b!r}")
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not (
                math.isfinite(speed) and speed > 0):
            raise ProfileError(f"scaled(): speed must be a positive finite factor (2.0 = twice as "
                               f"fast), got {speed!r}")
        f = (b / self.batch_size) / float(speed)
        lays = [Layer(la.name, la.forward_s * f, la.backward_s * f, la.grad_bytes, la.cv)
                for la in self.layers]
        note = []
        if b != self.batch_size:
            note.append(f"batch {self.batch_size}->{b} (time linear in batch)")
        if speed != 1.0:
            note.append(f"device speed x{speed:g}")
        src = self.source + (("; scaled: " + ", ".join(note)) if note else "")
        dev = self.device if speed == 1.0 else f"{self.device} x{speed:g}"
        return ModelProfile(self.name, lays, b, dev, src, self.cv, self.meta)

    def coarse(self) -> ModelProfile:
        """A single-layer profile with the same totals (for fine- vs coarse-grained checks).

        The single layer's CV is ``None`` unless some layer has its own CV; then it is the CV of
        the sum of independent layer times, ``sqrt(sum((cv_i * t_i)^2)) / sum(t_i)``, with each
        layer's effective CV (:meth:`layer_cv`).
        """
        cv = None
        if any(la.cv is not None for la in self.layers):
            tot = self.compute_s
            var = math.fsum((self.layer_cv(i) * la.compute_s) ** 2
                            for i, la in enumerate(self.layers))
            cv = math.sqrt(var) / tot if tot > 0 else 0.0
        one = Layer(f"{self.name}:all", self.forward_s, self.backward_s, self.grad_bytes, cv)
        return ModelProfile(self.name, [one], self.batch_size, self.device,
                            self.source + ("; " if self.source else "") + "coarse: layers summed",
                            self.cv, self.meta)

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version`` (see the module docstring)."""
        d = {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "batch_size": self.batch_size,
            "device": self.device,
            "source": self.source,
            "cv": self.cv,
            "totals": {"n_layers": self.n_layers, "forward_s": self.forward_s,
                       "backward_s": self.backward_s, "grad_bytes": self.grad_bytes},
            "layers": [la.to_dict() for la in self.layers],
        }
        if self.meta:
            d["meta"] = dict(self.meta)
        return d

    @classmethod
    def from_dict(cls, d: Any, path: str | os.PathLike | None = None) -> ModelProfile:
        """Build a profile from :meth:`to_dict` output, validating every field.

        Raises
        ------
        ProfileError
            Message names ``path`` (or ``<profile>``), the field and the reason.
        """
        where = _where(path)
        if not isinstance(d, Mapping):
            raise ProfileError(f"{where}: expected a JSON object at top level, got "
                               f"{type(d).__name__}")
        if "schema_version" not in d:
            raise ProfileError(f"{where}: field 'schema_version': missing; this reader "
                               f"understands schema_version {SCHEMA_VERSION}")
        sv = d["schema_version"]
        if isinstance(sv, bool) or sv != SCHEMA_VERSION:
            raise ProfileError(f"{where}: field 'schema_version': {sv!r} is not supported; this "
                               f"reader understands {SCHEMA_VERSION}")
        unknown = sorted(set(d) - set(_TOP_KEYS))
        if unknown:
            raise ProfileError(f"{where}: unknown field(s) {unknown}; allowed: {list(_TOP_KEYS)}")
        for k in ("name", "batch_size", "layers"):
            if k not in d:
                raise ProfileError(f"{where}: field {k!r}: missing (required: name, batch_size, "
                                   "layers)")
        if not isinstance(d["layers"], list):
            raise ProfileError(f"{where}: field 'layers': must be a JSON array, got "
                               f"{type(d['layers']).__name__}")
        return cls(d["name"], d["layers"], d["batch_size"], d.get("device", "unknown"),
                   d.get("source", ""), d.get("cv"), d.get("meta"), _where_=where)

    def to_json(self) -> str:
        """JSON text: header fields indented, one line per layer (diff-friendly)."""
        d = self.to_dict()
        layers = d.pop("layers")
        head = json.dumps(d, indent=1)
        body = ",\n".join("  " + json.dumps(la) for la in layers)
        return head[:-2] + ',\n "layers": [\n' + body + "\n ]\n}\n"

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_json` to ``path`` and return it as a Path."""
        p = Path(path)
        p.write_text(self.to_json(), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | os.PathLike) -> ModelProfile:
        """Read a profile JSON file.

        Raises
        ------
        ProfileError
            Missing/unreadable file, invalid JSON (with line and column) or invalid fields.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ProfileError(f"{p}: cannot read profile file: {e.strerror or e}") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProfileError(f"{p}: not valid JSON: {e.msg} at line {e.lineno} column "
                               f"{e.colno}") from None
        return cls.from_dict(d, path=p)

    # ------------------------------------------------------------------ dunder
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelProfile):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.name, self.batch_size, self.layers))

    def __len__(self) -> int:
        return self.n_layers

    def __repr__(self) -> str:
        return (f"ModelProfile({self.name!r}, {self.n_layers} layers, batch {self.batch_size}, "
                f"fwd {units.format_seconds(self.forward_s)}, "
                f"bwd {units.format_seconds(self.backward_s)}, "
                f"grads {units.format_bytes(self.grad_bytes)}, device {self.device!r})")
