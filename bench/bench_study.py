"""Configurations per second of a Study on 1 and 2 cores (local processes and Dask).

Run by hand (never a timed test)::

    python bench/bench_study.py                      # examples/study.yaml: 500 configurations
    python bench/bench_study.py --steps 300 --granularity fine --replications 8
    python bench/bench_study.py --no-dask            # local executors only
    python bench/bench_study.py --config bench/study_fine_sweep.yaml --cpu --old main --rounds 2

``--cpu`` measures configurations per CPU-second, serially (see :func:`cpu_rate`); with
``--old REF`` it compares this checkout with the git commit ``REF`` instead (see
:func:`cpu_versus`).

Each measurement runs the same study into a fresh table (``resume=False``) and keeps the best
of ``--repeats`` runs. The Numba kernels are compiled (or loaded from the cache) before timing:
in this process by a warm-up study, and in each pool (local processes or Dask workers) by a
warm-up study of other seeds in the same pool, so the figures are steady-state throughput of
the study machinery plus simulation; the start-up of a cold pool (process spawn, imports, cache
load, warm-up rows) is reported separately. The Dask rows are compared with the local rows,
column by column, to show the executors give identical tables for the same seeds.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# a child of --old runs this file against another tree: "--root DIR" puts DIR's sgdnet first
_ROOT_ARG = sys.argv.index("--root") + 1 if "--root" in sys.argv else 0
sys.path.insert(0, sys.argv[_ROOT_ARG] if _ROOT_ARG else str(ROOT))

from sgdnet.study import Study, StudyResult  # noqa: E402
from sgdnet.study.executors import _init_worker  # noqa: E402


def make_study(args: argparse.Namespace) -> Study:
    """The benchmarked study: the config file with the command-line overrides applied."""
    base = Study.from_file(args.config)
    fixed = dict(base.fixed)
    for key in ("granularity", "steps", "warmup", "model"):
        value = getattr(args, key)
        if value is not None:
            fixed[key] = value
    return Study(grid=base.grid, fixed=fixed,
                 replications=args.replications or base.replications, seed=base.seed)


def warm_study(study: Study, n_rows: int) -> Study:
    """A few rows spread over the study's grid, under another seed (nothing is reused)."""
    cfgs = study.configs()
    step = max(1, len(cfgs) // n_rows)
    return Study(configs=cfgs[::step][:n_rows], seed=study.seed + 1000)


def best(run: Callable[[], StudyResult], repeats: int) -> tuple[float, StudyResult]:
    """Best wall time of ``repeats`` runs and the last result."""
    times, res = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        res = run()
        times.append(time.perf_counter() - t)
        assert not res.failed, res.failed[0]["error"]
    return min(times), res


def report(label: str, n: int, dt: float, cold: float | None = None) -> None:
    extra = "" if cold is None else f"; cold pool start-up incl. warm-up rows {cold:.1f} s"
    print(f"{label:<44} {n / dt:7.1f} configs/s  ({n} in {dt:.2f} s{extra})", flush=True)


def same_rows(a: StudyResult, b: StudyResult) -> bool:
    """Identical tables: same rows by ``row_id``, every cell equal."""
    def key(res: StudyResult) -> dict[str, dict[str, Any]]:
        return {r["row_id"]: {k: v for k, v in r.items() if v is not None} for r in res}

    return key(a) == key(b)


def cpu_rate(study: Study, every: int, rounds: int) -> None:
    """Configurations per CPU-second of ``study`` (every ``every``-th worker count, all the
    other axes), serial, one thread: rows through plain ``sgdnet.predict`` ("before") and
    through the study's default runner (re-rating a net when only the bandwidth differs,
    ``sgdnet.study.rerate``; "after"), alternating, ``rounds`` times; the tables must be equal."""
    from sgdnet.engine import driver
    from sgdnet.prediction import predict
    from sgdnet.study import rerate

    driver.set_max_threads(1)
    keep = set(sorted({c.get("cluster.workers", 1) for c in study.configs()})[::every])
    cfgs = [c for c in study.configs() if c.get("cluster.workers", 1) in keep]
    warm_study(study, 4).run("serial", progress=False)  # JIT / cache load
    print(f"{len(cfgs)} configurations of {study!r} (workers {sorted(keep)}); load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    tables: dict[str, StudyResult] = {}
    for r in range(rounds):
        for label, runner in (("predict", predict), ("rerate", rerate.predict)):
            rerate._TEMPLATES.clear()
            sub = Study(configs=cfgs, seed=study.seed, runner=runner)
            c, t = time.process_time(), time.perf_counter()
            tables[label] = sub.run("serial", progress=False)
            cpu, wall = time.process_time() - c, time.perf_counter() - t
            assert not tables[label].failed, tables[label].failed[0]["error"]
            print(f"round {r + 1} {label:<8} {len(cfgs) / cpu:6.2f} configs per CPU-second "
                  f"({len(cfgs)} in {cpu:.1f} s CPU, {wall:.1f} s wall)", flush=True)
    print(f"tables identical: {same_rows(tables['predict'], tables['rerate'])}")


def _cpu_child(study: Study, every: int, out: Path, runner: str = "default") -> None:
    """One side of :func:`cpu_versus`, in its own process: the study's rows (every ``every``-th
    worker count) through the study's default runner (``runner="predict"``: plain
    ``sgdnet.predict``), serially, one thread, after a warm-up of a few rows under another
    seed; the CPU time and the table go to ``out`` (JSON)."""
    import json

    import sgdnet
    from sgdnet.engine import driver
    from sgdnet.study import rerate

    driver.set_max_threads(1)
    keep = set(sorted({c.get("cluster.workers", 1) for c in study.configs()})[::every])
    cfgs = [c for c in study.configs() if c.get("cluster.workers", 1) in keep]
    warm_study(study, 4).run("serial", progress=False)  # JIT / cache load
    getattr(rerate, "_TEMPLATES", {}).clear()  # nothing the warm-up built is reused
    try:
        from sgdnet import netcache  # the in-memory nets of predict (sgdnet.netcache)
        getattr(netcache, "_MEMORY", {}).clear()
    except ImportError:  # an older tree
        pass
    sub = Study(configs=cfgs, seed=study.seed,
                **({"runner": sgdnet.predict} if runner == "predict" else {}))
    c = time.process_time()
    res = sub.run("serial", progress=False)
    cpu = time.process_time() - c
    assert not res.failed, res.failed[0]["error"]
    rows = [{k: v for k, v in r.items() if v is not None} for r in res]
    out.write_text(json.dumps({"cpu": cpu, "n": len(cfgs), "package": sgdnet.__file__,
                               "rows": rows}))


def _export(ref: str) -> Path:
    """The tree of git commit ``ref`` of this repository, exported once to the temporary
    folder (kept, with the numba cache its runs write, for the next comparison)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                         check=True, capture_output=True, text=True).stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"sgdnet-bench-old-{sha[:12]}"
    if not (dest / "sgdnet" / "__init__.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "sgdnet", "models"], check=True,
                              capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=arch, check=True)
    return dest


def cpu_versus(args: argparse.Namespace) -> None:
    """Configurations per CPU-second of the study (every ``--every``-th worker count) at this
    checkout against git commit ``--old``, each side in its own process (:func:`_cpu_child`:
    this file run with the other tree's ``sgdnet`` first on the path), alternating old, new,
    old, new (``--rounds`` pairs); the ratio is per pair, its median printed; the two tables
    must be equal cell by cell. The numba caches are loaded (or compiled) by each process's
    warm-up rows, outside the timing."""
    import json
    import statistics

    old_root = _export(args.old)
    base = [a for a in sys.argv[1:] if a not in ("--old", args.old)]
    if "--rounds" in base:
        i = base.index("--rounds")
        del base[i:i + 2]
    rates: dict[str, list[float]] = {"old": [], "new": []}
    tables: dict[str, list] = {}
    print(f"this checkout ({ROOT}) against {args.old} ({old_root}); load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for side, root in (("old", old_root), ("new", ROOT)):
                out = Path(tmp) / f"{side}.json"
                subprocess.run([sys.executable, str(Path(__file__).resolve()), *base, "--root",
                                str(root), "--child", str(out)], check=True)
                got = json.loads(out.read_text())
                rates[side].append(got["n"] / got["cpu"])
                tables[side] = got["rows"]
                print(f"round {r + 1} {side:<4} {got['n'] / got['cpu']:6.2f} configs per CPU-second "
                      f"({got['n']} in {got['cpu']:.1f} s CPU; {got['package']})", flush=True)
    ratio = statistics.median(n / o for n, o in zip(rates["new"], rates["old"]))
    key = {s: {row["row_id"]: row for row in t} for s, t in tables.items()}
    print(f"median old {statistics.median(rates['old']):.2f}, new {statistics.median(rates['new']):.2f} "
          f"configs per CPU-second; new/old {ratio:.3f} (median of the pairs); tables identical: "
          f"{key['old'] == key['new']}; load average {os.getloadavg()[0]:.2f}")
    if key["old"] != key["new"]:
        print(table_difference(key["old"], key["new"]))


def table_difference(old: dict, new: dict) -> str:
    """How two tables (row id -> row) differ: rows only in one, and the largest relative
    difference of a numeric cell, with its column (other cells must be equal)."""
    if old.keys() != new.keys():
        return f"rows differ: {len(old.keys() ^ new.keys())} row ids in one table only"
    worst, where, other = 0.0, None, set()
    for rid, a in old.items():
        b = new[rid]
        for col in a.keys() | b.keys():
            x, y = a.get(col), b.get(col)
            if x == y:
                continue
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x and y:
                d = abs(y / x - 1)
                if d > worst:
                    worst, where = d, col
            elif col not in ("seconds", "elapsed", "cpu_seconds", "wall_seconds"):
                other.add(col)
    return (f"largest relative difference of a numeric cell {worst:.2e} (column {where}); "
            f"other columns that differ: {sorted(other) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "examples" / "study.yaml",
                    help="study config (default: examples/study.yaml, 500 configurations)")
    ap.add_argument("--model", default=None, help="override the config's model")
    ap.add_argument("--granularity", default=None, help="override: fine or coarse")
    ap.add_argument("--steps", type=int, default=None, help="override the steps per replication")
    ap.add_argument("--warmup", type=int, default=None, help="override the warm-up steps")
    ap.add_argument("--replications", type=int, default=None, help="override the replications")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per setting (best kept)")
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask LocalCluster runs")
    ap.add_argument("--cpu", action="store_true",
                    help="only configurations per CPU-second: the study serially in this process, "
                         "replications serially too, timed with time.process_time()")
    ap.add_argument("--every", type=int, default=1,
                    help="with --cpu: every N-th worker count only (a quicker estimate)")
    ap.add_argument("--rounds", type=int, default=1, help="with --cpu: before/after rounds")
    ap.add_argument("--old", default=None,
                    help="with --cpu: compare this checkout with this git commit (cpu_versus)")
    ap.add_argument("--runner", choices=("default", "predict"), default="default",
                    help="with --old: time the study's default runner or plain sgdnet.predict")
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)  # read before the imports
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cpu and args.child is not None:
        return _cpu_child(make_study(args), args.every, args.child, args.runner)
    if args.cpu and args.old is not None:
        return cpu_versus(args)
    if args.cpu:
        return cpu_rate(make_study(args), args.every, args.rounds)
    study = make_study(args)
    warm = warm_study(study, 20)
    n = len(study)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    fixed = ", ".join(f"{k}={v}" for k, v in study.fixed.items())
    print(f"study: {study!r}\n  {fixed}, replications={study.replications}; {cores} cores "
          f"available, load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "t.csv"

        def run_on(executor: Any) -> Callable[[], StudyResult]:
            return lambda: study.run(executor, out=out, resume=False, progress=False)

        t = time.perf_counter()
        warm.run("serial", progress=False)
        print(f"warm-up in this process (compile or cache load, {len(warm)} rows): "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        dt, _ = best(run_on("serial"), args.repeats)
        report("serial (this process, replications on threads)", n, dt)
        local: dict[int, StudyResult] = {}
        ctx = multiprocessing.get_context("spawn")
        for jobs in (1, 2):
            t = time.perf_counter()
            with cf.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker) as pool:
                warm.run(pool, progress=False)
                cold = time.perf_counter() - t
                dt, local[jobs] = best(run_on(pool), args.repeats)
            report(f"local processes, {jobs} core(s)", n, dt, cold)
        print(f"local 1-core and 2-core tables identical: {same_rows(local[1], local[2])}")
        if args.no_dask:
            return
        import distributed

        for jobs in (1, 2):
            t = time.perf_counter()
            with distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cluster, \
                    distributed.Client(cluster) as client:
                warm.run(client, progress=False)
                cold = time.perf_counter() - t
                dt, res = best(run_on(client), args.repeats)
            report(f"Dask LocalCluster, {jobs} worker process(es)", n, dt, cold)
            print(f"Dask ({jobs} workers) table identical to the local one: "
                  f"{same_rows(res, local[2])}", flush=True)


if __name__ == "__main__":
    main()
