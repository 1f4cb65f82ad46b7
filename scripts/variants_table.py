"""The README's Variants I table: ResNet-50 on 1..32 workers at 10 Gbit/s, four variants.

Fine-grained nets (every one of ResNet-50's 107 parameter layers), 5% compute and transfer
noise, one dedicated PS shard for the PS variants, ring all-reduce with 25 MB DDP buckets.

    PYTHONPATH=. python scripts/variants_table.py [--steps 100] [--replications 4]
"""

from __future__ import annotations

import argparse
import time

import sgdnet
from sgdnet import Cluster

VARIANTS = ("sync-ps", "async-ps", "ssp", "allreduce")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4,8,16,32")
    ap.add_argument("--steps", type=int, default=100, help="steps per worker")
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--granularity", default="fine", choices=("fine", "coarse"))
    args = ap.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    base = Cluster(bandwidth="10Gbps", latency="50us", compute_cv=0.05, comm_cv=0.05)
    t0 = time.perf_counter()
    curves = {v: sgdnet.scaling(v, "resnet50", base, workers=workers, steps=args.steps,
                                warmup=10, replications=args.replications, seed=0,
                                granularity=args.granularity)
              for v in VARIANTS}
    head = "| workers | " + " | ".join(f"{v} samples/s (eff.)" for v in VARIANTS) + " |"
    print(head)
    print("|" + "---:|" * (len(VARIANTS) + 1))
    for k, w in enumerate(workers):
        cells = []
        for v in VARIANTS:
            p = curves[v][k]
            cells.append(f"{p.samples_per_s.mean:,.0f} ± {p.samples_per_s.half_width():,.0f} "
                         f"({100 * p.efficiency:.0f}%)")
        print(f"| {w} | " + " | ".join(cells) + " |")
    print(f"\n{args.granularity}-grained, {args.steps} steps/worker, {args.replications} "
          f"replications, 95% CIs; computed in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
