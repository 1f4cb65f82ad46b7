"""A/B of two kernels in one process: this checkout's kernel (``sgdnet/engine/kernel/``) against
another copy of a one-file kernel module (e.g. ``kernel.py`` of a commit before the package),
alternating, one core, CPU time. ``--specialised`` runs this checkout's kernel compiled for the
features of each net (``sgdnet.engine.kernel.specialise``) instead of the generic one.

Both kernels must take the same arguments (the driver calls whichever is installed as
``sgdnet.engine.kernel.run_replication``). The outputs of the two are compared bit for bit on
every run (step times, firings, busy times), so a speed figure is only printed for identical
trajectories::

    git show 0441880:sgdnet/engine/kernel.py > /tmp/kernel_old.py   # the last one-file kernel
    PYTHONPATH=. python bench/bench_kernel_ab.py --old /tmp/kernel_old.py --workers 4 16 64
    PYTHONPATH=. python bench/bench_kernel_ab.py --old /tmp/kernel_old.py --network flows
    PYTHONPATH=. python bench/bench_kernel_ab.py --old /tmp/kernel_old.py --model anchor

``--model anchor`` runs the speed anchors' sync-PS net (``/work/shared/anchors``, translated by
``anchor_runner.to_sgdnet``) instead of the bench model; ``--model fine`` runs a fine net of the
issue #14 sweep (``bench/study_fine_sweep.yaml``: ResNet-50, flows, no CVs), ``--variant`` and
``--bandwidth`` choosing the row, ``--workers`` its worker counts::

    PYTHONPATH=. python bench/bench_kernel_ab.py --old /tmp/kernel_old.py --model fine --workers 4 16 32
    PYTHONPATH=. python bench/bench_kernel_ab.py --old /tmp/kernel_old.py --model fine --variant allreduce

Each timed run plays about ``--completions`` completions (on a fine net, the number of steps
is calibrated from a 10-step run of the same net). ``--old-hist-none`` passes ``None`` as
the old kernel's two histogram arrays (kernels before histograms became a runtime switch).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="path of the other kernel module")
    ap.add_argument("--workers", type=int, nargs="*", default=[4, 16, 64])
    ap.add_argument("--completions", type=float, default=2e6, help="per timed run (about)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--network", choices=("fifo", "flows"), default="fifo",
                    help="the bench model's links: FIFO resources or max-min fair flows")
    ap.add_argument("--model", choices=("bench", "anchor", "fine"), default="bench")
    ap.add_argument("--variant", default="sync-ps", help="with --model fine: the sweep's variant")
    ap.add_argument("--bandwidth", default="10Gbps", help="with --model fine: the cluster's bandwidth")
    ap.add_argument("--anchors", default="/work/shared/anchors", help="the anchors' directory")
    ap.add_argument("--old-hist-none", action="store_true",
                    help="the old kernel takes None for histograms not kept")
    ap.add_argument("--specialised", action="store_true",
                    help="run this checkout's kernel specialised to the net's features "
                         "(sgdnet.engine.kernel.specialise; SGDNET_KERNEL=specialised)")
    a = ap.parse_args()

    from bench_engine import build_bench_net

    import sgdnet
    from sgdnet.engine import kernel as K

    # a module of the engine package, so that its relative imports (..results, .abi) resolve
    spec = importlib.util.spec_from_file_location("sgdnet.engine.kernel_old", a.old)
    old = importlib.util.module_from_spec(spec)
    sys.modules["sgdnet.engine.kernel_old"] = old  # numba resolves a cached function's module by name
    spec.loader.exec_module(old)
    old_run = old.run_replication
    if a.old_hist_none:
        def old_run(*args):
            return old.run_replication(*args[:-2], None, None)
    kernels = {"old": old_run, "new": K.run_replication}

    def build(n):
        if a.model == "bench":
            return build_bench_net(n, network=a.network)
        if a.model == "fine":
            from sgdnet.variants import get
            return get(a.variant).build("resnet50", {"workers": n, "bandwidth": a.bandwidth}, "fine")
        sys.path.insert(0, a.anchors)
        from anchor_runner import to_sgdnet
        from model import Params, build_ps_net
        return to_sgdnet(build_ps_net(Params(N=n, L=20, mode="sync")))

    import os

    def once(which, net, steps):
        K.run_replication = kernels[which]
        os.environ["SGDNET_KERNEL"] = "specialised" if a.specialised and which == "new" else "generic"
        t = time.process_time()
        r = sgdnet.simulate(net, steps=steps, warmup=0, replications=1, seed=7, parallel=False,
                            engine="generic")
        dt = time.process_time() - t
        K.run_replication = kernels["new"]
        return r, dt

    print(f"{'N':>4} {'old compl/s':>12} {'new compl/s':>12} {'new/old':>8}  identical")
    for n in a.workers:
        net = build(n)
        for w in ("old", "new"):
            r10, _ = once(w, net, 10)  # JIT / cache load
        # completions per step: measured on a fine net (a step is one worker's), about the
        # number of transitions on the others (each fires once a step)
        per_step = r10.events[0] / 10 if a.model == "fine" else len(net.transitions)
        steps = max(10, int(a.completions / per_step))
        rates = {"old": [], "new": []}
        same = True
        for _ in range(a.rounds):
            ro, to = once("old", net, steps)
            rn, tn = once("new", net, steps)
            rates["old"].append(ro.events[0] / to)
            rates["new"].append(rn.events[0] / tn)
            for f in ("step_times", "step_trans", "firings", "busy"):
                same &= np.array_equal(getattr(ro._raws[0], f), getattr(rn._raws[0], f))
        ratio = statistics.median(x / y for x, y in zip(rates["new"], rates["old"]))
        print(f"{n:>4} {statistics.median(rates['old']):>12.3e} {statistics.median(rates['new']):>12.3e} "
              f"{ratio:>8.3f}  {same}", flush=True)


if __name__ == "__main__":
    main()
