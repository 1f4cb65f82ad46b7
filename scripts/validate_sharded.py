"""Published FSDP throughputs (issue #38), predicted from the hardware sheet and the compute model.

Reads ``tests/data/published_sharded.yaml`` (sources, setups and rows: MosaicML's MPT
benchmarks, torchtitan's Llama tables, IBM's fms-fsdp table) and predicts every row with
sgdnet from what a user has before renting, and nothing else:

1. the model's profile from its architecture (:mod:`sgdnet.workload.llms`) timed by the
   compute model on the GPU's datasheet (:mod:`sgdnet.workload.compute`: the built-in device,
   or :meth:`Device.from_datasheet`), at the row's micro-batch, sequence length and bf16, with
   the row's activation checkpointing (:func:`sgdnet.workload.llms.with_recompute`);
2. the cluster from the hardware sheet (:data:`PLANS`: GPUs per node, NVLink rate, NICs and
   transport, built with ``validate_gpu.node``), each number from a datasheet or marked assumed;
3. the variant ``fsdp`` with the framework's documented options (sharding strategy, prefetch,
   ``limit_all_gathers``, wire dtypes) and ``accumulate`` = the row's gradient accumulation.

Nothing is fitted, neither to a multi-GPU number nor to a one-GPU one. Besides the
prediction, every row prints the compute model's own figure (``compute only``: the step with
free communication), the reference that plays perfect scaling's part in
``scripts/validate_gpu.py``. ``--markdown`` prints the table for ``docs/validation.md``.

    PYTHONPATH=. python scripts/validate_sharded.py [--markdown] [--only ID] [--jobs N]
        [--max-gpus N] [--granularity fine|coarse|auto] [--set OPTION=VALUE] [--save rows.json]
        [--dry-run]

``--only`` takes a setup id, a source id or a model name (comma-separated for several).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published_sharded.yaml"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_gpu import DGXA100, node  # noqa: E402  (the hardware sheets of issue #36)


def load(path: Path = DATA) -> dict:
    """The published collection: ``sources``, ``setups`` (by id) and ``rows``."""
    d = yaml.safe_load(path.read_text(encoding="utf-8"))
    d["setups_by_id"] = {s["id"]: s for s in d["setups"]}
    d["sources_by_id"] = {s["id"]: s for s in d["sources"]}
    return d


def _grand_teton_h100() -> Any:
    """Meta's Grand Teton H100: 96 GB HBM2e at 2.4 TB/s (torchtitan's benchmark page); its
    tensor peak at 500 W is 'between SXM and NVL' and not stated, so the SXM5 datasheet's dense
    figures (989.4 BF16, 67 FP32, 133.8 BF16 on CUDA cores) are used: an upper bound, as
    torchtitan's own MFU uses."""
    from sgdnet.workload.compute import Device

    return Device.from_datasheet("H100-96GB-HBM2e", fp32_tflops=67, mem_bw_gbs=2400,
                                 bf16_tensor_tflops=989.4, bf16_tflops=133.8,
                                 tf32_tensor_tflops=494.7,
                                 source="torchtitan benchmarks/llama3_h100_202412_torchtitan.md "
                                        "(2.4 TB/s HBM2e); H100 SXM5 datasheet dense peaks")


@dataclass(frozen=True)
class Plan:
    """How one setup is predicted: the cluster of ``n`` GPUs, the device of the compute model,
    the transport, and the ``fsdp`` options the framework's defaults imply."""

    cluster: Callable[[int], Any]
    device: str | Callable[[], Any]
    transport: str | None
    options: dict = field(default_factory=dict)
    note: str = ""
    compute_capability: int = 80  # NCCL's channel search depends on it (A100 80, H100 90)


# --- hardware sheets ---------------------------------------------------------------------
# HGX/DGX A100: NVLink 3 via NVSwitch, 300 GB/s per GPU per direction; 8 x 200 Gb/s NICs
# (DGX A100 datasheet). MosaicML's "1600 Gbps node-node interconnect" = 8 x 200 Gb/s: DGXA100.
# HGX H100: NVLink 4 via NVSwitch, 450 GB/s per GPU per direction (H100 datasheet: 900 GB/s
# bidirectional); 8 x 400 Gb/s ConnectX-7 (DGX H100 datasheet).
HGXH100 = node(8, "nvlink", "450GB/s", "400Gbps", nics=8)
# IBM's "A100 80G 128 GPUs with 400Gbps" / "H100 96 GPUs with 800 Gbps": read as the node's
# aggregate network rate, one NIC (the README does not say per node or per GPU).
IBM_A100 = node(8, "nvlink", "300GB/s", "400Gbps", nics=1)
IBM_H100 = node(8, "nvlink", "450GB/s", "800Gbps", nics=1)

