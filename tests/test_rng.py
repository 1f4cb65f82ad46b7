"""The random streams (sgdnet.engine.rng) against the laws they sample, and their keying.

- the ziggurat normal against the normal law (Kolmogorov-Smirnov, and the mass and shape of the
  tail its own loop draws);
- every law the engines draw (log-normal, exponential, uniform, gamma, truncated normal,
  straggler mixture, empirical), draw by draw from one stream, against its CDF or its moments;
- streams: a draw depends on (seed, name, k) only — two nets that share transition names get
  the same durations for them (common random numbers), whatever else the nets hold; distinct
  names, firings and seeds give uncorrelated draws.
"""

import math

import numpy as np
import pytest
from scipy import stats

from sgdnet import Net, simulate
from sgdnet.dists import (
    Deterministic,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Normal,
    Straggler,
    Uniform,
    flatten,
)
from sgdnet.engine.rng import durations, normals, stream_bases
from sgdnet.net.compiled import stream_ids

N = 200_000


def draws(dist, name="t", seed=0, n=N, k0=0):
    """Draws ``k0 .. k0 + n - 1`` of the stream of ``name`` under ``seed`` from ``dist``."""
    code, par, pool = flatten([dist])
    base = stream_bases(seed, stream_ids([name]))[0]
    return durations(base, k0, n, code[0], par, 0, pool)


