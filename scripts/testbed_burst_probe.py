"""The emulated links' token bucket, varied: training runs at several tbf bursts, and the model.

``--run --out F`` (root, iproute2, torch): one emulated cluster at ``--rate``; for every burst
(``--bursts``, tc sizes as ``EmulatedCluster`` parses them) and worker count, one launch of
sync PS, async PS and ring for every model, each job's steps/s and the CPU our processes
(``own_cores``) and the kernel's interrupt work (``irq_cores``) used meanwhile
(:func:`sgdnet.testbed.runner.summarize_job`).

``--probe-ps --out P``: the PS-traffic probe instead (:func:`sgdnet.testbed.ps_efficiency.probe_cells`,
tb-mlp's layers, no torch, sync and async, every worker count) at every burst, ``--repeats``
times with the bursts' order reversed each repeat; ``--probe-from P --cluster C``: the model
of each probe cell (:func:`~sgdnet.testbed.ps_efficiency.predict_cell`, no PS efficiency) with
and without the run's bucket.

``--from F --cluster C --ps-cluster MODEL=FILE ...``: the model of every run, with and without
the token bucket (``Cluster.burst`` = the run's burst x the calibrated / nominal burst of C),
PS cells on the model's own PS-efficiency file, rings with ``cpu_overlap=True``
(``validate_recipe37.py``'s recipe otherwise); the profiles are those of ``--profiles P`` (a
campaign file).

    sudo python scripts/testbed_burst_probe.py --run --out docs/data/testbed37_burst_probe.json
    PYTHONPATH=. python scripts/testbed_burst_probe.py --from docs/data/testbed37_burst_probe.json \\
        --profiles docs/data/testbed37_fresh9_runs.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml \\
        --ps-cluster tb-mlp=docs/data/testbed37_quiet_cluster-100mbit-pseff.yaml \\
        --ps-cluster tb-deep=docs/data/testbed37_quiet_cluster-100mbit-pseff-deep.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SCHEMES = ("sync-ps", "async-ps", "ring")


def run(out: Path, rate: str, bursts: list[str], workers: list[int], models: list[str],
        steps: int, warmup: int) -> None:
    """The runs (see the module docstring), written to ``out`` after every launch."""
    from sgdnet.testbed.netns import EmulatedCluster, parse_burst
    from sgdnet.testbed.runner import launch, summarize_job

    res: dict = {"meta": {"rate": rate, "bursts": bursts, "workers": workers, "models": models,
                          "steps": steps, "warmup": warmup,
                          "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                 "runs": []}
    with EmulatedCluster(max(workers) + 1, rate=rate) as cl:
        for b in bursts:
            cl.shape(rate, b)
            for n in workers:
                jobs = [{"kind": "train", "id": f"{m}/{s}", "scheme": s, "steps": steps,
                         "warmup": warmup, "model": m, "batch": 32, "bucket_cap_mb": 0.5}
                        for m in models for s in SCHEMES if n >= 2 or s != "ring"]
                got = launch(cl, n + 1, jobs, timeout_s=600)
                for i, j in enumerate(jobs):
                    r = summarize_job(got["ranks"], i, warmup)
                    m, s = j["id"].split("/")
                    row = {"burst": b, "burst_B": parse_burst(b, what="burst"), "model": m,
                           "scheme": s, "workers": n, "rate_Bps": cl.rate,
                           **{k: r[k] for k in ("steps_per_s", "worker_steps_per_s",
                                                "own_cores", "irq_cores", "other_cores",
                                                "noisy")}}
                    res["runs"].append(row)
                    print(f"{b} n={n} {j['id']:16s} {r['steps_per_s']:7.2f} steps/s  own "
                          f"{r['own_cores']:.2f}  irq {r['irq_cores'] or 0:.2f} cores", flush=True)
                out.write_text(json.dumps(res, indent=1))


def probe(out: Path, rate: str, bursts: list[str], workers: list[int], repeats: int) -> None:
    """The PS-traffic probe at every burst (see the module docstring), written to ``out``."""
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster, parse_burst
    from sgdnet.testbed.ps_efficiency import probe_cells

    res: dict = {"meta": {"rate": rate, "bursts": bursts, "workers": workers,
                          "repeats": repeats, "layers_B": list(tcp_probe.PS_LAYERS),
                          "compute_s": 0.002,
                          "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                 "runs_by_burst": {b: {} for b in bursts},
                 "burst_B": {b: parse_burst(b, what="burst") for b in bursts}}
    with EmulatedCluster(max(workers) + 1, rate=rate) as cl:
        for rep in range(repeats):
            for b in (bursts if rep % 2 == 0 else bursts[::-1]):
                cl.shape(rate, b)
                probe_cells(cl, tcp_probe.PS_LAYERS, workers, repeats=1,
                            into=res["runs_by_burst"][b],
                            log=lambda m, b=b: print(f"{b}: {m}", flush=True))
                out.write_text(json.dumps(res, indent=1))


def predict_probe(src: Path, base: Path) -> list[dict]:
    """Every probe cell of ``src`` (:func:`probe`) predicted without and with its bucket."""
    import statistics

    from sgdnet.testbed.ps_efficiency import predict_cell, probe_profile
    from sgdnet.workload.cluster_file import load_cluster_file

    res = json.loads(src.read_text())
    cf = load_cluster_file(base)
    scale = cf.link.burst / float(cf.measurements.get("tbf_burst_B") or 64000)
    prof = probe_profile(res["meta"]["layers_B"], res["meta"]["compute_s"])
    rows = []
    for b, cells in res["runs_by_burst"].items():
        for key in sorted(cells, key=lambda k: (k.split("/")[1], int(k.split("/")[2]))):
            rate, mode, n = key.split("/")
            meas = statistics.median(float(r["steps_per_s"]) for r in cells[key])
            got = [predict_cell(cf, prof, mode, int(n), float(rate), **over) / meas - 1
                   for over in ({}, {"burst": res["burst_B"][b] * scale})]
            rows.append({"burst": b, "mode": mode, "workers": int(n), "measured": meas,
                         "of_bound": statistics.median(float(r["of_bound"])
                                                       for r in cells[key]),
                         "err_none": got[0], "err_bucket": got[1]})
            print(f"{b:6s} {mode:5s} n={n} {meas:6.2f} rounds/s ({rows[-1]['of_bound']:.3f} "
                  f"of the bound)  no bucket {got[0]:+.1%}  bucket {got[1]:+.1%}", flush=True)
    return rows


def predict(src: Path, profiles: Path, base: Path, ps_files: dict[str, Path]) -> list[dict]:
    """Every run of ``src`` predicted without and with its token bucket (module docstring):
    ``validate_recipe37.predict_cell`` with ``burst`` = 0 or the run's bucket."""
    from validate_recipe37 import predict_cell

    from sgdnet import ModelProfile
    from sgdnet.workload.cluster_file import load_cluster_file

    res = json.loads(src.read_text())
    profs = json.loads(profiles.read_text())["profiles"]
    cal = load_cluster_file(base)
    scale = cal.link.burst / float(cal.measurements.get("tbf_burst_B") or 64000)
    rows = []
    for r in res["runs"]:
        prof = ModelProfile.from_dict(profs[r["model"]])
        steps = 200 if r["workers"] == 1 else 100
        got = {label: predict_cell(r, prof, base, ps_files, steps, 3, warmup=20,
                                   burst=b)[0] / r["steps_per_s"] - 1
               for label, b in (("none", 0.0), ("bucket", r["burst_B"] * scale))}
        rows.append({**r, "err_none": got["none"], "err_bucket": got["bucket"]})
        print(f"{r['burst']:6s} n={r['workers']} {r['model']}/{r['scheme']:8s} "
              f"{r['steps_per_s']:7.2f}  own+irq {r['own_cores'] + (r['irq_cores'] or 0):.2f} "
              f"cores  no bucket {got['none']:+.1%}  bucket {got['bucket']:+.1%}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--bursts", default="16KB,64KB,256KB")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--models", default="tb-mlp,tb-deep")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--from", dest="src", type=Path)
    ap.add_argument("--profiles", type=Path, help="a campaign file with the models' profiles")
    ap.add_argument("--cluster", type=Path)
    ap.add_argument("--ps-cluster", action="append", default=[], metavar="MODEL=FILE")
    ap.add_argument("--probe-ps", action="store_true")
    ap.add_argument("--repeats", type=int, default=2, help="with --probe-ps")
    ap.add_argument("--probe-from", type=Path, help="--probe-ps's output, to predict")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.probe_ps:
        if a.out is None:
            ap.error("--probe-ps needs --out")
        probe(a.out, a.rate, a.bursts.split(","), [int(x) for x in a.workers.split(",")],
              a.repeats)
        return 0
    if a.probe_from:
        if a.cluster is None:
            ap.error("--probe-from needs --cluster")
        rows = predict_probe(a.probe_from, a.cluster)
        if a.json:
            a.json.write_text(json.dumps(rows, indent=1))
        return 0
    if a.run:
        if a.out is None:
            ap.error("--run needs --out")
        run(a.out, a.rate, a.bursts.split(","), [int(x) for x in a.workers.split(",")],
            a.models.split(","), a.steps, a.warmup)
        return 0
    if not (a.src and a.profiles and a.cluster):
        ap.error("give --run --out F, or --from F --profiles P --cluster C --ps-cluster M=F")
    ps = dict(kv.split("=", 1) for kv in a.ps_cluster)
    rows = predict(a.src, a.profiles, a.cluster, {k: Path(v) for k, v in ps.items()})
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
