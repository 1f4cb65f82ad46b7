"""Time to predict one configuration, and how it grows with workers and layers.

The headline case of issue #4: ``sgdnet.predict("sync-ps", "resnet50", Cluster(workers=16))``,
fine-grained (107 layers), 1000 steps per worker, 32 replications, split into its phases:
building the net (Python), compiling it to arrays, simulating (Numba, replications on all
cores) and summarising. Then the simulate time per 1000 worker-steps against the number of
workers (at 107 layers) and the number of layer groups (``max_layers``, at 16 workers).

Each figure is the median of ``--runs`` runs, after one warm-up call that pays the JIT.

    PYTHONPATH=. python bench/bench_predict.py            # ~10 min on 2 cores
    PYTHONPATH=. python bench/bench_predict.py --quick    # ~1 min
"""

from __future__ import annotations

import argparse
import statistics
import time

import sgdnet
from sgdnet import Cluster, models, variants
from sgdnet.net import compile_net

CLUSTER = dict(bandwidth="10Gbps", latency="50us", compute_cv=0.05, comm_cv=0.05)


def phases(variant: str, workers: int, steps: int, reps: int, max_layers=None) -> dict:
    """Wall-clock seconds of each phase of one predict() call, done by hand."""
    model = models.load("resnet50")
    c = Cluster(workers=workers, **CLUSTER)
    t0 = time.perf_counter()
    net = variants.build(variant, model, c, max_layers=max_layers)
    t1 = time.perf_counter()
    cn = compile_net(net)
    t2 = time.perf_counter()
    res = sgdnet.simulate(cn, steps=steps * workers, warmup=10 * workers, replications=reps,
                          seed=0)
    t3 = time.perf_counter()
    pred = sgdnet.Prediction(variant, model, c, "fine", {}, steps, 10, res, net.meta)
    _ = pred.to_dict()
    t4 = time.perf_counter()
    completions = float(res.events.sum()) if getattr(res, "events", None) is not None else 0.0
    return {"build": t1 - t0, "compile": t2 - t1, "simulate": t3 - t2, "summary": t4 - t3,
            "total": t4 - t0, "transitions": len(net.transitions), "completions": completions}


def median_of(runs: int, fn, *a, **kw) -> dict:
    out = [fn(*a, **kw) for _ in range(runs)]
    return {k: statistics.median(o[k] for o in out) for k in out[0]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--variant", default="sync-ps")
    args = ap.parse_args(argv)
    runs = 1 if args.quick else args.runs
    steps, reps = (100, 8) if args.quick else (1000, 32)
    phases(args.variant, 2, 5, 1)  # JIT / cache load

    h = median_of(runs, phases, args.variant, 16, steps, reps)
    print(f"## {args.variant}, ResNet-50 fine (107 layers), 16 workers, {steps} steps/worker, "
          f"{reps} replications (median of {runs})")
    print(f"transitions {h['transitions']:.0f}; build {h['build']:.2f} s, compile "
          f"{h['compile']:.2f} s, simulate {h['simulate']:.2f} s, summary {h['summary']:.2f} s, "
          f"total {h['total']:.2f} s; {h['completions'] / h['simulate']:.3g} completions/s")

    s2, r2 = (50, 4) if args.quick else (200, 8)
    print(f"\n## growth (simulate s per 1000 worker-steps; {s2} steps/worker, {r2} reps)")
    print("| workers | transitions | build s | simulate s / 1000 worker-steps |")
    print("|---:|---:|---:|---:|")
    for w in ([2, 4, 8] if args.quick else [2, 4, 8, 16, 32]):
        g = median_of(runs, phases, args.variant, w, s2, r2)
        print(f"| {w} | {g['transitions']:.0f} | {g['build']:.2f} | "
              f"{1000 * g['simulate'] / (s2 * w * r2):.4f} |")
    print("\n| layer groups (16 workers) | transitions | build s | simulate s / 1000 worker-steps |")
    print("|---:|---:|---:|---:|")
    for L in ([8, 32] if args.quick else [8, 16, 32, 64, 107]):
        g = median_of(runs, phases, args.variant, 16, s2, r2, max_layers=L)
        print(f"| {L} | {g['transitions']:.0f} | {g['build']:.2f} | "
              f"{1000 * g['simulate'] / (s2 * 16 * r2):.4f} |")


if __name__ == "__main__":
    main()
