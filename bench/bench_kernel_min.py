"""Per-completion cost of three kernels in one process, interleaved: another one-file kernel module
(``--old``, e.g. the last one before the package), this checkout's generic kernel and the same
specialised to each net's features (``SGDNET_KERNEL=specialised``); the outputs of the three are
compared bit for bit on every round (step times, firings, busy times)::

    git show 0441880:sgdnet/engine/kernel.py > /tmp/kernel_old.py
    PYTHONPATH=.:bench python bench/bench_kernel_min.py --old /tmp/kernel_old.py \\
        anchor:4 anchor:16 anchor:64 sync-ps:16 allreduce:16 dssp:16 sync-ps:64 allreduce:64 dssp:64

A net is ``anchor:N`` (the speed anchors' sync-PS net, ``/work/shared/anchors``) or
``<variant>:N`` (the variant's fine net of ResNet-50 on N workers, 10 Gbps, compute CV 0.1, so
no periodic regime is skipped). Each figure is the *minimum* over ``--rounds`` rounds of CPU
time per completion (``time.process_time`` around ``simulate``, one core): on this shared,
loaded machine the minimum is the figure least moved by other processes; the order of the
three alternates between rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

KINDS = ("old", "generic", "specialised")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nets", nargs="+", help="anchor:N or <variant>:N")
    ap.add_argument("--old", required=True, help="path of the other (one-file) kernel module")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--completions", type=float, default=4e5, help="per timed run (about)")
    ap.add_argument("--anchors", default="/work/shared/anchors")
    a = ap.parse_args()
    sys.path.insert(0, a.anchors)

    import sgdnet
    from sgdnet.engine import kernel as K

    spec = importlib.util.spec_from_file_location("sgdnet.engine.kernel_old", a.old)
    old = importlib.util.module_from_spec(spec)
    sys.modules["sgdnet.engine.kernel_old"] = old  # numba resolves a cached function's module by name
    spec.loader.exec_module(old)
    generic = K.run_replication

    def build(name: str, n: int):
        if name == "anchor":
            from anchor_runner import to_sgdnet
            from model import Params, build_ps_net
            return to_sgdnet(build_ps_net(Params(N=n, L=20, mode="sync")))
        from sgdnet.variants import get
        return get(name).build("resnet50", {"workers": n, "bandwidth": "10Gbps",
                                            "compute_cv": 0.1}, "fine")

    def once(kind: str, net, steps: int):
        K.run_replication = old.run_replication if kind == "old" else generic
        os.environ["SGDNET_KERNEL"] = "specialised" if kind == "specialised" else "generic"
        t = time.process_time()
        r = sgdnet.simulate(net, steps=steps, warmup=0, replications=1, seed=7, parallel=False,
                            engine="generic", samples=False)
        dt = time.process_time() - t
        K.run_replication = generic
        return r, dt

    for item in a.nets:
        name, n = item.split(":")
        net = build(name, int(n))
        for kind in KINDS:
            r10, _ = once(kind, net, 10)  # JIT / cache load
        steps = max(10, int(a.completions / (r10.events[0] / 10)))
        best = dict.fromkeys(KINDS, np.inf)
        same = True
        for i in range(a.rounds):
            runs = {}
            for kind in (KINDS if i % 2 == 0 else KINDS[::-1]):
                r, dt = once(kind, net, steps)
                runs[kind] = r
                best[kind] = min(best[kind], dt / r.events[0])
            for f in ("step_times", "firings", "busy"):
                ref = getattr(runs["old"]._raws[0], f)
                same &= all(np.array_equal(ref, getattr(runs[k]._raws[0], f)) for k in KINDS[1:])
        ns = {k: best[k] * 1e9 for k in KINDS}
        print(f"{name} N={n} completions {runs['old'].events[0]}: min ns/completion old "
              f"{ns['old']:.1f} generic {ns['generic']:.1f} specialised {ns['specialised']:.1f}; "
              f"speed vs old: generic {ns['old'] / ns['generic']:.3f}x, specialised "
              f"{ns['old'] / ns['specialised']:.3f}x; identical {same}", flush=True)


if __name__ == "__main__":
    main()
