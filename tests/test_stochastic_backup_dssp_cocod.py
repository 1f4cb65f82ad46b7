"""Variants II, stochastic checks with fixed seeds and CI-derived tolerances.

* ``backup`` with exponential compute (and free communication) and ``late="abort"``: a round
  lasts the ``(n-b)``-th order statistic of ``n`` exponentials, mean ``(H_n - H_b) * mean``.
* DSSP: like SSP(S_L) with identical workers; on a heterogeneous cluster, without a cap some
  worker outruns the slow ones in every replication, with a cap ``S_U`` every worker keeps the
  slowest's pace (and the staleness is bounded); ``r*`` values reported and within
  ``[0, r_max]``. (The paper's rule itself: tests/test_dssp_paper.py.)
* CoCoD heterogeneous mode (deterministic): per-worker batches proportional to speed.
"""

import numpy as np
import pytest

from sgdnet import Cluster, Layer, ModelProfile, metrics, variants
from sgdnet.engine import simulate
from sgdnet.results import Estimate
from sgdnet.variants.parameter_server import build_ps_net
from sgdnet.workload import ring_allreduce_time

MEAN = 0.03
# all compute in one backward op so that compute_cv=1 makes it exactly exponential; no bytes
EXP_PROF = ModelProfile("exp", [Layer("all", 0.0, MEAN, 0.0)], batch_size=32)
PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6)],
                    batch_size=32)


def harmonic(m):
    return sum(1.0 / j for j in range(1, m + 1))


def round_time(res, per_round):
    """Estimate of the mean round time: per replication, window time / rounds counted."""
    return Estimate(res.sim_time / (res.steps / per_round))


@pytest.mark.parametrize("n, b", [(4, 0), (4, 1), (8, 3)])
def test_backup_abort_matches_order_statistic(n, b):
    c = Cluster(workers=n, latency=0, compute_cv=1.0)
    net = variants.build("backup", EXP_PROF, c, granularity="coarse", backups=b, late="abort")
    rounds = 1500
    res = simulate(net, steps=(n - b) * rounds, warmup=(n - b) * 20, replications=8, seed=100 + n)
    est = round_time(res, n - b)
    want = (harmonic(n) - harmonic(b)) * MEAN
    assert abs(est.mean - want) < est.half_width(0.99)


def test_backup_finish_pays_for_late_workers():
    n, b = 4, 1
    c = Cluster(workers=n, latency=0, compute_cv=1.0)
    res = {late: simulate(variants.build("backup", EXP_PROF, c, granularity="coarse",
                                         backups=b, late=late),
                          steps=(n - b) * 1000, warmup=30, replications=6, seed=7)
           for late in ("finish", "abort")}
    fin, abo = round_time(res["finish"], n - b), round_time(res["abort"], n - b)
    assert fin.ci(0.99)[0] > abo.ci(0.99)[1]
    # and it is still faster than waiting for everybody (the n-th order statistic)
    assert fin.ci(0.99)[1] < harmonic(n) * MEAN


# ------------------------------------------------------------------------------- DSSP
@pytest.fixture(scope="module")
def het_runs():
    """Half the workers 2x slower, noisy compute: SSP(3), ASP, DSSP(3, 12) without and with a
    cap S_U = 15."""
    c = Cluster(workers=8, speeds=[1.0] * 4 + [0.5] * 4, compute_cv=0.2, bandwidth="25Gbps")
    kw = dict(steps=3000, warmup=300, replications=6, seed=21)
    return {
        "ssp": simulate(build_ps_net("ssp", PROF, c, synchronous=False, coarse=True,
                                     staleness=3), **kw),
        "asp": simulate(build_ps_net("asp", PROF, c, synchronous=False, coarse=True), **kw),
        "dssp": simulate(variants.build("dssp", PROF, c, granularity="coarse", s_lower=3,
                                        r_max=12), trace=True, trace_limit=400_000, **kw),
        "dssp-cap": simulate(variants.build("dssp", PROF, c, granularity="coarse", s_lower=3,
                                            r_max=12, s_upper=15), trace=True,
                             trace_limit=400_000, **kw),
    }


