"""Check sgdnet's all-reduce predictions against a real data-parallel training run on this machine.

What it does (see ``docs/validation.md`` for the reading of the results):

1. **Profile** each model (a small MLP and a small CNN on synthetic data) in this process with
   one thread: :func:`sgdnet.profiling.profile_module` for forward/backward per layer, plus the
   optimizer cost (``SGD.step`` + ``zero_grad``) timed separately and turned into
   ``Cluster.update_s_per_byte``.
2. **Measure one worker**: the plain training loop (forward, loss, backward, step) in this
   process, steps/s over ``--steps`` steps after warm-up, ``--reps`` times.
3. **Launch two worker processes** on 127.0.0.1 (``torch.distributed``, gloo, one thread
   each) and, in one process group:

   * micro-benchmark ``all_reduce`` of float32 tensors of several sizes (in every round of
     the runs below, median over rounds) and fit the ring
     cost ``t(S) = 2(n-1) alpha + 2(n-1)/n * S/B`` (for n = 2: ``2 alpha + S/B``) by least
     squares weighted by ``1/t`` (relative residuals, so the small sizes fix ``alpha`` and
     the large ones ``B``);
   * train each model, ``--reps`` times, in four modes interleaved in a rotating order:
     ``local`` (each process trains alone, no communication: the compute rate of one process
     while the other computes too, i.e. the CPU contention), ``manual`` (backward, then
     ``all_reduce`` of every gradient tensor, then the step: no overlap), ``ddp25``
     (DistributedDataParallel, ``bucket_cap_mb=25``: one bucket for these models) and
     ``ddp1`` (``bucket_cap_mb=1``: several buckets whose all-reduces overlap backward).
     ``bucket_cap_mb`` is passed explicitly so that DDP's first bucket has the same cap as
     the others (with the default, DDP uses a 1 MiB first bucket that sgdnet does not model).

4. **Predict** every configuration with ``sgdnet.predict("allreduce", ...)`` from the profile,
   the fitted ``alpha``/``B`` and the update cost: fine nets with the matching buckets and
   overlap, and coarse nets (compute phase, then one all-reduce). Twice: *naive* (the
   single-process profile as is) and *contention-corrected* (worker speed factor = profiled
   compute time / compute time per step measured in the two-process ``local`` mode -- an
   input measured without any communication, not fitted to the throughput being predicted).

The table compares global steps/s (iterations/s: every step processes ``n * batch`` samples).

    PYTHONPATH=. python scripts/validate_real.py            # ~4 minutes
    PYTHONPATH=. python scripts/validate_real.py --quick    # ~1 minute, MLP only
    PYTHONPATH=. python scripts/validate_real.py --steps 300 --reps 7 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue as queue_mod
import socket
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCH = 32
SEED = 0
MIB = 1024 * 1024
#: Two-worker training modes, in the order of the table.
MODES = ("manual", "ddp25", "ddp1")
#: Pairs of two-worker modes whose steps/s ratio is compared (first net of each in NETS):
#: overlap of 3 buckets vs one bucket, and one fused bucket vs one all-reduce per tensor.
RATIOS = (("ddp1", "ddp25"), ("ddp25", "manual"))
#: all_reduce sizes of the micro-benchmark, bytes (float32 tensors).
BENCH_SIZES = (4 * 1024, 64 * 1024, 512 * 1024, 2 * MIB, 8 * MIB, 16 * MIB)


# --------------------------------------------------------------------------- models
def build_model(name: str, batch: int = BATCH, seed: int = SEED
                ) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A small real model and one synthetic batch.

    Parameters
    ----------
    name : {"mlp", "cnn"}
        ``mlp``: 1024-1024-1024-1024-10 with ReLUs (12.6 MB of gradients). ``cnn``: two 3x3
        conv + ReLU + max-pool blocks (3->32->64 channels) on 3x32x32 images, then a
        4096-256-10 head (4.3 MB of gradients).
    batch : int
        Samples per step.
    seed : int
        Seed of the weights and of the synthetic data (identical on every rank).

    Returns
    -------
    (module, inputs, targets)
    """
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if name == "mlp":
        m: nn.Module = nn.Sequential(
            nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
            nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
        x = torch.randn(batch, 1024, generator=g)
    elif name == "cnn":
        m = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10))
        x = torch.randn(batch, 3, 32, 32, generator=g)
    else:
        raise ValueError(f"unknown model {name!r}; use 'mlp' or 'cnn'")
    y = torch.randint(0, 10, (batch,), generator=g)
    return m, x, y


