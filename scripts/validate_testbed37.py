"""Issue #37's validation: fresh emulated campaigns at link rates the calibration did not see.

``--run --out F`` (root, iproute2): builds the emulated cluster (:mod:`sgdnet.testbed.netns`),
profiles one worker of every model (``profile`` job, one thread, as the training processes),
measures TCP on the cluster (:func:`sgdnet.testbed.tcp_probe.probe_cluster`: RTT, MSS, initial
window, slow start after idle, BBR's pacing while sharing) at every rate, then trains every
(model, scheme) for every worker count, rate and repeat: one launch per (repeat, rate, workers)
with every model and scheme inside it, rates, worker counts and job order rotated from repeat
to repeat (:func:`sgdnet.testbed.runner.rotate`).

``--from F --cluster FILE [FILE...]``: predicts every cell from the one-worker profile of F and
the calibration file only: ``Cluster.from_file(FILE, workers=n, bandwidth=rate x r)`` where
``r`` is the file's own sustained-bandwidth / tbf-rate ratio (TCP/IP payload per frame,
1448/1514, which does not depend on the rate), nothing taken from the training runs, and
prints measured vs predicted with mean and max absolute error over the communicating cells
(``--json`` writes the rows; several ``--from`` campaigns pool their repeats). ``--alts``
picks the network models compared: ``file`` (the defaults: CPU costs before / after the flow,
no pacing cap, no token bucket), ``overlap`` (``cpu_overlap=True``), ``pace`` (``tcp_pacing`` of
the TCP probe at that rate, ``--tcp`` or F's own), ``overlap+pace``, ``burst`` /
``overlap+burst`` (the file's token bucket on every NIC link, ``burst="file"``), ``inflight2``
/ ``overlap+inflight2`` / ``overlap+burst+inflight2`` (rings with two all-reduces in flight, as gloo's two threads run them).

``--probe --out T``: the TCP probe alone at every rate, ``--probe-repeats`` times.
``--probe-queue --out Q``: the probe's standing queue with 2..max(workers) flows at every rate;
``--from F --queue Q --alts ...queue`` then gives the PS links that queue
(``Cluster.tcp_queue``) at each cell's rate and worker count; ``...join`` the same queue,
waited only behind what the other connections have queued (``tcp_queue_model="join"``).

    python scripts/validate_testbed37.py --run --out docs/data/testbed37_runs.json
    python scripts/validate_testbed37.py --probe --out docs/data/testbed37_tcp.json
    python scripts/validate_testbed37.py --from docs/data/testbed37_runs.json \\
        --cluster docs/data/testbed/cluster-100mbit.yaml --tcp docs/data/testbed37_tcp.json \\
        --json docs/data/testbed37_pred.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCHEMES = ("sync-ps", "async-ps", "ring")
VARIANTS = {"sync-ps": ("sync-ps", {}), "async-ps": ("async-ps", {}),
            "ring": ("allreduce", {"bucket_bytes": 0, "overlap": True})}


def steps_of(spec: str, models: list[str]) -> dict[str, int]:
    """``--steps``: one count for every model (``"12"``) or one per model
    (``"tb-mlp=40,tb-tiny=200"``: a small model's job must last long enough that its step
    rate is the steady state, not TCP's and the first steps' start-up)."""
    if "=" not in spec:
        return {m: int(spec) for m in models}
    got = {k.strip(): int(v) for k, v in (kv.split("=", 1) for kv in spec.split(","))}
    missing = [m for m in models if m not in got]
    if missing:
        raise SystemExit(f"--steps {spec!r} gives no count for {missing}; give every model "
                         "(e.g. tb-mlp=40,tb-tiny=200) or one number")
    return got


def run(out: Path, models: list[str], rates: list[str], workers: list[int], repeats: int,
        steps: dict[str, int], warmup: int, batch: int, cc: str | None = None,
        burst: str = "64KB") -> None:
    """The campaign (see the module docstring), written to ``out``; ``cc``: every host's TCP
    congestion control (default: what the namespaces inherit); ``burst``: the links' tbf
    bucket."""
    from sgdnet import units
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch, rotate, summarize_job

    bps = [units.bandwidth(r, what="rate") for r in rates]
    meta = {"models": models, "rates_Bps": bps, "workers": workers, "repeats": repeats,
            "steps": steps, "warmup": warmup, "batch": batch, "schemes": list(SCHEMES),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cc": cc or "inherited", "burst": burst}
    res: dict[str, Any] = {"meta": meta, "profiles": {}, "tcp": {}, "runs": [], "launches": []}
    t_all = time.monotonic()
    with EmulatedCluster(max(workers) + 1, rate=bps[0], burst=burst) as cl:
        if cc:
            cl.congestion_control(cc)
        for m in models:
            r = launch(cl, 2, [{"kind": "profile", "id": "profile", "model": m, "batch": batch}])
            res["profiles"][m] = r["ranks"][1]["jobs"][0]["profile"]
            print(f"profile {m}: {res['profiles'][m].get('name')}", flush=True)
        for rate in bps:
            cl.shape(rate)
            res["tcp"][str(round(rate))] = tcp_probe.probe_cluster(cl, flows=max(workers))
            print(f"tcp at {rate * 8e-6:.0f} Mbit/s: {res['tcp'][str(round(rate))]['summary']}",
                  flush=True)
        for rep in range(repeats):
            for rate in rotate(bps, rep):
                cl.shape(rate)
                for n in rotate(workers, rep):
                    order = rotate([(m, s) for m in models for s in SCHEMES], rep + n)
                    jobs = [{"kind": "train", "id": f"{m}/{s}", "scheme": s, "steps": steps[m],
                             "warmup": warmup, "model": m, "batch": batch,
                             "bucket_cap_mb": 0.5} for m, s in order]
                    got = launch(cl, n + 1, jobs, timeout_s=600)
                    res["launches"].append({"repeat": rep, "rate_Bps": rate, "workers": n,
                                            "wall_s": got["wall_s"], "loadavg": got["loadavg"],
                                            "top_others": got["top_others"]})
                    for idx, (m, s) in enumerate(order):
                        row = summarize_job(got["ranks"], idx, warmup)
                        row.update({"model": m, "scheme": s, "workers": n, "rate_Bps": rate,
                                    "repeat": rep, "position": idx})
                        res["runs"].append(row)
                        print(f"rep {rep} {rate * 8e-6:.0f} Mbit/s n={n} {m:8s} {s:8s} "
                              f"{row['steps_per_s']:8.2f} steps/s  other "
                              f"{row['other_cores']:.2f}{'  NOISY' if row['noisy'] else ''}",
                              flush=True)
                    out.write_text(json.dumps(res))  # partial results survive a stop
    meta["elapsed_s"] = time.monotonic() - t_all
    out.write_text(json.dumps(res))


def probe(out: Path, rates: list[str], flows: int, repeats: int) -> None:
    """:func:`sgdnet.testbed.tcp_probe.probe_cluster` at every rate, ``repeats`` times
    (interleaved); per rate the median ``tcp_pacing`` and every repeat's figures."""
    from sgdnet import units
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster

    bps = [units.bandwidth(r, what="rate") for r in rates]
    got: dict[str, list[dict]] = {str(round(b)): [] for b in bps}
    with EmulatedCluster(flows + 1, rate=bps[0]) as cl:
        for _ in range(repeats):
            for b in bps:
                cl.shape(b)
                p = tcp_probe.probe_cluster(cl, flows=flows)
                p.pop("raw", None)
                got[str(round(b))].append(p)
                print(f"{b * 8e-6:.0f} Mbit/s: {p['summary']}", flush=True)
    tcp = {}
    for k, ps in got.items():
        f = statistics.median(p["tcp_pacing"] for p in ps)
        tcp[k] = {"cluster": {"tcp_pacing": f}, "repeats": ps,
                  "tcp_pacing_all": [p["tcp_pacing"] for p in ps]}
    out.write_text(json.dumps({"rates_Bps": bps, "flows": flows, "tcp": tcp}, indent=1))


