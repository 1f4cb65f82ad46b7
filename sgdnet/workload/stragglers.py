"""Straggler models: how and when workers run slower than their nominal speed.

sgdnet distinguishes four mechanisms of slowness; they compose freely and each lives in one place:

1. **Static heterogeneity** — a worker is permanently slower (an older GPU, a smaller instance):
   ``Cluster(speeds=[1, 1, 0.5, 0.5])``. Worker ``i``'s compute times are divided by
   ``speeds[i]`` when its net is built. Not a straggler model; nothing here.
2. **Independent per-operation noise** — every operation's duration varies on its own
   (kernel jitter, cache effects, TCP variability): ``Cluster(compute_cv=0.05, comm_cv=0.1)``.
   Each operation is sampled independently from a distribution with that coefficient of
   variation. Not a straggler model either; it averages out over the many operations of a step.
3. **Per-step slowdowns** — :class:`StepSlowdown`: with probability ``p`` a worker's *whole step*
   is ``factor`` times slower (a garbage-collection pause, a noisy neighbour for a while, a
   throttled GPU). Implemented as an ``iid`` modulator per worker whose multiplier is
   ``Straggler(Deterministic(1), p, factor)`` (1 with probability ``1 - p``, ``factor`` with
   probability ``p``), redrawn each time the worker's step-start transition starts; every compute
   transition of the worker multiplies its sampled duration by the current value, so all of a
   step's operations are slowed together (correlated, unlike mechanism 2).
4. **Slow/fast modes** — :class:`MarkovSlowdown`: each worker alternates between a fast mode
   (multiplier 1) and a slow mode (multiplier ``slow_factor``) with exponentially distributed
   sojourns of means ``mean_fast`` and ``mean_slow`` seconds, independently of its steps (a
   machine that is intermittently overloaded). Implemented as a ``markov`` modulator per worker,
   started from its stationary law; a compute operation sees the mode at its start.

Mechanisms 3 and 4 are the straggler models of this module and go into
``Cluster(straggler=...)``. Either may be restricted to a subset of workers with ``workers=``.

The protocol variants call
--------------------------
Variant builders call ``cluster.straggler.modulator(net, worker, step_start)`` once per worker
(after the worker's step-start transition exists) and set the returned modulator name (or
``None``: no slowdown for that worker) on every compute transition of that worker. Any object
with that method (and ``to_dict``) can be a straggler model; :func:`from_spec` turns dicts and
strings (CLI, study grids) into one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..dists import Deterministic, Straggler
from ..errors import ClusterError, UnitError
from . import _quantity as _q

__all__ = [
    "StragglerModel",
    "NoStraggler",
    "StepSlowdown",
    "MarkovSlowdown",
    "from_spec",
    "modulator_name",
    "KINDS",
]

#: Straggler kinds understood by :func:`from_spec`.
KINDS = ("none", "step", "markov")


def modulator_name(worker: int) -> str:
    """Name of the modulator a straggler model adds for ``worker``: ``"straggler_w{worker}"``."""
    return f"straggler_w{worker}"


def _workers(value: Any, who: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ClusterError(f"{who}: workers={value!r} must be None (all workers) or a list of "
                           "worker indices, e.g. workers=[0, 3]")
    out: list[int] = []
    for w in value:
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ClusterError(f"{who}: workers contains {w!r}; worker indices are integers >= 0")
        if w in out:
            raise ClusterError(f"{who}: workers lists worker {w} twice; give each index once")
        out.append(int(w))
    if not out:
        raise ClusterError(f"{who}: workers=[] selects no worker; use None for all workers or "
                           "NoStraggler() for none")
    return tuple(sorted(out))


def _factor(value: Any, field: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ClusterError(f"{who}: {field}={value!r} must be a finite number >= 1 "
                           "(3 = three times slower)")
    if value < 1:
        raise ClusterError(f"{who}: {field}={value!r} is a slowdown multiplier and must be >= 1 "
                           "(3 = three times slower); model permanently faster or slower workers "
                           "with Cluster(speeds=...)")
    return float(value)


def _mean_time(value: Any, field: str, who: str) -> float:
    try:
        x = _q.seconds(value, what=f"{who} {field}")
    except UnitError as e:
        raise ClusterError(f"{e} (e.g. {field}='2s' or a number of seconds > 0)") from None
    if not x > 0:
        raise ClusterError(f"{who}: {field}={value!r} must be a mean duration > 0 seconds "
                           "(e.g. '2s')")
    return x


class StragglerModel:
    """Base class of straggler models (see the module docstring for the protocol).

    Subclasses set ``kind`` and implement :meth:`_add` and :meth:`to_dict`; ``workers`` is the
    subset of workers the model applies to (``None``: all).
    """

    kind: str = ""
    workers: tuple[int, ...] | None = None

    def applies_to(self, worker: int) -> bool:
        """True if the model slows ``worker`` down."""
        return self.workers is None or worker in self.workers

    def check(self, n_workers: int) -> StragglerModel:
        """Raise :class:`~sgdnet.ClusterError` if ``workers`` names an index ``>= n_workers``."""
        if self.workers is not None:
            bad = [w for w in self.workers if w >= n_workers]
            if bad:
                raise ClusterError(f"{self!r}: workers {bad} do not exist in a cluster of "
                                   f"{n_workers} workers; valid indices are 0..{n_workers - 1}")
        return self

    def modulator(self, net: Any, worker: int, step_start: str) -> str | None:
        """Add (or extend) worker ``worker``'s modulator in ``net``; return its name or ``None``.

        Parameters
        ----------
        net : sgdnet.net.Net
            The net being built.
        worker : int
            Worker index.
        step_start : str
            Name of the transition that starts the worker's SGD step (already in ``net``). Per-step
            models redraw their multiplier when it starts; calling again with another transition
            of the same worker adds it to the redraw set.

        Returns
        -------
        str or None
            The modulator name to set on the worker's compute transitions, or ``None`` when the
            model does not apply to this worker.
        """
        if isinstance(worker, bool) or not isinstance(worker, int) or worker < 0:
            raise ClusterError(f"{self!r}: worker={worker!r} must be an integer index >= 0")
        if not self.applies_to(worker):
            return None
        if step_start not in net.transitions:
            raise ClusterError(f"{self!r}: step-start transition {step_start!r} is not in net "
                               f"{net.name!r}; add it before asking for worker {worker}'s modulator")
        return self._add(net, worker, step_start)

    def _add(self, net: Any, worker: int, step_start: str) -> str | None:  # pragma: no cover
        raise NotImplementedError

    @property
    def mean_slowdown(self) -> float:
        """Mean multiplier of an affected worker's compute durations (1 = no slowdown)."""
        return 1.0

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        """A JSON-ready description accepted by :func:`from_spec`."""
        raise NotImplementedError

    def _with_workers(self, d: dict) -> dict:
        if self.workers is not None:
            d["workers"] = list(self.workers)
        return d


