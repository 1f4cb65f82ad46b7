"""Fit a PS host's downlink efficiency under the PS's own traffic to the PS-traffic probe (#37).

``validate_testbed37.py --probe-ps --rates R --workers 1,2,3,4 --out P`` measures
:func:`sgdnet.testbed.tcp_probe.probe_ps` (pushes of a model's layers into a PS host, pulls back,
no torch, no gloo) at the calibration's rate ``R``. This script predicts every cell of ``P`` as
``predict_probe_ps.py`` does (``Cluster.from_file(FILE, workers=n, bandwidth=rate x the file's
sustained / tbf ratio)``, no update or per-byte CPU cost, ``--burst``: the file's token bucket)
and picks (:func:`sgdnet.testbed.ps_efficiency.fit`), for ``k`` = 2, 3, ... in turn, the efficiency ``e_k`` of the PS host's downlink with
``k`` flows (``Cluster.ps_link_efficiency``; ``e_1`` = 1, the counts above ``k`` at ``e_k``
while it is fitted) that minimises the squared relative error of the sync and async cells with
``k`` workers: a grid of 0.05 over [0.5, 1], then of 0.01 around the best. ``--out F`` writes
the cluster file with ``link.ps_efficiency`` (the figures used, and the probe's file, in
``measurements.ps_efficiency``); ``--per-repeat`` fits each repeat of the probe on its own and
states every efficiency as the repeats' mean with a 95 % interval (``calibration.figures``), as
``sgdnet calibrate --ps-probe`` does::

    PYTHONPATH=. python scripts/fit_ps_efficiency.py --probe docs/data/testbed37_probe_ps_100.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml --burst \\
        --out docs/data/testbed37_quiet_cluster-100mbit-pseff.yaml

The efficiency is measured, not derived from a mechanism: with BBR the probe's PS link carries
0.82-0.90 of its bound where max-min sharing fills it (docs/validation.md, issue #37).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
    ap.add_argument("--per-repeat", action="store_true",
                    help="fit every repeat of the probe on its own, as sgdnet calibrate "
                         "--ps-probe does: the repeats' mean with a 95%% interval")
    a = ap.parse_args(argv)

    from sgdnet.testbed.ps_efficiency import fit, fit_repeats, with_ps_efficiency
    from sgdnet.workload.cluster_file import load_cluster_file

    d = json.loads(a.probe[0].read_text())
    for more in a.probe[1:]:  # further campaigns of the same probe: their runs join the cells
        for key, runs in json.loads(more.read_text())["runs"].items():
            d["runs"].setdefault(key, []).extend(runs)
    cf = load_cluster_file(a.cluster)
    opts = dict(burst=a.burst, sim_steps=a.sim_steps, replications=a.replications)
    rec: dict = {"probe": [str(p) for p in a.probe], "burst": a.burst,
                 "rates_Bps": sorted({float(k.split("/")[0]) for k in d["runs"]})}
    if a.per_repeat:
        table, figs, per = fit_repeats(d["runs"], d["layers_B"], d["compute_s"], cf, **opts)
        rec.update(figures=figs, per_repeat=per)
    else:
        table, rms = fit(d["runs"], d["layers_B"], d["compute_s"], cf, **opts)
        rec["rms"] = {k: round(v, 4) for k, v in rms.items()}
    print(f"link.ps_efficiency: {table}")
    if a.out:
        with_ps_efficiency(cf, table, **rec).save(a.out)
        print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