def probe_queue(out: Path, rates: list[str], workers: list[int], repeats: int,
                incast: bool = False, cc: str | None = None) -> None:
    """The TCP probe's standing queue (``standing_queue_s``) with k = 2..max(workers)
    connections sharing one host's link, at every rate, ``repeats`` times (interleaved):
    connections out of one host (a PS's pulls), or with ``incast`` from k hosts into one (its
    pushes; also their bytes in flight, ``inflight_B``); ``cc``: every host's congestion
    control (default the namespaces' own)."""
    from sgdnet import units
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster

    bps = [units.bandwidth(r, what="rate") for r in rates]
    ks = [k for k in range(2, max(workers) + 1)]
    got: dict[str, list[float]] = {}
    inflight: dict[str, list[float]] = {}
    with EmulatedCluster(max(workers) + 1, rate=bps[0]) as cl:
        if cc:
            cl.congestion_control(cc)
        for _ in range(repeats):
            for b in bps:
                cl.shape(b)
                for k in ks:
                    p = (tcp_probe.probe_incast(cl, flows=k) if incast
                         else tcp_probe.probe_cluster(cl, flows=k))
                    got.setdefault(f"{round(b)}/{k}", []).append(p["standing_queue_s"])
                    if incast:
                        inflight.setdefault(f"{round(b)}/{k}", []).append(p["inflight_B"])
                    print(f"{b * 8e-6:.0f} Mbit/s, {k} flows{' in' if incast else ''}: "
                          f"standing queue {p['standing_queue_s'] * 1e3:.2f} ms"
                          + (f", {p['inflight_B'] / 1e3:.0f} kB in flight each" if incast
                             else ""), flush=True)
    rec = {"rates_Bps": bps, "flows": ks, "direction": "in" if incast else "out",
           "cc": cc or "inherited", "standing_queue_s": got}
    if incast:
        rec["inflight_B"] = inflight
    out.write_text(json.dumps(rec, indent=1))


