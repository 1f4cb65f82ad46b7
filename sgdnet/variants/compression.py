"""Gradient compression as a variant option: fewer bytes on the wire, compress and decompress
work on the worker's GPU, and the collective each method really needs.

What is modelled (option ``compression`` of ``allreduce``, ``pipe-sgd``, ``local-sgd`` and
``cocod``; a message of ``S`` gradient bytes made of tensors of ``b_t`` bytes, fp32 elements of
``e = 4`` bytes, ``n`` workers):

``"topk:R"`` (top-k sparsification, a fraction ``R`` of the elements kept)
    A worker sends ``R S / e`` values and as many int32 indices: ``c = R S (e + 4) / e`` bytes
    (``2 R S`` for fp32). The sum of sparse vectors with different supports is not sparse with
    the same support, so it is *not* a ring all-reduce of smaller buffers: every worker needs
    every other worker's selection, an **all-gather** (ring: ``n - 1`` rounds, each worker
    forwarding one ``c``-byte piece per round), then sums locally. Alone on the links:
    ``(n-1)(alpha + c/B)`` (:func:`sgdnet.workload.allgather_time` of ``n c``), against the
    dense ring's ``2(n-1)(alpha + S/(nB))``: top-k wins on bandwidth only when ``c < 2S/n``.

``"powersgd:R"`` (rank-``R`` PowerSGD, one power iteration with warm start)
    Each matrix-shaped gradient ``M`` (``p x q``) is sent as ``P = M Q`` (``p x R``) and
    ``Q = M^T P`` (``q x R``): an **all-reduce of the P's**, then (it needs the reduced ``P``)
    an **all-reduce of the Q's** — two dependent collectives; both are linear, so the ring
    all-reduce applies. Profiles carry bytes, not shapes, so each tensor of ``b`` bytes is taken
    as a square matrix of side ``sqrt(b/e)``: ``R sqrt(b/e) e`` bytes each for P and Q. A
    tensor that would not shrink (``2 R sqrt(b/e) >= b/e``) is sent uncompressed with the P's,
    as PyTorch's PowerSGD hook does. For a ``p x q`` matrix the true size ``R (p + q) e`` is at
    least the square one ``2 R sqrt(pq) e`` (AM-GM): the approximation is the *best case* for
    the wire, exact for square weights. Biases and norm weights are not recognisable from
    their bytes and are treated as squares too (they are small).

``"onebit"`` (1-bit SGD / signSGD with error feedback)
    The sign of every element plus a scale: ``S / 32`` bytes, exchanged as an **all-reduce of
    S/32 bytes** (the scaled-sign vectors are summed as in 1-bit Adam's compressed all-reduce;
    its two phases move the same bytes as one ring). Per-tensor scales are not counted.

Compute
    Compressing (error-feedback add, selection / projection / sign packing) and decompressing
    (scatter / ``P Q^T`` / unpacking into a dense buffer) run on the worker's GPU before and
    after the collective, each taking ``s_per_byte * S`` seconds (``compression=
    "topk:0.01;s_per_byte=2e-12"``). The default is memory-bound work: ``passes`` over the
    gradient (:data:`PASSES`, an assumption: e.g. top-k reads the gradient and the error
    buffer, writes them back and selects) at the memory bandwidth times the efficiency of the
    profile's device when it is a built-in one (:data:`sgdnet.workload.DEVICES`), else of a
    V100. With one worker nothing is communicated and nothing is compressed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from ..workload.compute import DEVICES
from .collectives import allreduce
from .durations import duration
from .fabric import Fabric

__all__ = ["METHODS", "PASSES", "ELEM_BYTES", "INDEX_BYTES", "Compression", "parse_compression",
           "check_compression", "tensor_sizes", "compressed_allreduce"]

#: Compression methods and what their parameter is.
METHODS = {"topk": "ratio", "powersgd": "rank", "onebit": None}
#: Memory passes over the gradient of (compress, decompress), the default cost's assumption.
PASSES = {"topk": (4.0, 1.0), "powersgd": (5.0, 3.0), "onebit": (4.0, 1.0)}
#: Bytes of one gradient element (fp32) and of one top-k index (int32).
ELEM_BYTES = 4.0
INDEX_BYTES = 4.0
#: Device whose memory bandwidth prices compression when the profile's device is unknown.
DEFAULT_DEVICE = "V100"


@dataclass(frozen=True)
class Compression:
    """A parsed ``compression`` option (see the module docstring).

    Attributes
    ----------
    method : {"topk", "powersgd", "onebit"}
    param : float
        Kept fraction (top-k), rank (PowerSGD) or 0 (1-bit).
    s_per_byte : float or None
        Compress (and, separately, decompress) seconds per gradient byte; ``None``: the default
        of :meth:`costs`.
    """

    method: str
    param: float = 0.0
    s_per_byte: float | None = None

    def canonical(self) -> str:
        """The option string this parses from (``"topk:0.01"``, ``"onebit;s_per_byte=1e-12"``)."""
        s = self.method
        if METHODS[self.method] is not None:
            p = int(self.param) if self.method == "powersgd" else self.param
            s += f":{p!r}"
        if self.s_per_byte is not None:
            s += f";s_per_byte={self.s_per_byte!r}"
        return s

    def phases(self, sizes: Sequence[float]) -> list[tuple[str, str | None, float]]:
        """The collectives of one message of tensors of ``sizes`` bytes, in order:
        ``(label, algorithm or None for the caller's all-reduce algorithm, bytes)``."""
        total = math.fsum(sizes)
        if self.method == "topk":
            return [("gather", "allgather", self.param * total * (ELEM_BYTES + INDEX_BYTES)
                     / ELEM_BYTES)]
        if self.method == "onebit":
            return [("sign", None, total / 32.0)]
        r = self.param
        p = q = dense = 0.0
        for b in sizes:
            side = math.sqrt(b / ELEM_BYTES)
            if 2.0 * r * side < b / ELEM_BYTES:
                p += r * side * ELEM_BYTES
                q += r * side * ELEM_BYTES
            else:
                dense += b
        out = [("P", None, p + dense)]
        if q > 0:
            out.append(("Q", None, q))
        return out

    def wire_bytes(self, sizes: Sequence[float]) -> float:
        """Bytes each worker contributes to the collectives of one message."""
        return math.fsum(b for _, _, b in self.phases(sizes))

    def costs(self, model: ModelProfile) -> tuple[float, float]:
        """(compress, decompress) seconds per gradient byte on ``model``'s device."""
        if self.s_per_byte is not None:
            return self.s_per_byte, self.s_per_byte
        dev = DEVICES.get(model.device) or DEVICES[DEFAULT_DEVICE]
        rate = dev.mem_bw * dev.efficiency
        c, d = PASSES[self.method]
        return c / rate, d / rate


def parse_compression(value: Any) -> Compression | None:
    """A :class:`Compression` from ``None``, a string ``"METHOD[:PARAM][;s_per_byte=X]"``, a
    dict ``{"method": ..., "ratio"/"rank": ..., "s_per_byte": ...}`` or a Compression.

    Raises
    ------
    ValueError
        Unknown method, missing or bad parameter, bad cost.
    """
    if value is None or isinstance(value, Compression):
        return value
    if isinstance(value, Mapping):
        d = dict(value)
        method = d.pop("method", None)
        pname = METHODS.get(method) if isinstance(method, str) else None
        param = d.pop(pname, None) if pname else None
        cost = d.pop("s_per_byte", None)
        if d:
            raise ValueError(f"unknown key(s) {sorted(d)}; use method, {pname or 'ratio/rank'}, "
                             "s_per_byte")
    elif isinstance(value, str):
        head, _, tail = value.strip().partition(";")
        method, _, param = head.strip().lower().partition(":")
        param = param.strip() or None
        cost = None
        if tail.strip():
            k, eq, v = tail.partition("=")
            if k.strip() != "s_per_byte" or not eq:
                raise ValueError(f"{tail!r}: the only setting is ';s_per_byte=SECONDS'")
            cost = v.strip()
    else:
        raise ValueError(f"{value!r} is not a compression spec such as 'topk:0.01'")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}")
    kind = METHODS[method]
    p = 0.0
    if kind is None:
        if param is not None:
            raise ValueError(f"{method!r} takes no parameter (got {param!r})")
    else:
        if param is None:
            raise ValueError(f"{method!r} needs its {kind}, e.g. "
                             f"'{method}:{'0.01' if kind == 'ratio' else '4'}'")
        try:
            p = float(param)
        except (TypeError, ValueError):
            raise ValueError(f"{kind} {param!r} is not a number") from None
        if kind == "ratio" and not 0.0 < p <= 1.0:
            raise ValueError(f"top-k ratio {p!r} must be in (0, 1]")
        if kind == "rank" and not (p >= 1 and float(p).is_integer()):
            raise ValueError(f"PowerSGD rank {param!r} must be an integer >= 1")
    c = None
    if cost is not None:
        try:
            c = float(cost)
        except (TypeError, ValueError):
            raise ValueError(f"s_per_byte={cost!r} is not a number") from None
        if not (math.isfinite(c) and c >= 0):
            raise ValueError(f"s_per_byte={cost!r} must be a finite number >= 0")
    return Compression(method, p, c)


