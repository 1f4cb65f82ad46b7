"""Skipped periods (sgdnet.engine.periodic) on the fine sweep's rows: kernel CPU played against
skipped, and how far apart the two runs are.

For each variant x workers x bandwidth, the fine ResNet-50 net is built once and simulated on the
generic engine, one thread, ``steps`` per worker after ``warmup`` per worker, with
``periodic=False`` (every event played) and ``periodic=True``, alternating, ``--rounds`` times
(CPU seconds, median). Prints the skipped run's period and the largest relative differences of
throughput, step times and busy times, and whether firings and event counts are identical::

    PYTHONPATH=. python bench/bench_periodic.py
    PYTHONPATH=. python bench/bench_periodic.py --workers 8 32 --variants sync-ps allreduce
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sgdnet  # noqa: E402
from sgdnet.engine import driver  # noqa: E402


def rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300))) if a.size else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="*", default=["sync-ps", "async-ps", "ssp", "allreduce"])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 8, 32])
    ap.add_argument("--bandwidths", nargs="*", default=["1Gbps", "100Gbps"])
    ap.add_argument("--steps", type=int, default=100, help="steps per worker (default 100)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps per worker (default 10)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    driver.set_max_threads(1)
    sgdnet.simulate(sgdnet.variants.build("allreduce", "resnet50", {"workers": 2}, "fine"),
                    steps=4, warmup=2, replications=1)  # JIT / cache load
    print("variant   workers bandwidth  played s  skipped s  ratio  period (start, steps, skipped)"
          "  max rel diff: throughput, steps, busy; firings & events equal")
    for v in a.variants:
        for w in a.workers:
            for bw in a.bandwidths:
                net = sgdnet.compile_net(sgdnet.variants.build(v, "resnet50", {"workers": w, "bandwidth": bw},
                                                               "fine"))
                cpu = {False: [], True: []}
                res = {}
                for _ in range(a.rounds):
                    for per in (False, True):
                        t = time.process_time()
                        res[per] = sgdnet.simulate(net, steps=a.steps * w, warmup=a.warmup * w,
                                                   replications=1, seed=1, parallel=False,
                                                   periodic=per, engine="generic")
                        cpu[per].append(time.process_time() - t)
                p, s = res[False], res[True]
                rp, rs = p._raws[0], s._raws[0]
                pp = s.periodic or {}
                same = rp.firings.tolist() == rs.firings.tolist() and rp.events == rs.events
                c0, c1 = statistics.median(cpu[False]), statistics.median(cpu[True])
                print(f"{v:9s} {w:7d} {bw:9s} {c0:9.3f} {c1:10.3f} {c0 / c1:6.1f}  "
                      f"({pp.get('start_step')}, {pp.get('period_steps')}, {pp.get('skipped_steps')})"
                      f"  {rel(p.throughput.samples, s.throughput.samples):.1e} "
                      f"{rel(rp.step_times, rs.step_times):.1e} {rel(rp.busy, rs.busy):.1e} {same}",
                      flush=True)


if __name__ == "__main__":
    main()
