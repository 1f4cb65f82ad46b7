"""Where a PS round's time goes: the PS-traffic probe against the model, layer by layer.

Root, iproute2. Runs :func:`sgdnet.testbed.tcp_probe.probe_ps` once (``--workers``, ``--rate``,
sync unless ``--async``) and, for its rounds in the middle 70 % of the run, prints the median
time from a round's start (its first push posted) to every worker's push of each layer being
in at the PS (meaningful for sync), to each layer's pull being in, and to the round's end; then the same from a traced sgdnet run of the probe's pattern
(:func:`predict_probe_ps.probe_profile` on ``Cluster.from_file(--cluster, ...)``, no CPU or
update costs): a round starts at the worker's first push and a layer's pull is in at the end
of its pull's last stage. ``--model-only`` skips the testbed.

    python scripts/probe_ps_timeline.py --rate 250Mbit/s --workers 4 \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measured(rate: float, workers: int, sync: bool, run_s: float) -> list[list[float]]:
    """Per round (pooled over workers), after its start: every push of each layer in at the
    PS, each layer's pull in, the round's end."""
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.tcp_probe import PS_LAYERS, probe_ps

    with EmulatedCluster(workers + 1, rate=rate) as cl:
        r = probe_ps(cl, workers, sync, run_s=run_s)
    L = len(PS_LAYERS)
    got = {(w, k): t for t, w, k in r["ps_in"]}  # push k of worker w in at the PS
    out = []
    for rows, ends in zip(r["rounds"], r["ends"]):
        for i, (row, end) in enumerate(zip(rows, ends)):
            if not 0.2 * run_s <= row[0] <= 0.9 * run_s:
                continue
            # every worker's push j of this round in (sync: the round index is the same)
            ins = [max(got.get((v, i * L + j), float("nan")) for v in range(1, workers + 1))
                   for j in range(L)]
            out.append([x - row[0] for x in ins] + [t - row[0] for t in row[1:]] + [end - row[0]])
    return out


def _model_trace(cluster_file: Path, rate: float, workers: int, sync: bool):
    """The model's trace of the probe's pattern: per worker, ``{(layer, name): [firings]}`` of
    its push stages and of its pull stages."""
    from predict_probe_ps import probe_profile

    from sgdnet import Cluster, simulate, variants
    from sgdnet.testbed.tcp_probe import PS_LAYERS
    from sgdnet.workload.cluster_file import load_cluster_file

    cf = load_cluster_file(cluster_file)
    ratio = cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])
    prof = probe_profile(list(PS_LAYERS), 0.002)
    cl = Cluster.from_file(cluster_file, workers=workers, bandwidth=rate * ratio,
                           update_s_per_byte=0.0, update_s_per_layer=0.0, send_s_per_byte=0.0,
                           recv_s_per_byte=0.0, reduce_s_per_byte=0.0)
    net = variants.build("sync-ps" if sync else "async-ps", prof, cl, granularity="fine")
    ev = simulate(net, steps=60 * workers, warmup=0, replications=1, seed=0, trace=True,
                  parallel=False, trace_limit=10 ** 6).trace_events(0)
    # per worker and layer: the firings of its push (starts) and pull (ends), in order
    push: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    pull: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in ev:
        tg = e["tags"]
        if "worker" not in tg or tg.get("layer") is None:
            continue
        d = tg.get("direction") or tg.get("role")
        if d in ("push", "pull"):
            (push if d == "push" else pull)[tg["worker"]][(tg["layer"], e["name"])].append(e)
    return push, pull


def _steps(by: dict, layer: int, key: str, pick) -> list[float]:
    """Per step: ``pick`` (min / max) over the stages of ``layer`` of their firing's ``key``."""
    v = [x for (lay, _), x in by.items() if lay == layer]
    return [pick(x[k][key] for x in v) for k in range(min(len(x) for x in v))]


def modelled_own(cluster_file: Path, rate: float, workers: int, sync: bool) -> list[list[float]]:
    """Per step (after the first 10) and worker: each of its pushes in at the PS, from that
    worker's own round start (its first push's first stage), in push order."""
    from sgdnet.testbed.tcp_probe import PS_LAYERS

    push, _ = _model_trace(cluster_file, rate, workers, sync)
    L = len(PS_LAYERS)
    out = []
    for w in push:
        starts = _steps(push[w], L - 1, "start", min)
        ins = [_steps(push[w], L - 1 - j, "end", max) for j in range(L)]
        m = min(len(starts), *(len(x) for x in ins))
        out += [[ins[j][k] - starts[k] for j in range(L)] for k in range(10, m - 1)]
    return out


def modelled(cluster_file: Path, rate: float, workers: int, sync: bool) -> list[list[float]]:
    """The same as :func:`measured` from the model's trace (rounds after the first 10)."""
    from sgdnet.testbed.tcp_probe import PS_LAYERS

    push, pull = _model_trace(cluster_file, rate, workers, sync)
    L = len(PS_LAYERS)
    # every worker's push of a layer in at the PS (sync: step k of each worker is round k)
    pushed = []
    for j in range(L):
        ws = [_steps(push[w], L - 1 - j, "end", max) for w in push]
        pushed.append([max(x[k] for x in ws) for k in range(min(len(x) for x in ws))])
    out = []
    for w in push:
        starts = _steps(push[w], L - 1, "start", min)
        ins = [_steps(pull[w], L - 1 - j, "end", max) for j in range(L)]  # push order j
        m = min(len(starts), *(len(x) for x in ins), *(len(x) for x in pushed))
        for k in range(10, m - 1):
            out.append([pushed[j][k] - starts[k] for j in range(L)]
                       + [ins[j][k] - starts[k] for j in range(L)] + [starts[k + 1] - starts[k]])
    return out


def show(label: str, rows: list[list[float]]) -> None:
    med = [statistics.median(r[j] for r in rows) * 1e3 for j in range(len(rows[0]))]
    L = (len(med) - 1) // 2
    print(f"{label}: every push in at " + " / ".join(f"{x:.1f}" for x in med[:L])
          + " ms; pulls in at " + " / ".join(f"{x:.1f}" for x in med[L:2 * L])
          + f" ms; round {med[-1]:.1f} ms ({len(rows)} rounds)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--async", dest="asyn", action="store_true")
    ap.add_argument("--run-s", type=float, default=6.0)
    ap.add_argument("--cluster", type=Path, required=True)
    ap.add_argument("--model-only", action="store_true")
    a = ap.parse_args(argv)
    from sgdnet import units

    rate = units.bandwidth(a.rate, what="rate")
    what = f"{'async' if a.asyn else 'sync'} n={a.workers} at {a.rate}"
    if not a.model_only:
        show(f"testbed {what}", measured(rate, a.workers, not a.asyn, a.run_s))
    show(f"model   {what}", modelled(a.cluster, rate, a.workers, not a.asyn))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