def _worker_rates(res):
    """(replications, workers) steps/s of each worker."""
    by = res.throughput_by("worker")
    return np.array([by[w].samples for w in sorted(by)]).T


def test_dssp_without_cap_some_worker_outruns_the_slow_ones(het_runs):
    # the fastest worker beyond S_L is released at every push (r* + 1 releases), so nothing
    # holds it to the slow workers' pace
    rates = _worker_rates(het_runs["dssp"])
    assert np.all(rates[:, :4].max(axis=1) > 1.5 * rates[:, 4:].max(axis=1))
    assert het_runs["asp"].throughput.mean > het_runs["ssp"].throughput.mean * 1.2


def test_dssp_with_cap_keeps_every_worker_at_the_slowest_pace(het_runs):
    # step counts never differ by more than S_U + 2 = 17, so the counts in the window (~375
    # steps a worker, at least ~340) differ by at most 2 * 17
    rates = _worker_rates(het_runs["dssp-cap"])
    assert np.all(rates.max(axis=1) / rates.min(axis=1) < 1 + 2 * 17 / 340)


def test_dssp_reports_r_star(het_runs):
    r = metrics.r_star(het_runs["dssp"])
    assert r.size > 0 and r.min() >= 0 and r.max() <= 12
    assert np.any(r > 0)  # the controller does grant extra allowance on this cluster


def test_dssp_staleness_is_bounded_by_its_upper_threshold(het_runs):
    # with S_U = 15 no worker gets more than g = S_U + 2 steps ahead of the slowest, so while
    # one step of worker i is in flight any other worker applies at most 2 g + 1 updates
    s = metrics.staleness(het_runs["dssp-cap"])
    g = 15 + 2
    assert s.size > 0 and s.min() >= 0 and s.max() <= 7 * (2 * g + 1)


def test_dssp_like_ssp_with_identical_workers():
    c = Cluster(workers=6, compute_cv=0.2, bandwidth="25Gbps")
    kw = dict(steps=3000, warmup=300, replications=6, seed=33)
    d = simulate(variants.build("dssp", PROF, c, granularity="coarse", s_lower=2, r_max=8), **kw)
    s = simulate(build_ps_net("ssp", PROF, c, synchronous=False, coarse=True, staleness=2), **kw)
    diff = abs(d.throughput.mean - s.throughput.mean)
    assert diff < d.throughput.half_width(0.99) + s.throughput.half_width(0.99)


# ------------------------------------------------------------------------------- CoCoD
def test_cocod_heterogeneous_batches_equalise_compute():
    speeds = [1.0, 1.0, 0.5, 0.5]
    c = Cluster(workers=4, speeds=speeds, bandwidth="10Gbps")
    k = 3
    net = variants.build("cocod", PROF, c, granularity="coarse", k=k, balance="batch")
    bs = net.meta["batch_sizes"]
    assert bs == [round(32 * 4 * s / 3) for s in speeds]
    tc = [PROF.compute_s * b / 32 / s for b, s in zip(bs, speeds)]
    t_ar = ring_allreduce_time(PROF.grad_bytes, 4, c.bandwidth, c.latency)
    want = max(k * max(tc), t_ar)
    assert np.allclose(rounds(net, k), want, rtol=1e-9, atol=0)
    # without balancing the slow workers set the pace: twice the compute
    plain = variants.build("cocod", PROF, c, granularity="coarse", k=k)
    assert np.allclose(rounds(plain, k), max(k * PROF.compute_s / 0.5, t_ar), rtol=1e-9, atol=0)


def rounds(net, k, n_rounds=20, warmup_rounds=100):
    """Round durations seen by every worker: its step completions k steps apart.

    A slightly faster worker runs up to one round ahead on the slack CoCoD gives it (it waits
    for the previous round's all-reduce only) before it is held back, so warm up long enough.
    """
    n = net.meta["workers"]
    res = simulate(net, steps=n * k * n_rounds, warmup=n * k * warmup_rounds, replications=1,
                   seed=0)
    times, trans = res.step_completion_times(0)
    worker = np.array([res.transition_tags[t]["worker"] for t in trans])
    return np.concatenate([np.diff(times[worker == w][::k]) for w in range(n)])