# Composer FSDPConfig defaults (docs.mosaicml.com composer.utils.FSDPConfig): BACKWARD_POST,
# forward_prefetch False, limit_all_gathers True; one FSDP unit per transformer block.
COMPOSER = {"backward_prefetch": "post", "forward_prefetch": False, "limit_all_gathers": True,
            "wrap": "block"}
# PyTorch FSDP1 defaults (torch.distributed.fsdp.FullyShardedDataParallel): BACKWARD_PRE,
# forward_prefetch False; fms-fsdp passes limit_all_gathers=True (main_training.py).
FSDP1 = {"backward_prefetch": "pre", "forward_prefetch": False, "limit_all_gathers": True,
         "wrap": "block"}
# FSDP2 fully_shard: implicit forward prefetch, explicit backward prefetch of the next block
# in reverse order (PyTorch #128884: "reasonable defaults"), at most two all-gathers' outputs
# alive: the FSDP1 options that describe it.
FSDP2 = {"backward_prefetch": "pre", "forward_prefetch": False, "limit_all_gathers": True,
         "wrap": "block"}

PLANS: dict[str, Plan] = {
    "mosaic-a100-40gb-pure": Plan(DGXA100, "A100-40GB", "roce", COMPOSER),
    "mosaic-a100-80gb-pure": Plan(DGXA100, "A100", "roce", COMPOSER),
    "mosaic-h100-80gb-default": Plan(HGXH100, "H100", "rdma", COMPOSER,
                                     "network assumed (8 x 400 Gb/s InfiniBand)", 90),
    "torchtitan-a100-64": Plan(DGXA100, "A100", "rdma", FSDP2,
                               "network assumed (8 x 200 Gb/s)"),
    "torchtitan-h100-grandteton": Plan(HGXH100, _grand_teton_h100, "rdma", FSDP2,
                                       "peak FLOP/s at 500 W unknown (SXM5 upper bound)", 90),
    "ibm-a100-128": Plan(IBM_A100, "A100", "rdma", FSDP1, "400 Gb/s read as per node"),
    "ibm-h100-96": Plan(IBM_H100, "H100", "rdma", FSDP1, "800 Gb/s read as per node", 90),
}


def device_of(plan: Plan) -> Any:
    """The compute model's device of a plan."""
    from sgdnet.workload.compute import get_device

    return get_device(plan.device() if callable(plan.device) else plan.device)


def profile(row: dict, plan: Plan) -> Any:
    """The row's per-GPU micro-batch profile: the architecture timed by the compute model on
    the plan's device, bf16, AdamW, with the row's activation checkpointing."""
    from sgdnet.workload import llms

    build = llms.mpt_config if row["model"].startswith("mpt_") else llms.llama_config
    return build(row["model"], seq_len=int(row["seq_len"]), batch_size=int(row["micro_batch"]),
                 device=device_of(plan), precision="bf16", optimizer="adamw",
                 recompute=row["recompute"])


def options(row: dict, plan: Plan, setup: dict) -> tuple[dict, list[str]]:
    """The ``fsdp`` options of a row, and the notes on what the variant cannot take.

    Wire dtypes: ``dtype`` is the setup's parameter (all-gather) dtype; a reduce-scatter dtype
    that differs is passed as ``reduce_dtype`` when the variant has that option, else noted.
    """
    from sgdnet.variants import get

    spec = get("fsdp")
    accepted = set(spec.option_names())
    want = dict(plan.options, sharding=row["sharding"], dtype=setup["param_dtype"],
                optimizer="adamw")
    if setup["reduce_dtype"] != setup["param_dtype"]:
        want["reduce_dtype"] = setup["reduce_dtype"]
    if int(row["grad_accum"]) > 1:
        want["accumulate"] = int(row["grad_accum"])
    notes = [f"{k}={v!r} not an option of fsdp (left out)" for k, v in want.items()
             if k not in accepted and k != "accumulate"]
    return {k: v for k, v in want.items() if k in accepted or k == "accumulate"}, notes


def compute_only(row: dict, plan: Plan) -> float:
    """Tokens/s per GPU of the compute model alone: the micro-batches' forward, backward and
    loss and the optimizer step on a 1/N shard, communication free."""
    p = profile(row, plan)
    k = int(row["grad_accum"])
    step = k * (math.fsum(la.forward_s + la.backward_s for la in p.layers) + p.loss_s)
    upd = math.fsum(t.update_s for la in p.layers for t in (la.tensors or ()))
    shard = int(row["gpus"]) if row["sharding"] in ("full", "shard_grad_op") else min(
        8, int(row["gpus"])) if row["sharding"] == "hybrid" else 1
    step += upd / shard
    return k * int(row["micro_batch"]) * int(row["seq_len"]) / step


