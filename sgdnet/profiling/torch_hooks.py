"""Measure a :class:`~sgdnet.workload.profile.ModelProfile` from a real ``torch.nn.Module``.

``torch`` is imported inside the functions only; the rest of sgdnet works without it.

How the times are measured (one training step = forward, loss, backward):

* **Forward** of every leaf module (a module without children) is the wall time between its
  forward pre-hook and its forward hook.
* **Backward** is cut into a timeline. A hook on each leaf module's output tensor fires when
  autograd is about to run that module's backward (the gradient of its output is complete);
  from that instant until the next such instant (or the end of ``backward()``) the module is
  the one computing, and the interval is charged to it. Autograd runs gradient accumulation
  (``AccumulateGrad``) as soon as a parameter's gradient exists, i.e. before moving on to the
  previous module, so a module's interval includes accumulating its own parameter gradients.
  Time before the first hook fires is the loss's own backward.
* On CUDA every hook records a CUDA event on the current stream instead of reading the host
  clock, and the step's events are resolved after one synchronisation at its end: the times
  are GPU times (the event completes when the kernels enqueued before it have run), and the
  host runs ahead as in real training (no synchronisation per hook).
* **Gradient bytes** are ``numel * element_size`` of every parameter with ``requires_grad``,
  each counted once (shared parameters go to the first module that owns them). Each layer
  lists its parameters as :class:`~sgdnet.workload.profile.Tensor` entries (``weight``,
  ``bias``... in registration order), so communication can be per tensor
  (:meth:`~sgdnet.workload.profile.ModelProfile.messages`).
* Leaf modules without parameters (ReLU, pooling, dropout...) are folded into the preceding
  parameter-carrying module in forward order (those before the first one into it), as in the
  built-in library. Parameters owned directly by a non-leaf module go to the last layer.
* ``overhead``: ``"none"`` keeps the pure module times; ``"proportional"`` (default) also
  spreads the step's unattributed time -- forward code of non-leaf modules (residual adds,
  reshapes), the loss, the loss's backward -- over the layers in proportion to their forward
  (resp. backward) time, so that the profile's compute total equals the measured step time;
  ``"separate"`` keeps the loss's forward and backward apart as the profile's ``loss_s`` and
  spreads only the rest.
* **Optimizer** (``optimizer=`` given): every step runs ``optimizer.zero_grad()`` before the
  forward and ``optimizer.step()`` after the backward, both timed: ``zero_grad_s``, and the
  step's time apportioned to the tensors in proportion to their bytes as their ``update_s``
  (an optimizer update is memory-bound per parameter), so a step costs
  ``step_s = compute_s + zero_grad_s + loss_s + update_s`` without folding anything into a
  layer.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from ..errors import ProfileError
from ..workload.profile import Layer, ModelProfile, Tensor

__all__ = ["profile_module"]


def _require_torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ProfileError("profiling needs PyTorch: pip install 'sgdnet[torch]'") from e
    return torch


class _WallClock:
    """Host clock (CPU modules): stamps are ``perf_counter`` readings."""

    def stamp(self) -> float:
        return time.perf_counter()

    def resolve(self, stamps: list) -> list[float]:
        return list(stamps)


class _CudaEventClock:
    """CUDA events on the current stream; resolved to seconds after one synchronisation."""

    def __init__(self, torch: Any, device: Any) -> None:
        self._torch, self._device = torch, device

    def stamp(self) -> Any:
        e = self._torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def resolve(self, stamps: list) -> list[float]:
        self._torch.cuda.synchronize(self._device)
        first = stamps[0]
        return [first.elapsed_time(e) / 1e3 for e in stamps]   # ms -> s, from the first


def _default_loss(torch, out):
    if isinstance(out, torch.Tensor):
        return out.float().sum()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        ts = [o.float().sum() for o in out if isinstance(o, torch.Tensor) and o.requires_grad]
        if ts:
            return sum(ts)
    raise ProfileError(f"cannot build a default loss from a {type(out).__name__} output; pass "
                       "loss_fn=lambda out: <scalar tensor>")


def _fold(names, fwd, bwd, nbytes):
    """Merge parameterless entries into the preceding parameter-carrying one."""
    keep = [i for i, b in enumerate(nbytes) if b > 0]
    if not keep:
        return names, fwd, bwd, nbytes
    owner = {}
    cur = keep[0]
    for i in range(len(names)):
        if nbytes[i] > 0:
            cur = i
        owner[i] = cur
    out_f = {k: [0.0] * len(fwd[0]) for k in keep}
    out_b = {k: [0.0] * len(bwd[0]) for k in keep}
    for i, o in owner.items():
        for r in range(len(fwd[i])):
            out_f[o][r] += fwd[i][r]
            out_b[o][r] += bwd[i][r]
    return ([names[k] for k in keep], [out_f[k] for k in keep], [out_b[k] for k in keep],
            [nbytes[k] for k in keep])


def _spread(per_layer, totals):
    """Scale each repeat's layer times so that they sum to that repeat's total."""
    n_rep = len(totals)
    for r in range(n_rep):
        s = sum(col[r] for col in per_layer)
        if totals[r] <= s:
            continue
        if s > 0:
            f = totals[r] / s
            for col in per_layer:
                col[r] *= f
        else:
            for col in per_layer:
                col[r] += (totals[r] - s) / len(per_layer)


def _summary(fwd, bwd):
    f = [statistics.fmean(x) for x in fwd]
    b = [statistics.fmean(x) for x in bwd]
    cv = []
    for x, y in zip(fwd, bwd):
        tot = [p + q for p, q in zip(x, y)]
        m = statistics.fmean(tot)
        cv.append(statistics.stdev(tot) / m if len(tot) > 1 and m > 0 else None)
    return f, b, cv


def profile_module(module: Any, example_input: Any, repeats: int = 10, *, warmup: int = 2,
                   loss_fn: Any = None, name: str | None = None, batch_size: int | None = None,
                   overhead: str = "proportional", fold_parameterless: bool = True,
                   optimizer: Any = None) -> ModelProfile:
    """Measure per-layer forward/backward time (mean and CV) and gradient bytes of a module.

    Parameters
    ----------
    module : torch.nn.Module
        The model, already on the device to profile (its parameters' device is used).
    example_input : tensor, tuple of tensors, or dict
        One batch; a tuple is unpacked into ``module(*input)``, a dict into ``module(**input)``.
    repeats : int
        Measured training steps (>= 1; CVs need >= 2).
    warmup : int
        Unmeasured steps first (allocator, kernels and caches warm up).
    loss_fn : callable, optional
        ``loss_fn(output) -> scalar tensor``; default: sum of the (float) output.
    name : str, optional
        Profile name; default the module's class name.
    batch_size : int, optional
        Samples per step; default the first dimension of the (first) input tensor.
    overhead : {"proportional", "separate", "none"}
        Whether unattributed step time is spread over the layers, the loss kept apart as
        ``loss_s``, or neither (see the module docstring).
    fold_parameterless : bool
        Fold parameterless leaf modules into their preceding parameter layer (default) or
        keep them as layers with zero gradient bytes.
    optimizer : torch.optim.Optimizer, optional
        Time its ``zero_grad`` and ``step`` in every step (``zero_grad_s`` and the tensors'
        ``update_s``); it really updates the module's parameters.

    Returns
    -------
    ModelProfile
        Times in seconds on the local device; ``layer.cv`` is the CV of the layer's
        forward+backward time across repeats; ``meta`` holds the measured step times.

    Raises
    ------
    ProfileError
        Torch missing, bad arguments, or a model without parameters requiring gradients.
    """
    torch = _require_torch()
    if not isinstance(module, torch.nn.Module):
        raise ProfileError(f"profile_module needs a torch.nn.Module, got {type(module).__name__}")
    for what, v, lo in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ProfileError(f"profile_module: {what} must be an integer >= {lo}, got {v!r}")
    if overhead not in ("proportional", "separate", "none"):
        raise ProfileError(f"overhead={overhead!r}; use 'proportional', 'separate' or 'none'")
    if optimizer is not None and not (callable(getattr(optimizer, "step", None))
                                      and callable(getattr(optimizer, "zero_grad", None))):
        raise ProfileError(f"optimizer must be a torch.optim.Optimizer (step and zero_grad), "
                           f"got {type(optimizer).__name__}")
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ProfileError("the module has no parameters with requires_grad; nothing to train")
    dev = params[0].device
    cuda = dev.type == "cuda"

    clock = _CudaEventClock(torch, dev) if cuda else _WallClock()
    now = clock.stamp

    leaves = [(f"{n}:{type(m).__name__}" if n else type(m).__name__, m)
              for n, m in module.named_modules()
              if not any(True for _ in m.children())]
    seen: set[int] = set()
    leaf_bytes: dict[int, float] = {}
    leaf_tensors: dict[int, list[Tensor]] = {}
    for _, m in leaves:
        b = 0.0
        ts = []
        for pn, p in m.named_parameters(recurse=False):
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                b += p.numel() * p.element_size()
                ts.append(Tensor(pn, float(p.numel() * p.element_size())))
        leaf_bytes[id(m)] = b
        leaf_tensors[id(m)] = ts
    orphans = [Tensor(pn, float(p.numel() * p.element_size()))
               for pn, p in module.named_parameters() if p.requires_grad and id(p) not in seen]
    orphan = float(sum(t.nbytes for t in orphans))

    state: dict[str, Any] = {}
    handles = []

    def pre(m, args):
        state["t_pre"][id(m)] = now()
        if id(m) not in state["order_set"]:
            state["order_set"].add(id(m))
            state["order"].append(id(m))

    def post(m, args, out):
        state["spans"].append((id(m), state["t_pre"][id(m)], now()))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        key = id(m)

        def mark(grad):
            state["marks"].append((now(), key))

        for o in outs:
            if isinstance(o, torch.Tensor) and o.requires_grad:
                o.register_hook(mark)
                break

    for _, m in leaves:
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))

    if isinstance(example_input, dict):
        call = lambda: module(**example_input)  # noqa: E731
    elif isinstance(example_input, tuple):
        call = lambda: module(*example_input)  # noqa: E731
    else:
        call = lambda: module(example_input)  # noqa: E731

    records = []
    try:
        for it in range(warmup + repeats):
            state.update(t_pre={}, spans=[], marks=[], order=[], order_set=set())
            z0 = now()
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
            else:
                module.zero_grad(set_to_none=True)
            t0 = now()
            out = call()
            t1 = now()
            loss = loss_fn(out) if loss_fn is not None else _default_loss(torch, out)
            t2 = now()
            loss.backward()
            t3 = now()
            if optimizer is not None:
                optimizer.step()
            t4 = now()
            if it >= warmup:
                spans, marks = state["spans"], state["marks"]
                # marks in the order the hooks fired (one autograd thread, one stream)
                flat = clock.resolve([z0, t0, t1, t2, t3, t4]
                                     + [x for _, a, b in spans for x in (a, b)]
                                     + [t for t, _ in marks])
                z0, t0, t1, t2, t3, t4 = flat[:6]
                fwd: dict[int, float] = {}
                for j, (k, _, _) in enumerate(spans):
                    fwd[k] = fwd.get(k, 0.0) + flat[7 + 2 * j] - flat[6 + 2 * j]
                mt = flat[6 + 2 * len(spans):]
                bwd: dict[int, float] = {}
                for j, (_, k) in enumerate(marks):
                    end = mt[j + 1] if j + 1 < len(marks) else t3
                    bwd[k] = bwd.get(k, 0.0) + end - mt[j]
                t_mark = mt[0] if mt else t3       # the loss's backward ends at the first mark
                records.append({"order": list(state["order"]), "fwd": fwd,
                                "bwd": bwd, "t_fwd": t2 - t0, "t_bwd": t3 - t2,
                                "t_step": t3 - t0, "t_model_fwd": t1 - t0,
                                "t_loss": (t2 - t1) + (t_mark - t2), "t_model_bwd": t3 - t_mark,
                                "t_zero_grad": t0 - z0, "t_opt": t4 - t3})
    finally:
        for h in handles:
            h.remove()
        module.zero_grad(set_to_none=True)

    names_of = {id(m): n for n, m in leaves}
    order = records[0]["order"]
    if not order:
        raise ProfileError("no leaf module ran during forward; is example_input right?")
    names = [names_of[k] for k in order]
    nbytes = [leaf_bytes[k] for k in order]
    tensors = {names_of[k]: list(leaf_tensors[k]) for k in order}
    if orphan:
        nbytes[-1] += orphan
        taken = {t.name for t in tensors[names[-1]]}
        for t in orphans:  # a root parameter named like the last layer's own: keep both
            name = t.name if t.name not in taken else f"{type(module).__name__}.{t.name}"
            taken.add(name)
            tensors[names[-1]].append(Tensor(name, t.nbytes))
    fwd = [[r["fwd"].get(k, 0.0) for r in records] for k in order]
    bwd = [[r["bwd"].get(k, 0.0) for r in records] for k in order]
    if fold_parameterless:
        names, fwd, bwd, nbytes = _fold(names, fwd, bwd, nbytes)
    covered = (sum(map(sum, fwd)) + sum(map(sum, bwd))) / sum(r["t_step"] for r in records)
    loss_s = 0.0
    if overhead == "proportional":
        _spread(fwd, [r["t_fwd"] for r in records])
        _spread(bwd, [r["t_bwd"] for r in records])
    elif overhead == "separate":
        _spread(fwd, [r["t_model_fwd"] for r in records])
        _spread(bwd, [r["t_model_bwd"] for r in records])
        loss_s = statistics.fmean(r["t_loss"] for r in records)
    zero_grad_s = opt_s = 0.0
    if optimizer is not None:
        zero_grad_s = statistics.fmean(r["t_zero_grad"] for r in records)
        opt_s = statistics.fmean(r["t_opt"] for r in records)
        total = float(sum(nbytes))
        for n in tensors:
            tensors[n] = [Tensor(t.name, t.nbytes, opt_s * t.nbytes / total)
                          for t in tensors[n]]
    f, b, cv = _summary(fwd, bwd)
    if batch_size is None:
        first = example_input
        if isinstance(first, dict):
            first = next(iter(first.values()), None)
        if isinstance(first, (tuple, list)):
            first = first[0] if first else None
        batch_size = int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1
    steps = [r["t_step"] for r in records]
    device = str(dev) if not cuda else f"{dev} ({torch.cuda.get_device_name(dev)})"
    source = (f"measured by sgdnet.profiling.profile_module with torch {torch.__version__} on "
              f"{device} ({'CUDA events' if cuda else 'host clock'}): {repeats} steps after "
              f"{warmup} warm-up; module hooks (forward) and a "
              f"gradient-hook timeline (backward); overhead={overhead!r} "
              f"(leaf modules covered {covered:.1%} of the step time)")
    layers = [Layer(n, fi, bi, nb, c, tensors[n] or None)
              for n, fi, bi, nb, c in zip(names, f, b, nbytes, cv)]
    meta = {"tool": "profile_module", "torch": torch.__version__, "repeats": repeats,
            "warmup": warmup, "step_s": steps, "step_mean_s": statistics.fmean(steps),
            "covered_fraction": covered, "overhead": overhead}
    if optimizer is not None:
        meta["optimizer"] = type(optimizer).__name__
        meta["optimizer_step_s"] = opt_s
    if not all(math.isfinite(x) for x in steps):  # pragma: no cover - defensive
        raise ProfileError("non-finite step time measured")
    return ModelProfile(name or type(module).__name__, layers, batch_size, device, source,
                        None, meta, zero_grad_s=zero_grad_s, loss_s=loss_s)
