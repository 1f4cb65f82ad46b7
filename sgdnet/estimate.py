"""One figure across replications: :class:`Estimate` (mean, CI, quantiles), and the log-linear
histograms that wait and sojourn quantiles are read from (``simulate(..., histograms=True)``)."""

from __future__ import annotations

import math

import numpy as np

from ._check import is_int
from .errors import SimulationError

__all__ = ["Estimate", "HIST_BINS", "hist_bin", "hist_edges", "hist_quantile"]

# Wait and sojourn histograms (``simulate(..., histograms=True)``), log-linear as HDR
# histograms: bin 0 holds durations below HIST_LO = 2**HIST_MIN_EXP s (~0.93 ns; zero waits),
# then each octave [2**e, 2**(e+1)) up to 2**HIST_MAX_EXP s (~12 days) is cut into HIST_SUB equal
# bins; the last bin holds everything beyond. The bin is read from the float's bits (exponent
# and leading mantissa bits: no logarithm in the kernel's event loop), and a quantile read at a
# bin's middle is within 1 / (2 HIST_SUB) = 0.8% of the sample quantile, relatively.
HIST_SUB_BITS = 6
HIST_SUB = 1 << HIST_SUB_BITS
HIST_MIN_EXP = -30
HIST_MAX_EXP = 20
HIST_LO = 2.0 ** HIST_MIN_EXP
HIST_HI = 2.0 ** HIST_MAX_EXP
HIST_BINS = 2 + (HIST_MAX_EXP - HIST_MIN_EXP) * HIST_SUB
#: the bits of HIST_LO shifted as a bin key (biased exponent and leading mantissa bits), minus 1
HIST_KEY0 = ((1023 + HIST_MIN_EXP) << HIST_SUB_BITS) - 1


def hist_bin(x: float) -> int:
    """The histogram bin of a duration ``x`` (seconds), as the kernel computes it."""
    if x < HIST_LO:
        return 0
    key = int(np.float64(x).view(np.int64)) >> (52 - HIST_SUB_BITS)
    return min(key - HIST_KEY0, HIST_BINS - 1)


def hist_edges() -> np.ndarray:
    """The :data:`HIST_BINS` + 1 bin edges (seconds): 0, HIST_LO, ..., HIST_HI, inf."""
    k = np.arange(HIST_BINS - 1)
    inner = HIST_LO * 2.0 ** (k // HIST_SUB) * (1 + (k % HIST_SUB) / HIST_SUB)
    return np.concatenate([[0.0], inner, [np.inf]])


def hist_quantile(counts: np.ndarray, q: float) -> float:
    """The ``q``-quantile of a histogram of :data:`HIST_BINS` counts (NaN when empty): 0 in
    bin 0, the middle of its bin otherwise (``inf`` in the last bin, from ``HIST_HI`` on)."""
    c = np.cumsum(counts)
    n = int(c[-1]) if c.size else 0
    if n == 0:
        return math.nan
    k = int(np.searchsorted(c, max(q * n, 1e-12), side="left"))  # first bin reaching q n
    if k == 0:
        return 0.0
    if k >= HIST_BINS - 1:
        return math.inf
    e = _EDGES
    return 0.5 * (e[k] + e[k + 1])


def _fmt(x: float, digits: int) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


_EDGES = hist_edges()


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
