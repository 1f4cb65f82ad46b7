"""Users' time (issue #14): where a ``predict`` of ResNet-50 sync-PS spends its time.

Phases of one ``sgdnet.predict("sync-ps", "resnet50", Cluster(workers=W, bandwidth="10Gbps"))``
with the CLI's cluster defaults (no CVs, so the model is deterministic), fine-grained:
build the net (Python, validation included), compile it to arrays, ``simulate`` (what it pays on
top of the kernel: key, checks, Result building; and the kernel's runs), summaries (the
``Prediction`` with its per-worker figures, ``summarize`` and the per-worker step-time table).
Wall seconds (``time.perf_counter``), after one warm-up prediction of 2 workers that pays the JIT
or the cache load. Run from the root of a checkout so that ``PYTHONPATH=.`` picks its code::

    PYTHONPATH=. python bench/bench_users.py --workers 8 1024 --steps 20

The warm CLI (``sgdnet predict --model resnet50 --variant sync-ps --workers 8 --bandwidth
10Gbps``) is timed with ``bench/bench_users.py --cli N [--before DIR]``: N fresh processes
(alternating with DIR's checkout), median wall and CPU (user + sys) time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def phases(workers: int, steps: int, replications: int) -> dict:
    import sgdnet
    from sgdnet.metrics import worker_table
    from sgdnet.net.compiled import compile_net
    from sgdnet.prediction import Prediction, summarize
    from sgdnet.variants import get

    spec = get("sync-ps")
    prof = sgdnet.models.load("resnet50")
    clu = sgdnet.Cluster(workers=workers, bandwidth="10Gbps")
    out = {}
    t = time.perf_counter()
    net = spec.build(prof, clu, "fine")
    out["build"] = time.perf_counter() - t
    t = time.perf_counter()
    compile_net(net)
    out["compile"] = time.perf_counter() - t
    warmup = spec.default_warmup(clu, net.meta.get("options", {}))
    t = time.perf_counter()
    res = sgdnet.simulate(net, steps=steps * workers, warmup=warmup * workers,
                          replications=replications, seed=0)
    out["simulate"] = time.perf_counter() - t
    t = time.perf_counter()
    pred = Prediction("sync-ps", prof, clu, "fine", net.meta.get("options", {}), steps, warmup,
                      res, net.meta)
    summarize(pred)
    worker_table(res)
    out["summaries"] = time.perf_counter() - t
    out["total"] = sum(out.values())
    out["transitions"] = len(net.transitions)
    out["deterministic"] = bool(getattr(res, "deterministic", False))
    return out


def cli(n: int, root: str | None = None) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + sys of the child, from the OS's accounting) seconds of ``n`` warm
    CLI predictions, run with ``PYTHONPATH=root`` (default: this process's sgdnet)."""
    import resource

    cmd = [sys.executable, "-m", "sgdnet.cli", "predict", "--model", "resnet50", "--variant",
           "sync-ps", "--workers", "8", "--bandwidth", "10Gbps"]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: byte-code cached
    if root is not None:
        env["PYTHONPATH"] = root
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=root)  # warm the cache
    walls, cpus = [], []
    for _ in range(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=root)
        walls.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return walls, cpus


def _med(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} s ({', '.join(f'{x:.2f}' for x in xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="*", default=[8, 1024])
    ap.add_argument("--steps", type=int, default=20, help="steps per worker (default 20)")
    ap.add_argument("--replications", type=int, default=8)
    ap.add_argument("--cli", type=int, default=0, help="time N warm CLI runs instead")
    ap.add_argument("--before", default=None,
                    help="with --cli: another checkout (e.g. `git archive` of an older commit) "
                         "whose CLI runs alternate with this one's")
    a = ap.parse_args()
    print(f"code: {os.path.dirname(__import__('sgdnet').__file__)}", flush=True)
    if a.cli:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__import__("sgdnet").__file__)))
        roots = {"this": here, **({"before": a.before} if a.before else {})}
        got: dict = {k: ([], []) for k in roots}
        for _ in range(a.cli):  # the checkouts alternate, one run each per round
            for k, root in roots.items():
                w, c = cli(1, root)
                got[k][0].extend(w)
                got[k][1].extend(c)
        print(f"load average {os.getloadavg()[0]:.2f}")
        for k, (w, c) in got.items():
            print(f"warm CLI predict ({k}: {roots[k]}), {a.cli} runs: wall {_med(w)}; "
                  f"CPU {_med(c)}")
        return
    phases(2, 5, 2)  # JIT / cache load
    for n in a.workers:
        o = phases(n, a.steps, a.replications)
        print(f"workers={n} transitions={o['transitions']} deterministic={o['deterministic']} "
              + " ".join(f"{k}={o[k]:.2f}s" for k in ("build", "compile", "simulate", "summaries",
                                                        "total")), flush=True)


if __name__ == "__main__":
    main()