def check_compression(value: Any) -> str | None:
    """Option check: the canonical string of a compression spec (or ``None``)."""
    comp = parse_compression(value)
    return None if comp is None else comp.canonical()


def tensor_sizes(model: ModelProfile, layers: Sequence[int] | None = None) -> list[float]:
    """Bytes of every parameter tensor of ``layers`` (default: all); a layer without a tensor
    list counts as one tensor of its gradient bytes."""
    idx = range(model.n_layers) if layers is None else layers
    return [t.nbytes for i in idx for t in model.layers[i].tensor_list()]


def compressed_allreduce(net: Net, fabric: Fabric, cluster: Cluster, model: ModelProfile,
                         name: str, nbytes: float, sizes: Sequence[float],
                         compression: str | Compression | None, *,
                         inputs: Mapping[int, Sequence[str]],
                         outputs: Mapping[int, Sequence[str]], coarse: bool,
                         algorithm: str = "ring", **kw: Any) -> None:
    """An all-reduce of ``nbytes`` (tensors of ``sizes`` bytes) with ``compression``.

    ``compression=None`` (or one worker) is exactly :func:`.collectives.allreduce`. Otherwise
    worker ``i``'s ``{name}.w{i}.compress`` (on its GPU) takes ``inputs[i]``, the phases of
    :meth:`Compression.phases` run as collectives ``{name}.{label}`` one after the other, and
    ``{name}.w{i}.decompress`` (on its GPU) produces ``outputs[i]``. ``kw`` goes to every
    collective (``stream``, ``tags``, ``chunks``, ``channels``).

    Raises
    ------
    VariantError
        Top-k with an ``algorithm`` other than ``"ring"`` or with ``channels > 1`` (its
        all-gather is one ring), or a worker without inputs.
    """
    comp = parse_compression(compression)
    n = cluster.workers
    if comp is None or n == 1 or nbytes == 0:
        allreduce(net, fabric, cluster, name, nbytes, inputs=inputs, outputs=outputs,
                  coarse=coarse, algorithm=algorithm, **kw)
        return
    if comp.method == "topk" and (algorithm != "ring" or kw.get("channels", 1) != 1
                                  or kw.get("chunks", 1) != 1):
        raise VariantError(
            f"compression={comp.canonical()!r} exchanges the selections with one ring "
            f"all-gather; algorithm={algorithm!r}, channels={kw.get('channels', 1)}, "
            f"chunks={kw.get('chunks', 1)} do not apply: use algorithm='ring', channels=1")
    c_s, d_s = comp.costs(model)
    extra = dict(kw.pop("tags", None) or {})
    tags = {"compression": comp.method, **extra}
    cur: dict[int, list[str]] = {}
    for i in range(n):
        if not inputs.get(i):
            raise VariantError(f"compressed all-reduce {name!r}: worker {i} has no input place")
        cur[i] = [net.place(f"{name}.w{i}.packed", worker=i).name]
        _gpu_op(net, fabric, cluster, i, f"{name}.w{i}.compress", c_s * nbytes,
                list(inputs[i]), cur[i], {**tags, "phase": "compress"})
    phases = comp.phases(sizes)
    for label, alg, b in phases:
        nxt = {i: [net.place(f"{name}.{label}.w{i}.out", worker=i).name] for i in range(n)}
        allreduce(net, fabric, cluster, f"{name}.{label}", b, inputs=cur, outputs=nxt,
                  coarse=coarse, algorithm=alg or algorithm,
                  tags={**tags, "phase": label}, **kw)
        cur = nxt
    for i in range(n):
        _gpu_op(net, fabric, cluster, i, f"{name}.w{i}.decompress", d_s * nbytes, cur[i],
                list(outputs.get(i, ())), {**tags, "phase": "decompress"})
    net.meta.setdefault("compression", {})[name] = {
        "method": comp.method, "param": comp.param, "bytes": nbytes,
        "wire_bytes": [b for _, _, b in phases], "compress_s": c_s * nbytes,
        "decompress_s": d_s * nbytes}


def _gpu_op(net: Net, fabric: Fabric, cluster: Cluster, i: int, name: str, seconds: float,
            inputs: Sequence[str], outputs: Sequence[str], tags: Mapping[str, Any]) -> None:
    """Worker ``i``'s compress / decompress: ``seconds`` on its GPU (no resource when 0, so a
    free compression never waits for the GPU)."""
    net.transition(name, duration(seconds, cluster.compute_cv) if seconds > 0 else 0.0,
                   inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
                   resources=[fabric.gpu(i)] if seconds > 0 else [],
                   tags={"worker": i, "kind": "compute", **tags, "step": False})
