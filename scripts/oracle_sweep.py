#!/usr/bin/env python
"""The Numba kernel against the pure-Python oracle, and the fast paths against the kernel, on many
more random nets than the suite runs.

The suite checks a few dozen fixed generator seeds (``tests/test_engine_vs_reference.py``) and
300 fuzz nets (``tests/test_fuzz.py``); this runs the same generators and the same comparisons
over a seed range, and sorts every disagreement into

* ``rounding``: the net has ``ps`` resources or links (flows). The two engines compute shares
  differently (the kernel keeps a virtual clock per resource or bottleneck, the oracle advances
  every holder), so completions that tie in exact arithmetic can land a rounding apart, in
  either order, after which the runs may part (documented in both test files);
* ``defect``: anything else, which the contract says cannot happen (exit status 1).

Usage::

    PYTHONPATH=. python scripts/oracle_sweep.py --seeds 100:400             # generator nets
    PYTHONPATH=. python scripts/oracle_sweep.py --fuzz --seeds 10000:14000  # fuzz nets
    PYTHONPATH=. python scripts/oracle_sweep.py --fast --seeds 1000:5000    # fast paths
    PYTHONPATH=. python scripts/oracle_sweep.py --periodic --seeds 0:500    # skipped periods

``--fast``: the random event graphs of ``tests/test_fastpath.py`` and the sync-PS-like FIFO
nets of ``tests/test_fastpath_fifo.py`` (deterministic and random durations, some with a history
of three rounds, so its compaction runs over and over; event graphs whose history bound lets
no lane or only a few lanes fit, so the run goes to the FIFO path or the generic engine, or
plays fewer lanes per chunk; histories that start at two rounds and grow), each through
``engine="auto"`` and the generic kernel: where a fast path runs, the two must give the same
run to the bit (nothing there is ``rounding``).

``--periodic``: the deterministic generator nets, fuzz nets and event graphs, each played event by
event (``periodic=False``) and with the periods of its periodic regime skipped
(:mod:`sgdnet.engine.periodic`), compared as ``tests/test_periodic.py`` does (times and sums to
1e-9, counts exactly, histograms to one bin); the summary says how many runs skipped periods.
A disagreement is ``rounding`` when a duration is not a multiple of 1/1024 or the net shares
ps resources or links: completions that tie exactly in the played run may then land a rounding
apart once their times are shifted by whole periods (or the reverse), and the stop at the last
step may count one completion more or less.

Generator nets run deterministic and random durations each (the suite's steps, warm-up and
tolerances), fuzz nets as ``test_fuzz.run_net_case``. Prints one line per disagreement and a
summary by class and generator.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _shares_rounded(net) -> bool:
    """Whether ``net`` has a resource whose shares the two engines round differently."""
    return any(r.discipline in ("ps", "flow") for r in net.resources.values())


def _dyadic(net) -> bool:
    """Whether every duration of ``net`` is a fixed multiple of 1/1024 (then every time of a run
    is an exact float sum, and ties between completions do not depend on rounding)."""
    from sgdnet.dists import Deterministic

    return all(isinstance(t.duration, Deterministic) and float(t.duration.value * 1024).is_integer()
               for t in net.transitions.values())


def generator_cases(lo: int, hi: int):
    """``(label, net, run)`` for every generator of test_engine_vs_reference and seed, both kinds
    of durations; ``run()`` raises AssertionError when the engines disagree."""
    import test_engine_vs_reference as T

    from sgdnet import simulate
    from sgdnet.engine.reference import simulate_reference

    gens = {
        "teg": lambda s, det: T.teg_net(s, det),
        "res": lambda s, det: T.resource_net(s, det),
        "inh": lambda s, det: T.resource_net(s, det, inhibitors=True),
        "lag": lambda s, det: T.gate_net(s, "lag", det),
        "dssp": lambda s, det: T.gate_net(s, "dynamic_lag", det),
        "flow": lambda s, det: T.flow_net(s, det),
        "star": lambda s, det: T.star_net(s, det),
    }
    for s in range(lo, hi):
        for g, make in gens.items():
            for det in (True, False):
                net = make(s, det)
                if det:
                    kw = dict(steps=150, warmup=15, replications=1, seed=0, trace=True,
                              trace_limit=5000)
                else:
                    kw = dict(steps=300, warmup=30, replications=2, seed=s, trace=True,
                              trace_limit=3000)
                flows = g in ("flow", "star")

                def run(net=net, kw=kw, flows=flows, det=det):
                    k = simulate(net, engine="generic", **kw)
                    r = simulate_reference(net, **kw)
                    T.assert_same_run(net, k, r, flows,
                                      rtol=1e-6 if flows and not det else 1e-9)

                yield f"{g} seed={s} {'det' if det else 'random'}", g, net, run


def fuzz_cases(lo: int, hi: int):
    """``(label, net, run)`` for the fuzz nets of test_fuzz with seeds ``lo..hi-1``."""
    import test_fuzz as F

    for s in range(lo, hi):
        net = F.random_net(s)

        def run(s=s):
            out = F.run_net_case(s)
            if not out.startswith("ok"):
                raise AssertionError(out)

        yield f"fuzz seed={s}", "fuzz", net, run


def fast_cases(lo: int, hi: int):
    """``(label, net, run)`` for the fast-path nets with seeds ``lo..hi-1`` (see ``--fast``)."""
    import numpy as np
    import test_fastpath as A
    import test_fastpath_fifo as B

    import sgdnet.engine.fastpath as fp
    import sgdnet.engine.fastpath_fifo as ff
    from sgdnet import simulate
    from sgdnet.errors import SimulationError
    from sgdnet.net.compiled import compile_net

    def case(net, kw, same, short=False, patch=()):
        def run():
            T = compile_net(net).n_transitions
            if short:  # three rounds of history: tallied and dropped over and over
                patch_ = [(ff, "MAX_HISTORY_BYTES", 8 * T * 3), *patch]
            else:
                patch_ = list(patch)
            old = [(m, a, getattr(m, a)) for m, a, _ in patch_]
            for m, a, v in patch_:
                setattr(m, a, v(T) if callable(v) and a == "MAX_HISTORY_BYTES" else v)
            try:
                # played event by event: a deterministic net's skipped periods agree with a
                # played run to rounding only, and the fast paths play every round
                g = simulate(net, engine="generic", periodic=False, **kw)
                f = simulate(net, engine="auto", **kw)
            except SimulationError:
                return  # a net both engines refuse (e.g. a zero-time circuit)
            finally:
                for m, a, v in reversed(old):
                    setattr(m, a, v)
            if f.engine != "generic":
                same(g, f)
                np.testing.assert_array_equal(g.throughput.samples, f.throughput.samples)
        return run

    def two(need, per_round, extra):  # histories that start at two rounds and grow
        return 2

    for s in range(lo, hi):
        rng = np.random.default_rng(s)
        for det in (True, False):
            for strongly in (True, False):
                net = A.random_eg(s, det=det, strongly=strongly, servers_var=det and s % 2 == 1,
                                  zero=det and s % 3 == 2)
                kw = dict(steps=int(rng.integers(20, 300)), warmup=int(rng.integers(0, 30)),
                          replications=2, seed=s)
                yield f"eg seed={s} {'det' if det else 'random'}", "eg", net, case(net, kw,
                                                                                  A.same_run)
            for share in (False, True):
                net = B.ps_net(s, det=det, share_pu_su=share)
                kw = dict(steps=int(rng.integers(20, 300)), warmup=int(rng.integers(0, 40)),
                          replications=2, seed=s, parallel=False)
                yield f"fifo seed={s} {'det' if det else 'random'}", "fifo", net, case(
                    net, kw, B.same_run)
        net = B.ps_net(s, det=s % 2 == 0)
        kw = dict(steps=int(rng.integers(20, 200)), warmup=int(rng.integers(0, 60)),
                  replications=1, seed=s, parallel=False)
        yield f"fifo-short seed={s}", "fifo-short", net, case(net, kw, B.same_run, short=True)
        # the event-graph path's history bound: one lane does not fit (the run goes to the FIFO
        # path or the generic engine), or only a few do (fewer lanes per chunk); histories grown
        # from two rounds (handed back to the pool as they grow), on two threads
        det = s % 2 == 1
        net = A.random_eg(s + 7, det=det, servers_var=det, zero=det and s % 4 == 1)
        kw = dict(steps=int(rng.integers(20, 300)), warmup=int(rng.integers(0, 30)),
                  replications=8, seed=s, parallel=bool(s % 3))
        lanes = int(rng.integers(0, 4))  # 0: not even one lane fits
        rounds = fp.first_rounds(kw["steps"] + kw["warmup"], 4, 4)
        yield f"eg-bound seed={s} lanes<={lanes}", "eg-bound", net, case(
            net, kw, A.same_run,
            patch=[(fp, "MAX_HISTORY_BYTES", lambda T, L=lanes, R=rounds: 8 * T * max(L * R, 1))])
        grown = [(fp, "first_rounds", two), (ff, "first_rounds", two)]
        yield f"grown seed={s}", "grown", net, case(net, kw, A.same_run, patch=grown)
        net = B.ps_net(s + 7, det=det)
        yield f"fifo-grown seed={s}", "fifo-grown", net, case(
            net, dict(kw, replications=2), A.same_run, patch=grown)


def periodic_cases(lo: int, hi: int, skipped: collections.Counter):
    """``(label, net, run)``: played against skipped runs (see ``--periodic``); ``skipped``
    counts, per generator, the runs that skipped periods."""
    import numpy as np
    import test_engine_vs_reference as T
    import test_fastpath as A
    import test_fuzz as F
    import test_periodic as Z

    gens = {
        "teg": lambda s: T.teg_net(s, True),
        "res": lambda s: T.resource_net(s, True),
        "inh": lambda s: T.resource_net(s, True, inhibitors=True),
        "lag": lambda s: T.gate_net(s, "lag", True),
        "dssp": lambda s: T.gate_net(s, "dynamic_lag", True),
        "flow": lambda s: T.flow_net(s, True),
        "star": lambda s: T.star_net(s, True),
        "eg": lambda s: A.random_eg(s, det=True, strongly=bool(s % 2), servers_var=s % 3 == 1,
                                    zero=s % 5 == 2),
        "fuzz": F.random_net,
    }
    for s in range(lo, hi):
        rng = np.random.default_rng(s)
        for g, make in gens.items():
            net = make(s)
            kw = dict(steps=int(rng.integers(50, 600)), warmup=int(rng.integers(0, 40)),
                      histograms=bool(s % 2), samples=s % 5 != 3, max_events=50_000, seed=0,
                      replications=1, parallel=False, engine="generic")

            def run(net=net, kw=kw, g=g):
                a, b = Z.outcomes(net, **kw)
                if not isinstance(b, Exception) and b.periodic:
                    skipped[g] += 1
                Z.assert_same_outcome(a, b)

            yield f"{g} seed={s}", g, net, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="100:160", help="seed range LO:HI (default 100:160)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--fuzz", action="store_true", help="the fuzz nets instead of the generators")
    what.add_argument("--fast", action="store_true",
                      help="the fast paths against the kernel instead of the kernel and the oracle")
    what.add_argument("--periodic", action="store_true",
                      help="played runs against runs that skip the periods of a periodic regime")
    a = ap.parse_args(argv)
    try:
        lo, hi = (int(x) for x in a.seeds.split(":"))
    except ValueError:
        ap.error(f"--seeds {a.seeds!r}: give LO:HI, e.g. 100:400")
    sys.path.insert(0, str(TESTS))
    skipped: collections.Counter = collections.Counter()
    cases = (fuzz_cases(lo, hi) if a.fuzz else fast_cases(lo, hi) if a.fast
             else periodic_cases(lo, hi, skipped) if a.periodic else generator_cases(lo, hi))
    n, t0 = 0, time.perf_counter()
    found: collections.Counter = collections.Counter()
    for label, gen, net, run in cases:
        n += 1
        try:
            run()
        except AssertionError as e:
            if a.periodic:  # a skipped run's times are the played ones to rounding only
                kind = "rounding" if _shares_rounded(net) or not _dyadic(net) else "defect"
            else:
                kind = "rounding" if _shares_rounded(net) and not a.fast else "defect"
            found[kind, gen] += 1
            first = str(e).strip().splitlines()[0] if str(e).strip() else "assertion"
            print(f"{kind:8s} {label}: {first[:160]}", flush=True)
    took = time.perf_counter() - t0
    by = ", ".join(f"{k} {g}: {c}" for (k, g), c in sorted(found.items())) or "none"
    print(f"{n} cases in {took:.0f} s; disagreements: {by}")
    if a.periodic:
        print("runs that skipped periods: " + (", ".join(f"{g} {c}" for g, c in sorted(skipped.items()))
                                               or "none"))
    return 1 if any(k == "defect" for k, _ in found) else 0


if __name__ == "__main__":
    sys.exit(main())
