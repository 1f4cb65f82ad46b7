"""Nanoseconds per completion of the generic engine on the speed anchors' sync-PS nets (random
durations), for an A/B of two checkouts run one after the other::

    for root in /path/to/old /path/to/new; do PYTHONPATH=$root python bench/bench_generic_anchor.py; done

Needs ``/work/shared/anchors`` (or ``$SGDNET_ANCHORS``). One thread, ``engine="generic"``, 400
steps per worker, best of 5 runs per N.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ.get("SGDNET_ANCHORS", "/work/shared/anchors"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchor_runner import to_sgdnet  # noqa: E402
from model import Params, build_ps_net  # noqa: E402

import sgdnet  # noqa: E402
from sgdnet.engine import driver  # noqa: E402


def main() -> None:
    driver.set_max_threads(1)
    out = []
    for n in (4, 16, 64):
        net = sgdnet.compile_net(to_sgdnet(build_ps_net(Params(N=n)), f"anchor-{n}"))
        sgdnet.simulate(net, steps=10 * n, warmup=0, replications=1, seed=0, parallel=False,
                        engine="generic")
        best = float("inf")
        for _ in range(5):
            t = time.process_time()
            r = sgdnet.simulate(net, steps=400 * n, warmup=0, replications=1, seed=1, parallel=False,
                                samples=False, engine="generic")
            best = min(best, (time.process_time() - t) / int(r.events[0]))
        out.append(f"N={n} {best * 1e9:.1f} ns")
    print(Path(sgdnet.__file__).parents[1], " ".join(out), flush=True)


if __name__ == "__main__":
    main()
