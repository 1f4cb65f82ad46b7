"""Time to accuracy: how long (simulated seconds) and how many updates a scheme needs to reach
a :class:`~.target.Target`, as a distribution over replications.

Two methods, and the rule that picks one (``method="auto"``):

``"replay"``
    Every replication's update schedule (:mod:`.schedule`) is replayed on the task
    (:mod:`.replay`): staleness, stragglers, dropped gradients, local steps and batch sizes act
    as they did in the simulated run. Always used for schemes with staleness or local steps
    (``async-ps``, ``ssp``, ``dssp``, ``backup``, ``pipe-sgd``, ``local-sgd``, ``cocod``).
``"noise"``
    For the synchronous schemes of staleness 0 (``sync-ps``, ``allreduce``), whose updates to
    the target depend on the global batch ``B`` alone: ``S(B) = S_min (1 + B_noise / B)``
    (McCandlish et al. 2018, :mod:`.noise_scale`), ``(S_min, B_noise)`` fitted through two
    sequential replays of the task at the per-worker batch ``b`` and at ``4 b`` (once per task,
    target and learning rate in a process), then the simulated rounds per second give the wall
    time, ``S(B) / rate``. ``"auto"`` uses it when a replay would compute more than
    ``replay_limit`` per-sample gradients (``S(B) * B``, default 2e7: about 10 s of the
    built-in tasks on one core), else replays.

Simulation: the run starts at time 0 (no warm-up: training includes it), ``steps`` per worker
(``None``: 250 at first, times 4 until every replication reaches the target, at most
``max_steps``); the trace is sized from a short probe run and the replications are simulated
a few at a time so that a trace holds at most ``trace_bytes``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import netcache
from .._check import derive_seeds, finite_or_none, int_arg
from ..errors import SimulationError, VariantError
from ..prediction import Prediction, apply_framework
from ..results import Estimate
from ..variants import get
from ..variants.inputs import resolve_cluster, resolve_model
from ..workload import Cluster
from .noise_scale import NoiseScaleModel, fit_steps
from .replay import Curve, replay
from .schedule import VARIANTS, Schedule, schedule_of
from .target import Target
from .tasks import get_task

__all__ = ["TimeToAccuracy", "time_to_accuracy", "noise_model", "SYNCHRONOUS", "METHODS"]

#: Schemes of staleness 0 where every update sums one gradient of every worker.
SYNCHRONOUS = ("sync-ps", "allreduce")
METHODS = ("auto", "replay", "noise")
#: bytes per traced firing: the engine's record (24) and the Result's copy (32)
TRACE_RECORD_BYTES = 56


@dataclass
class TimeToAccuracy:
    """Time and updates to a target, per replication.

    Attributes
    ----------
    variant, granularity : str
    target : Target
    method : {"replay", "noise"}
    wall_time : Estimate
        Simulated seconds to the target (NaN in a replication that did not reach it).
    updates : Estimate
        Parameter updates to the target (local SGD / CoCoD: local steps of all workers).
    samples : Estimate
        Training samples consumed by then.
    reached : int
        Replications that reached the target.
    steps_per_s : Estimate
        The simulated worker steps per second (throughput, as ``predict``).
    staleness : Estimate
        Mean staleness of the applied gradients per replication (NaN for local SGD / CoCoD
        and the noise method).
    steps : int
        Steps per worker simulated.
    curves : list of Curve
        The replayed loss curves (empty for the noise method).
    noise : NoiseScaleModel or None
        The fitted model (noise method).
    schedules : list of Schedule
    """

    variant: str
    granularity: str
    target: Target
    method: str
    wall_time: Estimate
    updates: Estimate
    samples: Estimate
    reached: int
    steps_per_s: Estimate
    staleness: Estimate
    steps: int
    curves: list = field(default_factory=list)
    noise: NoiseScaleModel | None = None
    schedules: list = field(default_factory=list)

    @property
    def replications(self) -> int:
        """Replications."""
        return self.wall_time.n

    def quantiles(self, q=(0.05, 0.5, 0.95)) -> dict[str, float]:
        """Quantiles of the wall time over replications (NaN ones count as +inf)."""
        x = np.where(np.isfinite(self.wall_time.samples), self.wall_time.samples, np.inf)
        # the empirical quantile (no interpolation, which would subtract infinities)
        return {f"p{round(p * 100):02d}": float(np.quantile(x, p, method="inverted_cdf"))
                for p in q}

    def band(self, grid, q=(0.05, 0.5, 0.95)) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, quantiles)`` of the held-out loss at the times ``grid`` over the
        replications (each curve held at its last evaluation before a time, NaN after its
        end): ``mean`` ``(len(grid),)``, ``quantiles`` ``(len(q), len(grid))``."""
        g = np.asarray(grid, dtype=float)
        rows = []
        for c in self.curves:
            k = np.searchsorted(c.time, g, side="right") - 1
            v = c.loss[np.maximum(k, 0)].astype(float)
            v[g > c.time[-1]] = np.nan
            rows.append(v)
        if not rows:
            raise VariantError("band() needs replayed curves; method='noise' has none")
        m = np.vstack(rows)
        with warnings.catch_warnings():  # "mean of empty slice" after every curve's end
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(m, axis=0), np.nanquantile(m, q, axis=0)

    def to_dict(self, level: float = 0.95) -> dict:
        """JSON-able summary."""
        return {"variant": self.variant, "granularity": self.granularity,
                "target": self.target.describe(), "method": self.method,
                "replications": self.replications, "reached": self.reached,
                "steps": self.steps, "wall_time_s": self.wall_time.to_dict(level),
                "wall_time_quantiles_s": self.quantiles(),
                "updates": self.updates.to_dict(level), "samples": self.samples.to_dict(level),
                "steps_per_s": self.steps_per_s.to_dict(level),
                "staleness_mean": self.staleness.to_dict(level),
                "noise_scale": None if self.noise is None else
                {"s_min": self.noise.s_min, "b_noise": self.noise.b_noise}}

    def summary(self) -> dict:
        """Flat columns (a CLI or study row)."""
        lo, hi = self.wall_time.ci() if self.reached == self.replications else (math.nan,) * 2
        f = finite_or_none
        return {"target": self.target.describe(), "method": self.method,
                "reached": f"{self.reached}/{self.replications}",
                "tta_s_mean": f(self.wall_time.mean), "tta_s_lo": f(lo), "tta_s_hi": f(hi),
                **{f"tta_s_{k}": f(v) for k, v in self.quantiles().items()},
                "updates_mean": f(self.updates.mean), "staleness_mean": f(self.staleness.mean),
                "steps_per_s_mean": f(self.steps_per_s.mean)}

    def __repr__(self) -> str:
        return (f"TimeToAccuracy({self.variant}, {self.target.describe()}, {self.method}: "
                f"{self.wall_time!r}, reached {self.reached}/{self.replications})")


