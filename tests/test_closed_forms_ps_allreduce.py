"""Variants I against exact answers: ring/tree all-reduce closed forms, the PS NIC bound of
async-ps, BSP paced by its slowest worker, fine = coarse on one layer, fine >= coarse with
overlap, and simulate = max-plus cycle time where the net is an event graph.

All cases are deterministic and homogeneous unless stated, so the expected figures are derived
by hand from the model's definition (DESIGN.md, variants docstrings), never taken from the code.
"""

from __future__ import annotations

import functools
import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, analysis, simulate, variants
from sgdnet.variants.allreduce import without_resources
from sgdnet.workload import ring_allreduce_time, tree_allreduce_time

#: closed forms of the FIFO NIC model (flows: tests/test_fabric_flows.py)
build = functools.partial(variants.build, discipline="fifo")

B = 1.25e9  # 10 Gbit/s in bytes/s
ALPHA = 50e-6
#: Three layers: forward/backward seconds and gradient bytes chosen so that communication and
#: compute are of the same order (so overlap matters).
TOY = ModelProfile("toy3", [Layer("a", 0.004, 0.008, 8e6), Layer("b", 0.006, 0.012, 20e6),
                            Layer("c", 0.002, 0.004, 12e6)], batch_size=32, device="test",
                   source="hand-made for tests")
ONE = ModelProfile("toy1", [Layer("only", 0.01, 0.02, 40e6)], batch_size=16, device="test",
                   source="hand-made for tests")
TC = TOY.forward_s + TOY.backward_s
M = TOY.grad_bytes


def run(net, steps=40, warmup=10):
    """Deterministic nets: one replication is exact."""
    return simulate(net, steps=steps, warmup=warmup, replications=1, seed=0, parallel=False)


def cluster(n, **kw):
    return Cluster(workers=n, bandwidth=B, latency=ALPHA, **kw)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_ring_allreduce_one_bucket_no_overlap(n, granularity):
    # step = T_fwd+bwd + 2(n-1)(alpha + M/(nB)); every worker steps once per period
    net = build("allreduce", TOY, cluster(n), granularity=granularity,
                         bucket_bytes=math.inf, overlap=False)
    period = TC + 2 * (n - 1) * (ALPHA + M / (n * B))
    assert run(net, steps=20 * n, warmup=4 * n).throughput.mean == pytest.approx(
        n / period, rel=1e-9)
    assert period == pytest.approx(TC + ring_allreduce_time(M, n, B, ALPHA), rel=1e-12)


@pytest.mark.parametrize("n", [2, 4])
def test_tree_allreduce_matches_store_and_forward_closed_form(n):
    # a binary tree of depth d = ceil(log2 n): 2d hops of (alpha + M/B) for n <= 4
    d = math.ceil(math.log2(n))
    period = TC + 2 * d * (ALPHA + M / B)
    for g in ("fine", "coarse"):
        net = build("allreduce", TOY, cluster(n), granularity=g, algorithm="tree",
                             bucket_bytes=math.inf, overlap=False)
        assert run(net, steps=10 * n, warmup=2 * n).throughput.mean == pytest.approx(
            n / period, rel=1e-9), g
    assert period == pytest.approx(TC + tree_allreduce_time(M, n, B, ALPHA), rel=1e-12)


def test_tree_on_eight_workers_is_no_faster_than_the_optimistic_closed_form():
    n = 8
    net = build("allreduce", TOY, cluster(n), algorithm="tree", bucket_bytes=math.inf,
                         overlap=False)
    bound = n / (TC + tree_allreduce_time(M, n, B, ALPHA))
    assert run(net, steps=80, warmup=16).throughput.mean <= bound * (1 + 1e-12)


@pytest.mark.parametrize("bucket_bytes", [0, 15e6, 25e6])
@pytest.mark.parametrize("n", [2, 4])
def test_bucketed_overlapping_allreduce_equals_cycle_time_and_beats_no_overlap(n, bucket_bytes):
    net = build("allreduce", TOY, cluster(n), bucket_bytes=bucket_bytes, overlap=True)
    sim = run(net, steps=30 * n, warmup=6 * n).throughput.mean
    # no update cost: each GPU and each link is used by one chain at a time, so removing the
    # resources changes nothing and the net is an event graph with an exact cycle time
    ct = analysis.cycle_time(without_resources(net))
    assert sim == pytest.approx(ct.steps_per_s, rel=1e-9)
    no_overlap = n / (TC + ring_allreduce_time(M, n, B, ALPHA))
    assert sim >= no_overlap * (1 - 1e-12)


