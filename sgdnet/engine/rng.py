"""Random numbers of every engine: one counter-based stream per (transition, firing).

The draw that sets the duration of firing ``k`` of transition ``t`` in a replication depends on
the replication's seed, the transition's *name* and ``k`` only — not on the order in which an
engine processes events. So the generic kernel, the fast paths and the reference simulator draw
the very same durations (their trajectories agree exactly, stochastic nets included), a change of
processing order inside an engine cannot change a result, and two nets that share transition
names (two variants, two bandwidths, with and without a straggler) are simulated under common
random numbers: firing ``k`` of ``w0.fwd.l3`` lasts the same in both.

Streams. A replication's ``key`` is ``mix(seed + GOLDEN)``; a stream id ``sid`` is
:func:`~sgdnet.net.compiled.stream_ids` of a name (the first 8 bytes of its BLAKE2b digest). The draw ``k`` of stream
``sid`` starts a SplitMix64 generator (Steele, Lea and Flood 2014) at
``mix(mix(key ^ sid) + k * GOLDEN2)``, ``mix`` being SplitMix64's finaliser; the generator then
gives as many 64-bit words as the law needs (one for most log-normal draws, more for rejection
samplers and straggler mixtures). Streams of a net (``CompiledNet.sid``): one per
transition (its durations, or its bytes for a transfer), one per modulator (its multipliers, or
its state switches for a Markov modulator), and one for the random switches' choices (named
:data:`~sgdnet.net.compiled.SWITCH_STREAM`; :func:`~sgdnet.net.compiled.net_stream_ids`), each
drawn with its own counter.

Laws. Normals by the 256-strip ziggurat of Marsaglia and Tsang with the 52-bit tables of NumPy's
legacy sampler (one word and a table look-up in ~99 % of draws), exponentials by inversion,
gamma by Marsaglia-Tsang, the rest as documented in :func:`sample_base`.

Numba's on-disk cache of a function is keyed by its own file; ``kernel.py``, ``fastpath.py`` and
``fastpath_fifo.py`` list this one in their ``JIT_DEPENDS``, so :mod:`sgdnet.engine.jitcache`
recompiles them when it changed.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..dists import (
    CODE_DET,
    CODE_EMP,
    CODE_EXP,
    CODE_GAMMA,
    CODE_LOGN,
    CODE_NORM,
    CODE_SHEXP,
    CODE_STRAG,
    CODE_UNIF,
)

#: files whose constants the compiled functions embed (see sgdnet.engine.jitcache)
JIT_DEPENDS = ("../dists.py",)

__all__ = ["replication_bases", "stream_bases", "draw_state",
           "lognormal_draw", "exponential_draw", "draw", "uniform", "exponential", "std_normal",
           "sample", "normals", "durations"]

_U = np.uint64
GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment
GOLDEN2 = 0xD1B54A32D192ED03  # the firing counter's multiplier (another odd constant)
_INV53 = 1.0 / 9007199254740992.0

#: helpers only jitted code calls: no CPython/C wrappers (see the kernel's ``_inner``)
_inner = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
              no_cfunc_wrapper=True, forceinline=False)  # not inherited (sgdnet.engine.kernel)
_inline = njit(cache=True, _nrt=False, error_model="numpy", inline="always")


# ------------------------------------------------------------------ the streams
@_inline
def _mix(z):
    """SplitMix64's finaliser (a bijection of uint64)."""
    z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
    return z ^ (z >> _U(31))


@njit(cache=True, _nrt=False, forceinline=False)
def replication_bases(seed, sid, out):
    """``out[i] = mix(key ^ sid[i])`` with the replication's ``key = mix(seed + GOLDEN)``: the
    base of each stream (the kernel calls it; :func:`stream_bases` from Python)."""
    key = _mix(_U(seed) + _U(GOLDEN))
    for i in range(sid.size):
        out[i] = _mix(key ^ sid[i])


def _ro(a: np.ndarray) -> np.ndarray:
    """A read-only view (the compiled nets' arrays are read-only: the same numba types, so
    :func:`draw` is compiled once whoever calls it)."""
    v = a.view()
    v.setflags(write=False)
    return v


def stream_bases(seed: int, sid: np.ndarray) -> np.ndarray:
    """The bases of the streams ``sid`` in the replication of ``seed`` (uint64 array)."""
    out = np.empty(len(sid), dtype=np.uint64)
    replication_bases(np.uint64(seed), _ro(np.ascontiguousarray(sid, dtype=np.uint64)), out)
    return out


@_inline
def draw_state(base, k):
    """The generator state of draw ``k`` of the stream whose base is ``base``."""
    return _mix(base + _U(k) * _U(GOLDEN2))


