"""How long a sync-PS layer's last push takes to reach the PS: the testbed against the model.

Root (iproute2, torch) for the run; ``--model-only`` needs neither. The run: one ``train`` job
(sync PS, ``tb-mlp`` unless ``--model``) with ``ps_log`` on (:mod:`sgdnet.testbed.worker`):
every worker records when it posts each layer's push, the PS when it has each worker's push
(waited in worker order) and when it posts the pulls. For each layer and step, "all pushes in
- last push posted" is the time from the last worker handing its push to gloo to the PS
holding every push of that layer. The model: the same figure from a traced run of the fine
sync-PS net (``Cluster.from_file(--cluster, workers, bandwidth=rate x the file's sustained /
tbf ratio)``; from the first stage's start of the last-posted push to the last stage's end).

    python scripts/testbed_ps_timeline.py --rate 250Mbit/s --workers 4
    python scripts/testbed_ps_timeline.py --rate 250Mbit/s --workers 4 --model-only \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml \\
        --profile-from docs/data/testbed37_long_runs.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measured(ranks: list[dict], skip: int = 8) -> dict[int, list[float]]:
    """Per layer, "all pushes in - last push posted" of every steady step of a run."""
    ps = ranks[0]["ps_log"]
    got = {(int(s), int(layer)): g for s, layer, _t_in, _t_post, g in ps}
    posts = []
    for w in ranks[1:]:
        L = len({int(x[0]) for x in w["push_log"]})
        posts.append({(k // L, int(layer)): t for k, (layer, t) in enumerate(w["push_log"])})
    steps = max(s for s, _ in got) + 1
    out: dict[int, list[float]] = collections.defaultdict(list)
    for (s, layer), g in got.items():
        if skip <= s < steps - 1:
            out[layer].append(max(g) - max(p[(s, layer)] for p in posts))
    return out


def traced_sync_ps(cluster_file: Path, profile_from: Path, model: str, workers: int,
                   rate: float) -> tuple[Any, list[dict]]:
    """``(profile, trace events)`` of 60 steps of the fine sync-PS net of ``model``'s one-worker
    profile (a campaign file's ``profiles``) on ``Cluster.from_file(cluster_file, workers,
    bandwidth=rate x the file's sustained / tbf ratio)``, one replication, seed 0."""
    from sgdnet import Cluster, ModelProfile, simulate, variants
    from sgdnet.workload.cluster_file import load_cluster_file

    cf = load_cluster_file(cluster_file)
    ratio = cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])
    prof = ModelProfile.from_dict(json.loads(profile_from.read_text())["profiles"][model])
    cl = Cluster.from_file(cluster_file, workers=workers, bandwidth=rate * ratio)
    net = variants.build("sync-ps", prof, cl, granularity="fine")
    return prof, simulate(net, steps=60, warmup=6, replications=1, seed=0, trace=True,
                          parallel=False, trace_limit=10 ** 6).trace_events(0)


def modelled(cluster_file: Path, profile_from: Path, model: str, workers: int, rate: float,
             skip: int = 3) -> dict[int, list[float]]:
    """The same figure from the model's trace (see the module docstring)."""
    prof, ev = traced_sync_ps(cluster_file, profile_from, model, workers, rate)
    out: dict[int, list[float]] = {}
    for layer in range(prof.n_layers):
        by: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
        for e in ev:
            tg = e["tags"]
            if tg.get("direction") == "push" and tg.get("layer") == layer and "worker" in tg:
                by[tg["worker"]].append((e["start"], e["end"]))
        stages = len({e["name"] for e in ev if e["tags"].get("direction") == "push"
                      and e["tags"].get("layer") == layer and e["tags"].get("worker") == 0})
        m = min(len(v) for v in by.values()) // stages
        rows = []
        for k in range(m):
            post, arrive = [], []
            for v in by.values():
                seg = sorted(v)[k * stages:(k + 1) * stages]
                post.append(min(x[0] for x in seg))
                arrive.append(max(x[1] for x in seg))
            rows.append(max(arrive) - max(post))
        out[layer] = rows[skip:]
    return out


def show(label: str, d: dict[int, list[float]]) -> None:
    for layer in sorted(d, reverse=True):
        v = sorted(d[layer])
        print(f"{label} layer {layer}: all pushes in - last push posted, median "
              f"{statistics.median(v) * 1e3:.2f} ms (p10 {v[len(v) // 10] * 1e3:.2f}, "
              f"p90 {v[(9 * len(v)) // 10] * 1e3:.2f}, {len(v)} steps)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--model", default="tb-mlp")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--model-only", action="store_true")
    ap.add_argument("--cluster", type=Path)
    ap.add_argument("--profile-from", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    from sgdnet import units

    rate = units.bandwidth(a.rate, what="rate")
    if a.model_only:
        if a.cluster is None or a.profile_from is None:
            ap.error("--model-only needs --cluster FILE and --profile-from CAMPAIGN.json")
        d = modelled(a.cluster, a.profile_from, a.model, a.workers, rate)
        show(f"model n={a.workers}", d)
    else:
        from sgdnet.testbed.netns import EmulatedCluster
        from sgdnet.testbed.runner import launch, summarize_job

        job = {"kind": "train", "id": "run", "scheme": "sync-ps", "model": a.model,
               "batch": 32, "warmup": 5, "steps": a.steps, "ps_log": True}
        with EmulatedCluster(a.workers + 1, rate=rate) as cl:
            got = launch(cl, a.workers + 1, [job])
        ranks = [r["jobs"][0] for r in got["ranks"]]
        print(f"sync-ps {a.model} n={a.workers} at {rate * 8e-6:g} Mbit/s: "
              f"{summarize_job(got['ranks'], 0, 5)['steps_per_s']:.2f} steps/s")
        d = measured(ranks)
        show(f"testbed n={a.workers}", d)
    if a.json:
        a.json.write_text(json.dumps({"rate_Bps": rate, "workers": a.workers,
                                      "model_only": a.model_only,
                                      "last_push_s": {str(k): v for k, v in d.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
