"""Flows benchmark (issue #12): the cost of max-min fair flows against FIFO links.

The bench model of :mod:`bench_engine` (sync PS, per-layer push and pull, ``L = 20`` layers) is
built twice from the same layer table: with every link a FIFO resource (a push is two stages, one
per link) and with links as flows (a push is one transfer over the worker's uplink and the PS
downlink, on the worker's connection; the PS links are shared max-min fairly). Both run on ONE
core (``parallel=False``), timed with this process's CPU time; the two alternate call by call
(FIFO, flows, FIFO, flows, ...; ``--runs`` pairs per N, same seed within a pair) and each figure
is the median over the pairs. Printed per N: completions per CPU-second of each, the cost ratio
flows/FIFO per completion and per simulated step, and the two mean throughputs (they differ:
fair sharing is not FIFO). The two nets do not count the same work per completion: a transfer
is ONE completion on flows and TWO on FIFO links (one per link stage), so the flows net has
``4 N L + L`` completions per step against ``6 N L + L``; the per-step ratio is the equal-work
comparison, the per-completion ratio is the issue's target (``<= 2`` at N = 16).

    python bench/bench_flows.py            # N = 4, 16, 64
    python bench/bench_flows.py --N 16 --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_engine as B  # noqa: E402

import sgdnet  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", default="4,16,64", help="worker counts, comma-separated")
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--completions", type=float, default=2e6, help="about this many per timed run")
    a = ap.parse_args(argv)
    print(f"{'N':>4} {'FIFO compl/s':>13} {'flows compl/s':>14} {'ratio/compl':>12} {'ratio/step':>11}"
          f" {'FIFO steps/s':>13} {'flows steps/s':>14}")
    for n in (int(x) for x in a.N.split(",")):
        per_step = 7 * n * a.layers  # about the completions of one step
        steps = max(100, int(a.completions / per_step))
        cns = {nw: sgdnet.compile_net(B.build_bench_net(n, a.layers, seed=0, network=nw))
               for nw in ("fifo", "flows")}
        for cn in cns.values():
            sgdnet.simulate(cn, steps=10, warmup=0, replications=1, seed=0, parallel=False)  # JIT
        rows = {"fifo": [], "flows": []}  # (CPU seconds, completions, throughput) per call
        for k in range(a.runs):
            for nw, cn in cns.items():
                t = time.process_time()
                res = sgdnet.simulate(cn, steps=steps, warmup=20, replications=1, seed=1 + k,
                                      parallel=False)
                rows[nw].append((time.process_time() - t, int(res.events[0]), res.throughput.mean))
        med = statistics.median
        (tf, cf, hf), (tw, cw, hw) = ([med(x[i] for x in rows[nw]) for i in range(3)]
                                      for nw in ("fifo", "flows"))
        r_compl = med((w[0] / w[1]) / (f[0] / f[1]) for f, w in zip(rows["fifo"], rows["flows"]))
        r_step = med(w[0] / f[0] for f, w in zip(rows["fifo"], rows["flows"]))
        print(f"{n:>4} {cf / tf:>13.3e} {cw / tw:>14.3e} {r_compl:>12.2f} {r_step:>11.2f}"
              f" {hf:>13.3f} {hw:>14.3f}", flush=True)


if __name__ == "__main__":
    main()
