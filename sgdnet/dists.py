"""Duration distributions.

Each distribution validates its parameters at construction, knows its ``mean``, can ``sample``
with a numpy ``Generator``, and flattens to ``(code, params)`` for the Numba kernel:
``code`` is one of the ``CODE_*`` integers below and ``params`` a float vector of length
:data:`N_PARAMS` whose layout per code is documented on each class. Empirical samples live in a
shared pool; their row holds ``(offset, length)`` into it (see :func:`flatten`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._text import short_repr
from .errors import DistributionError, UnitError
from .units import seconds, to_float

__all__ = [
    "Distribution",
    "Deterministic",
    "Exponential",
    "Uniform",
    "Normal",
    "LogNormal",
    "Gamma",
    "ShiftedExponential",
    "Empirical",
    "Straggler",
    "as_distribution",
    "flatten",
    "from_dict",
    "N_PARAMS",
]

CODE_DET, CODE_EXP, CODE_UNIF, CODE_NORM, CODE_LOGN, CODE_GAMMA, CODE_SHEXP, CODE_EMP, CODE_STRAG = range(9)
N_PARAMS = 6  # width of a parameter row; Straggler = [p, factor, base_code, base_row[0:3]]


def _num(x, name: str, cls: str, *, positive=False, nonneg=False, time=True) -> float:
    try:
        v = seconds(x, what=f"{cls} {name}") if (time and isinstance(x, str)) else to_float(
            x, f"{cls}: {name}", DistributionError)
    except (TypeError, ValueError) as e:
        if isinstance(e, DistributionError):
            raise
        if isinstance(e, UnitError):  # keep what the unit parser says is valid
            raise DistributionError(f"{cls}: {name}={x!r} is not a duration: {e}") from None
        raise DistributionError(f"{cls}: {name}={x!r} is not a number") from None
    if math.isnan(v) or math.isinf(v):
        raise DistributionError(f"{cls}: {name}={x!r} must be finite")
    if positive and v <= 0:
        raise DistributionError(f"{cls}: {name}={x!r} must be > 0")
    if nonneg and v < 0:
        raise DistributionError(f"{cls}: {name}={x!r} must be >= 0 (durations cannot be negative)")
    return v


class Distribution:
    """Base class. Subclasses set ``code`` and implement ``mean``, ``_params``, ``sample``."""

    code: int = -1

    @property
    def mean(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean); 0 for a zero-mean deterministic duration."""
        m = self.mean
        return 0.0 if m == 0 else math.sqrt(self.var) / m

    @property
    def var(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size=None):
        """Draw durations (seconds) with the given numpy Generator."""
        raise NotImplementedError  # pragma: no cover

    def scaled(self, factor: float) -> Distribution:
        """The same shape with every duration multiplied by ``factor`` (> 0)."""
        factor = _num(factor, "factor", type(self).__name__, positive=True, time=False)
        return self._scaled(factor)

    def _scaled(self, factor: float) -> Distribution:  # pragma: no cover - abstract
        raise NotImplementedError

    def _params(self) -> list[float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(self) -> dict:
        """JSON-able description; inverse of :func:`from_dict`."""
        return {"type": type(self).__name__, **self._fields()}

    def _fields(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self.to_dict()))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._fields().items())
        return f"{type(self).__name__}({args})"


class Deterministic(Distribution):
    """Always ``value`` seconds. Params: ``[value]``."""

    code = CODE_DET

    def __init__(self, value):
        self.value = _num(value, "value", "Deterministic", nonneg=True)

    mean = property(lambda self: self.value)
    var = property(lambda self: 0.0)

    def sample(self, rng, size=None):
        return np.full(size, self.value) if size is not None else self.value

    def _scaled(self, f):
        return Deterministic(self.value * f)

    def _params(self):
        return [self.value]

    def _fields(self):
        return {"value": self.value}


