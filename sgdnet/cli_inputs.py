"""What the ``sgdnet`` command's sub-commands share: their inputs read from the parsed
arguments (the cluster, ``--instance`` pricing, the model re-timed, ``--framework``, the
one-GPU anchor), the compiled net from the on-disk cache, the engine's first-run notice, and
the checks of input and output paths (:mod:`sgdnet.cli` binds them to the commands)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cli_args import _UsageError

__all__: list[str] = []


def _cluster(args: argparse.Namespace, workers: int):
    from .workload.cluster import Cluster

    straggler = None
    if args.straggler:
        from .workload.stragglers import from_spec

        straggler = from_spec(args.straggler)
    if args.speeds is not None and len(args.speeds) != workers:
        raise _UsageError(f"--speeds has {len(args.speeds)} factors but the "
                          f"cluster has {workers} workers; give one per worker")
    # --ps-shards / --ps-placement default to None: given, they override a cluster file's
    ps = {k: v for k, v in (("ps_shards", args.ps_shards), ("ps_placement", args.ps_placement))
          if v is not None}
    burst = getattr(args, "burst", None)
    if getattr(args, "instance", None) is not None:  # the catalog's (workers: its GPUs)
        from .workload.instances import get_instance

        if burst is not None:
            raise _UsageError("--burst puts a token bucket on one-NIC-per-host links (--bandwidth "
                              "or --cluster); an --instance's links are its topology's: drop "
                              "--burst or give --cluster FILE")

        inst = get_instance(args.instance)
        return inst.cluster(max(1, workers // inst.gpus_per_node), speeds=args.speeds,
                            compute_cv=args.compute_cv, comm_cv=args.comm_cv,
                            straggler=straggler, **ps)
    if getattr(args, "cluster", None) is not None:
        from .workload.instances import read_cluster_file

        extra = {"comm_uses_compute": True} if args.comm_uses_compute else {}
        if burst is not None:
            extra["burst"] = burst
        cf, _ = read_cluster_file(args.cluster)  # a price_per_hour key is the file's price
        return Cluster(**cf.cluster_kwargs(workers, speeds=args.speeds,
                                           compute_cv=args.compute_cv, comm_cv=args.comm_cv,
                                           straggler=straggler, **ps, **extra))
    if burst == "file":
        raise _UsageError("--burst file takes the token bucket of a --cluster file; give one, "
                          "or the depth itself (--burst 64KiB)")
    return Cluster(workers=workers, bandwidth=args.bandwidth, latency=args.latency,
                   speeds=args.speeds, compute_cv=args.compute_cv, comm_cv=args.comm_cv,
                   straggler=straggler, comm_uses_compute=args.comm_uses_compute, **ps,
                   **({"burst": burst} if burst is not None else {}))


def _pricing(args: argparse.Namespace) -> tuple[Any, float | None, float | None]:
    """``(instance, price, training samples)``: ``args.workers`` / ``args.transport`` set as
    :func:`sgdnet.workload.instances.pricing_inputs` says."""
    from .workload.instances import pricing_inputs

    _check_readable(getattr(args, "cluster", None))
    inst, args.workers, tr, price, train = pricing_inputs(
        args.instance, args.nodes, args.workers, args.cluster, args.price_per_hour,
        *(getattr(args, k, None) for k in ("samples", "epochs", "dataset_size", "transport",
                                           "framework")))
    args.transport = tr or getattr(args, "transport", None)
    return inst, price, train


def _link_desc(bandwidth: str, latency: str) -> str:
    """``10Gbps NICs (1.25 GB/s), latency 50us``: what was typed and what it was read as."""
    from .units import bandwidth as parse_bw
    from .units import format_bytes, format_seconds, seconds

    bw, lat = parse_bw(bandwidth), seconds(latency)
    lat_s = format_seconds(lat) if lat > 0 else "0 s"
    return (f"{bandwidth} NICs ({format_bytes(bw)}/s each way), latency {latency}"
            f"{'' if lat_s.replace(' ', '') == latency else f' ({lat_s})'}")


def _check_out_dir(path: Path | None) -> None:
    """An output's directory must exist: sgdnet creates no directories (a typo in a path would
    otherwise scatter files); raised as a file error (exit status 1), before any work."""
    if path is None:
        return
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"directory {str(parent)!r} does not exist; create "
                                f"it first (sgdnet creates no directories)", str(path))


def _check_readable(path: Path | str | None) -> None:
    """An input file must be a readable file: a missing or unreadable one is a file error, exit
    status 1, as the README says; a directory is a bad value (a usage error, exit status 2, one
    line naming it), as the loaders' own ``... is a directory; give a file`` (issue #43: every
    hostile input ends in a one-line project error, exit 2)."""
    if path is None:
        return
    if Path(path).is_dir():
        raise _UsageError(f"{str(path)!r} is a directory; give a file")
    with open(path, "rb"):  # FileNotFoundError, PermissionError, IsADirectoryError
        pass


def _prepare_engine() -> float | None:
    """Check the engine's numba cache (a damaged one is rebuilt, said in one line) and say on
    stderr when the first run JIT-compiles; returns the start time of a compile, else None."""
    import warnings

    from .engine.jitcache import check_cache

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiling = check_cache()
    for w in caught:
        print(f"sgdnet: warning: {_one_line(str(w.message))}", file=sys.stderr)
    if not compiling:
        return None
    print("sgdnet: compiling the simulation engine (first run only, cached afterwards): about "
          "30-45 s on an idle core, 1-2 min on a busy machine ...", file=sys.stderr, flush=True)
    return time.perf_counter()


def _compiled(t0: float | None) -> None:
    if t0 is not None:
        print(f"sgdnet: engine compiled in {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)


def _check_suffix(path: Path, allowed: Sequence[str], flag: str) -> None:
    if path.suffix.lower() not in allowed:
        raise _UsageError(f"{flag} {str(path)!r}: unsupported suffix "
                          f"{path.suffix or '(none)'!r}; use one of {', '.join(allowed)}")


def _save_fig(ax: Any, path: Path) -> None:
    fig = ax.figure
    fig.savefig(path, dpi=120, bbox_inches="tight")  # 120: viz.draw.DRAW_DPI
    import matplotlib.pyplot as plt

    plt.close(fig)


def _use_agg() -> None:
    import matplotlib

    matplotlib.use("Agg")


def _load_model(args: argparse.Namespace) -> Any:
    """``--model`` re-timed for ``--device/--batch-size/--precision``.

    The profile's costs outside the layers (loss, optimizer step) are folded into its layers
    where every net is built (:meth:`sgdnet.variants.VariantSpec.build`), as for
    :func:`sgdnet.predict`.
    """
    from . import models
    from .workload.compute import retime

    if args.model.lower().endswith(".json") or os.sep in args.model:
        _check_readable(args.model)
    _check_readable(getattr(args, "cluster", None))
    model = models.load(args.model)
    model = retime(model, device=args.device, batch_size=args.batch_size,
                   precision=args.precision, from_device=getattr(args, "from_device", None),
                   grad_dtype=getattr(args, "grad_dtype", None))
    return model


def _anchor(args: argparse.Namespace, model: Any, cluster: Any, options: dict[str, Any]) -> Any:
    """``--one-gpu RATE``: the profile rescaled so that the variant's one-GPU prediction runs at
    the measured RATE samples/s (:func:`sgdnet.anchor.anchor_profile`); a note on stderr."""
    rate = getattr(args, "one_gpu", None)
    if rate is None:
        return model
    from .anchor import anchor_profile

    a = anchor_profile(args.variant, model, cluster, rate, granularity=args.granularity,
                       **options)
    print(f"sgdnet predict: anchored on {rate:g} samples/s on one GPU: compute times divided "
          f"by {a.speed:.4g}", file=sys.stderr)
    return a.profile


def _apply_framework(args: argparse.Namespace, clusters: list, options: dict[str, Any]
                     ) -> tuple[list, dict[str, Any]]:
    """``--framework`` / ``--transport``: the framework's variant and options under the -o
    ones (:func:`sgdnet.prediction.apply_framework`), set on ``args`` (``variant``, ``option``)
    so every net is built with them."""
    from .prediction import apply_framework

    framework = getattr(args, "framework", None)
    transport = getattr(args, "transport", "auto")
    transport = None if transport == "none" else transport
    if framework is None and transport in ("auto", None):
        if not args.variant:
            raise _UsageError("give --variant NAME (e.g. allreduce) or --framework NAME "
                              "(e.g. ddp)")
        return clusters, options
    out = []
    for c in clusters:
        variant, c2, opts = apply_framework(args.variant, c, options, framework, transport)
        out.append(c2)
    args.variant = variant
    args.option = list(opts.items())
    return out, opts


def _channels_hint(variant: str, options: dict[str, Any], cluster: Any) -> str | None:
    """A note when a scheme's all-reduce rings (or trees) use fewer NICs per node than the
    nodes have: NCCL runs a channel per NIC or more, sgdnet one channel unless told."""
    from .variants import get
    from .variants.rings import multi_gpu_nodes

    t = cluster.topology
    # the schemes with the collective options, local-sgd only while it all-reduces
    all_reduces = ("channels" in get(variant).option_names()
                   and options.get("sync", "allreduce") == "allreduce")
    if not all_reduces or not multi_gpu_nodes(cluster) or t.nics_per_node < 2:
        return None
    algorithm, channels = options.get("algorithm", "ring"), options.get("channels", 1)
    if channels == "auto" or algorithm not in ("ring", "dbtree") or channels >= t.nics_per_node:
        return None
    what = "ring" if algorithm == "ring" else "pair of trees"
    return (f"channels={channels}: each {what} crosses a node through one of its "
            f"{t.nics_per_node} NICs; NCCL runs one channel per NIC or more, so for an "
            f"NCCL-like prediction add -o channels={t.nics_per_node}")


def _build_net(args: argparse.Namespace, variant: str, model: Any, cluster: Any):
    from . import variants

    return variants.build(variant, model, cluster, granularity=args.granularity,
                          **dict(args.option))


def _cached_net(args: argparse.Namespace, model: Any, cluster: Any,
                options: dict[str, Any]) -> tuple[Any, dict]:
    """The compiled net of ``--variant`` on ``cluster`` and its meta, from the on-disk cache of
    compiled nets when a previous run built it (:mod:`sgdnet.netcache`), else built now."""
    from . import netcache

    cn, meta, hit = netcache.load_or_build(
        args.variant, model, cluster, args.granularity, options,
        lambda: _build_net(args, args.variant, model, cluster))
    note = meta.get("layer_fallback")
    if hit and isinstance(note, dict) and "built_bytes" in note:
        # the build that warned was an earlier run's: the same warning for the same net
        import warnings

        from .variants import get
        from .variants.budget import fallback_message

        warnings.warn(fallback_message(note, f"{get(args.variant).name} on {cluster.workers} "
                                             "workers"), UserWarning, stacklevel=2)
    return cn, meta


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
