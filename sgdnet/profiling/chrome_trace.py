"""Build a :class:`~sgdnet.workload.profile.ModelProfile` from a ``torch.profiler`` trace.

Reads the Chrome Trace Event JSON written by ``prof.export_chrome_trace(path)`` (Kineto
format, torch 2.x); torch itself is not needed. What torch 2.13 writes, and how it is used:

* **Steps**: ``prof.step()`` inside a profiling ``schedule`` emits one ``ProfilerStep#N`` span
  (category ``user_annotation``) per recorded step. Each span is one step; the step time is its
  duration. A trace without them is treated as a single step spanning all CPU ops.
* **Layers**: with ``with_stack=True`` every module call is a ``python_function`` span named
  ``nn.Module: <Class>_<k>``; the leaf ones (containing no other module span) are the layers
  (``with_modules=True`` alone adds no spans in eager mode). Without them, ``record_function``
  spans (``user_annotation``, except torch's own ``ProfilerStep#``, ``Optimizer.*`` and
  DataLoader spans) are used as layers instead.
* **Forward** time of a layer: the sum of its spans' durations within the step.
* **Backward**: each ``autograd::engine::evaluate_function: <Node>`` event carries the
  ``Sequence number`` of the forward op that created the node; that forward op lies inside one
  layer's span, so the backward event is charged to that layer. ``AccumulateGrad`` events have
  no sequence number and are charged to the layer of the backward event just before them
  (autograd accumulates a gradient as soon as it exists).
* **Gradient bytes**: with ``record_shapes=True`` the ``torch::autograd::AccumulateGrad``
  events carry the gradient's ``Input Dims`` and ``Input type``; bytes = product of dims x
  element size, charged like the ``AccumulateGrad`` event. Without shapes pass ``grad_bytes``.
  Each ``AccumulateGrad`` is one parameter tensor: a layer lists them as its tensors
  (``grad0, grad1...``: a trace does not name parameters), so communication can be per tensor.
* Layers that receive no gradient bytes are folded into the preceding layer in forward order
  (the first ones into the first layer with gradients), as in the built-in library.
* **Overhead**: the part of a step before its first backward event is its forward phase (data,
  ``zero_grad``, forward, loss), the rest its backward phase (backward, optimizer step if
  traced). With ``overhead="proportional"`` (default) each phase's time not covered by layer
  spans is spread over the layers in proportion to their forward (resp. backward) times, so the
  profile's compute total equals the mean step time; ``"none"`` keeps the raw span times.
  ``"separate"`` first takes the optimizer's own spans out of the phases (torch's
  ``Optimizer.zero_grad#...`` and ``Optimizer.step#...`` annotations, or on the device the
  activities they launched) and keeps them as the profile's ``zero_grad_s`` and
  ``optimizer_s``, then spreads the rest.

**Device times** (``times="device"``, the default when the trace has GPU activities, i.e. it
was recorded with ``ProfilerActivity.CUDA``): on a GPU the CPU-side spans only measure kernel
*launches*. Kineto writes every device activity (categories ``kernel``, ``gpu_memcpy``,
``gpu_memset``) with the ``correlation`` id of the ``cuda_runtime`` event that launched it
(``cudaLaunchKernel``, ``cudaMemcpyAsync``...). Each activity is charged to the span (layer
span in forward, ``evaluate_function`` event in backward) that contains its launch on the
launching thread, so a layer's forward time is the GPU time of the kernels its forward
launched, and its backward time that of the kernels its autograd nodes launched. A step's
time is the span of its device activities (first start to last end, idle gaps included); its
forward phase ends where the first kernel launched by the backward starts. ``times="cpu"``
keeps the CPU-side spans (a warning says so when the trace has GPU activities).
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from ..workload.profile import Layer, ModelProfile, Tensor

__all__ = ["from_chrome_trace"]

_ELEM = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
         "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
         "c10::complex<float>": 8, "c10::complex<double>": 16}
_MOD = "nn.Module: "
_EVAL = "autograd::engine::evaluate_function: "
_ACC = "torch::autograd::AccumulateGrad"
#: user_annotation spans torch emits itself (steps, optimizer calls): never layers.
_TORCH_ANNOTATIONS = ("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)")
#: Kineto categories of device activities.
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _load_events(path: Path) -> tuple[list[dict], dict]:
    from .._files import load_json, read_text

    text = read_text(path, "Chrome trace", ProfileError)
    d = load_json(text, str(path), ProfileError)
    if isinstance(d, list):
        return d, {}
    if not isinstance(d, Mapping) or not isinstance(d.get("traceEvents"), list):
        raise ProfileError(f"{path}: field 'traceEvents': missing; expected a Chrome trace "
                           "written by torch.profiler's export_chrome_trace")
    return d["traceEvents"], d


def _spans(events: list[dict], path: Path) -> list[dict]:
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, Mapping) or e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e["dur"])
        except (KeyError, TypeError, ValueError):
            raise ProfileError(f"{path}: field 'traceEvents[{i}]': complete event without a "
                               "numeric ts/dur") from None
        if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0:
            raise ProfileError(f"{path}: field 'traceEvents[{i}].dur': {dur!r} is not a valid "
                               "duration")
        out.append({"name": str(e.get("name", "")), "cat": e.get("cat"), "ts": ts,
                    "end": ts + dur, "dur": dur, "tid": e.get("tid"),
                    # a non-object args (another tool's list, a string) carries nothing we read
                    "args": e["args"] if isinstance(e.get("args"), Mapping) else {}})
    return out


def _leaves(spans: list[dict]) -> list[dict]:
    """Spans (on one thread each) that contain no other span of the list."""
    by_tid: dict[Any, list[dict]] = {}
    for s in spans:
        by_tid.setdefault(s["tid"], []).append(s)
    out = []
    for lst in by_tid.values():
        lst.sort(key=lambda s: (s["ts"], -s["dur"]))
        for i, s in enumerate(lst):
            nxt = lst[i + 1] if i + 1 < len(lst) else None
            if nxt is None or nxt["ts"] >= s["end"]:
                out.append(s)
    return out


def _nbytes(args: Mapping) -> float:
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    if not dims:
        return 0.0
    n = math.prod(int(x) for x in dims[0]) if dims[0] else 1
    return float(n * _ELEM.get(types[0] if types else "float", 4))


class _DeviceTimes:
    """GPU activities indexed by the thread and CPU time of the call that launched them."""

    def __init__(self, spans: list[dict]) -> None:
        launch = {}
        for s in spans:
            if s["cat"] == "cuda_runtime" and "correlation" in s["args"]:
                launch[s["args"]["correlation"]] = (s["tid"], s["ts"])
        rows: dict[Any, list[tuple[float, float, float]]] = {}
        for s in spans:
            if s["cat"] in _DEVICE_CATS and s["args"].get("correlation") in launch:
                tid, ts = launch[s["args"]["correlation"]]
                rows.setdefault(tid, []).append((ts, s["ts"], s["end"]))
        self.n = sum(len(v) for v in rows.values())
        self._ts: dict[Any, list[float]] = {}
        self._cum: dict[Any, list[float]] = {}
        self._all = sorted(r for v in rows.values() for r in v)   # (launch ts, start, end)
        self._all_ts = [r[0] for r in self._all]
        for tid, v in rows.items():
            v.sort()
            self._ts[tid] = [r[0] for r in v]
            cum = [0.0]
            for _, a, b in v:
                cum.append(cum[-1] + (b - a))
            self._cum[tid] = cum

    def busy(self, tid: Any, t0: float, t1: float) -> float:
        """Seconds of device activity launched by thread ``tid`` within CPU time [t0, t1]."""
        if tid not in self._ts:
            return 0.0
        lo = bisect.bisect_left(self._ts[tid], t0)
        hi = bisect.bisect_right(self._ts[tid], t1)
        return (self._cum[tid][hi] - self._cum[tid][lo]) * 1e-6

    def phases(self, t0: float, tb: float, t1: float) -> tuple[float, float, float]:
        """Device start, backward start, end (seconds) of activity launched in [t0, t1]."""
        lo = bisect.bisect_left(self._all_ts, t0)
        hi = bisect.bisect_right(self._all_ts, t1)
        acts = self._all[lo:hi]
        if not acts:
            return 0.0, 0.0, 0.0
        start = min(a for _, a, _ in acts)
        end = max(b for _, _, b in acts)
        bwd = [a for ts, a, _ in acts if ts >= tb]
        mid = min(bwd) if bwd else end
        return start * 1e-6, mid * 1e-6, end * 1e-6


def _tensors(layer: str, size: float, found: Mapping[str, list[float]] | None,
             given: Mapping[str, float] | None) -> tuple[Tensor, ...] | None:
    """The layer's gradient tensors from its AccumulateGrad events, in registration order.

    A trace does not name parameters: they are called ``grad0, grad1...`` in the reverse of
    the order autograd accumulated them (bias then weight for Linear/Conv, i.e. the order
    ``module.parameters()`` yields). ``None`` when the size came from ``grad_bytes`` or the
    events do not add up to it.
    """
    if given is not None and layer in given:
        return None
    sizes = [b for b in reversed((found or {}).get(layer, [])) if b > 0]
    if not sizes or not math.isclose(sum(sizes), size, rel_tol=1e-9):
        return None
    return tuple(Tensor(f"grad{i}", b) for i, b in enumerate(sizes))


def from_chrome_trace(path: str | os.PathLike, *, name: str | None = None, batch_size: int = 1,
                      grad_bytes: Mapping[str, float] | None = None,
                      overhead: str = "proportional", device: str | None = None,
                      times: str = "auto") -> ModelProfile:
    """Read a ``torch.profiler`` Chrome trace and build a per-layer profile.

    Parameters
    ----------
    path : path-like
        JSON written by ``torch.profiler.profile(...).export_chrome_trace(path)``; record it
        with ``with_stack=True`` (module spans) and ``record_shapes=True`` (gradient sizes), and
        call ``prof.step()`` once per training step.
    name : str, optional
        Profile name; default the file name without extension.
    batch_size : int
        Samples per step (the trace does not say).
    grad_bytes : mapping, optional
        Layer name (e.g. ``"Linear_0"``) -> gradient bytes, for traces without shapes; it
        overrides sizes found in the trace.
    overhead : {"proportional", "separate", "none"}
        Spread unattributed step time over the layers, or keep raw span times.
    device : str, optional
        Device label; default from the trace's ``deviceProperties`` or ``"cpu"``.
    times : {"auto", "device", "cpu"}
        GPU activity times charged through their launches (``"device"``), or CPU-side span
        durations (``"cpu"``); ``"auto"`` picks ``"device"`` when the trace has GPU activities.

    Returns
    -------
    ModelProfile
        Mean times over the recorded steps, per-layer CV across steps (if >= 2 steps), and
        ``meta`` with the step times and the fraction of them the layer spans covered.

    Raises
    ------
    ProfileError
        Unreadable or malformed file, no layer spans, no gradient sizes.
    """
    p = Path(path)
    if overhead not in ("proportional", "separate", "none"):
        raise ProfileError(f"overhead={overhead!r}; use 'proportional', 'separate' or 'none'")
    if times not in ("auto", "device", "cpu"):
        raise ProfileError(f"times={times!r}; use 'auto', 'device' or 'cpu'")
    events, top = _load_events(p)
    spans = _spans(events, p)
    steps = sorted((s for s in spans if s["name"].startswith("ProfilerStep#")),
                   key=lambda s: s["ts"])
    ops = [s for s in spans if s["cat"] == "cpu_op"]
    if not steps:
        if not ops:
            raise ProfileError(f"{p}: no CPU op events; is this a torch.profiler trace?")
        steps = [{"ts": min(s["ts"] for s in ops), "end": max(s["end"] for s in ops)}]
    mods = [s for s in spans if s["cat"] == "python_function" and s["name"].startswith(_MOD)]
    kind = "nn.Module spans"
    if not mods:
        mods = [s for s in spans if s["cat"] == "user_annotation"
                and not s["name"].startswith(_TORCH_ANNOTATIONS)]
        kind = "record_function spans"
    if not mods:
        raise ProfileError(f"{p}: no layer spans: record the trace with "
                           "torch.profiler.profile(with_stack=True, record_shapes=True), or wrap "
                           "layers in torch.profiler.record_function(name)")
    layers_sp = _leaves(mods)
    for s in layers_sp:
        s["layer"] = s["name"][len(_MOD):] if s["name"].startswith(_MOD) else s["name"]
    # forward op sequence number -> layer (innermost layer span containing the op, same thread)
    by_tid: dict[Any, list[dict]] = {}
    for s in layers_sp:
        by_tid.setdefault(s["tid"], []).append(s)
    starts = {t: [s["ts"] for s in sorted(v, key=lambda s: s["ts"])] for t, v in by_tid.items()}
    for t in by_tid:
        by_tid[t].sort(key=lambda s: s["ts"])
    seq_layer: dict[int, str] = {}
    evals = []
    accs = []
    for s in ops:
        if s["name"].startswith(_EVAL):
            evals.append(s)
            continue
        if s["name"] == _ACC:
            accs.append(s)
            continue
        seq = s["args"].get("Sequence number")
        if seq is None or s["tid"] not in by_tid:
            continue
        j = bisect.bisect_right(starts[s["tid"]], s["ts"]) - 1
        if j >= 0 and by_tid[s["tid"]][j]["end"] >= s["end"]:
            seq_layer.setdefault(int(seq), by_tid[s["tid"]][j]["layer"])
    evals.sort(key=lambda s: s["ts"])
    accs.sort(key=lambda s: s["ts"])
    gpu = _DeviceTimes(spans)
    if times == "device" and not gpu.n:
        raise ProfileError(f"{p}: times='device' but the trace has no GPU activities linked to "
                           "their launches (kernel events with a 'correlation' id); record it "
                           "with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    on_device = times == "device" or (times == "auto" and gpu.n > 0)
    if on_device:
        for s in layers_sp + evals:
            s["dur"] = gpu.busy(s["tid"], s["ts"], s["end"]) * 1e6
    elif gpu.n:
        warnings.warn("trace has GPU activities but times='cpu': layer times are CPU-side "
                      "spans (kernel launches), not kernel execution", stacklevel=2)
    else:
        warnings.warn(f"{p.name}: no device activities in the trace, so layer times are CPU-side "
                      "spans, which include the CPU profiler's own per-operator overhead (it "
                      "inflates small ops most); check the profile's step time against an "
                      "unprofiled step, or record a GPU trace (ProfilerActivity.CUDA)",
                      stacklevel=2)

    opt_spans = {what: [s for s in spans if s["cat"] == "user_annotation"
                        and s["name"].startswith(f"Optimizer.{what}#")]
                 for what in ("zero_grad", "step")}

    def opt_time(what: str, st: dict) -> float:
        """Seconds of the optimizer's ``what`` spans inside step ``st`` (device or CPU)."""
        return math.fsum(gpu.busy(s["tid"], s["ts"], s["end"]) if on_device else s["dur"] * 1e-6
                         for s in opt_spans[what] if s["ts"] >= st["ts"] and s["end"] <= st["end"])

    zero_grad_rows, opt_rows = [], []
    order: list[str] = []
    fwd_rows, bwd_rows, bytes_first, tensors_first = [], [], None, None
    fwd_phase, bwd_phase, step_s = [], [], []
    for st in steps:
        inside = lambda s, st=st: s["ts"] >= st["ts"] and s["end"] <= st["end"]  # noqa: E731
        f: dict[str, float] = {}
        for s in sorted((s for s in layers_sp if inside(s)), key=lambda s: s["ts"]):
            f[s["layer"]] = f.get(s["layer"], 0.0) + s["dur"]
            if s["layer"] not in order:
                order.append(s["layer"])
        b: dict[str, float] = {}
        nb: dict[str, float] = {}
        nt: dict[str, list[float]] = {}
        last = None
        ev = [s for s in evals if inside(s)]
        ac = [s for s in accs if inside(s)]
        eval_owner = []
        for s in ev:
            if "AccumulateGrad" in s["name"]:
                owner = last
            else:
                seq = s["args"].get("Sequence number")
                owner = seq_layer.get(int(seq)) if seq is not None else None
                if owner is not None:
                    last = owner
            eval_owner.append(owner)
            if owner is not None:
                b[owner] = b.get(owner, 0.0) + s["dur"]
        ev_starts = [s["ts"] for s in ev]
        for s in ac:
            j = bisect.bisect_right(ev_starts, s["ts"]) - 1
            owner = eval_owner[j] if j >= 0 else None
            owner = owner if owner is not None else (order[-1] if order else None)
            if owner is not None:
                nb[owner] = nb.get(owner, 0.0) + _nbytes(s["args"])
                nt.setdefault(owner, []).append(_nbytes(s["args"]))
        if bytes_first is None:
            bytes_first, tensors_first = nb, nt
        b0 = ev[0]["ts"] if ev else st["end"]
        if on_device:
            t0, tb, t1 = gpu.phases(st["ts"], b0, st["end"])
            fwd_phase.append(tb - t0)
            bwd_phase.append(t1 - tb)
            step_s.append(t1 - t0)
        else:
            fwd_phase.append((b0 - st["ts"]) * 1e-6)
            bwd_phase.append((st["end"] - b0) * 1e-6)
            step_s.append((st["end"] - st["ts"]) * 1e-6)
        if overhead == "separate":
            zero_grad_rows.append(opt_time("zero_grad", st))
            opt_rows.append(opt_time("step", st))
            fwd_phase[-1] -= zero_grad_rows[-1]
            bwd_phase[-1] -= opt_rows[-1]
        fwd_rows.append(f)
        bwd_rows.append(b)
    if not order:
        raise ProfileError(f"{p}: no layer span lies inside a profiler step")
    sizes = dict(bytes_first or {})
    if grad_bytes is not None:
        unknown = sorted(set(grad_bytes) - set(order))
        if unknown:
            raise ProfileError(f"grad_bytes names unknown layer(s) {unknown}; layers in the "
                               f"trace are {order}")
        sizes.update({k: float(v) for k, v in grad_bytes.items()})
    if not any(sizes.get(k, 0.0) > 0 for k in order):
        raise ProfileError(f"{p}: the trace has no gradient sizes (AccumulateGrad shapes); record "
                           "it with record_shapes=True or pass grad_bytes={layer: bytes}")
    # fold layers without gradients into the preceding one with gradients
    keep = [k for k in order if sizes.get(k, 0.0) > 0]
    owner, cur = {}, keep[0]
    for k in order:
        if sizes.get(k, 0.0) > 0:
            cur = k
        owner[k] = cur
    fw = {k: [0.0] * len(steps) for k in keep}
    bw = {k: [0.0] * len(steps) for k in keep}
    for r in range(len(steps)):
        for k in order:
            fw[owner[k]][r] += fwd_rows[r].get(k, 0.0) * 1e-6
            bw[owner[k]][r] += bwd_rows[r].get(k, 0.0) * 1e-6
    covered = sum(sum(fw[k]) + sum(bw[k]) for k in keep) / sum(step_s)
    if overhead != "none":
        for rows, phase in ((fw, fwd_phase), (bw, bwd_phase)):
            for r in range(len(steps)):
                s = sum(rows[k][r] for k in keep)
                if phase[r] > s:
                    for k in keep:
                        rows[k][r] += ((phase[r] - s) * rows[k][r] / s if s > 0
                                       else (phase[r] - s) / len(keep))
    layers = []
    for k in keep:
        tot = [a + c for a, c in zip(fw[k], bw[k])]
        m = statistics.fmean(tot)
        cv = statistics.stdev(tot) / m if len(tot) > 1 and m > 0 else None
        layers.append(Layer(k, statistics.fmean(fw[k]), statistics.fmean(bw[k]), sizes[k], cv,
                            _tensors(k, sizes[k], tensors_first, grad_bytes)))
    if device is None:
        props = top.get("deviceProperties") or []
        props = [props] if isinstance(props, Mapping) else props if isinstance(props, list) else []
        device = str(props[0].get("name", "gpu")) if props and isinstance(props[0], Mapping) \
            else "cpu"
    source = (f"torch.profiler Chrome trace {p.name}: {len(steps)} step(s), "
              f"{'GPU activity' if on_device else 'CPU span'} times, layers from {kind}, "
              "backward charged by autograd sequence number, gradient sizes from "
              f"{'AccumulateGrad shapes' if bytes_first else 'grad_bytes'}; overhead={overhead!r} "
              f"(layer spans covered {covered:.1%} of the step time)")
    meta = {"tool": "from_chrome_trace", "trace": p.name, "steps": len(steps), "step_s": step_s,
            "step_mean_s": statistics.fmean(step_s), "covered_fraction": covered,
            "overhead": overhead, "layer_spans": kind,
            "times": "device" if on_device else "cpu"}
    steps_costs = {}
    if overhead == "separate":
        steps_costs = {"zero_grad_s": statistics.fmean(zero_grad_rows),
                       "optimizer_s": statistics.fmean(opt_rows)}
    return ModelProfile(name or p.stem, layers, batch_size, device, source, None, meta,
                        **steps_costs)
