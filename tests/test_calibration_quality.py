"""The calibration reports its own quality (issue #37): repeats with 95 % intervals that cover
the truth at the nominal rate, a fit that drops a bad point instead of printing "latency 0",
a verdict and exit status 3 a script can act on, units that cannot be misread.

The synthetic records are generated here from parameters chosen here (token-bucket link
``rtt = 2 alpha + max(0, S - b) / B``, linear costs, multiplicative log-normal noise), not by
the code under test. Student-t quantiles are checked against NIST's table; tc's reading of
``64kb`` is tc(8)'s ("kb or k = Kilobytes", 1024) and is checked on the kernel when root.
"""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest

from sgdnet import Cluster
from sgdnet.errors import CalibrationError, TestbedError
from sgdnet.testbed.calibrate import (
    SWEEP_SIZES,
    build_cluster_file,
    calibration_jobs,
    combine_repeats,
    save_cluster_file,
    split_repeats,
    with_profile,
)
from sgdnet.testbed.commands import describe
from sgdnet.testbed.fit import (
    figure_intervals,
    fit_incast,
    fit_linear,
    fit_link,
    interval,
    judge_quality,
    t95,
)
from sgdnet.testbed.netns import parse_burst, tc_size
from sgdnet.testbed.quiet import advice
from sgdnet.workload.cluster_file import load_cluster_file

ALPHA, BW, BURST = 180e-6, 12.5e6, 64_000.0
SEND, RECV = 2e-9, 3e-9
RED0, RED1 = 1e-6, 1e-10
UPD0, UPD1 = 4e-6, 3e-10
COST_SIZES = [4096, 65536, 262144, 1 << 20, 4 << 20]


def _ln(rng: np.random.Generator, sigma: float, size: int | None = None):
    return rng.lognormal(0.0, sigma, size)


def _noisy_ranks(rng: np.random.Generator, *, sigma: float = 0.05, cpu_sigma: float = 0.1,
                 rep: int | None = None, ends: bool = False) -> list[dict]:
    """One repeat's records as the worker writes them, from the known parameters above with
    log-normal noise (median 1) on every timing; ids suffixed ``@rep`` when given; ``ends``:
    the incast runs also record per-flow completion times (uniformly spread below the last)."""
    sfx = "" if rep is None else f"@{rep}"
    sweep = {str(s): list((2 * ALPHA + max(0.0, s - BURST) / BW) * _ln(rng, sigma, 5))
             for s in SWEEP_SIZES}
    nb = 8 << 20
    streams = [{"bytes": nb, "rtt_s": (2 * ALPHA + (nb - BURST) / BW) * float(_ln(rng, 0.002)),
                "cpu_s": SEND * nb * float(_ln(rng, cpu_sigma))} for _ in range(3)]
    recv = [{"bytes": nb, "cpu_s": RECV * nb * float(_ln(rng, cpu_sigma))} for _ in range(3)]
    s = 1 << 20
    runs = [{"k": k, "bytes": k * s, "seconds": (ALPHA + (k * s - BURST) / BW)
             * float(_ln(rng, 0.005))} for k in (1, 2, 3) for _ in range(3)]
    if ends:
        for r in runs:
            r["ends"] = sorted([r["seconds"] * float(u) for u in rng.uniform(0.7, 1.0, r["k"])])
    cost = {"reduce_s": {str(v): (RED0 + RED1 * v) * float(_ln(rng, sigma)) for v in COST_SIZES},
            "update_s": {str(v): (UPD0 + UPD1 * v) * float(_ln(rng, sigma)) for v in COST_SIZES},
            "local_step_s": 2.5e-3 * float(_ln(rng, sigma)), "model": "tb-mlp", "layer_bytes": []}
    rank0 = {"rank": 0, "jobs": [
        {"kind": "p2p", "id": "p2p" + sfx, "p2p": {"0->1": {"sweep": sweep, "stream": streams}}},
        {"kind": "incast", "id": "incast-in" + sfx,
         "incast": {"direction": "in", "nbytes": s, "runs": runs}},
        {"kind": "costs", "id": "costs" + sfx, "costs": cost}]}
    rank1 = {"rank": 1, "jobs": [{"kind": "p2p", "id": "p2p" + sfx,
                                  "p2p": {"0->1": {"sweep": {}, "stream": recv}}}]}
    return [rank0, rank1, {"rank": 2, "jobs": []}, {"rank": 3, "jobs": []}]