def grad_bytes(module: nn.Module) -> float:
    """Bytes of all gradients of ``module`` (float32 parameters requiring grad)."""
    return float(sum(p.numel() * p.element_size() for p in module.parameters()
                     if p.requires_grad))


# --------------------------------------------------------------------------- fitting
def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float], n: int = 2
                   ) -> tuple[float, float, float]:
    """Fit the ring all-reduce cost ``t(S) = 2(n-1) alpha + 2(n-1)/n * S / B`` to timings.

    A straight line ``t = c0 + c1 S`` is fitted by least squares with weights ``1/t`` (so the
    residuals are relative and the small messages, which fix the intercept, count as much as
    the large ones), then ``alpha = c0 / (2(n-1))`` and ``B = 2(n-1) / (n c1)``. This is
    the parametrisation sgdnet's ring all-reduce uses
    (:func:`sgdnet.workload.ring_allreduce_time`), so the fitted ``alpha`` and ``B`` go into
    ``Cluster(latency=alpha, bandwidth=B)`` as they are.

    Parameters
    ----------
    sizes : sequence of float
        Message sizes, bytes (at least two distinct values).
    times : sequence of float
        Measured all-reduce time of each size, seconds (> 0).
    n : int
        Number of ranks (>= 2).

    Returns
    -------
    (alpha, B, max_rel_residual)
        Latency per ring round (seconds, clipped at 0), bandwidth (bytes/s) and the largest
        ``|fit - t| / t`` over the points.

    Raises
    ------
    ValueError
        Fewer than two distinct sizes, non-positive times, ``n < 2``, or a non-increasing fit.
    """
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    if n < 2:
        raise ValueError(f"n={n}: an all-reduce needs at least 2 ranks")
    if s.shape != t.shape or len(np.unique(s)) < 2:
        raise ValueError("need matching sizes and times with at least two distinct sizes")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"times must be finite and > 0, got {t.tolist()}")
    w = 1.0 / t
    a = np.stack([np.ones_like(s), s], axis=1) * w[:, None]
    (c0, c1), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    if c1 <= 0:
        raise ValueError(f"fitted time does not grow with size (slope {c1:g} s/B)")
    rounds = 2 * (n - 1)
    alpha = max(float(c0), 0.0) / rounds
    bw = rounds / (n * float(c1))
    fit = rounds * alpha + rounds / n * s / bw
    return alpha, bw, float(np.max(np.abs(fit - t) / t))


def spread(x: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {"median": float(statistics.median(x)), "min": float(min(x)), "max": float(max(x)),
            "n": len(x)}


# --------------------------------------------------------------------------- launcher
def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for the process group's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, world: int, port: int, fn: Callable[..., Any], args: tuple,
           out: Any) -> None:
    """Child process: one thread, join the gloo group on loopback, run ``fn``, report."""
    try:
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
        try:
            res = fn(rank, world, *args)
        finally:
            dist.destroy_process_group()
        out.put(("ok", rank, res))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        out.put(("error", rank, traceback.format_exc()))


