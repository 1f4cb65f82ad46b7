"""Simulation results: :class:`Estimate` (one figure across replications, with its CI) and
:class:`Result` (everything :func:`sgdnet.simulate` measured), built from per-replication
:class:`RawReplication` records by :meth:`Result.from_raw` (the Numba engine and the reference
engine produce the same type)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._check import is_int
from ._gc import paused_gc
from .errors import SimulationError, UnknownNameError

__all__ = ["Estimate", "RawReplication", "Result"]


def _fmt(x: float, digits: int) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


class Estimate:
    """One figure estimated from independent samples (one per replication, or batch means).

    Parameters
    ----------
    samples : array_like
        The per-replication values.
    unit : str
        Unit of the figure, e.g. ``"steps/s"``.
    label : str
        What it measures.

    Examples
    --------
    >>> e = Estimate([10.0, 12.0, 11.0], unit="steps/s")
    >>> e.mean
    11.0
    """

    def __init__(self, samples, unit: str = "", label: str = ""):
        self.samples = np.asarray(samples, dtype=float).ravel().copy()
        self.samples.setflags(write=False)
        self.unit = unit
        self.label = label

    @classmethod
    def from_batch_means(cls, x, n_batches: int = 20, unit: str = "", label: str = "") -> Estimate:
        """An Estimate whose samples are the ``n_batches`` batch means of one long series ``x``.

        The first ``len(x) - b * n_batches`` (oldest) observations are dropped, ``b = len(x) //
        n_batches``; the Student-t CI over batch means is then the batch-means CI.
        """
        from .errors import AnalysisError

        a = np.asarray(x, dtype=float).ravel()
        if not is_int(n_batches) or n_batches < 2:
            raise AnalysisError(f"n_batches={n_batches!r} must be an integer >= 2")
        b = a.size // n_batches
        if b < 1:
            raise AnalysisError(f"series of length {a.size} is shorter than n_batches={n_batches}; use fewer batches")
        a = a[a.size - b * n_batches:]
        return cls(a.reshape(n_batches, b).mean(axis=1), unit=unit, label=label)

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.samples.size)

    @property
    def mean(self) -> float:
        """Sample mean (NaN when empty)."""
        return float(self.samples.mean()) if self.n else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof=1; NaN with fewer than two samples)."""
        return float(self.samples.std(ddof=1)) if self.n > 1 else math.nan

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t confidence interval ``(lo, hi)`` of the mean (NaN with one sample)."""
        from .analysis.stats import mean_ci

        finite = self.samples[np.isfinite(self.samples)]
        if finite.size == 0:
            return math.nan, math.nan
        _, lo, hi = mean_ci(finite, level)
        return lo, hi

    def half_width(self, level: float = 0.95) -> float:
        """Half the width of :meth:`ci`."""
        lo, hi = self.ci(level)
        return 0.5 * (hi - lo)

    def quantile(self, q):
        """Quantile(s) of the samples; ``q`` a probability or an array of them, in [0, 1].

        Raises
        ------
        SimulationError
            ``q`` is not a number (or array of numbers) in [0, 1], or there are no samples.
        """
        try:
            qa = np.asarray(q, dtype=float)
        except (TypeError, ValueError):
            qa = None
        if qa is None or not np.all((qa >= 0) & (qa <= 1)):
            raise SimulationError(f"Estimate.quantile(q={q!r}): q must be a probability in [0, 1] "
                                  "(or an array of them), e.g. 0.5 for the median")
        if self.n == 0:
            raise SimulationError(f"Estimate.quantile: no samples in {self!r}")
        return np.quantile(self.samples, qa)

    def to_dict(self, level: float = 0.95) -> dict:
        """JSON-able: mean, std, CI bounds, level, n, unit, label and the samples."""
        lo, hi = self.ci(level) if self.n else (math.nan, math.nan)
        return {
            "mean": self.mean, "std": self.std, "lo": lo, "hi": hi, "level": level, "n": self.n,
            "unit": self.unit, "label": self.label, "samples": self.samples.tolist(),
        }

    def __float__(self) -> float:
        return self.mean

    def __repr__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.n > 1:
            hw = self.half_width()
            return f"{_fmt(self.mean, 4)} ± {_fmt(hw, 2)}{unit} (95% CI, n={self.n})"
        return f"{_fmt(self.mean, 4)}{unit} (n={self.n})"


@dataclass
class RawReplication:
    """The raw record of one replication (see the team contract)."""

    t0: float
    t1: float
    step_times: np.ndarray
    step_trans: np.ndarray
    firings: np.ndarray
    busy: np.ndarray
    wait_sum: np.ndarray
    wait_n: np.ndarray
    trace_trans: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    trace_start: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trace_end: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gate_log: Any = field(default_factory=list)
    events: int = 0


TRACE_DTYPE = np.dtype([("rep", np.int64), ("transition", np.int64), ("start", np.float64), ("end", np.float64)])


class Result:
    """What a simulation measured, per replication, with names and tags to group by.

    Build with :meth:`from_raw`. Figures are :class:`Estimate` objects across replications.
    """

    def __init__(self, meta, raws: Sequence[RawReplication], seeds, *, steps: int, warmup: int,
                 trace: bool = False, samples: bool = True, deterministic: bool = False):
        self.net_name: str = meta.name
        #: True when the net has no randomness: one trajectory was simulated and every
        #: replication is that trajectory (its CIs have zero width)
        self.deterministic = bool(deterministic)
        self.steps = int(steps)
        self.warmup = int(warmup)
        self.seeds = [int(s) for s in seeds]
        self.replications = len(raws)
        self.samples = bool(samples)
        #: which engine produced it: "generic" (the event kernel) or "fast" (the max-plus
        #: recursion of sgdnet.engine.fastpath); simulate sets it
        self.engine = "generic"
        with paused_gc():  # one object per transition: no gen-2 walks of the large live heap
            self.transition_names: list[str] = list(meta.transition_names)
            self.transition_tags: list[dict] = [dict(t) for t in meta.transition_tags]
            self.transition_resources: list[tuple] = [tuple(r) for r in meta.transition_resources]
            self.resource_names: list[str] = list(meta.resource_names)
            self.resource_tags: list[dict] = [dict(t) for t in meta.resource_tags]
            self.resource_capacity: list[int] = list(meta.resource_capacity)
            self.gate_names: list[str] = list(meta.gate_names)
            self.place_names: list[str] = list(meta.place_names)
            self._tidx = {n: i for i, n in enumerate(self.transition_names)}
            self._ridx = {n: i for i, n in enumerate(self.resource_names)}
        self._raws = list(raws)
        self._wgroups: tuple[dict, np.ndarray] | None = None  # see _worker_groups
        self._rep_groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # see _steps_of_group
        R = self.replications
        self.t0 = np.array([r.t0 for r in raws], dtype=float)
        self.t1 = np.array([r.t1 for r in raws], dtype=float)
        self.events = np.array([r.events for r in raws], dtype=np.int64)
        T, NR = len(self.transition_names), len(self.resource_names)
        self._firings = np.array([r.firings for r in raws], dtype=np.int64).reshape(R, T)
        self._busy = np.array([r.busy for r in raws], dtype=float).reshape(R, NR)
        self._wait_sum = np.array([r.wait_sum for r in raws], dtype=float).reshape(R, NR)
        self._wait_n = np.array([r.wait_n for r in raws], dtype=np.int64).reshape(R, NR)
        if trace:
            parts = []
            for k, r in enumerate(raws):
                a = np.zeros(len(r.trace_trans), dtype=TRACE_DTYPE)
                a["rep"] = k
                a["transition"] = r.trace_trans
                a["start"] = r.trace_start
                a["end"] = r.trace_end
                parts.append(a)
            self.trace = np.concatenate(parts) if parts else np.zeros(0, dtype=TRACE_DTYPE)
        else:
            self.trace = None
        with np.errstate(divide="ignore", invalid="ignore"):  # a window of zero length gives inf
            self.throughput = Estimate(self.steps / self.sim_time, unit="steps/s", label="throughput")

    # ------------------------------------------------------------ building
    @classmethod
    def from_raw(cls, net_or_compiled, raws: Sequence[RawReplication], seeds, *, steps: int | None = None,
                 warmup: int = 0, trace: bool = False, samples: bool = True) -> Result:
        """Build a Result from per-replication raw records.

        Parameters
        ----------
        net_or_compiled : Net or CompiledNet
            Source of names and tags.
        raws : list of RawReplication
        seeds : list of int
            The per-replication seeds.
        steps, warmup : int
            Counted and discarded step completions (``steps`` defaults to the length of the
            first replication's ``step_times``).
        trace, samples : bool
            Whether traces / step samples were recorded.
        """
        from .net.compiled import compile_net

        if not raws:
            raise SimulationError("Result.from_raw needs at least one replication record")
        meta = compile_net(net_or_compiled)
        if steps is None:
            steps = len(raws[0].step_times)
        return cls(meta, raws, seeds, steps=steps, warmup=warmup, trace=trace, samples=samples)

    # -------------------------------------------------------------- lookup
    def _t(self, name: str) -> int:
        try:
            return self._tidx[name]
        except KeyError:
            raise UnknownNameError(
                f"transition {name!r} is not in net {self.net_name!r}; known: {self.transition_names[:20]}"
                + (" ..." if len(self.transition_names) > 20 else "")) from None

    def _r(self, name: str) -> int:
        try:
            return self._ridx[name]
        except KeyError:
            raise UnknownNameError(
                f"resource {name!r} is not in net {self.net_name!r}; known: {self.resource_names}") from None

    # ------------------------------------------------------------- figures
    @property
    def sim_time(self) -> np.ndarray:
        """``t1 - t0`` (seconds) per replication."""
        return self.t1 - self.t0

    def firings(self, transition: str) -> np.ndarray:
        """Completions of ``transition`` inside the counting window, per replication."""
        return self._firings[:, self._t(transition)].copy()

    def throughput_by(self, tag: str = "worker") -> dict:
        """Steps per second of the step transitions grouped by the value of ``tag``."""
        groups: dict[Any, list[int]] = {}
        for i, tags in enumerate(self.transition_tags):
            if tags.get("step") and tag in tags:
                groups.setdefault(tags[tag], []).append(i)
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                v: Estimate(self._firings[:, idx].sum(axis=1) / self.sim_time, unit="steps/s",
                            label=f"throughput {tag}={v}")
                for v, idx in groups.items()
            }

    def step_completion_times(self, rep: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(times, transition indices)`` of the counted step completions of replication ``rep``."""
        self._need_samples("step_completion_times")
        r = self._raws[self._rep(rep)]
        return np.asarray(r.step_times, dtype=float).copy(), np.asarray(r.step_trans, dtype=np.int64).copy()

    def step_times(self, worker=None) -> np.ndarray:
        """Intervals between successive counted step completions, pooled over replications.

        ``worker=None``: of all steps (the first interval starts at ``t0``); else of the step
        transitions tagged ``worker=worker``.
        """
        self._need_samples("step_times")
        out = []
        g = -1
        if worker is not None:
            groups, _ = self._worker_groups()
            try:
                g = groups.get(worker, -1)
            except TypeError:  # an unhashable value is no worker tag
                g = -1
            if g < 0:
                known = sorted(groups)
                raise UnknownNameError(f"no step transition has worker={worker!r}; known workers: {known}")
        for k, r in enumerate(self._raws):
            times = np.asarray(r.step_times, dtype=float)
            if worker is None:
                out.append(np.diff(np.concatenate([[self.t0[k]], times])))
            else:
                order, bounds = self._steps_of_group(k)
                out.append(np.diff(times[order[bounds[g]:bounds[g + 1]]]))
        return np.concatenate(out) if out else np.zeros(0)

    def _worker_groups(self) -> tuple[dict, np.ndarray]:
        """``({worker value: group}, group of each transition)``: the ``worker`` tags of the step
        transitions numbered in first-seen order (-1 for the other transitions); built once."""
        if self._wgroups is None:
            groups: dict = {}
            gid = np.full(len(self.transition_tags), -1, dtype=np.int64)
            for i, t in enumerate(self.transition_tags):
                if t.get("step") and "worker" in t:
                    gid[i] = groups.setdefault(t["worker"], len(groups))
            self._wgroups = (groups, gid)
        return self._wgroups

    def _steps_of_group(self, rep: int) -> tuple[np.ndarray, np.ndarray]:
        """``(order, bounds)``: the indices of replication ``rep``'s counted steps sorted by worker
        group (stable, so each group's steps stay in time order); group ``g``'s steps are
        ``order[bounds[g]:bounds[g + 1]]``. One sort per replication, built on first use, so the
        step times of every worker cost O(steps log steps) in all, not O(workers x steps)."""
        got = self._rep_groups.get(rep)
        if got is None:
            groups, gid = self._worker_groups()
            g = gid[np.asarray(self._raws[rep].step_trans, dtype=np.int64)]
            order = np.argsort(g, kind="stable")
            bounds = np.searchsorted(g[order], np.arange(len(groups) + 1), side="left")
            got = self._rep_groups[rep] = (order, bounds)
        return got

    def utilization(self, resource: str) -> Estimate:
        """Busy server-seconds / (capacity * (t1 - t0)) of ``resource``."""
        j = self._r(resource)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self._busy[:, j] / (self.resource_capacity[j] * self.sim_time)
        return Estimate(u, unit="", label=f"utilization {resource}")

    def utilizations(self) -> dict[str, Estimate]:
        """:meth:`utilization` of every resource."""
        return {n: self.utilization(n) for n in self.resource_names}

    def mean_wait(self, resource: str) -> Estimate:
        """Mean wait (grant time - request time, seconds) of the firings that took ``resource``."""
        j = self._r(resource)
        n = self._wait_n[:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(n > 0, self._wait_sum[:, j] / np.maximum(n, 1), np.nan)
        return Estimate(w, unit="s", label=f"mean wait {resource}")

    def trace_events(self, rep: int = 0) -> list[dict]:
        """The traced firings of replication ``rep`` as dicts ``{name, tags, resources, start, end}``."""
        if self.trace is None:
            raise SimulationError("this result has no trace; simulate with trace=True")
        rep = self._rep(rep)
        tr = self.trace[self.trace["rep"] == rep]
        return [
            {"name": self.transition_names[int(e["transition"])], "tags": dict(self.transition_tags[int(e["transition"])]),
             "resources": self.transition_resources[int(e["transition"])], "start": float(e["start"]),
             "end": float(e["end"])}
            for e in tr
        ]

    def gate_log(self, gate_name: str) -> np.ndarray:
        """The ``r*`` values chosen by ``dynamic_lag`` gate ``gate_name``, all replications."""
        try:
            g = self.gate_names.index(gate_name)
        except ValueError:
            raise UnknownNameError(f"gate {gate_name!r} is not in net {self.net_name!r}; known: {self.gate_names}") from None
        out = []
        for r in self._raws:
            gl = r.gate_log
            if isinstance(gl, np.ndarray) and gl.ndim == 2:
                out.append(gl[gl[:, 0] == g, 1])
            else:
                out.append(np.array([x[1] for x in gl if x[0] == g], dtype=np.int64))
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def to_dict(self) -> dict:
        """JSON-able summary (figures as :meth:`Estimate.to_dict`)."""
        return {
            "net_name": self.net_name,
            "steps": self.steps,
            "warmup": self.warmup,
            "replications": self.replications,
            "deterministic": self.deterministic,
            "seeds": list(self.seeds),
            "throughput_steps_per_s": self.throughput.to_dict(),
            "throughput_by_worker": {str(k): v.to_dict() for k, v in self.throughput_by("worker").items()},
            "utilization": {k: v.to_dict() for k, v in self.utilizations().items()},
            "mean_wait_seconds": {n: self.mean_wait(n).to_dict() for n in self.resource_names},
            "sim_time_seconds": self.sim_time.tolist(),
            "events": self.events.tolist(),
        }

    # ---------------------------------------------------------------- misc
    def _rep(self, rep: int) -> int:
        if not is_int(rep) or not 0 <= rep < self.replications:
            raise SimulationError(f"rep={rep!r} is out of range 0..{self.replications - 1}")
        return int(rep)

    def _need_samples(self, what: str) -> None:
        if not self.samples:
            raise SimulationError(f"{what} needs step samples; simulate with samples=True")

    def __repr__(self) -> str:
        return (f"Result({self.net_name!r}: {self.throughput!r}, steps={self.steps}, warmup={self.warmup}, "
                f"replications={self.replications})")