TRUTH = {"link.latency": ALPHA, "link.bandwidth": BW, "link.burst": BURST,
         "cpu.send_s_per_byte": SEND, "cpu.recv_s_per_byte": RECV,
         "cpu.reduce_s_per_byte": RED1, "ps.update_s_per_byte": UPD1,
         "ps.update_s_per_tensor": UPD0}


def _binomial_band(n: int, p: float, alpha: float = 0.001) -> tuple[int, int]:
    """Smallest and largest count of successes in ``n`` trials of probability ``p`` that a
    two-sided test at level ``alpha`` accepts (exact binomial tails)."""
    pmf = [math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo = next(k for k in range(n + 1) if sum(pmf[:k + 1]) > alpha / 2)
    hi = next(k for k in range(n, -1, -1) if sum(pmf[k:]) > alpha / 2)
    return lo, hi


# --------------------------------------------------------------------------- intervals
def test_t95_matches_nist_table_and_its_large_df_expansion():
    # NIST/SEMATECH e-Handbook 1.3.6.7.2, upper 0.025 critical values
    nist = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 30: 2.042, 40: 2.021, 60: 2.000,
            100: 1.984}
    for df, v in nist.items():
        assert t95(df) == pytest.approx(v, abs=1.5e-3), df
    with pytest.raises(CalibrationError, match="df=0"):
        t95(0)


def test_interval_of_known_samples_and_one_sample():
    iv = interval([1.0, 2.0, 3.0])  # mean 2, sd 1
    # t with 2 degrees of freedom in closed form: t_p = (2p - 1) / sqrt(2 p (1 - p)) = 4.30265
    t2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)
    assert (iv.value, iv.n, iv.sd) == (2.0, 3, 1.0)
    assert (iv.lo, iv.hi) == (pytest.approx(2 - t2 / math.sqrt(3)),
                              pytest.approx(2 + t2 / math.sqrt(3)))
    one = interval([5.0])
    assert one.lo is None and one.hi is None and not one.covers(5.0)
    with pytest.raises(CalibrationError, match="finite"):
        interval([1.0, math.nan])


def test_fit_intervals_cover_the_truth_at_the_nominal_rate():
    """200 synthetic calibrations of 3 noisy repeats each, through the whole pipeline (records
    -> build_cluster_file per repeat -> combine_repeats): each figure's 95 % interval covers
    the known parameter in a count of calibrations that an exact binomial test at the 0.1 %
    level accepts for p = 0.95 (too narrow *and* too wide intervals fail)."""
    rng = np.random.default_rng(20261207)
    trials = 200
    covered = dict.fromkeys(TRUTH, 0)
    for _ in range(trials):
        cfs = [build_cluster_file(_noisy_ranks(rng), name="syn")[0] for _ in range(3)]
        figs = combine_repeats(cfs).calibration["figures"]
        for name, truth in TRUTH.items():
            lo, hi = figs[name]["ci95"]
            covered[name] += lo <= truth <= hi
    lo, hi = _binomial_band(trials, 0.95)
    assert (lo, hi) == (179, 198)
    for name, c in covered.items():
        assert lo <= c <= hi, (name, c, (lo, hi))


def test_one_noisy_4_byte_point_is_dropped_not_turned_into_zero_latency():
    """Issue #37: one 4-byte round trip 100 % high made the old fit print 'latency 0 us'."""
    sizes = list(SWEEP_SIZES)
    rtt = [2 * ALPHA + max(0.0, s - BURST) / BW for s in sizes]
    rtt[0] *= 2.0
    kept = fit_link(sizes, rtt, bandwidth=BW, reject=0.25)
    assert kept.dropped == (4.0,)
    assert kept.alpha / 2 == pytest.approx(ALPHA, rel=1e-3)
    assert any("dropped the 4-byte point" in n and "> 25%" in n for n in kept.notes)
    assert fit_link(sizes, rtt, bandwidth=BW).max_rel_residual > 0.25  # without: it stays
    # a clean sweep loses nothing
    clean = [2 * ALPHA + max(0.0, s - BURST) / BW for s in sizes]
    assert fit_link(sizes, clean, reject=0.25).dropped == ()
    # the linear cost fit likewise
    x = [float(v) for v in COST_SIZES] + [8e6]
    y = [UPD0 + UPD1 * v for v in x]
    y[1] *= 3
    f = fit_linear(x, y, "PS update", reject=0.25)
    assert f.dropped == (65536.0,) and f.slope == pytest.approx(UPD1, rel=1e-6)


