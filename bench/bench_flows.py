"""Flows benchmark (issue #12): the cost of max-min fair flows against FIFO links.

The bench model of :mod:`bench_engine` (sync PS, per-layer push and pull, ``L = 20`` layers) is
built twice from the same layer table: with every link a FIFO resource (a push is two stages, one
per link) and with links as flows (a push is one transfer over the worker's uplink and the PS
downlink, on the worker's connection; the PS links are shared max-min fairly). Both run on ONE
core (``parallel=False``), timed with this process's CPU time, median of ``--runs`` timed calls,
the two interleaved per size. Printed per N: completions per CPU-second of each, the cost ratio
flows/FIFO per completion (the flows net has fewer completions for the same work: one transfer
instead of two link stages) and per simulated step, and the two mean throughputs (they differ:
fair sharing is not FIFO).

    python bench/bench_flows.py            # N = 4, 16, 64
    python bench/bench_flows.py --N 16 --runs 7
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_engine as B  # noqa: E402


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
        out = {}
        for network in ("fifo", "flows"):
            net = B.build_bench_net(n, a.layers, seed=0, network=network)
            res, t, comp = B.time_sgdnet(net, steps, 20, 2, 1, runs=a.runs)
            out[network] = (t, comp, res.throughput.mean)
        (tf, cf, hf), (tw, cw, hw) = out["fifo"], out["flows"]
        print(f"{n:>4} {cf / tf:>13.3e} {cw / tw:>14.3e} {(tw / cw) / (tf / cf):>12.2f} {tw / tf:>11.2f}"
              f" {hf:>13.3f} {hw:>14.3f}", flush=True)


if __name__ == "__main__":
    main()
