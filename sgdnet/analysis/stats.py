"""Statistics for simulation output: quantiles, confidence intervals, batch means.

Pure Python / numpy (scipy is a test-only dependency). The Student-t quantile is obtained by
safeguarded Newton iterations on the exact t distribution function, itself computed from the
regularized incomplete beta function by a continued fraction; the iterations start from the
normal quantile (refined on :func:`math.erfc`), so the result is accurate to a few ulps over the
whole practical range (``df`` from 1 to beyond ``1e6``, ``p`` in ``[1e-12, 1 - 1e-12]``).
"""

from __future__ import annotations

import math

import numpy as np

from .._check import is_int
from ..errors import AnalysisError

__all__ = ["norm_ppf", "t_ppf", "t_sf", "mean_ci", "batch_means", "rows_mean_quantiles"]

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


# ------------------------------------------------------------------ special functions
def _stirling_delta(x: float) -> float:
    """``lgamma(x) - [(x - 1/2) log x - x + log(2 pi) / 2]`` for ``x >= 20`` (error < 1e-16)."""
    ix2 = 1.0 / (x * x)
    return (1.0 / 12.0 - ix2 * (1.0 / 360.0 - ix2 * (1.0 / 1260.0 - ix2 / 1680.0))) / x


def _lbeta(a: float, b: float) -> float:
    """``log B(a, b)`` without the cancellation of ``lgamma`` differences at large arguments."""
    if a > b:
        a, b = b, a
    if b < 20.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    # lgamma(b) - lgamma(a + b) by Stirling with the large parts cancelled analytically
    diff = (
        -a * math.log(a + b)
        - (b - 0.5) * math.log1p(a / b)
        + a
        + _stirling_delta(b)
        - _stirling_delta(a + b)
    )
    if a < 20.0:
        return math.lgamma(a) + diff
    # both large: lgamma(a) by Stirling too
    return (a - 0.5) * math.log(a) - a + 0.5 * _LOG_2PI + _stirling_delta(a) + diff


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz), for
    ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            return h
    return h  # pragma: no cover - converges long before for all a, b used here


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta ``I_x(a, b)``; ``y = 1 - x`` passed separately (exact)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        front = math.exp(a * math.log(x) + b * math.log(y) - _lbeta(a, b))
        return front * _betacf(a, b, x) / a
    front = math.exp(b * math.log(y) + a * math.log(x) - _lbeta(a, b))
    return 1.0 - front * _betacf(b, a, y) / b


def t_sf(t: float, df: float) -> float:
    """Upper tail ``P(T > t)`` of Student's t with ``df`` degrees of freedom."""
    if t < 0:
        return 1.0 - t_sf(-t, df)
    tt = t * t
    x = df / (df + tt)
    y = tt / (df + tt)
    return 0.5 * _betainc(0.5 * df, 0.5, x, y)


def _t_center(t: float, df: float) -> float:
    """``P(0 < T < t)`` for ``t >= 0``, accurate in relative terms near 0."""
    tt = t * t
    x = df / (df + tt)
    y = tt / (df + tt)
    return 0.5 * _betainc(0.5, 0.5 * df, y, x)


def _log_t_pdf_const(df: float) -> float:
    # log Gamma((df+1)/2) - log Gamma(df/2) - log(sqrt(df pi)) = -lbeta(df/2, 1/2) - log(df)/2
    return -_lbeta(0.5 * df, 0.5) - 0.5 * math.log(df)


def _t_pdf(t: float, df: float, logc: float) -> float:
    return math.exp(logc - 0.5 * (df + 1.0) * math.log1p(t * t / df))


# ---------------------------------------------------------------------------- quantiles
def _check_p(p, what: str = "p") -> float:
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise AnalysisError(f"{what}={p!r} must be a probability in (0, 1)") from None
    if not (0.0 < p < 1.0):
        raise AnalysisError(f"{what}={p!r} must be a probability strictly between 0 and 1")
    return p


