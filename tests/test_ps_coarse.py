"""The coarse BSP parameter-server net with one flow per worker and direction
(:mod:`sgdnet.variants.ps_coarse`) against closed forms derived by hand and against the
per-piece net it replaces (:func:`sgdnet.variants.parameter_server.build_ps_net`), which stays
the oracle: same throughput, worker by worker, on deterministic clusters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import PS_ALPHA, PS_B, ps_cases, ps_topology, run_exact, toy3

from sgdnet import Cluster, simulate, variants
from sgdnet.variants import ps_coarse
from sgdnet.variants.parameter_server import build_ps_net

B, ALPHA = PS_B, PS_ALPHA
TOY = toy3()
TC = TOY.forward_s + TOY.backward_s
M = TOY.grad_bytes


run = run_exact


def old(cl: Cluster, **opts):
    """The per-piece coarse net (one flow per worker and shard and direction)."""
    return build_ps_net("old", TOY, cl, synchronous=True, coarse=True, **opts)


@pytest.mark.parametrize("n,shards", [(1, 1), (2, 1), (3, 2), (4, 4), (6, 3), (5, 8)])
def test_homogeneous_period_is_the_closed_form(n, shards):
    # n workers push M/S to each of S shards at once: on a shard's downlink n flows share B,
    # on a worker's uplink S flows share B, so each flow runs at min(B/n, B/S) and the push
    # phase takes (M/S) / min(B/n, B/S) = M max(n, S) / (S B), then the latency; the updates
    # (u per piece, one CPU per shard, in parallel); the pulls, the same by symmetry
    u = 1e-4 + 2e-11 * M / shards
    cl = Cluster(workers=n, bandwidth=B, latency=ALPHA, ps_shards=shards,
                 update_s_per_layer=1e-4, update_s_per_byte=2e-11)
    net = variants.build("sync-ps", TOY, cl, granularity="coarse")
    assert net.meta.get("ps_form") == "flow-groups"
    period = TC + 2 * (M * max(n, shards) / (shards * B) + ALPHA) + u
    assert run(net, n).throughput.mean == pytest.approx(n / period, rel=1e-9)


def test_slower_ps_nic_is_the_bottleneck():
    # the shards' NICs at B/4: n=4 flows into a shard downlink at B/16 each, the workers'
    # uplinks (S=2 flows at up to B/2) are not the bottleneck
    n, S, bps = 4, 2, B / 4
    cl = Cluster(workers=n, bandwidth=B, ps_bandwidth=bps, latency=ALPHA, ps_shards=S)
    net = variants.build("sync-ps", TOY, cl, granularity="coarse")
    period = TC + 2 * ((M / S) / (bps / n) + ALPHA)
    assert run(net, n).throughput.mean == pytest.approx(n / period, rel=1e-9)


_topo = ps_topology
CASES = ps_cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_throughput_as_the_per_piece_net(case):
    cl = Cluster(**CASES[case])
    n = cl.workers
    new = variants.build("sync-ps", TOY, cl, granularity="coarse")
    ref = old(cl)
    assert new.meta.get("ps_form") == "flow-groups"
    assert len(new.transitions) == 3 * n + cl.ps_shards + 2 < len(ref.transitions)
    a, b = run(ref, n), run(new, n)
    assert b.throughput.mean == pytest.approx(a.throughput.mean, rel=1e-12)
    pa, pb = a.throughput_by("worker"), b.throughput_by("worker")
    for w in range(n):
        assert pb[w].mean == pytest.approx(pa[w].mean, rel=1e-12)
    # every step of every worker ends when it did
    np.testing.assert_allclose(b._raws[0].step_times, a._raws[0].step_times, rtol=1e-12)


def test_noisy_compute_stays_close_to_the_per_piece_net():
    # with compute noise the pulls wait for the slowest shard's update (an approximation):
    # the rates agree to a fraction of a percent
    cl = Cluster(workers=6, bandwidth=B, latency=ALPHA, ps_shards=3, compute_cv=0.2)
    new = variants.build("sync-ps", TOY, cl, granularity="coarse")
    a = simulate(old(cl), steps=600, warmup=60, replications=4, seed=2, parallel=False)
    b = simulate(new, steps=600, warmup=60, replications=4, seed=2, parallel=False)
    assert b.throughput.mean == pytest.approx(a.throughput.mean, rel=0.01)


@pytest.mark.parametrize("kw,opts", [
    ({"ps_placement": "colocated"}, {}),
    ({"incast": (1.0, 0.9, 0.8)}, {}),
    ({"send_s_per_byte": 1e-11}, {}),
    ({}, {"discipline": "fifo"}),
    ({}, {"discipline": "ps"}),
])
def test_other_clusters_keep_the_per_piece_net(kw, opts):
    cl = Cluster(workers=3, bandwidth=B, latency=ALPHA, ps_shards=2, **kw)
    net = variants.build("sync-ps", TOY, cl, granularity="coarse", **opts)
    assert "ps_form" not in net.meta
    assert ps_coarse.build("x", TOY, cl, **opts) is None
    assert any(t.startswith("w0.push.") for t in net.transitions)


def test_a_flow_group_carries_all_shards_bytes():
    S = 4
    cl = Cluster(workers=3, bandwidth=B, latency=ALPHA, ps_shards=S)
    net = variants.build("sync-ps", TOY, cl, granularity="coarse")
    push = net.transitions["w1.push"]
    assert push.duration.mean == pytest.approx(M)
    assert set(push.resources) == {"w1.up", "ps.down"}
    assert net.resources["ps.down"].bandwidth == pytest.approx(S * B)
    assert not [r for r in net.resources.values() if r.tags.get("kind") == "connection"]
    assert sorted(r for r in net.resources if r.endswith(".cpu")) == \
        [f"ps{k}.cpu" for k in range(S)]
    assert math.isclose(net.transitions["ps.arrive"].duration.mean, ALPHA)