def granularity_of(row: dict, choice: str) -> str:
    """``auto``: fine nets up to 128 GPUs (a 128-GPU Llama-3-8B net: ~95 s and 3 GB here),
    coarse above (no overlap of compute and communication: a lower bound)."""
    if choice != "auto":
        return choice
    return "fine" if int(row["gpus"]) <= 128 else "coarse"


def predict_row(row: dict, plan: Plan, setup: dict, steps: int = 6,
                granularity: str = "auto", overrides: dict | None = None
                ) -> tuple[float, list[str]]:
    """Predicted tokens/s per GPU of ``row`` and the notes of what was left out.

    The collectives are NCCL rings (NCCL's all-gather and reduce-scatter have no tree
    algorithm) over as many channels as NCCL 2.18 sets up on the node
    (:func:`sgdnet.workload.nccl.nccl_default_channels`: 16 on several 8-GPU nodes with 8 NICs,
    two rings per NIC). ``overrides``: options that replace the plan's (``--set``).
    """
    from sgdnet import predict
    from sgdnet.prediction import apply_framework
    from sgdnet.workload.nccl import nccl_default_channels, nccl_inputs

    # check_memory=False: the memory model (sgdnet.workload.memory) counts every activation of
    # the profile and does not see activation checkpointing, so it refuses rows the sources ran

    prof = profile(row, plan)
    opts, notes = options(row, plan, setup)
    n = int(row["gpus"])
    variant, cl, opts = apply_framework("fsdp", plan.cluster(n), opts, framework=None,
                                        transport=plan.transport)
    opts.setdefault("algorithm", "ring")
    opts.setdefault("channels", nccl_default_channels(
        **nccl_inputs(cl), compute_capability=plan.compute_capability))
    opts.update(overrides or {})
    p = predict(variant, prof, cl, granularity=granularity_of(row, granularity), steps=steps,
                warmup=2, replications=1, seed=0, parallel=False, samples=False,
                transport=None, check_memory=False, **opts)
    return float(p.samples_per_s.mean) * int(row["seq_len"]) / n, notes


def _selected(row: dict, setups: dict, only: set[str] | None, max_gpus: int | None) -> bool:
    if row["setup"] not in PLANS or row["recompute"] is None:
        return False
    if max_gpus is not None and int(row["gpus"]) > max_gpus:
        return False
    keys = {row["setup"], setups[row["setup"]]["source"], row["model"]}
    return only is None or bool(keys & only)


def _one(args: tuple) -> tuple[int, float, float, float, str]:
    i, row, setup, steps, gran, dry, overrides = args
    t = time.perf_counter()
    plan = PLANS[row["setup"]]
    err = ""
    base = pred = math.nan
    try:
        base = compute_only(row, plan)
        if not dry:
            pred, notes = predict_row(row, plan, setup, steps, gran, overrides)
            err = "; ".join(notes)
    except Exception as e:  # reported, not hidden: the row prints its error
        err = f"{type(e).__name__}: {e}"
    return i, pred, base, time.perf_counter() - t, err


def run(data: dict, only: set[str] | None = None, jobs: int = 1, steps: int = 6,
        granularity: str = "auto", max_gpus: int | None = None,
        dry: bool = False, overrides: dict | None = None) -> list[dict]:
    """Predict every selected row; returns the rows with ``predicted``, ``compute_only`` and
    their errors against the published throughput."""
    sb = data["setups_by_id"]
    todo = [(i, r, sb[r["setup"]], steps, granularity, dry, overrides)
            for i, r in enumerate(data["rows"]) if _selected(r, sb, only, max_gpus)]
    done: dict[int, tuple] = {}

    def report(r: tuple) -> None:
        row = data["rows"][r[0]]
        done[r[0]] = r
        print(f"  {row['setup']:28s} {row['model']:11s} n={row['gpus']:4d} "
              f"pred {100 * (r[1] / row['throughput'] - 1):+6.1f}% compute-only "
              f"{100 * (r[2] / row['throughput'] - 1):+6.1f}% ({r[3]:.1f} s) {r[4]}",
              file=sys.stderr, flush=True)

    if jobs > 1:
        with ProcessPoolExecutor(jobs) as ex:
            for f in as_completed([ex.submit(_one, t) for t in todo]):
                report(f.result())
    else:
        for t in todo:
            report(_one(t))
    out = []
    for i, row, *_ in todo:
        _, pred, base, secs, err = done[i]
        r = dict(row)
        r.update(predicted=pred, compute_only=base, error=pred / row["throughput"] - 1,
                 compute_only_error=base / row["throughput"] - 1, seconds=secs, failure=err,
                 source=sb[row["setup"]]["source"])
        out.append(r)
    _scaling(out)
    return out


