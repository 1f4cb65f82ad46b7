"""Counter-free, per-replication random numbers for the kernel: xoshiro256** seeded by splitmix64.

The state is a ``uint64[4]`` array owned by one replication, so replications are reproducible
independently of threads. All distribution codes of :mod:`sgdnet.dists` are sampled here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_U = np.uint64
_INV53 = 1.0 / 9007199254740992.0
TWO_PI = 2.0 * math.pi


@njit(cache=True, inline="always")
def _rotl(x, k):
    return (x << _U(k)) | (x >> _U(64 - k))


@njit(cache=True)
def seed_state(seed):
    """Four splitmix64 outputs of ``seed`` (uint64) as the xoshiro256** state."""
    s = np.empty(4, dtype=np.uint64)
    z = _U(seed)
    for i in range(4):
        z = z + _U(0x9E3779B97F4A7C15)
        x = z
        x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
        s[i] = x ^ (x >> _U(31))
    return s


@njit(cache=True, inline="always")
def next_u64(s):
    s0 = s[0]
    s1 = s[1]
    s2 = s[2]
    s3 = s[3]
    res = _rotl(s1 * _U(5), 7) * _U(9)
    t = s1 << _U(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    s[0] = s0
    s[1] = s1
    s[2] = s2
    s[3] = s3
    return res


@njit(cache=True, inline="always")
def uniform(s):
    """A double in [0, 1)."""
    return float(next_u64(s) >> _U(11)) * _INV53


@njit(cache=True, inline="always")
def exponential(s, mean):
    return -mean * math.log(1.0 - uniform(s))


@njit(cache=True)
def std_normal(s):
    u1 = 1.0 - uniform(s)
    u2 = uniform(s)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(TWO_PI * u2)


@njit(cache=True)
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


@njit(cache=True)
def sample_base(s, code, a, b, pool):
    """One draw of a non-mixture distribution with parameter row ``(a, b)``."""
    if code == 0:
        return a
    if code == 1:
        return exponential(s, a)
    if code == 2:
        return a + (b - a) * uniform(s)
    if code == 3:
        if b == 0.0:
            return a
        while True:
            x = a + b * std_normal(s)
            if x >= 0.0:
                return x
    if code == 4:
        return math.exp(a + b * std_normal(s))
    if code == 5:
        if a == 0.0:
            return b
        return gamma_unit(s, a) * b
    if code == 6:
        return a + exponential(s, b)
    if code == 7:
        n = int(b)
        j = int(uniform(s) * n)
        if j >= n:
            j = n - 1
        return pool[int(a) + j]
    return a


@njit(cache=True)
def sample(s, code, par, pool):
    """One draw of distribution ``(code, par row)`` (see :func:`sgdnet.dists.flatten`)."""
    if code == 0:
        return par[0]
    if code == 8:
        x = sample_base(s, int(par[2]), par[3], par[4], pool)
        if uniform(s) < par[0]:
            x *= par[1]
        return x
    return sample_base(s, code, par[0], par[1], pool)
