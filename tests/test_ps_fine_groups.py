"""The fine BSP parameter-server net with flow groups (issue #15): each layer's ``S`` pieces
of a worker carried as one flow per direction (``sgdnet.variants.parameter_server._grouped``)
against closed forms derived by hand and against the per-piece net it replaces
(``build_ps_net(..., flow_groups=False)``), which stays the oracle: the same step times,
worker by worker, on deterministic clusters where every layer is cut over all shards."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PS_ALPHA, PS_B, ps_cases, ps_topology, run_exact, toy3

from sgdnet import Cluster, Layer, ModelProfile, simulate, variants
from sgdnet.variants.parameter_server import build_ps_net

B, ALPHA = PS_B, PS_ALPHA
TOY = toy3()
ONE = ModelProfile("one", [Layer("a", 0.01, 0.02, 24e6)], batch_size=32, device="test",
                   source="hand-made for tests")


run = run_exact


def per_piece(model, cl: Cluster, **opts):
    return build_ps_net("per-piece", model, cl, synchronous=True, coarse=False,
                        flow_groups=False, **opts)


@pytest.mark.parametrize("n,shards", [(2, 2), (3, 2), (4, 4), (6, 3), (5, 8)])
def test_one_layer_period_is_the_closed_form(n, shards):
    # one layer: forward, backward, then n workers push M/S to each of S shards at once (on a
    # shard's downlink n flows share B, on a worker's uplink S flows share B: each flow at
    # min(B/n, B/S), so M max(n, S) / (S B)), the latency, the updates (u per piece, one CPU
    # per shard, in parallel), the pulls likewise
    M = ONE.grad_bytes
    u = 1e-4 + 2e-11 * M / shards
    cl = Cluster(workers=n, bandwidth=B, latency=ALPHA, ps_shards=shards, shard_min_bytes=0,
                 update_s_per_layer=1e-4, update_s_per_byte=2e-11)
    net = variants.build("sync-ps", ONE, cl, granularity="fine")
    assert net.meta.get("ps_form") == "flow-groups"
    period = ONE.forward_s + ONE.backward_s + 2 * (M * max(n, shards) / (shards * B) + ALPHA) + u
    assert run(net, n).throughput.mean == pytest.approx(n / period, rel=1e-9)


_topo = ps_topology
CASES = ps_cases()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("model", [TOY, "resnet18"], ids=["toy3", "resnet18"])
def test_same_step_times_as_the_per_piece_net(case, model):
    cl = Cluster(**CASES[case], shard_min_bytes=0)
    n, S = cl.workers, cl.ps_shards
    new = variants.build("sync-ps", model, cl, granularity="fine")
    ref = per_piece(model if isinstance(model, ModelProfile) else _folded(model), cl)
    assert new.meta.get("ps_form") == "flow-groups" and "ps_form" not in ref.meta
    comm = [t for t in new.transitions.values() if t.tags.get("kind") == "comm"]
    ref_comm = [t for t in ref.transitions.values() if t.tags.get("kind") == "comm"]
    assert len(comm) * S == len(ref_comm)
    a, b = run(ref, n, steps=12, warmup=4), run(new, n, steps=12, warmup=4)
    assert b.throughput.mean == pytest.approx(a.throughput.mean, rel=1e-12)
    # every step of every worker ends when it did
    np.testing.assert_allclose(b._raws[0].step_times, a._raws[0].step_times, rtol=1e-12)


@pytest.mark.parametrize("noise,rel", [({"compute_cv": 0.2}, 0.01),
                                       ({"compute_cv": 0.2, "comm_cv": 0.1}, 0.04)])
def test_noisy_clusters_stay_close_to_the_per_piece_net(noise, rel):
    # with noise a group's bytes have the CV of a sum of S pieces and a pull waits for the
    # slowest of its layer's updates (an approximation). With comm noise the per-piece net
    # waits for the slowest of a layer's S pieces and the group for their mean, so the
    # groups are optimistic: 2.5 % here (S=3, comm_cv=0.1)
    cl = Cluster(workers=6, bandwidth=B, latency=ALPHA, ps_shards=3, shard_min_bytes=0,
                 **noise)
    new = variants.build("sync-ps", TOY, cl, granularity="fine")
    a = simulate(per_piece(TOY, cl), steps=600, warmup=60, replications=4, seed=2,
                 parallel=False)
    b = simulate(new, steps=600, warmup=60, replications=4, seed=2, parallel=False)
    assert new.meta.get("ps_form") == "flow-groups"
    assert b.throughput.mean == pytest.approx(a.throughput.mean, rel=rel)
    assert b.throughput.mean >= a.throughput.mean * (1 - 0.01)


@pytest.mark.parametrize("kw,opts", [
    ({}, {}),  # the default shard_min_bytes keeps small layers whole on one shard
    ({"shard_min_bytes": 0, "ps_placement": "colocated"}, {}),
    ({"shard_min_bytes": 0, "incast": (1.0, 0.9, 0.8)}, {}),
    ({"shard_min_bytes": 0, "send_s_per_byte": 1e-11}, {}),
    ({"shard_min_bytes": 0}, {"discipline": "fifo"}),
    ({"shard_min_bytes": 0}, {"partition_bytes": 4e6}),
    ({"shard_min_bytes": 0}, {"priority": True, "discipline": "fifo"}),
    ({"shard_min_bytes": 0, "ps_shards": 1}, {}),
])
def test_other_clusters_keep_the_per_piece_net(kw, opts):
    cl = Cluster(**{"workers": 3, "bandwidth": B, "latency": ALPHA, "ps_shards": 2, **kw})
    net = variants.build("sync-ps", "resnet18", cl, granularity="fine", **opts)
    assert "ps_form" not in net.meta
    assert any(t.startswith("w0.push.l") and ".c" in t for t in net.transitions)


def test_async_variants_keep_the_per_piece_net():
    cl = Cluster(workers=3, bandwidth=B, latency=ALPHA, ps_shards=2, shard_min_bytes=0)
    for v, opts in (("async-ps", {}), ("ssp", {"staleness": 1})):
        net = variants.build(v, TOY, cl, granularity="fine", **opts)
        assert "ps_form" not in net.meta


def _folded(name: str) -> ModelProfile:
    from sgdnet.variants.inputs import resolve_model

    return resolve_model(name).with_step_costs_folded()
