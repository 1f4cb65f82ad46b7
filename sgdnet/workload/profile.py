"""Per-layer model profiles: what one training step of a DNN costs on one device.

A :class:`ModelProfile` is an ordered list of :class:`Layer` objects (forward order), each with
its forward and backward compute time in seconds for the profile's batch size on its reference
device, and the bytes of gradient it produces. Everything else (totals, the order in which
gradients become ready, fusion buckets, communication messages, scaled copies) is derived.

Optional detail (schema version 2):

* per layer, its parameter **tensors** (:class:`Tensor`: name, bytes, and the time the
  optimizer takes to update it), so that communication can follow what a framework sends
  (one message per tensor, per layer or per bucket: :meth:`ModelProfile.messages`);
* per layer, its architecture-level **ops** (:class:`~sgdnet.workload.ops.Op`: FLOPs and
  elements moved), so that a profile can be re-timed for another device, batch size or
  precision (:func:`sgdnet.workload.compute.retime`);
* per profile, what a step costs **outside the layers**: ``zero_grad_s``, ``loss_s`` (loss
  forward and backward) and ``optimizer_s`` (the optimizer step's cost not attributed to a
  tensor), plus the ``precision`` the times are for.

On disk a profile is JSON::

    {"schema_version": 2, "name": "gpt2_medium", "batch_size": 8, "device": "...",
     "source": "...", "cv": null, "precision": "fp16",
     "zero_grad_s": 0.0, "loss_s": 0.0021, "optimizer_s": 0.0,
     "layers": [{"name": "h0.ln_1", "forward_s": 1.2e-05, "backward_s": 2.4e-05,
                 "grad_bytes": 8192.0,
                 "tensors": [{"name": "weight", "bytes": 4096.0, "update_s": 1e-06}, ...],
                 "ops": [{"name": "layernorm", "kind": "vector", "flops": ..., ...}]}, ...],
     "totals": {...}}

A profile that uses none of the optional detail is written as schema version 1 (the layout
of the built-in CNN library, unchanged); both versions are read. ``totals`` is written for
human readers and ignored on load; ``meta`` (any JSON object) is kept as provenance detail.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import units
from ..errors import ProfileError
from ..limits import check_limit
from .layer import (  # noqa: F401 - the layer types and schema constants are re-exported from here
    _LAYER_V2,
    _STEP_COSTS,
    _TOP_KEYS,
    _TOP_V2,
    GRANULARITIES,
    PRECISIONS,
    SCHEMA_VERSION,
    Layer,
    Message,
    Tensor,
    _bucket,
    _cv,
    _layer_from,
    _number,
    _where,
)

__all__ = ["Layer", "Tensor", "Message", "ModelProfile", "SCHEMA_VERSION", "GRANULARITIES",
           "PRECISIONS"]

#: Newest version of the JSON layout written by :meth:`ModelProfile.save` (a profile without
#: tensors, ops, step costs or precision is written as version 1, which every reader knows).

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
    precision : {"fp32", "tf32", "fp16", "bf16"} or None
        Numeric precision the times are for (``fp16``/``bf16`` = mixed precision with
        half-precision activations); ``None`` when not stated.
    zero_grad_s, loss_s, optimizer_s : float or str
        Per-step costs outside the layers, seconds: clearing the gradients, the loss's forward
        and backward, and the optimizer step's cost not attributed to a tensor (per-tensor
        update costs are :attr:`Tensor.update_s`). All 0 by default: then a profile means what
        it always meant (these costs folded into the layers, or not measured).

    Raises
    ------
    ProfileError
        Empty layer list, bad batch size, or any invalid layer field.
    """

    __slots__ = ("name", "batch_size", "device", "source", "cv", "layers", "meta", "precision",
                 "zero_grad_s", "loss_s", "optimizer_s")

    def __init__(self, name: str, layers: Iterable[Layer | Mapping | Sequence], batch_size: int,
                 device: str = "unknown", source: str = "", cv: float | None = None,
                 meta: Mapping | None = None, *, precision: str | None = None,
                 zero_grad_s: float | str = 0.0, loss_s: float | str = 0.0,
                 optimizer_s: float | str = 0.0, _where_: str | None = None) -> None:
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
        check_limit(f"{where}: field 'batch_size'", batch_size, "max_batch_size",
                    error=ProfileError)
        s(self, "batch_size", int(batch_size))
        s(self, "device", device)
        s(self, "source", source)
        s(self, "cv", _cv(cv, "cv", where))
        s(self, "layers", lays)
        s(self, "meta", MappingProxyType(dict(meta) if meta else {}))
        if precision is not None and precision not in PRECISIONS:
            raise ProfileError(f"{where}: field 'precision': {precision!r} is not one of "
                               f"{list(PRECISIONS)} (or null)")
        s(self, "precision", precision)
        for field, val in (("zero_grad_s", zero_grad_s), ("loss_s", loss_s),
                           ("optimizer_s", optimizer_s)):
            s(self, field, _number(val, field, where, kind="time"))

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

    @property
    def update_s(self) -> float:
        """Optimizer step time: ``optimizer_s`` plus every tensor's ``update_s``, seconds."""
        return self.optimizer_s + math.fsum(la.update_s for la in self.layers)

    @property
    def overhead_s(self) -> float:
        """Per-step cost outside the layers: zero_grad + loss + optimizer step, seconds."""
        return self.zero_grad_s + self.loss_s + self.update_s

    @property
    def step_s(self) -> float:
        """One step on one device without communication: layers plus :attr:`overhead_s`."""
        return self.compute_s + self.overhead_s

    @property
    def has_tensors(self) -> bool:
        """Whether every layer lists its parameter tensors."""
        return all(la.tensors is not None for la in self.layers)

    @property
    def has_ops(self) -> bool:
        """Whether every layer carries the ops the compute model needs to re-time it."""
        return all(la.ops is not None for la in self.layers)

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
        order = self.backward_order()
        groups = _bucket(threshold_bytes, policy, [self.layers[i].grad_bytes for i in order])
        return [[order[k] for k in g] for g in groups]

    def bucket_bytes(self, threshold_bytes: float | str, policy: str = "ddp") -> list[float]:
        """Bytes of each bucket of :meth:`buckets`."""
        return [math.fsum(self.layers[i].grad_bytes for i in b)
                for b in self.buckets(threshold_bytes, policy)]

    def messages(self, granularity: str = "layer", bucket_bytes: float | str | None = None,
                 policy: str = "ddp") -> list[Message]:
        """The gradient messages of one step, in the order they become ready.

        This is what a data-parallel framework communicates after (or during) the backward
        pass, as an ordered list a variant can turn into one transfer or collective each.

        Parameters
        ----------
        granularity : {"layer", "tensor", "bucket"}
            * ``"layer"``: one message per layer, in :meth:`backward_order`, of the layer's
              ``grad_bytes`` -- exactly what the variants do with a profile today.
            * ``"tensor"``: one message per parameter tensor, as a loop calling
              ``all_reduce`` on every ``p.grad`` or a parameter server with one key per tensor
              does. Layers in backward order, each layer's tensors in reverse registration
              order (bias before weight: the order autograd and DDP see them). A layer
              without a tensor list is one message.
            * ``"bucket"``: the tensors of ``"tensor"`` fused into buckets of
              ``bucket_bytes`` with ``policy`` (PyTorch DDP's ``bucket_cap_mb`` rule or
              Horovod's tensor fusion, see :meth:`buckets`). On a profile without tensor lists
              the buckets are exactly :meth:`buckets`.
        bucket_bytes : float or str
            Bucket capacity for ``"bucket"`` (``"25MB"``); not allowed otherwise.
        policy : {"ddp", "horovod"}
            Bucketing rule for ``"bucket"``.

        Returns
        -------
        list of Message
            Together the messages carry every gradient byte of the step exactly once.

        Raises
        ------
        ProfileError
            Unknown granularity, ``"bucket"`` without ``bucket_bytes`` or ``bucket_bytes``
            with another granularity, unknown policy.
        """
        if granularity not in GRANULARITIES:
            raise ProfileError(f"unknown communication granularity {granularity!r}; use one "
                               f"of {list(GRANULARITIES)}")
        if (granularity == "bucket") != (bucket_bytes is not None):
            raise ProfileError("granularity='bucket' needs bucket_bytes (e.g. '25MB'), and "
                               f"bucket_bytes needs granularity='bucket'; got granularity="
                               f"{granularity!r}, bucket_bytes={bucket_bytes!r}")
        if granularity == "layer":
            return [Message(la.name, la.grad_bytes, i, (i,), (la.name,), la.update_s)
                    for i in self.backward_order() for la in (self.layers[i],)]
        items = [(i, t) for i in self.backward_order()
                 for t in reversed(self.layers[i].tensor_list())]

        def label(i: int, t: Tensor) -> str:
            la = self.layers[i]
            return la.name if la.tensors is None else f"{la.name}.{t.name}"

        if granularity == "tensor":
            return [Message(label(i, t), t.nbytes, i, (i,), (label(i, t),), t.update_s)
                    for i, t in items]
        out = []
        for k, g in enumerate(_bucket(bucket_bytes, policy, [t.nbytes for _, t in items])):
            lays = tuple(dict.fromkeys(items[j][0] for j in g))
            out.append(Message(f"bucket{k}", math.fsum(items[j][1].nbytes for j in g), lays[-1],
                               lays, tuple(label(*items[j]) for j in g),
                               math.fsum(items[j][1].update_s for j in g)))
        return out

    def split_tensors(self) -> ModelProfile:
        """A copy with one layer per parameter tensor: per-tensor communication today.

        Layer ``L`` with tensors ``t_1..t_k`` (registration order) becomes layers
        ``L.t_1 .. L.t_k``; the last carries all of ``L``'s forward and backward time (and
        CV), the others take no time. So in backward order ``L.t_k`` computes ``L``'s backward
        and ``L.t_k .. L.t_1`` all become ready when it ends -- the order and sizes of
        :meth:`messages` with ``granularity="tensor"`` -- and any variant that communicates
        per layer now communicates per tensor (e.g. ``allreduce`` with ``bucket_bytes=0``).
        Totals, step costs and tensor update times are unchanged. Layers without a tensor list
        stay as they are.
        """
        if not any(la.tensors is not None and len(la.tensors) > 1 for la in self.layers):
            return self
        lays: list[Layer] = []
        for la in self.layers:
            if la.tensors is None or len(la.tensors) == 1:
                lays.append(la)
                continue
            k = len(la.tensors)
            for j, t in enumerate(la.tensors):
                last = j == k - 1
                lays.append(Layer(f"{la.name}.{t.name}", la.forward_s if last else 0.0,
                                  la.backward_s if last else 0.0, t.nbytes,
                                  la.cv if last else None, (t,), la.ops if last else ()))
        return self._copy(layers=lays, source=self.source + ("; " if self.source else "")
                          + "one layer per parameter tensor")

    def with_step_costs_folded(self) -> ModelProfile:
        """A copy whose step costs outside the layers are folded into the layers.

        For code that only reads layer times: ``zero_grad_s`` and the optimizer step
        (:attr:`update_s`, i.e. ``optimizer_s`` and every tensor's ``update_s``) are added to
        the first layer's forward time (both come before the next forward pass), ``loss_s``
        to the last layer's forward time (the loss runs between forward and backward). The
        copy's step costs and tensor update times are 0; :attr:`step_s` is unchanged.
        """
        if not self.overhead_s:
            return self
        lays = [dataclasses.replace(la, tensors=tuple(Tensor(t.name, t.nbytes) for t in la.tensors)
                               if la.tensors is not None else None) for la in self.layers]
        first, last = lays[0], lays[-1]
        lays[0] = dataclasses.replace(first, forward_s=first.forward_s + self.zero_grad_s
                                 + self.update_s)
        last = lays[-1]
        lays[-1] = dataclasses.replace(last, forward_s=last.forward_s + self.loss_s)
        return self._copy(layers=lays, zero_grad_s=0.0, loss_s=0.0, optimizer_s=0.0,
                          source=self.source + ("; " if self.source else "")
                          + "step costs folded into layers")

    def with_accumulation(self, k: int, default_cv: float = 0.0) -> ModelProfile:
        """A copy whose step is ``k`` micro-batches of gradient accumulation, one update.

        What DDP's ``no_sync()``, Horovod's ``backward_passes_per_step`` and DeepSpeed's
        ``gradient_accumulation_steps`` do: micro-batches ``1..k-1`` run forward and backward
        without communicating, the last one's backward communicates. For builders that read
        layer times: micro-batch 1's forward keeps its per-layer times (it waits for the
        parameters layer by layer), the other micro-batches' ``(k - 1) (F + B + loss_s)`` is
        added once to the last layer's forward, and the last micro-batch's backward (which
        overlaps the communication) keeps its per-layer times. The step's samples are ``k *
        batch_size`` (the copy's batch size); ``zero_grad_s`` and the optimizer step stay once
        per step. The added work's variance is ``k - 1`` times a micro-batch's (layers with
        their effective CVs, ``default_cv`` where the profile has none), carried by the last
        layer's CV, which keeps that layer's forward plus backward variance as
        :func:`sgdnet.variants.layers.group_layers` does (so the step's total is exact, its
        split between that layer's forward and backward approximate).

        Raises
        ------
        ProfileError
            ``k`` not an integer >= 1.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ProfileError(f"with_accumulation(): k={k!r} must be an integer >= 1 "
                               "(micro-batches per step; 1 = no accumulation)")
        if k == 1:
            return self
        last = self.layers[-1]
        extra = (k - 1) * (self.forward_s + self.backward_s + self.loss_s)
        var = math.fsum(self.layer_cv(i, default_cv) ** 2 * (la.forward_s**2 + la.backward_s**2)
                        for i, la in enumerate(self.layers))
        c = self.layer_cv(self.n_layers - 1, default_cv)
        f = last.forward_s + extra
        total = c * c * (last.forward_s**2 + last.backward_s**2) + (k - 1) * var
        cv = math.sqrt(total / (f * f + last.backward_s**2)) if total > 0 else last.cv
        lays = [*self.layers[:-1], dataclasses.replace(last, forward_s=f, cv=cv)]
        return self._copy(layers=lays, batch_size=k * self.batch_size,
                          source=self.source + ("; " if self.source else "")
                          + f"{k} micro-batches accumulated per step")

    def _copy(self, **kw: Any) -> ModelProfile:
        """A new profile with some constructor arguments replaced."""
        args = {k: getattr(self, k) for k in ("name", "layers", "batch_size", "device", "source",
                                              "cv", "meta", "precision", *_STEP_COSTS)}
        args.update(kw)
        return ModelProfile(**args)

    def scaled(self, batch_size: int | None = None, speed: float = 1.0) -> ModelProfile:
        """A copy for another batch size and/or a faster or slower device.

        Assumptions (first-order, state them when you use this):

        * compute time is linear in the batch size (``t' = t * batch_size / self.batch_size``);
          real devices are less efficient at small batches, so scaling *down* tends to
          underestimate time and scaling up from a small, under-utilised batch to overestimate;
        * the device speed factor divides every time uniformly (``t' = t / speed``), i.e. the new
          device is uniformly faster on every layer type;
        * gradient bytes do not depend on batch size or device; CVs are unchanged;
        * ``loss_s`` scales like the layers; ``zero_grad_s``, ``optimizer_s`` and the tensors'
          ``update_s`` (per-parameter work) only with the speed.

        For a device- and precision-aware re-timing use
        :func:`sgdnet.workload.compute.retime`.

        Raises
        ------
        ProfileError
            Non-positive batch size or speed.
        """
        b = self.batch_size if batch_size is None else batch_size
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ProfileError(f"scaled(): batch_size must be a positive integer, got {b!r}")
        if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not (
                math.isfinite(units.to_float(speed, "scaled(): speed", ProfileError)) and speed > 0):
            raise ProfileError(f"scaled(): speed must be a positive finite factor (2.0 = twice as "
                               f"fast), got {speed!r}")
        check_limit("scaled(): batch_size", b, "max_batch_size", error=ProfileError)
        f = (b / self.batch_size) / float(speed)
        g = 1.0 / float(speed)
        lays = [Layer(la.name, la.forward_s * f, la.backward_s * f, la.grad_bytes, la.cv,
                      None if la.tensors is None else
                      tuple(Tensor(t.name, t.nbytes, t.update_s * g) for t in la.tensors),
                      la.ops)
                for la in self.layers]
        note = []
        if b != self.batch_size:
            note.append(f"batch {self.batch_size}->{b} (time linear in batch)")
        if speed != 1.0:
            note.append(f"device speed x{speed:g}")
        src = self.source + (("; scaled: " + ", ".join(note)) if note else "")
        dev = self.device if speed == 1.0 else f"{self.device} x{speed:g}"
        return self._copy(layers=lays, batch_size=b, device=dev, source=src,
                          zero_grad_s=self.zero_grad_s * g, loss_s=self.loss_s * f,
                          optimizer_s=self.optimizer_s * g)

    def coarse(self) -> ModelProfile:
        """A single-layer profile with the same totals (for fine- vs coarse-grained checks).

        The single layer's CV is ``None`` unless some layer has its own CV; then it is the CV of
        the sum of independent layer times, ``sqrt(sum((cv_i * t_i)^2)) / sum(t_i)``, with each
        layer's effective CV (:meth:`layer_cv`). Tensors (renamed ``<layer>.<tensor>``) and ops
        are kept when every layer has them; step costs are kept.
        """
        cv = None
        if any(la.cv is not None for la in self.layers):
            tot = self.compute_s
            var = math.fsum((self.layer_cv(i) * la.compute_s) ** 2
                            for i, la in enumerate(self.layers))
            cv = math.sqrt(var) / tot if tot > 0 else 0.0
        tensors = ops = None
        if self.has_tensors:
            tensors = tuple(Tensor(f"{la.name}.{t.name}", t.nbytes, t.update_s)
                            for la in self.layers for t in la.tensors)
        if self.has_ops:
            ops = tuple(o for la in self.layers for o in la.ops)
        one = Layer(f"{self.name}:all", self.forward_s, self.backward_s, self.grad_bytes, cv,
                    tensors, ops)
        return self._copy(layers=[one], source=self.source + ("; " if self.source else "")
                          + "coarse: layers summed")

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version`` (see the module docstring)."""
        v2 = (self.precision is not None or any(getattr(self, k) for k in _STEP_COSTS)
              or any(la.tensors is not None or la.ops is not None for la in self.layers))
        d = {
            "schema_version": SCHEMA_VERSION if v2 else 1,
            "name": self.name,
            "batch_size": self.batch_size,
            "device": self.device,
            "source": self.source,
            "cv": self.cv,
        }
        if v2:
            d["precision"] = self.precision
            d.update({k: getattr(self, k) for k in _STEP_COSTS})
        d["totals"] = {"n_layers": self.n_layers, "forward_s": self.forward_s,
                       "backward_s": self.backward_s, "grad_bytes": self.grad_bytes}
        if v2:
            d["totals"]["overhead_s"] = self.overhead_s
        d["layers"] = [la.to_dict() for la in self.layers]
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
        if isinstance(sv, bool) or sv not in (1, SCHEMA_VERSION):
            raise ProfileError(f"{where}: field 'schema_version': {sv!r} is not supported; this "
                               f"reader understands 1 and {SCHEMA_VERSION}")
        unknown = sorted(set(d) - set(_TOP_KEYS))
        if unknown:
            raise ProfileError(f"{where}: unknown field(s) {unknown}; allowed: {list(_TOP_KEYS)}")
        if sv == 1:
            newer = [k for k in _TOP_V2 if k in d]
            if isinstance(d.get("layers"), list):
                newer += sorted({k for la in d["layers"] if isinstance(la, Mapping)
                                 for k in _LAYER_V2 if k in la})
            if newer:
                raise ProfileError(f"{where}: field(s) {newer} need 'schema_version': "
                                   f"{SCHEMA_VERSION} (the file says 1)")
        for k in ("name", "batch_size", "layers"):
            if k not in d:
                raise ProfileError(f"{where}: field {k!r}: missing (required: name, batch_size, "
                                   "layers)")
        if not isinstance(d["layers"], list):
            raise ProfileError(f"{where}: field 'layers': must be a JSON array, got "
                               f"{type(d['layers']).__name__}")
        return cls(d["name"], d["layers"], d["batch_size"], d.get("device", "unknown"),
                   d.get("source", ""), d.get("cv"), d.get("meta"),
                   precision=d.get("precision"),
                   **{k: d.get(k, 0.0) for k in _STEP_COSTS}, _where_=where)

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
        from .._files import load_json, read_text

        p = Path(path)
        text = read_text(p, "profile file", ProfileError)
        d = load_json(text, str(p), ProfileError)
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
