"""variants.metrics against closed forms on deterministic nets, and option validation of the
Variants II builders."""

import numpy as np
import pytest

from sgdnet import Cluster, Layer, ModelProfile, SimulationError, VariantError, metrics, variants
from sgdnet.engine import simulate
from sgdnet.variants.parameter_server import build_ps_net
from sgdnet.workload import ring_allreduce_time

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6)],
                    batch_size=32)
TC = PROF.compute_s


def run(net, steps=400, warmup=40):
    return simulate(net, steps=steps, warmup=warmup, replications=2, seed=0, trace=True)


@pytest.fixture(scope="module")
def local_het():
    c = Cluster(workers=4, bandwidth="10Gbps", speeds=[1, 1, 0.5, 0.5])
    return c, run(variants.build("local-sgd", PROF, c, granularity="coarse", H=2))


def test_blocked_time_is_the_wait_for_the_slow_workers(local_het):
    # per round the fast workers compute H*Tc, the slow ones 2*H*Tc; everyone's own all-reduce
    # transfer is busy time, so fast workers are blocked H*Tc per round = Tc per step
    _, res = local_het
    blk = metrics.blocked_time(res)
    for w in (0, 1):
        assert blk[w].mean == pytest.approx(TC, rel=1e-9)
    for w in (2, 3):
        assert blk[w].mean == pytest.approx(0.0, abs=1e-12)
    frac = metrics.blocked_time(res, per="fraction")
    period = 2 * 2 * TC + ring_allreduce_time(PROF.grad_bytes, 4, 1.25e9, 50e-6)
    assert frac[0].mean == pytest.approx(2 * TC / period, rel=1e-9)


def test_step_time_percentiles_of_a_deterministic_local_loop(local_het):
    c, res = local_het
    t_ar = ring_allreduce_time(PROF.grad_bytes, 4, c.bandwidth, c.latency)
    pct = metrics.step_time_percentiles(res, q=(0, 50, 100))
    # slow worker: steps of 2 Tc, and the step after the averaging also waits T_AR
    assert pct[2]["p0_s"] == pytest.approx(2 * TC)
    assert pct[2]["p100_s"] == pytest.approx(2 * TC + t_ar)
    assert pct[0]["p100_s"] == pytest.approx(2 * 2 * TC + t_ar - TC)
    rows = metrics.worker_table(res)
    assert [r["worker"] for r in rows] == [0, 1, 2, 3] and "blocked_s_per_step" in rows[0]


@pytest.mark.parametrize("coarse", [True, False])
def test_staleness_bsp_is_zero_and_asp_counts_the_others(coarse):
    c = Cluster(workers=4, bandwidth="10Gbps")
    # FIFO NICs: the round-robin of updates below is the FIFO order of the PS link
    sync = metrics.staleness(run(build_ps_net("s", PROF, c, synchronous=True, coarse=coarse,
                                              discipline="fifo")))
    assert sync.size > 0 and np.all(sync == 0)
    asp = metrics.staleness(run(build_ps_net("a", PROF, c, synchronous=False, coarse=coarse,
                                             discipline="fifo")))
    assert asp.size > 0 and asp.max() <= 3
    if coarse:  # round-robin through one PS: every other worker's update lands in between
        assert np.all(asp == 3)
    p = metrics.staleness_percentiles(run(build_ps_net("a", PROF, c, synchronous=False,
                                                       coarse=True, discipline="fifo")), q=(50,))
    assert p["p50"] == 3 and p["max"] == 3


def test_metrics_need_a_trace_and_a_ps():
    c = Cluster(workers=2)
    res = simulate(variants.build("pipe-sgd", PROF, c, granularity="coarse"), steps=50,
                   warmup=10, replications=1, seed=0)
    with pytest.raises(SimulationError, match="trace=True"):
        metrics.blocked_time(res)
    res = simulate(variants.build("pipe-sgd", PROF, c, granularity="coarse"), steps=50,
                   warmup=10, replications=1, seed=0, trace=True)
    with pytest.raises(VariantError, match="kind='update'"):
        metrics.staleness(res)
    with pytest.raises(SimulationError, match="per='hour'"):
        metrics.blocked_time(res, per="hour")


@pytest.mark.parametrize("name, opts, match", [
    ("local-sgd", {"H": 0}, "option H=0"),
    ("local-sgd", {"sync": "gossip"}, "option sync='gossip'"),
    ("cocod", {"k": 1.5}, "option k=1.5"),
    ("cocod", {"balance": "speed"}, "option balance='speed'"),
    ("pipe-sgd", {"width": 0}, "option width=0"),
    ("backup", {"backups": 4}, "backups=4 must be < workers=4"),
    ("backup", {"late": "never"}, "option late='never'"),
    ("backup", {"late": "abort", "lanes": 0}, "option lanes=0"),
    ("dssp", {"s_lower": -1}, "option s_lower=-1"),
    ("dssp", {"r_max": "many"}, "option r_max='many'"),
    ("dssp", {"staleness": 3}, r"no option\(s\) \['staleness'\]"),
])
def test_bad_options_are_named(name, opts, match):
    with pytest.raises(VariantError, match=match):
        variants.build(name, PROF, Cluster(workers=4), granularity="coarse", **opts)


def test_backup_abort_needs_coarse():
    with pytest.raises(VariantError, match="late='abort' needs granularity='coarse'"):
        variants.build("backup", PROF, Cluster(workers=4), granularity="fine", late="abort")


@pytest.mark.parametrize("name", ["sync-ps", "async-ps"])
def test_step_time_percentiles_in_bulk_equal_the_per_worker_values(name):
    # sync-ps: every worker as many steps (one matrix reduction); async-ps with uneven speeds
    # and noise: per worker. Both must give numpy's per-worker mean and percentiles, bit for bit
    c = Cluster(workers=5, bandwidth="10Gbps", speeds=[1, 1, 0.7, 0.5, 0.9], compute_cv=0.2)
    res = simulate(variants.build(name, PROF, c), steps=200, warmup=20, replications=3, seed=4)
    q = (0, 25, 50, 90, 99.9, 100)
    got = metrics.step_time_percentiles(res, q=q)
    assert sorted(got) == metrics.workers_of(res) == list(range(5))
    sizes = set()
    for w, row in got.items():
        x = res.step_times(worker=w)
        sizes.add(x.size)
        assert row["n"] == x.size and row["mean_s"] == float(x.mean())
        for p in q:
            assert row[f"p{p:g}_s"] == float(np.percentile(x, p))
    assert (len(sizes) == 1) == (name == "sync-ps")  # both paths taken