def test_latency_below_resolution_is_an_upper_bound_never_a_measured_zero():
    block = figure_intervals({"link.latency": [0.0, 4e-6, 1e-6]}, latency_se=5e-6)
    e = block["link.latency"]
    assert e["below_resolution"] and e["upper_bound"] >= 1e-5
    lines = describe(_file_with(block, n=3))
    row = next(ln for ln in lines if "link.latency" in ln)
    assert "below resolution, < " in row and " 0 us" not in row
    assert any("below resolution" in w for w in judge_quality(block, n=3)["warnings"])
    # a clearly positive latency is reported as a value with its interval
    ok = figure_intervals({"link.latency": [2.0e-4, 2.1e-4, 1.9e-4]}, latency_se=5e-6)
    assert "below_resolution" not in ok["link.latency"]


def _file_with(block: dict, n: int):
    cf, _ = build_cluster_file(_noisy_ranks(np.random.default_rng(1)), name="syn")
    return cf.replace(calibration={"repeats": n, **judge_quality(block, n=n),
                                   "figures": block})


def test_judge_quality_names_wide_intervals_bad_fits_and_the_quiet_gate():
    good = figure_intervals({"link.bandwidth": [1.0e7, 1.01e7, 0.99e7],
                             "link.share_cv.in": [0.30, 0.32, 0.31]})
    assert judge_quality(good, n=3) == {"quality": "good", "problems": [], "warnings": []}
    wide = figure_intervals({"cpu.recv_s_per_byte": [1e-9, 3e-9, 2e-9],
                             "link.share_cv.out": [0.1, 0.4, 0.25]})
    v = judge_quality(wide, n=3)
    assert v["quality"] == "low"
    assert any(p.startswith("cpu.recv_s_per_byte: 95% interval") for p in v["problems"])
    assert any(p.startswith("link.share_cv.out") and "+-0.1" in p for p in v["problems"])
    bad_fit = figure_intervals({"ps.update_s_per_byte": [1e-10] * 3},
                               {"ps.update_s_per_byte": [0.1, 0.7, 0.2]})
    assert any("70% off" in p for p in judge_quality(bad_fit, n=3)["problems"])
    noisy = judge_quality(good, [{"id": "p2p@0", "noisy": True, "other_cores": 1.4},
                                 {"id": "costs@0", "noisy": False, "other_cores": 0.1}], n=3)
    assert noisy["quality"] == "low" and "1.40 cores during 1 of 2 jobs" in noisy["problems"][0]
    one = judge_quality(figure_intervals({"link.bandwidth": [1e7]}), n=1)
    assert one["quality"] == "unjudged" and "--repeats" in one["warnings"][0]


def test_quiet_gate_advice_says_what_to_do():
    msg = advice(1.3, 0.5, jobs=["p2p@0", "incast-in@0"],
                 top=[{"pid": 42, "name": "python", "cores": 1.1}])
    for what in ("1.30 cores", "threshold 0.5", "python (pid 42", "stop other jobs", "taskset",
                 "--repeats", "--quiet-threshold", "status 3"):
        assert what in msg, what


# --------------------------------------------------------------------------- repeats
def test_repeated_job_list_is_interleaved_and_split_back():
    jobs = calibration_jobs(3, repeats=2)
    assert [j["id"] for j in jobs] == ["p2p@0", "incast-in@0", "incast-out@0", "costs@0",
                                       "p2p@1", "incast-in@1", "incast-out@1", "costs@1",
                                       "profile"]
    assert [j["id"] for j in calibration_jobs(3)][:2] == ["p2p", "incast-in"]
    with pytest.raises(CalibrationError, match="repeats=0"):
        calibration_jobs(3, repeats=0)
    rng = np.random.default_rng(3)
    reps = [_noisy_ranks(rng, rep=r) for r in range(3)]
    ranks = [{"rank": i, "jobs": [j for rk in reps for j in rk[i]["jobs"]]} for i in range(4)]
    ranks[1]["jobs"].append({"kind": "profile", "id": "profile"})
    parts = split_repeats(ranks)
    assert len(parts) == 3
    assert [j["id"] for j in parts[0][0]["jobs"]] == ["p2p", "incast-in", "costs"]
    assert [j["id"] for j in parts[0][1]["jobs"]] == ["p2p", "profile"]
    assert [j["id"] for j in parts[2][1]["jobs"]] == ["p2p"]
    assert parts[1][0]["jobs"][2]["costs"] == reps[1][0]["jobs"][2]["costs"]
    single = _noisy_ranks(rng)
    assert split_repeats(single) == [single]


