"""Time to accuracy on the emulated testbed: measured loss-vs-time curves against
``sgdnet.accuracy.time_to_accuracy`` (issue #40).

Real runs (root, iproute2, torch; ``--run``): 4 workers + 1 PS host at 200 Mbit/s (tbf, burst
64 KB), the testbed's ``tb-mlp`` gradients on the wire (their sizes set the timing, as in the
issue #13 validation), and beside them the ``logreg`` task of :mod:`sgdnet.accuracy.tasks`
trained through the same PS (:mod:`sgdnet.testbed.tasklog`: same data seed, same lr, same
per-worker batch streams as the replay). Worker 4 is slow: it sleeps ``(F - 1) x`` the
profile's forward / backward time of each layer (``F`` = ``--slow-factor``), which
``Cluster.speeds`` models as speed ``1 / F``. Schemes sync PS, async PS and SSP(s), one
launch per repetition with the schemes' order rotated; repetition ``r`` uses batch seed ``r``.

Prediction (no root): ``time_to_accuracy(variant, profile, Cluster.from_file(file, workers=4,
speeds=...), Target("logreg", loss, lr, eval_every=1), granularity="fine", method="replay")``
from the one-worker profile and the calibration file of the issue #13 validation
(``docs/data/testbed/profile-tb-mlp-200.json``, ``cluster-200mbit.yaml``); replication ``r``
replays with batch seed ``r``.

Usage::

    sudo /work/venv/bin/python scripts/validate_tta_testbed.py --run --out runs.json
    python scripts/validate_tta_testbed.py --from runs.json          # prediction + table only
    python scripts/validate_tta_testbed.py --from a.json --from b.json --out all.json  # pooled

The band (the predicted mean curve against the measured runs' min-max) is compared up to the
time the first worker of any run made its last step: every worker makes a fixed number of
steps, so under async PS the fast workers stop long before the slow one, and the run's tail
(the slow worker alone) is not the training the prediction models.

Besides the time to the target and the band, each scheme's row has every worker's mean step
period, measured (between the PS's updates that hold that worker's gradients) and predicted
(the same on the replayed schedules): the slow worker's period is what SSP paces everyone at.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "docs" / "data" / "testbed"
SCHEMES = {"sync-ps": ("sync-ps", {}), "async-ps": ("async-ps", {}), "ssp": ("ssp", {})}


def measure(args, prof) -> dict:
    from sgdnet.testbed import EmulatedCluster
    from sgdnet.testbed.runner import launch, rotate

    F = args.slow_factor
    slow = {"rank": args.workers, "fwd_s": [ly.forward_s * (F - 1) for ly in prof.layers],
            "bwd_s": [ly.backward_s * (F - 1) for ly in prof.layers]}
    steps = {"sync-ps": args.sync_steps, "async-ps": args.async_steps, "ssp": args.async_steps}
    runs = []
    t_all = time.monotonic()
    with EmulatedCluster(args.workers + 1, rate=args.rate, burst="64KB") as cl:
        for rep in range(args.repeats):
            order = rotate(list(SCHEMES), rep)
            jobs = [{"kind": "train", "id": s, "scheme": s, "steps": steps[s] - 1, "warmup": 1,
                     "model": "tb-mlp", "batch": prof.batch_size, "bucket_cap_mb": 0.5,
                     "task": "logreg", "task_lr": args.lr, "task_seed": rep,
                     "staleness": args.staleness, "slow": slow} for s in order]
            res = launch(cl, args.workers + 1, jobs, timeout_s=600)
            for k, s in enumerate(order):
                tl = res["ranks"][0]["jobs"][k]["task_log"]
                t0 = min(r["jobs"][k]["t_start"] for r in res["ranks"][1:])
                runs.append({"scheme": s, "repeat": rep, "position": k,
                             "time": [t - t0 for t in tl["time"]], "loss": tl["loss"],
                             "loss0": tl["loss0"], "workers": tl["workers"],
                             "reads": tl["reads"]})
                print(f"rep {rep} {s:8s} {len(tl['time'])} updates in "
                      f"{tl['time'][-1] - t0:.1f} s", flush=True)
    meta = {k: getattr(args, k) for k in ("rate", "workers", "slow_factor", "lr", "staleness",
                                          "sync_steps", "async_steps", "repeats")}
    meta.update({"slow": slow, "elapsed_s": time.monotonic() - t_all,
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return {"meta": meta, "runs": runs}


def first_time(t, loss, target) -> float:
    for ti, li in zip(t, loss):
        if li <= target:
            return float(ti)
    return math.nan


def held(t, loss, grid, loss0):
    """A curve held at its last update before each grid time (loss0 before the first)."""
    t = np.asarray(t)
    k = np.searchsorted(t, grid, side="right") - 1
    v = np.where(k >= 0, np.asarray(loss)[np.maximum(k, 0)], loss0)
    v[grid > t[-1]] = np.nan
    return v


def _all_training_until(run: dict, n: int) -> float:
    """The time of a run's last update while all its ``n`` workers were still training: the
    earliest of the workers' last updates (the run's end when they all stop together)."""
    return min(max(t for t, ws in zip(run["time"], run["workers"]) if w in ws)
               for w in range(n))


def step_periods(times_by_worker: list[list[np.ndarray]], n: int) -> list[float]:
    """Per worker: the mean interval between its consecutive gradients' updates, pooled over
    runs (each run's intervals averaged, then the runs')."""
    out = []
    for w in range(n):
        per = [float(np.mean(np.diff(t[w]))) for t in times_by_worker if t[w].size > 1]
        out.append(float(np.mean(per)) if per else math.nan)
    return out


def compare(data: dict, args, prof) -> list[dict]:
    from sgdnet.accuracy import Target
    from sgdnet.accuracy.tta import time_to_accuracy
    from sgdnet.workload import Cluster

    meta = data["meta"]
    n, F = meta["workers"], meta["slow_factor"]
    speeds = tuple([1.0] * (n - 1) + [1.0 / F])
    clu = Cluster.from_file(args.cluster, workers=n, speeds=speeds)
    tgt = Target("logreg", loss=args.target, lr=meta["lr"], seed=0, eval_every=1)
    rows = []
    for s, (variant, opts) in SCHEMES.items():
        o = dict(opts)
        if s == "ssp":
            o["staleness"] = meta["staleness"]
        t1 = time.monotonic()
        tta = time_to_accuracy(variant, prof, clu, tgt, granularity="fine", method="replay",
                               replications=args.replications, seed=0, **o)
        runs = [r for r in data["runs"] if r["scheme"] == s]
        meas = np.array([first_time(r["time"], r["loss"], args.target) for r in runs])
        # the band is compared while every worker of every run still trains: each worker of
        # a run makes its fixed number of steps, so under async PS the fast ones stop (~6 s)
        # long before the slow one (~10 s), and past that the run is no longer the training
        # the prediction models (every worker stepping on)
        end = min(_all_training_until(r, n) for r in runs)
        grid = np.linspace(0.0, end, 200)
        M = np.vstack([held(r["time"], r["loss"], grid, r["loss0"]) for r in runs])
        lo, hi = np.nanmin(M, axis=0), np.nanmax(M, axis=0)
        mean, q = tta.band(grid, q=(0.5,))
        pm = mean
        ok = np.isfinite(pm) & np.isfinite(lo)
        inside = float(np.mean((pm[ok] >= lo[ok] - 1e-12) & (pm[ok] <= hi[ok] + 1e-12)))
        # after the first 10 % of the run (the first updates: all curves start at loss0)
        late = ok & (grid >= 0.1 * end)
        inside_late = float(np.mean((pm[late] >= lo[late]) & (pm[late] <= hi[late])))
        pred = float(np.nanmean(tta.wall_time.samples))
        mm = float(np.nanmean(meas))
        m_times = [[np.asarray([t for t, ws in zip(r["time"], r["workers"]) if w in ws])
                    for w in range(n)] for r in runs]
        p_times = [[sc.update_time[sc.grad_update[sc.grad_worker == w]] for w in range(n)]
                   for sc in tta.schedules]
        rows.append({"scheme": s, "measured_s": meas.tolist(), "measured_mean_s": mm,
                     "predicted_s": [float(x) for x in tta.wall_time.samples],
                     "predicted_mean_s": pred, "err": pred / mm - 1.0,
                     "measured_updates_per_s": [len(r["time"]) / r["time"][-1] for r in runs],
                     "predicted_steps_per_s": float(tta.steps_per_s.mean),
                     "measured_staleness": float(np.mean([np.mean(
                         [u - 1 - v for u, rr in enumerate(r["reads"], 1) for v in rr])
                         for r in runs])) if s != "sync-ps" else 0.0,
                     "predicted_staleness": float(tta.staleness.mean),
                     "measured_step_s": step_periods(m_times, n),
                     "predicted_step_s": step_periods(p_times, n),
                     "inside_band": inside, "inside_band_after_10pct": inside_late,
                     "band_until_s": float(end),
                     "predict_s": time.monotonic() - t1})
        print(f"{s:8s} measured {mm:6.2f} s {np.round(meas, 2)}  predicted {pred:6.2f} s  "
              f"err {pred / mm - 1:+.1%}  band {inside:.0%} ({inside_late:.0%} after 10 %) to {end:.2f} s  "
              f"step s/worker measured {np.round(rows[-1]['measured_step_s'], 3)} predicted "
              f"{np.round(rows[-1]['predicted_step_s'], 3)}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", action="store_true", help="run the testbed (root)")
    ap.add_argument("--from", dest="src", type=Path, action="append",
                    help="measured runs (JSON) to compare; repeat to pool campaigns (their "
                         "runs together, repeats renumbered)")
    ap.add_argument("--out", type=Path, help="write measured runs and comparison (JSON)")
    ap.add_argument("--rate", default="200Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slow-factor", type=float, default=133.0,
                    help="the slow worker's compute x this (default 133: +0.2 s per step)")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--staleness", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.40, help="held-out loss to reach")
    ap.add_argument("--sync-steps", type=int, default=45)
    ap.add_argument("--async-steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--replications", type=int, default=8)
    ap.add_argument("--profile", type=Path, default=DATA / "profile-tb-mlp-200.json")
    ap.add_argument("--cluster", type=Path, default=DATA / "cluster-200mbit.yaml")
    args = ap.parse_args(argv)
    from sgdnet.workload import ModelProfile

    prof = ModelProfile.load(args.profile)
    if args.run:
        data = measure(args, prof)
    elif args.src:
        parts = [json.loads(f.read_text()) for f in args.src]
        data = {"meta": parts[0]["meta"], "runs": parts[0]["runs"] if len(parts) == 1 else []}
        for k, part in enumerate(parts if len(parts) > 1 else []):
            if any(part["meta"][key] != parts[0]["meta"][key] for key in
                   ("rate", "workers", "slow_factor", "lr", "staleness")):
                ap.error(f"{args.src[k]} was run with other settings than {args.src[0]}")
            base = sum(p["meta"]["repeats"] for p in parts[:k])
            data["runs"] += [{**r, "repeat": r["repeat"] + base, "campaign": k}
                             for r in part["runs"]]
        if len(parts) > 1:
            data["meta"] = {**parts[0]["meta"],
                            "repeats": sum(p["meta"]["repeats"] for p in parts),
                            "campaigns": [{"file": str(f), "started": p["meta"].get("started"),
                                           "elapsed_s": p["meta"].get("elapsed_s")}
                                          for f, p in zip(args.src, parts)]}
    else:
        ap.error("give --run or --from FILE")
    data["comparison"] = compare(data, args, prof)
    data["comparison_args"] = {"target_loss": args.target, "replications": args.replications,
                               "profile": str(args.profile), "cluster": str(args.cluster)}
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=1))
        print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
