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
* :func:`interval` -- a figure measured by ``n`` independent repeats of the calibration: the
  mean and its 95 % Student-t confidence interval (:func:`t95`).

A fitted intercept that comes out negative (noise on a tiny latency) is clamped to 0 and the
returned ``notes`` say so; it is not an error. ``fit_link`` and ``fit_linear`` take ``reject``:
a point whose relative residual exceeds it is dropped from the fit (worst first, at most a third
of the points) and named in the notes and in ``dropped``, so one noisy point cannot drag a
figure (the issue #37 case: a 4-byte round trip 100 % off that made the latency 0).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..analysis.stats import t_ppf
from ..errors import CalibrationError as FitError

__all__ = ["LinkFit", "IncastFit", "LinearFit", "ShareFit", "Interval", "fit_link", "fit_incast",
           "fit_linear", "fit_share_cv", "maxmin_spread", "interval", "t95", "figure_intervals",
           "judge_quality", "tolerance", "MAX_REL_CI", "MAX_FIT_RESIDUAL"]


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
    #: sizes dropped from the fit (relative residual above ``reject``)
    dropped: tuple[float, ...] = ()

    def time(self, nbytes: float) -> float:
        """Predicted one-way time of ``nbytes`` (after an idle period), seconds."""
        return self.alpha + max(0.0, nbytes - self.burst) / self.bandwidth


def fit_link(sizes: Sequence[float], times: Sequence[float], *, burst: bool = True,
             bandwidth: float | None = None, reject: float | None = None) -> LinkFit:
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
    reject : float, optional
        Drop the point of largest relative residual while it exceeds ``reject`` (e.g. 0.25),
        at most a third of the points, keeping enough to fit; each drop is noted and listed in
        ``LinkFit.dropped``. ``None`` (default): keep every point.

    Returns
    -------
    LinkFit
        ``alpha`` clamped at 0 (with a note) when the fit gives a negative intercept;
        ``max_rel_residual`` over the points kept.

    Raises
    ------
    FitError
        Fewer than 2 distinct sizes (3 with ``burst``), non-positive times, a time that does
        not grow with size.
    """
    s, t = _arrays(sizes, times, "fit_link", 3 if burst else 2)
    if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
        raise FitError(f"fit_link: bandwidth={bandwidth!r} must be a finite number > 0")
    fit = _fit_link(s, t, burst, bandwidth)
    need = (3 if burst else 2) + (0 if bandwidth is None else -1) + 1
    dropped: list[float] = []
    notes = list(fit.notes)
    while reject is not None and len(s) - 1 >= need and len(dropped) < len(sizes) // 3:
        rel = np.abs(np.array([fit.time(x) for x in s]) - t) / t
        i = int(np.argmax(rel))
        if rel[i] <= reject:
            break
        dropped.append(float(s[i]))
        notes.append(f"dropped the {s[i]:.0f}-byte point: relative residual {rel[i]:.0%} > "
                     f"{reject:.0%} (measured {t[i] * 1e6:.1f} us, fit {fit.time(s[i]) * 1e6:.1f}"
                     " us)")
        s, t = np.delete(s, i), np.delete(t, i)
        fit = _fit_link(s, t, burst, bandwidth)
        notes += [n for n in fit.notes if n not in notes]
    return LinkFit(fit.alpha, fit.bandwidth, fit.burst, fit.max_rel_residual, tuple(notes),
                   tuple(dropped))


def _fit_link(s: np.ndarray, t: np.ndarray, burst: bool, bandwidth: float | None) -> LinkFit:
    """One least-squares fit of :func:`fit_link` on all of ``s``, ``t``."""
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

    def sse(bs: np.ndarray) -> np.ndarray:
        """Weighted squared error of the best (alpha, 1/B) for every candidate burst at once
        (the 2x2 normal equations in closed form; a degenerate candidate scores inf)."""
        u = np.broadcast_to(w, (len(bs), len(s)))
        v = np.maximum(s[None, :] - bs[:, None], 0.0) * w
        if bandwidth is None:
            suu, suv, svv = (u * u).sum(1), (u * v).sum(1), (v * v).sum(1)
            sy, svy = u.sum(1), v.sum(1)  # y = w t = 1
            det = suu * svv - suv * suv
            ok = det > 1e-12 * suu * np.maximum(svv, 1e-300)
            c0 = np.where(ok, (sy * svv - suv * svy) / np.where(ok, det, 1.0), 0.0)
            c1 = np.where(ok, (suu * svy - suv * sy) / np.where(ok, det, 1.0), 0.0)
        else:
            c1 = np.full(len(bs), 1.0 / bandwidth)
            c0 = (u * (1.0 - c1[:, None] * v)).sum(1) / (u * u).sum(1)
            ok = np.ones(len(bs), dtype=bool)
        r = c0[:, None] * u + c1[:, None] * v - 1.0
        return np.where(ok, (r * r).sum(1), np.inf)

    if burst:
        lo, hi = max(float(np.min(s[s > 0])) if np.any(s > 0) else 1.0, 1.0) / 4, float(np.max(s))
        grid = np.concatenate([[0.0], np.geomspace(lo, hi, 300)])
        best = float(grid[int(np.argmin(sse(grid)))])
        if best > 0:  # refine between the neighbouring grid points
            i = int(np.searchsorted(grid, best))
            a_, b_ = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
            fine = np.linspace(a_, b_, 201)
            best = float(fine[int(np.argmin(sse(fine)))])
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
    #: largest ``|curve(k) - table[k]| / table[k]``
    max_rel_residual: float = 0.0

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
        ``table[k]`` = mean goodput / bandwidth, at most 1 (a goodput above the sustained
        bandwidth is noise of one or the other measurement: written as 1, noted); ``e1`` the
        efficiency at one flow (the measured one, or the curve's intercept when ``k = 1`` was
        not measured) and ``c >= 0`` by least squares on ``e1 / e(k) - 1 = c (k - 1)`` (clamped
        at 0 with a note if the goodput grows with ``k``: the table then keeps the measured
        efficiencies, capped at 1, and the curve is flat).
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
    notes: list[str] = []
    over = {kk: v for kk, v in table.items() if v > 1.0}
    if over:
        notes.append("efficiency above 1 at k = " + ", ".join(f"{kk} ({v:.3f})" for kk, v
                                                             in over.items())
                     + ": goodput measured above the sustained bandwidth (noise), written as 1")
        table = {kk: min(v, 1.0) for kk, v in table.items()}
    ks = np.array(list(table), dtype=float)
    es = np.array(list(table.values()))
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
            notes.append(f"goodput does not fall with the number of flows (c = {c:.3g}): the "
                         "curve's c is clamped to 0 (flat); the table keeps the measured "
                         "efficiencies, at most 1")
            c = 0.0
    else:
        c = 0.0
        notes.append("only one flow count measured: no incast slope")
    f = IncastFit(table, c, float(e1), tuple(notes))
    res = max(abs(f.efficiency(kk) - v) / v for kk, v in table.items())
    return IncastFit(table, c, float(e1), tuple(notes), float(res))


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * x``."""

    intercept: float
    slope: float
    max_rel_residual: float
    notes: tuple[str, ...] = ()
    #: x values dropped from the fit (relative residual above ``reject``)
    dropped: tuple[float, ...] = ()


def fit_linear(x: Sequence[float], y: Sequence[float], what: str = "cost", *,
               reject: float | None = None) -> LinearFit:
    """A per-item + per-byte cost ``y = c0 + c1 x`` by least squares on relative residuals.

    ``c0 < 0`` is clamped to 0 (noted); ``c1 < 0`` is clamped to 0 (noted) too, e.g. a CPU
    cost per byte lost in the noise. ``reject``: as :func:`fit_link` (drop the worst point while
    its relative residual exceeds it; at most a third of the points, 3 kept).
    """
    xa, ya = _arrays(x, y, f"fit_linear({what})")
    f = _fit_linear(xa, ya, what)
    dropped: list[float] = []
    notes = list(f.notes)
    while reject is not None and len(xa) > 3 and len(dropped) < len(x) // 3:
        rel = np.abs(f.intercept + f.slope * xa - ya) / ya
        i = int(np.argmax(rel))
        if rel[i] <= reject:
            break
        dropped.append(float(xa[i]))
        notes.append(f"{what}: dropped the point at {xa[i]:.0f}: relative residual "
                     f"{rel[i]:.0%} > {reject:.0%}")
        xa, ya = np.delete(xa, i), np.delete(ya, i)
        f = _fit_linear(xa, ya, what)
        notes += [n for n in f.notes if n not in notes]
    return LinearFit(f.intercept, f.slope, f.max_rel_residual, tuple(notes), tuple(dropped))


def _fit_linear(xa: np.ndarray, ya: np.ndarray, what: str) -> LinearFit:
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


# --------------------------------------------------------------------------- intervals
def t95(df: int) -> float:
    """Two-sided 95 % quantile of Student's t with ``df >= 1`` degrees of freedom
    (:func:`sgdnet.analysis.stats.t_ppf`, the one the simulator's confidence intervals use)."""
    if df < 1:
        raise FitError(f"t95: df={df} must be >= 1")
    return t_ppf(0.975, df)


@dataclass(frozen=True)
class Interval:
    """A figure from ``n`` independent repeats: ``value`` (their mean), the 95 % confidence
    interval ``[lo, hi]`` of the mean (``None`` for one repeat) and the repeats' ``sd``."""

    value: float
    lo: float | None
    hi: float | None
    n: int
    sd: float

    def covers(self, x: float) -> bool:
        """Whether ``x`` is inside the interval (``False`` without one)."""
        return self.lo is not None and self.hi is not None and self.lo <= x <= self.hi

    def rel_half_width(self) -> float | None:
        """Half the interval's width over ``|value|`` (``inf`` for a zero value with a
        non-zero width, ``None`` without an interval)."""
        if self.lo is None or self.hi is None:
            return None
        h = (self.hi - self.lo) / 2
        return h / abs(self.value) if self.value else (0.0 if h == 0 else math.inf)


def interval(samples: Sequence[float]) -> Interval:
    """Mean and 95 % Student-t confidence interval of the mean of independent ``samples``:
    ``mean +- t95(n - 1) sd / sqrt(n)``. One sample gives no interval (``lo = hi = None``).

    Raises
    ------
    CalibrationError
        No samples, or one that is not finite.
    """
    x = np.asarray(list(samples), dtype=float)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise FitError(f"interval: need finite samples, got {x.tolist()}")
    m = float(np.mean(x))
    if x.size == 1:
        return Interval(m, None, None, 1, 0.0)
    sd = float(np.std(x, ddof=1))
    h = t95(x.size - 1) * sd / math.sqrt(x.size)
    return Interval(m, m - h, m + h, int(x.size), sd)


#: Default largest half-width of a figure's 95 % interval relative to its value.
MAX_REL_CI = 0.25
#: Largest relative residual a fit may keep (after dropping points) before it is judged bad.
MAX_FIT_RESIDUAL = 0.5
#: Figures judged on an absolute half-width (their value may be near 0): name prefix -> width.
#: ``share_cv``: the predictions need it to about +-0.1 (docs/validation.md, sensitivity).
_ABS_CI = {"link.share_cv.": 0.1, "incast.in.c": 0.05, "incast.out.c": 0.05,
           "link.ps_efficiency.": 0.05}
#: Figures that are fitted (their residual is judged), by name prefix.
_FITTED = ("link.latency", "link.burst", "incast.", "cpu.reduce", "ps.")


def tolerance(name: str, max_rel_ci: float = MAX_REL_CI) -> tuple[str, float]:
    """How a figure's interval is judged: ``("abs", width)`` or ``("rel", fraction)``."""
    for p, w in _ABS_CI.items():
        if name.startswith(p):
            return "abs", w
    return "rel", max_rel_ci


def figure_intervals(samples: dict[str, Sequence[float]],
                     residuals: dict[str, Sequence[float | None]] | None = None, *,
                     latency_se: float | None = None) -> dict[str, dict]:
    """Each figure's entry of a cluster file's ``calibration.figures`` from its value in each
    repeat: ``value`` (mean), ``ci95`` (:func:`interval`, clipped at 0, every figure being
    >= 0; ``None`` for one repeat), ``n``, ``sd`` and ``worst_rel_residual`` (the largest over
    the repeats' fits). ``link.latency`` is *below resolution* (``below_resolution: true``,
    ``upper_bound``) when its interval reaches 0, a repeat's fit clamped it to 0, or its mean is
    within two standard errors ``latency_se`` of 0: it must then be shown as ``< upper_bound``,
    not as a measured value."""
    out: dict[str, dict] = {}
    for name, xs in samples.items():
        iv = interval(xs)
        rs = [r for r in (residuals or {}).get(name, ()) if r is not None]
        e: dict = {"value": iv.value,
                   "ci95": None if iv.lo is None else [max(iv.lo, 0.0), iv.hi],
                   "n": iv.n, "sd": iv.sd, "worst_rel_residual": max(rs) if rs else None}
        if name == "link.latency":
            se2 = 2 * (latency_se or 0.0)
            if (iv.lo is not None and iv.lo <= 0) or min(xs) <= 0 or iv.value < se2:
                e["below_resolution"] = True
                e["upper_bound"] = max(iv.hi or 0.0, iv.value + se2, max(xs))
        out[name] = e
    return out


def judge_quality(figures: dict[str, dict], quiet_rows: Sequence[dict] = (), *, n: int,
                  max_rel_ci: float = MAX_REL_CI, max_residual: float = MAX_FIT_RESIDUAL
                  ) -> dict:
    """The calibration's verdict from :func:`figure_intervals` and the quiet gate's rows.

    ``quality`` is ``"low"`` when a figure's interval is wider than :func:`tolerance` allows,
    a fitted figure kept a relative residual above ``max_residual``, or a job was noisy
    (``row["noisy"]``); ``"unjudged"`` with one repeat (no intervals); else ``"good"``.
    ``problems`` say which and by how much; ``warnings`` what is not a failure (a latency
    below resolution, one repeat).
    """
    problems: list[str] = []
    warnings: list[str] = []
    for name, e in figures.items():
        if e.get("below_resolution"):
            warnings.append(f"{name} below resolution: < {e['upper_bound'] * 1e6:.0f} us")
        elif e["ci95"] is not None:
            kind, tol = tolerance(name, max_rel_ci)
            lo, hi = e["ci95"]
            half = (hi - lo) / 2
            if kind == "abs" and half > tol:
                problems.append(f"{name}: 95% interval +-{half:.3g} wider than +-{tol:g}")
            elif kind == "rel" and half > tol * abs(e["value"]):
                rel = half / abs(e["value"]) if e["value"] else math.inf
                problems.append(f"{name}: 95% interval +-{rel:.0%} of the value, wider than "
                                f"+-{tol:.0%}")
        r = e.get("worst_rel_residual")
        if r is not None and name.startswith(_FITTED) and r > max_residual \
                and not e.get("below_resolution"):
            problems.append(f"{name}: its fit is {r:.0%} off at its worst point (> "
                            f"{max_residual:.0%}) after dropping outliers")
    noisy = [r for r in quiet_rows if r.get("noisy")]
    if noisy:
        problems.append(f"quiet gate: other processes used up to "
                        f"{max(float(r['other_cores']) for r in noisy):.2f} cores during "
                        f"{len(noisy)} of {len(quiet_rows)} jobs")
    if n < 2:
        warnings.append("one repeat: no intervals, quality not judged (use --repeats 3 or more)")
    quality = "low" if problems else ("unjudged" if n < 2 else "good")
    return {"quality": quality, "problems": problems, "warnings": warnings}