def test_combined_file_is_the_mean_and_loads_with_its_calibration_block(tmp_path):
    rng = np.random.default_rng(5)
    cfs = [build_cluster_file(_noisy_ranks(rng), name="syn")[0] for _ in range(3)]
    cf = combine_repeats(cfs)
    assert cf.link.latency == pytest.approx(np.mean([c.link.latency for c in cfs]))
    assert cf.cpu["recv_s_per_byte"] == pytest.approx(
        np.mean([c.cpu["recv_s_per_byte"] for c in cfs]))
    e = cf.calibration["figures"]["link.bandwidth"]
    assert e["n"] == 3 and e["ci95"][0] < e["value"] < e["ci95"][1]
    assert e["worst_rel_residual"] is not None
    path = save_cluster_file(cf, tmp_path / "c.yaml")
    back = load_cluster_file(path)
    assert back.calibration == json.loads(json.dumps(cf.calibration))
    assert Cluster.from_file(path).bandwidth == pytest.approx(cf.link.bandwidth)
    text = path.read_text()
    assert "# ps: the update cost of calibrate's own update function" in text
    assert "# local_step_s: calibrate's own model" in text


def test_profile_replaces_calibrates_own_step_and_update(tmp_path):
    from sgdnet.workload import ModelProfile

    prof = ModelProfile("mine", [{"name": "fc", "forward_s": 1e-3, "backward_s": 2e-3,
                                  "grad_bytes": 4e6}], batch_size=8, optimizer_s=2e-4)
    cf = combine_repeats([build_cluster_file(_noisy_ranks(np.random.default_rng(s)))[0]
                          for s in range(3)])
    mine = with_profile(cf, prof)
    assert mine.local_step_s == {"mine": pytest.approx(prof.step_s)}
    assert mine.ps["update_s_per_byte"] == pytest.approx(prof.update_s / 4e6)
    assert not any(k.startswith(("local_step_s.", "ps.")) for k in
                   mine.calibration["figures"])
    text = save_cluster_file(mine, tmp_path / "m.yaml").read_text()
    assert "calibrate's own" not in text.split("measurements:")[0]


def _write_records(d, reps):
    ranks = [{"rank": i, "jobs": [j for rk in reps for j in rk[i]["jobs"]]} for i in range(4)]
    for rk in ranks:
        (d / f"rank{rk['rank']}.json").write_text(json.dumps(rk))


