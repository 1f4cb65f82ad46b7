"""Simulation results: :class:`Estimate` (one figure across replications, with its CI) and
:class:`Result` (everything :func:`sgdnet.simulate` measured), built from per-replication
:class:`RawReplication` records by :meth:`Result.from_raw` (the Numba engine and the reference
engine produce the same type)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ._check import is_int
from ._gc import paused_gc
from .errors import SimulationError, UnknownNameError
from .estimate import (  # noqa: F401 - HIST_* re-exported: the engine imports them from here
    HIST_BINS,
    HIST_KEY0,
    HIST_LO,
    HIST_SUB_BITS,
    Estimate,
    hist_bin,
    hist_edges,
    hist_quantile,
)

__all__ = ["Estimate", "RawReplication", "Result", "HIST_BINS", "hist_bin", "hist_edges", "hist_quantile", "GateStats"]

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
    #: leads of gate members at their counter completions: a (gates, bins) histogram (last bin:
    #: that lead or more) or a list of (gate index, lead) pairs
    gate_lead: Any = None
    #: time integral of each place's marking over the window (token-seconds), (P,)
    token_time: np.ndarray | None = None
    #: sojourn (completion - request time) sums and counts per resource, at completions, (R,)
    sojourn_sum: np.ndarray | None = None
    sojourn_n: np.ndarray | None = None
    #: wait / sojourn histograms per resource, (R, HIST_BINS), when requested
    wait_hist: np.ndarray | None = None
    sojourn_hist: np.ndarray | None = None
    #: ``(step completions at the start of the repeated period, its step completions, its
    #: duration, step completions skipped after the warm-up, and in it)`` when the kernel
    #: skipped periods of a periodic regime (:mod:`sgdnet.engine.periodic`), else None
    periodic: tuple | None = None


TRACE_DTYPE = np.dtype([("rep", np.int64), ("transition", np.int64), ("start", np.float64), ("end", np.float64)])


def _ratio(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sums / counts`` per replication, NaN where nothing was counted."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _stack(raws, name: str, shape: tuple, dtype) -> np.ndarray | None:
    """The ``name`` arrays of every raw record stacked, or None when a record lacks one."""
    arrs = [getattr(r, name) for r in raws]
    if any(a is None for a in arrs):
        return None
    return np.array(arrs, dtype=dtype).reshape(shape)


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
        p = raws[0].periodic if len(raws) else None
        #: None, or how the kernel skipped the periods of a periodic regime it found (a net
        #: without randomness, :mod:`sgdnet.engine.periodic`): ``start_step`` (step completions,
        #: warm-up included, at the start of the last period it confirmed), ``period_steps``,
        #: ``cycle_time`` (the period's duration, s), ``skipped_steps`` (of the counted
        #: window) and ``warmup_skipped_steps`` (of the warm-up)
        self.periodic: dict | None = None if p is None else {
            "start_step": p[0], "period_steps": p[1], "cycle_time": p[2], "skipped_steps": p[3],
            "warmup_skipped_steps": p[4]}
        with paused_gc():  # one object per transition: no gen-2 walks of the large live heap
            self.transition_names: list[str] = list(meta.transition_names)
            self.transition_tags: list[dict] = list(map(dict, meta.transition_tags))
            self.transition_resources: list[tuple] = [tuple(r) for r in meta.transition_resources]
            self.resource_names: list[str] = list(meta.resource_names)
            self.resource_tags: list[dict] = [dict(t) for t in meta.resource_tags]
            self.resource_capacity: list[int] = list(meta.resource_capacity)
            self.gate_names: list[str] = list(meta.gate_names)
            self.gate_kinds: list[str] = list(meta.gate_kinds)
            self.place_names: list[str] = list(meta.place_names)
            self._ridx = dict(zip(self.resource_names, range(len(self.resource_names))))
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
        P = len(self.place_names)
        self._token_time = _stack(raws, "token_time", (R, P), float)
        self._sojourn_sum = _stack(raws, "sojourn_sum", (R, NR), float)
        self._sojourn_n = _stack(raws, "sojourn_n", (R, NR), np.int64)
        self._wait_hist = _stack(raws, "wait_hist", (R, NR, HIST_BINS), np.int64)
        self._sojourn_hist = _stack(raws, "sojourn_hist", (R, NR, HIST_BINS), np.int64)
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
    def _index(self, idx: dict, kind: str, name: str, known: list) -> int:
        try:
            return idx[name]
        except KeyError:
            raise UnknownNameError(
                f"{kind} {name!r} is not in net {self.net_name!r}; known: {known[:20]}"
                + (" ..." if len(known) > 20 else "")) from None

    @cached_property
    def _tidx(self) -> dict[str, int]:
        """Transition name -> index, built on the first lookup by name (a prediction's
        summaries need none: 0.08 s at 1,024 workers saved)."""
        return dict(zip(self.transition_names, range(len(self.transition_names))))

    @cached_property
    def _pidx(self) -> dict[str, int]:
        """Place name -> index, built on the first lookup by name (see :attr:`_tidx`)."""
        return dict(zip(self.place_names, range(len(self.place_names))))

    def _t(self, name: str) -> int:
        return self._index(self._tidx, "transition", name, self.transition_names)

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
        """:meth:`utilization` of every resource (computed in one pass over the resources)."""
        cap = np.asarray(self.resource_capacity, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self._busy / (cap[None, :] * self.sim_time[:, None])
        cols = np.ascontiguousarray(u.T)
        return {n: Estimate(cols[j], unit="", label=f"utilization {n}")
                for j, n in enumerate(self.resource_names)}

    def step_counts_by_worker(self) -> tuple[list, np.ndarray]:
        """``(workers, counts)``: the ``worker`` tag values of the step transitions in first-seen
        order and the counted step completions of each, ``counts[r, g]`` for replication ``r``
        and worker ``workers[g]`` (one pass over the firings, not one scan per worker)."""
        groups, gid = self._worker_groups()
        keep = gid >= 0
        G, R = len(groups), self.replications
        counts = np.zeros((R, G), dtype=np.int64)
        for r in range(R):
            counts[r] = np.bincount(gid[keep], weights=self._firings[r, keep],
                                    minlength=G).astype(np.int64)
        return list(groups), counts

    def step_times_by_worker(self) -> dict:
        """:meth:`step_times` of every worker at once: ``{worker: intervals}``.

        One stable sort per replication (:meth:`_steps_of_group`); when every worker has the
        same number of counted steps (bulk-synchronous variants) the intervals come from one
        ``numpy.diff`` of a workers x steps matrix; else per worker. Same values as
        ``step_times(worker)`` for each worker.
        """
        self._need_samples("step_times")
        groups, _ = self._worker_groups()
        G = len(groups)
        per: list[list[np.ndarray]] = [[] for _ in range(G)]
        for k, r in enumerate(self._raws):
            times = np.asarray(r.step_times, dtype=float)
            order, bounds = self._steps_of_group(k)
            sizes = np.diff(bounds)
            if G and (sizes == sizes[0]).all():
                d = np.diff(times[order[bounds[0]:bounds[-1]]].reshape(G, int(sizes[0])), axis=1)
                for g in range(G):
                    per[g].append(d[g])
            else:
                for g in range(G):
                    per[g].append(np.diff(times[order[bounds[g]:bounds[g + 1]]]))
        return {w: (np.concatenate(per[g]) if per[g] else np.zeros(0))
                for w, g in groups.items()}

    def mean_wait(self, resource: str) -> Estimate:
        """Mean wait (grant time - request time, seconds) of the firings that took ``resource``."""
        j = self._r(resource)
        return Estimate(_ratio(self._wait_sum[:, j], self._wait_n[:, j]), unit="s",
                        label=f"mean wait {resource}")

    # ---------------------------------------------- places, transitions, queues
    def _p(self, name: str) -> int:
        return self._index(self._pidx, "place", name, self.place_names)

    def _need(self, a: np.ndarray | None, what: str, fix: str) -> np.ndarray:
        if a is None:
            if getattr(self, "engine", "generic") == "fast":
                fix = ("the event-graph fast path ran (result.engine == 'fast') and records only "
                       "steps and firings; simulate with engine='generic'")
            raise SimulationError(f"{what} is not in this result; {fix}")
        return a

    def mean_tokens(self, place: str) -> Estimate:
        """Time-average number of tokens in ``place`` over the counting window ``[t0, t1]``.

        With :meth:`transition_throughput` and :meth:`mean_wait` this gives Little's law for a
        queue place: ``mean_tokens(queue) = throughput(server) * mean_wait(server resource)``.
        """
        j = self._p(place)
        tt = self._need(self._token_time, "the time-average marking",
                        "it is recorded by sgdnet.simulate and simulate_reference")
        with np.errstate(divide="ignore", invalid="ignore"):
            return Estimate(tt[:, j] / self.sim_time, unit="tokens", label=f"mean tokens {place}")

    def mean_marking(self) -> dict[str, Estimate]:
        """:meth:`mean_tokens` of every place."""
        return {p: self.mean_tokens(p) for p in self.place_names}

    def transition_throughput(self, transition: str) -> Estimate:
        """Completions of ``transition`` per second of the counting window."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return Estimate(self._firings[:, self._t(transition)] / self.sim_time, unit="firings/s",
                            label=f"throughput {transition}")

    def mean_sojourn(self, resource: str) -> Estimate:
        """Mean sojourn (completion time - request time, seconds: the wait plus the holding) of
        the firings that held ``resource``, counted at their completions in the window."""
        j = self._r(resource)
        ss = self._need(self._sojourn_sum, "the sojourn time",
                        "it is recorded by sgdnet.simulate and simulate_reference")
        return Estimate(_ratio(ss[:, j], self._sojourn_n[:, j]), unit="s",
                        label=f"mean sojourn {resource}")

    def _hist(self, kind: str, resource: str) -> np.ndarray:
        h = self._wait_hist if kind == "wait" else self._sojourn_hist
        h = self._need(h, f"the {kind} distribution", "simulate with histograms=True")
        return h[:, self._r(resource), :]

    def wait_quantile(self, resource: str, q: float) -> Estimate:
        """The ``q``-quantile of the waits (grant - request time) at ``resource``, one sample per
        replication (so the CI is across replications), read from the log-spaced histogram
        recorded with ``simulate(..., histograms=True)`` (within 0.8% of the sample quantile,
        waits under 0.93 ns read as 0)."""
        return self._quantile("wait", resource, q)

    def sojourn_quantile(self, resource: str, q: float) -> Estimate:
        """The ``q``-quantile of the sojourns (completion - request time) of the firings that
        held ``resource``, as :meth:`wait_quantile`."""
        return self._quantile("sojourn", resource, q)

    def _quantile(self, kind: str, resource: str, q: float) -> Estimate:
        if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0 <= q <= 1:
            raise SimulationError(f"{kind}_quantile(q={q!r}): q must be a probability in [0, 1], "
                                  "e.g. 0.99")
        h = self._hist(kind, resource)
        return Estimate([hist_quantile(row, float(q)) for row in h], unit="s",
                        label=f"{kind} q{q:g} {resource}")

    def histogram(self, resource: str, kind: str = "wait") -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of the ``kind`` (``"wait"`` or ``"sojourn"``) histogram of
        ``resource`` pooled over replications; ``counts[k]`` counts durations in
        ``[edges[k], edges[k + 1])`` (the first bin starts at 0, the last ends at ``inf``)."""
        if kind not in ("wait", "sojourn"):
            raise SimulationError(f"histogram kind={kind!r} must be 'wait' or 'sojourn'")
        counts = self._hist(kind, resource).sum(axis=0)
        edges = hist_edges()
        return edges, counts

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

    def gate_stats(self, gate_name: str) -> GateStats:
        """What gate ``gate_name`` did in each replication since time 0: the ``r*`` decisions
        and the leads at its members' counter completions (:class:`GateStats`)."""
        self.gate_log(gate_name)  # the unknown-name error
        return gate_stats(self, gate_name)

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
            "periodic": None if self.periodic is None else dict(self.periodic),
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

