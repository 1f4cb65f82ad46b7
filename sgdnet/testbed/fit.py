"""Pure fitting functions of the calibration: measurements in, model parameters out.

No torch, no I/O: each function takes the measured numbers and returns the fitted parameters and
how well they fit, so the tests can feed synthetic measurements with known parameters.

* :func:`fit_link` -- one link from a point-to-point size sweep: ``t(S) = alpha + S / B``
  (``burst=False``) or, for a token-bucket-shaped link measured after idle gaps,
  ``t(S) = alpha + max(0, S - b) / B`` (the first ``b`` bytes pass at line rate).
* :func:`fit_incast` -- goodput efficiency vs number of concurrent flows into one link, as a
  table and as the one-parameter curve ``e(k) = e(1) / (1 + c (k - 1))``.
* :func:`fit_linear` -- a cost ``c0 + c1 x`` (per-tensor + per-byte PS update, CPU per byte).
* :func:`fit_share_cv` -- how unevenly ``k`` concurrent flows into (out of) one host share its
  link: the CV of a message's bytes that makes max-min sharing reproduce the spread of their
  measured completion times.

A fitted intercept that comes out negative (noise on a tiny latency) is clamped to 0 and the
returned ``notes`` say so; it is not an error.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CalibrationError as FitError

__all__ = ["LinkFit", "IncastFit", "LinearFit", "ShareFit", "fit_link", "fit_incast",
           "fit_linear", "fit_share_cv", "maxmin_spread"]


def _arrays(x: Sequence[float], y: Sequence[float], what: str, min_distinct: int = 2
            ) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.ndim != 1 or xa.shape != ya.shape:
        raise FitError(f"{what}: need two 1-D sequences of equal length, got shapes "
                       f"{xa.shape} and {ya.shape}")
    if len(np.unique(xa)) < min_distinct:
        raise FitError(f"{what}: need at least {min_distinct} distinct sizes, got "
                       f"{sorted(set(xa.tolist()))}")
    if not (np.all(np.isfinite(xa)) and np.all(xa >= 0)):
        raise FitError(f"{what}: sizes must be finite and >= 0, got {xa.tolist()}")
    if not (np.all(np.isfinite(ya)) and np.all(ya > 0)):
        raise FitError(f"{what}: times must be finite and > 0, got {ya.tolist()}")
    return xa, ya


def _wls(cols: list[np.ndarray], y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    a = np.stack(cols, axis=1) * w[:, None]
    coef, *_ = np.linalg.lstsq(a, y * w, rcond=None)
    r = (a @ coef - y * w)
    return coef, float(r @ r)


@dataclass(frozen=True)
class LinkFit:
    """A fitted link: ``t(S) = alpha + max(0, S - burst) / bandwidth``."""

    alpha: float
    bandwidth: float
    burst: float
    max_rel_residual: float
    notes: tuple[str, ...] = ()

    def time(self, nbytes: float) -> float:
        """Predicted one-way time of ``nbytes`` (after an idle period), seconds."""
        return self.alpha + max(0.0, nbytes - self.burst) / self.bandwidth


def fit_link(sizes: Sequence[float], times: Sequence[float], *, burst: bool = True,
             bandwidth: float | None = None) -> LinkFit:
    """Fit a link's latency, bandwidth and token-bucket burst to one-way message times.

    Least squares on relative residuals (weights ``1/t``), so small messages fix ``alpha``
    and large ones ``B``. With ``burst=True`` the burst ``b`` is found by a grid search
    (geometric, then refined around the best value) and ``alpha``, ``1/B`` by linear least
    squares for each candidate ``b``; ``b = 0`` is always a candidate.

    Parameters
    ----------
    sizes, times : sequence of float
        Message sizes (bytes) and measured one-way times (seconds, > 0), e.g. medians per size.
    burst : bool
        Fit a token-bucket burst (``True``) or the plain ``alpha + S / B`` (``False``).
    bandwidth : float, optional
        A bandwidth measured otherwise (e.g. from back-to-back streams, bytes/s); only
        ``alpha`` (and the burst) are then fitted.

    Returns
    -------
    LinkFit
        ``alpha`` clamped at 0 (with a note) when the fit gives a negative intercept.

    Raises
    ------
    FitError
        Fewer than 2 distinct sizes (3 with ``burst``), non-positive times, a time that does
        not grow with size.
    """
    s, t = _arrays(sizes, times, "fit_link", 3 if burst else 2)
    if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
        raise FitError(f"fit_link: bandwidth={bandwidth!r} must be a finite number > 0")
    w = 1.0 / t
    ones = np.ones_like(s)

    def solve(b: float) -> tuple[float, float, float]:
        x = np.maximum(s - b, 0.0)
        if bandwidth is None:
            (c0, c1), sse = _wls([ones, x], t, w)
        else:
            c1 = 1.0 / bandwidth
            (c0,), sse = _wls([ones], t - c1 * x, w)
        return float(c0), float(c1), sse

    if burst:
        lo, hi = max(float(np.min(s[s > 0])) if np.any(s > 0) else 1.0, 1.0) / 4, float(np.max(s))
        grid = np.concatenate([[0.0], np.geomspace(lo, hi, 300)])
        best = min(grid, key=lambda b: solve(float(b))[2])
        if best > 0:  # refine between the neighbouring grid points
            i = int(np.searchsorted(grid, best))
            a_, b_ = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
            fine = np.linspace(a_, b_, 201)
            best = min(fine, key=lambda b: solve(float(b))[2])
        b = float(best)
    else:
        b = 0.0
    c0, c1, _ = solve(b)
    if not c1 > 0:
        raise FitError(f"fit_link: time does not grow with size (slope {c1:g} s/B); check the "
                       "measurements (sizes too close together, or the link is not the "
                       "bottleneck)")
    notes: list[str] = []
    if c0 < 0:
        notes.append(f"fitted alpha was negative ({c0 * 1e6:.1f} us), clamped to 0")
        c0 = 0.0
    fit = LinkFit(c0, 1.0 / c1, b, 0.0, tuple(notes))
    pred = np.array([fit.time(x) for x in s])
    return LinkFit(c0, 1.0 / c1, b, float(np.max(np.abs(pred - t) / t)), tuple(notes))


@dataclass(frozen=True)
class IncastFit:
    """Goodput efficiency vs concurrent flows: a table and the curve ``e1 / (1 + c (k-1))``."""

    table: dict[int, float]
    c: float
    e1: float
    notes: tuple[str, ...] = field(default=())

    def efficiency(self, k: int) -> float:
        """The fitted curve at ``k`` flows."""
        return self.e1 / (1.0 + self.c * (k - 1))


def fit_incast(flows: Sequence[int], goodput: Sequence[float], bandwidth: float) -> IncastFit:
    """Incast curve from k-to-1 measurements.

    Parameters
    ----------
    flows : sequence of int
        Number of senders ``k`` (>= 1) of each measurement; repeats allowed (they are averaged).
    goodput : sequence of float
        Aggregate goodput into the receiver's link with ``k`` senders, bytes/s.
    bandwidth : float
        The link's bandwidth (bytes/s) the efficiencies are relative to.

    Returns
    -------
    IncastFit
        ``table[k]`` = mean goodput / bandwidth; ``e1`` the efficiency at one flow (the
        measured one, or the curve's intercept when ``k = 1`` was not measured) and ``c >= 0``
        by least squares on ``e1 / e(k) - 1 = c (k - 1)`` (clamped at 0 with a note if the
        goodput grows with ``k``).
    """
    k = np.asarray(flows, dtype=float)
    g = np.asarray(goodput, dtype=float)
    if k.ndim != 1 or k.shape != g.shape or len(k) == 0:
        raise FitError("fit_incast: need equal-length, non-empty flows and goodput")
    if not (np.all(k >= 1) and np.all(k == np.round(k))):
        raise FitError(f"fit_incast: flows must be integers >= 1, got {k.tolist()}")
    if not (np.all(np.isfinite(g)) and np.all(g > 0)):
        raise FitError(f"fit_incast: goodputs must be finite and > 0, got {g.tolist()}")
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise FitError(f"fit_incast: bandwidth={bandwidth!r} must be a finite number > 0")
    table = {int(kk): float(np.mean(g[k == kk]) / bandwidth) for kk in sorted(set(k.tolist()))}
    ks = np.array(list(table), dtype=float)
    es = np.array(list(table.values()))
    notes: list[str] = []
    if 1 in table:
        e1 = table[1]
    elif len(ks) >= 2:  # extrapolate 1/e linearly to k = 1
        slope, icpt = np.polyfit(ks - 1, 1.0 / es, 1)
        e1 = 1.0 / icpt if icpt > 0 else float(es[0])
    else:
        e1 = float(es[0])
    m = ks > 1
    if np.any(m):
        y = e1 / es[m] - 1.0
        x = ks[m] - 1.0
        c = float(x @ y / (x @ x))
        if c < 0:
            notes.append(f"goodput grows with the number of flows (c = {c:.3g}); clamped c to 0")
            c = 0.0
    else:
        c = 0.0
        notes.append("only one flow count measured: no incast slope")
    return IncastFit(table, c, float(e1), tuple(notes))


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * x``."""

    intercept: float
    slope: float
    max_rel_residual: float
    notes: tuple[str, ...] = ()


def fit_linear(x: Sequence[float], y: Sequence[float], what: str = "cost") -> LinearFit:
    """A per-item + per-byte cost ``y = c0 + c1 x`` by least squares on relative residuals.

    ``c0 < 0`` is clamped to 0 (noted); ``c1 < 0`` is clamped to 0 (noted) too, e.g. a CPU
    cost per byte lost in the noise.
    """
    xa, ya = _arrays(x, y, f"fit_linear({what})")
    (c0, c1), _ = _wls([np.ones_like(xa), xa], ya, 1.0 / ya)
    notes = []
    if c1 < 0:
        notes.append(f"{what}: fitted slope was negative ({c1:.3g}), clamped to 0")
        c1 = 0.0
        c0 = float(np.median(ya))
    if c0 < 0:
        notes.append(f"{what}: fitted intercept was negative ({c0:.3g}), clamped to 0")
        c0 = 0.0
    pred = c0 + c1 * xa
    return LinearFit(float(c0), float(c1), float(np.max(np.abs(pred - ya) / ya)), tuple(notes))


# --------------------------------------------------------------------------- sharing
#: Grid of CVs on which :func:`maxmin_spread` is tabulated for the inversion.
_SHARE_GRID = np.round(np.arange(0.0, 2.0001, 0.01), 2)


def _maxmin_ends(sizes: np.ndarray) -> np.ndarray:
    """Completion times (rows sorted) of flows of ``sizes`` (rows: sets of ``k`` flows started
    together on one link of capacity 1, max-min shared)."""
    s = np.sort(sizes, axis=1)
    k = s.shape[1]
    gaps = np.diff(np.concatenate([np.zeros((len(s), 1)), s], axis=1), axis=1)
    return np.cumsum(gaps * (k - np.arange(k)), axis=1)


@functools.lru_cache(maxsize=4096)
def maxmin_spread(cv: float, k: int, samples: int = 4000, seed: int = 0) -> float:
    """Mean CV (population std / mean) of the completion times of ``k`` flows started together
    on one max-min shared link when each flow's bytes are Gamma with mean 1 and CV ``cv``
    (the distribution sgdnet's transfers use); 0 for ``cv = 0``. Monte Carlo with a fixed seed
    (the same numbers every call)."""
    if cv <= 0 or k < 2:
        return 0.0
    shape = 1.0 / (cv * cv)
    rng = np.random.default_rng(seed)
    t = _maxmin_ends(rng.gamma(shape, 1.0 / shape, size=(samples, k)))
    return float(np.mean(t.std(axis=1) / t.mean(axis=1)))


@dataclass(frozen=True)
class ShareFit:
    """Fitted sharing unevenness: ``cv`` and, per flow count, the measured and fitted spread."""

    cv: float
    measured: dict[int, float]
    fitted: dict[int, float]
    runs: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def fit_share_cv(flows: Sequence[int], ends: Sequence[Sequence[float]], *,
                 offset: float = 0.0) -> ShareFit:
    """The CV of a message's bytes that makes max-min sharing reproduce measured completion
    times of concurrent flows.

    Each run started ``flows[j]`` equal messages at once into (or out of) one host's link and
    measured their completion times ``ends[j]`` (seconds from the common start). Under max-min
    sharing they would all finish together; TCP over a FIFO queue lets some finish early. The
    spread of a run is the CV (population std / mean) of its times after subtracting
    ``offset`` (e.g. the latency minus the burst's head start), averaged per flow count; the
    fitted ``cv`` minimises the squared difference to :func:`maxmin_spread` weighted by the
    runs per count, on a 0.01 grid over [0, 2]. Runs with one flow carry no information and
    are skipped.

    Raises
    ------
    CalibrationError
        No run with 2 or more flows, lengths differ, or a time is not finite and > 0.
    """
    if len(flows) != len(ends):
        raise FitError(f"sharing: {len(flows)} flow counts but {len(ends)} runs of end times")
    by_k: dict[int, list[float]] = {}
    for k, e in zip(flows, ends):
        t = np.asarray(e, dtype=float) - float(offset)
        if int(k) != len(t):
            raise FitError(f"sharing: a run of {k} flows has {len(t)} end times")
        if not (np.all(np.isfinite(t)) and np.all(t > 0)):
            raise FitError(f"sharing: end times must be finite and > offset, got {list(e)}")
        if k >= 2:
            by_k.setdefault(int(k), []).append(float(t.std() / t.mean()))
    if not by_k:
        raise FitError("sharing: need runs with 2 or more concurrent flows (got only k = 1)")
    measured = {k: float(np.mean(v)) for k, v in sorted(by_k.items())}
    table = {k: np.array([maxmin_spread(c, k) for c in _SHARE_GRID]) for k in measured}
    err = sum(len(by_k[k]) * (table[k] - measured[k]) ** 2 for k in measured)
    i = int(np.argmin(err))
    cv = float(_SHARE_GRID[i])
    notes = []
    if i == len(_SHARE_GRID) - 1:
        notes.append(f"sharing: spread beyond the grid (cv >= {cv:g}); clamped")
    return ShareFit(cv=cv, measured=measured, fitted={k: float(table[k][i]) for k in measured},
                    runs=sum(len(v) for v in by_k.values()), notes=tuple(notes))