@_inline
def next_word(x):
    """One SplitMix64 step on a state held in a register: (64-bit output, new state)."""
    x = x + _U(GOLDEN)
    return _mix(x), x


@_inline
def next_uniform(x):
    """A double in [0, 1) and the new state."""
    w, x = next_word(x)
    return float(w >> _U(11)) * _INV53, x


# ------------------------------------------------------------------ the ziggurat
def _zig_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 256-strip, 52-bit ziggurat tables of NumPy's legacy normal sampler (Marsaglia-Tsang)."""
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    r = _ZIG_R
    v = r * f(r) + math.sqrt(math.pi / 2.0) * math.erfc(r / math.sqrt(2.0))  # area of a strip
    m = float(1 << 52)
    ki = np.zeros(256, dtype=np.uint64)
    wi = np.zeros(256)
    fi = np.zeros(256)
    dn = tn = r
    q = v / f(dn)
    ki[0] = np.uint64(int((dn / q) * m))
    wi[0], wi[255] = q / m, dn / m
    fi[0], fi[255] = 1.0, f(dn)
    for i in range(254, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + f(dn)))
        ki[i + 1] = np.uint64(int((dn / tn) * m))
        tn = dn
        fi[i] = f(dn)
        wi[i] = dn / m
    return ki, wi, fi


_ZIG_R = 3.6541528853610088
_ZIG_KI, _ZIG_WI, _ZIG_FI = _zig_tables()


@_inline
def _zig_try(r):
    """One try of the ziggurat from the 64-bit word ``r``: ``(z, strip, |z| bits, accepted)``
    (``z`` is the normal when accepted; else the tail or wedge test decides). Branch-free."""
    idx = r & _U(0xFF)
    r >>= _U(8)
    rabs = (r >> _U(1)) & _U(0x000FFFFFFFFFFFFF)
    z = float(rabs) * _ZIG_WI[idx]
    return (-z if r & _U(1) else z), idx, rabs, rabs < _ZIG_KI[idx]


@_inner
def next_normal(x):
    """A standard normal by the ziggurat (tables frozen into the code) and the new state.

    Called, not inlined: scalars in and out (no reference counting), and its tail and wedge
    loops would otherwise be compiled into every caller (~4 s more of the kernel's cold
    compile)."""
    while True:
        r, x = next_word(x)
        z, idx, rabs, accepted = _zig_try(r)
        if accepted:
            return z, x
        if idx == 0:  # the tail beyond R
            while True:
                u1, x = next_uniform(x)
                u2, x = next_uniform(x)
                xx = -math.log1p(-u1) / _ZIG_R
                yy = -math.log1p(-u2)
                if yy + yy > xx * xx:
                    zz = _ZIG_R + xx
                    return (-zz if (rabs >> _U(8)) & _U(1) else zz), x
        else:  # the wedge
            u1, x = next_uniform(x)
            if (_ZIG_FI[idx - 1] - _ZIG_FI[idx]) * u1 + _ZIG_FI[idx] < math.exp(-0.5 * z * z):
                return z, x


@_inline
def normal_first_try(base, k):
    """The ziggurat's first try at draw ``k``'s standard normal, ``(z, accepted)``: when
    accepted (98.5 % of draws), ``z`` is :func:`next_normal`'s. Branch-free, so a loop of them
    over many streams is vectorised (a round of the fast paths, :func:`.fastpath.round_durations`)."""
    r, _ = next_word(draw_state(base, k))
    z, _, _, accepted = _zig_try(r)
    return z, accepted


# ------------------------------------------------------------------ draws on a state array
# the samplers below take the generator state as a uint64[1] array ``s`` (set by the caller to
# draw_state(...) before each draw) and advance it
@_inner
def uniform(s):
    """A double in [0, 1)."""
    u, s[0] = next_uniform(s[0])
    return u


@_inner
def exponential(s, mean):
    return -mean * math.log(1.0 - uniform(s))


@_inner
def std_normal(s):
    z, s[0] = next_normal(s[0])
    return z


@_inner
def gamma_unit(s, k):
    """Gamma(shape k, scale 1) by Marsaglia-Tsang (k < 1 via the u**(1/k) boost)."""
    boost = 1.0
    if k < 1.0:
        boost = uniform(s) ** (1.0 / k)
        k += 1.0
    d = k - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = std_normal(s)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = 1.0 - uniform(s)
        if math.log(u) < 0.5 * x * x + d - d * v + d * math.log(v):
            return d * v * boost


