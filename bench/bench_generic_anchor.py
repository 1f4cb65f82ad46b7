"""Nanoseconds per completion of the generic engine on the speed anchors' sync-PS nets (random
durations), for an A/B of two checkouts run one after the other::

    for root in /path/to/old /path/to/new; do PYTHONPATH=$root python bench/bench_generic_anchor.py; done

Needs ``/work/shared/anchors`` (or ``$SGDNET_ANCHORS``). Each N is timed by the anchors' own
hook, :func:`anchor_runner.run_generic` (wall time of one ``simulate`` on one core, about
``--seconds`` of simulated time), best of ``--reps`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("SGDNET_ANCHORS", "/work/shared/anchors"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchor_runner import run_generic  # noqa: E402
from model import Params  # noqa: E402

import sgdnet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=100.0, help="simulated time per run")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    out = []
    for n in (4, 16, 64):
        runs = [run_generic(Params(N=n), a.seconds, seed=1) for _ in range(a.reps)]
        best = min(r["wall_s"] / r["events"] for r in runs)
        out.append(f"N={n} {best * 1e9:.1f} ns")
    print(Path(sgdnet.__file__).parents[1], " ".join(out), flush=True)


if __name__ == "__main__":
    main()