class Exponential(Distribution):
    """Exponential with the given ``mean``. Params: ``[mean]``."""

    code = CODE_EXP

    def __init__(self, mean):
        self._mean = _num(mean, "mean", "Exponential", positive=True)

    mean = property(lambda self: self._mean)
    var = property(lambda self: self._mean**2)

    def sample(self, rng, size=None):
        return rng.exponential(self._mean, size)

    def _scaled(self, f):
        return Exponential(self._mean * f)

    def _params(self):
        return [self._mean]

    def _fields(self):
        return {"mean": self._mean}


class Uniform(Distribution):
    """Uniform on ``[low, high]``. Params: ``[low, high]``."""

    code = CODE_UNIF

    def __init__(self, low, high):
        self.low = _num(low, "low", "Uniform", nonneg=True)
        self.high = _num(high, "high", "Uniform", nonneg=True)
        if self.high < self.low:
            raise DistributionError(f"Uniform: high={high!r} must be >= low={low!r}")

    mean = property(lambda self: 0.5 * (self.low + self.high))
    var = property(lambda self: (self.high - self.low) ** 2 / 12.0)

    def sample(self, rng, size=None):
        return rng.uniform(self.low, self.high, size)

    def _scaled(self, f):
        return Uniform(self.low * f, self.high * f)

    def _params(self):
        return [self.low, self.high]

    def _fields(self):
        return {"low": self.low, "high": self.high}


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _Phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


class Normal(Distribution):
    """Normal(``mu``, ``sigma``) truncated at 0 (conditioned on being >= 0).

    ``mean`` is the mean of the truncated law, which exceeds ``mu`` when ``sigma`` is not small
    against ``mu``. Params: ``[mu, sigma]``. ``mu`` must be > 0 and ``mu/sigma`` > -3 would still be
    allowed, but ``mu`` <= 0 is refused: most of the mass would be cut off.
    """

    code = CODE_NORM

    def __init__(self, mu, sigma):
        self.mu = _num(mu, "mu", "Normal", positive=True)
        self.sigma = _num(sigma, "sigma", "Normal", nonneg=True)

    @property
    def _alpha(self):
        return -self.mu / self.sigma

    @property
    def mean(self):
        if self.sigma == 0:
            return self.mu
        a = self._alpha
        return self.mu + self.sigma * _phi(a) / (1 - _Phi(a))

    @property
    def var(self):
        if self.sigma == 0:
            return 0.0
        a = self._alpha
        lam = _phi(a) / (1 - _Phi(a))
        return self.sigma**2 * (1 + a * lam - lam * lam)

    def sample(self, rng, size=None):
        n = 1 if size is None else int(np.prod(size))
        out = np.empty(n)
        filled = 0
        while filled < n:
            x = rng.normal(self.mu, self.sigma, n - filled)
            x = x[x >= 0]
            out[filled : filled + len(x)] = x
            filled += len(x)
        return out[0] if size is None else out.reshape(size)

    def _scaled(self, f):
        return Normal(self.mu * f, self.sigma * f)

    def _params(self):
        return [self.mu, self.sigma]

    def _fields(self):
        return {"mu": self.mu, "sigma": self.sigma}


class LogNormal(Distribution):
    """Log-normal with the given ``mean`` and coefficient of variation ``cv``.

    Params: ``[mu_log, sigma_log]`` with ``sigma_log**2 = log(1 + cv**2)`` and
    ``mu_log = log(mean) - sigma_log**2 / 2``.
    """

    code = CODE_LOGN

    def __init__(self, mean, cv):
        self._mean = _num(mean, "mean", "LogNormal", positive=True)
        self._cv = _num(cv, "cv", "LogNormal", nonneg=True, time=False)
        if self._cv > 100:
            raise DistributionError(f"LogNormal: cv={cv!r} is absurd for a duration; use cv <= 100")

    mean = property(lambda self: self._mean)
    var = property(lambda self: (self._mean * self._cv) ** 2)

    @property
    def _sigma(self):
        return math.sqrt(math.log1p(self._cv**2))

    @property
    def _mu(self):
        return math.log(self._mean) - 0.5 * self._sigma**2

    def sample(self, rng, size=None):
        return rng.lognormal(self._mu, self._sigma, size)

    def _scaled(self, f):
        return LogNormal(self._mean * f, self._cv)

    def _params(self):
        return [self._mu, self._sigma]

    def _fields(self):
        return {"mean": self._mean, "cv": self._cv}