def probe_duplex(out: Path, rates: list[str], workers: list[int]) -> None:
    """Pushes and pulls at once against pushes alone (:func:`sgdnet.testbed.tcp_probe.
    probe_duplex`) and the incast survivor's goodput after its peers stop, k = 1..max(workers)
    (1 for duplex only), at every rate."""
    from sgdnet import units
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster

    got: dict[str, dict] = {}
    with EmulatedCluster(max(workers) + 1, rate=units.bandwidth(rates[0], what="rate")) as cl:
        for r in rates:
            b = units.bandwidth(r, what="rate")
            cl.shape(b)
            for k in range(1, max(workers) + 1):
                d = tcp_probe.probe_duplex(cl, flows=k)
                if k >= 2:
                    d["solo_fraction"] = tcp_probe.probe_incast(cl, k, stream_s=2.0,
                                                                solo_s=0.6)["solo_fraction"]
                got[f"{round(b)}/{k}"] = d
                print(f"{b * 8e-6:.0f} Mbit/s, {k} flows each way: pushes at "
                      f"{d['push_fraction']:.3f}, pulls at {d['pull_fraction']:.3f} of the rate, "
                      f"RTT {d['push_rtt_s'] * 1e3:.1f} ms (pushes alone "
                      f"{d['alone']['rtt_loaded_s'] * 1e3:.1f} ms)"
                      + (f"; survivor {d['solo_fraction']}" if k >= 2 else ""), flush=True)
    out.write_text(json.dumps(got, indent=1))


def probe_ps_runs(out: Path, rates: list[str], workers: list[int], repeats: int,
                  layers: tuple[int, ...] | None = None, cc: str | None = None) -> None:
    """A PS's traffic without its processes (:func:`sgdnet.testbed.tcp_probe.probe_ps`: tb-mlp's
    layer bytes pushed and pulled per layer, a 2 ms sleep for compute), sync and async, every
    worker count and rate, ``repeats`` times (interleaved); ``cc``: every host's congestion
    control (default: what the namespaces inherit)."""
    from sgdnet import units
    from sgdnet.testbed import tcp_probe
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.ps_efficiency import probe_cells

    got: dict[str, list[dict]] = {}
    with EmulatedCluster(max(workers) + 1, rate=units.bandwidth(rates[0], what="rate")) as cl:
        if cc:
            cl.congestion_control(cc)
        for _ in range(repeats):
            for r in rates:
                cl.shape(units.bandwidth(r, what="rate"))
                probe_cells(cl, layers or tcp_probe.PS_LAYERS, workers, repeats=1, full=True,
                            into=got, log=lambda m: print(m, flush=True))
    out.write_text(json.dumps({"layers_B": list(layers or tcp_probe.PS_LAYERS), "compute_s": 0.002,
                               "cc": cc or "inherited", "runs": got}, indent=1))