def _scaling(rows: list[dict]) -> None:
    """``scaling_error`` of every multi-node row whose one-node row (same setup, model and
    sequence, 8 GPUs) was predicted in the same run: the predicted ratio to the one-node row
    against the published one, ``(pred / pred_8) / (pub / pub_8) - 1``. The compute model's
    error, common to both rows, cancels; what is left is the scaling, i.e. the communication."""
    one = {(r["setup"], r["model"], r["seq_len"]): r for r in rows if int(r["gpus"]) == 8}
    for r in rows:
        o = one.get((r["setup"], r["model"], r["seq_len"]))
        r["scaling_error"] = math.nan
        if o is not None and r is not o and not math.isnan(o["predicted"]):
            r["scaling_error"] = ((r["predicted"] / o["predicted"])
                                  / (r["throughput"] / o["throughput"]) - 1)


def summary(rows: list[dict]) -> list[tuple[str, int, int, float, float, int, float]]:
    """Per source and overall: (name, rows predicted, rows failed, mean |err|, max |err|, rows
    within 15 %, compute-only mean |err|)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["source"], []).append(r)
    groups["all"] = rows
    out = []
    for name, rs in groups.items():
        ok = [r for r in rs if not math.isnan(r["error"])]
        e = [abs(r["error"]) for r in ok]
        c = [abs(r["compute_only_error"]) for r in rs if not math.isnan(r["compute_only_error"])]
        out.append((name, len(ok), len(rs) - len(ok), sum(e) / max(len(e), 1),
                    max(e, default=math.nan), sum(x <= 0.15 for x in e),
                    sum(c) / max(len(c), 1)))
    return out


def _rc(v: Any) -> str:
    return {"none": "no", "full": "full", "op": "op"}.get(v, f"every {v}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default=None, help="setup ids, source ids or models, comma-separated")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6, help="steps per worker (deterministic nets)")
    ap.add_argument("--granularity", default="auto", choices=("auto", "fine", "coarse"))
    ap.add_argument("--max-gpus", type=int, default=None)
    ap.add_argument("--dry-run", action="store_true",
                    help="compute-only figures, no net (works before the fsdp variant exists)")
    ap.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                    help="an fsdp option replacing the plans' (e.g. backward_prefetch=pre); "
                         "repeatable; the value is read as YAML")
    ap.add_argument("--save", default=None, help="also write the rows as JSON to this file")
    ap.add_argument("--data", default=str(DATA))
    a = ap.parse_args(argv)
    from sgdnet.variants import names

    if not a.dry_run and "fsdp" not in names():
        print("the fsdp variant is not registered (sgdnet.variants.names() has no 'fsdp'); "
              "run with --dry-run for the compute model's figures", file=sys.stderr)
        return 2
    data = load(Path(a.data))
    only = None if a.only is None else {s.strip() for s in a.only.split(",") if s.strip()}
    overrides = {}
    for kv in a.set:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            ap.error(f"--set {kv!r}: use OPTION=VALUE")
        overrides[k.strip()] = yaml.safe_load(v)
    rows = run(data, only, a.jobs, a.steps, a.granularity, a.max_gpus, a.dry_run, overrides)
    if a.markdown:
        print("| source | setup | model | seq | GPUs | micro-batch x accum | sharding | AC | "
              "published tok/s/GPU | predicted | error | compute only | its error | "
              "scaling error vs 8 GPUs |")
        print("|---|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if a.markdown:
            print(f"| {r['source']} | {r['setup']} | {r['model']} | {r['seq_len']} | {r['gpus']} | "
                  f"{r['micro_batch']} x {r['grad_accum']} | {r['sharding']} | "
                  f"{_rc(r['recompute'])} | {r['throughput']:g} | {r['predicted']:.0f} | "
                  f"{100 * r['error']:+.1f}% | {r['compute_only']:.0f} | "
                  f"{100 * r['compute_only_error']:+.1f}% | "
                  + ("" if math.isnan(r["scaling_error"]) else f"{100 * r['scaling_error']:+.1f}%")
                  + " |")
        else:
            print(f"{r['setup']:28s} {r['model']:11s} n={r['gpus']:4d} pub={r['throughput']:8.0f} "
                  f"pred={r['predicted']:8.0f} err={100 * r['error']:+6.1f}% "
                  f"compute-only={r['compute_only']:8.0f} ({100 * r['compute_only_error']:+6.1f}%)"
                  f" ({r['seconds']:.1f} s) {r['failure']}", flush=True)
    print()
    print("| source | rows predicted | failed | mean abs error | max abs error | within 15 % | "
          "compute only: mean abs error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n, nf, me, mx, w, cm in summary(rows):
        print(f"| {name} | {n} | {nf} | {100 * me:.1f}% | {100 * mx:.1f}% | {w} | "
              f"{100 * cm:.1f}% |")
    if a.save is not None:
        Path(a.save).write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
