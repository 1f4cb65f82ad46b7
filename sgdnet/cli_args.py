"""The ``sgdnet`` command line: its argument parser, the value types of its options, its exit
statuses and defaults. The commands themselves are in :mod:`sgdnet.cli`."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from .errors import SgdnetError

__all__ = ["build_parser", "EXIT_USAGE", "EXIT_IO", "EXIT_FAILED_ROWS", "EXIT_PIPE",
           "EXIT_LOW_QUALITY"]

#: Exit status of bad arguments and invalid input.
EXIT_USAGE = 2
#: Exit status of a file that cannot be read or written.
EXIT_IO = 1
#: Exit status of a study some of whose rows failed (they are recorded in the table).
EXIT_FAILED_ROWS = 1
#: Exit status of ``sgdnet calibrate`` when the file was written but its quality is low (an
#: interval too wide, a bad fit, or the quiet gate flagged a job; ``calibration.problems``);
#: ``sgdnet.testbed.commands.EXIT_LOW_QUALITY`` is the same number.
EXIT_LOW_QUALITY = 3
#: Exit status when the reader of stdout went away (``| head``): 128 + SIGPIPE, as a shell
#: reports a command killed by it; nothing is printed.
EXIT_PIPE = 141

#: Defaults of ``sgdnet predict`` (kept small so the README command is quick).
PREDICT_STEPS = 300
PREDICT_WARMUP = 50
PREDICT_REPLICATIONS = 8
#: Defaults of ``sgdnet trace`` and of ``predict --trace`` (a short traced run).
TRACE_STEPS = 10
TRACE_WARMUP = 5

_COMMANDS = ("predict", "study", "draw", "trace", "plot", "choose", "plan", "models", "testbed",
             "calibrate")
_DRAW_SUFFIXES = (".png", ".svg", ".pdf", ".dot", ".gv", ".pnml", ".xml")
_FIG_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")


class _UsageError(Exception):
    """Bad command-line arguments (argparse's own complaints included).

    ``prog`` is the (sub-)command that complains; ``None``: the command being run.
    """

    def __init__(self, message: str, prog: str | None = None):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and go through :func:`main`."""

    def error(self, message: str) -> NoReturn:  # noqa: D102 - argparse hook
        raise _UsageError(f"{message} (see '{self.prog} --help')", prog=self.prog)


# ---------------------------------------------------------------------------- argument types
def _workers_list(text: str) -> list[int]:
    from .limits import limit

    out: list[int] = []
    for part in re.split(r"[,\s]+", text):  # '1 2' is 1 and 2, never 12
        if not part:
            continue
        try:
            n = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a list of worker counts; write e.g. 1,2,4,8") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"worker count {n} in {text!r} must be >= 1")
        if n > limit("max_workers"):
            raise argparse.ArgumentTypeError(
                f"worker count {n} in {text!r} exceeds the limit {limit('max_workers'):,} "
                "(raise it with SGDNET_MAX_WORKERS=N if this is deliberate)")
        if n in out:
            raise argparse.ArgumentTypeError(f"worker count {n} appears twice in {text!r}")
        out.append(n)
    if not out:
        raise argparse.ArgumentTypeError("give at least one worker count, e.g. 1,2,4,8")
    return out


def _one_worker_count(text: str) -> int:
    counts = _workers_list(text)
    if len(counts) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one worker count here, e.g. 4")
    return counts[0]


def _int_at_least(lo: int):
    """argparse type: an integer >= ``lo``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if n < lo:
            raise argparse.ArgumentTypeError(f"{n} must be >= {lo}")
        return n

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _with_unit(kind: str, example: str):
    """argparse type: a quantity that must carry its unit (a bare ``10`` would be 10 bytes/s or
    10 s, never what was meant); kept as typed, checked by :mod:`sgdnet.units`."""
    from . import units

    def parse(text: str) -> str:
        try:
            float(text)
        except ValueError:
            pass
        else:
            raise argparse.ArgumentTypeError(
                f"{text!r} has no unit; write e.g. {example}")
        try:
            units.parse_quantity(text, kind)
        except SgdnetError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text.strip()

    return parse


def _cv(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite CV >= 0 (e.g. 0.05)")
    return x


def _burst(text: str) -> float | str:
    """A token bucket's depth (``--burst 64KiB``), or ``file``: the --cluster file's."""
    if text.strip().lower() == "file":
        return "file"
    from .errors import UnitError
    from .units import nbytes

    try:
        x = nbytes(text, what="--burst")
    except UnitError as e:
        raise argparse.ArgumentTypeError(f"{e}; or 'file' for the --cluster file's link.burst") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r}: a token bucket holds a finite number of bytes")
    return x


def _positive_float(text: str) -> float:
    """A positive finite number (``--one-gpu 219``)."""
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number; write e.g. 219 "
                                         "(samples per second)")
    return x


def _speeds(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of speed factors; write e.g. 1,1,0.5,0.5") from None
    if not vals:
        raise argparse.ArgumentTypeError("give one speed factor per worker, e.g. 1,1,0.5,0.5")
    return vals


def _option(text: str) -> tuple[str, Any]:
    key, eq, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not eq or not key.isidentifier():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not KEY=VALUE; write e.g. --option staleness=3")
    import yaml

    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    if isinstance(value, (dict, list)) or value is None and raw.strip():
        value = raw
    return key, value


class _OptionFlag(argparse.Action):
    """A flag that is a variant option: ``--stage 3`` appends ``("stage", 3)`` to
    ``args.option``, as ``-o stage=3`` does (the variant checks the value)."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: D102
        key = option_string.lstrip("-").replace("-", "_")
        items = [kv for kv in (getattr(namespace, self.dest, None) or []) if kv[0] != key]
        setattr(namespace, self.dest, [*items, (key, values)])


def _choice(*values: str):
    """argparse type: one of ``values``."""

    def parse(text: str) -> str:
        if text not in values:
            raise argparse.ArgumentTypeError(f"{text!r}: use one of {', '.join(values)}")
        return text

    return parse


#: The sharded-data-parallel flags (issue #38), passed to the variant as options.
_VARIANT_FLAGS = (
    ("--sharding", _choice("full", "shard_grad_op", "no_shard", "hybrid"),
     "fsdp: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD (= -o sharding=...)"),
    ("--stage", _int_at_least(1), "zero: ZeRO stage 1, 2 or 3 (= -o stage=...)"),
    ("--dtype", _choice("fp32", "bf16", "fp16"),
     "zero/fsdp: dtype of parameters and gradients on the wire (= -o dtype=...)"),
    ("--reduce-dtype", _choice("fp32", "bf16", "fp16"),
     "zero/fsdp: dtype of the gradients' reduce-scatters / all-reduces (default --dtype's; "
     "FSDP MixedPrecision.reduce_dtype) (= -o reduce_dtype=...)"),
    ("--optimizer", _choice("sgd", "momentum", "adam", "adamw", "lamb"),
     "the optimizer whose step is timed on the shard each GPU owns (= -o optimizer=...)"),
    ("--accumulate", _int_at_least(1),
     "gradient accumulation over K micro-batches per step, any variant (= -o accumulate=K)"),
    # the 3D-parallel plan of the pipeline variant (issue #39)
    ("--tp", _int_at_least(1), "pipeline: tensor-parallel degree (= -o tp=...)"),
    ("--pp", _int_at_least(1), "pipeline: pipeline stages (= -o pp=...)"),
    ("--dp", _int_at_least(1), "pipeline: data-parallel replicas (default workers/(tp*pp))"),
    ("--microbatches", _int_at_least(1), "pipeline: micro-batches per iteration (default 4*pp, 1 if pp=1)"),
    ("--schedule", _choice("1f1b", "gpipe", "interleaved"),
     "pipeline: the schedule (= -o schedule=...)"),
    ("--virtual-stages", _int_at_least(1),
     "pipeline: model chunks per device, interleaved schedule (= -o virtual_stages=...)"),
)


# ---------------------------------------------------------------------------- parser
def _add_workload(p: argparse.ArgumentParser, *, variant: bool, workers_many: bool,
                  granularity: str) -> None:
    g = p.add_argument_group("workload and cluster")
    if variant:
        g.add_argument("--variant", required=True,
                       help="SGD variant (sync-ps, async-ps, ssp, allreduce, ...; "
                            "an unknown name lists them)")
    g.add_argument("--model", default="resnet50",
                   help="built-in model (see 'sgdnet models') or a profile .json path "
                        "(default: resnet50)")
    g.add_argument("--device", default=None, metavar="GPU",
                   help="re-time the model for this GPU with the compute model: a built-in "
                        "(K80, P100-SXM2, P100-PCIe, V100, V100-PCIe, T4, A10, L4, A100, "
                        "A100-40GB, A100-PCIe, H100, RTX3090) or a device file (.yaml/.json "
                        "of datasheet figures: name, fp32_tflops, mem_bw_gbs, "
                        "fp16_tensor_tflops, ...); needs a profile with ops")
    g.add_argument("--from-device", default=None, metavar="GPU",
                   help="the GPU the model's times were measured on, when the profile does "
                        "not name a built-in one (the PipeDream CNN profiles)")
    g.add_argument("--grad-dtype", choices=("fp32", "fp16", "bf16"), default=None,
                   help="dtype of the gradients as communicated (default: the profile's, "
                        "fp32; PyTorch AMP keeps fp32; fp16 for TF --use_fp16, Horovod "
                        "Compression.fp16, DDP fp16_compress_hook)")
    g.add_argument("--batch-size", type=_positive_int, default=None, metavar="B",
                   help="samples per worker per step (default: the profile's); re-timed by the "
                        "compute model when the profile has ops, else linearly")
    g.add_argument("--precision", choices=("fp32", "tf32", "fp16", "bf16"), default=None,
                   help="numeric precision to re-time the model for (default: the profile's)")
    if workers_many:
        g.add_argument("--workers", type=_workers_list, default=[1, 2, 4, 8],
                       help="comma-separated worker counts (default: 1,2,4,8)")
    else:
        g.add_argument("--workers", type=_one_worker_count, default=4,
                       help="number of workers (default: 4)")
    g.add_argument("--bandwidth", default="10Gbps", type=_with_unit("rate", "10Gbps or 1.25GB/s"),
                   help="per-host NIC bandwidth each way, e.g. 10Gbps, 25Gbit/s, 1.25GB/s "
                        "(default: 10Gbps)")
    g.add_argument("--latency", default="50us", type=_with_unit("time", "50us or 0.2ms"),
                   help="one-way message latency with its unit (default: 50us)")
    g.add_argument("--cluster", type=Path, default=None, metavar="FILE",
                   help="a cluster file (YAML, e.g. from 'sgdnet calibrate'): its link, PS and "
                        "update figures replace --bandwidth/--latency; an explicit "
                        "--ps-shards/--ps-placement overrides the file's")
    g.add_argument("--instance", default=None, metavar="NAME",
                   help="an instance type of the catalog (e.g. p5.48xlarge, a3-megagpu-8g, "
                        "ND96isr_H100_v5; an unknown name lists them): its GPUs, NVLink, NICs, "
                        "transport and price replace --bandwidth/--latency/--workers; with "
                        "--nodes")
    g.add_argument("--nodes", type=_workers_list if workers_many else _one_worker_count,
                   default=None, metavar="N",
                   help="instances of --instance" + (" (comma-separated counts, default "
                                                     "1,2,4)" if workers_many else
                                                     " (default 1)"))
    g.add_argument("--price-per-hour", type=_positive_float, default=None, metavar="USD",
                   help="dollars per instance-hour; overrides the catalog's or the cluster "
                        "file's price_per_hour")
    g.add_argument("--ps-shards", type=_positive_int, default=None, metavar="K",
                   help="parameter-server shards (default: 1, or the --cluster file's)")
    g.add_argument("--ps-placement", choices=("dedicated", "colocated"), default=None,
                   help="PS shards on their own hosts or beside workers (default: dedicated, "
                        "or the --cluster file's)")
    g.add_argument("--burst", type=_burst, default=None, metavar="BYTES|file",
                   help="a token bucket on every NIC link (tc tbf, a cloud burst credit): its "
                        "depth (64KiB, 64kB) or 'file' for the --cluster file's link.burst; "
                        "default none")
    g.add_argument("--speeds", type=_speeds, default=None, metavar="S0,S1,...",
                   help="per-worker speed factors (one per worker; needs a single --workers)")
    g.add_argument("--compute-cv", type=_cv, default=0.0, metavar="CV",
                   help="coefficient of variation of compute times (default: 0)")
    g.add_argument("--comm-cv", type=_cv, default=0.0, metavar="CV",
                   help="coefficient of variation of transfer times (default: 0)")
    g.add_argument("--comm-uses-compute", action="store_true",
                   help="with -o discipline=fifo (the earlier NIC model): a transfer also holds "
                        "the receiving host's compute for its link time; with flows (the default) "
                        "give a calibrated --cluster FILE with per-byte CPU costs instead")
    g.add_argument("--straggler", default=None, metavar="SPEC",
                   help="straggler model, e.g. 'step:p=0.1,factor=3' or "
                        "'markov:slow_factor=3,mean_fast=2s,mean_slow=500ms'")
    g.add_argument("--granularity", choices=("fine", "coarse", "coarse+"), default=granularity,
                   help=f"per-layer ('fine') or compute-then-communicate ('coarse') net, or "
                        f"'coarse+' (coarse with heuristics; sync-ps, async-ps, allreduce) "
                        f"(default: {granularity})")
    g.add_argument("-o", "--option", type=_option, action="append", default=[],
                   metavar="KEY=VALUE", help="a variant option, repeatable (e.g. staleness=3)")
    for flag, kind, what in _VARIANT_FLAGS:
        g.add_argument(flag, dest="option", type=kind, action=_OptionFlag, default=[],
                       metavar=flag[2:].upper(), help=what)


def _add_framework(p: argparse.ArgumentParser) -> None:
    """``--framework`` and ``--transport`` (``sgdnet predict``); with ``--framework`` the
    variant is the framework's, so ``--variant`` becomes optional."""
    from .workload.frameworks import FRAMEWORKS
    from .workload.transports import TRANSPORTS

    for a in p._actions:
        if "--variant" in a.option_strings:
            a.required = False
            a.help = (a.help or "") + "; optional with --framework"
    g = p.add_argument_group("framework")
    g.add_argument("--framework", choices=sorted(FRAMEWORKS), default=None,
                   help="run the framework's variant with its documented defaults (buckets, "
                        "fusion, NCCL's algorithm choice, aggregation, transport); -o options "
                        "win over them")
    g.add_argument("--transport", choices=("auto", "none", *sorted(TRANSPORTS)), default="auto",
                   help="NIC goodput and latency of the transport: 'auto' (the framework's "
                        "own, e.g. tcp for gRPC/ps-lite; none without --framework), 'none', "
                        f"or one of {', '.join(sorted(TRANSPORTS))}")
    g.add_argument("--one-gpu", type=_positive_float, default=None, metavar="RATE",
                   help="the measured one-GPU throughput (samples/s at the profile's batch, or "
                        "--batch-size): the profile's compute is rescaled so that the one-GPU "
                        "prediction of the same variant, options and node equals it")


def _add_training(p: argparse.ArgumentParser) -> None:
    """``--samples`` or ``--epochs`` with ``--dataset-size``: the training length."""
    g = p.add_argument_group("training length (time and cost to train)")
    g.add_argument("--samples", type=_positive_float, default=None, metavar="S",
                   help="samples to train, e.g. 1.15e8 (90 epochs of ImageNet-1k)")
    g.add_argument("--epochs", type=_positive_float, default=None, metavar="E",
                   help="epochs, with --dataset-size")
    g.add_argument("--dataset-size", type=_positive_float, default=None, metavar="D",
                   help="samples per epoch, with --epochs (ImageNet-1k: 1281167)")


def _target_spec(text: str) -> str:
    """``--target digits:acc=0.95``: checked here (:func:`sgdnet.accuracy.target.parse_target`),
    kept as text (the other options fill what it leaves out)."""
    from .accuracy.target import parse_target
    from .errors import SgdnetError

    try:
        parse_target(text)
    except SgdnetError as e:
        raise argparse.ArgumentTypeError(str(e.args[0] if e.args else e)) from None
    return text


def _add_target(p: argparse.ArgumentParser) -> None:
    """``--target-loss`` / ``--target-accuracy`` with ``--task`` (``sgdnet predict``): the time
    to accuracy (:func:`sgdnet.accuracy.time_to_accuracy`)."""
    g = p.add_argument_group("time to accuracy (the run's update schedule replayed on a task)")
    t = g.add_mutually_exclusive_group()
    t.add_argument("--target", type=_target_spec, default=None, metavar="TASK:KEY=V",
                   help="task and target in one, e.g. digits:acc=0.95 or "
                        "logreg:loss=0.34,lr=0.2 (keys loss, acc, lr, window, seed, eval_every)")
    t.add_argument("--target-loss", type=_positive_float, default=None, metavar="L",
                   help="held-out loss to reach, e.g. 0.34 (task logreg)")
    t.add_argument("--target-accuracy", type=_positive_float, default=None, metavar="A",
                   help="held-out accuracy to reach, a fraction, e.g. 0.84")
    g.add_argument("--task", default=None, metavar="NAME",
                   help="the task replayed: logreg, mlp (numpy teacher-student tasks) or "
                        "digits (with scikit-learn) (default: logreg)")
    g.add_argument("--lr", type=_positive_float, default=None, metavar="LR",
                   help="learning rate of every update (default: the task's)")
    g.add_argument("--target-window", type=_positive_int, default=1, metavar="N",
                   help="the target counts when the mean of the last N evaluations (one per "
                        "round of the workers) reaches it (default: 1, the first crossing)")
    g.add_argument("--tta-method", choices=("auto", "replay", "noise"), default="auto",
                   help="'replay' the schedule, the 'noise'-scale model (sync-ps, allreduce), "
                        "or 'auto' (default)")


def _add_sim(p: argparse.ArgumentParser, steps: int, warmup: int, replications: int | None) -> None:
    g = p.add_argument_group("simulation")
    g.add_argument("--steps", type=_positive_int, default=steps,
                   help=f"steps measured per replication (default: {steps})")
    g.add_argument("--warmup", type=_nonneg_int, default=warmup,
                   help=f"warm-up steps discarded first (default: {warmup})")
    if replications is not None:
        g.add_argument("--replications", type=_positive_int, default=replications,
                       help=f"independent replications, for the CIs (default: {replications})")
    g.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default: 0)")


