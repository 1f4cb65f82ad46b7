"""Size and build time of fine all-reduce nets on a topology: flat ring vs hierarchical.

    PYTHONPATH=. python bench/bench_topology.py [--gpus 8 16 32 64 128] [--model resnet50]

ResNet-50 (DDP buckets of 25 MB, every layer), p4d-like nodes of 8 GPUs
(examples/clusters/p4d-8xa100-4x100g.yaml). Prints transitions, places, the build time and the
Python heap peak of the build (tracemalloc; it slows the build down, so time and memory are
each of their own run).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from sgdnet import Cluster, variants


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--cluster", default="examples/clusters/p4d-8xa100-4x100g.yaml")
    args = ap.parse_args()
    print("| GPUs | algorithm | transitions | places | build (s) | build heap peak (MB) |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in args.gpus:
        cl = Cluster.from_file(args.cluster, workers=n)
        for alg in ("ring", "hierarchical"):
            t0 = time.perf_counter()
            net = variants.build("allreduce", args.model, cl, algorithm=alg)
            dt = time.perf_counter() - t0
            tracemalloc.start()
            variants.build("allreduce", args.model, cl, algorithm=alg)
            peak = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()
            print(f"| {n} | {alg} | {len(net.transitions):,} | {len(net.places):,} | "
                  f"{dt:.1f} | {peak:.0f} |", flush=True)


if __name__ == "__main__":
    main()