@_inner
def sample_base(s, code, a, b, pool):
    """One draw of a non-mixture distribution with parameter row ``(a, b)``."""
    if code == CODE_DET:
        return a
    if code == CODE_EXP:
        return exponential(s, a)
    if code == CODE_UNIF:
        return a + (b - a) * uniform(s)
    if code == CODE_NORM:  # truncated at 0 by rejection
        if b == 0.0:
            return a
        while True:
            x = a + b * std_normal(s)
            if x >= 0.0:
                return x
    if code == CODE_LOGN:
        return math.exp(a + b * std_normal(s))
    if code == CODE_GAMMA:
        if a == 0.0:
            return b
        return gamma_unit(s, a) * b
    if code == CODE_SHEXP:
        return a + exponential(s, b)
    if code == CODE_EMP:
        n = int(b)
        j = int(uniform(s) * n)
        if j >= n:
            j = n - 1
        return pool[int(a) + j]
    return a


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def sample(s, code, par, row, pool):
    """One draw of distribution ``code`` with parameters ``par[row]`` (see :func:`sgdnet.dists.flatten`)
    from the state ``s`` (uint64[1]); a straggler mixture draws its base first, then its coin."""
    if code == CODE_DET:
        return par[row, 0]
    if code == CODE_STRAG:
        x = sample_base(s, int(par[row, 2]), par[row, 3], par[row, 4], pool)
        if uniform(s) < par[row, 0]:
            x *= par[row, 1]
        return x
    return sample_base(s, code, par[row, 0], par[row, 1], pool)


@_inner
def uniform_draw(base, k):
    """The first uniform of draw ``k`` of the stream of base ``base`` (called, not inlined: the
    engines' cold paths, switches and Markov modulators)."""
    u, _ = next_uniform(draw_state(base, k))
    return u


@_inner
def uniform_pair(base, k):
    """The first two uniforms of draw ``k`` of the stream of base ``base``."""
    u, x = next_uniform(draw_state(base, k))
    v, _ = next_uniform(x)
    return u, v


@_inline
def lognormal_draw(base, k, mu, sigma):
    """Draw ``k`` of the stream of base ``base``: ``exp(mu + sigma Z)``, Z by the ziggurat.

    Scalars only: an inlined function taking arrays would make numba count references on them
    at every call (atomic increments, ~10 ns a draw in the engines' loops)."""
    z, _ = next_normal(draw_state(base, k))
    return math.exp(mu + sigma * z)


@_inline
def exponential_draw(base, k, mean):
    """Draw ``k`` of the stream of base ``base``: an exponential of mean ``mean`` by inversion."""
    u, _ = next_uniform(draw_state(base, k))
    return -mean * math.log(1.0 - u)


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def draw(base, k, code, par, row, pool, s):
    """Draw ``k`` of the stream of base ``base`` from law ``par[row]`` (``s``: a uint64[1] scratch).

    The same numbers as :func:`lognormal_draw` and :func:`exponential_draw`, which the engines'
    loops call directly for those laws (the common random ones) and this function otherwise."""
    if code == CODE_LOGN:
        return lognormal_draw(base, k, par[row, 0], par[row, 1])
    if code == CODE_EXP:
        return exponential_draw(base, k, par[row, 0])
    s[0] = draw_state(base, k)
    return sample(s, code, par, row, pool)


# ------------------------------------------------------------------ from Python
@njit(cache=True)
def _durations(base, k0, n, code, par, row, pool):  # pragma: no cover - compiled
    out = np.empty(n)
    s = np.zeros(1, dtype=np.uint64)
    for i in range(n):
        out[i] = draw(base, k0 + i, code, par, row, pool, s)
    return out


def durations(base: int, k0: int, n: int, code: int, par: np.ndarray, row: int,
              pool: np.ndarray) -> np.ndarray:
    """Draws ``k0 .. k0 + n - 1`` of one stream (for the reference simulator and the tests)."""
    return _durations(np.uint64(base), np.int64(k0), np.int64(n), np.int64(code), _ro(par),
                      np.int64(row), _ro(pool))


@njit(cache=True)
def words(base, k, n):  # pragma: no cover - compiled
    """The first ``n`` uniforms of draw ``k`` of one stream (the reference's switches and Markov
    modulators draw uniforms and exponentials from them as the kernel does)."""
    out = np.empty(n)
    x = draw_state(base, k)
    for i in range(n):
        out[i], x = next_uniform(x)
    return out


@njit(cache=True)
def normals(seed, n):  # pragma: no cover - compiled
    """``n`` standard normals, draws ``0 .. n-1`` of stream 0 of ``seed`` (for the tests)."""
    base = _mix(_U(seed))
    out = np.empty(n)
    for i in range(n):
        out[i], _ = next_normal(draw_state(base, i))
    return out
