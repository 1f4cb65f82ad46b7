"""Calibration fitting recovers known parameters from synthetic measurements.

The synthetic data are generated from the model each fit assumes (token-bucket link, incast
curve, linear cost) with parameters chosen here, not by the code under test; noisy cases check
that the estimates are unbiased to within three standard errors over many seeded repetitions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgdnet import Cluster
from sgdnet.errors import CalibrationError, SgdnetError
from sgdnet.testbed.calibrate import SWEEP_SIZES, build_cluster_file, calibration_jobs, with_sharing
from sgdnet.testbed.fit import fit_incast, fit_linear, fit_link, fit_share_cv, maxmin_spread

ALPHA, BW, BURST = 180e-6, 12.5e6, 64_000.0
SIZES = [4, 1024, 4096, 16384, 32768, 49152, 65536, 98304, 131072, 262144, 524288, 1048576,
         2097152]


def link_time(s, alpha=ALPHA, bw=BW, burst=BURST):
    return alpha + max(0.0, s - burst) / bw


def test_fit_link_recovers_alpha_bandwidth_burst_exactly():
    f = fit_link(SIZES, [link_time(s) for s in SIZES])
    assert f.alpha == pytest.approx(ALPHA, rel=1e-3)
    assert f.bandwidth == pytest.approx(BW, rel=1e-4)
    assert f.burst == pytest.approx(BURST, rel=2e-3)
    assert f.max_rel_residual < 1e-3
    assert f.notes == ()


def test_fit_link_without_burst_is_plain_alpha_beta():
    sizes = [1e3, 1e4, 1e5, 1e6]
    f = fit_link(sizes, [50e-6 + s / 1e9 for s in sizes], burst=False)
    assert (f.alpha, f.bandwidth, f.burst) == (pytest.approx(50e-6), pytest.approx(1e9), 0.0)


def test_fit_link_with_bandwidth_given_fits_only_alpha_and_burst():
    # a bandwidth measured elsewhere (streams) 2% off: alpha and burst still come out close
    f = fit_link(SIZES, [link_time(s) for s in SIZES], bandwidth=BW)
    assert f.bandwidth == BW
    assert f.alpha == pytest.approx(ALPHA, rel=1e-3)
    assert f.burst == pytest.approx(BURST, rel=2e-3)


def test_fit_link_is_unbiased_under_noise():
    """5% multiplicative noise, 200 seeded repetitions: each mean within 3 standard errors."""
    rng = np.random.default_rng(2026)
    est = []
    for _ in range(200):
        t = [link_time(s) * (1 + 0.05 * rng.standard_normal()) for s in SIZES]
        f = fit_link(SIZES, t)
        est.append((f.alpha, f.bandwidth, f.burst))
    e = np.array(est)
    for j, truth in enumerate((ALPHA, BW, BURST)):
        m, se = e[:, j].mean(), e[:, j].std(ddof=1) / math.sqrt(len(e))
        # weighted least squares on relative residuals is not exactly unbiased: allow 3 SE plus
        # 2% of the value
        assert abs(m - truth) < 3 * se + 0.02 * truth, (j, m, truth, se)


def test_negative_alpha_is_clamped_with_a_note_not_an_error():
    sizes = [1e4, 1e5, 1e6, 2e6]
    f = fit_link(sizes, [-40e-6 + s / 1e8 for s in sizes], burst=False)
    assert f.alpha == 0.0
    assert f.bandwidth == pytest.approx(1e8, rel=1e-3)
    assert any("negative" in n and "clamped" in n for n in f.notes)


@pytest.mark.parametrize("sizes, times, match", [
    ([1000, 1000, 1000], [1e-3, 1e-3, 1e-3], "distinct sizes"),
    ([1e3, 1e4, 1e5], [1e-3, 0.0, 1e-3], "times must be finite and > 0"),
    ([1e3, 1e4, 1e5], [1e-3, 1e-3], "equal length"),
    ([1e3, 1e4, 1e5], [3e-3, 2e-3, 1e-3], "does not grow"),
])
def test_fit_link_rejects_bad_measurements(sizes, times, match):
    with pytest.raises(CalibrationError, match=match) as e:
        fit_link(sizes, times, burst=False)
    assert isinstance(e.value, SgdnetError)


def test_fit_incast_recovers_a_known_curve():
    ks = [1, 2, 3, 4, 6, 8]
    e = {k: 0.95 / (1 + 0.05 * (k - 1)) for k in ks}
    f = fit_incast(ks, [BW * e[k] for k in ks], BW)
    assert f.e1 == pytest.approx(0.95)
    assert f.c == pytest.approx(0.05, rel=1e-9)
    assert f.table == pytest.approx(e)
    assert f.efficiency(5) == pytest.approx(0.95 / 1.2)


def test_fit_incast_averages_repeats_and_extrapolates_one_flow():
    ks = [2, 2, 3, 4]
    true = {k: 0.9 / (1 + 0.1 * (k - 1)) for k in (2, 3, 4)}
    gp = [BW * true[2] * 1.01, BW * true[2] * 0.99, BW * true[3], BW * true[4]]
    f = fit_incast(ks, gp, BW)
    assert f.table[2] == pytest.approx(true[2])
    assert f.e1 == pytest.approx(0.9, rel=1e-6)  # 1/e is linear in k: exact extrapolation
    assert f.c == pytest.approx(0.1, rel=1e-6)


def test_fit_incast_growing_goodput_clamps_slope_with_a_note():
    f = fit_incast([1, 2, 4], [0.8 * BW, 0.9 * BW, 0.95 * BW], BW)
    assert f.c == 0.0 and any("clamped" in n for n in f.notes)
    with pytest.raises(CalibrationError, match="integers >= 1"):
        fit_incast([0, 1], [BW, BW], BW)


def test_fit_linear_per_tensor_and_per_byte():
    x = [4e3, 6.5e4, 2.6e5, 1e6, 4e6]
    f = fit_linear(x, [3e-6 + 2.5e-10 * v for v in x])
    assert f.intercept == pytest.approx(3e-6, rel=1e-6)
    assert f.slope == pytest.approx(2.5e-10, rel=1e-6)
    g = fit_linear(x[1:], [-1e-6 + 2.5e-10 * v for v in x[1:]])
    assert g.intercept == 0.0 and g.notes


# ---------------------------------------------------------------- raw records -> cluster file
def _synthetic_ranks(alpha=ALPHA, bw=BW, burst=BURST, incast_c=0.04, workers=3,
                     share_cv=None):
    """Rank records shaped like the worker's output, generated from known parameters
    (with ``share_cv``: every incast run also records per-flow ends, max-min over Gamma
    sizes of that CV, 30 runs per flow count)."""
    sweep = {str(s): [link_time(s, alpha, bw, burst) + alpha] * 3 for s in SWEEP_SIZES}
    stream_bytes = 8 << 20
    stream_rtt = alpha + (stream_bytes - burst) / bw + alpha
    send = {"sweep": sweep, "stream": [{"bytes": stream_bytes, "rtt_s": stream_rtt,
                                        "cpu_s": 2e-9 * stream_bytes}] * 3}
    recv = {"sweep": {}, "stream": [{"bytes": stream_bytes, "cpu_s": 3e-9 * stream_bytes}] * 3}
    s = 1 << 20
    runs = []
    for k in range(1, workers + 1):
        eff = 1 / (1 + incast_c * (k - 1))
        runs.append({"k": k, "bytes": k * s, "seconds": alpha + (k * s - burst) / (bw * eff)})
    if share_cv is not None:
        rng = np.random.default_rng(7)
        shape = 1 / share_cv ** 2
        runs = [{"k": k, "bytes": k * s, "seconds": 0.0,
                 "ends": [alpha - burst / bw + e / bw
                          for e in _maxmin(rng.gamma(shape, s / shape, size=k))]}
                for k in range(1, workers + 1) for _ in range(30)] + runs
    sizes = [4096, 65536, 262144, 1 << 20, 4 << 20]
    rank0 = {"rank": 0, "jobs": [
        {"kind": "p2p", "id": "p2p", "p2p": {"0->1": send}},
        {"kind": "incast", "id": "incast-in", "incast": {"direction": "in", "nbytes": s,
                                                         "runs": runs}},
        {"kind": "costs", "id": "costs", "costs": {
            "reduce_s": {str(v): 1e-6 + 1e-10 * v for v in sizes},
            "update_s": {str(v): 4e-6 + 3e-10 * v for v in sizes},
            "local_step_s": 2.5e-3, "model": "tb-mlp", "layer_bytes": []}}]}
    rank1 = {"rank": 1, "jobs": [{"kind": "p2p", "id": "p2p", "p2p": {"0->1": recv}}]}
    others = [{"rank": r, "jobs": []} for r in range(2, workers + 1)]
    return [rank1, rank0, *others]


def test_build_cluster_file_recovers_link_incast_and_costs():
    cf, prof = build_cluster_file(_synthetic_ranks(), name="syn")
    lk = cf.link
    assert lk.bandwidth == pytest.approx(BW, rel=1e-3)
    assert lk.latency == pytest.approx(ALPHA, rel=1e-2)
    assert lk.burst == pytest.approx(BURST, rel=1e-2)
    assert lk.incast == pytest.approx({k: 1 / (1 + 0.04 * (k - 1)) for k in (1, 2, 3)}, rel=1e-2)
    assert cf.cpu["send_s_per_byte"] == pytest.approx(2e-9)
    assert cf.cpu["recv_s_per_byte"] == pytest.approx(3e-9)
    assert cf.cpu["reduce_s_per_byte"] == pytest.approx(1e-10, rel=1e-6)
    assert cf.ps == pytest.approx({"update_s_per_byte": 3e-10, "update_s_per_tensor": 4e-6},
                                  rel=1e-6)
    assert cf.local_step_s == {"tb-mlp": 2.5e-3}
    assert cf.workers == 3 and cf.ps_hosts == 1
    # (2 + 3) ns/B x 12.5 MB/s = 6% of the link time: the CPU is not the bottleneck
    assert cf.comm_uses_compute is False
    assert any("comm_uses_compute: false" in n and "busy 6." in n for n in cf.notes)
    assert prof is None
    c = Cluster(**cf.cluster_kwargs())
    assert (c.bandwidth, c.latency) == (pytest.approx(BW, rel=1e-3), pytest.approx(ALPHA, rel=1e-2))
    assert c.update_time(1e6) == pytest.approx(4e-6 + 3e-10 * 1e6, rel=1e-6)


def test_build_cluster_file_needs_the_p2p_job():
    with pytest.raises(CalibrationError, match="p2p"):
        build_cluster_file([{"rank": 0, "jobs": []}, {"rank": 1, "jobs": []}])


def test_calibration_jobs_cover_every_measurement():
    kinds = [j["kind"] for j in calibration_jobs(4)]
    assert kinds == ["p2p", "incast", "incast", "costs", "profile"]
    assert calibration_jobs(3)[0]["pairs"] == [[1, 0], [0, 1], [1, 2]]
    with pytest.raises(CalibrationError, match="at least 2 hosts"):
        calibration_jobs(1)


def test_comm_uses_compute_is_decided_by_cpu_cost_times_bandwidth_unless_given():
    slow, _ = build_cluster_file(_synthetic_ranks())
    fast, _ = build_cluster_file(_synthetic_ranks(bw=125e6))  # 62% of the link time
    assert (slow.comm_uses_compute, fast.comm_uses_compute) == (False, True)
    forced, _ = build_cluster_file(_synthetic_ranks(), comm_uses_compute=True)
    assert forced.comm_uses_compute is True
    assert not any("comm_uses_compute" in n for n in forced.notes)



# ---------------------------------------------------------------- uneven sharing
def _maxmin(sizes):
    """Completion times of flows of ``sizes`` started together on one link of capacity 1,
    by progressive filling (written here independently of the code under test)."""
    rem, t, ends, act = list(sizes), 0.0, [0.0] * len(sizes), set(range(len(sizes)))
    while act:
        j = min(act, key=lambda i: rem[i])
        x = rem[j]
        t += x * len(act)
        for i in act:
            rem[i] -= x
        ends[j] = t
        act.remove(j)
    return ends


def test_maxmin_spread_is_zero_without_noise_and_grows_with_it():
    assert maxmin_spread(0.0, 4) == 0.0 and maxmin_spread(0.5, 1) == 0.0
    v = [maxmin_spread(c, 3) for c in (0.1, 0.3, 0.6, 1.0)]
    assert all(a < b for a, b in zip(v, v[1:]))


def test_fit_share_cv_recovers_a_known_cv_without_bias():
    """Gamma message sizes with CV 0.3, 40 runs of 2, 3 and 4 flows each: over 30 seeded
    repetitions the mean estimate is within 3 standard errors (+ the 0.01 grid) of 0.3."""
    est = []
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        ks, ends = [], []
        for k in (2, 3, 4):
            for _ in range(40):
                ks.append(k)
                ends.append(_maxmin(rng.gamma(1 / 0.09, 0.09, size=k)))
        est.append(fit_share_cv(ks, ends).cv)
    se = np.std(est, ddof=1) / math.sqrt(len(est))
    assert abs(np.mean(est) - 0.3) <= 3 * se + 0.01
    assert min(est) > 0.2 and max(est) < 0.4


def test_fit_share_cv_of_max_min_is_zero_and_skips_single_flows():
    f = fit_share_cv([1, 2, 3], [[0.5], [0.2, 0.2], [0.3, 0.3, 0.3]])
    assert f.cv == 0.0 and f.runs == 2 and set(f.measured) == {2, 3}
    # a constant shift (latency, a burst's head start) is removed by the offset
    g = fit_share_cv([2, 2], [[0.11, 0.21], [0.16, 0.21]], offset=0.01)
    h = fit_share_cv([2, 2], [[0.10, 0.20], [0.15, 0.20]])
    assert g.cv == h.cv > 0


@pytest.mark.parametrize("flows,ends,match", [
    ([1, 1], [[0.1], [0.2]], "2 or more"),
    ([2], [[0.1, 0.2], [0.1, 0.2]], "flow counts"),
    ([3], [[0.1, 0.2]], "has 2 end times"),
    ([2], [[0.1, float("nan")]], "finite"),
])
def test_fit_share_cv_rejects_bad_measurements(flows, ends, match):
    with pytest.raises(CalibrationError, match=match):
        fit_share_cv(flows, ends)


def test_build_cluster_file_measures_sharing_from_per_flow_ends():
    cf, _ = build_cluster_file(_synthetic_ranks(share_cv=0.3), name="syn")
    assert cf.link.share_cv == {"in": pytest.approx(0.3, abs=0.06)}
    assert cf.measurements["sharing"]["in"]["runs"] == 60
    c = Cluster(**cf.cluster_kwargs())
    assert (c.share_cv_in, c.share_cv_out) == (cf.link.share_cv["in"], 0.0)
    # records without per-flow ends (older workers) give no sharing figure
    old, _ = build_cluster_file(_synthetic_ranks(), name="syn")
    assert old.link.share_cv is None and "sharing" not in old.measurements
    # --update: only the sharing figures change
    upd = with_sharing(old, _synthetic_ranks(share_cv=0.3))
    assert upd.link.share_cv == cf.link.share_cv
    assert upd.link.bandwidth == old.link.bandwidth and upd.cpu == old.cpu
    with pytest.raises(CalibrationError, match="concurrent-flow"):
        with_sharing(old, _synthetic_ranks())
