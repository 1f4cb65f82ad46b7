"""The emulated cluster's gloo all-reduce times by size, with the VM's cores idle or kept awake.

Root (iproute2, torch). For each worker count, one launch of the testbed's ``allreduce`` job
(:mod:`sgdnet.testbed.bench`: every worker all-reduces each size ``--reps`` times, after a
barrier of the workers and ``--gap`` idle) and prints the median and minimum time against the
ring's line-rate bytes ``2 (n - 1) / n * S / rate``. ``--spin``: two ``nice 19`` busy loops run
meanwhile, so the VM's vCPUs never halt (a woken thread then does not wait for its vCPU to be
resumed by the host).

    python scripts/testbed_ring_latency.py --rate 250Mbit/s --workers 2 --gap 0
    python scripts/testbed_ring_latency.py --rate 250Mbit/s --workers 2 --gap 0 --spin
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = (4, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", default="2,3,4")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--gap", type=float, default=0.005, help="idle seconds before each one")
    ap.add_argument("--spin", action="store_true", help="keep both vCPUs busy (nice 19)")
    a = ap.parse_args(argv)
    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch

    rate = units.bandwidth(a.rate, what="rate")
    ns = [int(x) for x in a.workers.split(",")]
    spin = [subprocess.Popen(["nice", "-n", "19", "sh", "-c", "while :; do :; done"])
            for _ in range(2 if a.spin else 0)]
    try:
        with EmulatedCluster(max(ns) + 1, rate=rate) as cl:
            for n in ns:
                got = launch(cl, n + 1, [{"kind": "allreduce", "id": "allreduce",
                                          "sizes": list(SIZES), "reps": a.reps,
                                          "gap_s": a.gap}])
                for s in SIZES:
                    ts = [t for r in got["ranks"][1:] for t in r["jobs"][0]["allreduce"][str(s)]]
                    line = 2 * (n - 1) / n * s / rate
                    print(f"n={n} {s:8d} B: median {statistics.median(ts) * 1e3:7.3f} ms, "
                          f"min {min(ts) * 1e3:7.3f} ms, line-rate bytes {line * 1e3:7.3f} ms",
                          flush=True)
    finally:
        for p in spin:
            p.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