# ------------------------------------------------------------------ gate statistics
# What a gate did, counted from time 0 (warm-up included) in every replication by both engines:
# ``r*``, every decision of a ``dynamic_lag`` gate's controller (none for ``lag`` gates); the
# *lead* at every completion of a member's counter transition (for DSSP a push arriving at the
# server): that member's count minus the gate's least count, after the completion. The kernel
# keeps leads in a histogram whose last bin holds that lead or more.


@dataclass(frozen=True)
class GateStats:
    """Per-replication counts of one gate's decisions and leads.

    Attributes
    ----------
    gate, kind : str
        The gate's name and kind (``"lag"`` or ``"dynamic_lag"``).
    r_star_counts : numpy.ndarray
        ``(replications, max r* + 1)``: controller decisions by ``r*`` (one zero column for a
        ``lag`` gate).
    lead_counts : numpy.ndarray
        ``(replications, bins)``: counter completions by the member's lead; with a kernel
        histogram the last column counts leads ``>= lead_overflow_at``.
    lead_overflow_at : int
        The lead from which completions share the last column (``bins``, never reached,
        for the reference engine's exact lists).
    """

    gate: str
    kind: str
    r_star_counts: np.ndarray
    lead_counts: np.ndarray
    lead_overflow_at: int

    @property
    def decisions(self) -> int:
        """Controller decisions over all replications."""
        return int(self.r_star_counts.sum())

    def r_star_pmf(self) -> np.ndarray:
        """Share of the decisions (all replications pooled) by ``r* = 0..r_max``."""
        tot = self.r_star_counts.sum()
        return self.r_star_counts.sum(axis=0) / tot if tot else np.zeros(self.r_star_counts.shape[1])

    def lead_pmf(self) -> np.ndarray:
        """Share of the counter completions (pooled) by lead (last entry: that lead or more)."""
        tot = self.lead_counts.sum()
        return self.lead_counts.sum(axis=0) / tot if tot else np.zeros(self.lead_counts.shape[1])

    def mean_r_star(self) -> Estimate:
        """Mean ``r*`` per replication (nan for a replication without decisions)."""
        return Estimate(_row_means(self.r_star_counts), unit="steps",
                        label=f"mean r* of gate {self.gate}")

    def mean_lead(self) -> Estimate:
        """Mean lead at counter completions per replication (overflowed leads count as
        ``lead_overflow_at``, so a lower bound when :meth:`lead_overflowed`)."""
        return Estimate(_row_means(self.lead_counts), unit="steps",
                        label=f"mean lead of gate {self.gate}")

    def lead_overflowed(self) -> bool:
        """True when some lead reached ``lead_overflow_at`` (and so shares the last column)."""
        return self.lead_overflow_at < self.lead_counts.shape[1] and bool(self.lead_counts[:, -1].sum())


