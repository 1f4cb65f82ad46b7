"""predict() / scaling() and the variant registry: closed forms through the front door,
stochastic orderings of the PS schemes with CI-derived tolerances, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sgdnet
from sgdnet import (
    Cluster,
    ClusterError,
    Layer,
    ModelProfile,
    UnknownNameError,
    VariantError,
    variants,
)
from sgdnet.workload import ring_allreduce_time

B = 1.25e9
ALPHA = 50e-6
TOY = ModelProfile("toy3", [Layer("a", 0.004, 0.008, 8e6), Layer("b", 0.006, 0.012, 20e6),
                            Layer("c", 0.002, 0.004, 12e6)], batch_size=32, device="test",
                   source="hand-made for tests")
TC = TOY.forward_s + TOY.backward_s
M = TOY.grad_bytes
DET = dict(steps=20, warmup=3, replications=1, seed=0, parallel=False)


def period_ar(n):
    return TC + ring_allreduce_time(M, n, B, ALPHA)


def test_predict_closed_form_figures():
    n = 4
    p = sgdnet.predict("allreduce", TOY, Cluster(workers=n, bandwidth=B, latency=ALPHA),
                       granularity="coarse", **DET)
    per = period_ar(n)
    assert p.steps_per_s.mean == pytest.approx(n / per, rel=1e-9)
    assert p.iterations_per_s.mean == pytest.approx(1 / per, rel=1e-9)
    assert p.samples_per_s.mean == pytest.approx(n * TOY.batch_size / per, rel=1e-9)
    assert set(p.per_worker) == set(range(n))
    for f in p.per_worker.values():
        assert f.steps_per_s.mean == pytest.approx(1 / per, rel=1e-9)
        assert f.step_time_s["p50"] == pytest.approx(per, rel=1e-9)
        assert f.step_time_s["p99"] == pytest.approx(per, rel=1e-9)
    # compute is TC of every period on each GPU
    for w in range(n):
        assert p.utilization[f"w{w}.gpu"].mean == pytest.approx(TC / per, rel=1e-9)
    # steps counted per worker: 20 steps of each of the 4 workers after 3 each
    assert p.result.steps == 20 * n and p.result.warmup == 3 * n
    json.dumps(p.to_dict())


def test_scaling_speed_up_and_efficiency_follow_the_closed_form():
    pts = sgdnet.scaling("allreduce", TOY, Cluster(bandwidth=B, latency=ALPHA),
                         workers=[1, 2, 4, 8], granularity="coarse", **DET)
    assert [p.workers for p in pts] == [1, 2, 4, 8]
    for p in pts:
        su = p.workers * period_ar(1) / period_ar(p.workers)
        assert p.speed_up == pytest.approx(su, rel=1e-9)
        assert p.efficiency == pytest.approx(su / p.workers, rel=1e-9)
        json.dumps(p.to_dict())


def test_heterogeneous_batches_weight_samples_per_worker():
    # cocod balance="batch": per-worker batches proportional to speed; samples/s is the sum of
    # each worker's steps/s times its own batch, not steps/s times the profile's batch
    c = Cluster(workers=2, speeds=[1.0, 0.5], bandwidth=B, latency=ALPHA)
    p = sgdnet.predict("cocod", TOY, c, granularity="coarse", balance="batch", **DET)
    bs = p.meta["batch_sizes"]
    assert bs[0] > bs[1]
    want = sum(p.per_worker[w].steps_per_s.mean * bs[w] for w in range(2))
    assert p.samples_per_s.mean == pytest.approx(want, rel=1e-12)
    # lockstep with batches summing to n * 32: the same samples/s as equal batches would give,
    # but from fewer, larger steps of the fast worker's batch
    assert sum(bs) == 2 * TOY.batch_size


@pytest.fixture(scope="module")
def ps_family():
    """BSP, SSP(s) and ASP on a heterogeneous noisy 4-worker cluster (coarse nets)."""
    c = Cluster(workers=4, speeds=[1.0, 0.8, 0.6, 0.4], bandwidth=B, latency=ALPHA,
                compute_cv=0.5, comm_cv=0.2)
    kw = dict(granularity="coarse", steps=150, warmup=10, replications=6, seed=11)
    out = {"sync": sgdnet.predict("sync-ps", TOY, c, **kw)}
    for s in (0, 1, 3, 8):
        out[s] = sgdnet.predict("ssp", TOY, c, staleness=s, **kw)
    out["async"] = sgdnet.predict("async-ps", TOY, c, **kw)
    return out


def test_ssp_throughput_is_monotone_in_staleness_between_bsp_and_asp(ps_family):
    order = ["sync", 0, 1, 3, 8, "async"]
    est = [ps_family[k].steps_per_s for k in order]
    for a, b, ka, kb in zip(est, est[1:], order, order[1:]):
        # allowed to tie within noise: b may fall below a by at most both CI half-widths
        assert b.mean >= a.mean - (a.half_width() + b.half_width()), (ka, kb)
    # and the whole range is a real effect, far outside the noise
    assert est[-1].mean - est[0].mean > 5 * (est[0].half_width() + est[-1].half_width())


def test_asynchrony_lets_fast_workers_step_more_often(ps_family):
    asp = ps_family["async"].per_worker
    bsp = ps_family["sync"].per_worker
    fast, slow = asp[0].steps_per_s, asp[3].steps_per_s
    assert fast.mean - slow.mean > 5 * (fast.half_width() + slow.half_width())
    rates = [bsp[w].steps_per_s.mean for w in range(4)]
    assert max(rates) == pytest.approx(min(rates), rel=0.01)  # lockstep


def test_ssp_gate_and_places_give_the_same_run():
    # the two nets name their transitions alike, so under one seed they draw the same numbers
    # (sgdnet.engine.rng): equivalent staleness rules must then give the very same trajectories
    c = Cluster(workers=3, speeds=[1.0, 0.7, 0.5], bandwidth=B, latency=ALPHA,
                compute_cv=0.4, comm_cv=0.3)
    kw = dict(granularity="coarse", steps=100, warmup=10, replications=8, staleness=1)
    a = sgdnet.predict("ssp", TOY, c, impl="gate", seed=1, **kw).result
    b = sgdnet.predict("ssp", TOY, c, impl="places", seed=1, **kw).result
    assert not a.deterministic
    np.testing.assert_array_equal(a.throughput.samples, b.throughput.samples)
    for rep in range(8):
        ta, wa = a.step_completion_times(rep)
        tb, wb = b.step_completion_times(rep)
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(np.asarray(a.transition_names)[wa], np.asarray(b.transition_names)[wb])
    # and a staleness bound that differs does change the run
    s3 = sgdnet.predict("ssp", TOY, c, impl="places", seed=1, **{**kw, "staleness": 3}).result
    assert not np.array_equal(a.throughput.samples, s3.throughput.samples)


def test_same_seed_same_prediction_and_replay_of_one_replication():
    c = Cluster(workers=2, bandwidth=B, compute_cv=0.3)
    kw = dict(granularity="coarse", steps=30, warmup=3, replications=3)
    a = sgdnet.predict("sync-ps", TOY, c, seed=5, **kw)
    b = sgdnet.predict("sync-ps", TOY, c, seed=5, **kw)
    assert np.array_equal(a.steps_per_s.samples, b.steps_per_s.samples)
    net = variants.build("sync-ps", TOY, c, granularity="coarse")
    one = sgdnet.simulate(net, steps=60, warmup=6, seeds=[a.result.seeds[1]])
    assert one.throughput.samples[0] == a.steps_per_s.samples[1]


@pytest.mark.parametrize("variant", ["sync-ps", "async-ps", "ssp", "allreduce"])
def test_every_option_combination_builds_a_valid_net(variant):
    spec = variants.get(variant)
    c = Cluster(workers=3, bandwidth=B, ps_shards=2)
    combos = [{}, {"max_layers": 2}, {"discipline": "ps"}, {"discipline": "fifo"}]
    if variant != "allreduce":
        combos += [{"shards": 3, "placement": "colocated"}, {"priority": True, "discipline": "fifo"},
                   {"partition_bytes": "4MB"}, {"shard_policy": "least_loaded"}]
    else:
        combos += [{"algorithm": "tree"}, {"bucket_bytes": 0}, {"overlap": False}]
    for opts in combos:
        for g in ("fine", "coarse"):
            net = spec.build(TOY, c, g, **opts)  # validates
            assert net.meta["variant"] == variant and net.meta["granularity"] == g
            assert len(net.step_transitions()) == 3


def test_partition_bytes_cuts_tensors_into_chunks():
    net = variants.build("sync-ps", TOY, Cluster(workers=2), partition_bytes="4MB")
    plan = net.meta["ps_plan"]
    assert [len(p) for p in plan] == [2, 5, 3]  # 8, 20, 12 MB in 4 MB chunks
    assert all(b <= 4e6 + 1e-6 for p in plan for _, b in p)


# ------------------------------------------------------------------------ bad input
def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="known variants are .*sync-ps"):
        sgdnet.predict("sync-pss", TOY, Cluster())


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(VariantError, match=r"no option\(s\) \['staleness'\].*shards"):
        variants.build("sync-ps", TOY, Cluster(), staleness=3)


@pytest.mark.parametrize("opts, needle", [
    ({"staleness": -1}, "staleness=-1"),
    ({"impl": "magic"}, "impl='magic'"),
    ({"discipline": "lifo"}, "discipline='lifo'"),
    ({"partition_bytes": "0MB"}, "partition_bytes"),
])
def test_bad_option_values_name_the_option_and_the_valid_values(opts, needle):
    with pytest.raises(VariantError, match=needle):
        variants.build("ssp", TOY, Cluster(), **opts)


def test_priority_with_processor_sharing_is_refused():
    with pytest.raises(VariantError, match="priority=True needs discipline='fifo'"):
        variants.build("sync-ps", TOY, Cluster(), priority=True, discipline="ps")


@pytest.mark.parametrize("kw, needle", [
    ({"granularity": "medium"}, "granularity='medium'"),
    ({"steps": 0}, "steps=0"),
    ({"replications": 1.5}, "replications=1.5"),
    ({"warmup": -2}, "warmup=-2"),
])
def test_bad_predict_arguments(kw, needle):
    with pytest.raises(VariantError, match=needle):
        sgdnet.predict("allreduce", TOY, Cluster(), **kw)


def test_unknown_model_and_bad_cluster():
    with pytest.raises(UnknownNameError, match="resnet5"):
        sgdnet.predict("allreduce", "resnet5", Cluster())
    with pytest.raises(ClusterError, match="not a cluster"):
        sgdnet.predict("allreduce", TOY, 4)


def test_scaling_refuses_fixed_speeds_and_bad_worker_lists():
    with pytest.raises(ClusterError, match="speeds"):
        sgdnet.scaling("allreduce", TOY, Cluster(workers=2, speeds=[1, 1]), workers=[1, 2])
    with pytest.raises(ClusterError, match="workers="):
        sgdnet.scaling("allreduce", TOY, Cluster(), workers=[0, 2])


def test_predict_pauses_the_collector_only_while_it_runs():
    # predict_net pauses the cyclic GC from the build to the end of the simulation (#15):
    # the collector is on again afterwards, after a failure too, and off stays off
    import gc

    cl = Cluster(workers=2)
    seen = []
    assert gc.isenabled()
    p = sgdnet.predict("allreduce", "resnet18", cl, granularity="coarse", steps=3, replications=1,
                parallel=False)
    assert p.samples_per_s.mean > 0 and gc.isenabled()
    with pytest.raises(VariantError):
        sgdnet.predict("allreduce", "resnet18", cl, granularity="coarse", steps=3, replications=1,
                parallel=False, algorithm="nope")
    assert gc.isenabled()
    gc.disable()
    try:
        sgdnet.predict("allreduce", "resnet18", cl, granularity="coarse", steps=3, replications=1,
                parallel=False)
        seen.append(gc.isenabled())
    finally:
        gc.enable()
    assert seen == [False]
