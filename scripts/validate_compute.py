#!/usr/bin/env python
"""The compute model against published single-GPU training throughput (BERT-large, ViT).

Usage::

    PYTHONPATH=. python scripts/validate_compute.py [--markdown]

Published figures: NVIDIA DeepLearningExamples, ``PyTorch/LanguageModeling/BERT/README.md``,
"Training performance results" (pytorch:21.11-py3 NGC container): one GPU of a DGX A100
(A100 80GB) and of a DGX-1 (V100 32GB), pre-training phase 1 (sequence 128) and phase 2
(sequence 512), sequences/s. The batch is the per-GPU micro-batch (accumulated batch /
accumulation steps). The prediction is ``batch / (forward + backward + loss)`` of
``sgdnet.workload.transformers.bert_large``: the LAMB step runs once per 32-256 micro-batches
and is left out (under 2% of a step).

Second source: timm's training benchmark on one GeForce RTX 3090
(huggingface/pytorch-image-models ``results/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv``:
AMP, PyTorch 1.12, CUDA 11.3, synthetic data, its benchmark's default SGD with momentum),
``train_samples_per_sec`` of the ViT models; predicted as ``batch / (forward + backward + loss
+ momentum-SGD update)`` of ``sgdnet.workload.transformers.vit`` with timm's architecture.

Row kinds: ``calibration`` is the one point :data:`sgdnet.workload.compute.EFFICIENCY` was
fitted to; ``validation`` rows were not used to fit anything. Phase-2 rows (sequence 512) are
shown although NVIDIA's phase 2 bins sequences by length (LDDL, bin size 64), so its
sequences are not all 512 tokens long (see docs/validation.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgdnet.workload import transformers as T  # noqa: E402
from sgdnet.workload.compute import EFFICIENCY  # noqa: E402
from sgdnet.workload.optimizer import update_time  # noqa: E402

#: (GPU, precision, sequence length, micro-batch per GPU, published sequences/s, kind)
PUBLISHED = [
    ("A100", "fp16", 128, 256, 580, "calibration"),
    ("A100", "tf32", 128, 128, 317, "validation"),
    ("V100", "fp16", 128, 64, 224, "validation"),
    ("V100", "fp32", 128, 32, 50, "validation"),
    ("A100", "fp16", 512, 32, 210, "validation (phase 2, length-binned)"),
    ("A100", "tf32", 512, 16, 110, "validation (phase 2, length-binned)"),
    ("V100", "fp16", 512, 8, 75, "validation (phase 2, length-binned)"),
    ("V100", "fp32", 512, 4, 19, "validation (phase 2, length-binned)"),
]


#: timm rows: (model, architecture, batch, published samples/s, published params in M)
TIMM = [
    ("vit_large_patch16_224", {"n_layers": 24, "d_model": 1024, "n_heads": 16, "patch": 16,
                               "image": 224}, 64, 117.08, 304.33),
    ("vit_large_patch16_384", {"n_layers": 24, "d_model": 1024, "n_heads": 16, "patch": 16,
                               "image": 384}, 12, 29.07, 304.72),
    ("vit_large_patch14_224", {"n_layers": 24, "d_model": 1024, "n_heads": 16, "patch": 14,
                               "image": 224}, 48, 85.27, 304.20),
    ("vit_huge_patch14_224", {"n_layers": 32, "d_model": 1280, "n_heads": 16, "patch": 14,
                              "image": 224}, 16, 39.94, 632.05),
    ("vit_base_patch16_384", {"n_layers": 12, "d_model": 768, "n_heads": 12, "patch": 16,
                              "image": 384}, 32, 96.96, 86.86),
]


def timm_rate(arch: dict, batch: int) -> tuple[float, float]:
    """Predicted samples/s of a timm ViT on one RTX 3090 (AMP) and its parameter count."""
    p = T.vit(batch_size=batch, device="RTX3090", precision="fp16", optimizer="momentum",
              **arch)
    n = p.meta["parameters"]
    return batch / (p.compute_s + p.loss_s + update_time(n, "RTX3090", "momentum")), n


def rows() -> list[dict]:
    """One dict per published figure with the model's prediction and its relative error."""
    out = []
    for dev, prec, seq, batch, pub, kind in PUBLISHED:
        p = T.bert_large(seq_len=seq, batch_size=batch, device=dev, precision=prec)
        rate = batch / (p.compute_s + p.loss_s)
        out.append({"model": "bert_large", "gpu": dev, "precision": prec, "seq_len": seq,
                    "batch": batch, "published": pub, "predicted": rate,
                    "error": rate / pub - 1, "kind": kind})
    for name, arch, batch, pub, params in TIMM:
        rate, n = timm_rate(arch, batch)
        seq = (arch["image"] // arch["patch"]) ** 2 + 1
        out.append({"model": name, "gpu": "RTX3090", "precision": "fp16", "seq_len": seq,
                    "batch": batch, "published": pub, "predicted": rate,
                    "error": rate / pub - 1, "kind": "validation",
                    "params_m": n / 1e6, "published_params_m": params})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    a = ap.parse_args(argv)
    rs = rows()
    print(f"compute model efficiency {EFFICIENCY}")
    if a.markdown:
        print("| model | GPU | precision | sequence | batch/GPU | published samples/s | "
              "predicted samples/s | error | row |")
        print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for r in rs:
        if a.markdown:
            print(f"| {r['model']} | {r['gpu']} | {r['precision']} | {r['seq_len']} | {r['batch']} | "
                  f"{r['published']} | {r['predicted']:.1f} | {100 * r['error']:+.1f}% | "
                  f"{r['kind']} |")
        else:
            print(f"{r['model']:22s} {r['gpu']:7s} {r['precision']:5s} seq {r['seq_len']:4d} batch "
                  f"{r['batch']:4d}: published {r['published']:6.1f}, predicted "
                  f"{r['predicted']:6.1f} samples/s ({100 * r['error']:+.1f}%)  {r['kind']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