def _row_means(counts: np.ndarray) -> np.ndarray:
    v = np.arange(counts.shape[1], dtype=float)
    n = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (counts * v).sum(axis=1) / np.maximum(n, 1), np.nan)


def _lead_rows(raws: list, g: int) -> tuple[np.ndarray, int]:
    rows = []
    for r in raws:
        gl = r.gate_lead
        if isinstance(gl, np.ndarray) and gl.ndim == 2:
            rows.append(np.asarray(gl[g], dtype=np.int64))
        else:
            leads = np.array([x[1] for x in (gl or []) if x[0] == g], dtype=np.int64)
            rows.append(np.bincount(leads, minlength=1))
    bins = max(len(x) for x in rows)
    out = np.zeros((len(rows), bins), dtype=np.int64)
    for k, x in enumerate(rows):
        out[k, :len(x)] = x
    # kernel histograms already fold large leads into their last bin; lists never do
    folded = any(isinstance(r.gate_lead, np.ndarray) for r in raws)
    return out, (bins - 1 if folded else bins)


def gate_stats(result: Any, gate_name: str) -> GateStats:
    """The :class:`GateStats` of gate ``gate_name`` in ``result`` (see ``Result.gate_stats``)."""
    g = result.gate_names.index(gate_name)
    kind = result.gate_kinds[g]
    raws = result._raws
    rs = []
    for r in raws:
        gl = r.gate_log
        if isinstance(gl, np.ndarray) and gl.ndim == 2:
            rs.append(np.asarray(gl[gl[:, 0] == g, 1], dtype=np.int64))
        else:
            rs.append(np.array([x[1] for x in gl if x[0] == g], dtype=np.int64))
    width = max([int(x.max()) + 1 for x in rs if x.size] + [1])
    rc = np.zeros((len(rs), width), dtype=np.int64)
    for k, x in enumerate(rs):
        rc[k] = np.bincount(x, minlength=width)
    lc, over = _lead_rows(raws, g)
    return GateStats(gate_name, kind, rc, lc, over)
