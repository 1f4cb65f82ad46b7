"""Per-node aggregation of the parameter-server variants (``aggregation="node"``, issue #36,
:mod:`sgdnet.variants.ps_aggregate`) against closed forms derived by hand:

* bytes per NIC per step: a node's NICs carry the model ``M`` up and down once per step
  (``"scatter"``: ``M / nics`` per NIC), against ``g M / nics`` per NIC without aggregation;
  the intra-node links carry the local reduce's bytes (``(g-1) M`` into the leaders and out of
  them for ``"device"``, ``(g-1) M / g`` per GPU and direction per phase for ``"scatter"``);
  counted on the built net (every transfer fires once per step);
* the step time of deterministic NIC-bound cases, fine and coarse, sync and async;
* on nodes of one GPU, aggregation changes nothing (the per-GPU net is the oracle);
* bad values raise ``VariantError`` naming the value and the fix.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from conftest import run_exact, toy3

from sgdnet import Cluster, Layer, ModelProfile, Topology, VariantError, variants
from sgdnet.variants.parameter_server import build_ps_net
from sgdnet.variants.ps_aggregate import node_parts

B = 1.25e9        # NIC, bytes/s (10 Gbit/s)
BI = 10 * B       # NVLink per GPU and direction
ALPHA, ALPHA_I = 20e-6, 3e-6
TOY = toy3()      # layers of 8, 20 and 12 MB: M = 40 MB
M = TOY.grad_bytes
PS_VARIANTS = ["sync-ps", "async-ps", "ssp", "dssp"]


def topo(g: int = 4, nics: int = 1, **kw) -> Topology:
    return Topology(gpus_per_node=g, nics_per_node=nics, nic_bandwidth=B, intra_bandwidth=BI,
                    intra_latency=ALPHA_I, **kw)


def cluster(nodes: int = 2, g: int = 4, nics: int = 1, shards: int = 1, **kw) -> Cluster:
    t = kw.pop("topology", None) or topo(g, nics)
    return Cluster(workers=nodes * g, latency=ALPHA, ps_shards=shards, topology=t, **kw)


def link_bytes(net) -> dict[str, float]:
    """Bytes that cross each link per step: the bytes of every transfer (deterministic, so its
    duration) on every link of its path (each transfer fires once per step)."""
    out: dict[str, float] = defaultdict(float)
    for t in net.transitions.values():
        if t.tags.get("stage") != "link":
            continue
        for r in t.resources:
            if net.resources[r].discipline == "flow":
                out[r] += t.duration.mean
    return out


def nic(node: int, j: int, d: str) -> str:
    return f"n{node}.nic{j}.{d}"


# ---------------------------------------------------------------- bytes per NIC per step
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
@pytest.mark.parametrize("local_reduce", ["device", "root", "scatter"])
def test_each_node_sends_and_receives_the_model_once_per_step(granularity, local_reduce):
    cl = cluster(nodes=3, g=4, nics=2, shards=2)
    agg = link_bytes(variants.build("sync-ps", TOY, cl, granularity, aggregation="node",
                                    local_reduce=local_reduce))
    plain = link_bytes(variants.build("sync-ps", TOY, cl, granularity))
    for m in range(3):
        for d in ("up", "down"):
            total = agg[nic(m, 0, d)] + agg[nic(m, 1, d)]
            assert total == pytest.approx(M, rel=1e-12)
            # without aggregation each NIC carries its g / nics = 2 GPUs' copies
            for j in (0, 1):
                assert plain[nic(m, j, d)] == pytest.approx(2 * M, rel=1e-12)
            if local_reduce == "scatter":  # every GPU pushes 1/g: every NIC carries M / nics
                assert agg[nic(m, 0, d)] == pytest.approx(M / 2, rel=1e-12)
            if local_reduce == "root":  # the first GPU, on NIC 0, pushes everything
                assert agg[nic(m, 0, d)] == pytest.approx(M, rel=1e-12)
                assert agg.get(nic(m, 1, d), 0.0) == 0.0
    # the dedicated shards' NICs take one copy per node: N M in all, M / S each, against one
    # per GPU (the per-GPU net may carry the shards' NICs as one merged link, ps_coarse)
    for k in (0, 1):
        assert agg[f"ps{k}.down"] == pytest.approx(3 * M / 2, rel=1e-12)
    ps_in = sum(v for r, v in plain.items() if r.startswith("ps") and r.endswith(".down"))
    assert ps_in == pytest.approx(12 * M, rel=1e-12)


def test_device_leaders_go_round_robin_over_the_gpus_as_tensorflow_does():
    # TensorFlow's distributed_replicated sums variable i on GPU i % num_gpus. The plan of the
    # toy on 2 shards: every layer (8, 20, 12 MB, all above shard_min_bytes = 1 MB) in two
    # halves, pieces q = 0..5 -> local ranks 0 1 2 3 0 1; ranks 0-1 use NIC 0, 2-3 NIC 1, so
    # NIC 0 carries 4 + 4 + 6 + 6 = 20 MB and NIC 1 10 + 10 = 20 MB
    cl = cluster(nodes=2, g=4, nics=2, shards=2)
    net = variants.build("sync-ps", TOY, cl, aggregation="node")
    assert [j for row in net.meta["ps_aggregation"]["parts"] for p in row for j, _ in p] == \
        [0, 1, 2, 3, 0, 1]
    got = link_bytes(net)
    for m in range(2):
        assert got[nic(m, 0, "up")] == pytest.approx(20e6, rel=1e-12)
        assert got[nic(m, 1, "up")] == pytest.approx(20e6, rel=1e-12)
    # on one shard: pieces 0, 1, 2 (the whole layers) on ranks 0, 1, 2: NIC 0 8 + 20 MB
    got = link_bytes(variants.build("sync-ps", TOY, cluster(nodes=2, g=4, nics=2),
                                    aggregation="node"))
    assert got[nic(0, 0, "up")] == pytest.approx(28e6, rel=1e-12)
    assert got[nic(0, 1, "up")] == pytest.approx(12e6, rel=1e-12)


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_intra_node_links_carry_the_local_reduce_and_broadcast(granularity):
    g, cl = 4, cluster(nodes=2, g=4, nics=2, shards=2)

    def nvl(m, r, d):
        return f"n{m}.g{r}.nvl.{d}"

    # "scatter": a reduce-scatter and an all-gather ring, each (g-1) M / g out of and into
    # every GPU
    got = link_bytes(variants.build("sync-ps", TOY, cl, granularity, aggregation="node",
                                    local_reduce="scatter"))
    for m in range(2):
        for r in range(g):
            for d in ("up", "down"):
                assert got[nvl(m, r, d)] == pytest.approx(2 * (g - 1) * M / g, rel=1e-12)
    # "root": every other GPU sends M to the root and receives M back; the root takes
    # (g-1) M in and sends (g-1) M out
    got = link_bytes(variants.build("sync-ps", TOY, cl, granularity, aggregation="node",
                                    local_reduce="root"))
    for m in range(2):
        assert got[nvl(m, 0, "down")] == pytest.approx((g - 1) * M, rel=1e-12)
        assert got[nvl(m, 0, "up")] == pytest.approx((g - 1) * M, rel=1e-12)
        for r in range(1, g):
            assert got[nvl(m, r, "up")] == pytest.approx(M, rel=1e-12)
            assert got[nvl(m, r, "down")] == pytest.approx(M, rel=1e-12)
    # "device": every byte of the model goes g-1 times into a leader and g-1 times out of it
    got = link_bytes(variants.build("sync-ps", TOY, cl, granularity, aggregation="node"))
    for m in range(2):
        for d in ("up", "down"):
            assert sum(got[nvl(m, r, d)] for r in range(g)) == pytest.approx(2 * (g - 1) * M,
                                                                             rel=1e-12)
    if granularity == "coarse":  # the model's slices spread evenly: as a reduce-scatter
        for r in range(g):
            assert got[nvl(0, r, "up")] == pytest.approx(2 * (g - 1) * M / g, rel=1e-12)


def test_node_parts_follow_the_documented_rules():
    plan = [[(0, 8.0), (1, 8.0)], [(0, 4.0)]]
    assert node_parts(plan, 4, "device", False) == [[[(0, 8.0)], [(1, 8.0)]], [[(2, 4.0)]]]
    assert node_parts(plan, 4, "root", False) == [[[(0, 8.0)], [(0, 8.0)]], [[(0, 4.0)]]]
    assert node_parts(plan, 2, "scatter", False)[1] == [[(0, 2.0), (1, 2.0)]]
    assert node_parts(plan, 2, "device", True) == node_parts(plan, 2, "scatter", True)


# ---------------------------------------------------------------- step times, closed forms
ONE = ModelProfile("one", [Layer("a", 0.010, 0.020, 40e6)], batch_size=32)
T = ONE.forward_s + ONE.backward_s


def ps_phase(nodes: int, nbytes: float, bps: float) -> float:
    """A push (or pull) of ``nbytes`` per node through its one NIC at ``B`` into one shard NIC
    of ``bps`` shared by the ``nodes``: ``max(M / B, N M / B_ps)`` plus the latency."""
    return max(nbytes / B, nodes * nbytes / bps) + ALPHA


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
@pytest.mark.parametrize("nodes,bps", [(2, B), (3, 2 * B), (4, 8 * B)])
def test_sync_step_with_a_root_reduce_is_the_closed_form(granularity, nodes, bps):
    # compute T; g-1 GPUs send M to the root over its NVLink down (shared): (g-1) M / B_i
    # + alpha_i; the root pushes M (ps_phase); the shard's update u; the pull; the root's
    # g-1 broadcasts out of its NVLink up: (g-1) M / B_i + alpha_i
    g, u = 4, 2e-3
    cl = cluster(nodes=nodes, g=g, ps_bandwidth=bps, update_s_per_layer=u)
    net = variants.build("sync-ps", ONE, cl, granularity, aggregation="node", local_reduce="root")
    local = (g - 1) * M / BI + ALPHA_I
    period = T + 2 * local + 2 * ps_phase(nodes, M, bps) + u
    n = nodes * g
    assert run_exact(net, n).throughput.mean == pytest.approx(n / period, rel=1e-9)
    # against g copies per node without aggregation
    plain = variants.build("sync-ps", ONE, cl, granularity)
    period0 = T + 2 * ps_phase(nodes, g * M, bps) + u
    assert run_exact(plain, n).throughput.mean == pytest.approx(n / period0, rel=1e-9)


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_sync_step_with_a_reduce_scatter_is_the_closed_form(granularity):
    # the streamed ring: every GPU sends (g-1) M / g to its successor at B_i, then the ring's
    # g-1 latencies; every GPU pushes M / g (g flows share the NIC, N g the shard's NIC)
    g, nodes, bps = 4, 3, 2 * B
    cl = cluster(nodes=nodes, g=g, ps_bandwidth=bps)
    net = variants.build("sync-ps", ONE, cl, granularity, aggregation="node",
                         local_reduce="scatter")
    ring = (g - 1) * M / (g * BI) + (g - 1) * ALPHA_I
    period = T + 2 * ring + 2 * ps_phase(nodes, M, bps)
    assert run_exact(net, nodes * g).throughput.mean == pytest.approx(nodes * g / period,
                                                                      rel=1e-9)


@pytest.mark.parametrize("variant", PS_VARIANTS)
def test_asynchronous_nodes_alike_run_at_the_synchronous_closed_form(variant):
    # the node acts as one worker; alike nodes without update cost stay in phase, so every
    # variant has the synchronous period (the shard's updates take no time to serialise)
    g, nodes = 4, 2
    cl = cluster(nodes=nodes, g=g)
    net = variants.build(variant, ONE, cl, "coarse", aggregation="node", local_reduce="root")
    period = T + 2 * ((g - 1) * M / BI + ALPHA_I) + 2 * ps_phase(nodes, M, B)
    assert run_exact(net, nodes * g).throughput.mean == pytest.approx(nodes * g / period,
                                                                      rel=1e-9)


@pytest.mark.parametrize("variant", ["async-ps", "ssp", "dssp"])
def test_one_node_is_one_worker_sync_or_async(variant):
    # on one node with a shard update cost the asynchronous shard applies the node's one sum
    # per piece, as the synchronous one does: same step times, fine nets of the toy
    cl = cluster(nodes=1, g=4, nics=2, shards=2, update_s_per_layer=1e-3)
    a = run_exact(variants.build(variant, TOY, cl, aggregation="node"), 4)
    s = run_exact(variants.build("sync-ps", TOY, cl, aggregation="node"), 4)
    np.testing.assert_allclose(a._raws[0].step_times, s._raws[0].step_times, rtol=1e-12)


def test_dssp_counts_pushes_per_node():
    cl = cluster(nodes=3, g=2)
    net = variants.build("dssp", TOY, cl, "coarse", aggregation="node")
    # the server counts one push per node: the gate's members are the nodes' push joins, each
    # waiting for the receipts of the node's parts (g slices of the one piece, "device" coarse)
    gate = net.gates["dssp"]
    assert gate.counters == ("dssp.n0.push", "dssp.n1.push", "dssp.n2.push")
    assert all(len(net.transitions[c].inputs) == 2 for c in gate.counters)


# ---------------------------------------------------------------- one GPU per node
@pytest.mark.parametrize("placement", ["dedicated", "colocated"])
@pytest.mark.parametrize("variant,granularity", [("sync-ps", "fine"), ("sync-ps", "coarse"),
                                                 ("async-ps", "fine"), ("ssp", "coarse")])
def test_nodes_of_one_gpu_are_unchanged(variant, granularity, placement):
    t = topo(g=1)
    cl = Cluster(workers=4, latency=ALPHA, ps_shards=2, ps_placement=placement, topology=t,
                 speeds=[1.0, 0.7, 1.0, 0.9], update_s_per_layer=5e-4)
    a = run_exact(variants.build(variant, TOY, cl, granularity, aggregation="node"), 4)
    b = run_exact(variants.build(variant, TOY, cl, granularity), 4)
    np.testing.assert_allclose(a._raws[0].step_times, b._raws[0].step_times, rtol=1e-12)


# ---------------------------------------------------------------- conventions, bad values
@pytest.mark.parametrize("variant", PS_VARIANTS)
@pytest.mark.parametrize("local_reduce", ["device", "root", "scatter"])
def test_noisy_aggregated_nets_run_and_keep_the_conventions(variant, local_reduce):
    cl = cluster(nodes=2, g=2, nics=2, shards=2, compute_cv=0.1, comm_cv=0.1,
                 speeds=[1.0, 0.8, 0.5, 1.0], ps_placement="colocated")
    for granularity in ("fine", "coarse"):
        net = variants.build(variant, TOY, cl, granularity, aggregation="node",
                             local_reduce=local_reduce)
        assert net.meta["options"]["aggregation"] == "node"
        for t in net.transitions.values():
            assert t.tags.get("kind") in {"compute", "comm", "update", "sync"}, t.name
        from sgdnet import simulate

        res = simulate(net, steps=40, warmup=8, replications=2, seed=3)
        assert set(res.throughput_by("worker")) == {0, 1, 2, 3}


def test_bad_values_name_the_value_and_the_fix():
    cl = cluster()
    with pytest.raises(VariantError, match=r"aggregation='nodes'.*'none', 'node'"):
        variants.build("sync-ps", TOY, cl, aggregation="nodes")
    with pytest.raises(VariantError, match=r"local_reduce='ring'.*'device', 'root', 'scatter'"):
        variants.build("ssp", TOY, cl, aggregation="node", local_reduce="ring")
    flat = Cluster(workers=4)
    for v in PS_VARIANTS:
        for g in ("fine", "coarse"):
            with pytest.raises(VariantError, match=r"aggregation='node'.*topology"):
                variants.build(v, TOY, flat, g, aggregation="node")
    with pytest.raises(VariantError, match=r"local_reduce='scatter'.*aggregation='node'"):
        variants.build("sync-ps", TOY, cl, local_reduce="scatter")
    with pytest.raises(VariantError, match=r"aggregation='nodes'"):
        build_ps_net("x", TOY, cl, synchronous=True, coarse=True, aggregation="nodes")


@pytest.mark.parametrize("variant, opts", [
    ("sync-ps", {"aggregation": "node"}),
    ("allreduce", {"algorithm": "nccl"}),
])
def test_coarse_plus_refuses_what_it_would_ignore(variant, opts):
    from sgdnet import Cluster, Topology, VariantError, variants

    cl = Cluster(workers=8, topology=Topology(gpus_per_node=4, intra="pcie",
                                              intra_bandwidth="12GB/s"),
                 ps_placement="colocated", ps_shards=2)
    with pytest.raises(VariantError, match="coarse\\+' does not model"):
        variants.build(variant, "resnet50", cl, "coarse+", **opts)
