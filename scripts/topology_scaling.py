"""One model on 1..N nodes of 8 GPUs: flat ring vs hierarchical all-reduce vs sync PS.

    PYTHONPATH=. python scripts/topology_scaling.py [--nodes 1 2 4 8] [--model gpt2_medium]
        [--cluster examples/clusters/p4d-8xa100-4x100g.yaml] [--figure docs/img/topology.png]

Prints a Markdown table (samples/s, mean over replications, and the wall time of each
prediction) and optionally draws the scaling figure.
"""

from __future__ import annotations

import argparse
import time

from sgdnet import Cluster, predict

SCHEMES = (
    ("flat ring", "allreduce", {"algorithm": "ring"}),
    ("hierarchical", "allreduce", {"algorithm": "hierarchical", "chunks": 4}),
    ("sync PS (1 shard/node)", "sync-ps", {"placement": "colocated"}),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--model", default="gpt2_medium")
    ap.add_argument("--cluster", default="examples/clusters/p4d-8xa100-4x100g.yaml")
    ap.add_argument("--max-layers", type=int, default=8)
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    rows = []
    print(f"{args.model} on {args.cluster}, fine nets (max_layers={args.max_layers}), "
          "10 steps x 2 replications")
    print("| nodes | GPUs | " + " | ".join(s[0] for s in SCHEMES) + " |")
    print("|---:|---:|" + "---:|" * len(SCHEMES))
    for nodes in args.nodes:
        cl = Cluster.from_file(args.cluster, workers=8 * nodes)
        cells = []
        for _label, variant, opts in SCHEMES:
            kw = dict(opts)
            if variant == "sync-ps":
                kw["shards"] = nodes
            t0 = time.perf_counter()
            p = predict(variant, args.model, cl, steps=10, replications=2, seed=0,
                        max_layers=args.max_layers, **kw)
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
