"""The ``sgdnet`` command: predict, study, draw, trace, plot, models, testbed, calibrate.

::

    sgdnet predict --model resnet50 --variant sync-ps --workers 1,2,4,8 --bandwidth 10Gbps
    sgdnet study examples/study.yaml --out results.csv [--executor dask --scheduler ADDR]
    sgdnet draw sync-ps --workers 4 --out net.png        # or net.svg, net.dot, net.pnml
    sgdnet trace --variant allreduce --workers 4 --out trace.json   # open in ui.perfetto.dev
    sgdnet plot results.csv --x cluster.workers --hue variant --out scaling.png
    sgdnet models

Every sub-command has ``--help``. Bad arguments and invalid input (an :class:`~sgdnet.SgdnetError`)
print one line ``sgdnet <command>: error: ...`` on stderr and exit with status 2; an unreadable
or unwritable file (a missing output directory included: no directory is ever created) exits
with 1; an interrupted run with 130; a closed stdout pipe (``| head``) with 141, silently. Set ``SGDNET_DEBUG=1`` to see the
traceback of an error.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._text import fmt as _fmt
from ._text import pct as _pct
from ._text import plus_minus as _pm
from ._text import table as _table
from .cli_args import (  # noqa: F401 - exit statuses and defaults are re-exported from here
    _COMMANDS,
    _DRAW_SUFFIXES,
    _FIG_SUFFIXES,
    EXIT_FAILED_ROWS,
    EXIT_IO,
    EXIT_PIPE,
    EXIT_USAGE,
    PREDICT_REPLICATIONS,
    PREDICT_STEPS,
    PREDICT_WARMUP,
    TRACE_STEPS,
    TRACE_WARMUP,
    _UsageError,
)
from .cli_args import build_parser as _build_parser
from .errors import SgdnetError

__all__ = ["main", "build_parser", "EXIT_USAGE", "EXIT_IO", "EXIT_FAILED_ROWS", "EXIT_PIPE"]

# ---------------------------------------------------------------------------- helpers
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
    if getattr(args, "cluster", None) is not None:
        extra = {"comm_uses_compute": True} if args.comm_uses_compute else {}
        return Cluster.from_file(args.cluster, workers, speeds=args.speeds,
                                 compute_cv=args.compute_cv, comm_cv=args.comm_cv,
                                 straggler=straggler, **ps, **extra)
    return Cluster(workers=workers, bandwidth=args.bandwidth, latency=args.latency,
                   speeds=args.speeds, compute_cv=args.compute_cv, comm_cv=args.comm_cv,
                   straggler=straggler, comm_uses_compute=args.comm_uses_compute, **ps)




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
    """An input file must be a readable file: a missing or unreadable one (or a directory) is a
    file error, exit status 1, as the README says."""
    if path is None:
        return
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


# ---------------------------------------------------------------------------- commands
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


def cmd_predict(args: argparse.Namespace) -> int:
    """``sgdnet predict``: one row per worker count."""
    from .prediction import predict_net, summarize
    from .units import bandwidth as parse_bw

    if args.speeds is not None and len(args.workers) != 1:
        raise _UsageError("--speeds needs a single --workers count "
                          f"(got {','.join(map(str, args.workers))})")
    for f, suffixes, flag in ((args.plot, _FIG_SUFFIXES, "--plot"),
                              (args.trace, (".json",), "--trace")):
        if f is not None:
            _check_suffix(f, suffixes, flag)
    parse_bw(args.bandwidth, what="--bandwidth")
    _check_out_dir(args.plot)
    _check_out_dir(args.trace)
    model = _load_model(args)
    clusters = [_cluster(args, n) for n in args.workers]  # validate all before simulating
    options = dict(args.option)
    clusters, options = _apply_framework(args, clusters, options)
    model = _anchor(args, model, clusters[-1], options)
    show_progress = not args.no_progress and sys.stderr.isatty()
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    preds = []
    first = _cached_net(args, model, clusters[0], options)  # bad variant/options: error before JIT
    compiling = _prepare_engine()
    for i, cluster in enumerate(clusters):
        cn, meta = first if i == 0 else _cached_net(args, model, cluster, options)
        pred = predict_net(args.variant, model, cluster, cn, meta=meta,
                           granularity=args.granularity, steps=args.steps, warmup=args.warmup,
                           replications=args.replications, seed=args.seed,
                           progress=show_progress, **options)
        _compiled(compiling)
        compiling = None
        row = {"workers": cluster.workers, **summarize(pred)}
        rows.append(row)
        preds.append((cluster.workers, pred))
    base = rows[0]
    for row in rows:
        b, x = base.get("samples_per_s_mean"), row.get("samples_per_s_mean")
        su = x / b * 1.0 if b and x is not None else None
        row["speed_up"] = su
        row["efficiency"] = su * base["workers"] / row["workers"] if su is not None else None
    elapsed = time.perf_counter() - t0

    if args.plot is not None:
        _use_agg()
        from . import viz

        points = [{"workers": w, "samples_per_s": p.samples_per_s} for w, p in preds]
        ax = viz.plot_scaling({args.variant: points},
                              title=f"{args.variant} on {model.name}, {args.bandwidth}")
        _save_fig(ax, args.plot)
    if args.trace is not None:
        n = clusters[-1].workers
        _write_trace(args, model, clusters[-1], args.trace, TRACE_STEPS, TRACE_WARMUP)
        trace_note = f"trace of {n} workers, {TRACE_STEPS} steps -> {args.trace}"
    else:
        trace_note = None

    deterministic = all(p.result.deterministic for _, p in preds)
    if args.json:
        print(json.dumps({"variant": args.variant, "model": model.name,
                          "bandwidth": args.bandwidth, "bandwidth_Bps": parse_bw(args.bandwidth),
                          "latency": args.latency, "granularity": args.granularity,
                          "steps": args.steps, "warmup": args.warmup,
                          "replications": args.replications, "seed": args.seed,
                          "deterministic": deterministic,
                          "periodic": [p.result.periodic for _, p in preds],
                          "options": options, "rows": rows}, indent=2))
        return 0
    opts = "".join(f", {k}={v}" for k, v in options.items())
    net_desc = (f"cluster file {args.cluster}" if getattr(args, "cluster", None) is not None
                else _link_desc(args.bandwidth, args.latency))
    print(f"{args.variant} | {model.name} (batch {model.batch_size} per worker) | "
          f"{net_desc} | {args.granularity}-grained{opts}")
    if deterministic:
        print(f"{args.steps} steps after {args.warmup} warm-up; the model has no randomness, so it "
              f"was simulated once (all {args.replications} replications would be identical)")
        if all(p.result.periodic for _, p in preds):
            print("the run settles into a repeating cycle: the engine played its first cycles and "
                  "skipped the repeats (exact to rounding)")
    else:
        print(f"{args.steps} steps after {args.warmup} warm-up, {args.replications} replications, "
              f"seed {args.seed}; mean ± 95% CI half-width across replications")
    print()
    gpu = any("util_gpu_mean" in r for r in rows)
    nic_cols = [c for c in ("util_nic_up_max", "util_nic_down_max") if any(c in r for r in rows)]
    header = ["workers", "steps/s", "samples/s", f"speed-up (vs {base['workers']})",
              "efficiency"]
    if gpu:
        header.append("GPU util")
    if nic_cols:
        header.append("busiest NIC")
    table = []
    for r in rows:
        cells = [str(r["workers"]),
                 _pm(r.get("steps_per_s_mean"), r.get("steps_per_s_lo"), r.get("steps_per_s_hi")),
                 _pm(r.get("samples_per_s_mean"), r.get("samples_per_s_lo"),
                     r.get("samples_per_s_hi")),
                 _fmt(r.get("speed_up"), 3) + "x" if r.get("speed_up") is not None else "-",
                 _pct(r.get("efficiency"))]
        if gpu:
            cells.append(_pct(r.get("util_gpu_mean")))
        if nic_cols:
            vals = [r[c] for c in nic_cols if r.get(c) is not None]
            cells.append(_pct(max(vals)) if vals else "-")
        table.append(cells)
    print(_table(header, table, [True] * len(header)))
    print()
    hint = _channels_hint(args.variant, options, clusters[-1])
    if hint:
        print(f"note: {hint}")
    notes = [f"computed in {elapsed:.1f} s"]
    if args.plot is not None:
        notes.append(f"plot -> {args.plot}")
    if trace_note:
        notes.append(trace_note)
    print("; ".join(notes))
    return 0


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

    cn, meta, _ = netcache.load_or_build(
        args.variant, model, cluster, args.granularity, options,
        lambda: _build_net(args, args.variant, model, cluster))
    return cn, meta


def _write_trace(args: argparse.Namespace, model: Any, cluster: Any, out: Path, steps: int,
                 warmup: int) -> Any:
    from .engine import simulate

    net, _ = _cached_net(args, model, cluster, dict(args.option))
    compiling = _prepare_engine()
    result = simulate(net, steps=steps, warmup=warmup, replications=1, seed=args.seed,
                      trace=True, parallel=False)
    _compiled(compiling)
    if out.suffix.lower() == ".json":
        from . import viz

        viz.to_chrome_trace(result, out)
    else:
        _use_agg()
        from . import viz

        ax = viz.timeline(result, title=f"{args.variant} on {model.name}, "
                                        f"{cluster.workers} workers")
        _save_fig(ax, out)
    return result


def cmd_trace(args: argparse.Namespace) -> int:
    """``sgdnet trace``: a short traced run written as a Chrome trace or a timeline."""
    _check_suffix(args.out, (".json", *_FIG_SUFFIXES), "--out")
    _check_out_dir(args.out)
    model = _load_model(args)
    cluster = _cluster(args, args.workers)
    result = _write_trace(args, model, cluster, args.out, args.steps, args.warmup)
    n_ops = 0 if result.trace is None else len(result.trace)
    what = "Chrome trace (open in https://ui.perfetto.dev)" if args.out.suffix.lower() == ".json" \
        else "timeline"
    print(f"{args.variant} | {model.name} | {cluster.workers} workers | {args.granularity}-grained:"
          f" {args.steps} steps after {args.warmup} warm-up, seed {args.seed}")
    print(f"{n_ops} operations traced, {float(result.throughput.mean):.4g} steps/s; "
          f"{what} -> {args.out}")
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    """``sgdnet draw``: the net as a drawing, DOT or PNML."""
    _check_suffix(args.out, _DRAW_SUFFIXES, "--out")
    _check_out_dir(args.out)
    model = _load_model(args)
    cluster = _cluster(args, args.workers)
    net = _build_net(args, args.variant, model, cluster)
    suffix = args.out.suffix.lower()
    if suffix in (".dot", ".gv"):
        from .viz import to_dot

        to_dot(net, args.out)
        kind = "Graphviz DOT (render with: dot -Tpng)"
    elif suffix in (".pnml", ".xml"):
        from .net.pnml import to_pnml

        to_pnml(net, args.out)
        kind = "PNML"
    else:
        _use_agg()
        from .limits import limit
        from .viz.draw import DRAW_DPI, draw_net

        ax = draw_net(net)
        w, h = ax.figure.get_size_inches() * DRAW_DPI
        _save_fig(ax, args.out)
        capped = max(w, h) >= limit("max_drawing_px") - 1
        kind = (f"drawing, about {w:.0f} x {h:.0f} px"
                + ("; capped at max_drawing_px, so small: for detail use --granularity coarse, "
                   "fewer --workers, or a .svg/.dot output" if capped else ""))
    print(f"{net.name}: {len(net.places)} places, {len(net.transitions)} transitions, "
          f"{len(net.resources)} resources; {kind} -> {args.out}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``sgdnet plot``: a study table as lines (``viz.plot_table``)."""
    from .study import read_table

    _check_suffix(args.out, _FIG_SUFFIXES, "--out")
    _check_out_dir(args.out)
    _check_readable(args.table)
    rows = read_table(args.table)
    _use_agg()
    from . import viz

    ax = viz.plot_table(rows, args.x, args.y, args.hue, title=args.title)
    _save_fig(ax, args.out)
    lines = len(ax.get_lines())
    print(f"{args.table}: {len(rows)} rows; {args.y} against {args.x}"
          f"{f' by {args.hue}' if args.hue else ''} ({lines} lines) -> {args.out}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """``sgdnet models``: the built-in profiles with their totals."""
    from . import models

    rows = []
    for name in models.names():
        m = models.load(name)
        rows.append({"name": name, "layers": m.n_layers, "batch_size": m.batch_size,
                     "forward_s": m.forward_s, "backward_s": m.backward_s,
                     "step_s": m.step_s, "grad_bytes": m.grad_bytes, "device": m.device,
                     "precision": m.precision})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ["model", "layers", "batch", "forward ms", "backward ms", "step ms", "gradients MB"]
    table = [[r["name"], str(r["layers"]), str(r["batch_size"]),
              f"{1e3 * r['forward_s']:.1f}", f"{1e3 * r['backward_s']:.1f}",
              f"{1e3 * r['step_s']:.1f}", f"{r['grad_bytes'] / 1e6:.1f}"]
             for r in rows]
    print(_table(header, table, [False] + [True] * 6))
    devices = sorted({r["device"] for r in rows})
    print(f"\n{len(rows)} models; times per step at the listed batch size on: "
          f"{'; '.join(devices)}; step = forward + backward + the loss and optimizer costs "
          "a profile states outside its layers. Details: sgdnet.models.load(name).")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    """``sgdnet study``: run a config file into a table, resuming."""
    from .study import Study, read_table

    if args.scheduler and args.executor != "dask":
        raise _UsageError(f"--scheduler {args.scheduler} needs --executor dask "
                          f"(got --executor {args.executor})")
    _check_readable(args.config)
    study = Study.from_file(args.config)
    out = args.out or study.out
    if out is None:
        raise _UsageError("no output table; give --out results.csv or put "
                          "'out: results.csv' in the config")
    _check_out_dir(Path(out))
    print(f"{study!r} -> {out} ({args.executor} executor)", flush=True)
    from .study.table import _format_of

    _format_of(Path(out))  # an output the study cannot write: its error before any compile
    # rows computed here or on local processes: compile once, here (none left: no compile)
    if args.executor != "dask" and study.pending(out, resume=not args.fresh,
                                                 retry_errors=args.retry_errors):
        compiling = _prepare_engine()
        if compiling is not None:
            from .engine.api import ensure_kernel

            ensure_kernel()
            _compiled(compiling)
    try:
        result = study.run(args.executor, out=out, n_jobs=args.jobs, scheduler=args.scheduler,
                           progress=False if args.no_progress else None, resume=not args.fresh,
                           retry_errors=args.retry_errors)
    except KeyboardInterrupt:
        try:
            kept = f"{len(read_table(out))} rows are in {out}"
        except (SgdnetError, OSError):
            kept = f"the finished rows are in {out}"
        print(f"sgdnet study: interrupted; {kept}; rerun the same command to compute only the "
              "missing rows", file=sys.stderr)
        return 130
    failed = result.failed
    print(f"{len(result)} rows in {out}: {result.ran} computed in {result.elapsed_s:.1f} s, "
          f"{result.resumed} resumed from the file, {len(failed)} failed")
    if failed:
        first = failed[0]["error"]
        print(f"sgdnet study: {len(failed)} row(s) failed (see the 'error' column); first: "
              f"{first}", file=sys.stderr)
        return EXIT_FAILED_ROWS
    return 0


# ---------------------------------------------------------------------------- entry point
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def build_parser() -> argparse.ArgumentParser:
    """The ``sgdnet`` argument parser, each sub-command bound to its function (``args.func``)."""
    return _build_parser({"predict": cmd_predict, "study": cmd_study, "draw": cmd_draw, "trace": cmd_trace, "plot": cmd_plot, "models": cmd_models})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``sgdnet`` command; return its exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments after the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on bad arguments or input, 1 on a file error or failed study rows, 130
        when interrupted.
    """
    debug = bool(os.environ.get("SGDNET_DEBUG"))
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = f"sgdnet {argv[0]}" if argv and argv[0] in _COMMANDS else "sgdnet"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return EXIT_USAGE
        return int(args.func(args) or 0)
    except _UsageError as e:
        if debug:
            raise
        print(f"{e.prog or cmd}: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except SgdnetError as e:
        if debug:
            raise
        print(f"{cmd}: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader closed the pipe (`sgdnet predict --json | head`): not an error to report;
        # point stdout at /dev/null so the interpreter's final flush stays quiet too
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_PIPE
    except OSError as e:
        if debug:
            raise
        where = f" {e.filename!s}:" if getattr(e, "filename", None) else ""
        print(f"{cmd}: error:{where} {_one_line(e.strerror or str(e))}", file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        print("sgdnet: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