class Gamma(Distribution):
    """Gamma with the given ``mean`` and ``cv`` (shape ``1/cv**2``). Params: ``[shape, scale]``.

    ``cv == 0`` is allowed and means the deterministic ``mean`` (params ``[0, mean]``).
    """

    code = CODE_GAMMA

    def __init__(self, mean, cv):
        self._mean = _num(mean, "mean", "Gamma", positive=True)
        self._cv = _num(cv, "cv", "Gamma", nonneg=True, time=False)
        if self._cv > 100:
            raise DistributionError(f"Gamma: cv={cv!r} is absurd for a duration; use cv <= 100")

    mean = property(lambda self: self._mean)
    var = property(lambda self: (self._mean * self._cv) ** 2)

    def sample(self, rng, size=None):
        if self._cv == 0:
            return np.full(size, self._mean) if size is not None else self._mean
        k = 1.0 / self._cv**2
        return rng.gamma(k, self._mean / k, size)

    def _scaled(self, f):
        return Gamma(self._mean * f, self._cv)

    def _params(self):
        if self._cv == 0:
            return [0.0, self._mean]
        k = 1.0 / self._cv**2
        return [k, self._mean / k]

    def _fields(self):
        return {"mean": self._mean, "cv": self._cv}


class ShiftedExponential(Distribution):
    """``shift`` plus an exponential, with total mean ``mean`` (so the exponential part has mean
    ``mean - shift``). Params: ``[shift, mean - shift]``."""

    code = CODE_SHEXP

    def __init__(self, shift, mean):
        self.shift = _num(shift, "shift", "ShiftedExponential", nonneg=True)
        self._mean = _num(mean, "mean", "ShiftedExponential", positive=True)
        if self._mean <= self.shift:
            raise DistributionError(
                f"ShiftedExponential: mean={mean!r} must exceed shift={shift!r} "
                "(mean is the total mean, shift + the exponential's mean)"
            )

    mean = property(lambda self: self._mean)
    var = property(lambda self: (self._mean - self.shift) ** 2)

    def sample(self, rng, size=None):
        return self.shift + rng.exponential(self._mean - self.shift, size)

    def _scaled(self, f):
        return ShiftedExponential(self.shift * f, self._mean * f)

    def _params(self):
        return [self.shift, self._mean - self.shift]

    def _fields(self):
        return {"shift": self.shift, "mean": self._mean}


class Empirical(Distribution):
    """Resample uniformly from observed ``samples`` (seconds, all >= 0, at least one).

    Params: ``[offset, length]`` into the empirical pool built by :func:`flatten`.
    """

    code = CODE_EMP

    def __init__(self, samples: Sequence[float]):
        try:
            if samples is None or isinstance(samples, (str, bytes)):
                raise TypeError(f"got a {type(samples).__name__}")
            arr = np.asarray(samples, dtype=float).ravel()
        except (TypeError, ValueError, OverflowError) as e:  # 'abc', [[1], [2, 3]], 10**400
            raise DistributionError(
                f"Empirical: samples={short_repr(samples)} must be a list of durations in "
                f"seconds ({' '.join(str(e).split())[:120]})") from None
        if arr.size == 0:
            raise DistributionError("Empirical: samples is empty; give at least one observed duration")
        if not np.all(np.isfinite(arr)):
            raise DistributionError("Empirical: samples contain NaN or inf; drop them first")
        if np.any(arr < 0):
            raise DistributionError(f"Empirical: samples contain a negative duration ({arr.min()!r})")
        self.samples = arr
        self.samples.setflags(write=False)

    mean = property(lambda self: float(self.samples.mean()))
    var = property(lambda self: float(self.samples.var()))

    def sample(self, rng, size=None):
        return rng.choice(self.samples, size)

    def _scaled(self, f):
        return Empirical(self.samples * f)

    def _params(self):  # filled by flatten()
        return [0.0, float(self.samples.size)]

    def _fields(self):
        return {"samples": self.samples.tolist()}