def _norm_upper(q: float) -> float:
    """z >= 0 with ``P(Z > z) = q`` for ``q`` in (0, 0.5]."""
    if q == 0.5:
        return 0.0
    # Abramowitz & Stegun 26.2.23 starting point (|error| < 4.5e-4), then Newton on erfc
    s = math.sqrt(-2.0 * math.log(q))
    z = s - (2.515517 + s * (0.802853 + s * 0.010328)) / (
        1.0 + s * (1.432788 + s * (0.189269 + s * 0.001308))
    )
    for _ in range(50):
        qz = 0.5 * math.erfc(z / _SQRT2)
        phi = math.exp(-0.5 * z * z - 0.5 * _LOG_2PI)
        # Halley step on P(Z > z) - q
        r = (qz - q) / phi
        step = r / (1.0 - 0.5 * z * r)
        z += step
        if abs(step) <= 1e-15 * max(1.0, z):
            break
    return max(z, 0.0)


def norm_ppf(p: float) -> float:
    """Quantile of the standard normal distribution.

    Parameters
    ----------
    p : float
        Probability in (0, 1).

    Returns
    -------
    float
        ``z`` with ``P(Z <= z) = p`` (about 1e-15 relative accuracy).
    """
    p = _check_p(p)
    if p < 0.5:
        return -_norm_upper(p)
    return _norm_upper(1.0 - p) if p > 0.5 else 0.0


def _t_upper(q: float, df: float) -> float:
    """t >= 0 with ``P(T > t) = q`` for ``q`` in (0, 0.5)."""
    logc = _log_t_pdf_const(df)
    if q > 0.25:
        # central: solve P(0 < T < t) = 1/2 - q, concave increasing -> monotone Newton from 0
        c = 0.5 - q
        t = 0.0
        for _ in range(200):
            step = (c - _t_center(t, df)) / _t_pdf(t, df, logc)
            t += step
            if abs(step) <= 2e-16 * t:
                break
        return t
    # tail: solve log S(e^u) = log q, concave in u -> monotone Newton from the right
    logq = math.log(q)
    z = _norm_upper(q)
    # start to the right of the root: t quantiles exceed normal ones; the power tail
    # S(t) ~ K t^-df bounds them from above for small df
    log_k = _log_t_pdf_const(df) + 0.5 * (df + 1.0) * math.log(df) - math.log(df)
    t = max(z, math.exp((log_k - logq) / df)) * 1.01 + 1e-3
    lo, hi = z, math.inf
    u = math.log(t)
    for _ in range(200):
        t = math.exp(u)
        s = t_sf(t, df)
        if s <= 0.0:  # far too far right (underflow): bisect back
            hi = u
            u = 0.5 * (u + math.log(max(lo, 1e-300)))
            continue
        g = math.log(s) - logq
        if g > 0:
            lo = max(lo, t)
        else:
            hi = min(hi, u)
        dg = -t * _t_pdf(t, df, logc) / s
        step = -g / dg
        un = u + step
        if hi < math.inf and un > hi:
            un = 0.5 * (u + hi)
        if un < math.log(lo):
            un = 0.5 * (u + math.log(lo))
        if abs(un - u) <= 1e-16 * max(1.0, abs(u)):
            u = un
            break
        u = un
    return math.exp(u)


def t_ppf(p, df):
    """Quantile of Student's t distribution.

    Parameters
    ----------
    p : float or array_like
        Probability (or probabilities) in (0, 1).
    df : float or array_like
        Degrees of freedom, > 0 (``math.inf`` gives the normal quantile). Broadcast with ``p``.

    Returns
    -------
    float or numpy.ndarray
        ``t`` with ``P(T <= t) = p``; a float when both arguments are scalars.

    Raises
    ------
    AnalysisError
        If ``p`` is not strictly inside (0, 1) or ``df`` is not positive.

    Examples
    --------
    >>> round(t_ppf(0.975, 10), 6)
    2.228139
    """
    if np.ndim(p) or np.ndim(df):
        pb, db = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
        out = np.empty(pb.shape)
        for idx in np.ndindex(pb.shape):
            out[idx] = t_ppf(float(pb[idx]), float(db[idx]))
        return out
    p = _check_p(p)
    try:
        df = float(df)
    except (TypeError, ValueError):
        raise AnalysisError(f"df={df!r} must be a number of degrees of freedom > 0") from None
    if not df > 0 or math.isnan(df):
        raise AnalysisError(f"df={df!r} must be a number of degrees of freedom > 0")
    if p == 0.5:
        return 0.0
    sign = -1.0 if p < 0.5 else 1.0
    q = p if p < 0.5 else 1.0 - p
    if math.isinf(df):
        return sign * _norm_upper(q)
    if df == 1.0:
        return sign * math.tan(math.pi * (0.5 - q)) if q > 0.25 else sign / math.tan(math.pi * q)
    if df == 2.0:
        return sign * (1.0 - 2.0 * q) / math.sqrt(2.0 * q * (1.0 - q))
    return sign * _t_upper(q, df)


