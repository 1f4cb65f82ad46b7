"""What a ``pipeline`` prediction means: iteration time, idle (bubble) fraction and
utilisation per stage, model FLOPs utilisation, TFLOP/s per GPU, memory per GPU.

:func:`pipeline_report` reads a :class:`~sgdnet.prediction.Prediction` of the ``pipeline``
variant (:mod:`sgdnet.variants.pipeline`):

* ``iteration_s``: seconds per iteration (one optimizer step of the whole job), per
  replication, with its CI (``1 / iterations_per_s``);
* ``utilization[q]``: the busy fraction of stage ``q``'s GPUs (their passes and optimizer
  step; mean over the DP replicas), ``idle[q] = 1 - utilization[q]``: the pipeline bubble
  plus the waits for communication; with equal stages and free communication it is the
  closed form ``bubble`` (:func:`sgdnet.workload.parallelism.bubble_fraction`);
* ``tflops_per_gpu``: model FLOPs of an iteration (Narayanan et al. 2021, eq. 3, with
  activation recomputation when the net recomputes, as the paper counts its "achieved
  teraFLOP/s per GPU") over the iteration time and the GPUs; ``mfu``: the FLOPs without
  recomputation over the GPUs' datasheet peak at the profile's precision (model FLOPs
  utilisation, Chowdhery et al. 2022, PaLM, appendix B);
* ``memory``: per stage, parameters, gradients and optimizer states of one GPU's shard
  (:func:`sgdnet.workload.memory.memory_per_gpu`; ZeRO-1 shards the optimizer states over
  the DP group) and the activations the schedule holds at its peak: each forward pass keeps
  its chunk's blocks' activations until its backward (Korthikanti et al. 2022, eqs. 1-2:
  ``s b h (10 + 24/t + 5 a s/(h t))`` per block with TP, ``s b h (34/t + 5 a s/(h t))`` with
  sequence parallelism, ``2 s b h`` with full recomputation), so 1F1B's first stage holds
  ``p`` micro-batches' and GPipe's ``m``.

:func:`in_flight_peak` measures the most micro-batches a stage held from a traced run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import SgdnetError, VariantError
from .estimate import Estimate
from .workload.parallelism import Parallelism, bubble_fraction, model_flops, plan_memory

__all__ = ["PipelineReport", "pipeline_report", "in_flight_peak", "stage_memory",
           "pipeline_summary"]


@dataclass(frozen=True)
class PipelineReport:
    """The figures of a ``pipeline`` prediction (see the module docstring)."""

    iteration_s: Estimate
    samples_per_s: Estimate
    utilization: dict[int, Estimate]
    idle: dict[int, Estimate]
    bubble: float
    tflops_per_gpu: Estimate | None
    mfu: Estimate | None
    memory: list[Any] = field(default_factory=list)
    plan: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-able view."""
        return {"iteration_s": self.iteration_s.to_dict(),
                "samples_per_s": self.samples_per_s.to_dict(),
                "utilization": {str(q): e.to_dict() for q, e in self.utilization.items()},
                "idle": {str(q): e.to_dict() for q, e in self.idle.items()},
                "bubble_closed_form": self.bubble,
                "tflops_per_gpu": None if self.tflops_per_gpu is None
                else self.tflops_per_gpu.to_dict(),
                "mfu": None if self.mfu is None else self.mfu.to_dict(),
                "memory": [m.to_dict() for m in self.memory], "plan": dict(self.plan)}

    def __str__(self) -> str:
        it = self.iteration_s
        lo, hi = it.ci()
        lines = [f"iteration: {it.mean:.6g} s (95% CI {lo:.6g} .. {hi:.6g}), "
                 f"{self.samples_per_s.mean:.6g} samples/s",
                 f"plan: {self.plan}",
                 f"bubble (closed form, equal stages, free communication): {self.bubble:.4f}"]
        for q in sorted(self.utilization):
            lines.append(f"  stage {q}: GPU busy {self.utilization[q].mean:.4f}, idle "
                         f"{self.idle[q].mean:.4f}")
        if self.tflops_per_gpu is not None:
            lines.append(f"model TFLOP/s per GPU: {self.tflops_per_gpu.mean:.1f}")
        if self.mfu is not None:
            lines.append(f"MFU: {self.mfu.mean:.4f}")
        for q, m in enumerate(self.memory):
            lines.append(f"stage {q} " + str(m).replace("\n", "\n  "))
        return "\n".join(lines)


def _check(prediction: Any) -> dict:
    meta = getattr(prediction, "meta", None) or {}
    if "parallelism" not in meta:
        raise VariantError(f"pipeline_report() reads a prediction of the 'pipeline' variant, got "
                           f"{getattr(prediction, 'variant', prediction)!r}; predict with "
                           "sgdnet.predict('pipeline', ...)")
    return meta


