"""Issue #37's recipe on a campaign: each scheme predicted as the README says, one model each.

Every cell of the campaigns (``validate_testbed37.py --run``'s files) is predicted from the
one-worker profile and calibration files only, with the options the README recommends for a
gloo / CPU cluster:

* PS cells (sync, async): the model's own PS-efficiency file (``--ps-cluster MODEL=FILE``:
  ``link.ps_efficiency`` fitted to the PS-traffic probe with that model's gradients at the
  calibration's rate, ``sgdnet calibrate --ps-probe`` or ``scripts/fit_ps_efficiency.py``) with
  its token bucket, ``Cluster.from_file(FILE, burst="file")``;
* ring cells: the calibration (``--cluster``) with the receive work overlapping the flow,
  ``cpu_overlap=True``.

The bandwidth of a cell is its tbf rate times the file's sustained / tbf ratio, as in
``validate_testbed37.py``. Prints measured vs predicted, then mean and max |error| per model
over the communicating cells (all of them, and those with 2-4 workers). Runs the quiet gate
marked noisy (other tenants' CPU during the job) are left out unless ``--keep-noisy``::

    PYTHONPATH=. python scripts/validate_recipe37.py --from docs/data/testbed37_fresh9_runs.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml \\
        --ps-cluster tb-mlp=docs/data/testbed37_quiet_cluster-100mbit-pseff.yaml \\
        --ps-cluster tb-deep=docs/data/testbed37_quiet_cluster-100mbit-pseff-deep.yaml
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_testbed37 import VARIANTS, cells  # noqa: E402


def predict_cell(c: dict, prof, base: Path, ps_files: dict[str, Path], sim_steps: int,
                 replications: int, warmup: int | None = None, **over) -> tuple[float, str]:
    """The recipe's steps/s for cell ``c`` (its ``model``, ``scheme``, ``workers``,
    ``rate_Bps``) and which file and options it used; ``over``: ``Cluster.from_file`` options
    over the recipe's (``burst=0.0``: no bucket), ``warmup`` default ``max(10, sim_steps // 10)``."""
    import sgdnet
    from sgdnet import Cluster
    from sgdnet.testbed.ps_efficiency import bandwidth_at
    from sgdnet.workload.cluster_file import load_cluster_file

    ring = c["scheme"] == "ring"
    f = base if ring else ps_files.get(c["model"])
    if f is None:
        raise SystemExit(f"no --ps-cluster for {c['model']} (its PS cells need the PS "
                         "efficiency fitted with its own gradients)")
    opts = {**({"cpu_overlap": True} if ring else {"burst": "file"}), **over}
    cl = Cluster.from_file(f, workers=c["workers"],
                           bandwidth=bandwidth_at(load_cluster_file(f), c["rate_Bps"]), **opts)
    variant, vopts = VARIANTS[c["scheme"]]
    p = sgdnet.predict(variant, prof, cl, steps=sim_steps,
                       warmup=max(10, sim_steps // 10) if warmup is None else warmup,
                       replications=replications, seed=0, **vopts)
    return float(p.steps_per_s.mean), f"{f.name} " + ", ".join(f"{k}={v}" for k, v in opts.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", type=Path, nargs="+", required=True)
    ap.add_argument("--cluster", type=Path, required=True, help="the calibration (rings)")
    ap.add_argument("--ps-cluster", action="append", default=[], metavar="MODEL=FILE",
                    help="a model's PS-efficiency file (again for each model)")
    ap.add_argument("--sim-steps", type=int, default=200)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--keep-noisy", action="store_true",
                    help="keep the runs the quiet gate marked noisy (left out by default)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    from sgdnet import ModelProfile

    ps_files = {}
    for kv in a.ps_cluster:
        if "=" not in kv:
            raise SystemExit(f"--ps-cluster {kv!r}: give MODEL=FILE")
        m, f = kv.split("=", 1)
        ps_files[m.strip()] = Path(f)
    res = json.loads(a.src[0].read_text())
    for more in a.src[1:]:
        res["runs"] += json.loads(more.read_text())["runs"]
    noisy = [r for r in res["runs"] if r.get("noisy")]
    if not a.keep_noisy:  # the quiet gate: another tenant's CPU during the job
        res["runs"] = [r for r in res["runs"] if not r.get("noisy")]
        print(f"{len(noisy)} of {len(res['runs']) + len(noisy)} runs over the quiet gate left "
              "out (--keep-noisy keeps them)")
    rows = []
    print("| model | Mbit/s | scheme | n | measured median (min-max) | predicted | err |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for c in cells(res["runs"]):
        if c["scheme"] == "ring" and c["workers"] < 2:
            continue  # no communication: not a check of the network model
        prof = ModelProfile.from_dict(res["profiles"][c["model"]])
        pred, how = predict_cell(c, prof, a.cluster, ps_files, a.sim_steps, a.replications)
        row = dict(c, pred=pred, err=pred / c["median"] - 1, how=how)
        rows.append(row)
        print(f"| {c['model']} | {c['rate_Bps'] * 8e-6:.0f} | {c['scheme']} | {c['workers']} | "
              f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f}) | {pred:.2f} | "
              f"{row['err']:+.1%} |", flush=True)
    summary = {}
    for m in sorted({r["model"] for r in rows}):
        for label, sel in (("all", lambda r: True), ("2-4 workers", lambda r: r["workers"] >= 2)):
            e = [abs(r["err"]) for r in rows if r["model"] == m and sel(r)]
            summary[f"{m} {label}"] = {"cells": len(e), "mean_abs": statistics.mean(e),
                                       "max_abs": max(e)}
        for s in ("sync-ps", "async-ps", "ring"):
            e = [abs(r["err"]) for r in rows if r["model"] == m and r["scheme"] == s
                 and r["workers"] >= 2]
            if e:
                summary[f"{m} {s} 2-4"] = {"cells": len(e), "mean_abs": statistics.mean(e),
                                           "max_abs": max(e)}
    for k, v in summary.items():
        print(f"{k}: mean |err| {v['mean_abs']:.1%}, max {v['max_abs']:.1%} over "
              f"{v['cells']} cells")
    if a.json:
        a.json.write_text(json.dumps({"source": [str(s) for s in a.src],
                                      "cluster": str(a.cluster),
                                      "ps_cluster": {k: str(v) for k, v in ps_files.items()},
                                      "rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
