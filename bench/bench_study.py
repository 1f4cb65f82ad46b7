"""Configurations per second of a Study on 1 and 2 cores.

Run by hand (never a timed test)::

    python bench/bench_study.py                 # 4 variants x 5 worker counts x 4 bandwidths
    python bench/bench_study.py --steps 300 --granularity fine --replications 8

Each measurement runs the same study into a fresh table. The Numba kernels are compiled (or
loaded from the cache) once before timing, in this process and, for the process pools, by a
throw-away warm-up study in the same pool, so the figures are steady-state throughput of the
study machinery plus simulation; the compile/load time of a cold pool is reported separately.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgdnet.study import Study, _init_worker  # noqa: E402


def make_study(args: argparse.Namespace, seed: int) -> Study:
    from sgdnet import variants

    names = [v for v in args.variants.split(",") if v in variants.names()]
    return Study(grid={"variant": names, "cluster.workers": [1, 2, 4, 8, 16],
                       "cluster.bandwidth": ["1Gbps", "10Gbps", "25Gbps", "100Gbps"]},
                 fixed={"model": args.model, "granularity": args.granularity,
                        "steps": args.steps, "warmup": args.warmup},
                 replications=args.replications, seed=seed)


def timed(study: Study, executor, out: Path) -> float:
    t = time.perf_counter()
    res = study.run(executor, out=out, resume=False, progress=False)
    dt = time.perf_counter() - t
    assert not res.failed, res.failed[0]["error"]
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="sync-ps,async-ps,ssp,allreduce")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--granularity", default="coarse")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per setting (best kept)")
    args = ap.parse_args()
    study = make_study(args, seed=1)
    n = len(study)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"study: {n} configurations ({args.variants}; {args.model}, {args.granularity}, "
          f"{args.steps} steps after {args.warmup}, {args.replications} replications); "
          f"{cores} cores available")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "t.csv"
        t = time.perf_counter()
        make_study(args, seed=99).run("serial", out=Path(tmp) / "warm.csv", progress=False)
        print(f"warm-up (compile or cache load, first nets) in this process: "
              f"{time.perf_counter() - t:.1f} s")
        dt = min(timed(study, "serial", out) for _ in range(args.repeats))
        print(f"serial (1 process, replications on threads): {n / dt:7.1f} configs/s "
              f"({dt:.2f} s)")
        import multiprocessing

        for jobs in (1, 2):
            ctx = multiprocessing.get_context("spawn")
            with cf.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker) as pool:
                t = time.perf_counter()
                make_study(args, seed=99).run(pool, out=Path(tmp) / "warm.csv", progress=False,
                                              resume=False)
                cold = time.perf_counter() - t
                dt = min(timed(study, pool, out) for _ in range(args.repeats))
            print(f"local processes, {jobs} core(s):             {n / dt:7.1f} configs/s "
                  f"({dt:.2f} s; cold pool incl. start-up and compile/cache load {cold:.1f} s)")


if __name__ == "__main__":
    main()