def run_workers(world: int, fn: Callable[..., Any], args: tuple = (), timeout: float = 600.0
                ) -> list[Any]:
    """Run ``fn(rank, world, *args)`` in ``world`` fresh processes forming a gloo group.

    The processes are started with the ``spawn`` method, rendezvous on a free port of
    127.0.0.1 and use one intra-op and one inter-op thread each.

    Parameters
    ----------
    world : int
        Number of processes (>= 1).
    fn : callable
        A module-level function (it is pickled by name).
    args : tuple
        Extra arguments (picklable).
    timeout : float
        Seconds to wait for all results; the processes are then terminated.

    Returns
    -------
    list
        ``fn``'s return value of each rank, by rank.

    Raises
    ------
    RuntimeError
        A rank raised (its traceback is in the message) or the run timed out.
    """
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    env_keep = os.environ.get("GLOO_SOCKET_IFNAME")
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    try:
        procs = [ctx.Process(target=_entry, args=(r, world, port, fn, args, out), daemon=True)
                 for r in range(world)]
        for p in procs:
            p.start()
    finally:
        if env_keep is None:
            os.environ.pop("GLOO_SOCKET_IFNAME", None)
        else:
            os.environ["GLOO_SOCKET_IFNAME"] = env_keep
    results: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"run_workers: timed out after {timeout:.0f} s with ranks "
                                   f"{sorted(results)} done")
            try:
                status, rank, res = out.get(timeout=min(left, 1.0))
            except queue_mod.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"run_workers: rank(s) {dead} died (exit codes "
                                       f"{[procs[r].exitcode for r in dead]})") from None
                continue
            if status != "ok":
                raise RuntimeError(f"run_workers: rank {rank} failed:\n{res}")
            results[rank] = res
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    return [results[r] for r in range(world)]


