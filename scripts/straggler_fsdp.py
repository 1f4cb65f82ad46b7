"""Stragglers under FSDP FULL_SHARD and DDP (issue #38, "What it must show").

Predicts GPT-2 XL (built-in ``gpt2_xl``) on nodes of 8 H100s
(``examples/clusters/dgx-h100-8x400g.yaml``) with two variants:

* ``fsdp``: FULL_SHARD, ``forward_prefetch=True``, every other option the variant's default
  (``backward_prefetch="pre"``, ``limit_all_gathers=True``, bf16 on the wire, AdamW on the shard);
* DDP: ``allreduce`` with the ``ddp`` framework's defaults (25 MiB buckets, 1 MiB first bucket,
  overlap, NCCL; :mod:`sgdnet.workload.frameworks`);

in four conditions: ``homogeneous`` (deterministic), ``slow GPU`` (worker 0's compute times
``x f``, ``f = 1.1``: ``Cluster.speeds[0] = 1/f``), ``noise`` (every compute operation Gamma with
CV ``0.1``, ``Cluster.compute_cv``) and ``both``. Each is replicated (``--replications``) and its
slowdown ``1 - X / X_homogeneous`` is given with the 95% Student-t CI of the replications (the
homogeneous run is deterministic, so its rate has no error).

Hand bounds (``C`` the compute of one GPU's step, ``T`` the homogeneous step, ``n`` GPUs,
``e_n = E[max of n standard normals]``):

* one GPU slower by ``f``, deterministic: the step is a max-plus cycle time; scaling one GPU's
  operations by ``f`` lengthens any cycle by at most ``(f - 1) C`` per step, for both variants,
  so ``T' <= T + (f - 1) C`` and ``T' >= f C``: slowdown ``<= (f - 1) C / (T + (f - 1) C)``.
  Neither variant can pay more than that; which pays more depends on how much communication the
  extra compute hides behind.
* per-op noise of CV ``v``: DDP waits for the slowest GPU once per step (at its last bucket), so
  ``T' ~ T + e_n sigma_step`` with ``sigma_step = v sqrt(sum_ops m_op^2)`` (independent ops);
  FULL_SHARD synchronises every GPU at every unit's collective, so in the tightest case each
  operation's maximum over GPUs is paid: ``T' ~ T + e_n v sum_ops m_op = T + e_n v C``. The ratio
  of the two penalties is ``C / sqrt(sum m^2)``, about ``sqrt(number of ops)`` for alike ops.
  DDP's is an estimate (normal approximation; Gamma's right skew adds a little), FSDP's an upper
  bound: prefetch gives one unit of slack, and a busy collective stream absorbs compute delays.

The profile is the built-in one at each ``--batch`` (default 4, the built-in file's, and 6:
FSDP communication-bound at 4, compute-bound at 6; 8 does not fit DDP in 80 GiB).

Run::

    python scripts/straggler_fsdp.py                    # 2 and 4 nodes, batch 4 and 6
    python scripts/straggler_fsdp.py --nodes 2 --batch 6 --replications 4
    python scripts/straggler_fsdp.py --dump rows.json   # then --replot rows.json: no runs

It prints a Markdown table and draws ``docs/img/straggler_fsdp_ddp.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

import sgdnet
from sgdnet import Cluster
from sgdnet.models import load
from sgdnet.workload import ModelProfile
from sgdnet.workload.transformers import BUILTIN

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "clusters" / "dgx-h100-8x400g.yaml"
CONDITIONS = ("homogeneous", "slow GPU", "noise", "both")
VARIANTS = {"FSDP FULL_SHARD": ("fsdp", {"forward_prefetch": True}),
            "DDP": (None, {"framework": "ddp"})}


def expected_max_normal(n: int) -> float:
    """``E[max of n iid N(0, 1)]`` by quadrature of ``int x d Phi(x)^n`` on a fine grid."""
    x = np.linspace(-10.0, 10.0, 200_001)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    dens = n * cdf ** (n - 1) * phi
    return float(np.sum(x * dens) * (x[1] - x[0]))


def cluster_for(cond: str, workers: int, f: float, cv: float) -> Cluster:
    """The DGX H100 cluster of ``workers`` GPUs in condition ``cond``."""
    base = Cluster.from_file(CLUSTER, workers=workers)
    changes = {}
    if cond in ("slow GPU", "both"):
        changes["speeds"] = [1.0 / f] + [1.0] * (workers - 1)
    if cond in ("noise", "both"):
        changes["compute_cv"] = cv
    return base.replace(**changes) if changes else base


def profile(model: str, batch: int | None) -> ModelProfile:
    """The built-in ``model``, or its configuration rebuilt at ``batch`` sequences per GPU."""
    if batch is None:
        return load(model)
    builder, kw = BUILTIN[model]
    return builder(**(kw | {"batch_size": batch}))


def run(model: str, batches: list[int | None], nodes: list[int], f: float, cv: float,
        steps: int, reps: int, seed: int) -> list[dict]:
    """Every (batch, nodes, variant, condition): rate, its CI and the slowdown with its CI."""
    rows = []
    for bs, nn in ((b, n) for b in batches for n in nodes):
        prof = profile(model, bs)
        w = 8 * nn
        for label, (variant, opts) in VARIANTS.items():
            base = None
            for cond in CONDITIONS:
                p = sgdnet.predict(variant, prof, cluster_for(cond, w, f, cv), steps=steps,
                                   replications=reps, seed=seed, **opts)
                est = p.samples_per_s
                if base is None:
                    base = est.mean
                s = 1.0 - est.samples / base
                lo, hi = est.ci()
                rows.append({"batch": prof.batch_size, "prof": prof, "nodes": nn, "gpus": w, "variant": label, "condition": cond,
                             "rate": est.mean, "rate_lo": lo, "rate_hi": hi,
                             "slow": float(s.mean()), "slow_lo": 1.0 - hi / base,
                             "slow_hi": 1.0 - lo / base,
                             "step": w * prof.batch_size / base})
                print(f"  b={prof.batch_size:<3d} {w:3d} GPUs  {label:16s} {cond:12s} {est}", file=sys.stderr)
    return rows


def bounds(prof: ModelProfile, gpus: int, f: float, cv: float, step: float) -> dict:
    """The hand bounds on the slowdown of each condition (see the module docstring).

    ``C`` counts the layers, the loss and the whole optimizer step (``step_costs``; FSDP steps
    1/n of it, so ``C`` is an upper bound there); the noise terms count the operations of the
    layers and the update.
    """
    means = [m for la in prof.layers for m in (la.forward_s, la.backward_s) if m > 0]
    means += [m for m in (prof.loss_s, prof.update_s) if m > 0]
    c = math.fsum(means) + prof.zero_grad_s
    e = expected_max_normal(gpus)
    slow = (f - 1) * c / (step + (f - 1) * c)
    ddp = e * cv * math.sqrt(math.fsum(m * m for m in means))
    fsdp = e * cv * c
    return {"C": c, "e_n": e, "slow": slow,
            "noise_ddp": ddp / (step + ddp), "noise_fsdp": fsdp / (step + fsdp),
            "both_ddp": ((f - 1) * c + ddp) / (step + (f - 1) * c + ddp),
            "both_fsdp": ((f - 1) * c + fsdp) / (step + (f - 1) * c + fsdp)}


def table(rows: list[dict], f: float, cv: float) -> str:
    """A Markdown table of the runs with their bounds."""
    out = ["| batch/GPU | GPUs | variant | condition | samples/s (95% CI) | slowdown % (95% CI) "
           "| hand bound % |",
           "|---:|---:|---|---|---:|---:|---:|"]
    for r in rows:
        b = bounds(r["prof"], r["gpus"], f, cv, r["step"])
        key = {"homogeneous": None, "slow GPU": "slow",
               "noise": "noise_fsdp" if r["variant"].startswith("FSDP") else "noise_ddp",
               "both": "both_fsdp" if r["variant"].startswith("FSDP") else "both_ddp"
               }[r["condition"]]
        kind = ("" if key is None else "<= " if key == "slow"
                else "~ " if key.endswith("ddp") else "<~ ")
        bound = "" if key is None else f"{kind}{100 * b[key]:.1f}"
        ci = (f"{r['rate']:.1f} [{r['rate_lo']:.1f}, {r['rate_hi']:.1f}]"
              if math.isfinite(r["rate_lo"]) else f"{r['rate']:.1f}")
        sl = (f"{100 * r['slow']:.2f} [{100 * r['slow_lo']:.2f}, {100 * r['slow_hi']:.2f}]"
              if math.isfinite(r["slow_lo"]) else f"{100 * r['slow']:.2f}")
        out.append(f"| {r['batch']} | {r['gpus']} | {r['variant']} | {r['condition']} | {ci} "
                   f"| {sl} | {bound} |")
    return "\n".join(out)


def figure(rows: list[dict], path: Path, f: float, cv: float) -> None:
    """Slowdown bars with CI whiskers, one panel per (batch, cluster size); black ticks: the
    max-plus bound of the slow GPU, ``(f - 1) C / (T + (f - 1) C)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({(r["batch"], r["gpus"]) for r in rows})
    conds = CONDITIONS[1:]
    ncol = min(2, len(sizes))
    nrow = math.ceil(len(sizes) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.6 * ncol, 3.9 * nrow + 0.5), sharey=True,
                             squeeze=False)
    width = 0.38
    colors = {"FSDP FULL_SHARD": "#c0392b", "DDP": "#2e86c1"}
    for ax, (bs, g) in zip(axes.ravel(), sizes):
        steps = {}
        for k, label in enumerate(VARIANTS):
            sel = [next(r for r in rows if (r["batch"], r["gpus"]) == (bs, g)
                        and r["variant"] == label
                        and r["condition"] == c) for c in conds]
            y = np.array([100 * r["slow"] for r in sel])
            lo = np.array([100 * r["slow_lo"] if math.isfinite(r["slow_lo"]) else 100 * r["slow"]
                           for r in sel])
            hi = np.array([100 * r["slow_hi"] if math.isfinite(r["slow_hi"]) else 100 * r["slow"]
                           for r in sel])
            xs = np.arange(len(conds)) + (k - 0.5) * width
            ax.bar(xs, y, width, yerr=[y - lo, hi - y], capsize=4, color=colors[label],
                   label=label if ax is axes[0][0] else None)
            for xx, top, yy in zip(xs, hi, y):
                ax.text(xx, top + 0.2, f"{yy:.1f}", ha="center", va="bottom", fontsize=8)
            b = bounds(sel[0]["prof"], g, f, cv, sel[0]["step"])
            ax.plot([xs[0] - width / 2, xs[0] + width / 2], [100 * b["slow"]] * 2, color="black",
                    lw=1.6, ls="--", label="slow-GPU bound" if ax is axes[0][0] and k == 0
                    else None)
            steps[label] = sel[0]["step"]
        ax.set_xticks(np.arange(len(conds)))
        ax.set_xticklabels([f"one GPU x{f:g}", f"op noise CV {cv:g}", "both"])
        ax.set_title(f"{rows[0]['prof'].name}, batch {bs}/GPU, {g} H100s ({g // 8} nodes)\n"
                     f"step: FSDP {1e3 * steps['FSDP FULL_SHARD']:.0f} ms, DDP "
                     f"{1e3 * steps['DDP']:.0f} ms", fontsize=9.5)
        ax.axhline(0, color="black", lw=0.6)
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(0, 11.5)
    for ax in axes[:, 0]:
        ax.set_ylabel("throughput lost vs homogeneous (%)")
    for ax in axes.ravel()[len(sizes):]:
        ax.set_visible(False)
    fig.legend(loc="upper center", ncol=3, bbox_to_anchor=(0.5, 0.955), frameon=False)
    fig.suptitle("Cost of stragglers, FSDP FULL_SHARD (forward prefetch) vs DDP: 95% CI over "
                 "replications", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the study (or read a saved one), print the table, draw the figure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2_xl")
    ap.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 6],
                    help="sequences per GPU (the built-in profile's configuration rebuilt)")
    ap.add_argument("--factor", type=float, default=1.1, help="slow GPU's time factor")
    ap.add_argument("--cv", type=float, default=0.1, help="per-op compute CV")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--replications", type=int, default=8)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "straggler_fsdp_ddp.png")
    ap.add_argument("--dump", type=Path, help="write the rows to this JSON file")
    ap.add_argument("--replot", type=Path, help="read the rows from this JSON file, no runs")
    a = ap.parse_args(argv)
    if a.replot:
        rows = json.loads(a.replot.read_text())
        for r in rows:
            r["prof"] = profile(a.model, r["batch"])
    else:
        rows = run(a.model, a.batch, a.nodes, a.factor, a.cv, a.steps, a.replications, a.seed)
    if a.dump:
        a.dump.write_text(json.dumps([{k: v for k, v in r.items() if k != "prof"}
                                      for r in rows], indent=1))
    print(table(rows, a.factor, a.cv))
    print()
    for r in rows:
        if r["condition"] == "homogeneous":
            b = bounds(r["prof"], r["gpus"], a.factor, a.cv, r["step"])
            print(f"batch {r['batch']}, {r['gpus']} GPUs, {r['variant']}: homogeneous step "
                  f"T = {r['step'] * 1e3:.1f} ms, compute C = {b['C'] * 1e3:.1f} ms, "
                  f"e_n = {b['e_n']:.3f}")
    figure(rows, a.out, a.factor, a.cv)
    print(f"\nfigure: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
