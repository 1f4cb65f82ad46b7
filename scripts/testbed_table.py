"""Predict every measured testbed configuration with sgdnet and print the comparison table.

Inputs (all written by the testbed, none fitted to the training runs):

* the campaign's results JSON (``sgdnet testbed --out``): measured steps/s per repeat;
* one cluster file per link rate (``sgdnet calibrate --rate R --out``), matched to a run by the
  rate the file's calibration shaped its links to (``measurements.tbf_rate_Bps``);
* the single-worker profile (``sgdnet calibrate --profile-out``).

Each configuration is predicted with ``sgdnet.predict`` from ``Cluster.from_file(file,
workers=n)`` and the profile: ``sync-ps`` and ``async-ps`` (one dedicated PS host), ring
all-reduce per layer as ``allreduce`` with ``bucket_bytes=0`` (one collective per layer) and
``overlap=True`` (started from the gradient hook), DDP as ``allreduce`` with
``bucket_bytes = bucket_cap_mb MiB`` and ``overlap=True``; fine and coarse nets, and the fine net
with the file's ``comm_uses_compute`` flipped (what the other choice would give). Run it again
after the network model changes to see the new error::

    PYTHONPATH=. python scripts/testbed_table.py docs/data/testbed/runs.json \\
        docs/data/testbed/cluster-100mbit.yaml docs/data/testbed/cluster-200mbit.yaml \\
        --profile docs/data/testbed/profile-tb-mlp.json [--json preds.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
#: --alt: (column title, variant options, cluster overrides) of the last column
ALTS = {"fifo": ("fine, fifo NICs (earlier model)", {"discipline": "fifo"}, {}),
        "maxmin": ("fine, exact max-min (share_cv 0)", {},
                   {"share_cv_in": 0.0, "share_cv_out": 0.0}),
        "inflight1": ("fine, one all-reduce in flight", {"inflight": 1}, {}),
        "queue": ("fine, static PS-link queue", {}, {"tcp_queue_model": "static"}),
        "join": ("fine, join queue", {}, {"tcp_queue_model": "join"})}
#: --alt values that take the PS links' standing queue from --queue (the TCP probe's
#: standing_queue_s at the cell's rate with k = the cell's workers: Cluster.tcp_queue)
QUEUE_ALTS = ("queue", "join")
#: testbed scheme -> (sgdnet variant, options)
VARIANTS = {"sync-ps": ("sync-ps", {}), "async-ps": ("async-ps", {}),
            "ring": ("allreduce", {"bucket_bytes": 0, "overlap": True})}


def variant_of(scheme: str, bucket_cap_mb: float) -> tuple[str, dict[str, Any]]:
    """The sgdnet variant and options that describe a testbed scheme."""
    if scheme == "ddp":
        return "allreduce", {"bucket_bytes": bucket_cap_mb * MIB, "overlap": True}
    return VARIANTS[scheme]


def communicates(scheme: str, workers: int) -> bool:
    """PS schemes always talk to the PS host; all-reduce schemes only with >= 2 workers."""
    return scheme in ("sync-ps", "async-ps") or workers >= 2


def link_bound(scheme: str, workers: int, bandwidth: float, grad_bytes: float) -> float | None:
    """Steps/s (all workers) the busiest link allows: a PS host's link carries ``n M`` bytes per
    round each way (``B / M`` steps/s whatever ``n``); a ring all-reduce moves ``2(n-1)/n M``
    over each worker's uplink per step. ``None`` without communication."""
    if not communicates(scheme, workers):
        return None
    if scheme in ("sync-ps", "async-ps"):
        return bandwidth / grad_bytes
    return workers * workers * bandwidth / (2 * (workers - 1) * grad_bytes)