def test_overlap_hides_communication_behind_backward():
    # one bucket per layer: the last layer's all-reduce runs while layers b, a go backward, so the
    # step is strictly shorter than compute + all communication
    n = 4
    net = build("allreduce", TOY, cluster(n), bucket_bytes=0, overlap=True)
    sim = run(net, steps=60, warmup=12).throughput.mean
    serial = n / (TC + sum(ring_allreduce_time(la.grad_bytes, n, B, ALPHA) for la in TOY.layers))
    assert sim > serial * 1.01


@pytest.mark.parametrize("variant", ["sync-ps", "async-ps", "ssp", "allreduce"])
@pytest.mark.parametrize("n", [1, 3])
def test_fine_equals_coarse_for_a_single_layer_model(variant, n):
    c = cluster(n, update_s_per_byte=1e-11)
    fine = run(build(variant, ONE, c, granularity="fine"), steps=20 * n, warmup=5 * n)
    coarse = run(build(variant, ONE, c, granularity="coarse"), steps=20 * n,
                 warmup=5 * n)
    assert fine.throughput.mean == pytest.approx(coarse.throughput.mean, rel=1e-9)


@pytest.mark.parametrize("variant", ["sync-ps", "async-ps", "allreduce"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_fine_is_at_least_coarse_when_layers_overlap(variant, n):
    # Fine nets overlap a layer's transfer with the backward of the layers below it. For the
    # PS variants the pulls are given P3 priority (layer 0 first): with FIFO links the
    # layer-interleaved pulls of several workers can make every worker wait for its last
    # piece, which is a real effect of FIFO scheduling, not something coarse nets can show.
    c = cluster(n)
    kw = {} if variant == "allreduce" else {"priority": True}
    fine = run(build(variant, TOY, c, granularity="fine", **kw), steps=40 * n,
               warmup=10 * n)
    coarse = run(build(variant, TOY, c, granularity="coarse"), steps=40 * n,
                 warmup=10 * n)
    assert fine.throughput.mean >= coarse.throughput.mean * (1 - 1e-12)
    if n > 1 or variant != "allreduce":  # something to overlap with
        if not (variant == "async-ps" and n == 4):  # both at the PS NIC bound B/M
            assert fine.throughput.mean > coarse.throughput.mean * (1 + 1e-6)


def test_sync_ps_single_worker_closed_form():
    # one worker, dedicated PS, coarse: compute, push (link M/B then latency), update u,
    # pull (link then latency); nothing overlaps
    u_b = 2e-11
    c = cluster(1, update_s_per_byte=u_b, update_s_per_layer=1e-4)
    net = build("sync-ps", TOY, c, granularity="coarse")
    period = TC + 2 * (M / B + ALPHA) + (u_b * M + 1e-4)
    assert run(net, steps=20, warmup=3).throughput.mean == pytest.approx(1 / period, rel=1e-9)


def test_sync_ps_runs_at_the_pace_of_its_slowest_worker():
    # worker 3 is 4x slower. Coarse net: the fast workers' pushes are done long before the slow
    # one's (their NIC and the PS downlink are free again), so a round is: slow compute, its
    # push (M/B + alpha), then 4 pulls queued FIFO on the PS uplink at the same instant, served
    # in worker order, the slow worker's last (4 M/B + alpha).
    n, slow = 4, 0.25
    net = build("sync-ps", TOY, cluster(n, speeds=[1, 1, 1, slow]),
                         granularity="coarse")
    res = run(net, steps=40 * n, warmup=8 * n)
    period = TC / slow + M / B + ALPHA + n * M / B + ALPHA
    assert res.throughput.mean == pytest.approx(n / period, rel=1e-9)
    per = res.throughput_by("worker")
    for w in range(n):  # lockstep: everybody at the slow worker's pace
        assert per[w].mean == pytest.approx(1 / period, rel=1e-9)


def test_async_ps_grows_with_workers_and_saturates_at_the_ps_nic():
    # each step pushes M bytes into the PS downlink and pulls M out of its uplink, so total
    # throughput <= B/M; with compute TC ~ 3 M/B the NIC saturates beyond ~4 workers
    one = ModelProfile("toy1s", [Layer("x", 0.02, 0.04, 25e6)], batch_size=8, device="test",
                       source="hand-made")
    bound = B / one.grad_bytes
    prev = 0.0
    thr = {}
    for n in (1, 2, 4, 8, 16):
        net = build("async-ps", one, cluster(n), granularity="coarse")
        thr[n] = run(net, steps=30 * n, warmup=10 * n).throughput.mean
        assert thr[n] >= prev * (1 - 1e-12)
        assert thr[n] <= bound * (1 + 1e-9)
        prev = thr[n]
    assert thr[2] == pytest.approx(2 * thr[1], rel=1e-9)  # far from the bound: linear
    assert thr[16] == pytest.approx(bound, rel=1e-6)  # saturated: the PS NIC's rate


def test_ssp_gate_and_credit_places_agree_exactly_when_deterministic():
    c = cluster(3, speeds=[1.0, 0.6, 0.35])
    for s in (0, 1, 3):
        a = run(build("ssp", TOY, c, staleness=s, impl="gate"), steps=90, warmup=15)
        b = run(build("ssp", TOY, c, staleness=s, impl="places"), steps=90, warmup=15)
        assert a.throughput.mean == pytest.approx(b.throughput.mean, rel=1e-12), s
        for w in range(3):
            assert a.firings(f"w{w}.bwd0") == pytest.approx(b.firings(f"w{w}.bwd0")), (s, w)


def test_ssp_bounds_the_lead_of_the_fastest_worker():
    # the fast worker can be at most s steps ahead of the slowest at any start: over a long
    # run, step counts differ by at most s + 1 (one step in flight)
    c = cluster(2, speeds=[1.0, 0.3])
    s = 2
    res = run(build("ssp", TOY, c, staleness=s, granularity="coarse"), steps=200,
              warmup=0)
    f = [int(res.firings(f"w{w}.compute")[0]) for w in range(2)]
    assert f[0] - f[1] <= s + 1
    # and it does use its allowance: asynchronous, not lockstep (the slow worker paces both)
    assert f[0] > f[1]


def test_ssp_is_lockstep_with_staleness_zero_and_async_for_large_staleness():
    c = cluster(3, speeds=[1.0, 0.5, 0.8])
    asp = run(build("async-ps", TOY, c, granularity="coarse"), steps=300, warmup=30)
    big = run(build("ssp", TOY, c, staleness=10_000, granularity="coarse"), steps=300,
              warmup=30)
    assert big.throughput.mean == pytest.approx(asp.throughput.mean, rel=1e-12)
    zero = run(build("ssp", TOY, c, staleness=0, granularity="coarse"), steps=300,
               warmup=30)
    per = zero.throughput_by("worker")
    rates = [per[w].mean for w in range(3)]
    assert max(rates) == pytest.approx(min(rates), rel=0.02)  # within one step in 100


def test_sync_ps_fifo_links_beat_fair_sharing_by_one_transfer():
    # two workers, coarse. FIFO: the first pull ends M/B before the second, so worker 0's next
    # push is done by the time worker 1's starts: period TC + 3 M/B + 2 alpha. Processor
    # sharing: both pushes (and pulls) progress at half rate and end together: TC + 4 M/B + 2 alpha
    for disc, k in (("fifo", 3), ("ps", 4)):
        net = build("sync-ps", TOY, cluster(2), granularity="coarse", discipline=disc)
        period = TC + k * M / B + 2 * ALPHA
        assert run(net, steps=60, warmup=10).throughput.mean == pytest.approx(2 / period,
                                                                              rel=1e-9), disc


def test_two_dedicated_shards_pipeline_push_and_pull():
    # one worker, the model split evenly over two shards (M > shard_min_bytes). The two pushes
    # share the worker's uplink (M/2B each, back to back); shard 0's pull starts as soon as its
    # half arrived, so the second pull ends at 3M/2B + 2 alpha after the compute
    net = build("sync-ps", TOY, cluster(1), granularity="coarse", shards=2)
    period = TC + 1.5 * M / B + 2 * ALPHA
    assert run(net, steps=30, warmup=5).throughput.mean == pytest.approx(1 / period, rel=1e-9)


def test_colocated_shards_halve_the_traffic():
    # two workers, shard k on worker k's host: each worker sends only the remote half, both
    # directions in parallel on disjoint NICs, and keeps the local half on the host
    net = build("sync-ps", TOY, cluster(2), granularity="coarse", shards=2,
                         placement="colocated")
    period = TC + 2 * (M / (2 * B) + ALPHA)
    assert run(net, steps=40, warmup=8).throughput.mean == pytest.approx(2 / period, rel=1e-9)
