"""The pipeline bubble under noise: idle fraction of 1F1B and GPipe vs per-op noise, and one
stage 10 % slow against its hand-derived bounds (issue #39), drawn to
``docs/img/pipeline_bubble_noise.png``.

Setup: ``p`` equal stages (one layer each, forward ``t_f = 1`` s, backward ``t_b = 2`` s per
micro-batch), free communication, ``m`` micro-batches per iteration. Every forward and backward
pass draws its duration independently from a log-normal or a gamma law of the same mean and
coefficient of variation ``cv`` (the ``pipeline`` variant's nets, :mod:`sgdnet.variants.pipeline`;
gamma is the variants' own law, log-normal is swapped into the built net's compute transitions).

* Panels (a), (b): the idle fraction of a stage's GPU (``1 -`` its busy fraction, mean over
  the stages) per replication, mean and 95 % CI over the replications, against ``cv``. At
  ``cv = 0`` it is the closed form ``(p - 1) / (m + p - 1)`` (Narayanan et al., SC'21, §2.2),
  drawn as the dashed reference; noise makes every stage wait for the slowest of its
  predecessors' passes, so the bubble grows with ``cv``.
* Panel (c): the last stage 10 % slow (its GPU's speed 1/1.1), iteration time over
  ``t_f + t_b`` against ``cv``, with the bounds tests/test_pipeline_schedules.py derives by
  hand at ``cv = 0``: GPipe is a flow shop of ``m`` identical jobs per phase, exactly
  ``(p - 1) + 1.1 m``; 1F1B lies in ``[1.1 m + (p - 1), 1.1 (m + p - 1)]``.

Usage::

    PYTHONPATH=. python scripts/pipeline_noise.py [--p 4] [--m 8 16] [--reps 10] [--steps 60]
        [--out docs/img/pipeline_bubble_noise.png]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from sgdnet.dists import LogNormal
from sgdnet.estimate import Estimate
from sgdnet.pipeline_metrics import pipeline_report
from sgdnet.prediction import predict_net
from sgdnet.variants import build
from sgdnet.workload import Cluster, ModelProfile
from sgdnet.workload.parallelism import bubble_fraction

TF, TB = 1.0, 2.0
CVS = (0.0, 0.05, 0.1, 0.2)
LAWS = ("lognormal", "gamma")
SCHEDULES = ("1f1b", "gpipe")
SLOW = 1.1
NAMES = {"1f1b": "1F1B", "gpipe": "GPipe"}


def equal(p: int, cv: float) -> ModelProfile:
    """``p`` equal layers (one per stage), each pass of coefficient of variation ``cv``."""
    return ModelProfile("equal", [{"name": f"l{i}", "forward_s": TF, "backward_s": TB,
                                   "grad_bytes": 0, "cv": cv or None} for i in range(p)], 1)


def run(p: int, m: int, schedule: str, cv: float, law: str, *, slow: bool = False,
        steps: int = 60, reps: int = 10, seed: int = 1):
    """``(idle Estimate, iteration-time Estimate)`` of one configuration."""
    prof = equal(p, cv)
    cl = Cluster(workers=p, speeds=[1.0] * (p - 1) + [1 / SLOW] if slow else None)
    opts = dict(pp=p, microbatches=m, schedule=schedule, activation_bytes=0,
                partition="balanced")
    net = build("pipeline", prof, cl, **opts)
    if law == "lognormal" and cv > 0:
        for t in net.transitions.values():
            if t.tags.get("kind") == "compute" and t.duration.mean > 0:
                t.duration = LogNormal(t.duration.mean, cv)
        net.touch()
    pred = predict_net("pipeline", prof, cl, net, steps=steps, warmup=5,
                       replications=1 if cv == 0 else reps, seed=seed, parallel=False, **opts)
    rep = pipeline_report(pred)
    idle = np.mean([rep.idle[q].samples for q in range(p)], axis=0)
    return (Estimate(idle, label="idle fraction"),
            Estimate(rep.iteration_s.samples / (TF + TB), label="iteration / (t_f + t_b)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=4)
    ap.add_argument("--m", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default="docs/img/pipeline_bubble_noise.png")
    a = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = a.p
    fig, axes = plt.subplots(1, len(a.m) + 1, figsize=(5.2 * (len(a.m) + 1), 4.4))
    style = {("1f1b", "lognormal"): ("C0", "o", "-"), ("1f1b", "gamma"): ("C0", "s", "--"),
             ("gpipe", "lognormal"): ("C3", "o", "-"), ("gpipe", "gamma"): ("C3", "s", "--")}
    xs = np.array(CVS)
    print(f"p = {p}; idle fraction (mean over stages), mean [95% CI] over {a.reps} "
          f"replications of {a.steps} iterations")
    for ax, m in zip(axes, a.m):
        ref = bubble_fraction(p, m)
        ax.axhline(ref, color="0.4", ls=":", lw=1.2,
                   label=f"closed form (p-1)/(m+p-1) = {ref:.3f}")
        for k, (sched, law) in enumerate(style):
            col, mk, ls = style[(sched, law)]
            mean, lo, hi = [], [], []
            for cv in CVS:
                idle, _ = run(p, m, sched, cv, law, steps=a.steps, reps=a.reps)
                c = idle.ci()
                mean.append(idle.mean)
                lo.append(c[0])
                hi.append(c[1])
                print(f"  m={m:3d} {sched:5s} {law:9s} cv={cv:4.2f}: {idle.mean:.4f} "
                      f"[{c[0]:.4f}, {c[1]:.4f}]")
            mean, lo, hi = map(np.asarray, (mean, lo, hi))
            lo, hi = np.where(np.isnan(lo), mean, lo), np.where(np.isnan(hi), mean, hi)
            dx = (k - 1.5) * 0.003
            ax.errorbar(xs + dx, mean, yerr=[mean - lo, hi - mean], color=col, marker=mk,
                        ls=ls, ms=5, capsize=3, label=f"{NAMES[sched]}, {law}")
        ax.plot([0], [ref], marker="*", ms=14, color="k", ls="none", zorder=5)
        ax.set_title(f"({chr(97 + a.m.index(m))}) p = {p}, m = {m}: bubble vs per-op noise")
        ax.set_xlabel("coefficient of variation of each pass")
        ax.set_ylabel("idle fraction of a stage (mean over stages)")
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    # (c) one stage 10 % slow
    m = a.m[0]
    ax = axes[-1]
    g_exact = (p - 1) + SLOW * m
    lo_b, hi_b = SLOW * m + (p - 1), SLOW * (m + p - 1)
    ax.axhspan(lo_b, hi_b, color="C0", alpha=0.12,
               label=f"1F1B bound [{lo_b:.1f}, {hi_b:.1f}] (cv = 0)")
    ax.axhline(g_exact, color="C3", ls=":", lw=1.2, label=f"GPipe exact {g_exact:.1f} (cv = 0)")
    ax.axhline(m + p - 1, color="0.4", ls="--", lw=1, label=f"no slow stage: m+p-1 = {m + p - 1}")
    print(f"one stage {SLOW - 1:.0%} slow, m = {m}: iteration / (t_f + t_b); GPipe exact "
          f"{g_exact:.2f}, 1F1B in [{lo_b:.2f}, {hi_b:.2f}] at cv = 0")
    ok = True
    for k, sched in enumerate(SCHEDULES):
        col = "C0" if sched == "1f1b" else "C3"
        mean, err = [], []
        for cv in CVS:
            _, it = run(p, m, sched, cv, "lognormal", slow=True, steps=a.steps, reps=a.reps)
            c = it.ci()
            mean.append(it.mean)
            err.append((it.mean - c[0], c[1] - it.mean))
            print(f"  {sched:5s} lognormal cv={cv:4.2f}: {it.mean:.4f} [{c[0]:.4f}, {c[1]:.4f}]")
            if cv == 0:
                ok &= (abs(it.mean - g_exact) < 1e-9 if sched == "gpipe"
                       else lo_b - 1e-9 <= it.mean <= hi_b + 1e-9)
        e = np.nan_to_num(np.asarray(err).T)  # cv = 0: one replication, no CI
        ax.errorbar(xs + (k - 0.5) * 0.004, mean, yerr=e, color=col, marker="o", capsize=3,
                    label=f"{NAMES[sched]}, last stage 1.1x, log-normal")
    ax.set_title(f"({chr(97 + len(a.m))}) p = {p}, m = {m}: one stage 10 % slow")
    ax.set_xlabel("coefficient of variation of each pass")
    ax.set_ylabel("iteration time / (t_f + t_b)")
    ax.set_xticks(xs)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Pipeline bubble under noise: {p} equal stages, free communication, "
                 f"{a.reps} replications x {a.steps} iterations, 95 % CIs", fontsize=11)
    fig.tight_layout()
    fig.savefig(a.out, dpi=130)
    print(f"cv = 0 within the hand-derived bounds: {ok}; figure -> {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