@dataclass(frozen=True, repr=False)
class NoStraggler(StragglerModel):
    """No straggling: :meth:`modulator` always returns ``None``."""

    kind = "none"

    def modulator(self, net: Any, worker: int, step_start: str) -> str | None:
        """Always ``None`` (no modulator)."""
        return None

    def to_dict(self) -> dict:
        """``{"kind": "none"}``."""
        return {"kind": "none"}

    def __repr__(self) -> str:
        return "NoStraggler()"


@dataclass(frozen=True, repr=False)
class StepSlowdown(StragglerModel):
    """With probability ``p`` a worker's whole step is ``factor`` times slower.

    Parameters
    ----------
    p : float
        Probability that a step is slow, ``0 <= p <= 1``, independently for every step and
        worker.
    factor : float
        Slowdown multiplier of a slow step's compute operations, ``>= 1``.
    workers : list of int or None
        Workers affected (``None``: all).

    Raises
    ------
    ClusterError
        ``p`` outside ``[0, 1]``, ``factor < 1``, or a bad ``workers`` list.

    Examples
    --------
    >>> StepSlowdown(0.1, 3).mean_slowdown
    1.2
    """

    p: float = 0.0
    factor: float = 1.0
    workers: tuple[int, ...] | None = None
    kind = "step"

    def __post_init__(self) -> None:
        who = "StepSlowdown"
        p = self.p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0 <= p <= 1):
            raise ClusterError(f"{who}: p={p!r} is the probability that a step is slow; use "
                               "0 <= p <= 1")
        object.__setattr__(self, "p", float(p))
        object.__setattr__(self, "factor", _factor(self.factor, "factor", who))
        object.__setattr__(self, "workers", _workers(self.workers, who))

    @property
    def multiplier(self) -> Straggler:
        """The per-step multiplier distribution ``Straggler(Deterministic(1), p, factor)``."""
        return Straggler(Deterministic(1.0), self.p, self.factor)

    @property
    def mean_slowdown(self) -> float:
        """``1 - p + p * factor``."""
        return 1.0 - self.p + self.p * self.factor

    def _add(self, net: Any, worker: int, step_start: str) -> str:
        name = modulator_name(worker)
        m = net.modulators.get(name)
        if m is None:
            net.modulator(name, self.multiplier, resample_on=[step_start])
        elif m.kind != "iid":
            raise ClusterError(f"{self!r}: net {net.name!r} already has a {m.kind!r} modulator "
                               f"{name!r}; one straggler model per net")
        elif step_start not in m.resample_on:
            m.resample_on = (*m.resample_on, step_start)
        return name

    def to_dict(self) -> dict:
        """``{"kind": "step", "p": ..., "factor": ...[, "workers": [...]]}``."""
        return self._with_workers({"kind": "step", "p": self.p, "factor": self.factor})

    def __repr__(self) -> str:
        w = "" if self.workers is None else f", workers={list(self.workers)}"
        return f"StepSlowdown(p={self.p:g}, factor={self.factor:g}{w})"