def cells(runs: list[dict]) -> list[dict]:
    """One row per (model, scheme, workers, rate): median, min, max over the repeats."""
    by: dict[tuple, list[dict]] = {}
    for r in runs:
        by.setdefault((r["model"], r["scheme"], r["workers"], r["rate_Bps"]), []).append(r)
    out = []
    for (m, s, n, b), rows in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][3], kv[0][1],
                                                                   kv[0][2])):
        v = [r["steps_per_s"] for r in rows]
        w = [x for r in rows for x in r.get("worker_steps_per_s", [])]
        out.append({"model": m, "scheme": s, "workers": n, "rate_Bps": b,
                    "median": statistics.median(v), "min": min(v), "max": max(v),
                    "repeats": len(v), "noisy": sum(bool(r["noisy"]) for r in rows),
                    "other_cores": [round(r["other_cores"], 2) for r in rows],
                    "worker_spread": (max(w) - min(w)) / statistics.median(w) if w else None})
    return out


#: network models compared: label -> (Cluster field overrides, use the TCP probe's fields)
ALTS = {"file": ({}, False), "overlap": ({"cpu_overlap": True}, False),
        "pace": ({}, True), "overlap+pace": ({"cpu_overlap": True}, True),
        "burst": ({"burst": "file"}, False), "overlap+burst": ({"cpu_overlap": True,
                                                                "burst": "file"}, False),
        "inflight2": ({}, False), "overlap+inflight2": ({"cpu_overlap": True}, False),
        "overlap+burst+inflight2": ({"cpu_overlap": True, "burst": "file"}, False),
        "queue": ({"tcp_queue_model": "static"}, False),
        "overlap+queue": ({"cpu_overlap": True, "tcp_queue_model": "static"}, False),
        "burst+queue": ({"burst": "file", "tcp_queue_model": "static"}, False),
        "overlap+burst+queue": ({"cpu_overlap": True, "burst": "file",
                                 "tcp_queue_model": "static"}, False),
        "join": ({"tcp_queue_model": "join"}, False),
        "overlap+join": ({"cpu_overlap": True, "tcp_queue_model": "join"}, False),
        "burst+join": ({"burst": "file", "tcp_queue_model": "join"}, False),
        "overlap+burst+join": ({"cpu_overlap": True, "burst": "file",
                                "tcp_queue_model": "join"}, False),
        "ack": ({}, False), "burst+ack": ({"burst": "file"}, False),
        "join+ack": ({"tcp_queue_model": "join"}, False),
        "burst+join+ack": ({"burst": "file", "tcp_queue_model": "join"}, False)}
#: alternatives with the PS links' standing queue (``Cluster.tcp_queue``) of ``--queue F``: the
#: TCP probe's ``standing_queue_s`` at the cell's rate with k = the cell's workers; ``*queue``
#: waits it after every shared message, ``*join`` before one, behind the others' backlog
#: (``tcp_queue_model="join"``)
QUEUE_ALTS = {a for a in ALTS if "queue" in a or "join" in a}
#: alternatives with the PS hosts' ACK-path caps (``Cluster.tcp_ack_share``) of ``--ack F`` at
#: the cell's rate (the reverse-queue probe: ``scripts/probe_reverse_queue.py --out F``)
ACK_ALTS = {a for a in ALTS if a.endswith("ack")}
#: rings' variant options of an alternative: gloo's default process group runs 2 collectives
#: at once (``ProcessGroupGloo._Options()._threads``), ``allreduce(inflight=2)``
RING_OPTS = {a: {"inflight": 2} for a in ("inflight2", "overlap+inflight2",
                                          "overlap+burst+inflight2")}