def build_parser(commands: Mapping[str, Callable[[argparse.Namespace], int]] | None = None,
                 *, command: str | None = None) -> argparse.ArgumentParser:
    """The ``sgdnet`` argument parser (sub-commands predict, study, draw, trace, plot, models,
    testbed, calibrate).

    Parameters
    ----------
    commands : mapping, optional
        The function run for each sub-command, by name (``args.func``); :func:`sgdnet.cli.build_parser`
        passes the CLI's own. Without it the parser only parses.
    command : str, optional
        The sub-command about to be parsed (the first argument): when it is one of the others,
        ``testbed`` and ``calibrate`` are left out, whose parsers import the testbed package
        (fits, network namespaces: ~0.1 s of a ``sgdnet predict`` that needs none of it; issue
        #41). None or anything else: every sub-command (``sgdnet --help`` lists them all).
    """
    commands = commands or {}
    from ._version import __version__

    top = _Parser(prog="sgdnet",
                  description="Predict the throughput of distributed SGD with stochastic timed "
                              "Petri nets and a Monte Carlo engine.")
    top.add_argument("--version", action="version", version=f"sgdnet {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("predict", help="throughput of one variant over worker counts",
                       description="Simulate one SGD variant on a model and cluster for each "
                                   "worker count and print throughput with 95% confidence "
                                   "intervals, speed-up and utilisations.")
    _add_workload(p, variant=True, workers_many=True, granularity="fine")
    _add_framework(p)
    _add_sim(p, PREDICT_STEPS, PREDICT_WARMUP, PREDICT_REPLICATIONS)
    g = p.add_argument_group("output")
    g.add_argument("--plot", type=Path, metavar="FILE",
                   help="write the scaling curve (samples/s vs workers) to FILE (.png/.svg/.pdf)")
    g.add_argument("--trace", type=Path, metavar="FILE",
                   help=f"write a Chrome/Perfetto trace of a short run ({TRACE_STEPS} steps) "
                        "at the largest worker count to FILE (.json)")
    g.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    g.add_argument("--no-progress", action="store_true",
                   help="no progress bar (shown on a terminal for runs longer than a moment)")
    _add_training(p)
    _add_target(p)
    p.set_defaults(func=commands.get("predict"))

    p = sub.add_parser("study", help="run a batch study from a YAML/TOML config",
                       description="Run a Study (grid x replications) from a YAML or TOML file, "
                                   "streaming one row per configuration into a CSV or JSON Lines "
                                   "table; rerunning resumes where it stopped.")
    p.add_argument("config", type=Path, help="study config (.yaml, .yml or .toml)")
    p.add_argument("--out", type=Path, default=None,
                   help="result table (.csv or .jsonl); default: the config's 'out'")
    p.add_argument("--executor", choices=("local", "serial", "dask"), default="local",
                   help="local processes (default), this process, or a Dask cluster")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="Dask scheduler address, e.g. tcp://scheduler:8786 (with --executor dask; "
                        "default: a local Dask cluster)")
    p.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                   help="local processes / local Dask workers (default: all cores)")
    p.add_argument("--fresh", action="store_true",
                   help="start the table afresh instead of resuming")
    p.add_argument("--retry-errors", action="store_true", help="rerun rows recorded with an error")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=commands.get("study"))

    p = sub.add_parser("draw", help="draw a variant's Petri net (PNG/SVG/PDF, DOT or PNML)",
                       description="Build a variant's net and write it as a drawing, Graphviz "
                                   "DOT text or PNML, by the suffix of --out.")
    p.add_argument("variant", help="SGD variant name")
    _add_workload(p, variant=False, workers_many=False, granularity="coarse")
    p.add_argument("--out", type=Path, required=True,
                   help="output file: .png/.svg/.pdf (drawing), .dot (Graphviz), .pnml (PNML)")
    p.set_defaults(func=commands.get("draw"))

    p = sub.add_parser("trace", help="simulate briefly and export a trace (Perfetto or Gantt)",
                       description="Simulate one replication with tracing and write a Chrome "
                                   "Trace Event JSON (open in https://ui.perfetto.dev) or, for "
                                   ".png/.svg/.pdf, a Gantt timeline.")
    _add_workload(p, variant=True, workers_many=False, granularity="fine")
    _add_sim(p, TRACE_STEPS, TRACE_WARMUP, None)
    p.add_argument("--out", type=Path, required=True,
                   help="trace.json (Chrome trace) or a figure (.png/.svg/.pdf: timeline)")
    p.set_defaults(func=commands.get("trace"))

    p = sub.add_parser("plot", help="plot a study table (CSV / JSON Lines) as lines",
                       description="Plot a study's result table: --y (with its 95% CI band) "
                                   "against --x, one line per value of --hue. Against "
                                   "cluster.workers it is the scaling plot (log axes, ideal "
                                   "line); a unit column such as cluster.bandwidth is plotted by "
                                   "its numeric twin.")
    p.add_argument("table", type=Path, help="study table (.csv or .jsonl) from 'sgdnet study'")
    p.add_argument("--x", required=True, metavar="COLUMN",
                   help="x column, e.g. cluster.workers or cluster.bandwidth")
    p.add_argument("--y", default="samples_per_s", metavar="METRIC",
                   help="metric: samples_per_s (default), steps_per_s or any numeric column")
    p.add_argument("--hue", default=None, metavar="COLUMN",
                   help="column splitting rows into lines by colour (default: variant, when "
                        "it varies)")
    p.add_argument("--facet", default=None, metavar="COLUMN",
                   help="column splitting rows into panels (default: the next axis that varies)")
    p.add_argument("--style", default=None, metavar="COLUMN",
                   help="column splitting lines by line style (default: the next axis that "
                        "varies); rows still differing in another column are refused")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="keep the rows whose COLUMN is VALUE (repeatable), e.g. "
                        "--where cluster.straggler=")
    p.add_argument("--title", default=None)
    p.add_argument("--out", type=Path, required=True, help="figure file (.png/.svg/.pdf)")
    p.set_defaults(func=commands.get("plot"))

    p = sub.add_parser("choose", help="instance types x node counts x variants: the Pareto "
                                      "front of time and cost to train",
                       description="Predict every instance type x node count x variant given, "
                                   "keep those within --budget / --deadline, and print the "
                                   "Pareto front of time to train against cost to train "
                                   "(mean of the replications, 95% CIs in the table).")
    p.add_argument("--model", default="resnet50", help="built-in model or profile .json")
    p.add_argument("--instances", default=None, metavar="A,B,...",
                   help="instance types of the catalog (default: every priced one)")
    p.add_argument("--nodes", type=_workers_list, default=[1, 2, 4], metavar="N,...",
                   help="instance counts (default: 1,2,4)")
    p.add_argument("--variants", default="allreduce", metavar="V,...",
                   help="SGD variants (default: allreduce)")
    p.add_argument("--framework", default=None, help="a framework instead of --variants "
                                                      "(ddp, horovod, ...)")
    p.add_argument("--granularity", choices=("fine", "coarse", "coarse+"), default="coarse",
                   help="net granularity (default: coarse)")
    p.add_argument("--batch-size", type=_positive_int, default=None, metavar="B",
                   help="samples per GPU per step (default: the profile's)")
    p.add_argument("--precision", choices=("fp32", "tf32", "fp16", "bf16"), default=None,
                   help="numeric precision (default: the profile's)")
    p.add_argument("--budget", type=_positive_float, default=None, metavar="USD",
                   help="keep configurations whose cost to train is at most USD")
    p.add_argument("--deadline", type=_positive_float, default=None, metavar="HOURS",
                   help="keep configurations whose time to train is at most HOURS")
    p.add_argument("--compute-cv", type=_cv, default=0.05, metavar="CV",
                   help="coefficient of variation of compute times, the spread the CIs come "
                        "from (default: 0.05)")
    _add_training(p)
    _add_sim(p, 100, 10, 4)
    p.add_argument("--plot", type=Path, default=None, metavar="FILE",
                   help="draw cost against time with the front to FILE (.png/.svg/.pdf)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=commands.get("choose"))

    p = sub.add_parser("plan", help="3D-parallel plans (tp x pp x dp x micro-batches): the "
                                    "fastest that fits memory",
                       description="Enumerate the valid tensor x pipeline x data parallel plans "
                                   "of a model on the GPUs (tp dividing the GPUs per node, pp "
                                   "the blocks), refuse those whose memory per GPU exceeds the "
                                   "device's, predict the others (pipeline variant) and print "
                                   "them by samples/s, the fastest that fits marked *.")
    p.add_argument("--model", default="gpt2_xl", help="built-in model or profile .json "
                                                      "(default: gpt2_xl)")
    p.add_argument("--cluster", type=Path, default=None, metavar="FILE",
                   help="a cluster file with a topology, --nodes of its nodes")
    p.add_argument("--instance", default=None, metavar="NAME",
                   help="an instance type of the catalog (e.g. p4d.24xlarge), --nodes of them")
    p.add_argument("--nodes", type=_positive_int, default=None, metavar="N",
                   help="nodes (instances) of --cluster / --instance")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="GPUs of a cluster without a file or instance (no topology: tp=1)")
    for flag, what in (("--tp", "tensor-parallel degrees (default: divisors of the GPUs per "
                                "node)"),
                       ("--pp", "pipeline depths (default: divisors of the blocks)"),
                       ("--microbatches", "micro-batches per iteration (default: 4*pp, 1 "
                                          "without pipelining)")):
        p.add_argument(flag, type=_workers_list, default=None, metavar="A,B,...", help=what)
    p.add_argument("--global-batch", type=_positive_int, default=None, metavar="B",
                   help="samples per iteration instead of --microbatches: m = B/(dp*batch)")
    p.add_argument("--schedules", default="1f1b", metavar="S,...",
                   help="schedules among 1f1b, gpipe, interleaved (default: 1f1b)")
    p.add_argument("--virtual-stages", type=_int_at_least(2), default=2, metavar="V",
                   help="model chunks per device of the interleaved schedule (default: 2)")
    p.add_argument("--device", default=None, metavar="GPU",
                   help="the GPU whose memory the plans must fit (default: the model's or "
                        "the instance's)")
    p.add_argument("--batch-size", type=_positive_int, default=None, metavar="B",
                   help="samples per micro-batch (default: the profile's), re-timed")
    p.add_argument("--precision", choices=("fp32", "tf32", "fp16", "bf16"), default=None,
                   help="numeric precision to re-time the model for (default: the profile's)")
    p.add_argument("--granularity", choices=("fine", "coarse"), default="coarse",
                   help="net granularity (default: coarse, quick)")
    p.add_argument("-o", "--option", type=_option, action="append", default=[],
                   metavar="KEY=VALUE", help="another pipeline option, repeatable (e.g. "
                                             "recompute=true, zero_stage=1)")
    _add_sim(p, 3, 1, 4)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=commands.get("plan"))

    p = sub.add_parser("models", help="list the built-in model profiles with their totals",
                       description="List the built-in model profiles: layers, batch size, "
                                   "forward/backward time per step and gradient size.")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=commands.get("models"))

    if command not in _COMMANDS or command in ("testbed", "calibrate"):
        from .testbed.commands import add_parsers as _add_testbed_parsers

        _add_testbed_parsers(sub)  # sgdnet testbed, sgdnet calibrate
    return top
