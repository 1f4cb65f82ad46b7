"""Plain coarse and coarse with heuristics (``granularity="coarse+"``) against the fine nets.

Grid: every built-in model (``sgdnet models``) x {sync-ps, async-ps, allreduce} x workers x
link rates, default cluster otherwise (one dedicated PS shard, flows, 50 us latency,
deterministic durations, so one replication is exact). Error of a cell: ``(coarse - fine) /
fine`` of the predicted steps/s. Prints a markdown table (mean / max absolute error per variant
and overall) and, with ``--cells FILE``, writes every cell as CSV::

    PYTHONPATH=. python scripts/coarse_vs_fine.py [--models vgg16,resnet50] \\
        [--workers 1,2,4,8,16] [--rates 1Gbps,10Gbps,25Gbps] [--cells cells.csv]

``--testbed RUNS`` instead predicts the real-run testbed cells the way
``scripts/testbed_table.py`` does (same profile, cluster files and variant options, nothing
fitted to the runs) with fine, coarse and coarse+ nets, and prints their errors against the
measured medians::

    PYTHONPATH=. python scripts/coarse_vs_fine.py --testbed docs/data/testbed/runs.json \\
        --clusters docs/data/testbed/cluster-100mbit.yaml docs/data/testbed/cluster-200mbit.yaml \\
        --profile docs/data/testbed/profile-tb-mlp.json
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

VARIANTS = ("sync-ps", "async-ps", "allreduce")
GRANULARITIES = ("fine", "coarse", "coarse+")


def cell(variant: str, model: str, workers: int, rate: str, steps: int,
         fields: dict | None = None, options: dict | None = None, replications: int = 1,
         timing: bool = True, fine: float | None = None) -> dict:
    """Predicted steps/s of the three granularities for one configuration (``fields``: more
    Cluster fields; ``options``: variant options; ``timing=False``: coarse+ heuristics without
    per-layer times; ``fine``: a known fine figure, not simulated again)."""
    import sgdnet
    from sgdnet.variants.coarse import heuristics

    cl = sgdnet.Cluster(workers=workers, bandwidth=rate, **(fields or {}))
    out = {"model": model, "variant": variant, "workers": workers, "rate": rate}
    for g in GRANULARITIES:
        if g == "fine" and fine is not None:
            out[g] = fine
            continue
        extra = dict(options or {})
        if g == "coarse+" and not timing:
            spec = sgdnet.variants.get(variant)
            extra["heuristics"] = heuristics(variant, sgdnet.models.load(model), cl,
                                             timing=False, **spec.resolve(extra))
        p = sgdnet.predict(variant, model, cl, granularity=g, steps=steps, warmup=max(5, steps // 4),
                           replications=replications, seed=0, parallel=False, samples=False,
                           **extra)
        out[g] = float(p.steps_per_s.mean)
    for g in GRANULARITIES[1:]:
        out[f"err_{g}"] = (out[g] - out["fine"]) / out["fine"]
    return out


def _pairs(items: list[str]) -> dict:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}`` (values read as YAML scalars)."""
    import yaml

    return {k: yaml.safe_load(v) for k, v in (i.split("=", 1) for i in items)}