def test_cli_exit_status_is_0_when_good_and_3_when_low_quality(tmp_path, capsys):
    from sgdnet.cli import main
    from sgdnet.cli_args import EXIT_LOW_QUALITY
    from sgdnet.testbed.commands import EXIT_LOW_QUALITY as TESTBED_LOW

    assert TESTBED_LOW == EXIT_LOW_QUALITY == 3
    assert EXIT_LOW_QUALITY not in (0, 1, 2, 130, 141)  # the other statuses of sgdnet

    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    rng = np.random.default_rng(11)
    _write_records(good, [_noisy_ranks(rng, sigma=0.01, cpu_sigma=0.01, rep=r)
                          for r in range(3)])
    _write_records(bad, [_noisy_ranks(rng, sigma=0.01, cpu_sigma=0.8, rep=r) for r in range(3)])
    out = tmp_path / "g.yaml"
    assert main(["calibrate", "--from-records", str(good), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("cluster file -> ") == 1
    assert "calibration quality: good" in text and "[" in text
    assert Cluster.from_file(out).latency == pytest.approx(ALPHA, rel=0.05)
    assert main(["calibrate", "--from-records", str(bad), "--out",
                 str(tmp_path / "b.yaml")]) == EXIT_LOW_QUALITY == 3
    text = capsys.readouterr().out
    assert "calibration quality: LOW (exit status 3)" in text
    assert "problem: cpu." in text
    assert load_cluster_file(tmp_path / "b.yaml").calibration["quality"] == "low"


# --------------------------------------------------------------------------- units
def test_incast_table_and_note_agree_when_goodput_does_not_fall():
    f = fit_incast([1, 2, 3], [0.95 * BW, 1.03 * BW, 1.02 * BW], BW)
    assert f.c == 0.0 and f.table == {1: 0.95, 2: 1.0, 3: 1.0}
    assert any("k = 2 (1.030), 3 (1.020)" in n and "written as 1" in n for n in f.notes)
    assert any("clamped to 0 (flat)" in n and "at most 1" in n for n in f.notes)
    flat = fit_incast([1, 2, 3], [1.01 * BW, 1.03 * BW, 1.02 * BW], BW)
    assert flat.table == {1: 1.0, 2: 1.0, 3: 1.0} and flat.c == 0.0


def test_burst_units_kb_is_1000_kib_is_tcs_kb_and_lowercase_kb_is_refused():
    assert parse_burst("64KB") == 64_000
    assert parse_burst("64KiB") == 65_536
    assert parse_burst(65536) == 65_536
    with pytest.raises(TestbedError, match=r"'64kb' is ambiguous.*65536 bytes.*8000 bytes"):
        parse_burst("64kb")
    with pytest.raises(TestbedError, match="64KiB"):
        parse_burst("64k")
    assert tc_size(65536.0) == "65536b" and tc_size(63999.6) == "64000b"


@pytest.mark.skipif(not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("tc")),
                    reason="needs root and tc")
def test_tc_receives_the_exact_burst_and_the_queue_option():
    """tc itself reports what the kernel holds: 64 KiB shows as '64Kb' (tc's kb = 1024),
    64 KB as '64000b'; the tbf latency is the --queue value."""
    from sgdnet.testbed.netns import EmulatedCluster

    with EmulatedCluster(1, rate="100Mbit/s", burst="64KiB", queue_latency="50ms") as c:
        shown = c.qdisc_stats()["h0.up"]
        assert "burst 64Kb" in shown and "lat 50ms" in shown
        c.shape("100Mbit/s", "64KB")
        assert "burst 64000b" in c.qdisc_stats()["h0.down"]
    with pytest.raises(TestbedError, match="queue"):
        EmulatedCluster(1, queue_latency=0)


def test_compare_says_which_figures_agree_within_their_intervals(tmp_path, capsys):
    from sgdnet.cli import main
    from sgdnet.testbed.commands import compare_calibrations

    base = combine_repeats([build_cluster_file(_noisy_ranks(np.random.default_rng(s)))[0]
                            for s in range(3)])
    figs = dict(base.calibration["figures"])
    bw = figs["link.bandwidth"]
    far = {**bw, "value": 2 * bw["value"], "ci95": [1.9 * bw["value"], 2.1 * bw["value"]]}
    other = base.replace(calibration={**base.calibration, "figures": {**figs,
                                                                       "link.bandwidth": far}})
    rows = {r["figure"]: r["overlap"] for r in compare_calibrations(base, other)}
    assert rows["link.bandwidth"] is False
    assert all(v for k, v in rows.items() if k != "link.bandwidth")
    a = save_cluster_file(base, tmp_path / "a.yaml")
    b = save_cluster_file(other, tmp_path / "b.yaml")
    assert main(["calibrate", "--compare", str(a), str(a)]) == 0
    assert main(["calibrate", "--compare", str(a), str(b)]) == 3
    out = capsys.readouterr().out
    assert "not: link.bandwidth" in out


def test_update_with_repeated_records_reports_only_the_sharing_figures(tmp_path, capsys):
    from sgdnet.cli import main

    rng = np.random.default_rng(13)
    first = combine_repeats([build_cluster_file(_noisy_ranks(rng))[0] for _ in range(3)])
    base = save_cluster_file(first, tmp_path / "base.yaml")
    d = tmp_path / "rec"
    d.mkdir()
    _write_records(d, [_noisy_ranks(rng, rep=r, ends=True) for r in range(3)])
    out = tmp_path / "u.yaml"
    assert main(["calibrate", "--from-records", str(d), "--update", str(base), "--out",
                 str(out)]) in (0, 3)
    cf = load_cluster_file(out)
    assert cf.calibration["repeats"] == 3
    figs = cf.calibration["figures"]
    assert "link.share_cv.in" in figs and figs["link.share_cv.in"]["n"] == 3
    assert cf.link.share_cv["in"] == pytest.approx(figs["link.share_cv.in"]["value"])
    assert figs["link.bandwidth"] == first.calibration["figures"]["link.bandwidth"]
    assert cf.link.bandwidth == load_cluster_file(base).link.bandwidth
    assert capsys.readouterr().out.count("cluster file -> ") == 1


def test_records_with_a_noisy_4_byte_round_trip_keep_the_latency():
    """End to end: every 4-byte round trip doubled (the point the old calibration subtracted
    from all the others) still gives the latency, with the drop noted."""
    rng = np.random.default_rng(17)
    ranks = _noisy_ranks(rng, sigma=0.01)
    sweep = ranks[0]["jobs"][0]["p2p"]["0->1"]["sweep"]
    sweep["4"] = [2 * x for x in sweep["4"]]
    cf, _ = build_cluster_file(ranks)
    assert cf.link.latency == pytest.approx(ALPHA, rel=0.05)
    assert cf.measurements["dropped"]["link_bytes"] == [4.0]
    assert any("dropped the 4-byte point" in n for n in cf.notes)
