"""Per-event check of the async-PS model against a real run's step-end timestamps.

Reads a testbed results file whose runs kept every worker's step-end timestamps (``sgdnet
testbed ... --out``; e.g. ``docs/data/testbed/async-ps-n4-100mbit-stamps.json``), predicts the
same configuration from the cluster file and the profile (with the file's ``link.share_cv`` and
with exact max-min sharing, ``share_cv`` 0) and prints, for each, the statistics of the
per-worker step times (warm-up excluded) and of the gaps between consecutive step ends of any
worker (a staggered pipeline has gap CV 0, independent random phases about 1, workers in phase
more)::

    PYTHONPATH=. python scripts/stamps_compare.py docs/data/testbed/async-ps-n4-100mbit-stamps.json \\
        docs/data/testbed/cluster-100mbit.yaml --profile docs/data/testbed/profile-tb-mlp.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def stats(per_worker: list[list[float]]) -> dict[str, float]:
    """Step-time and gap statistics of per-worker step-end times (seconds, warm-up dropped)."""
    steps = np.concatenate([np.diff(s) for s in per_worker])
    ev = np.sort(np.concatenate([np.asarray(s[1:]) for s in per_worker]))
    gaps = np.diff(ev)
    mean_step = float(steps.mean())
    return {"steps_per_s": sum((len(s) - 1) / (s[-1] - s[0]) for s in per_worker),
            "step_ms": 1e3 * mean_step, "step_cv": float(steps.std() / mean_step),
            "p10_ms": 1e3 * float(np.percentile(steps, 10)),
            "p90_ms": 1e3 * float(np.percentile(steps, 90)),
            "gap_cv": float(gaps.std() / gaps.mean()),
            "short": float(np.mean(gaps < mean_step / 16))}


def model_windows(scheme: str, profile, cluster_file: Path, workers: int, window: int,
                  windows: int, **overrides) -> list[dict[str, float]]:
    """``windows`` model windows of ``window`` step ends per worker (one per replication)."""
    import sgdnet
    from sgdnet import Cluster

    cl = Cluster.from_file(cluster_file, workers=workers, **overrides)
    p = sgdnet.predict(scheme, profile, cl, steps=window + 1, warmup=20, replications=windows,
                       seed=0)
    out = []
    for rep in range(windows):
        t, tr = p.result.step_completion_times(rep)
        per: dict = {}
        for ti, x in zip(tr, t):
            per.setdefault(p.result.transition_tags[ti].get("worker"), []).append(float(x))
        out.append(stats([s[:window + 1] for s in per.values()]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("cluster", type=Path)
    ap.add_argument("--profile", type=Path, required=True)
    ap.add_argument("--windows", type=int, default=8, help="model windows (replications)")
    a = ap.parse_args(argv)
    from sgdnet.workload import ModelProfile

    res = json.loads(a.runs.read_text())
    w = int(res["meta"]["warmup"])
    prof = ModelProfile.load(a.profile)
    rows = []
    for r in res["runs"]:
        st = r.get("worker_stamps_s")
        if not st:
            continue
        rows.append((f"real, repeat {r['repeat']}", stats([s[w - 1:] for s in st])))
        scheme, n = r["scheme"], r["workers"]
        window = len(st[0]) - w
    for label, over in (("model, link.share_cv of the file", {}),
                        ("model, exact max-min", {"share_cv_in": 0.0, "share_cv_out": 0.0})):
        ws = model_windows(scheme, prof, a.cluster, n, window, a.windows, **over)
        rows.append((f"{label} (mean of {a.windows} windows)",
                     {k: float(np.mean([x[k] for x in ws])) for k in ws[0]}))
    print(f"{scheme}, n = {n}: {window} measured steps per worker per window")
    print()
    print("| | steps/s | step mean (ms) | step CV | step p10–p90 (ms) | gap CV | gaps < step/16 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, s in rows:
        print(f"| {label} | {s['steps_per_s']:.2f} | {s['step_ms']:.0f} | {s['step_cv']:.2f} | "
              f"{s['p10_ms']:.0f}–{s['p90_ms']:.0f} | {s['gap_cv']:.2f} | {s['short']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
