"""The fast paths (max-plus ``sgdnet.engine.fastpath``, sort-then-queue ``sgdnet.engine.fastpath_fifo``) against the generic engine, per completion.

Nets (N workers, L = 20 layers, layer table of ``bench_engine.bench_params``):

- ``eg-sync``: synchronous PS SGD on *dedicated* links, written as a timed event graph: per
  worker the forward chain, the backward chain, the gradient pushes on the worker's uplink in
  their fixed order (layers L-1..0; the link is a token-passing circuit), a per-layer barrier
  ``U(l)`` on the server CPU (also in fixed order), the pulls on the worker's downlink; a step is
  ``B(i,0)``. Every place has one producer and one consumer, so the fast path applies;
- ``eg-ring``: a ring of 4N transitions (log-normal, CV 0.3) carrying N tokens;
- ``fifo-ps``: the same sync-PS SGD on *shared* one-server FIFO links (worker uplinks, one
  server downlink shared by all pushes, the server CPU, one server uplink shared by all
  broadcasts, worker downlinks; a weight-N barrier per layer): the request order on the shared
  links depends on the durations, so it is no event graph; the FIFO fast path
  (``sgdnet.engine.fastpath_fifo``, sort-then-queue per round) runs it;
- ``anchor``: the anchors' sync-PS model (``/work/shared/anchors``, via ``anchor_runner``) when that
  folder exists: the same structure, run by the FIFO fast path.

For each net and N = 4, 16, 64 the two engines run in interleaved rounds in this process, each
timed by this process's CPU time (one core: ``parallel=False``), and the script prints
completions per CPU-second of each and the median of the per-round ratios fast / generic, for
one replication and for 8 (the fast path's lanes). Mean throughputs of the two are printed too
(they must be equal: both engines draw firing k of a transition from draw k of its stream,
``sgdnet.engine.rng``)::

    PYTHONPATH=. python bench/bench_fastpath.py [--rounds 5] [--completions 2e6] [--N 4 16 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH_DIR)
ANCHORS = "/work/shared/anchors"


def eg_sync(n: int, layers: int = 20):
    """Sync-PS SGD on dedicated links as a timed event graph (see the module docstring)."""
    from bench_engine import bench_params

    import sgdnet as sg

    p = bench_params(n, layers)
    L = layers
    net = sg.Net(f"eg-sync-{n}")

    def ln(mean):
        return sg.LogNormal(mean=mean, cv=p.cv)

    def place(name, tokens=0):
        return net.place(name, tokens=tokens)

    for i in range(n):
        for l in range(L):
            place(f"param{i}_{l}", 1)
            place(f"ctlf{i}_{l}", 1 if l == 0 else 0)
            place(f"ctlb{i}_{l}")
            place(f"grad{i}_{l}")
            place(f"arr{i}_{l}")
            place(f"send{i}_{l}")
            # the worker's uplink / downlink serve layers L-1..0 in turn: a token circuit
            place(f"up{i}_{l}", 1 if l == L - 1 else 0)
            place(f"dn{i}_{l}", 1 if l == L - 1 else 0)
    for l in range(L):
        place(f"cpu{l}", 1 if l == L - 1 else 0)
    for i in range(n):
        for l in range(L):
            nxt = f"ctlf{i}_{l + 1}" if l + 1 < L else f"ctlb{i}_{L - 1}"
            net.transition(f"F{i}_{l}", ln(p.fwd[l]), inputs={f"param{i}_{l}": 1, f"ctlf{i}_{l}": 1},
                           outputs={nxt: 1})
            nxt = f"ctlb{i}_{l - 1}" if l > 0 else f"ctlf{i}_0"
            net.transition(f"B{i}_{l}", ln(p.bwd[l]), inputs={f"ctlb{i}_{l}": 1},
                           outputs={f"grad{i}_{l}": 1, nxt: 1}, tags={"step": l == 0, "worker": i})
            nxt = (l - 1) % L
            net.transition(f"PU{i}_{l}", ln(p.push_up[l]), inputs={f"grad{i}_{l}": 1, f"up{i}_{l}": 1},
                           outputs={f"arr{i}_{l}": 1, f"up{i}_{nxt}": 1})
            net.transition(f"WD{i}_{l}", ln(p.pull_down[l]), inputs={f"send{i}_{l}": 1, f"dn{i}_{l}": 1},
                           outputs={f"param{i}_{l}": 1, f"dn{i}_{nxt}": 1})
    for l in range(L):
        net.transition(f"U{l}", ln(p.update[l]),
                       inputs={**{f"arr{i}_{l}": 1 for i in range(n)}, f"cpu{l}": 1},
                       outputs={**{f"send{i}_{l}": 1 for i in range(n)}, f"cpu{(l - 1) % L}": 1})
    return net


def fifo_ps(n: int, layers: int = 20):
    """Sync-PS SGD on shared FIFO links (see the module docstring)."""
    from bench_engine import bench_params

    import sgdnet as sg

    p = bench_params(n, layers)
    L = layers
    net = sg.Net(f"fifo-ps-{n}")

    def ln(mean):
        return sg.LogNormal(mean=mean, cv=p.cv)

    for r in [f"up{i}" for i in range(n)] + [f"dn{i}" for i in range(n)] + ["sdown", "scpu", "sup"]:
        net.resource(r)
    for i in range(n):
        for l in range(L):
            for kind, tok in (("param", 1), ("ctlf", 1 if l == 0 else 0), ("ctlb", 0), ("grad", 0),
                              ("atsrv", 0), ("sendq", 0), ("infl", 0)):
                net.place(f"{kind}{i}_{l}", tokens=tok)
    for l in range(L):
        net.place(f"arr{l}")
    for i in range(n):
        for l in range(L):
            nxt = f"ctlf{i}_{l + 1}" if l + 1 < L else f"ctlb{i}_{L - 1}"
            net.transition(f"F{i}_{l}", ln(p.fwd[l]), inputs={f"param{i}_{l}": 1, f"ctlf{i}_{l}": 1},
                           outputs={nxt: 1})
            nxt = f"ctlb{i}_{l - 1}" if l > 0 else f"ctlf{i}_0"
            net.transition(f"B{i}_{l}", ln(p.bwd[l]), inputs={f"ctlb{i}_{l}": 1},
                           outputs={f"grad{i}_{l}": 1, nxt: 1}, tags={"step": l == 0, "worker": i})
            net.transition(f"PU{i}_{l}", ln(p.push_up[l]), inputs={f"grad{i}_{l}": 1},
                           outputs={f"atsrv{i}_{l}": 1}, resources=[f"up{i}"])
            net.transition(f"PD{i}_{l}", ln(p.push_up[l] / 4), inputs={f"atsrv{i}_{l}": 1},
                           outputs={f"arr{l}": 1}, resources=["sdown"])
            net.transition(f"SU{i}_{l}", ln(p.pull_down[l] / 4), inputs={f"sendq{i}_{l}": 1},
                           outputs={f"infl{i}_{l}": 1}, resources=["sup"])
            net.transition(f"WD{i}_{l}", ln(p.pull_down[l]), inputs={f"infl{i}_{l}": 1},
                           outputs={f"param{i}_{l}": 1}, resources=[f"dn{i}"])
    for l in range(L):
        net.transition(f"U{l}", ln(p.update[l]), inputs={f"arr{l}": n},
                       outputs={f"sendq{i}_{l}": 1 for i in range(n)}, resources=["scpu"])
    return net


def eg_ring(n: int):
    import sgdnet as sg

    m = 4 * n
    net = sg.Net(f"eg-ring-{n}")
    for k in range(m):
        net.place(f"p{k}", tokens=1 if k % 4 == 0 else 0)
    for k in range(m):
        net.transition(f"t{k}", sg.LogNormal(mean=1e-3 * (1 + k % 3), cv=0.3), inputs={f"p{k}": 1},
                       outputs={f"p{(k + 1) % m}": 1}, tags={"step": k % 4 == 3})
    return net


def anchor(n: int):
    if not os.path.isdir(ANCHORS):
        return None
    sys.path.insert(0, ANCHORS)
    from anchor_runner import to_sgdnet
    from model import Params, build_ps_net

    return to_sgdnet(build_ps_net(Params(N=n)), f"anchor-sync-{n}")


def timed(net, engine: str, steps: int, reps: int):
    import sgdnet as sg

    t = time.process_time()
    r = sg.simulate(net, steps=steps, warmup=steps // 10, replications=reps, seed=7, parallel=False,
                    samples=False, engine=engine)
    return r, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, nargs="*", default=[4, 16, 64])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--completions", type=float, default=2e6, help="per timed run (about)")
    ap.add_argument("--nets", nargs="*", default=["eg-sync", "eg-ring", "fifo-ps", "anchor"])
    a = ap.parse_args()

    from sgdnet.engine.fastpath import fast_path_problems
    from sgdnet.engine.fastpath_fifo import fifo_path_problems
    from sgdnet.net.compiled import compile_net

    builders = {"eg-sync": eg_sync, "eg-ring": eg_ring, "fifo-ps": fifo_ps, "anchor": anchor}
    print(f"{'net':>8} {'N':>3} {'reps':>4} {'generic compl/s':>16} {'fast compl/s':>13} "
          f"{'fast/generic':>12}  throughput generic | fast (steps/s, 95% CI half-width)")
    for name in a.nets:
        for n in a.N:
            net = builders[name](n)
            if net is None:
                print(f"{name:>8} {n:>3}  (no {ANCHORS})")
                continue
            cn = compile_net(net)
            why = fast_path_problems(cn) and fifo_path_problems(cn)  # empty: a fast path applies
            per_step = cn.n_transitions / max(1, len(cn.step_transitions))
            for reps in (1, 8):
                steps = max(20, int(a.completions / reps / per_step))
                engines = ("generic",) if why else ("generic", "fast")
                for e in engines:
                    timed(net, e, 20, reps)  # JIT / cache load
                rates: dict = {e: [] for e in engines}
                ratios = []
                res = {}
                for _ in range(a.rounds):
                    for e in engines:
                        r, dt = timed(net, e, steps, reps)
                        rates[e].append(float(r.events.sum()) / dt)
                        res[e] = r
                    if not why:
                        ratios.append(rates["fast"][-1] / rates["generic"][-1])
                g = statistics.median(rates["generic"])
                thr = " | ".join(f"{res[e].throughput.mean:.3f} +- {res[e].throughput.half_width():.3f}"
                                 for e in engines)
                if why:
                    print(f"{name:>8} {n:>3} {reps:>4} {g / 1e6:>14.2f} M {'n/a':>13} {'n/a':>12}  {thr}")
                else:
                    f = statistics.median(rates["fast"])
                    print(f"{name:>8} {n:>3} {reps:>4} {g / 1e6:>14.2f} M {f / 1e6:>11.2f} M "
                          f"{statistics.median(ratios):>11.2f}x  {thr}")
            if why:
                print(f"{'':>8} fast path does not apply: {why[0]}")


if __name__ == "__main__":
    main()
