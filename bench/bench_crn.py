"""Common random numbers: how much less noisy a difference between two predictions gets when both
run under one seed (their nets share transition names, so they share draws; sgdnet.engine.rng)
than under two independent seeds.

For each pair (the same variant on two bandwidths; sync PS against SSP; with and without a
straggler model) it prints the standard deviation, over replications, of the per-replication
difference of throughputs under one seed and under two, and their ratio::

    PYTHONPATH=. python bench/bench_crn.py            # ~20 s; --replications, --workers
"""

from __future__ import annotations

import argparse

import numpy as np

import sgdnet as sg
from sgdnet import Cluster, StepSlowdown


def samples(variant: str, cluster: Cluster, seed: int, reps: int) -> np.ndarray:
    p = sg.predict(variant, "resnet18", cluster, granularity="coarse", steps=40, warmup=5,
                   replications=reps, seed=seed)
    return np.asarray(p.result.throughput.samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=32)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    n, R = a.workers, a.replications
    base = dict(workers=n, compute_cv=0.3)
    pairs = {
        "sync-ps, 10 vs 12 Gb/s": (("sync-ps", Cluster(bandwidth="10Gbps", **base)),
                                   ("sync-ps", Cluster(bandwidth="12Gbps", **base))),
        "sync-ps vs ssp, 10 Gb/s": (("sync-ps", Cluster(bandwidth="10Gbps", **base)),
                                    ("ssp", Cluster(bandwidth="10Gbps", **base))),
        "sync-ps, no straggler vs step:p=0.05,factor=3": (
            ("sync-ps", Cluster(bandwidth="10Gbps", **base)),
            ("sync-ps", Cluster(bandwidth="10Gbps", straggler=StepSlowdown(0.05, 3), **base))),
    }
    print(f"ResNet-18, coarse, {n} workers, compute cv 0.3, {R} replications, steps/s")
    print(f"{'pair':48s} {'std, one seed':>14s} {'std, two seeds':>15s} {'ratio':>6s}")
    for name, ((va, ca), (vb, cb)) in pairs.items():
        x = samples(va, ca, 1, R)
        same = samples(vb, cb, 1, R) - x
        other = samples(vb, cb, 2, R) - x
        s1, s2 = same.std(ddof=1), other.std(ddof=1)
        print(f"{name:48s} {s1:14.4f} {s2:15.4f} {s2 / s1:6.1f}")


if __name__ == "__main__":
    main()
