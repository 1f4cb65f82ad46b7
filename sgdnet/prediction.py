"""The front door: :func:`predict` one configuration, :func:`scaling` over worker counts.

``predict`` builds the variant's net (:func:`sgdnet.variants.build`), simulates it
(:func:`sgdnet.simulate`) and summarises the result in a :class:`Prediction`.

Counting
    ``steps`` and ``warmup`` are counted *per worker*: the simulation discards the first
    ``warmup * n`` step completions and measures the next ``steps * n`` (a step is one worker's
    SGD step; in asynchronous variants fast workers contribute more of them). Keeping the
    per-worker count fixed keeps the precision comparable across cluster sizes.

Figures
    ``steps_per_s``
        worker steps per second, summed over workers (one per replication, Student-t CI).
    ``iterations_per_s``
        ``steps_per_s / n``: for bulk-synchronous variants the rate of global iterations.
    ``samples_per_s``
        training samples per second: each worker step weighted by that worker's batch
        (``net.meta["batch_sizes"]`` where a variant sets per-worker batches, else the
        profile's batch size).
    ``per_worker``
        :class:`WorkerFigures` of each worker (steps/s, samples/s, step-time percentiles).
    ``utilization``
        every resource's busy fraction (GPU, NIC directions, PS CPUs).
    ``memory``
        bytes per GPU (parameters, gradients, optimizer states, activations, buffers:
        :class:`~sgdnet.workload.memory.MemoryBreakdown`), checked against the device's
        memory when the device is known (:func:`predict`'s ``device``, or the profile's).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import netcache
from ._check import finite_or_none as _finite
from ._check import int_arg, is_int
from ._gc import paused_gc
from .analysis.stats import rows_mean_quantiles
from .errors import ClusterError, VariantError
from .results import Estimate, Result
from .variants import get
from .variants.inputs import resolve_cluster, resolve_model
from .workload import Cluster, ModelProfile

__all__ = ["Prediction", "WorkerFigures", "ScalingPoint", "predict", "scaling", "summarize",
           "apply_framework"]


@dataclass(frozen=True)
class WorkerFigures:
    """What one worker achieved.

    Attributes
    ----------
    worker : int
        Worker index.
    steps_per_s : Estimate
        The worker's steps per second.
    samples_per_s : Estimate
        The worker's samples per second (its steps times its batch size).
    batch_size : int
        The worker's batch size.
    step_time_s : dict
        Percentiles ``{"mean", "p50", "p95", "p99"}`` of the time between the worker's
        successive steps, seconds, pooled over replications (empty when too few steps).
    """

    worker: int
    steps_per_s: Estimate
    samples_per_s: Estimate
    batch_size: int
    step_time_s: dict

    def to_dict(self) -> dict:
        """JSON-able view."""
        return {"worker": self.worker, "steps_per_s": self.steps_per_s.to_dict(),
                "samples_per_s": self.samples_per_s.to_dict(), "batch_size": self.batch_size,
                "step_time_s": dict(self.step_time_s)}


def _bulk_percentiles(xs: Sequence[np.ndarray]) -> list[dict]:
    """Mean, median, 95th and 99th percentiles of each ``x`` (``{}`` for fewer than two
    values), in bulk when every ``x`` has the same length
    (:func:`.analysis.stats.rows_mean_quantiles`)."""
    rows = rows_mean_quantiles(xs, (0.5, 0.95, 0.99))
    return [{} if x.size < 2 else {"mean": m, "p50": v[0], "p95": v[1], "p99": v[2]}
            for x, (m, v) in zip(xs, rows)]


class Prediction:
    """The throughput prediction of one (variant, model, cluster) configuration.

    Attributes
    ----------
    variant, granularity : str
        What was simulated.
    model : ModelProfile
        The profile.
    cluster : Cluster
        The cluster (after the variant's options, e.g. PS shards, were applied).
    options : dict
        The variant's resolved options.
    steps, warmup, replications : int
        Counting (``steps`` and ``warmup`` per worker).
    steps_per_s, iterations_per_s, samples_per_s : Estimate
        See the module docstring.
    per_worker : dict of int -> WorkerFigures
    utilization : dict of str -> Estimate
        Busy fraction of every resource.
    result : Result
        The full simulation result (seeds, traces, per-transition figures).
    meta : dict
        The net's ``meta`` (buckets, PS plan, ...).
    memory : MemoryBreakdown or None
        Memory per GPU (:func:`sgdnet.workload.memory.memory_for`); None when the profile
        has no parameter count.
    """

    def __init__(self, variant: str, model: ModelProfile, cluster: Cluster, granularity: str,
                 options: Mapping[str, Any], steps: int, warmup: int, result: Result,
                 meta: Mapping[str, Any], memory: Any = None):
        self.variant = variant
        self.model = model
        self.cluster = cluster
        self.granularity = granularity
        self.options = dict(options)
        self.steps = steps
        self.warmup = warmup
        self.replications = result.replications
        self.result = result
        self.meta = dict(meta)
        self.memory = memory
        n = cluster.workers
        bs = list(meta.get("batch_sizes") or [model.batch_size] * n)
        self.steps_per_s = Estimate(result.throughput.samples, unit="steps/s",
                                    label="worker steps per second")
        self.iterations_per_s = Estimate(result.throughput.samples / n, unit="iterations/s",
                                         label="steps per second per worker")
        workers, counts = result.step_counts_by_worker()
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = counts / result.sim_time[:, None]  # (replications, workers) steps/s
        intervals = result.step_times_by_worker() if result.samples else {}
        pct = _bulk_percentiles([intervals.get(w, np.zeros(0)) for w in workers])
        per: dict[int, WorkerFigures] = {}
        samples = np.zeros(result.replications)
        for g in sorted(range(len(workers)), key=lambda g: workers[g]):
            w = workers[g]
            b = int(bs[w]) if isinstance(w, (int, np.integer)) and 0 <= w < len(bs) else \
                model.batch_size
            s = Estimate(rates[:, g] * b, unit="samples/s", label=f"samples/s worker={w}")
            samples = samples + np.nan_to_num(s.samples)
            per[int(w)] = WorkerFigures(int(w), Estimate(rates[:, g], "steps/s",
                                                         f"steps/s worker={w}"), s, b, pct[g])
        if not workers:  # a custom net without worker tags: the profile's batch for every step
            samples = result.throughput.samples * model.batch_size
        self.samples_per_s = Estimate(samples, unit="samples/s", label="samples per second")
        self.per_worker = per
        self.utilization = result.utilizations()

    @property
    def workers(self) -> int:
        """Number of workers."""
        return self.cluster.workers

    def step_time_percentiles(self, q: Sequence[float] = (0.5, 0.95, 0.99),
                              worker: int | None = None) -> np.ndarray:
        """Quantiles of the time between successive steps of ``worker`` (None: of all steps).

        Raises
        ------
        SimulationError
            The prediction was made with ``samples=False``.
        """
        return np.quantile(self.result.step_times(worker), q)

    def to_dict(self) -> dict:
        """JSON-able summary (no raw trace)."""
        return {
            "variant": self.variant, "granularity": self.granularity, "model": self.model.name,
            "batch_size": self.model.batch_size, "workers": self.workers,
            "cluster": self.cluster.to_dict(),
            "options": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                        for k, v in self.options.items()},
            "steps": self.steps, "warmup": self.warmup, "replications": self.replications,
            "seeds": [int(s) for s in self.result.seeds],
            "steps_per_s": self.steps_per_s.to_dict(),
            "iterations_per_s": self.iterations_per_s.to_dict(),
            "samples_per_s": self.samples_per_s.to_dict(),
            "per_worker": {str(w): f.to_dict() for w, f in self.per_worker.items()},
            "utilization": {k: v.to_dict() for k, v in self.utilization.items()},
            "memory": None if self.memory is None else self.memory.to_dict(),
        }

    def __repr__(self) -> str:
        return (f"Prediction({self.variant}, {self.model.name}, {self.workers} workers, "
                f"{self.granularity}: {self.samples_per_s!r})")


def _count(v: Any, name: str, lo: int) -> int:
    return int_arg(name, v, lo, error=VariantError)


def apply_framework(variant: str | None, cluster: Cluster | Mapping[str, Any],
                    options: Mapping[str, Any], framework: str | None = None,
                    transport: str | None = "auto") -> tuple[str, Cluster, dict[str, Any]]:
    """``(variant, cluster, options)`` with a framework's defaults and a transport applied.

    ``framework`` (:data:`sgdnet.workload.frameworks.FRAMEWORKS`) gives the variant (``variant``
    may be None, else it must be the framework's) and options; ``options`` win over them. Its
    cluster fields (e.g. ``shard_min_bytes``) are set on the cluster. ``transport``: ``"auto"``
    applies the framework's own transport (``"tcp"`` for gRPC / ps-lite frameworks; none for
    NCCL ones, nor without a framework), ``None`` none, a name of
    :data:`sgdnet.workload.transports.TRANSPORTS` that one
    (:func:`~sgdnet.workload.transports.apply_transport`).

    Raises
    ------
    UnknownNameError
        Unknown framework.
    VariantError
        No variant and no framework, or a variant that is not the framework's.
    ClusterError
        Unknown transport or bad cluster.
    """
    from .workload.frameworks import framework_options, get_framework
    from .workload.transports import apply_transport

    clu = resolve_cluster(cluster)
    opts = dict(options)
    fw = None
    if framework is not None:
        fw = get_framework(framework)
        variant, fopts = framework_options(fw, variant, clu)
        opts = {**fopts, **opts}
        if fw.cluster:
            clu = clu.replace(**fw.cluster)
    if variant is None:
        raise VariantError("no variant: give a variant name (e.g. 'allreduce') or "
                           "framework= (e.g. framework='ddp')")
    tr = (fw.transport if fw is not None else None) if transport == "auto" else transport
    if tr is not None:
        clu = apply_transport(clu, tr)
    return variant, clu, opts


def predict(variant: str | None, model: str | ModelProfile,
            cluster: Cluster | Mapping[str, Any], *,
            granularity: str = "fine", steps: int = 200, warmup: int | None = None,
            replications: int = 8, seed: int | np.random.Generator | None = None,
            parallel: bool = True, trace: bool = False, samples: bool = True,
            progress: bool = False, framework: str | None = None,
            transport: str | None = "auto", instance: str | None = None,
            nodes: int | None = None, price_per_hour: float | None = None,
            train_samples: float | None = None, device: Any = None,
            check_memory: bool = True, **options: Any) -> Prediction:
    """Predict the training throughput of ``variant`` for ``model`` on ``cluster``.

    Parameters
    ----------
    variant : str
        A name from :func:`sgdnet.variants.names` (``"sync-ps"``, ``"allreduce"``, ...).
    model : str or ModelProfile
        A built-in model (:func:`sgdnet.models.names`), a profile JSON path, or a profile.
    cluster : Cluster or dict
        The cluster; a dict is read with :meth:`Cluster.from_dict`.
    granularity : {"fine", "coarse"}
        Per-layer operations with their overlaps, or compute phase then communication phase.
    steps : int
        Steps measured per worker (after warm-up) in each replication.
    warmup : int, optional
        Steps discarded per worker first; default the variant's (enough to fill its pipeline).
    replications : int
        Independent replications (the CIs are across them).
    seed : int, numpy Generator or None
        Base seed; per-replication seeds are in ``prediction.result.seeds``.
    parallel : bool
        Run replications on all cores.
    trace : bool
        Keep a bounded trace for timelines (``prediction.result.trace``).
    samples : bool
        Keep step completion times (needed for step-time percentiles).
    progress : bool
        Show a progress bar of the simulation (see :func:`sgdnet.simulate`).
    framework : str, optional
        ``"ddp"``, ``"horovod"``, ``"tf-ps"``, ``"tf-replicated"``, ``"byteps"`` or
        ``"mxnet-kvstore"``: the framework's variant (``variant`` may then be None) and
        documented defaults (:mod:`sgdnet.workload.frameworks`); explicit ``options`` win.
    transport : str or None
        ``"auto"`` (the framework's own transport, if it has one), None, ``"tcp"``, ``"rdma"``
        or ``"roce"``: NIC goodput and latency applied to the cluster (:func:`apply_framework`).
    instance : str, optional
        An instance type of the catalog (:mod:`sgdnet.workload.instances`, e.g.
        ``"p5.48xlarge"``): the cluster is ``nodes`` of them (``cluster`` may then be None; its
        ``compute_cv``, ``comm_cv``, ``straggler``, ``ps_shards`` and ``ps_placement`` are
        kept), with the instance's transport under ``transport="auto"`` unless the framework
        has its own, and the instance's price.
    nodes : int, optional
        Instances, with ``instance`` (default 1).
    price_per_hour : float, optional
        Dollars per instance-hour; overrides the catalog's. With it (or ``instance`` or
        ``train_samples``) the prediction carries ``price_per_hour`` and ``train_samples`` and
        :func:`summarize` adds the cost columns (:mod:`sgdnet.workload.cost`).
    train_samples : float, optional
        Samples to train (``epochs * dataset_size``): time and cost to train.
    device : str or Device, optional
        The GPU the memory per GPU is checked against (a name, device file or
        :class:`~sgdnet.workload.compute.Device`); default the profile's device when it is a
        built-in one (profiles of the builders and of ``retime`` name theirs), else none
        (memory is reported without a check). It does not re-time the profile
        (:func:`sgdnet.workload.compute.retime` does).
    check_memory : bool
        Raise :class:`~sgdnet.workload.memory.DeviceMemoryError` before building anything
        when the configuration's memory per GPU exceeds the device's (False: predict anyway;
        ``prediction.memory`` still says).
    **options
        The variant's options (``sgdnet.variants.get(variant).options``).

    Returns
    -------
    Prediction

    Raises
    ------
    UnknownNameError
        Unknown variant or model.
    VariantError
        Bad option, granularity, steps, warmup or replications.
    ClusterError
        Bad cluster.
    DeviceMemoryError
        The configuration does not fit the device's memory (a :class:`VariantError`).

    Examples
    --------
    >>> import sgdnet
    >>> p = sgdnet.predict("allreduce", "resnet50", sgdnet.Cluster(workers=4),
    ...                    granularity="coarse", steps=50, replications=2, seed=0)
    >>> p.samples_per_s.mean > 0
    True
    """
    priced = instance is not None or price_per_hour is not None or train_samples is not None
    if instance is not None or nodes is not None:  # the catalog's cluster, transport, price
        from .workload.instances import instance_profile, resolve_instance

        cluster, transport, price = resolve_instance(instance, nodes, cluster, transport,
                                                     framework)
        price_per_hour = price if price_per_hour is None else price_per_hour
        model, retimed = instance_profile(instance, resolve_model(model))
        if not retimed:
            import warnings

            from .workload.instances import get_instance

            warnings.warn(get_instance(instance).retime_warning(model), stacklevel=2)
    # without a framework or transport: the variant checked, cluster and options as given
    variant, cluster, options = apply_framework(variant, cluster, options, framework, transport)
    pred = predict_net(variant, model, cluster, None, granularity=granularity, steps=steps,
                       warmup=warmup, replications=replications, seed=seed, parallel=parallel,
                       trace=trace, samples=samples, progress=progress, device=device,
                       check_memory=check_memory, **options)
    if priced:
        pred.instance, pred.price_per_hour, pred.train_samples = (instance, price_per_hour,
                                                                  train_samples)
    return pred


def predict_net(variant: str, model: str | ModelProfile, cluster: Cluster | Mapping[str, Any],
                net: Any = None, *, granularity: str = "fine", steps: int = 200,
                warmup: int | None = None, replications: int = 8,
                seed: int | np.random.Generator | None = None, parallel: bool = True,
                trace: bool = False, samples: bool = True, progress: bool = False,
                meta: Mapping[str, Any] | None = None, device: Any = None,
                check_memory: bool = True, **options: Any) -> Prediction:
    """:func:`predict`, reusing ``net`` when the caller already built it (the CLI builds the
    first net before the JIT to report bad options early), else building it; the memory per
    GPU is computed (and checked, see :func:`predict`) before anything is built.

    ``net`` must be ``sgdnet.variants.build(variant, model, cluster, granularity, **options)``,
    or its compiled form (then ``meta`` is that net's ``meta``; :mod:`sgdnet.study.rerate`).
    """
    from .engine import simulate

    spec = get(variant)
    prof = resolve_model(model)
    clu = resolve_cluster(cluster)
    steps = _count(steps, "steps", 1)
    replications = _count(replications, "replications", 1)
    if warmup is not None:
        warmup = _count(warmup, "warmup", 0)
    memory = _memory(spec, prof, clu, options, device, check_memory)
    if net is None and not netcache.holds(spec.name, prof, clu, granularity, options,
                                          disk=False):
        # a run simulate would refuse as too long: refused before the build (#43)
        from .variants.budget import spec_work_check

        spec_work_check(spec, prof, clu, granularity, options, steps, warmup or 0, replications)
    # no cyclic collection from the build to the end of the simulation: a net built here is
    # millions of objects, all alive until it is dropped below (then freed by reference
    # counting), which each collection in between would walk (1.4 s of 11 s CPU for the fine
    # hierarchical net of ResNet-50 on 1,024 GPUs); cycles made meanwhile are collected after
    with paused_gc():
        if net is None:  # built, or the compiled net of the same inputs built before
            net, meta, _ = netcache.load_or_build(
                spec.name, prof, clu, granularity, options,
                lambda: spec.build(prof, clu, granularity, **options), disk=False)
        if meta is None:
            meta = net.meta
        opts = meta.get("options", {})
        if warmup is None:
            warmup = spec.default_warmup(clu, opts)
        n = clu.workers
        res = simulate(net, steps=steps * n, warmup=warmup * n, replications=replications,
                       seed=seed, trace=trace, samples=samples, parallel=parallel,
                       progress=progress)
        del net
    used = meta.get("cluster", clu)
    return Prediction(spec.name, prof, used if isinstance(used, Cluster) else clu, granularity,
                      opts, steps, warmup, res, meta, memory)


def _memory(spec: Any, prof: ModelProfile, clu: Cluster, options: Mapping[str, Any],
            device: Any, check: bool) -> Any:
    """Memory per GPU of the configuration (:func:`sgdnet.workload.memory.memory_for`, on the
    options as the build resolves them), checked against the device's when ``check``."""
    from .workload.memory import check_fits, known_device, memory_for

    opts = spec.resolve({k: v for k, v in options.items() if k != "heuristics"})
    dev = known_device(prof, device)
    if spec.memory is not None:  # the variant's own count (pipeline: its busiest stage)
        mem = spec.memory(prof, clu, opts, dev)
    else:
        mem = memory_for(spec.name, opts, prof, clu, dev)
    if check:
        check_fits(mem, f"variant {spec.name!r} of {prof.name!r} (batch {prof.batch_size} per "
                        f"GPU) on {clu.workers} GPUs")
    return mem


@dataclass(frozen=True)
class ScalingPoint:
    """One point of a scaling curve.

    Attributes
    ----------
    workers : int
    prediction : Prediction
    steps_per_s, samples_per_s : Estimate
        The prediction's.
    speed_up : float
        ``samples_per_s`` over that of the first point (mean over mean).
    efficiency : float
        ``speed_up * workers_first / workers`` (1 = linear scaling).
    """

    workers: int
    prediction: Prediction
    steps_per_s: Estimate
    samples_per_s: Estimate
    speed_up: float
    efficiency: float

    def to_dict(self) -> dict:
        """JSON-able view (the prediction summarised by its samples/s and steps/s)."""
        return {"workers": self.workers, "steps_per_s": self.steps_per_s.to_dict(),
                "samples_per_s": self.samples_per_s.to_dict(), "speed_up": self.speed_up,
                "efficiency": self.efficiency}


def scaling(variant: str, model: str | ModelProfile, cluster: Cluster | Mapping[str, Any],
            workers: Sequence[int] = (1, 2, 4, 8, 16), **kwargs: Any) -> list[ScalingPoint]:
    """Predict ``variant`` at several worker counts; speed-up and efficiency per point.

    ``cluster`` gives everything but the number of workers (its ``speeds``, if set, must be
    left ``None``: per-worker speeds cannot follow a changing worker count). ``kwargs`` go to
    :func:`predict` (``seed`` is shared, so every point uses the same base seed).

    Raises
    ------
    ClusterError
        ``workers`` empty, not positive integers, or ``cluster.speeds`` set.
    """
    clu = resolve_cluster(cluster)
    ws = list(workers)
    if not ws or any(not is_int(w) or w < 1 for w in ws):
        raise ClusterError(f"workers={workers!r} must be a non-empty list of integers >= 1")
    if clu.speeds is not None:
        raise ClusterError(
            f"cluster.speeds={clu.speeds!r} is set, but scaling() changes the number of workers; "
            "leave speeds=None (use a straggler model for heterogeneity)")
    model = resolve_model(model)
    out: list[ScalingPoint] = []
    base: Prediction | None = None
    for w in ws:
        p = predict(variant, model, clu.replace(workers=int(w)), **kwargs)
        if base is None:
            base = p
        b = base.samples_per_s.mean
        su = p.samples_per_s.mean / b if b > 0 else math.nan
        out.append(ScalingPoint(int(w), p, p.steps_per_s, p.samples_per_s, su,
                                su * base.workers / p.workers))
    return out


def _estimate_columns(prefix: str, est: Any, level: float, quantiles: Sequence[float],
                      full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {f"{prefix}_mean": _finite(est.mean)}
    try:
        lo, hi = est.ci(level)
    except Exception:  # n = 1: no spread across replications
        lo = hi = None
    out[f"{prefix}_lo"] = _finite(lo)
    out[f"{prefix}_hi"] = _finite(hi)
    if full:
        out[f"{prefix}_std"] = _finite(getattr(est, "std", None))
        for q in quantiles:
            out[f"{prefix}_p{round(q * 100):02d}"] = _finite(est.quantile(q))
    return out


def _resource_kind(name: str, tags: Mapping[str, Any] | None) -> str:
    kind = (tags or {}).get("kind")
    if isinstance(kind, str) and kind:
        return kind
    return re.sub(r"[_\-.]?(w|ps|s)?\d+$", "", name) or name


def summarize(prediction: Any, *, level: float = 0.95,
              quantiles: Sequence[float] = (0.05, 0.5, 0.95)) -> dict[str, Any]:
    """Flatten a :class:`Prediction` into flat JSON-able columns (a ``sgdnet predict`` table row,
    a study row's metrics).

    Parameters
    ----------
    prediction : Prediction
        ``.steps_per_s`` and ``.samples_per_s`` (Estimates), ``.utilization`` (name -> Estimate)
        and ``.result.seeds`` / ``.result.resource_names`` / ``.result.resource_tags`` are read.
    level : float
        Confidence level of the ``_lo`` / ``_hi`` columns.
    quantiles : sequence of float
        Quantiles of the per-replication steps/s reported as ``steps_per_s_pNN``.

    Returns
    -------
    dict
        JSON-able scalars (``None`` for what is undefined, e.g. a CI from one replication).
    """
    sps = prediction.steps_per_s
    out = {"n": int(getattr(sps, "n", len(getattr(sps, "samples", [])) or 0))}
    out.update(_estimate_columns("steps_per_s", sps, level, quantiles, True))
    out.update(_estimate_columns("samples_per_s", prediction.samples_per_s, level, quantiles,
                                 False))
    if hasattr(prediction, "memory"):  # bytes per GPU, in GB (10^9 bytes)
        mem = prediction.memory
        out["memory_gb"] = None if mem is None else _finite(mem.total / 1e9)
    result = getattr(prediction, "result", None)
    tags_by_name: dict[str, Mapping] = {}
    if result is not None:
        names = list(getattr(result, "resource_names", []) or [])
        tags = list(getattr(result, "resource_tags", []) or [])
        tags_by_name = {n: t for n, t in zip(names, tags) if isinstance(t, Mapping)}
    groups: dict[str, list[float]] = {}
    for name, est in (getattr(prediction, "utilization", None) or {}).items():
        value = _finite(getattr(est, "mean", est))
        if value is not None:
            groups.setdefault(_resource_kind(str(name), tags_by_name.get(name)), []).append(value)
    for kind in sorted(groups):
        vals = groups[kind]
        col = re.sub(r"\W+", "_", kind)
        out[f"util_{col}_mean"] = math.fsum(vals) / len(vals)
        out[f"util_{col}_max"] = max(vals)
    if hasattr(prediction, "price_per_hour") or hasattr(prediction, "train_samples"):
        from .workload.cost import cluster_nodes, cost_samples, tokens_per_sample

        clu, prof = getattr(prediction, "cluster", None), getattr(prediction, "model", None)
        for k, v in cost_samples(prediction.samples_per_s, cluster_nodes(clu) if clu else 1,
                                 getattr(prediction, "price_per_hour", None),
                                 train_samples=getattr(prediction, "train_samples", None),
                                 tokens=tokens_per_sample(prof)).items():
            if isinstance(v, np.ndarray) or (v is None and k not in out and k.startswith(
                    ("cost_per_m", "time_to", "cost_to"))):  # per replication: mean and CI
                out.update(_estimate_columns(k, Estimate(v if v is not None else [math.nan]),
                                             level, quantiles, False))
            else:
                out[k] = v
    seeds = getattr(result, "seeds", None) if result is not None else None
    if seeds is not None:
        out["seeds"] = json.dumps([int(s) for s in seeds], separators=(",", ":"))
    return out