# --------------------------------------------------------------------------- in the workers
def bench_allreduce(rank: int, world: int, sizes: Sequence[int], budget_s: float = 0.3,
                    blocks: int = 5) -> dict[int, float]:
    """Time ``dist.all_reduce`` of float32 tensors of each size (run inside a group).

    For each size: 3 warm-up calls, then ``blocks`` blocks of back-to-back calls (about
    ``budget_s`` seconds in all; the count is agreed on by rank 0's estimate); the figure is
    the median over blocks of the mean time per call, on rank 0.

    Returns
    -------
    dict of int -> float
        Seconds per all-reduce, by size in bytes.
    """
    out: dict[int, float] = {}
    for size in sizes:
        buf = torch.ones(size // 4, dtype=torch.float32)
        for _ in range(3):
            dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.broadcast(one, 0)
        k = int(min(200, max(2, budget_s / blocks / max(float(one), 1e-6))))
        per = []
        for _ in range(blocks):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                dist.all_reduce(buf)
            per.append((time.perf_counter() - t0) / k)
        out[size] = float(statistics.median(per))
    return out


def _train_loop(mode: str, model: nn.Module, ddp: nn.Module | None, x: torch.Tensor,
                y: torch.Tensor, opt: torch.optim.Optimizer, steps: int, warmup: int,
                world: int, sync: bool) -> dict[str, Any]:
    """Run ``warmup + steps`` training steps of one mode; wall time and phase times.

    ``mode`` is ``local`` (no communication), ``manual`` (backward, then ``all_reduce`` of
    each gradient, then the step) or ``ddp*`` (``ddp`` is the DDP wrapper).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    fwd_mod = ddp if ddp is not None else model
    comp, comp_cpu, comm, upd = [], [], [], []
    t_start = cpu_start = 0.0
    for it in range(warmup + steps):
        if it == warmup:
            if sync:
                dist.barrier()
            t_start = time.perf_counter()
            cpu_start = time.process_time()
        t0 = time.perf_counter()
        c0 = time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(fwd_mod(x), y)
        loss.backward()
        t1 = time.perf_counter()
        c1 = time.thread_time()
        if mode == "manual":
            for p in params:
                dist.all_reduce(p.grad)
                p.grad.div_(world)
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if it >= warmup:
            comp.append(t1 - t0)
            comp_cpu.append(c1 - c0)
            comm.append(t2 - t1)
            upd.append(t3 - t2)
    wall = time.perf_counter() - t_start
    cpu = time.process_time() - cpu_start
    if sync:
        dist.barrier()
    res: dict[str, Any] = {"steps_per_s": steps / wall, "compute_s": statistics.median(comp),
                           "comm_s": statistics.median(comm), "update_s": statistics.median(upd),
                           "compute_cpu_s": statistics.median(comp_cpu),
                           "cpu_per_wall": cpu / wall}
    if mode == "manual":  # per-step phases, to line the two ranks' steps up afterwards
        res["compute_list"] = comp
        res["comm_list"] = comm
    return res


def train_all(rank: int, world: int, models: Sequence[str], modes: Sequence[str], steps: int,
              warmup: int, reps: int, bench_sizes: Sequence[int]) -> dict[str, Any]:
    """Everything measured in one two-process group (run by :func:`run_workers`).

    For each model ``reps`` rounds, each round running the all-reduce micro-benchmark and
    then every mode once in a rotating order (so slow phases of the shared machine hit all
    modes and the benchmark alike); the benchmark's figure per size is the median over all
    rounds. Modes: ``local`` (no communication, each process alone), ``manual``,
    ``ddp25``, ``ddp1`` (see the module docstring).

    Returns
    -------
    dict
        ``{"bench": {size: s}, "runs": {model: {mode: [per-rep dict]}}, "ddp_buckets":
        {model: {mode: [bytes]}}, "load": [loadavg...]}``.
    """
    res: dict[str, Any] = {"bench": {}, "runs": {}, "ddp_buckets": {}, "rank": rank}
    bench_rounds: list[dict[int, float]] = []
    for name in models:
        # one model copy (same seed, same weights) and optimizer per mode: a DDP wrapper
        # registers autograd hooks on its module's parameters, so modes must not share one
        setups: dict[str, tuple] = {}
        for mode in modes:
            model, x, y = build_model(name)
            ddp = (nn.parallel.DistributedDataParallel(model, bucket_cap_mb=float(mode[3:]))
                   if mode.startswith("ddp") else None)
            setups[mode] = (model, ddp, x, y, torch.optim.SGD(model.parameters(), lr=1e-3))
        runs: dict[str, list] = {m: [] for m in modes}
        order = list(modes)
        for r in range(reps):
            rot = order[r % len(order):] + order[:r % len(order)]
            if bench_sizes:  # the all-reduce cost, measured in every round like the runs
                bench_rounds.append(bench_allreduce(rank, world, bench_sizes, budget_s=0.15,
                                                    blocks=3))
            for mode in rot:
                model, ddp, x, y, opt = setups[mode]
                runs[mode].append(_train_loop(mode, model, ddp, x, y, opt, steps, warmup,
                                              world, sync=True))
        res["runs"][name] = runs
        buckets = {}
        for mode, (_, ddp, *_rest) in setups.items():
            if ddp is not None:
                try:
                    buckets[mode] = str(ddp._get_ddp_logging_data().get(
                        "rebuilt_bucket_sizes", "?"))
                except Exception:  # noqa: BLE001 - diagnostic only
                    buckets[mode] = "?"
        res["ddp_buckets"][name] = buckets
    res["bench"] = {size: float(statistics.median(b[size] for b in bench_rounds))
                    for size in bench_sizes}
    res["bench_rounds"] = bench_rounds
    return res


def check_group(rank: int, world: int) -> dict[str, Any]:
    """A quick functional check of a group (run by :func:`run_workers`; used by the tests).

    Returns
    -------
    dict
        ``sum``: the all-reduced value of ``rank + 1`` (``world (world + 1) / 2``);
        ``buckets``: DDP's bucket sizes in bytes for the MLP with ``bucket_cap_mb`` 1 and 25,
        after its bucket rebuild (three training steps).
    """
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    buckets = {}
    for cap in (1, 25):
        model, x, y = build_model("mlp", batch=4)
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=float(cap))
        for _ in range(3):  # DDP rebuilds its buckets in the second step's forward
            F.cross_entropy(ddp(x), y).backward()
        sizes = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
        buckets[cap] = [int(b) for b in str(sizes).replace(",", " ").split()]
    return {"sum": float(t), "buckets": buckets}


# --------------------------------------------------------------------------- single process
@dataclass
class Single:
    """What one process measures of one model: profile, update cost, plain-loop rate."""

    name: str
    profile: Any
    grad_bytes: float
    update_s: float
    steps_per_s: list[float] = field(default_factory=list)
    compute_s: list[float] = field(default_factory=list)
    compute_cpu_s: list[float] = field(default_factory=list)
    profile_compute_s: list[float] = field(default_factory=list)
    profile_after: Any = None


def measure_single(name: str, steps: int, warmup: int, reps: int, repeats: int) -> Single:
    """Profile ``name`` with ``profile_module`` and time its plain one-worker training loop.

    Runs in the calling process with ``torch.set_num_threads(1)``. ``reps`` rounds, each a
    profile of ``repeats`` steps followed by a plain-loop run of ``steps`` steps, so that both
    see the same phases of a shared machine. The profile kept is the one with the median
    compute time (a whole measured profile, not a blend of several). The optimizer cost
    (``SGD.step``, median per step over the plain-loop runs) is the ``update_s`` the
    predictions charge after the all-reduce.
    """
    from sgdnet.profiling import profile_module

    torch.set_num_threads(1)
    model, x, y = build_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    profs, upd = [], []
    single = Single(name, None, grad_bytes(model), 0.0)
    for _ in range(reps):
        profs.append(profile_module(model, (x,), repeats=repeats, warmup=3,
                                    loss_fn=lambda out: F.cross_entropy(out, y), name=name,
                                    batch_size=BATCH))
        r = _train_loop("local", model, None, x, y, opt, steps, warmup, 1, sync=False)
        single.steps_per_s.append(r["steps_per_s"])
        single.compute_s.append(r["compute_s"])
        single.compute_cpu_s.append(r["compute_cpu_s"])
        upd.append(r["update_s"])
    profs.sort(key=lambda p: p.compute_s)
    single.profile = profs[len(profs) // 2]
    single.profile_compute_s = [p.compute_s for p in profs]
    single.update_s = float(statistics.median(upd))
    return single


# --------------------------------------------------------------------------- predictions
@dataclass
class Row:
    """One line of the comparison table."""

    model: str
    workers: int
    run: str
    net: str
    measured: dict[str, float]
    naive: tuple[float, float]
    corrected: tuple[float, float] | None


#: (real run, sgdnet net label, granularity, allreduce options) for two workers.
NETS: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
    "manual": [("fine, 1 bucket/layer, no overlap", "fine",
                {"bucket_bytes": 0, "overlap": False}),
               # the loop all-reduces every parameter tensor (weight and bias separately):
               # the profile's tensors as layers (ModelProfile.split_tensors)
               ("fine, 1 all-reduce per tensor, no overlap", "fine",
                {"bucket_bytes": 0, "overlap": False, "per_tensor": True}),
               ("coarse", "coarse", {})],
    "ddp25": [("fine, 25 MiB buckets, overlap", "fine",
               {"bucket_bytes": 25 * MIB, "overlap": True}),
              ("coarse", "coarse", {})],
    "ddp1": [("fine, 1 MiB buckets, overlap", "fine",
              {"bucket_bytes": 1 * MIB, "overlap": True}),
             ("fine, 1 MiB buckets, overlap, comm holds the CPU", "fine",
              {"bucket_bytes": 1 * MIB, "overlap": True, "comm_uses_compute": True}),
             ("fine, 1 MiB buckets, no overlap", "fine",
              {"bucket_bytes": 1 * MIB, "overlap": False}),
             ("coarse", "coarse", {})],
}


def predict_rate(profile: Any, workers: int, alpha: float, bandwidth: float, update_s: float,
                 grad_bytes_: float, granularity: str, speed: float = 1.0,
                 comm_cv: float = 0.0, steps: int = 200, replications: int = 8,
                 **options: Any) -> tuple[float, float]:
    """sgdnet's predicted global steps/s (mean, 95% CI half-width) for one configuration.

    ``Cluster(workers, speeds=[speed]*n, bandwidth=B, latency=alpha, update_s_per_byte=
    update_s / grad_bytes, comm_cv)``; the profile's per-layer CVs give the compute noise.
    ``comm_uses_compute=True`` in ``options`` goes to the cluster (gloo reduces on the CPU
    that computes); ``per_tensor=True`` predicts with ``profile.split_tensors()`` (one
    all-reduce per parameter tensor); the other options go to the ``allreduce`` variant.
    """
    import sgdnet
    from sgdnet import Cluster

    cuc = bool(options.pop("comm_uses_compute", False))
    if options.pop("per_tensor", False):
        profile = profile.split_tensors()
    clu = Cluster(workers=workers, speeds=None if speed == 1.0 else [speed] * workers,
                  bandwidth=bandwidth, latency=alpha,
                  update_s_per_byte=update_s / grad_bytes_, comm_cv=comm_cv,
                  comm_uses_compute=cuc)
    p = sgdnet.predict("allreduce", profile, clu, granularity=granularity, steps=steps,
                       replications=replications, seed=0, **options)
    est = p.iterations_per_s
    lo, hi = est.ci()
    half = (hi - lo) / 2 if math.isfinite(hi - lo) else 0.0
    return float(est.mean), float(half)


def _fmt_pred(p: tuple[float, float] | None, measured: float) -> tuple[str, str]:
    if p is None:
        return "", ""
    return f"{p[0]:.1f} ± {p[1]:.1f}", f"{100 * (p[0] - measured) / measured:+.0f}%"


def table(rows: Sequence[Row]) -> str:
    """The comparison as a Markdown table."""
    out = ["| model | n | real run | measured it/s median (min–max) | sgdnet net | "
           "predicted naive | err | predicted contention-corrected | err |",
           "|---|---:|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        m = r.measured
        meas = f"{m['median']:.1f} ({m['min']:.1f}–{m['max']:.1f})"
        pn, en = _fmt_pred(r.naive, m["median"])
        pc, ec = _fmt_pred(r.corrected, m["median"])
        out.append(f"| {r.model} | {r.workers} | {r.run} | {meas} | {r.net} | {pn} | {en} | "
                   f"{pc} | {ec} |")
    return "\n".join(out)


def _fmt_spread(x: Sequence[float], scale: float = 1.0, digits: int = 1) -> str:
    d = spread(x)
    return (f"{scale * d['median']:.{digits}f} ({scale * d['min']:.{digits}f}–"
            f"{scale * d['max']:.{digits}f})")


def _loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:  # pragma: no cover - non-Linux
        return "n/a"


# --------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the whole validation and print the table; returns everything as a dict."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="MLP only, fewer steps and repetitions (~1 minute)")
    ap.add_argument("--models", default=None, help="comma list of mlp,cnn (default both)")
    ap.add_argument("--steps", type=int, default=None, help="measured steps per run (60; --quick 30)")
    ap.add_argument("--warmup", type=int, default=10, help="unmeasured steps per run")
    ap.add_argument("--reps", type=int, default=None, help="repetitions of every run (7; --quick 3)")
    ap.add_argument("--sim-steps", type=int, default=200, help="simulated steps per worker")
    ap.add_argument("--json", default=None, help="write all measurements here")
    a = ap.parse_args(argv)
    steps = a.steps or (30 if a.quick else 60)
    reps = a.reps or (3 if a.quick else 7)
    models = (a.models or ("mlp" if a.quick else "mlp,cnn")).split(",")
    t_all = time.perf_counter()
    print(f"# sgdnet vs a real gloo run: models {models}, {steps} steps after {a.warmup} "
          f"warm-up, {reps} reps; torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"loadavg {_loadavg()}", flush=True)

    singles: dict[str, Single] = {}
    for name in models:
        s = measure_single(name, steps, a.warmup, reps, repeats=max(10, steps // 2))
        singles[name] = s
        pc = spread(s.profile_compute_s)
        print(f"[1 process] {name}: profile compute {1e3 * s.profile.compute_s:.2f} ms "
              f"(median of {reps} profiles, {1e3 * pc['min']:.2f}–{1e3 * pc['max']:.2f}) "
              f"({s.profile.n_layers} layers, {s.grad_bytes / 1e6:.2f} MB gradients, "
              f"leaf modules cover {s.profile.meta['covered_fraction']:.0%}), "
              f"update {1e3 * s.update_s:.2f} ms; plain loop it/s {_fmt_spread(s.steps_per_s)}",
              flush=True)

    print(f"[2 processes] launching gloo group (loadavg {_loadavg()})", flush=True)
    t0 = time.perf_counter()
    all_modes = ("local", *MODES)
    got = run_workers(2, train_all, (models, all_modes, steps, a.warmup, reps, BENCH_SIZES))
    print(f"[2 processes] done in {time.perf_counter() - t0:.0f} s (loadavg {_loadavg()})",
          flush=True)
    r0, r1 = got
    sizes = sorted(r0["bench"])
    times = [r0["bench"][s] for s in sizes]
    alpha, bw, resid = fit_alpha_beta(sizes, times, 2)
    for s, t in zip(sizes, times):
        per = [b[s] for b in r0["bench_rounds"]]
        print(f"  all_reduce {s / 1024:8.0f} KiB: median {1e3 * t:7.3f} ms (rounds "
              f"{1e3 * min(per):.3f}–{1e3 * max(per):.3f})   fit {1e3 * (2 * alpha + s / bw):7.3f} ms")
    print(f"  fit: alpha = {1e6 * alpha:.1f} us per ring round, B = {bw / 1e9:.3f} GB/s "
          f"(max relative residual {resid:.0%})")

    for name in models:  # re-profile: did the machine's speed drift during the run?
        m, x, y = build_model(name)
        from sgdnet.profiling import profile_module
        singles[name].profile_after = profile_module(
            m, (x,), repeats=20, warmup=3, loss_fn=lambda out, y=y: F.cross_entropy(out, y),
            name=name, batch_size=BATCH)

    rows: list[Row] = []
    ratios: list[tuple] = []
    diag: dict[str, Any] = {}
    for name in models:
        s = singles[name]
        prof = s.profile
        runs = {mode: r0["runs"][name][mode] for mode in all_modes}
        both = {mode: list(zip(r0["runs"][name][mode], r1["runs"][name][mode]))
                for mode in all_modes}

        def med(mode: str, key: str, how: Callable[[float, float], float] = max,
                both=both) -> float:
            """Median over reps of ``how`` over the two ranks of one run's figure."""
            return float(statistics.median(how(u[key], v[key]) for u, v in both[mode]))

        local_c = [0.5 * (u["compute_s"] + v["compute_s"]) for u, v in both["local"]]
        speed = prof.compute_s / statistics.median(local_c)
        # the two ranks leave each all-reduce together, so per step the rank that arrived last
        # waited least: min over ranks is the transfer itself, the rest is waiting for the peer
        c_min = [min(u, v) for a0, a1 in both["manual"]
                 for u, v in zip(a0["comm_list"], a1["comm_list"])]
        sizes_p = [p.numel() * p.element_size() for p in build_model(name)[0].parameters()]
        comm_pred = sum(2 * alpha + b / bw for b in sizes_p)
        diag[name] = d = {
            "profile_compute_s": prof.compute_s,
            "profile_compute_all_s": s.profile_compute_s,
            "profile_compute_after_s": s.profile_after.compute_s,
            "plain_loop_compute_s": statistics.median(s.compute_s),
            "plain_loop_compute_cpu_s": statistics.median(s.compute_cpu_s),
            "local2_compute_s": spread(local_c),
            "local2_compute_cpu_s": med("local", "compute_cpu_s", lambda u, v: (u + v) / 2),
            "local2_steps_per_s": spread([u["steps_per_s"] for u in runs["local"]]),
            "manual_compute_s": med("manual", "compute_s", lambda u, v: (u + v) / 2),
            "manual_compute_cpu_s": med("manual", "compute_cpu_s", lambda u, v: (u + v) / 2),
            "manual_comm_rank0_s": spread([u["comm_s"] for u in runs["manual"]]),
            "manual_comm_min_rank_s": float(statistics.median(c_min)),
            "manual_comm_predicted_s": comm_pred,
            "manual_update_s": med("manual", "update_s", lambda u, v: (u + v) / 2),
            "cpu_per_wall": {mode: med(mode, "cpu_per_wall", lambda u, v: u + v)
                             for mode in all_modes},
            "ddp_step_s": {mode: 1.0 / statistics.median(u["steps_per_s"] for u in runs[mode])
                           for mode in MODES if mode.startswith("ddp")},
            "speed_factor": speed,
            "ddp_buckets": r0["ddp_buckets"][name],
        }
        ms = 1e3
        print(f"\n[{name}] per-step compute (forward+backward), ms: profile "
              f"{ms * d['profile_compute_s']:.2f} (re-profiled after the group: "
              f"{ms * d['profile_compute_after_s']:.2f}); plain loop, 1 process "
              f"{ms * d['plain_loop_compute_s']:.2f} (thread CPU "
              f"{ms * d['plain_loop_compute_cpu_s']:.2f}); 2 processes, no comm "
              f"{_fmt_spread(local_c, ms, 2)} (thread CPU {ms * d['local2_compute_cpu_s']:.2f}); "
              f"2 processes, manual run {ms * d['manual_compute_s']:.2f} (thread CPU "
              f"{ms * d['manual_compute_cpu_s']:.2f}) -> contention speed factor {speed:.3f}")
        print(f"[{name}] manual run, per step, ms: all-reduces {ms * d['manual_comm_min_rank_s']:.2f} "
              f"(rank 0 incl. waiting for the peer "
              f"{ms * d['manual_comm_rank0_s']['median']:.2f}); alpha/B fit for its "
              f"{len(sizes_p)} tensors {ms * comm_pred:.2f}; update "
              f"{ms * d['manual_update_s']:.2f} (1 process {ms * s.update_s:.2f})")
        print(f"[{name}] CPU cores used by the two processes together (process CPU time / "
              f"wall): " + ", ".join(f"{k} {v:.2f}" for k, v in d["cpu_per_wall"].items())
              + f"; DDP buckets (bytes) {d['ddp_buckets']}", flush=True)
        common = {"alpha": alpha, "bandwidth": bw, "update_s": s.update_s,
                  "grad_bytes_": s.grad_bytes, "steps": a.sim_steps}
        one = predict_rate(prof, 1, granularity="fine", **common)
        rows.append(Row(name, 1, "plain loop", "fine (= coarse)", spread(s.steps_per_s), one,
                        None))
        first: dict[str, tuple] = {}
        for mode in MODES:
            meas = spread([u["steps_per_s"] for u in runs[mode]])
            for label, gran, opts in NETS[mode]:
                naive = predict_rate(prof, 2, granularity=gran, **common, **opts)
                corr = predict_rate(prof, 2, granularity=gran, speed=speed, **common, **opts)
                rows.append(Row(name, 2, mode, label, meas, naive, corr))
                first.setdefault(mode, (naive[0], corr[0]))
        for num, den in RATIOS:  # modes ran in the same rounds: compare them round by round
            rr = [u["steps_per_s"] / v["steps_per_s"] for u, v in zip(runs[num], runs[den])]
            ratios.append((name, num, den, spread(rr), first[num][0] / first[den][0],
                           first[num][1] / first[den][1]))

    print()
    print(table(rows))
    print()
    print("| model | ratio of steps/s | measured, per round: median (min–max) | predicted naive | "
          "predicted corrected |")
    print("|---|---|---:|---:|---:|")
    for name, num, den, m, pn, pc in ratios:
        print(f"| {name} | {num} / {den} | {m['median']:.2f} ({m['min']:.2f}–{m['max']:.2f}) | "
              f"{pn:.2f} | {pc:.2f} |")
    print(f"\n(total {time.perf_counter() - t_all:.0f} s, loadavg {_loadavg()})")
    out = {"steps": steps, "reps": reps, "warmup": a.warmup, "alpha_s": alpha,
           "bandwidth_Bps": bw, "fit_max_rel_residual": resid,
           "bench": {str(k): v for k, v in r0["bench"].items()},
           "diagnostics": diag,
           "rows": [{"model": r.model, "workers": r.workers, "run": r.run, "net": r.net,
                     "measured": r.measured, "naive": r.naive, "corrected": r.corrected}
                    for r in rows],
           "ratios": [{"model": n, "ratio": f"{a}/{b}", "measured": m, "naive": pn,
                       "corrected": pc} for n, a, b, m, pn, pc in ratios]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
