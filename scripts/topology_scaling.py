"""One model on 1..N nodes of 8 GPUs: flat ring (1 or 4 channels) vs hierarchical all-reduce vs NCCL's
tree vs sync PS.

    PYTHONPATH=. python scripts/topology_scaling.py [--nodes 1 2 4 ... 128] [--model gpt2_medium]
        [--cluster examples/clusters/p4d-8xa100-4x100g.yaml] [--granularity coarse]
        [--figure docs/img/topology_scaling.png]

Prints a Markdown table (samples/s, mean over replications, and the wall time of each
prediction) and optionally draws the scaling figure. The PS has one shard per node (on the
node's first GPU's host), at most ``--max-shards``.
"""

from __future__ import annotations

import argparse
import time

from sgdnet import Cluster, predict

SCHEMES = (
    ("flat ring", "allreduce", {"algorithm": "ring"}),
    ("flat ring (4 channels)", "allreduce", {"algorithm": "ring", "channels": 4}),
    ("hierarchical", "allreduce", {"algorithm": "hierarchical", "chunks": 4}),
    ("NCCL tree (4 channels)", "allreduce", {"algorithm": "dbtree", "channels": 4}),
    ("sync PS (1 shard/node, <= 16)", "sync-ps", {"placement": "colocated"}),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    ap.add_argument("--model", default="gpt2_medium")
    ap.add_argument("--cluster", default="examples/clusters/p4d-8xa100-4x100g.yaml")
    ap.add_argument("--max-layers", type=int, default=8, help="layer groups of fine nets")
    ap.add_argument("--granularity", default="coarse", choices=["coarse", "fine"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--replications", type=int, default=2)
    ap.add_argument("--max-shards", type=int, default=16)
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    rows = []
    nets = (f"fine nets (max_layers={args.max_layers})" if args.granularity == "fine"
            else "coarse nets")
    print(f"{args.model} on {args.cluster}, {nets}, {args.steps} steps x "
          f"{args.replications} replications")
    print("| nodes | GPUs | " + " | ".join(s[0] for s in SCHEMES) + " |")
    print("|---:|---:|" + "---:|" * len(SCHEMES))
    for nodes in args.nodes:
        cl = Cluster.from_file(args.cluster, workers=8 * nodes)
        cells = []
        for _label, variant, opts in SCHEMES:
            kw = dict(opts)
            if variant == "sync-ps":
                kw["shards"] = min(nodes, args.max_shards)
            if args.granularity == "fine":
                kw["max_layers"] = args.max_layers
            t0 = time.perf_counter()
            p = predict(variant, args.model, cl, granularity=args.granularity, steps=args.steps,
                        replications=args.replications, seed=0, parallel=False, **kw)
            cells.append((p.samples_per_s.mean, time.perf_counter() - t0))
        rows.append((nodes, cells))
        print(f"| {nodes} | {8 * nodes} | " +
              " | ".join(f"{v:,.0f} ({w:.1f} s)" for v, w in cells) + " |", flush=True)
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        gpus = [8 * r[0] for r in rows]
        for k, (label, _, _) in enumerate(SCHEMES):
            ax.plot(gpus, [r[1][k][0] for r in rows], marker="o", label=label)
        ax.plot(gpus, [rows[0][1][0][0] * g / gpus[0] for g in gpus], "k:", label="linear")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("GPUs (8 per node)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"{args.model}, {args.cluster.rsplit('/', 1)[-1]}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
