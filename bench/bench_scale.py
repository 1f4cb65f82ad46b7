"""Growth curves (issue #15): time and memory of a ResNet-50 prediction vs GPUs, 8 ... 1,024.

    PYTHONPATH=. python bench/bench_scale.py [--gpus 8 64 128 256 512 1024] [--steps 20]

p4d-like nodes of 8 GPUs with 4 NICs (``examples/clusters/p4d-8xa100-4x100g.yaml``);
hierarchical all-reduce (``allreduce``, ``algorithm="hierarchical"``) and synchronous PS with
16 dedicated shards (``sync-ps``), fine and coarse. Each point runs in its own process (one
core: ``parallel=False``, one replication: these clusters have no noise, so the model is
deterministic) so that its peak resident memory (``ru_maxrss``) is its own; the engine's JIT
cache is loaded by a tiny warm-up prediction first, which is not timed. Printed per point:
transitions, the layer groups actually used (a fine net over the memory budget falls back to
fewer, see ``sgdnet.variants.budget``), build + compile seconds, the whole ``predict`` in
seconds (build, compile, simulation, summaries) and the process's peak RSS at the end of the
prediction (measured first; build + compile are timed afterwards, with the compile cache
emptied). The prediction's CPU seconds (``time.process_time``, one thread) are printed beside
its wall seconds: on a shared machine they are the steadier of the two.

    PYTHONPATH=. python bench/bench_scale.py --phases [--gpus 1024] [--granularity coarse]

``--phases`` prints instead the CPU seconds of each phase of one prediction, done by hand in the
order ``predict`` does them: build (``VariantSpec.build`` less its validation), validate
(``Net.validate``, timed again after the build), hash (``structural_key``; skipped, 0, for nets
above ``HASH_MAX_ELEMENTS``), compile (``CompiledNet``), kernel (``simulate`` of the compiled
net) and summaries (``Prediction``); from the build to the end of the simulation with the
garbage collector paused, as ``predict`` runs them (since #15's fine 1,024-GPU round; before
it, validate, hash and compile only, as ``compile_net`` runs them).

Case ``dbtree``: NCCL's multi-node tree (``algorithm="dbtree"``), one pair of trees per NIC
(``channels=4``), streamed.

Case ``sync-ps-16-split``: the 16 shards with ``shard_min_bytes=0``, every layer cut over all
shards, so that the fine net carries each layer's pieces as flow groups
(``sgdnet.variants.parameter_server._grouped``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CLUSTER = "examples/clusters/p4d-8xa100-4x100g.yaml"
CASES = {"hierarchical": ("allreduce", {"algorithm": "hierarchical"}, {}),
         "hierarchical-looped": ("allreduce", {"algorithm": "hierarchical",
                                               "ring_form": "looped"}, {}),
         "hierarchical-pipelined": ("allreduce", {"algorithm": "hierarchical",
                                                  "ring_form": "pipelined"}, {}),
         "hierarchical-fused": ("allreduce", {"algorithm": "hierarchical",
                                              "fuse_layers": True}, {}),
         "dbtree": ("allreduce", {"algorithm": "dbtree", "channels": 4}, {}),
         "sync-ps-16": ("sync-ps", {}, {"ps_shards": 16}),
         "sync-ps-16-split": ("sync-ps", {}, {"ps_shards": 16, "shard_min_bytes": 0})}


def _setup(gpus: int, case: str, granularity: str) -> tuple[str, dict, object]:
    """``(variant, options, cluster of gpus)`` of ``case``, after a small prediction of the same
    kind that loads the JIT cache."""
    from sgdnet import Cluster, predict

    variant, opts, ckw = CASES[case]
    small = Cluster.from_file(CLUSTER, workers=8, **ckw)
    predict(variant, "resnet18", small, granularity=granularity, steps=2, replications=1,
            parallel=False, **opts)
    return variant, opts, Cluster.from_file(CLUSTER, workers=gpus, **ckw)


def one(gpus: int, case: str, granularity: str, steps: int) -> dict:
    import resource
    import warnings

    from sgdnet import predict
    from sgdnet.net.compiled import _CACHE, compile_net
    from sgdnet.variants import get

    variant, opts, cl = _setup(gpus, case, granularity)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t, c = time.perf_counter(), time.process_time()
        p = predict(variant, "resnet50", cl, granularity=granularity, steps=steps,
                    replications=1, parallel=False, **opts)
        total, cpu = time.perf_counter() - t, time.process_time() - c
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the prediction's peak
        rate = float(p.samples_per_s.mean)
        del p
        _CACHE.clear()  # time build + compile afresh
        t = time.perf_counter()
        net = get(variant).build("resnet50", cl, granularity, **opts)
        compile_net(net)
        built = time.perf_counter() - t
        size, fb = len(net.transitions), net.meta.get("layer_fallback")
    return {"gpus": gpus, "case": case, "granularity": granularity,
            "transitions": size,
            "layer_groups": fb["layer_groups"] if fb else None,
            "build_compile_s": built, "predict_s": total, "predict_cpu_s": cpu,
            "samples_per_s": rate, "max_rss_mb": rss,
            "warnings": len(caught)}


def phases(gpus: int, case: str, granularity: str, steps: int) -> dict:
    """CPU seconds of each phase of one prediction (see the module docstring)."""
    from sgdnet._gc import paused_gc
    from sgdnet.engine import simulate
    from sgdnet.net import compiled
    from sgdnet.prediction import Prediction
    from sgdnet.variants import get
    from sgdnet.variants.inputs import resolve_model

    variant, opts, cl = _setup(gpus, case, granularity)
    spec = get(variant)
    out: dict = {"gpus": gpus, "case": case, "granularity": granularity}
    clock = time.process_time
    with paused_gc():  # from the build to the end of the simulation, as predict does
        t = clock()
        net = spec.build("resnet50", cl, granularity, **opts)  # validates the net at its end
        build = clock() - t
        t = clock()
        net.touch().validate()
        out["validate"] = clock() - t
        out["build"] = build - out["validate"]
        t = clock()
        big = len(net.transitions) + len(net.places) > compiled.HASH_MAX_ELEMENTS
        key = None if big else compiled.structural_key(net)
        out["hash"] = clock() - t
        t = clock()
        cn = compiled.CompiledNet(net, key or "unhashed")
        out["compile"] = clock() - t
        meta, n = net.meta, cl.workers
        warmup = spec.default_warmup(cl, meta.get("options", {}))
        t = clock()
        res = simulate(cn, steps=steps * n, warmup=warmup * n, replications=1, parallel=False)
        out["kernel"] = clock() - t
        out["transitions"] = len(net.transitions)
        del net, cn
    t = clock()
    p = Prediction(spec.name, resolve_model("resnet50"), meta.get("cluster", cl), granularity,
                   meta.get("options", {}), steps, warmup, res, meta)
    out["summaries"] = clock() - t
    out["total"] = sum(out[k] for k in PHASES)
    out["samples_per_s"] = float(p.samples_per_s.mean)
    return out


PHASES = ("build", "validate", "hash", "compile", "kernel", "summaries")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 64, 128, 256, 512, 1024])
    ap.add_argument("--cases", nargs="+", default=["hierarchical", "sync-ps-16"],
                    choices=list(CASES))
    ap.add_argument("--granularity", nargs="+", default=["coarse", "fine"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--one", nargs=3, metavar=("GPUS", "CASE", "GRANULARITY"))
    ap.add_argument("--phases", action="store_true",
                    help="CPU seconds per phase (build, validate, hash, compile, kernel, "
                         "summaries) instead of the growth table")
    args = ap.parse_args()
    if args.one:
        run = phases if args.phases else one
        print(json.dumps(run(int(args.one[0]), args.one[1], args.one[2], args.steps)))
        return
    if args.phases:
        print("| GPUs | case | granularity | transitions | "
              + " | ".join(PHASES) + " | total CPU (s) | samples/s |")
        print("|---:|---|---|---:|" + "---:|" * (len(PHASES) + 2))
        for case in args.cases:
            for gran in args.granularity:
                for n in args.gpus:
                    cmd = [sys.executable, __file__, "--one", str(n), case, gran, "--phases",
                           "--steps", str(args.steps)]
                    out = subprocess.run(cmd, capture_output=True, text=True,
                                         timeout=args.timeout)
                    if out.returncode:
                        print(f"| {n} | {case} | {gran} | failed: "
                              f"{out.stderr.strip().splitlines()[-1:]} |", flush=True)
                        continue
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    print(f"| {n} | {case} | {gran} | {r['transitions']:,} | "
                          + " | ".join(f"{r[k]:.2f}" for k in PHASES)
                          + f" | {r['total']:.2f} | {r['samples_per_s']:,.0f} |", flush=True)
        return
    print("| GPUs | case | granularity | transitions | layer groups | build+compile (s) | "
          "predict (s) | predict CPU (s) | max RSS (MB) | samples/s |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        for gran in args.granularity:
            for n in args.gpus:
                cmd = [sys.executable, __file__, "--one", str(n), case, gran,
                       "--steps", str(args.steps)]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True,
                                         timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"| {n} | {case} | {gran} | | | > {args.timeout:.0f} | | |", flush=True)
                    continue
                if out.returncode:
                    print(f"| {n} | {case} | {gran} | failed: "
                          f"{out.stderr.strip().splitlines()[-1:]} |", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                groups = (r["layer_groups"] or "all") if gran == "fine" else "-"
                print(f"| {n} | {case} | {gran} | {r['transitions']:,} | {groups} | "
                      f"{r['build_compile_s']:.1f} | "
                      f"{r['predict_s']:.1f} | {r['predict_cpu_s']:.1f} | "
                      f"{r['max_rss_mb']:.0f} | "
                      f"{r['samples_per_s']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
