"""Generic kernel, nanoseconds of CPU per event on fine ResNet-50 nets, for A/B of two checkouts.

Run it once per checkout (each with its own numba cache), alternating, and compare the figures
as ratios; this machine is shared and noisy, so only runs side by side mean anything::

    git worktree add /tmp/old HEAD~1
    for i in 1 2 3; do
        (cd /tmp/old && PYTHONPATH=. python /work/main/bench/bench_ns_per_event.py)
        PYTHONPATH=. python bench/bench_ns_per_event.py
    done

Each net (sync PS on flows, ring all-reduce, DSSP with its gate; ``--workers``, 10 Gbps,
compute CV 0.1) is built and compiled once, run once untimed, then ``--rounds`` times: the
minimum of ``time.process_time()`` over the events of ``2 x --steps`` steps, in ns per event.
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1510)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default="sync-ps,allreduce,dssp")
    a = ap.parse_args(argv)

    from sgdnet import Cluster, simulate, variants
    from sgdnet.models import load

    prof = load("resnet50")
    cl = Cluster(workers=a.workers, bandwidth="10Gbps", compute_cv=0.1)
    for v in a.variants.split(","):
        net = variants.build(v, prof, cl, granularity="fine")
        kw = dict(steps=a.steps, warmup=10, replications=2, seed=0, parallel=False,
                  engine="generic")
        simulate(net, **kw)
        best = float("inf")
        for _ in range(a.rounds):
            t = time.process_time()
            r = simulate(net, **kw)
            best = min(best, (time.process_time() - t) / float(r.events.sum()))
        print(f"{v}: {best * 1e9:.1f} ns/event", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