class Straggler(Distribution):
    """Mixture: a draw of ``base``, multiplied by ``factor`` with probability ``p``.

    Params: ``[p, factor, base_code, base_params[0], base_params[1], base_params[2]]``.
    ``base`` may not itself be a Straggler.
    """

    code = CODE_STRAG

    def __init__(self, base, p, factor):
        base = as_distribution(base)
        if isinstance(base, Straggler):
            raise DistributionError("Straggler: base must not itself be a Straggler; combine p and factor instead")
        self.base = base
        self.p = _num(p, "p", "Straggler", nonneg=True, time=False)
        if self.p > 1:
            raise DistributionError(f"Straggler: p={p!r} is a probability; use 0 <= p <= 1")
        self.factor = _num(factor, "factor", "Straggler", positive=True, time=False)

    @property
    def mean(self):
        return self.base.mean * (1 - self.p + self.p * self.factor)

    @property
    def var(self):
        m2b = self.base.var + self.base.mean**2
        m2 = m2b * (1 - self.p + self.p * self.factor**2)
        return max(m2 - self.mean**2, 0.0)

    def sample(self, rng, size=None):
        x = np.asarray(self.base.sample(rng, size), dtype=float)
        hit = rng.random(size) < self.p
        out = np.where(hit, x * self.factor, x)
        return float(out) if size is None else out

    def _scaled(self, f):
        return Straggler(self.base.scaled(f), self.p, self.factor)

    def _params(self):
        bp = self.base._params()
        return [self.p, self.factor, float(self.base.code), *bp[:3]]

    def _fields(self):
        return {"base": self.base.to_dict(), "p": self.p, "factor": self.factor}


_TYPES = {
    c.__name__: c
    for c in (Deterministic, Exponential, Uniform, Normal, LogNormal, Gamma, ShiftedExponential, Empirical, Straggler)
}


def as_distribution(x) -> Distribution:
    """A Distribution as is; a number or a time string (``"3ms"``) as :class:`Deterministic`."""
    if isinstance(x, Distribution):
        return x
    if isinstance(x, dict):
        return from_dict(x)
    if isinstance(x, (int, float, str)) and not isinstance(x, bool):
        return Deterministic(x)
    raise DistributionError(
        f"duration {x!r} is not a distribution; give seconds, a string like '3ms', or e.g. Exponential(0.01)"
    )


def from_dict(d: dict) -> Distribution:
    """Rebuild a distribution from :meth:`Distribution.to_dict` output."""
    try:
        kind = d["type"]
        cls = _TYPES[kind]
    except KeyError:
        raise DistributionError(
            f"unknown distribution description {d!r}; 'type' must be one of {sorted(_TYPES)}"
        ) from None
    args = {k: v for k, v in d.items() if k != "type"}
    if cls is Straggler:
        args["base"] = from_dict(args["base"])
    try:
        return cls(**args)
    except TypeError as e:
        raise DistributionError(f"bad fields for {kind}: {args!r} ({e})") from None