def summary(rows: list[dict]) -> str:
    """Markdown table: mean / max absolute error of coarse and coarse+ against fine."""
    lines = ["| cells | n | coarse mean abs | coarse max abs | coarse+ mean abs | "
             "coarse+ max abs | coarse+ cells within 10% |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    groups = [(v, [r for r in rows if r["variant"] == v]) for v in VARIANTS]
    groups.append(("all", rows))
    for name, rs in groups:
        if not rs:
            continue
        ec = [abs(r["err_coarse"]) for r in rs]
        ep = [abs(r["err_coarse+"]) for r in rs]
        within = sum(e <= 0.10 for e in ep)
        lines.append(f"| {name} | {len(rs)} | {100 * statistics.fmean(ec):.1f}% | "
                     f"{100 * max(ec):.1f}% | {100 * statistics.fmean(ep):.1f}% | "
                     f"{100 * max(ep):.1f}% | {within}/{len(rs)} |")
    return "\n".join(lines)


def testbed(runs: Path, clusters: list[Path], profile: Path, steps: int,
            replications: int) -> str:
    """Markdown tables of the testbed cells: measured, and fine / coarse / coarse+ errors."""
    from sgdnet.testbed.runner import summarize_runs
    from sgdnet.workload import ModelProfile
    from sgdnet.workload.cluster_file import load_cluster_file

    spec = importlib.util.spec_from_file_location(
        "testbed_table", Path(__file__).with_name("testbed_table.py"))
    tt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tt)
    res = json.loads(runs.read_text())
    prof = ModelProfile.load(profile)
    by_rate = {round(float(load_cluster_file(f).measurements["tbf_rate_Bps"])): f
               for f in clusters}
    lines = ["| Mbit/s | scheme | n | measured steps/s | fine | err | coarse | err | coarse+ | "
             "err |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    errs: dict[str, list[tuple[str, float]]] = {g: [] for g in GRANULARITIES}
    for c in summarize_runs(res["runs"], include_noisy=True):
        if not tt.communicates(c["scheme"], c["workers"]):
            continue
        f = by_rate[round(c["rate_Bps"])]
        row = [f"{c['rate_Bps'] * 8 / 1e6:.0f}", c["scheme"], str(c["workers"]),
               f"{c['median']:.2f}"]
        for g in GRANULARITIES:
            p = tt.predict_cell(prof, f, c["scheme"], c["workers"], res["meta"]["bucket_cap_mb"],
                                g, steps, replications)
            e = (p - c["median"]) / c["median"]
            errs[g].append((c["scheme"], e))
            row += [f"{p:.2f}", f"{e:+.0%}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| over the communicating cells | fine | coarse | coarse+ |", "|---|---:|---:|---:|"]
    n = len(errs["fine"])
    for name, fn in (("mean absolute error", lambda v: statistics.fmean(abs(x) for x in v)),
                     ("max absolute error", lambda v: max(abs(x) for x in v)),
                     ("mean signed error", statistics.fmean)):
        lines.append(f"| {name} ({n} cells) | " + " | ".join(
            f"{fn([e for _, e in errs[g]]):+.1%}" for g in GRANULARITIES) + " |")
    for sch in sorted({s for s, _ in errs["fine"]}):
        k = sum(s == sch for s, _ in errs["fine"])
        lines.append(f"| {sch}: mean abs ({k} cells) | " + " | ".join(
            f"{statistics.fmean(abs(e) for s, e in errs[g] if s == sch):.1%}"
            for g in GRANULARITIES) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import sgdnet

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(sgdnet.models.names()))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--rates", default="1Gbps,10Gbps,25Gbps")
    ap.add_argument("--steps", type=int, default=20, help="steps per worker (after warm-up)")
    ap.add_argument("--cells", default=None, help="write every cell to this CSV file")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a Cluster field for every cell, repeatable (e.g. compute_cv=0.1)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a variant option for every cell, repeatable (e.g. shards=4)")
    ap.add_argument("--replications", type=int, default=1)
    ap.add_argument("--no-timing", action="store_true",
                    help="coarse+ heuristics from layer sizes and order only (no per-layer times)")
    ap.add_argument("--fine-from", default=None, metavar="CSV",
                    help="reuse the fine figures of an earlier --cells file (same grid)")
    ap.add_argument("--testbed", type=Path, default=None, metavar="RUNS",
                    help="predict the testbed campaign RUNS instead (needs --clusters, --profile)")
    ap.add_argument("--clusters", type=Path, nargs="*", default=[])
    ap.add_argument("--profile", type=Path, default=None)
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.testbed is not None:
        if not a.clusters or a.profile is None:
            ap.error("--testbed needs --clusters FILE... and --profile FILE")
        table = testbed(a.testbed, a.clusters, a.profile, 200, 4)
        print(f"<!-- generated by scripts/coarse_vs_fine.py --testbed {a.testbed} in "
              f"{time.time() - t0:.0f} s -->")
        print(table)
        return 0
    rows = []
    known = {}
    if a.fine_from:
        with open(a.fine_from) as f:
            known = {(r["model"], r["variant"], int(r["workers"]), r["rate"]): float(r["fine"])
                     for r in csv.DictReader(f)}
    for m in a.models.split(","):
        for v in a.variants.split(","):
            for rate in a.rates.split(","):
                for n in (int(x) for x in a.workers.split(",")):
                    r = cell(v, m, n, rate, a.steps, _pairs(a.set), _pairs(a.option),
                             a.replications, not a.no_timing, known.get((m, v, n, rate)))
                    rows.append(r)
                    print(f"{m} {v} {rate} n={n}: fine {r['fine']:.4g} coarse "
                          f"{100 * r['err_coarse']:+.1f}% coarse+ {100 * r['err_coarse+']:+.1f}%",
                          file=sys.stderr, flush=True)
    if a.cells:
        with open(a.cells, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"<!-- generated by scripts/coarse_vs_fine.py ({len(rows)} cells, "
          f"{time.time() - t0:.0f} s) -->")
    print(summary(rows))
    worst = sorted(rows, key=lambda r: -abs(r["err_coarse+"]))[:5]
    print("\nworst coarse+ cells: " + "; ".join(
        f"{r['model']} {r['variant']} {r['rate']} n={r['workers']} {100 * r['err_coarse+']:+.1f}%"
        for r in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