def stage_memory(profile: Any, meta: dict, device: Any = None) -> list[Any]:
    """Memory per GPU of each stage of a ``pipeline`` net's ``meta``
    (:func:`sgdnet.workload.parallelism.plan_memory`)."""
    return plan_memory(profile, Parallelism(**meta["parallelism"]),
                       [tuple(r) for r in meta["chunks"]], dtype=meta.get("dtype", "fp32"),
                       zero_stage=meta.get("zero_stage", 0),
                       recompute=bool(meta.get("recompute")), device=device)


def pipeline_report(prediction: Any, device: Any = None) -> PipelineReport:
    """The :class:`PipelineReport` of a ``pipeline`` prediction (module docstring).

    Raises
    ------
    VariantError
        ``prediction`` is not of the ``pipeline`` variant.
    """
    meta = _check(prediction)
    pl = meta["parallelism"]
    p, m, v, dp = pl["pp"], pl["microbatches"], pl["virtual_stages"], pl["dp"]
    n = pl["tp"] * p * dp
    rate = prediction.iterations_per_s.samples
    with np.errstate(divide="ignore"):
        it = Estimate(1.0 / rate, unit="s", label="seconds per iteration")
    util: dict[int, Estimate] = {}
    idle: dict[int, Estimate] = {}
    for q in range(p):
        rows = [prediction.utilization[meta["devices"][f"{q},{d}"]["gpu"]].samples
                for d in range(dp)]
        u = np.mean(rows, axis=0)
        util[q] = Estimate(u, label=f"stage {q} GPU busy fraction")
        idle[q] = Estimate(1.0 - u, label=f"stage {q} idle fraction")
    from .workload.memory import known_device

    prof = prediction.model
    tr = meta.get("transformer")
    tfl = mfu = None
    if tr is not None:
        from .workload.compute import get_device

        B = dp * m * prof.batch_size
        hw = model_flops(B, tr["seq_len"], tr["blocks"], tr["hidden"], tr["vocab"],
                         recompute=bool(meta.get("recompute")))
        mf = model_flops(B, tr["seq_len"], tr["blocks"], tr["hidden"], tr["vocab"])
        tfl = Estimate(hw * rate / n / 1e12, unit="TFLOP/s", label="model TFLOP/s per GPU")
        dev = get_device(device) if device is not None else known_device(prof)
        if dev is not None and prof.precision in dev.matmul_flops:
            peak = dev.matmul_flops[prof.precision]
            mfu = Estimate(mf * rate / n / peak, label="model FLOPs utilisation")
    try:
        mem = stage_memory(prof, meta, known_device(prof, device))
    except SgdnetError:  # a profile without a parameter count: no memory figure
        mem = []
    return PipelineReport(it, prediction.samples_per_s, util, idle, bubble_fraction(p, m, v),
                          tfl, mfu, mem, dict(pl))


def in_flight_peak(result: Any, stage: int, replica: int = 0, rep: int = 0) -> int:
    """The most micro-batch passes stage ``stage`` of replica ``replica`` held at once in
    replication ``rep`` of a traced run (``predict(..., trace=True)``): +1 when a forward
    pass ends (its activations kept), -1 when a backward pass starts (the ``inflight``
    place's marking)."""
    ev = []
    for e in result.trace_events(rep):
        tg = e["tags"]
        if tg.get("kind") != "compute" or tg.get("pipe_stage") != stage or \
                tg.get("replica") != replica:
            continue
        if tg.get("phase") == "fwd":
            ev.append((e["end"], 1))
        elif tg.get("phase") == "bwd":
            ev.append((e["start"], -1))
    held = peak = 0
    # at a tie the forward's deposit comes first: the place holds it before a backward takes
    for _, x in sorted(ev, key=lambda z: (z[0], -z[1])):
        held += x
        peak = max(peak, held)
    return peak


def pipeline_summary(prediction: Any) -> str:
    """One line of a ``pipeline`` prediction for ``sgdnet predict``: the plan, the closed-form
    bubble, the predicted idle fraction (mean over the stages), TFLOP/s per GPU and MFU."""
    rep = pipeline_report(prediction)
    pl = rep.plan
    idle = float(np.mean([e.mean for e in rep.idle.values()]))
    parts = [f"{pl['tp'] * pl['pp'] * pl['dp']} GPUs: tp {pl['tp']} x pp {pl['pp']} x dp "
             f"{pl['dp']}, m {pl['microbatches']} {pl['schedule']}", f"bubble {rep.bubble:.3f} "
             f"(closed form), idle {idle:.3f} (predicted)"]
    if rep.tflops_per_gpu is not None:
        parts.append(f"{rep.tflops_per_gpu.mean:.1f} TFLOP/s per GPU")
    if rep.mfu is not None:
        parts.append(f"MFU {rep.mfu.mean:.3f}")
    return "; ".join(parts)
