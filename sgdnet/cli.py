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
with 1; ``sgdnet calibrate`` whose file is written but of low quality with 3; an interrupted run with 130; a closed stdout pipe (``| head``) with 141, silently. Set ``SGDNET_DEBUG=1`` to see the
traceback of an error.
"""

from __future__ import annotations

import argparse
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
from .cli_inputs import (
    _anchor,
    _apply_framework,
    _build_net,
    _cached_net,
    _channels_hint,
    _check_out_dir,
    _check_readable,
    _check_suffix,
    _cluster,
    _compiled,
    _link_desc,
    _load_model,
    _one_line,
    _prepare_engine,
    _pricing,
    _save_fig,
    _use_agg,
)
from .errors import SgdnetError

__all__ = ["main", "build_parser", "EXIT_USAGE", "EXIT_IO", "EXIT_FAILED_ROWS", "EXIT_PIPE"]


# ---------------------------------------------------------------------------- commands


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
    inst, price, train = _pricing(args)
    priced = inst is not None or price is not None or train is not None
    model = _load_model(args)
    if inst is not None and args.device is None:  # the instance's GPU
        from .workload.instances import instance_profile

        model, retimed = instance_profile(inst, model, getattr(args, "from_device", None))
        if not retimed:
            print(f"sgdnet predict: warning: {inst.retime_warning(model)}", file=sys.stderr)
    clusters = [_cluster(args, n) for n in args.workers]  # validate all before simulating
    options = dict(args.option)
    clusters, options = _apply_framework(args, clusters, options)
    model = _anchor(args, model, clusters[-1], options)
    show_progress = not args.no_progress and sys.stderr.isatty()
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    preds = []
    from . import netcache
    from .variants import get as _variant

    for cluster in clusters:  # a run simulate would refuse as too long: before any build (#43)
        if not netcache.holds(args.variant, model, cluster, args.granularity, options):
            from .variants.budget import spec_work_check

            spec_work_check(_variant(args.variant), model, cluster, args.granularity, options,
                            args.steps, args.warmup, args.replications)
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
        if priced:  # cost columns (sgdnet.workload.cost)
            pred.price_per_hour, pred.train_samples = price, train
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

    tta: list[dict[str, Any]] = []
    # time to accuracy, when asked (the options target_of reads; else not even imported)
    if any(getattr(args, k, None) is not None for k in ("target", "target_loss",
                                                       "target_accuracy")):
        from .accuracy.report import tta_rows

        tta = tta_rows(args, rows, model, clusters, options)
    deterministic = all(p.result.deterministic for _, p in preds)
    if args.json:
        given = args.cluster is None and inst is None  # else the file's / instance's figures
        c0 = clusters[-1]
        print(json.dumps({"variant": args.variant, "model": model.name,
                          "instance": None if inst is None else inst.name,
                          "bandwidth": args.bandwidth if given else
                          f"{c0.up_bw(0) * 8e-9:g}Gbps",
                          "bandwidth_Bps": parse_bw(args.bandwidth) if given else c0.up_bw(0),
                          "latency": args.latency if given else f"{c0.latency * 1e6:.4g}us",
                          "granularity": args.granularity,
                          "steps": args.steps, "warmup": args.warmup,
                          "replications": args.replications, "seed": args.seed,
                          "deterministic": deterministic,
                          "periodic": [p.result.periodic for _, p in preds],
                          "options": options, "rows": rows}, indent=2))
        return 0
    opts = "".join(f", {k}={v}" for k, v in options.items())
    net_desc = (f"cluster file {args.cluster}" if getattr(args, "cluster", None) is not None
                else _link_desc(args.bandwidth, args.latency))
    if inst is not None:
        net_desc = (f"{inst.name} ({inst.gpus_per_node} x {inst.device}, {inst.network}; "
                    f"transport {args.transport})")
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
    mem = any(r.get("memory_gb") is not None for r in rows)  # parameters' count known
    if mem:
        header.append("memory/GPU")
    from .workload.cost import cost_cells, cost_note

    cost_cols = cost_cells(rows) if priced else []
    header += [h for h, _ in cost_cols]
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
        if mem:
            cells.append("-" if r.get("memory_gb") is None else f"{r['memory_gb']:.1f} GB")
        cells += [cell(r) for _, cell in cost_cols]
        table.append(cells)
    print(_table(header, table, [True] * len(header)))
    print()
    if all(p.variant == "pipeline" for _, p in preds):  # bubble, MFU, TFLOP/s per GPU
        from .pipeline_metrics import pipeline_summary

        print("\n".join(f"pipeline, {pipeline_summary(p)}" for _, p in preds))
    if tta:
        from .accuracy.report import tta_table

        print(tta_table(rows), end="")
    hint = _channels_hint(args.variant, options, clusters[-1])
    if hint:
        print(f"note: {hint}")
    if priced:
        print(cost_note(inst, price, train))
    notes = [f"computed in {elapsed:.1f} s"]
    if args.plot is not None:
        notes.append(f"plot -> {args.plot}")
    if trace_note:
        notes.append(trace_note)
    print("; ".join(notes))
    return 0


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
    from .viz.draw import check_draw_size  # before a net of millions of elements is built

    check_draw_size(cluster.workers, model.n_layers, args.granularity)
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

    ax = viz.plot_table(rows, args.x, args.y, args.hue, title=args.title, facet=args.facet,
                        style=args.style, where=args.where)
    _save_fig(ax, args.out)
    panels = [a for a in ax.figure.axes if a.get_visible() and hasattr(a, "_sgdnet_series")]
    lines = sum(len(getattr(a, "_sgdnet_series", a.get_lines())) for a in panels)
    split = getattr(ax, "_sgdnet_split", {})
    by = ", ".join(f"{k} by {v}" for k, v in split.items() if v)
    print(f"{args.table}: {len(rows)} rows; {args.y} against {args.x}"
          f"{f' ({by})' if by else ''}: {len(panels)} panel(s), {lines} lines -> {args.out}")
    return 0


def cmd_choose(args: argparse.Namespace) -> int:
    """``sgdnet choose``: instance types x node counts x variants, the Pareto front."""
    from .choose import choose_from_args, format_choice

    if args.plot is not None:
        _check_suffix(args.plot, _FIG_SUFFIXES, "--plot")
        _check_out_dir(args.plot)
    compiling = _prepare_engine()
    choice = choose_from_args(args)
    _compiled(compiling)
    if args.json:
        print(json.dumps(choice.to_dict(), indent=2))
    else:
        print(format_choice(choice))
    if args.plot is not None:
        _use_agg()
        from .viz.pareto import plot_pareto

        ax = plot_pareto(choice.rows, choice.front_keys(), title=choice.title)
        _save_fig(ax, args.plot)
        if not args.json:
            print(f"plot -> {args.plot}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """``sgdnet plan``: the 3D-parallel plans that fit memory, fastest first."""
    from .plan_search import format_plans, plan_from_args

    _check_readable(args.cluster)
    compiling = _prepare_engine()
    study = plan_from_args(args)
    _compiled(compiling)
    print(json.dumps(study.to_dict(), indent=2) if args.json else format_plans(study))
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


def build_parser() -> argparse.ArgumentParser:
    """The ``sgdnet`` argument parser, each sub-command bound to its function (``args.func``)."""
    return _build_parser(_COMMAND_FUNCS)


#: the function of each sub-command (``args.func``)
_COMMAND_FUNCS = {"predict": cmd_predict, "study": cmd_study, "draw": cmd_draw,
                  "trace": cmd_trace, "plot": cmd_plot, "choose": cmd_choose, "plan": cmd_plan,
                  "models": cmd_models}


def _quick_exit() -> None:
    """Have the interpreter's shutdown skip its garbage collections over every object left
    (numba's, some 10^5: ~0.1 s of a warm ``sgdnet predict``): an exit handler calls
    :func:`gc.freeze`, which moves them out of the collector's reach. Nothing else changes: the
    other exit handlers run, streams are flushed, objects are freed as the modules are cleared.
    Only the command's own process does this (``main()`` reading ``sys.argv``)."""
    import atexit
    import gc

    atexit.register(gc.freeze)


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
    if argv is None:  # the command's own process (``sgdnet``, ``python -m sgdnet.cli``)
        _quick_exit()
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = f"sgdnet {argv[0]}" if argv and argv[0] in _COMMANDS else "sgdnet"
    try:
        # only the parsers this command needs (the testbed's import the testbed package)
        parser = _build_parser(_COMMAND_FUNCS, command=argv[0] if argv else None)
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return EXIT_USAGE
        status = int(args.func(args) or 0)
        from . import netcache

        netcache.flush()  # a compiled net still being written (while it simulated) is whole
        return status
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