@dataclass(frozen=True, repr=False)
class MarkovSlowdown(StragglerModel):
    """Each worker alternates fast (x1) and slow (x ``slow_factor``) modes, Markov in time.

    Parameters
    ----------
    slow_factor : float
        Multiplier of compute durations in the slow mode, ``>= 1``.
    mean_fast, mean_slow : float or str
        Mean sojourn in the fast and in the slow mode, seconds (``"2s"``, ``"500ms"``), > 0.
        The long-run fraction of time slow is ``mean_slow / (mean_fast + mean_slow)``.
    workers : list of int or None
        Workers affected (``None``: all), each with its own independent chain.

    Raises
    ------
    ClusterError
        ``slow_factor < 1``, non-positive or unparsable means, or a bad ``workers`` list.

    Examples
    --------
    >>> MarkovSlowdown(3, "3s", "1s").slow_fraction
    0.25
    """

    slow_factor: float = 1.0
    mean_fast: float | str = 1.0
    mean_slow: float | str = 1.0
    workers: tuple[int, ...] | None = None
    kind = "markov"

    def __post_init__(self) -> None:
        who = "MarkovSlowdown"
        s = object.__setattr__
        s(self, "slow_factor", _factor(self.slow_factor, "slow_factor", who))
        s(self, "mean_fast", _mean_time(self.mean_fast, "mean_fast", who))
        s(self, "mean_slow", _mean_time(self.mean_slow, "mean_slow", who))
        s(self, "workers", _workers(self.workers, who))

    @property
    def slow_fraction(self) -> float:
        """Stationary probability of the slow mode, ``mean_slow / (mean_fast + mean_slow)``."""
        return self.mean_slow / (self.mean_fast + self.mean_slow)

    @property
    def mean_slowdown(self) -> float:
        """Stationary mean multiplier ``1 + slow_fraction * (slow_factor - 1)``."""
        return 1.0 + self.slow_fraction * (self.slow_factor - 1.0)

    def _add(self, net: Any, worker: int, step_start: str) -> str:
        name = modulator_name(worker)
        m = net.modulators.get(name)
        if m is None:
            # Net.markov_modulator parses its means with units.seconds, which wants a unit.
            net.markov_modulator(name, self.slow_factor, f"{self.mean_fast!r}s",
                                 f"{self.mean_slow!r}s")
        elif m.kind != "markov":
            raise ClusterError(f"{self!r}: net {net.name!r} already has a {m.kind!r} modulator "
                               f"{name!r}; one straggler model per net")
        return name

    def to_dict(self) -> dict:
        """``{"kind": "markov", "slow_factor": ..., "mean_fast": s, "mean_slow": s[, "workers"]}``."""
        return self._with_workers({"kind": "markov", "slow_factor": self.slow_factor,
                                   "mean_fast": self.mean_fast, "mean_slow": self.mean_slow})

    def __repr__(self) -> str:
        w = "" if self.workers is None else f", workers={list(self.workers)}"
        return (f"MarkovSlowdown(slow_factor={self.slow_factor:g}, mean_fast={self.mean_fast:g}s, "
                f"mean_slow={self.mean_slow:g}s{w})")


