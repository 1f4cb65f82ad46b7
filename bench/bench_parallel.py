"""Scale of the sharded and 3D-parallel variants (issues #38, #39): CPU seconds and peak memory.

    PYTHONPATH=. python bench/bench_parallel.py [--cases fsdp-1024 pipeline-1024 ...] [--reps 3]

Each case is one ``sgdnet.predict`` in its own process (one core: ``parallel=False``; the
clusters have no noise, so one replication), after a tiny prediction of the same variant that
loads the engine's JIT cache and is not timed. Printed per case: the prediction's CPU seconds
(``time.process_time``, the steadier figure on a shared machine), its wall seconds, the
process's peak resident memory (``ru_maxrss``) and the predicted rate;
the median of ``--reps`` processes.

Cases (the issues' targets: fine, one core, <= 10 s and <= 2 GB at 1,024 GPUs):

* ``fsdp-1024``: GPT-2 XL, ``fsdp`` FULL_SHARD, bf16, forward prefetch, on 128 DGX H100 nodes
  (``examples/clusters/dgx-h100-8x400g.yaml``), fine;
* ``pipeline-1024``: GPT-3 175 B (96 blocks, hidden 12,288, 96 heads, sequence 2,048), TP 8,
  PP 8, DP 16, 96 micro-batches, 1F1B, full recomputation, on the same nodes, fine;
* ``pipeline-1024-interleaved``: the same with 2 virtual stages;
* ``pipeline-16384``: GPT-3 175 B, TP 8, PP 16, DP 128 (the plan of Llama 3 405B's 8K-sequence
  pre-training on 16,384 H100s, Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4),
  32 micro-batches, 1F1B, full recomputation, on 2,048 of the same nodes, fine (its own GPU
  count; the issue's target: <= 60 s).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

CLUSTER = "examples/clusters/dgx-h100-8x400g.yaml"
GPT3 = dict(n_layers=96, d_model=12288, n_heads=96, seq_len=2048, n_ctx=2048, vocab=51200,
            batch_size=1, device="A100", precision="fp16")
CASES = {
    "fsdp-1024": ("fsdp", "gpt2_xl", {"sharding": "full", "dtype": "bf16",
                                      "forward_prefetch": True}),
    "pipeline-1024": ("pipeline", "gpt3", {"tp": 8, "pp": 8, "microbatches": 96,
                                           "recompute": True}),
    "pipeline-1024-interleaved": ("pipeline", "gpt3", {"tp": 8, "pp": 8, "microbatches": 96,
                                                       "recompute": True,
                                                       "schedule": "interleaved",
                                                       "virtual_stages": 2}),
    "pipeline-16384": ("pipeline", "gpt3", {"tp": 8, "pp": 16, "microbatches": 32,
                                            "recompute": True}),
}
#: Cases run at their own GPU count (the others at ``--gpus``).
GPUS = {"pipeline-16384": 16384}


def _model(name: str):
    if name == "gpt3":
        from sgdnet.workload.transformers import gpt2

        return gpt2("gpt3-175b", **GPT3)
    return name


def one(case: str, gpus: int) -> dict:
    """Time one prediction of ``case`` on ``gpus`` GPUs in this process."""
    from sgdnet import Cluster, predict

    variant, model, opts = CASES[case]
    small = {**opts}
    if variant == "pipeline":
        small.update(pp=2, tp=8, microbatches=4)
    predict(variant, _model(model), Cluster.from_file(CLUSTER, workers=16), steps=2, warmup=1,
            replications=1, parallel=False, check_memory=False, **small)  # loads the JIT cache
    cluster = Cluster.from_file(CLUSTER, workers=gpus)
    prof = _model(model)
    t0, c0 = time.perf_counter(), time.process_time()
    p = predict(variant, prof, cluster, steps=3 if variant == "pipeline" else 20, warmup=1,
                replications=1, parallel=False, check_memory=False, **opts)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"case": case, "gpus": gpus, "cpu_s": cpu, "wall_s": wall, "peak_bytes": rss,
            "samples_per_s": p.samples_per_s.mean}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--gpus", type=int, default=None,
                    help="GPUs of every case (default: 1,024, or the case's own)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--one", nargs=2, metavar=("CASE", "GPUS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]))))
        return
    for case in a.cases:
        runs = []
        gpus = a.gpus or GPUS.get(case, 1024)
        for _ in range(a.reps):
            out = subprocess.run([sys.executable, __file__, "--one", case, str(gpus)],
                                 capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        each = ", ".join(f"{r['cpu_s']:.2f}" for r in runs)
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("cpu_s", "wall_s", "peak_bytes")}
        print(f"{case:28s} {gpus:5d} GPUs  CPU {med['cpu_s']:6.2f} s  wall "
              f"{med['wall_s']:6.2f} s  peak {med['peak_bytes'] / 1e9:5.2f} GB  "
              f"({runs[0]['samples_per_s']:.4g} samples/s; CPU s of the runs: "
              f"{each})", flush=True)


if __name__ == "__main__":
    main()