def predict_cell(profile: Any, cluster_file: Path, scheme: str, workers: int,
                 bucket_cap_mb: float, granularity: str, steps: int, replications: int,
                 cluster_overrides: dict | None = None, **options: Any) -> float:
    """sgdnet's predicted steps/s (all workers' steps) of one configuration; ``options`` are
    variant options (e.g. ``discipline="fifo"`` for the earlier NIC model),
    ``cluster_overrides`` fields of the cluster read from the file (e.g. ``share_cv_in=0``)."""
    import sgdnet
    from sgdnet import Cluster

    variant, opts = variant_of(scheme, bucket_cap_mb)
    if granularity == "coarse":
        opts = {}
    opts = {**opts, **options}
    if variant != "allreduce":
        opts.pop("inflight", None)  # all-reduces only
    cl = Cluster.from_file(cluster_file, workers=workers, **(cluster_overrides or {}))
    p = sgdnet.predict(variant, profile, cl, granularity=granularity, steps=steps,
                       warmup=max(10, steps // 10), replications=replications, seed=0, **opts)
    return float(p.steps_per_s.mean)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("clusters", type=Path, nargs="+")
    ap.add_argument("--profile", type=Path, required=True)
    ap.add_argument("--sim-steps", type=int, default=200)
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--quiet-only", action="store_true",
                    help="drop repeats the quiet gate flagged (default: keep all, count them)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--alt", choices=sorted(ALTS), default="fifo",
                    help="the last column: 'fifo' (default) the earlier FIFO NIC model, "
                         "'maxmin' flows with exact max-min sharing (the files' link.share_cv "
                         "set to 0), 'queue' / 'join' the PS links' standing queue of --queue "
                         "after every shared message / behind the others' backlog")
    ap.add_argument("--queue", type=Path,
                    help="standing queues per rate and flow count (validate_testbed37.py "
                         "--probe-queue's output), for --alt queue / join")
    a = ap.parse_args(argv)
    if a.alt in QUEUE_ALTS and a.queue is None:
        ap.error(f"--alt {a.alt} needs --queue")
    queues = json.loads(a.queue.read_text())["standing_queue_s"] if a.queue else {}

    from sgdnet.testbed.runner import summarize_runs
    from sgdnet.workload import ModelProfile
    from sgdnet.workload.cluster_file import load_cluster_file

    t0 = time.perf_counter()
    res = json.loads(a.runs.read_text())
    meta = res["meta"]
    profile = ModelProfile.load(a.profile)
    by_rate = {}
    for f in a.clusters:
        cf = load_cluster_file(f)
        by_rate[round(float(cf.measurements["tbf_rate_Bps"]))] = (f, cf)
    rows = []
    for cell in summarize_runs(res["runs"], include_noisy=not a.quiet_only):
        key = round(cell["rate_Bps"])
        if key not in by_rate:
            raise SystemExit(f"no cluster file calibrated at {cell['rate_Bps'] * 8 / 1e6:g} "
                             f"Mbit/s; have {sorted(k * 8 / 1e6 for k in by_rate)}")
        f, cf = by_rate[key]
        row = dict(cell)
        row["communicating"] = communicates(cell["scheme"], cell["workers"])
        row["link_bound"] = link_bound(cell["scheme"], cell["workers"], cf.link.bandwidth,
                                       profile.grad_bytes)
        alt_title, alt_opts, alt_over = ALTS[a.alt]
        if a.alt in QUEUE_ALTS and cell["workers"] >= 2:
            q = queues.get(f"{key}/{cell['workers']}")
            if q is None:
                raise SystemExit(f"--queue has no standing queue at {cell['rate_Bps']} B/s "
                                 f"with {cell['workers']} flows")
            alt_over = {**alt_over, "tcp_queue": statistics.median(q)}
        for label, gran, opts, over in (("fine", "fine", {}, {}), ("coarse", "coarse", {}, {}),
                                        ("fine_alt", "fine", alt_opts, alt_over)):
            pred = predict_cell(profile, f, cell["scheme"], cell["workers"],
                                meta["bucket_cap_mb"], gran, a.sim_steps, a.replications,
                                cluster_overrides=over, **opts)
            row[f"pred_{label}"] = pred
            row[f"err_{label}"] = (pred - cell["median"]) / cell["median"]
        rows.append(row)
        print(f"  {cell['scheme']:8s} n={cell['workers']} {key * 8 / 1e6:.0f} Mbit/s: measured "
              f"{cell['median']:.2f}, fine {row['pred_fine']:.2f} ({row['err_fine']:+.0%})",
              file=sys.stderr, flush=True)

    print(f"<!-- generated by scripts/testbed_table.py from {a.runs} in "
          f"{time.perf_counter() - t0:.0f} s -->")
    print("| Mbit/s | scheme | n | measured steps/s median (min–max) | noisy | of link bound | "
          f"fine | err | coarse | err | {alt_title} | err |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mark = "" if r["communicating"] else " *"
        lb = "" if r["link_bound"] is None else f"{r['median'] / r['link_bound']:.0%}"
        print(f"| {r['rate_Bps'] * 8 / 1e6:.0f} | {r['scheme']}{mark} | {r['workers']} | "
              f"{r['median']:.2f} ({r['min']:.2f}–{r['max']:.2f}) | {r['noisy']}/{r['n']} | {lb} | "
              f"{r['pred_fine']:.2f} | {r['err_fine']:+.0%} | {r['pred_coarse']:.2f} | "
              f"{r['err_coarse']:+.0%} | {r['pred_fine_alt']:.2f} | "
              f"{r['err_fine_alt']:+.0%} |")
    comm = [r for r in rows if r["communicating"]]
    print()
    print(f"| over the communicating cells | fine | coarse | {alt_title} |")
    print("|---|---:|---:|---:|")
    for name, fn in (("mean absolute error", lambda v: statistics.mean(abs(x) for x in v)),
                     ("max absolute error", lambda v: max(abs(x) for x in v)),
                     ("mean signed error", statistics.mean)):
        print(f"| {name} ({len(comm)} cells) | "
              + " | ".join(f"{fn([r[f'err_{k}'] for r in comm]):+.1%}"
                           for k in ("fine", "coarse", "fine_alt")) + " |")
    for scheme in sorted({r["scheme"] for r in comm}):
        sub = [r for r in comm if r["scheme"] == scheme]
        print(f"| {scheme}: mean abs ({len(sub)} cells) | "
              + " | ".join(f"{statistics.mean(abs(r[f'err_{k}']) for r in sub):.1%}"
                           for k in ("fine", "coarse", "fine_alt")) + " |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
