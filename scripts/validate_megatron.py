"""Predict Megatron-LM's weak-scaling table (Narayanan et al., "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM", SC'21, arXiv:2104.04473, Table 1: GPT models
of 1.7 B to 1 T parameters on up to 3,072 A100s of NVIDIA's Selene, achieved teraFLOP/s per
GPU) with the ``pipeline`` variant, from the hardware's datasheet rates and the compute
model's one efficiency (:data:`sgdnet.workload.compute.EFFICIENCY`, fixed beforehand on BERT;
not refitted per row).

Setup stated by the paper for every row: vocabulary 51,200, sequence 2,048, mixed precision
(fp16), activation recomputation, the row's tensor- and pipeline-parallel sizes, data
parallelism over the rest, the row's global batch; the FLOPs of eq. (3). Assumed here (not in
the table): micro-batch size 1, the 1F1B schedule (non-interleaved), Selene's DGX A100 nodes as
NVIDIA describes them (8 A100 80 GB on NVSwitch, 300 GB/s per GPU and direction; 8 HDR
InfiniBand NICs of 200 Gb/s per node for compute; a non-blocking fat tree taken as one
switch). Coarse nets (the schedule's passes with closed-form communication) by default; the
rows' achieved TFLOP/s are the paper's.

Usage::

    python scripts/validate_megatron.py [--rows 1.7B,3.6B,...] [--granularity coarse]
"""

from __future__ import annotations

import argparse
import sys
import time

import sgdnet
from sgdnet.pipeline_metrics import pipeline_report
from sgdnet.workload import Cluster
from sgdnet.workload.topology import Topology
from sgdnet.workload.transformers import gpt2

#: Narayanan et al. 2021, Table 1: (name, heads, hidden, layers, TP, PP, GPUs, batch,
#: achieved teraFLOP/s per GPU).
TABLE = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]

SELENE = Topology(gpus_per_node=8, intra="nvlink", intra_bandwidth="300GB/s",
                  intra_latency="2us", nics_per_node=8, nic_bandwidth="200Gbps")


def predict_row(row, granularity: str = "coarse", micro_batch: int = 1):
    """The pipeline prediction of one row and its report."""
    name, heads, hidden, layers, tp, pp, gpus, batch, _ = row
    prof = gpt2(f"gpt-{name}", n_layers=layers, d_model=hidden, n_heads=heads, seq_len=2048,
                vocab=51200, n_ctx=2048, batch_size=micro_batch, device="A100",
                precision="fp16")
    dp = gpus // (tp * pp)
    m = batch // (dp * micro_batch)
    cl = Cluster(workers=gpus, topology=SELENE, latency="5us")
    pr = sgdnet.predict("pipeline", prof, cl, granularity=granularity, tp=tp, pp=pp, dp=dp,
                        microbatches=m, recompute=True, steps=2, warmup=1, replications=1,
                        seed=0, parallel=False, check_memory=False)
    return pr, pipeline_report(pr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(r[0] for r in TABLE))
    ap.add_argument("--granularity", default="coarse", choices=("fine", "coarse"))
    a = ap.parse_args(argv)
    want = a.rows.split(",")
    print("| model | TP | PP | DP | m | GPUs | published TFLOP/s | predicted | error | "
          "iteration s | idle stage 0 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    within = 0
    for row in TABLE:
        if row[0] not in want:
            continue
        t0 = time.process_time()
        pr, rep = predict_row(row, a.granularity)
        got = rep.tflops_per_gpu.mean
        err = got / row[8] - 1
        within += abs(err) <= 0.15
        pl = rep.plan
        print(f"| {row[0]} | {row[4]} | {row[5]} | {pl['dp']} | {pl['microbatches']} | "
              f"{row[6]} | {row[8]} | {got:.1f} | {100 * err:+.1f} % | "
              f"{rep.iteration_s.mean:.3f} | {rep.idle[0].mean:.3f} |  "
              f"<!-- {time.process_time() - t0:.0f} s CPU -->", flush=True)
    print(f"\n{within} rows within 15 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