def test_ziggurat_normals():
    z = normals(12345, 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # the tail beyond the base strip's edge (3.654) is drawn by its own loop: its mass is right
    tail = np.mean(np.abs(z) > 3.6541528853610088)
    expect = 2 * stats.norm.sf(3.6541528853610088)
    assert abs(tail - expect) < 4 * math.sqrt(expect / z.size)
    assert stats.kstest(np.abs(z[np.abs(z) > 3.0]), lambda x: 1 - stats.norm.sf(x) / stats.norm.sf(3.0)).pvalue > 1e-3


@pytest.mark.parametrize("dist, cdf", [
    (LogNormal(mean=2.0, cv=0.5), None),
    (Exponential(0.7), lambda x: stats.expon.cdf(x, scale=0.7)),
    (Uniform(1.0, 3.0), lambda x: stats.uniform.cdf(x, loc=1.0, scale=2.0)),
    (Gamma(mean=1.5, cv=0.6), lambda x: stats.gamma.cdf(x, a=1 / 0.36, scale=1.5 * 0.36)),
    (Gamma(mean=1.5, cv=1.5), lambda x: stats.gamma.cdf(x, a=1 / 2.25, scale=1.5 * 2.25)),
], ids=["lognormal", "exponential", "uniform", "gamma", "gamma-k<1"])
def test_each_law_is_sampled_right(dist, cdf):
    x = draws(dist)
    if cdf is None:  # log-normal: log x is normal with the law's parameters
        sigma2 = math.log(1 + 0.5 ** 2)
        cdf = lambda v: stats.norm.cdf(np.log(v), loc=math.log(2.0) - sigma2 / 2, scale=math.sqrt(sigma2))  # noqa: E731
    assert stats.kstest(x, cdf).pvalue > 1e-3
    assert x.mean() == pytest.approx(dist.mean, rel=6 * x.std() / dist.mean / math.sqrt(N))


def test_truncated_normal_and_mixtures():
    x = draws(Normal(1.0, 0.8))  # truncated at 0 by rejection
    a = -1.0 / 0.8
    assert x.min() >= 0.0
    assert stats.kstest(x, lambda v: stats.truncnorm.cdf(v, a, np.inf, loc=1.0, scale=0.8)).pvalue > 1e-3
    s = draws(Straggler(Deterministic(1.0), p=0.1, factor=5.0))
    assert set(np.unique(s).tolist()) == {1.0, 5.0}
    p = np.mean(s == 5.0)
    assert abs(p - 0.1) < 4 * math.sqrt(0.1 * 0.9 / N)
    e = draws(Empirical([1.0, 2.0, 4.0]))
    counts = np.array([np.sum(e == v) for v in (1.0, 2.0, 4.0)])
    assert stats.chisquare(counts).pvalue > 1e-3


def test_streams_are_uncorrelated_across_names_firings_and_seeds():
    n = 50_000
    lim = 5 / math.sqrt(n)  # 5 sigma of a sample correlation of independent draws
    u = Uniform(0.0, 1.0)
    a = draws(u, "w0.fwd.l1", n=n)
    for other in (draws(u, "w0.fwd.l2", n=n), draws(u, "w1.fwd.l1", n=n), draws(u, "w0.fwd.l1", seed=1, n=n)):
        assert abs(np.corrcoef(a, other)[0, 1]) < lim
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < lim  # firing k against firing k + 1
    # draw k does not depend on the draws before it
    np.testing.assert_array_equal(draws(u, "w0.fwd.l1", n=100, k0=500), a[500:600])


def cycle(net, name, dist, tokens=1, step=False):
    net.place(f"{name}.p", tokens)
    net.transition(name, dist, inputs=[f"{name}.p"], outputs=[f"{name}.p"], tags={"step": step})


def test_nets_sharing_names_share_draws():
    # common random numbers: firing k of "a" lasts the same in both nets, although the second
    # holds more transitions, declared before it (other indices, other event orders)
    one, two = Net("one"), Net("two")
    cycle(two, "b", Exponential(0.3))
    cycle(two, "c", LogNormal(mean=0.2, cv=1.0), tokens=2)
    for net in (one, two):
        cycle(net, "a", LogNormal(mean=1.0, cv=0.5), step=True)
    kw = dict(steps=200, warmup=0, replications=2, seed=4, trace=True, trace_limit=100_000, engine="generic")
    r1, r2 = simulate(one, **kw), simulate(two, **kw)
    for rep in range(2):
        d1 = [tr["end"] - tr["start"] for tr in r1.trace[r1.trace["rep"] == rep] if tr["transition"] == 0]
        ia = list(two.transitions).index("a")
        d2 = [tr["end"] - tr["start"] for tr in r2.trace[r2.trace["rep"] == rep] if tr["transition"] == ia]
        m = min(len(d1), len(d2))
        assert m >= 200
        np.testing.assert_array_equal(d1[:m], d2[:m])
    assert not np.array_equal(r1.throughput.samples, simulate(one, **{**kw, "seed": 5}).throughput.samples)


def test_a_fast_path_round_draws_what_each_stream_draws_one_by_one():
    # round_durations splits a round's log-normal draws into a vectorised first try of the
    # ziggurat and a scalar rest (the rejected tries drawn again in full): every duration must
    # still be draw k of its transition's stream, as the generic engine draws it one at a time
    from sgdnet.engine.fastpath import draw_lists, round_durations

    laws = [LogNormal(mean=2.0, cv=0.5), Exponential(0.7), Deterministic(1.25), Uniform(1.0, 3.0),
            LogNormal(mean=0.1, cv=1.5), Gamma(mean=1.5, cv=0.6)] * 7
    code, par, pool = flatten(laws)
    for a in (code, par, pool):  # read-only, as a compiled net's: the engines' numba types, so
        a.setflags(write=False)  # this call compiles no second round_durations (or draw)
    T, K = len(laws), 400
    names = [f"t{i}" for i in range(T)]
    sb = stream_bases(7, stream_ids(names))
    fixed = np.array([isinstance(d, Deterministic) for d in laws])
    dfix = np.where(fixed, 1.25, 0.0)
    lidx, oidx = draw_lists(fixed, code)
    assert sorted([*lidx, *oidx, *np.flatnonzero(fixed)]) == list(range(T))
    dr, zz, ok = dfix.copy(), np.empty(lidx.size), np.empty(lidx.size, dtype=np.bool_)
    got, rejected = np.empty((K, T)), 0
    for k in range(K):
        round_durations(dr, k, code, par, pool, sb[None], 0, lidx, sb[lidx][None], oidx, zz, ok,
                        np.zeros(1, dtype=np.uint64))
        got[k] = dr
        rejected += int((~ok).sum())
    want = np.array([durations(sb[t], 0, K, code[t], par, t, pool) if not fixed[t]
                     else np.full(K, 1.25) for t in range(T)]).T
    assert np.array_equal(got, want)
    # the rest path ran: these tables reject 1.5 % of first tries (mean of 1 - KI / 2^52), ~84
    # of these 5,600 log-normal draws
    assert 10 < rejected < 200
