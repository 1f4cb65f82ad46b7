"""Fit a PS host's downlink efficiency under the PS's own traffic to the PS-traffic probe (#37).

``validate_testbed37.py --probe-ps --rates R --workers 1,2,3,4 --out P`` measures
:func:`sgdnet.testbed.tcp_probe.probe_ps` (pushes of a model's layers into a PS host, pulls back,
no torch, no gloo) at the calibration's rate ``R``. This script predicts every cell of ``P`` as
``predict_probe_ps.py`` does (``Cluster.from_file(FILE, workers=n, bandwidth=rate x the file's
sustained / tbf ratio)``, no update or per-byte CPU cost, ``--burst``: the file's token bucket)
and picks, for ``k`` = 2, 3, ... in turn, the efficiency ``e_k`` of the PS host's downlink with
``k`` flows (``Cluster.ps_link_efficiency``; ``e_1`` = 1, the counts above ``k`` at ``e_k``
while it is fitted) that minimises the squared relative error of the sync and async cells with
``k`` workers: a grid of 0.05 over [0.5, 1], then of 0.01 around the best. ``--out F`` writes
the cluster file with ``link.ps_efficiency`` (the figures used, and the probe's file, in
``measurements.ps_efficiency``)::

    PYTHONPATH=. python scripts/fit_ps_efficiency.py --probe docs/data/testbed37_probe_ps_100.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml --burst \\
        --out docs/data/testbed37_quiet_cluster-100mbit-pseff.yaml

The efficiency is measured, not derived from a mechanism: with BBR the probe's PS link carries
0.82-0.90 of its bound where max-min sharing fills it (docs/validation.md, issue #37).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", type=Path, required=True, action="append",
                    help="validate_testbed37.py --probe-ps's output (again: more runs pooled)")
    ap.add_argument("--cluster", type=Path, required=True)
    ap.add_argument("--burst", action="store_true", help="predict with the file's token bucket")
    ap.add_argument("--sim-steps", type=int, default=200)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--out", type=Path, help="the cluster file with link.ps_efficiency")
    a = ap.parse_args(argv)

    import dataclasses

    from predict_probe_ps import probe_profile

    import sgdnet
    from sgdnet import Cluster
    from sgdnet.workload.cluster_file import load_cluster_file

    d = json.loads(a.probe[0].read_text())
    for more in a.probe[1:]:  # further campaigns of the same probe: their runs join the cells
        for key, runs in json.loads(more.read_text())["runs"].items():
            d["runs"].setdefault(key, []).extend(runs)
    prof = probe_profile(d["layers_B"], d["compute_s"])
    cf = load_cluster_file(a.cluster)
    ratio = cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])
    cells: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for key, runs in d["runs"].items():
        rate, mode, n = key.split("/")
        cells.setdefault((mode, int(n)), []).append(
            (float(rate), statistics.median(r["steps_per_s"] for r in runs)))
    ks = sorted({n for _, n in cells if n >= 2})
    if not ks:
        raise SystemExit(f"{a.probe[0]}: no cells with 2 or more workers to fit")

    def err2(eff: list[float], k: int) -> float:
        tot = 0.0
        for mode in ("sync", "async"):
            for rate, meas in cells.get((mode, k), []):
                kw = dict(workers=k, bandwidth=rate * ratio, update_s_per_byte=0.0,
                          update_s_per_layer=0.0, send_s_per_byte=0.0, recv_s_per_byte=0.0,
                          reduce_s_per_byte=0.0, ps_link_efficiency=tuple(eff))
                if a.burst:
                    kw["burst"] = "file"
                p = sgdnet.predict(f"{mode}-ps", prof, Cluster.from_file(a.cluster, **kw),
                                   steps=a.sim_steps, warmup=max(10, a.sim_steps // 10),
                                   replications=a.replications, seed=0)
                tot += (float(p.steps_per_s.mean) / meas - 1.0) ** 2
        return tot

    eff = [1.0]
    def score(e: float, k: int, eff: list[float]) -> float:
        return err2(eff + [e] * (k - len(eff)), k)

    for k in ks:
        coarse = min((score(0.5 + 0.05 * i, k, eff), 0.5 + 0.05 * i) for i in range(11))
        lo, hi = max(0.5, coarse[1] - 0.04), min(1.0, coarse[1] + 0.04)
        fine = min([coarse] + [(score(lo + 0.01 * i, k, eff), lo + 0.01 * i)
                               for i in range(int(round((hi - lo) / 0.01)) + 1)])
        eff += [round(fine[1], 2)] * (k - len(eff))
        n = sum(len(cells.get((m, k), [])) for m in ("sync", "async"))
        print(f"{k} flows: efficiency {fine[1]:.2f}, rms relative error of its {n} cells "
              f"{(fine[0] / n) ** 0.5:.1%}", flush=True)
    table = {i + 1: e for i, e in enumerate(eff)}
    print(f"link.ps_efficiency: {table}")
    if a.out:
        link = dataclasses.replace(cf.link, ps_efficiency=table)
        meas = dict(cf.measurements or {})
        meas["ps_efficiency"] = {"probe": [str(p) for p in a.probe], "burst": a.burst,
                                 "rates_Bps": sorted({r for v in cells.values() for r, _ in v}),
                                 "table": table}
        dataclasses.replace(cf, link=link, measurements=meas).save(a.out)
        print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