_FIELDS = {
    "none": (),
    "step": ("p", "factor", "workers"),
    "markov": ("slow_factor", "mean_fast", "mean_slow", "workers"),
}


def _parse_value(key: str, raw: str, spec: str) -> Any:
    raw = raw.strip()
    if key == "workers":
        try:
            return [int(x) for x in raw.replace("/", " ").replace("+", " ").split()]
        except ValueError:
            raise ClusterError(f"straggler spec {spec!r}: workers={raw!r} must be worker indices "
                               "separated by '/', e.g. workers=0/3") from None
    if key in ("mean_fast", "mean_slow"):
        try:
            return float(raw)
        except ValueError:
            return raw  # a string with a unit, parsed by the class
    try:
        return float(raw)
    except ValueError:
        raise ClusterError(f"straggler spec {spec!r}: {key}={raw!r} is not a number") from None


def _from_string(spec: str) -> dict:
    text = spec.strip()
    kind, _, rest = text.partition(":")
    d: dict[str, Any] = {"kind": kind.strip().lower()}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ClusterError(f"straggler spec {spec!r}: {item!r} is not key=value; write e.g. "
                               "'step:p=0.1,factor=3' or 'markov:slow_factor=3,mean_fast=2s,"
                               "mean_slow=500ms'")
        d[key] = _parse_value(key, raw, spec)
    return d


def from_spec(spec: Any) -> StragglerModel:
    """A straggler model from a model object, a dict, a string, or ``None``.

    Parameters
    ----------
    spec : StragglerModel, dict, str or None
        ``None`` or ``"none"``: :class:`NoStraggler`. A dict with ``"kind"`` in
        ``{"none", "step", "markov"}`` and the constructor's fields (as :meth:`to_dict` writes).
        A string ``"kind[:key=value,...]"``, e.g. ``"step:p=0.1,factor=3"`` or
        ``"markov:slow_factor=3,mean_fast=2s,mean_slow=500ms,workers=0/1"`` (worker indices
        separated by ``/``). Any other object with a ``modulator`` method is returned as is.

    Returns
    -------
    StragglerModel

    Raises
    ------
    ClusterError
        Unknown kind or field, or invalid values (the message names them).

    Examples
    --------
    >>> from_spec({"kind": "step", "p": 0.1, "factor": 3})
    StepSlowdown(p=0.1, factor=3)
    >>> from_spec("markov:slow_factor=2,mean_fast=3s,mean_slow=1s").slow_fraction
    0.25
    """
    if spec is None:
        return NoStraggler()
    if isinstance(spec, StragglerModel):
        return spec
    if isinstance(spec, str):
        spec = _from_string(spec)
    if not isinstance(spec, Mapping):
        if callable(getattr(spec, "modulator", None)):
            return spec
        raise ClusterError(f"straggler {spec!r} is not a straggler model; give None, a dict such "
                           "as {'kind': 'step', 'p': 0.1, 'factor': 3}, a string such as "
                           "'step:p=0.1,factor=3', or StepSlowdown(...) / MarkovSlowdown(...)")
    d = dict(spec)
    kind = d.pop("kind", None)
    if kind not in _FIELDS:
        raise ClusterError(f"straggler kind {kind!r} is unknown; use one of {list(KINDS)}")
    bad = sorted(set(d) - set(_FIELDS[kind]))
    if bad:
        raise ClusterError(f"straggler kind {kind!r} has no field(s) {bad}; its fields are "
                           f"{list(_FIELDS[kind])}")
    if kind == "none":
        return NoStraggler()
    cls = StepSlowdown if kind == "step" else MarkovSlowdown
    need = [f for f in _FIELDS[kind] if f != "workers" and f not in d]
    if need:
        raise ClusterError(f"straggler kind {kind!r} needs field(s) {need}; e.g. "
                           + ("{'kind': 'step', 'p': 0.1, 'factor': 3}" if kind == "step" else
                              "{'kind': 'markov', 'slow_factor': 3, 'mean_fast': '2s', "
                              "'mean_slow': '500ms'}"))
    return cls(**d)