def flatten(dists: Sequence[Distribution]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten distributions for the kernel.

    Returns
    -------
    codes : int64 array (n,)
    params : float64 array (n, N_PARAMS)
    pool : float64 array of all Empirical samples, referenced by ``(offset, length)`` params
        (for a Straggler over an Empirical base the pair sits in columns 3 and 4).
    """
    n = len(dists)
    ids = list(map(id, dists))
    first = dict(zip(ids, dists))  # each distinct object once, in order of first use
    if len(first) < n and not any(_samples_of(d) is not None for d in first.values()):
        # a large net shares few distribution objects: one row each, then gathered
        codes_u, params_u, pool_u = flatten(list(first.values()))
        pos = dict(zip(first, range(len(first))))
        inv = np.fromiter(map(pos.__getitem__, ids), dtype=np.int64, count=n)
        return codes_u[inv], params_u[inv], pool_u
    codes = np.zeros(n, dtype=np.int64)
    params = np.zeros((n, N_PARAMS), dtype=np.float64)
    pool: list[np.ndarray] = []
    off = 0
    seen: dict[int, int] = {}  # id of a distribution without samples -> its first row
    for i, d in enumerate(dists):
        j = seen.get(id(d))
        if j is not None:  # the same (immutable) object again: copy its row
            codes[i] = codes[j]
            params[i] = params[j]
            continue
        codes[i] = d.code
        row = d._params()
        params[i, : len(row)] = row
        emp = _samples_of(d)
        if emp is None:
            seen[id(d)] = i
        else:
            col = 0 if emp is d else 3
            params[i, col] = off
            params[i, col + 1] = emp.samples.size
            pool.append(emp.samples)
            off += emp.samples.size
    pool_arr = np.concatenate(pool) if pool else np.zeros(1)
    return codes, params, pool_arr


def _samples_of(d: Distribution) -> Empirical | None:
    """The Empirical whose samples row ``d`` of :func:`flatten` points into (``d`` itself, or a
    Straggler's base), else None."""
    if isinstance(d, Empirical):
        return d
    return d.base if isinstance(d, Straggler) and isinstance(d.base, Empirical) else None


def _base_deterministic(code: int, a: float, b: float, pool: np.ndarray) -> bool:
    """Whether the kernel's draw of base ``code`` with parameters ``(a, b)`` is one fixed value."""
    if code == CODE_DET:
        return True
    if code == CODE_UNIF:
        return a == b
    if code in (CODE_NORM, CODE_LOGN):  # a + b z, exp(a + b z): z is always finite
        return b == 0.0
    if code == CODE_GAMMA:  # shape 0 encodes cv == 0
        return a == 0.0
    if code == CODE_SHEXP:
        return b == 0.0
    if code == CODE_EMP:
        lo, n = int(a), int(b)
        return n >= 1 and bool(np.all(pool[lo:lo + n] == pool[lo]))
    return False


def deterministic_rows(codes: np.ndarray, params: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Per flattened row (see :func:`flatten`): True when every draw gives the same value.

    Read from the rows the kernel samples, so a distribution that is random in name only
    (``Gamma(cv=0)``, ``LogNormal(cv=0)``, ``Uniform(a, a)``, a one-value ``Empirical``, a
    ``Straggler`` with ``p`` in {0, 1} or ``factor == 1`` over such a base) counts as fixed.
    """
    codes = np.asarray(codes)
    a, b = (params[:, 0], params[:, 1]) if len(codes) else (np.zeros(0), np.zeros(0))
    out = ((codes == CODE_DET) | ((codes == CODE_UNIF) & (a == b))
           | (np.isin(codes, (CODE_NORM, CODE_LOGN, CODE_SHEXP)) & (b == 0.0))
           | ((codes == CODE_GAMMA) & (a == 0.0)))
    for i in np.flatnonzero((codes == CODE_STRAG) | (codes == CODE_EMP)):  # rare: one by one
        c = int(codes[i])
        if c == CODE_STRAG:
            p, factor = params[i, 0], params[i, 1]
            out[i] = (_base_deterministic(int(params[i, 2]), params[i, 3], params[i, 4], pool)
                      and (p <= 0.0 or p >= 1.0 or factor == 1.0))
        else:
            out[i] = _base_deterministic(c, params[i, 0], params[i, 1], pool)
    return out