# ------------------------------------------------------------------------ simulation
def _traced(spec, prof, clu: Cluster, granularity: str, steps: int, seeds: list[int],
            options: dict, trace_bytes: float, parallel: bool) -> tuple[list[Schedule], list]:
    """The schedules and steps/s of every replication, simulated from time 0 with a trace."""
    from ..engine import simulate

    net, meta, _ = netcache.load_or_build(spec.name, prof, clu, granularity, options,
                                          lambda: spec.build(prof, clu, granularity, **options),
                                          disk=False)
    n = clu.workers
    opts = meta.get("options", {})
    used = meta.get("cluster", clu)
    used = used if isinstance(used, Cluster) else clu
    k = min(steps, 5)
    probe = simulate(net, steps=k * n, warmup=0, seeds=seeds[:1], trace=False, samples=False,
                     parallel=False)
    per_step = float(probe._firings.sum()) / (k * n)
    limit = int(per_step * steps * n * 1.2) + 10_000
    chunk = max(1, int(trace_bytes // (limit * TRACE_RECORD_BYTES)))
    out: list[Schedule] = []
    sps: list[float] = []
    for a in range(0, len(seeds), chunk):
        part = seeds[a:a + chunk]
        for _ in range(2):
            res = simulate(net, steps=steps * n, warmup=0, seeds=part, trace=True,
                           trace_limit=limit, parallel=parallel)
            counts = np.bincount(res.trace["rep"], minlength=len(part))
            if counts.max() < limit:
                break
            limit = int(res._firings.sum(axis=1).max() * 1.1) + 10_000  # events in flight too
        pred = Prediction(spec.name, prof, used, granularity, opts, steps, 0, res, meta)
        out += [schedule_of(pred, r) for r in range(len(part))]
        sps += list(pred.steps_per_s.samples)
        del res, pred
    return out, sps


def _rates(spec, prof, clu, granularity, seed, R: int, options, parallel) -> tuple[np.ndarray, list]:
    """Rounds per second (``iterations_per_s``) and steps/s per replication, no trace."""
    from ..prediction import predict_net

    p = predict_net(spec.name, prof, clu, None, granularity=granularity, steps=200,
                    replications=R, seed=seed, parallel=parallel, samples=False,
                    **options)
    return np.asarray(p.iterations_per_s.samples), list(p.steps_per_s.samples)


# ------------------------------------------------------------------------ noise model
_NOISE: dict[tuple, NoiseScaleModel] = {}


def _steps_to(target: Target, batch: int, seed: int, limit: int = 200_000) -> float:
    """Updates sequential SGD of ``batch`` needs to reach the target (first evaluation)."""
    U = 500
    while True:
        s = Schedule.from_reads(np.arange(U), samples=batch)
        c = replay(s, target.task, target.learning_rate, seed, eval_every=1)
        k = c.first(target.loss, target.accuracy, target.window)
        if k is not None:
            return float(c.updates[k])
        if U >= limit:
            raise SimulationError(f"sequential SGD with batch {batch} does not reach "
                                  f"{target.describe()} in {limit} updates; choose an easier "
                                  "target or a larger lr")
        U *= 4


def noise_model(target: Target, batch: int, seeds: int = 3) -> NoiseScaleModel:
    """``(S_min, B_noise)`` of ``target`` fitted through the mean steps of sequential SGD at
    ``batch`` and ``4 batch`` over ``seeds`` batch streams (cached per process)."""
    key = (target.task_name if isinstance(target.task, str) else id(target.task), target.loss,
           target.accuracy, target.learning_rate, target.seed, target.window, int(batch),
           int(seeds))
    if key not in _NOISE:
        b1, b2 = int(batch), 4 * int(batch)
        s1 = float(np.mean([_steps_to(target, b1, target.seed + r) for r in range(seeds)]))
        s2 = float(np.mean([_steps_to(target, b2, target.seed + r) for r in range(seeds)]))
        _NOISE[key] = fit_steps(b1, s1, b2, s2)
    return _NOISE[key]


# ------------------------------------------------------------------------ the front door
def _eval_every(s: Schedule) -> int:
    """The default evaluation interval: once per round of the workers (``n`` gradients), so
    the evaluation times do not depend on how many steps were simulated (near the noise floor
    the first evaluation under the target depends on when one looks)."""
    if s.kind == "local":
        return s.workers  # one local step of each worker
    if not s.grad_update.size:
        return 1
    per = s.grad_update.size / max(s.updates, 1)  # gradients per update
    return max(1, round(s.workers / per))



def _outcome(curve: Curve, target: Target) -> tuple[float, float, float]:
    k = curve.first(target.loss, target.accuracy, target.window)
    if k is None:
        return math.nan, math.nan, math.nan
    return float(curve.time[k]), float(curve.updates[k]), float(curve.samples[k])


def time_to_accuracy(variant: str | None, model: Any, cluster: Any, target: Target, *,
                     granularity: str = "coarse", steps: int | None = None,
                     replications: int = 8, seed: int | None = 0, method: str = "auto",
                     max_steps: int = 4_000, replay_limit: float = 2e7,
                     trace_bytes: float = 256e6, parallel: bool = True,
                     framework: str | None = None, transport: str | None = "auto",
                     **options: Any) -> TimeToAccuracy:
    """Predict the time and the updates ``variant`` needs to reach ``target``.

    Parameters
    ----------
    variant, model, cluster, granularity, framework, transport, **options
        As :func:`sgdnet.predict`.
    target : Target
    steps : int, optional
        Steps per worker to simulate; None: grown until every replication reaches the target.
    replications : int
    seed : int or None
        Root of the simulation seeds; replication ``r`` replays with batch seed
        ``target.seed + r``.
    method : {"auto", "replay", "noise"}
        See the module docstring (``"noise"`` for ``sync-ps`` / ``allreduce`` only).
    max_steps : int
        Bound of the steps per worker when ``steps`` is None.
    replay_limit : float
        Per-sample gradients above which ``"auto"`` uses the noise model for a synchronous
        scheme.
    trace_bytes : float
        Memory for the traces of the replications simulated at once.
    parallel : bool
        Simulate replications on the engine's threads.

    Returns
    -------
    TimeToAccuracy

    Raises
    ------
    VariantError
        Bad method, target or options; ``"noise"`` for a scheme with staleness.
    """
    if not isinstance(target, Target):
        raise VariantError(f"target={target!r} must be a sgdnet.accuracy.Target, e.g. "
                           "Target('logreg', loss=0.35)")
    if method not in METHODS:
        raise VariantError(f"method={method!r} is unknown; use one of {list(METHODS)}")
    variant, cluster, options = apply_framework(variant, cluster, options, framework, transport)
    spec = get(variant)
    if spec.name not in VARIANTS:
        raise VariantError(f"time to accuracy of variant {spec.name!r} is not modelled; "
                           f"variants: {sorted(VARIANTS)}")
    if method == "noise" and spec.name not in SYNCHRONOUS:
        raise VariantError(f"method='noise' models synchronous schemes of staleness 0 "
                           f"({list(SYNCHRONOUS)}), not {spec.name!r}; use method='replay'")
    R = int_arg("replications", replications, 1, error=VariantError)
    max_steps = int_arg("max_steps", max_steps, 1, error=VariantError)
    if steps is not None:
        steps = int_arg("steps", steps, 1, error=VariantError)
    prof, clu = resolve_model(model), resolve_cluster(cluster)
    get_task(target.task)
    seeds = derive_seeds(seed, R)
    n = clu.workers
    if spec.name in SYNCHRONOUS and method in ("auto", "noise"):
        b = int(prof.batch_size)
        nm = noise_model(target, b)
        S = nm.steps(n * b)
        if method == "noise" or S * n * b > replay_limit:
            rates, sps = _rates(spec, prof, clu, granularity, seed, R, options, parallel)
            S_int = math.ceil(S)
            return TimeToAccuracy(
                spec.name, granularity, target, "noise",
                Estimate(S_int / rates, "s", "time to target"),
                Estimate(np.full(R, float(S_int)), "updates", "updates to target"),
                Estimate(np.full(R, float(S_int * n * b)), "samples", "samples to target"),
                R, Estimate(sps, "steps/s", "worker steps per second"),
                Estimate(np.full(R, np.nan), "", "mean staleness"), 0, noise=nm)
    st = 250 if steps is None else steps
    while True:
        scheds, sps = _traced(spec, prof, clu, granularity, st, seeds, dict(options),
                              trace_bytes, parallel)
        curves = [replay(s, target.task, target.learning_rate, target.seed + r,
                         target.eval_every or _eval_every(s)) for r, s in enumerate(scheds)]
        outs = np.array([_outcome(c, target) for c in curves])
        if steps is not None or np.isfinite(outs[:, 0]).all() or st >= max_steps:
            break
        st = min(4 * st, max_steps)
    stale = [float(s.staleness.mean()) if s.kind == "updates" and s.grad_update.size else
             math.nan for s in scheds]
    return TimeToAccuracy(spec.name, granularity, target, "replay",
                          Estimate(outs[:, 0], "s", "time to target"),
                          Estimate(outs[:, 1], "updates", "updates to target"),
                          Estimate(outs[:, 2], "samples", "samples to target"),
                          int(np.isfinite(outs[:, 0]).sum()),
                          Estimate(sps, "steps/s", "worker steps per second"),
                          Estimate(stale, "", "mean staleness"), st, curves, None, scheds)
