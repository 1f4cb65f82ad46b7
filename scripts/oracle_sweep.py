#!/usr/bin/env python
"""The Numba kernel against the pure-Python oracle on many more random nets than the suite runs.

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="100:160", help="seed range LO:HI (default 100:160)")
    ap.add_argument("--fuzz", action="store_true", help="the fuzz nets instead of the generators")
    a = ap.parse_args(argv)
    try:
        lo, hi = (int(x) for x in a.seeds.split(":"))
    except ValueError:
        ap.error(f"--seeds {a.seeds!r}: give LO:HI, e.g. 100:400")
    sys.path.insert(0, str(TESTS))
    cases = fuzz_cases(lo, hi) if a.fuzz else generator_cases(lo, hi)
    n, t0 = 0, time.perf_counter()
    found: collections.Counter = collections.Counter()
    for label, gen, net, run in cases:
        n += 1
        try:
            run()
        except AssertionError as e:
            kind = "rounding" if _shares_rounded(net) else "defect"
            found[kind, gen] += 1
            first = str(e).strip().splitlines()[0] if str(e).strip() else "assertion"
            print(f"{kind:8s} {label}: {first[:160]}", flush=True)
    took = time.perf_counter() - t0
    by = ", ".join(f"{k} {g}: {c}" for (k, g), c in sorted(found.items())) or "none"
    print(f"{n} cases in {took:.0f} s; disagreements: {by}")
    return 1 if any(k == "defect" for k, _ in found) else 0


if __name__ == "__main__":
    sys.exit(main())
