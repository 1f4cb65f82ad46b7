"""Where the CPU of the issue #14 fine sweep goes: build, validation, compile, kernel, results.

Runs the rows of ``bench/study_fine_sweep.yaml`` for every ``--every``-th worker count through
the study's default runner (serial, one thread, after a few warm-up rows of another seed), with
timers around each phase: ``VariantSpec.build`` (it validates the net it built), ``Net.problems``
(that validation), ``CompiledNet.__init__`` (compile; the net's validation is cached), the kernel's
``run_replication`` (timed in the thread that runs it), ``Result`` and ``Prediction``
construction and ``prediction.summarize``. Percentages are of the study's CPU time::

    PYTHONPATH=. python bench/sweep_phases.py --every 8   # workers 1, 9, 17, 25: 48 rows
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sgdnet.prediction as P  # noqa: E402
import sgdnet.results as R  # noqa: E402
from sgdnet.engine import driver  # noqa: E402
from sgdnet.engine import kernel as K  # noqa: E402
from sgdnet.net import builder as B  # noqa: E402
from sgdnet.net import compiled as C  # noqa: E402
from sgdnet.study import Study, rerate  # noqa: E402
from sgdnet.variants import registry  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "bench" / "study_fine_sweep.yaml")
    ap.add_argument("--every", type=int, default=8, help="every N-th worker count")
    args = ap.parse_args()
    driver.set_max_threads(1)
    base = Study.from_file(args.config)
    keep = set(sorted({c["cluster.workers"] for c in base.configs()})[::args.every])
    cfgs = [c for c in base.configs() if c["cluster.workers"] in keep]
    Study(configs=cfgs[:3], seed=base.seed + 1000).run("serial", progress=False)  # JIT / cache load
    rerate._TEMPLATES.clear()
    acc: dict[str, float] = collections.defaultdict(float)

    def wrap(obj, name, label, clock=time.process_time):
        f = getattr(obj, name)

        @functools.wraps(f)
        def timed(*a, **k):
            t = clock()
            try:
                return f(*a, **k)
            finally:
                acc[label] += clock() - t
        setattr(obj, name, timed)

    wrap(registry.VariantSpec, "build", "build (validation included)")
    wrap(B.Net, "problems", "validation (inside build)")
    wrap(C.CompiledNet, "__init__", "compile")
    wrap(K, "run_replication", "kernel", time.thread_time)
    wrap(R.Result, "__init__", "Result")
    wrap(P.Prediction, "__init__", "Prediction")
    wrap(P, "summarize", "summarize")
    c = time.process_time()
    Study(configs=cfgs, seed=base.seed).run("serial", progress=False)
    cpu = time.process_time() - c
    print(f"{len(cfgs)} rows (workers {sorted(keep)}) in {cpu:.2f} s CPU, "
          f"{len(cfgs) / cpu:.2f} per CPU-second")
    for k, v in acc.items():
        print(f"  {k:<30} {v:7.2f} s  {100 * v / cpu:5.1f} %")


if __name__ == "__main__":
    main()