# ---------------------------------------------------------------- confidence intervals
def _check_level(level) -> float:
    return _check_p(level, "level")


def mean_ci(samples, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval across independent replications.

    Parameters
    ----------
    samples : array_like
        One value per independent replication (finite numbers).
    level : float, optional
        Confidence level in (0, 1), default 0.95.

    Returns
    -------
    (mean, lo, hi) : tuple of float
        ``mean -+ t_{(1+level)/2, n-1} * s / sqrt(n)``; with one sample ``(x, nan, nan)``.

    Raises
    ------
    AnalysisError
        If ``samples`` is empty or holds NaN/inf, or ``level`` is not in (0, 1).
    """
    level = _check_level(level)
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        raise AnalysisError("mean_ci needs at least one sample; got an empty array")
    if not np.all(np.isfinite(x)):
        bad = x[~np.isfinite(x)][0]
        raise AnalysisError(f"mean_ci got a non-finite sample {bad!r}; drop it or fix its source")
    m = float(x.mean())
    n = x.size
    if n == 1:
        return m, math.nan, math.nan
    s = float(x.std(ddof=1))
    h = t_ppf(0.5 * (1.0 + level), n - 1) * s / math.sqrt(n)
    return m, m - h, m + h


def batch_means(x, n_batches: int = 20, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and confidence interval from one long (autocorrelated) run by batch means.

    The series is cut into ``n_batches`` contiguous batches of equal length ``b = len(x) //
    n_batches`` (the first ``len(x) - b * n_batches`` observations, the oldest, are dropped);
    the batch averages are treated as approximately independent normal samples and
    :func:`mean_ci` is applied to them. Valid when ``b`` is much longer than the correlation
    time of the series.

    Parameters
    ----------
    x : array_like
        The output series (e.g. step intervals after warm-up), finite numbers.
    n_batches : int, optional
        Number of batches, >= 2 (default 20; 10 to 30 is usual).
    level : float, optional
        Confidence level in (0, 1), default 0.95.

    Returns
    -------
    (mean, lo, hi) : tuple of float
        The mean of the observations used and the CI bounds.

    Raises
    ------
    AnalysisError
        If ``n_batches < 2``, the series is shorter than ``n_batches``, or it holds NaN/inf.
    """
    if not is_int(n_batches) or n_batches < 2:
        raise AnalysisError(f"n_batches={n_batches!r} must be an integer >= 2")
    a = np.asarray(x, dtype=float).ravel()
    if a.size < n_batches:
        raise AnalysisError(
            f"batch_means needs at least n_batches={n_batches} observations, got {a.size}; "
            "run longer or use fewer batches"
        )
    if not np.all(np.isfinite(a)):
        raise AnalysisError("batch_means got non-finite observations; drop them or fix their source")
    b = a.size // n_batches
    used = a[a.size - b * n_batches:]
    means = used.reshape(n_batches, b).mean(axis=1)
    return mean_ci(means, level)


def rows_mean_quantiles(xs, q, *, percent: bool = False) -> list[tuple[float, list[float]]]:
    """``(mean, [quantile of x at each of q])`` of every array ``x`` of ``xs`` (``numpy.quantile``,
    or ``numpy.percentile`` with ``percent=True``; NaNs for an empty ``x``).

    When every ``x`` has the same nonzero length (e.g. every worker of a bulk-synchronous run
    made as many steps) one mean and one quantile call over the rows of a matrix give them, row
    by row the same values as one call per ``x``.
    """
    f = np.percentile if percent else np.quantile
    if xs and xs[0].size and all(x.size == xs[0].size for x in xs):
        a = np.stack(xs)
        means, v = a.mean(axis=1), f(a, q, axis=1)
        return [(float(means[g]), [float(v[j, g]) for j in range(len(q))])
                for g in range(len(xs))]
    return [(float(x.mean()), [float(y) for y in f(x, q)]) if x.size else
            (math.nan, [math.nan] * len(q)) for x in xs]
