"""DSSP's controller decisions r* and throughput next to SSP(S_L) and ASP, for docs/validation.md.

Usage::

    PYTHONPATH=. python scripts/dssp_rstar.py [--replications 8]

Two 4-worker clusters with speeds 1, 1, 0.4, 0.4: the toy of ``tests/test_dssp_paper.py``
(one compute op, zero-byte messages with 1 ms latency) and the two-layer toy profile of the tests
at 10 and 25 Gb/s (coarse and fine). Prints, per case, steps/s with 95% CIs and the r*
distribution (share of decisions by r*); with a version of sgdnet that has ``s_upper`` and
``Result.gate_stats`` also the capped DSSP and the largest lead at a push.
"""

from __future__ import annotations

import argparse

import numpy as np

from sgdnet import Cluster, Layer, ModelProfile, metrics, variants
from sgdnet.engine import simulate
from sgdnet.variants.parameter_server import build_ps_net

SPEEDS = [1.0, 1.0, 0.4, 0.4]
ONE = ModelProfile("one", [Layer("all", 0.0, 0.03, 0.0)], batch_size=32)
TOY = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6)],
                   batch_size=32)


def cases():
    yield "latency toy (test)", ONE, Cluster(workers=4, speeds=SPEEDS, compute_cv=0.3,
                                              latency="1ms", update_s_per_layer=0,
                                              update_s_per_byte=0), "coarse"
    for bw in ("10Gbps", "25Gbps"):
        for g in ("coarse", "fine"):
            yield f"toy {bw} {g}", TOY, Cluster(workers=4, speeds=SPEEDS, compute_cv=0.2,
                                                bandwidth=bw), g


def has_cap() -> bool:
    return any(o.name == "s_upper" for o in variants.get("dssp").options)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=16)
    a = ap.parse_args(argv)
    kw = dict(steps=a.steps, warmup=a.steps // 10, replications=a.replications, seed=a.seed)
    caps = [None, 15] if has_cap() else [None]
    print("| case | SSP(3) | ASP | DSSP(3, 12) | r* mean | share r* = 0 / 1..5 / 6..12 | max lead |")
    print("|---|---|---|---|---|---|---|")
    for label, prof, c, g in cases():
        coarse = g == "coarse"
        ssp = simulate(build_ps_net("ssp", prof, c, synchronous=False, coarse=coarse, staleness=3), **kw)
        asp = simulate(build_ps_net("asp", prof, c, synchronous=False, coarse=coarse), **kw)
        for cap in caps:
            opts = {} if cap is None else {"s_upper": cap}
            res = simulate(variants.build("dssp", prof, c, granularity=g, s_lower=3, r_max=12, **opts),
                           **kw)
            r = metrics.r_star(res)
            pmf = np.bincount(r, minlength=13) / max(r.size, 1)
            lead = "—"
            if hasattr(res, "gate_stats"):
                st = res.gate_stats("dssp")
                top = int(np.nonzero(st.lead_counts.sum(axis=0))[0].max())
                lead = f"≥ {top}" if st.lead_overflowed() else str(top)
            name = label if cap is None else f"{label}, S_U={cap}"
            print(f"| {name} | {ssp.throughput.mean:.1f} ± {ssp.throughput.half_width():.1f} "
                  f"| {asp.throughput.mean:.1f} ± {asp.throughput.half_width():.1f} "
                  f"| {res.throughput.mean:.1f} ± {res.throughput.half_width():.1f} "
                  f"| {r.mean():.2f} | {pmf[0]:.2f} / {pmf[1:6].sum():.2f} / {pmf[6:].sum():.2f} "
                  f"| {lead} |")


if __name__ == "__main__":
    main()
