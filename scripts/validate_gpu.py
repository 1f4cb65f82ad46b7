"""Published multi-GPU training throughputs, predicted from what a user has before renting.

Reads ``tests/data/published_gpu.yaml`` (sources, setups and rows, each row with the one-GPU
throughput of the same setup from the same source) and predicts every row with sgdnet:

1. the built-in profile of the model at the row's batch per GPU, anchored on the published
   one-GPU rate (:func:`sgdnet.anchor.anchor_profile`: the one-GPU prediction of the same
   variant, options and node equals it);
2. the cluster from the hardware sheet (:data:`SYSTEMS`: GPUs per node, NVLink / PCIe rates,
   NICs, transport), each number from a datasheet or vendor page named beside it;
3. the framework's documented defaults (:mod:`sgdnet.workload.frameworks`).

Nothing is fitted to a multi-GPU number. The script prints one line per row and a summary per
source against perfect scaling (``gpus x one-GPU rate``), or a markdown table
(``--markdown``) for ``docs/validation.md``.

    PYTHONPATH=. python scripts/validate_gpu.py [--markdown] [--only SETUP] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published_gpu.yaml"


def load(path: Path = DATA) -> dict:
    """The published collection: ``sources``, ``setups`` (by id) and ``rows``."""
    d = yaml.safe_load(path.read_text(encoding="utf-8"))
    d["setups_by_id"] = {s["id"]: s for s in d["setups"]}
    d["sources_by_id"] = {s["id"]: s for s in d["sources"]}
    return d


def comm_bound(row: dict) -> bool:
    """More than 15 % below perfect scaling (the issue's definition)."""
    return row["throughput"] < 0.85 * row["gpus"] * row["single_gpu"]


@dataclass(frozen=True)
class Plan:
    """How one setup is predicted: a framework (or a variant), its explicit options, the
    transport, and the cluster of ``n`` GPUs from the hardware sheet."""

    cluster: Callable[[int], Any]
    framework: str | None = None
    variant: str | None = None
    options: dict = field(default_factory=dict)
    transport: str | None = None
    granularity: str = "fine"
    ps_tasks: bool = False  # shards = the row's ps_tasks=N (TensorFlow's PS task count)
    grad_dtype: str | None = None  # gradients sent in this dtype (retime(grad_dtype=))
    note: str = ""


def _ps_tasks(row: dict) -> int | None:
    m = re.search(r"ps_tasks=(\d+)", row.get("notes") or "")
    return int(m.group(1)) if m else None


def node(gpn: int, intra: str, intra_bw: str | float, nic: str | float, *, nics: int = 1,
         latency: str = "50us", placement: str = "dedicated", **topo: Any) -> Callable:
    """A cluster of ``n // gpn`` alike nodes (``n`` GPUs; fewer GPUs than a node: one node
    of ``n``)."""
    from sgdnet import Cluster, Topology

    def make(n: int) -> Any:
        g = min(gpn, n)
        kw = dict(topo)
        if kw.get("pcie_switch_gpus") and g % kw["pcie_switch_gpus"]:
            kw.pop("pcie_switch_gpus")
        t = Topology(gpus_per_node=g, intra=intra, intra_bandwidth=intra_bw,
                     nics_per_node=min(nics, g), nic_bandwidth=nic, **kw)
        return Cluster(workers=n, latency=latency, topology=t, ps_placement=placement,
                       ps_shards=max(1, n // g) if placement == "colocated" else 1)

    return make


# --- hardware sheets ---------------------------------------------------------------------
# PCIe 3.0 x16: 15.75 GB/s raw per direction; 12 GB/s is what NCCL's topology model assumes for
# a Gen3 x16 link (NVIDIA/nccl src/graph/topo.h, PCI_BW) and what CUDA's bandwidthTest reaches.
PCIE3 = 12e9
# AWS p2.8xlarge: 8 K80 dies on 4 boards (each board's two GK210 behind its own PCIe switch),
# 10 Gb/s ENA network (AWS P2 instance table). Sockets stage through host memory (no GPUDirect).
P28 = node(8, "pcie", PCIE3, "10Gbps", pcie_switch_gpus=2, pcie_uplink_bandwidth=PCIE3,
           gpudirect=False, placement="colocated")
# AWS p2.xlarge: one K80 die, "High" network, 1.25 Gb/s in the AWS P2 table.
P2X = node(1, "pcie", PCIE3, "1.25Gbps", placement="colocated")
# Piz Daint XC50 node: one P100 (PCIe), Cray Aries NIC; TF 1.1's gRPC runs over TCP/IP on
# Aries. Aries' injection bandwidth per node: ~10 GB/s (Cray XC series network white paper).
DAINT = node(1, "pcie", PCIE3, "10GB/s", placement="colocated", latency="2us")
# Uber's Horovod servers: 4 Pascal GPUs (PCIe) per server, one 25 Gb/s RoCE or 40 Gb/s link.
UBER25 = node(4, "pcie", PCIE3, "25Gbps", placement="colocated")
UBER40 = node(4, "pcie", PCIE3, "40Gbps", placement="colocated")
# Lambda's 8x RTX 2080 Ti box: PCIe 3.0 x16 per GPU, no GPU peer-to-peer (NCCL through host
# memory), GPU pairs behind PCIe switches (the log's bus ids), two Xeon Gold 6230 sockets (UPI).
LAMBDA = node(8, "pcie", PCIE3, "10Gbps", pcie_switch_gpus=2, pcie_uplink_bandwidth=PCIE3,
              peer_to_peer=False)
# DGX A100: 8 A100 SXM4, NVLink 3 through NVSwitch, 12 links x 25 GB/s = 300 GB/s per direction
# per GPU (DGX A100 datasheet: 600 GB/s bidirectional); 8 HDR 200 Gb/s NICs.
DGXA100 = node(8, "nvlink", "300GB/s", "200Gbps", nics=8)
# DGX-1 (V100): NVLink 2 hybrid cube-mesh, 6 links x 25 GB/s per GPU per direction (DGX-1
# datasheet, 300 GB/s bidirectional), 4 EDR 100 Gb/s NICs.
DGX1V = node(8, "nvlink", "150GB/s", "100Gbps", nics=4)
# gh horovod#416: 8 V100 PCIe per server, 4 per PCIe switch on one x16 root port each, two
# CPUs over QPI, one ConnectX-3 Pro 40 Gb/s RoCE NIC with GPUDirect RDMA.
GH416 = node(8, "pcie", PCIE3, "40Gbps", pcie_switch_gpus=4, pcie_uplink_bandwidth=PCIE3)
# AWS p3.16xlarge: 8 V100 SXM2, NVLink 2 (300 GB/s aggregate per GPU in AWS's post, i.e.
# 150 GB/s per direction), GPU pairs behind PCIe switches, one 25 Gb/s ENA NIC (sockets).
# DGX-1 (P100): NVLink 1 hybrid cube-mesh, 4 links x 20 GB/s per GPU per direction (DGX-1
# datasheet), GPU pairs behind PCIe switches with 4 EDR NICs.
DGX1P = node(8, "nvlink", "80GB/s", "100Gbps", nics=4)
P316 = node(8, "nvlink", "150GB/s", "25Gbps", pcie_switch_gpus=2, pcie_uplink_bandwidth=PCIE3,
            gpudirect=False)

# Horovod before 0.21 (the 2017-2019 runs): HOROVOD_FUSION_THRESHOLD 64 MiB, HOROVOD_CYCLE_TIME
# 5 ms (horovod CHANGELOG, #2468 raised them to 128 MiB / 1 ms).
HVD_OLD = {"bucket_bytes": 64 * 2**20, "cycle_time": 5e-3}
# TensorFlow's replicated mode on one node (tf_cnn_benchmarks --variable_update=replicated
# --all_reduce_spec=nccl, gradient_repacking=0): one NCCL all-reduce per variable, started when
# that variable's gradient is ready on every tower.
# Lambda's runs use XLA auto-clustering (the log folder's "_XLA_"): the backward pass is
# compiled into clusters whose outputs, the gradients, appear when the cluster ends, and the
# NCCL all-reduces (not clustered) start after it, so they do not overlap the backward.
TF_NCCL = {"comm_granularity": "tensor", "bucket_bytes": 0.0, "algorithm": "nccl",
           "channels": "auto", "overlap": False}

SYSTEMS: dict[str, Plan] = {
    "tf-aws-p28-k80-dr": Plan(P28, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-p28-dr-syn": Plan(P28, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-p28-dr-real": Plan(P28, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-p2x-ps-syn": Plan(P2X, "tf-ps", ps_tasks=True, transport="tcp"),
    "bug-p2x-ps-real": Plan(P2X, "tf-ps", ps_tasks=True, transport="tcp"),
    "bug-p2x-dr-syn": Plan(P2X, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-p2x-dr-real": Plan(P2X, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-daint-ps-syn": Plan(DAINT, "tf-ps", ps_tasks=True, transport="tcp"),
    "bug-daint-ps-real": Plan(DAINT, "tf-ps", ps_tasks=True, transport="tcp"),
    "bug-daint-dr-syn": Plan(DAINT, "tf-replicated", ps_tasks=True, transport="tcp"),
    "bug-daint-dr-real": Plan(DAINT, "tf-replicated", ps_tasks=True, transport="tcp"),
    "uber16-dtf-ps": Plan(UBER25, "tf-ps", transport="tcp"),
    "uber16-dtf-ps-cpu": Plan(UBER25, "tf-ps", transport="tcp"),
    "uber64-dtf-ps": Plan(UBER40, "tf-ps", transport="tcp"),
    "uber64-dtf-ps-cpu": Plan(UBER40, "tf-ps", transport="tcp"),
    "uber16-hvd-tcp-cpu": Plan(UBER25, "horovod", options={**HVD_OLD, "algorithm": "ring",
                                                            "channels": 1}, transport="tcp"),
    "uber16-hvd-rdma-cpu": Plan(UBER25, "horovod", options={**HVD_OLD, "algorithm": "ring",
                                                             "channels": 1}, transport="roce"),
    "uber64-hvd-tcp-cpu": Plan(UBER40, "horovod", options={**HVD_OLD, "algorithm": "ring",
                                                            "channels": 1}, transport="tcp"),
    "uber16-hvd-tcp-nccl": Plan(UBER25, "horovod", options=HVD_OLD, transport="tcp"),
    "uber16-hvd-rdma-nccl": Plan(UBER25, "horovod", options=HVD_OLD, transport="roce"),
    "uber64-hvd-tcp-nccl": Plan(UBER40, "horovod", options=HVD_OLD, transport="tcp"),
    "lambda-2080ti-fp32": Plan(LAMBDA, variant="allreduce", options=TF_NCCL),
    # --use_fp16 with tf_cnn_benchmarks' default --compact_gradient_transfer: fp16 gradients
    "lambda-2080ti-fp16": Plan(LAMBDA, variant="allreduce", options=TF_NCCL, grad_dtype="fp16"),
    "dle-rn50-dgxa100-tf32": Plan(DGXA100, "ddp"),
    "dle-rn50-dgxa100-amp": Plan(DGXA100, "ddp"),
    "dle-rn50-dgx1-16g-fp32": Plan(DGX1V, "ddp"),
    "dle-rn50-dgx1-16g-amp": Plan(DGX1V, "ddp"),
    "dle-rn50-dgx1-32g-fp32": Plan(DGX1V, "ddp"),
    "dle-rn50-dgx1-32g-amp": Plan(DGX1V, "ddp"),
    "dle-bert-squad-dgxa100-tf32": Plan(DGXA100, "ddp"),
    "dle-bert-squad-dgxa100-amp": Plan(DGXA100, "ddp"),
    "dle-bert-squad-dgx1-32g-fp32": Plan(DGX1V, "ddp"),
    "dle-bert-squad-dgx1-32g-amp": Plan(DGX1V, "ddp"),
    # held out (tests/data/published_gpu_heldout.yaml): TF 1.x replicated + NCCL without XLA
    "tf-dgx1-p100-replicated-nccl": Plan(DGX1P, variant="allreduce",
                                         options={**TF_NCCL, "overlap": True}),
    "gh416-v100-roce40-gdr": Plan(GH416, "horovod", options=HVD_OLD, transport="roce"),
    "awsdlm-p3-16xl-hvd": Plan(P316, "horovod", options=HVD_OLD, transport="tcp"),
}


def inputs(row: dict, plan: Plan) -> tuple[str, Any, dict]:
    """``(variant, cluster, options)`` of ``row``: the framework's defaults, the plan's options
    and the transport applied (:func:`sgdnet.prediction.apply_framework`)."""
    from sgdnet.prediction import apply_framework

    opts = dict(plan.options)
    cl = plan.cluster(int(row["gpus"]))
    if plan.ps_tasks:
        k = _ps_tasks(row) or cl.topology.nodes(cl.workers)
        cl = cl.replace(ps_shards=min(k, cl.topology.nodes(cl.workers)))
    return apply_framework(plan.variant, cl, opts, framework=plan.framework,
                           transport=plan.transport)


def predict_row(row: dict, plan: Plan, steps: int = 60) -> float:
    """Predicted samples/s of ``row`` (anchored on its one-GPU rate)."""
    from sgdnet import models, predict
    from sgdnet.anchor import anchor_profile
    from sgdnet.workload.compute import retime

    prof = models.load(row["model"])
    if plan.grad_dtype is not None:
        prof = retime(prof, grad_dtype=plan.grad_dtype)
    variant, cl, opts = inputs(row, plan)
    a = anchor_profile(variant, prof, cl, float(row["single_gpu"]),
                       batch_size=int(row["batch_per_gpu"]), granularity=plan.granularity,
                       **opts)
    p = predict(variant, a.profile, cl, granularity=plan.granularity, steps=steps,
                warmup=10, replications=1, seed=0, parallel=False, samples=False,
                transport=None, **opts)
    return float(p.samples_per_s.mean)


def _one(args: tuple[int, dict]) -> tuple[int, float, float, str]:
    i, row = args
    t = time.perf_counter()
    try:
        pred = predict_row(row, SYSTEMS[row["setup"]])
        err = ""
    except Exception as e:  # reported, not hidden: the row prints its error
        pred, err = math.nan, f"{type(e).__name__}: {e}"
    return i, pred, time.perf_counter() - t, err


def _progress(row: dict, r: tuple) -> None:
    _, pred, secs, err = r
    print(f"  {row['setup']:30s} {row['model']:12s} n={row['gpus']:4d} "
          f"{100 * (pred / row['throughput'] - 1):+6.1f}% ({secs:.1f} s) {err}",
          file=sys.stderr, flush=True)


def run(data: dict, only: str | None = None, jobs: int = 1) -> list[dict]:
    """Predict every row with a plan; returns the rows with ``predicted`` and ``error``."""
    todo = [(i, r) for i, r in enumerate(data["rows"])
            if r["setup"] in SYSTEMS and (only is None or r["setup"] == only)]
    out = []
    done: dict[int, tuple] = {}
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as ex:
            futs = [ex.submit(_one, t) for t in todo]
            for f in as_completed(futs):
                r = f.result()
                done[r[0]] = r
                _progress(data["rows"][r[0]], r)
    else:
        for t in todo:
            r = _one(t)
            done[r[0]] = r
            _progress(t[1], r)
    res = [done[i] for i, _ in todo]
    for (_i, row), (_, pred, secs, err) in zip(todo, res):
        r = dict(row)
        r["predicted"] = pred
        r["error"] = pred / row["throughput"] - 1
        r["perfect_error"] = row["gpus"] * row["single_gpu"] / row["throughput"] - 1
        r["seconds"] = secs
        r["failure"] = err
        r["source"] = data["setups_by_id"][row["setup"]]["source"]
        out.append(r)
    return out


def summary(rows: list[dict]) -> list[tuple[str, int, int, int, float, float, float, float]]:
    """Per source and overall, over the rows that were predicted: (name, rows predicted,
    rows not predicted, comm-bound rows, mean |err|, max |err|, and perfect scaling's mean and
    max |err| on the same rows)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["source"], []).append(r)
    groups["all"] = rows
    out = []
    for name, rs in groups.items():
        ok = [r for r in rs if not math.isnan(r["error"])]
        e = [abs(r["error"]) for r in ok]
        p = [abs(r["perfect_error"]) for r in ok]
        out.append((name, len(ok), len(rs) - len(ok), sum(comm_bound(r) for r in ok),
                    sum(e) / max(len(e), 1), max(e, default=math.nan),
                    sum(p) / max(len(p), 1), max(p, default=math.nan)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default=None, help="one setup id")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--save", default=None, help="also write the rows as JSON to this file")
    ap.add_argument("--data", default=str(DATA), help="the collection to predict (default: "
                    "tests/data/published_gpu.yaml; the held-out set: "
                    "tests/data/published_gpu_heldout.yaml)")
    a = ap.parse_args(argv)
    data = load(Path(a.data))
    rows = run(data, a.only, a.jobs)
    if a.markdown:
        print("| source | setup | model | batch/GPU | GPUs | nodes | one GPU | published | "
              "n x one GPU | predicted | error | perfect scaling's error |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if a.markdown:
            print(f"| {r['source']} | {r['setup']} | {r['model']} | {r['batch_per_gpu']} | "
                  f"{r['gpus']} | {r['nodes']} | {r['single_gpu']:g} | {r['throughput']:g} | "
                  f"{r['gpus'] * r['single_gpu']:.0f} | {r['predicted']:.0f} | "
                  f"{100 * r['error']:+.1f}% | {100 * r['perfect_error']:+.1f}% |")
        else:
            print(f"{r['setup']:34s} {r['model']:12s} n={r['gpus']:4d} pub={r['throughput']:9.1f} "
                  f"pred={r['predicted']:9.1f} err={100 * r['error']:+6.1f}% "
                  f"perfect={100 * r['perfect_error']:+6.1f}% ({r['seconds']:.1f} s) "
                  f"{r['failure']}", flush=True)
    print()
    print("| source | rows predicted | not predicted | comm-bound | mean abs error | "
          "max abs error | perfect scaling mean | perfect scaling max |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n, nf, cb, me, mx, pm, px in summary(rows):
        print(f"| {name} | {n} | {nf} | {cb} | {100 * me:.1f}% | {100 * mx:.1f}% | "
              f"{100 * pm:.1f}% | {100 * px:.1f}% |")
    if a.save is not None:
        Path(a.save).write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