def predict(src: list[Path], clusters: list[Path], alts: list[str], sim_steps: int,
            replications: int, out_json: Path | None, tcp_file: Path | None = None,
            queue_file: Path | None = None, ack_file: Path | None = None) -> int:
    """Predict every cell of ``src`` (see the module docstring) and print the table."""
    import sgdnet
    from sgdnet import Cluster, ModelProfile
    from sgdnet.workload.cluster_file import load_cluster_file

    res = json.loads(src[0].read_text())
    for more in src[1:]:  # further campaigns: their runs join the cells (profiles of the first)
        res["runs"] += json.loads(more.read_text())["runs"]
    f = clusters[0]
    cf = load_cluster_file(f)
    ratio = cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])
    tcp = json.loads(tcp_file.read_text())["tcp"] if tcp_file else res.get("tcp", {})
    queues = json.loads(queue_file.read_text())["standing_queue_s"] if queue_file else {}
    if QUEUE_ALTS & set(alts) and not queues:
        raise SystemExit("the *queue alternatives need --queue F (--probe-queue's output)")
    from sgdnet.testbed.tcp_reverse import ack_shares

    acks = ack_shares(json.loads(ack_file.read_text())) if ack_file else {}
    if ACK_ALTS & set(alts) and not acks:
        raise SystemExit("the *ack alternatives need --ack F (probe_reverse_queue.py's output)")
    rows = []
    for c in cells(res["runs"]):
        comm = c["scheme"] != "ring" or c["workers"] >= 2
        prof = ModelProfile.from_dict(res["profiles"][c["model"]])
        variant, opts = VARIANTS[c["scheme"]]
        row = dict(c, communicating=comm)
        for alt in alts:
            over, use_tcp = ALTS[alt]
            over = dict(over)
            t = tcp.get(str(round(c["rate_Bps"])))
            if use_tcp:
                if not t:
                    raise SystemExit(f"no TCP probe at {c['rate_Bps'] * 8e-6:g} Mbit/s")
                over.update(t["cluster"])
            if alt in QUEUE_ALTS and c["workers"] >= 2:
                q = queues.get(f"{round(c['rate_Bps'])}/{c['workers']}")
                if q is None:
                    raise SystemExit(f"--queue has no standing queue at {c['rate_Bps']} B/s "
                                     f"with {c['workers']} flows")
                over["tcp_queue"] = statistics.median(q)
            if alt in ACK_ALTS:
                mbit = round(c["rate_Bps"] * 8e-6)
                if mbit not in acks:
                    raise SystemExit(f"--ack has no reverse-queue cells at {mbit} Mbit/s")
                over["tcp_ack_share"] = acks[mbit]
            cl = Cluster.from_file(f, workers=c["workers"], bandwidth=c["rate_Bps"] * ratio,
                                   **over)
            vopts = {**opts, **RING_OPTS.get(alt, {})} if c["scheme"] == "ring" else opts
            p = sgdnet.predict(variant, prof, cl, steps=sim_steps, warmup=max(10, sim_steps // 10),
                               replications=replications, seed=0, **vopts)
            row[f"pred_{alt}"] = float(p.steps_per_s.mean)
            row[f"err_{alt}"] = row[f"pred_{alt}"] / c["median"] - 1
        rows.append(row)
    hdr = " | ".join(f"{a} | err" for a in alts)
    print(f"| model | Mbit/s | scheme | n | measured median (min–max) | noisy | worker spread | "
          f"{hdr} |")
    print("|---|---:|---|---:|---:|---:|---:|" + "---:|---:|" * len(alts))
    for r in rows:
        mark = "" if r["communicating"] else " *"
        vals = " | ".join(f"{r[f'pred_{a}']:.2f} | {r[f'err_{a}']:+.1%}" for a in alts)
        ws = "" if r["worker_spread"] is None else f"{r['worker_spread']:.0%}"
        print(f"| {r['model']} | {r['rate_Bps'] * 8e-6:.0f} | {r['scheme']}{mark} | {r['workers']} "
              f"| {r['median']:.2f} ({r['min']:.2f}–{r['max']:.2f}) | {r['noisy']}/{r['repeats']} "
              f"| {ws} | {vals} |")
    summary = {}
    for a in alts:
        e = [abs(r[f"err_{a}"]) for r in rows if r["communicating"]]
        summary[a] = {"cells": len(e), "mean_abs": statistics.mean(e), "max_abs": max(e)}
        by_s = {s: statistics.mean([abs(r[f"err_{a}"]) for r in rows
                                    if r["communicating"] and r["scheme"] == s]) for s in SCHEMES}
        summary[a]["by_scheme"] = by_s
        print(f"{a}: mean |err| {summary[a]['mean_abs']:.1%}, max {summary[a]['max_abs']:.1%} "
              f"over {len(e)} cells; by scheme " +
              ", ".join(f"{s} {v:.1%}" for s, v in by_s.items()))
    if out_json:
        out_json.write_text(json.dumps({"source": [str(x) for x in src], "cluster": str(f), "ratio": ratio,
                                        "rows": rows, "summary": summary}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--from", dest="src", type=Path, nargs="+")
    ap.add_argument("--cluster", type=Path, nargs="+")
    ap.add_argument("--models", default="tb-mlp,tb-tiny")
    ap.add_argument("--rates", default="75Mbit/s,150Mbit/s,250Mbit/s")
    ap.add_argument("--workers", default="1,2,3,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", default="12",
                    help="measured steps per job: one number, or per model "
                         "(tb-mlp=40,tb-tiny=200)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--alts", default="file,overlap,pace,overlap+pace")
    ap.add_argument("--tcp", type=Path, help="TCP probes (--probe's output) instead of F's")
    ap.add_argument("--queue", type=Path,
                    help="standing queues per rate and flow count (--probe-queue's output)")
    ap.add_argument("--ack", type=Path,
                    help="reverse-queue probe records (probe_reverse_queue.py --out F), for "
                         "the *ack alternatives")
    ap.add_argument("--incast", action="store_true",
                    help="with --probe-queue: k hosts streaming into one (a PS's pushes) "
                         "instead of one host's connections out")
    ap.add_argument("--probe-ps", action="store_true",
                    help="a PS's traffic without its processes, sync and async (tcp_probe.probe_ps)")
    ap.add_argument("--ps-layers", help="with --probe-ps: the pushed messages' bytes, in push "
                    "order (default tb-mlp's four layers, 5160,131584,525312,526336)")
    ap.add_argument("--cc", default=None,
                    help="with --probe-ps, --probe-queue or a campaign (--out): every host's "
                         "TCP congestion "
                         "control (bbr, reno; default: the namespaces' own)")
    ap.add_argument("--probe-duplex", action="store_true",
                    help="pushes and pulls at once, and a push alone after its peers stop")
    ap.add_argument("--probe-queue", action="store_true",
                    help="measure the standing queue with 2..max(--workers) flows at every "
                         "rate, --probe-repeats times, into --out")
    ap.add_argument("--probe", action="store_true",
                    help="only the TCP probe at every rate, --probe-repeats times, to --out")
    ap.add_argument("--probe-repeats", type=int, default=3)
    ap.add_argument("--burst", default="64KB",
                    help="with --run: every link's tbf bucket (default 64KB, as calibrated)")
    ap.add_argument("--sim-steps", type=int, default=200)
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.probe_ps:
        if a.out is None:
            ap.error("--probe-ps needs --out")
        probe_ps_runs(a.out, a.rates.split(","), [int(x) for x in a.workers.split(",")],
                      a.probe_repeats,
                      tuple(int(x) for x in a.ps_layers.split(",")) if a.ps_layers else None,
                      a.cc)
        return 0
    if a.probe_duplex:
        if a.out is None:
            ap.error("--probe-duplex needs --out")
        probe_duplex(a.out, a.rates.split(","), [int(x) for x in a.workers.split(",")])
        return 0
    if a.probe_queue:
        if a.out is None:
            ap.error("--probe-queue needs --out")
        probe_queue(a.out, a.rates.split(","), [int(x) for x in a.workers.split(",")],
                    a.probe_repeats, incast=a.incast, cc=a.cc)
        return 0
    if a.probe:
        if a.out is None:
            ap.error("--probe needs --out")
        probe(a.out, a.rates.split(","), max(int(x) for x in a.workers.split(",")),
              a.probe_repeats)
        return 0
    if a.run:
        if a.out is None:
            ap.error("--run needs --out")
        run(a.out, a.models.split(","), a.rates.split(","),
            [int(x) for x in a.workers.split(",")], a.repeats,
            steps_of(a.steps, a.models.split(",")), a.warmup, a.batch, a.cc, a.burst)
        return 0
    if a.src is None or not a.cluster:
        ap.error("give --run --out F, or --from F --cluster FILE")
    return predict(a.src, a.cluster, a.alts.split(","), a.sim_steps, a.replications, a.json,
                   a.tcp, a.queue, a.ack)


if __name__ == "__main__":
    raise SystemExit(main())
