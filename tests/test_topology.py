"""Cluster topologies (issue #15): nodes of GPUs, NVLink/PCIe inside, shared NICs, a switch or an
oversubscribed leaf-spine between, every transfer a flow over its real path.

Closed forms checked through the Fabric (deterministic, latency where stated):

- the links a message crosses (GPU -> NVLink/PCIe -> NIC -> leaf -> spine -> leaf -> NIC -> GPU);
- flat ring all-reduce over ``n = N g`` GPUs ordered node by node: ``2(n-1)(alpha + S/(n B))``
  with ``B`` the NIC (the one node-crossing hop per node is the slowest), and NCCL's bus
  bandwidth ``busbw = algbw * 2(n-1)/n`` equal to ``B``;
- hierarchical all-reduce = intra reduce-scatter ``(g-1) S/(g B_i)`` + inter ring all-reduce of
  ``S/g`` over ``N`` nodes at the NIC share ``B_nic * nics / g`` + intra all-gather;
- a 2:1 oversubscribed spine halves the rate of a saturating rack-to-rack pattern;
- a cluster without topology builds the same nets as before (tests/test_golden.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sgdnet import Cluster, Net, Topology, predict, simulate, variants
from sgdnet.errors import ClusterError, VariantError
from sgdnet.variants.collectives import allreduce
from sgdnet.variants.fabric import Fabric
from sgdnet.workload import ClusterFile, load_cluster_file

GB = 1e9
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clusters"


def _ends(net: Net) -> dict[str, float]:
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0)}


def allreduce_time(cl: Cluster, algorithm: str, nbytes: float) -> float:
    """Time of one all-reduce of ``nbytes`` started at 0 on ``cl`` (fine, step by step)."""
    net = Net("ar")
    fab = Fabric(net, cl)
    n = cl.workers
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    _, end = allreduce(net, fab, cl, "ar", nbytes, inputs=ins, outputs=outs, coarse=False,
                       stream=None, algorithm=algorithm)
    return _ends(net)[end]


def topo(**kw) -> Topology:
    base = dict(gpus_per_node=4, intra_bandwidth=100 * GB, intra_latency=0.0, nics_per_node=1,
                nic_bandwidth=10 * GB)
    return Topology(**{**base, **kw})


# ---------------------------------------------------------------------- the description
def test_paths_cross_the_real_links():
    t = Topology(gpus_per_node=8, nics_per_node=4, fabric="leaf-spine", rack_nodes=2,
                 oversubscription=2.0)
    names = lambda p: [x[0] for x in p]  # noqa: E731
    assert names(t.path(0, 5)) == ["n0.g0.nvl.up", "n0.g5.nvl.down"]
    # GPUs 2-3 share NIC 1; nodes 0 and 1 share rack 0: the leaf switches it
    assert names(t.path(3, 8 + 6)) == ["n0.nic1.up", "n1.nic3.down"]
    # node 0 (rack 0) to node 2 (rack 1): through both leaves' spine links
    assert names(t.path(0, 16)) == ["n0.nic0.up", "leaf0.up", "leaf1.down", "n2.nic0.down"]
    assert t.leaf_bandwidth() == pytest.approx(2 * 4 * 100e9 / 8 / 2)
    p = Topology(gpus_per_node=4, intra="pcie", intra_bandwidth="16GB/s",
                 bridge_bandwidth="20GB/s")
    assert names(p.path(0, 1)) == ["n0.g0.pcie.up", "n0.bridge", "n0.g1.pcie.down"]
    assert names(p.path(0, 4)) == ["n0.g0.pcie.up", "n0.nic0.up", "n1.nic0.down",
                                   "n1.g0.pcie.down"]


@pytest.mark.parametrize("kw, match", [
    (dict(intra="infiniband"), "unknown interconnect"),
    (dict(nics_per_node=5), "at most one NIC per GPU"),
    (dict(oversubscription=2.0), "fabric='leaf-spine'"),
    (dict(fabric="leaf-spine", oversubscription=0.5), ">= 1"),
    (dict(fabric="torus"), "unknown fabric"),
    (dict(bridge_bandwidth="10GB/s"), "intra='pcie'"),
    (dict(nic_bandwidth=0), "nic_bandwidth"),
])
def test_bad_topology_is_refused_with_the_fix(kw, match):
    with pytest.raises(ClusterError, match=match):
        topo(**kw)


def test_cluster_checks_workers_and_colocated_shards_against_the_nodes():
    with pytest.raises(ClusterError, match="not a multiple of Topology.gpus_per_node=4"):
        Cluster(workers=6, topology=topo())
    with pytest.raises(ClusterError, match="one per node"):
        Cluster(workers=8, topology=topo(), ps_shards=3, ps_placement="colocated")
    c = Cluster(workers=8, topology=topo(), ps_shards=2, ps_placement="colocated")
    assert c.ps_host(1) == 4  # shard 1 on node 1
    assert Cluster.from_dict(c.to_dict()) == c
    with pytest.raises(ClusterError, match="unknown key"):
        Cluster(workers=8, topology={"gpus": 4})


def test_hierarchical_needs_a_topology_and_fifo_is_refused_on_one():
    with pytest.raises(VariantError, match="needs nodes"):
        allreduce_time(Cluster(workers=4, latency=0), "hierarchical", 1e6)
    with pytest.raises(VariantError, match="discipline='flows'"):
        Fabric(Net("x"), Cluster(workers=4, topology=topo()), discipline="fifo")


# ---------------------------------------------------------------------- closed forms
def test_flat_ring_time_and_nccl_bus_bandwidth():
    """A ring ordered node by node crosses each node boundary once; with intra-node links as
    fast as the NICs every hop costs the same: ``2(n-1)(alpha + S/(n B))``; and NCCL's
    busbw = algbw 2(n-1)/n equals the NIC rate B."""
    S, alpha, n, B = 512e6, 5e-6, 8, 10 * GB
    same = Cluster(workers=n, latency=alpha,
                   topology=topo(intra_bandwidth=B, intra_latency=alpha))
    t = allreduce_time(same, "ring", S)
    assert t == pytest.approx(2 * (n - 1) * (alpha + S / (n * B)), rel=1e-12)
    cl0 = Cluster(workers=n, latency=0.0, topology=topo())
    algbw = S / allreduce_time(cl0, "ring", S)
    assert algbw * 2 * (n - 1) / n == pytest.approx(B, rel=1e-12)


def test_flat_ring_on_fast_nvlink_pipelines_the_latency():
    """With NVLink much faster than the NIC, the chunk from the intra-node predecessor reaches
    a node-crossing sender before its previous chunk is through (alpha + S/(n Bi) <= S/(n B)),
    so that NIC never idles and only the last latency shows: ``2(n-1) S/(n B) + alpha``."""
    S, alpha, n, B = 512e6, 5e-6, 8, 10 * GB
    cl = Cluster(workers=n, latency=alpha, topology=topo(intra_latency=alpha))
    assert alpha + S / (n * 100 * GB) <= S / (n * B)
    t = allreduce_time(cl, "ring", S)
    assert t == pytest.approx(2 * (n - 1) * S / (n * B) + alpha, rel=1e-12)


@pytest.mark.parametrize("nics", [1, 2, 4])
def test_hierarchical_is_intra_reduce_scatter_plus_inter_allreduce_of_1_over_g(nics):
    """g = 4 GPUs per node, N = 3 nodes; the g inter-node rings run at once, so GPUs sharing
    a NIC (g / nics of them) split its rate."""
    S, g, N = 600e6, 4, 3
    Bi, Bn, ai, an = 100 * GB, 10 * GB, 2e-6, 7e-6
    cl = Cluster(workers=g * N, latency=an,
                 topology=topo(intra_latency=ai, nics_per_node=nics))
    intra = (g - 1) * (ai + S / (g * Bi))
    inter = 2 * (N - 1) * (an + (S / (g * N)) / (Bn * nics / g))
    assert allreduce_time(cl, "hierarchical", S) == pytest.approx(2 * intra + inter, rel=1e-12)


def test_hierarchical_beats_the_flat_ring_when_nics_are_many():
    S = 1e9
    cl = Cluster(workers=16, latency=0, topology=topo(nics_per_node=4))
    assert allreduce_time(cl, "hierarchical", S) < allreduce_time(cl, "ring", S) / 2


@pytest.mark.parametrize("over", [1.0, 2.0, 4.0])
def test_oversubscribed_spine_divides_the_cross_rack_rate(over):
    """Every GPU of rack 0 (2 nodes x 2 NICs, one GPU per NIC) sends S to its peer in rack 1
    at once: alone each would get the NIC rate; through an over:1 leaf uplink they get 1/over."""
    S, Bn = 100e6, 10 * GB
    t = Topology(gpus_per_node=2, nics_per_node=2, nic_bandwidth=Bn, intra_bandwidth=100 * GB,
                 fabric="leaf-spine", rack_nodes=2, oversubscription=over)
    cl = Cluster(workers=8, latency=0, topology=t)
    net = Net("x")
    fab = Fabric(net, cl)
    for i in range(4):
        src = net.place(f"s{i}", 1)
        fab.transfer(f"x{i}", S, ("worker", i), ("worker", i + 4), inputs=[src.name],
                     outputs=[net.place(f"d{i}").name])
    ends = _ends(net)
    for i in range(4):
        assert ends[f"x{i}"] == pytest.approx(S / Bn * over, rel=1e-12)


def test_shared_nic_congests_by_itself():
    """Two GPUs behind one NIC sending to another node at once share its rate."""
    S = 100e6
    cl = Cluster(workers=4, latency=0, topology=topo(gpus_per_node=2, nics_per_node=1))
    net = Net("x")
    fab = Fabric(net, cl)
    for i in range(2):
        fab.transfer(f"x{i}", S, ("worker", i), ("worker", 2 + i),
                     inputs=[net.place(f"s{i}", 1).name], outputs=[net.place(f"d{i}").name])
    ends = _ends(net)
    assert ends["x0"] == ends["x1"] == pytest.approx(2 * S / (10 * GB), rel=1e-12)


def test_dedicated_ps_host_hangs_off_the_spine():
    cl = Cluster(workers=4, latency=0, ps_bandwidth=5 * GB,
                 topology=topo(gpus_per_node=2, fabric="leaf-spine", rack_nodes=1))
    fab = Fabric(Net("x"), cl)
    assert fab.path(("worker", 3), ("ps", 0)) == ["n1.nic0.up", "leaf1.up", "ps0.down"]
    assert fab.path(("ps", 0), ("worker", 0)) == ["ps0.up", "leaf0.down", "n0.nic0.down"]
    assert fab.bandwidth(("worker", 3), ("ps", 0)) == 5 * GB


# ---------------------------------------------------------------------- every variant
DATA_PARALLEL = ["allreduce", "sync-ps", "async-ps", "ssp", "dssp", "local-sgd", "cocod",
                 "pipe-sgd", "backup"]


@pytest.mark.parametrize("name", DATA_PARALLEL)
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_every_data_parallel_variant_runs_its_transfers_over_the_topology(name, granularity):
    cl = Cluster(workers=4, bandwidth="1Gbps", topology=topo(gpus_per_node=2),
                 ps_placement="colocated", ps_shards=2)
    net = variants.build(name, "resnet18", cl, granularity=granularity, max_layers=4)
    flows = [r for r in net.resources.values() if r.discipline == "flow"]
    assert flows and all(not r.name.startswith("w") for r in flows)  # no per-worker NICs
    assert any(r.name.startswith("n0.nic0") for r in flows)
    p = predict(name, "resnet18", cl, granularity=granularity, steps=5, replications=1,
                parallel=False, seed=1, max_layers=4)
    assert math.isfinite(p.samples_per_s.mean) and p.samples_per_s.mean > 0


def test_hierarchical_allreduce_variant_is_faster_than_ring_on_shared_nics():
    t = Topology(gpus_per_node=4, nics_per_node=1, nic_bandwidth="10Gbps",
                 intra_bandwidth="100GB/s")
    cl = Cluster(workers=8, topology=t)
    kw = dict(steps=5, replications=1, parallel=False, seed=1, max_layers=4)
    ring = predict("allreduce", "resnet50", cl, algorithm="ring", **kw).samples_per_s.mean
    hier = predict("allreduce", "resnet50", cl, algorithm="hierarchical", **kw).samples_per_s.mean
    assert hier > ring


# ---------------------------------------------------------------------- the file format
def test_topology_section_round_trips_through_a_cluster_file(tmp_path):
    cf = ClusterFile.from_dict({
        "sgdnet_cluster": 1, "name": "x", "workers": 16,
        "link": {"bandwidth": "100Gbps", "latency": "5us"},
        "topology": {"gpus_per_node": 8, "intra_bandwidth": "150GB/s", "nics_per_node": 4,
                     "nic_bandwidth": "100Gbps", "fabric": "leaf-spine", "rack_nodes": 2,
                     "oversubscription": 2}})
    back = load_cluster_file(cf.save(tmp_path / "c.yaml"))
    assert back == cf
    cl = Cluster.from_file(tmp_path / "c.yaml")
    assert cl.topology.nic_bandwidth == 12.5e9 and cl.topology.nodes(cl.workers) == 2
    with pytest.raises(ClusterError, match="unknown key"):
        ClusterFile.from_dict({"sgdnet_cluster": 1, "link": {"bandwidth": 1e9},
                               "topology": {"gpu_per_node": 8}})


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_cluster_files_load(path):
    cl = Cluster.from_file(path)
    assert cl.topology is not None and cl.workers % cl.topology.gpus_per_node == 0


@pytest.mark.parametrize("chunks", [2, 4, 7])
def test_pipelined_hierarchical_hides_the_intra_node_phases(chunks):
    """In ``chunks`` pieces, the inter-node phase (NIC links) of one piece runs while the
    intra-node phases (NVLink) of its neighbours run; with the inter phase the slowest (even
    when a reduce-scatter and an all-gather share NVLink), the all-reduce takes
    ``a + chunks * b + c``: one piece's intra reduce-scatter, every piece's inter phase, one
    piece's all-gather."""
    S, g, N = 800e6, 4, 2
    Bi, Bn = 100 * GB, 10 * GB
    cl = Cluster(workers=g * N, latency=0, topology=topo())
    net = Net("ar")
    fab = Fabric(net, cl)
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(g * N)}
    outs = {i: [net.place(f"out{i}").name] for i in range(g * N)}
    _, end = allreduce(net, fab, cl, "ar", S, inputs=ins, outputs=outs, coarse=False,
                       stream=None, algorithm="hierarchical", chunks=chunks)
    a = c = (g - 1) * (S / chunks / g) / Bi
    b = 2 * (N - 1) * (S / chunks / (g * N)) / (Bn / g)  # 4 GPUs share the node's one NIC
    assert 2 * a <= b
    assert _ends(net)[end] == pytest.approx(a + chunks * b + c, rel=1e-12)


def test_chunks_is_for_hierarchical_only():
    with pytest.raises(VariantError, match="chunks=4 pipelines"):
        allreduce(Net("x"), Fabric(Net("x"), Cluster(workers=2)), Cluster(workers=2), "ar", 1e6,
                  inputs={0: ["a"]}, outputs={}, coarse=False, chunks=4)


def test_channel_orders_cross_each_node_through_their_own_nic():
    from sgdnet.variants.collectives import channel_order

    cl = Cluster(workers=8, topology=topo(nics_per_node=2))
    assert channel_order(cl, 0) == [0, 2, 3, 1, 4, 6, 7, 5]  # enters at GPU 0, leaves at 1: NIC 0
    assert channel_order(cl, 1) == [2, 0, 1, 3, 6, 4, 5, 7]  # NIC 1
    one = Cluster(workers=8, topology=topo(nics_per_node=4))  # a NIC per GPU
    assert channel_order(one, 0)[:4] == [0, 2, 3, 1]          # in by NIC 0, out by NIC 1
    assert channel_order(Cluster(workers=3), 5) == [0, 1, 2]


@pytest.mark.parametrize("nics, channels", [(2, 1), (2, 2), (2, 4), (4, 4), (1, 4)])
def test_nccl_channels_multiply_the_bus_bandwidth_up_to_the_nics(nics, channels):
    """``channels`` rings of ``S/channels``, ring ``k`` through NIC ``k mod nics``: the node
    crossings are the bottleneck and each NIC direction carries ``ceil(channels/nics)`` of
    them, so busbw = algbw 2(n-1)/n = min(channels, nics) B."""
    S, n, B = 256e6, 8, 10 * GB
    cl = Cluster(workers=n, latency=0, topology=topo(nics_per_node=nics))
    net = Net("ar")
    fab = Fabric(net, cl)
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    _, end = allreduce(net, fab, cl, "ar", S, inputs=ins, outputs=outs, coarse=False,
                       stream=None, channels=channels)
    busbw = S / _ends(net)[end] * 2 * (n - 1) / n
    assert busbw == pytest.approx(min(channels, nics) * B, rel=1e-12)


def test_channels_are_for_rings_and_trees():
    """Channels are concurrent rings (or double trees): not for the hierarchical all-reduce,
    and not for a coarse net without nodes, whose all-reduce is one closed form."""
    cl = Cluster(workers=8, topology=topo())
    with pytest.raises(VariantError, match="channels=2 runs concurrent rings"):
        variants.build("allreduce", "resnet18", cl, algorithm="hierarchical", channels=2)
    with pytest.raises(VariantError, match="coarse"):
        variants.build("allreduce", "resnet18", Cluster(workers=8), granularity="coarse",
                       channels=2)
    assert variants.build("allreduce", "resnet18", cl, granularity="coarse", channels=2)


def test_pcie_host_bridge_is_shared_by_a_nodes_gpu_to_gpu_traffic():
    """Two GPU pairs of one PCIe node talking at once share the host bridge (20 GB/s) while
    each GPU's own PCIe link (25 GB/s) would allow more: each flow gets 10 GB/s."""
    S = 100e6
    t = topo(intra="pcie", intra_bandwidth=25 * GB, bridge_bandwidth=20 * GB)
    cl = Cluster(workers=4, latency=0, topology=t)
    net = Net("x")
    fab = Fabric(net, cl)
    for s_, d_ in ((0, 1), (2, 3)):
        fab.transfer(f"x{s_}", S, ("worker", s_), ("worker", d_),
                     inputs=[net.place(f"s{s_}", 1).name], outputs=[net.place(f"d{s_}").name])
    ends = _ends(net)
    assert ends["x0"] == ends["x2"] == pytest.approx(S / (10 * GB), rel=1e-12)


def test_coarse_ring_on_a_topology_runs_at_its_slowest_hop():
    """Coarse all-reduce: every GPU's share moves the closed-form bytes at the ring's slowest
    hop (a NIC crossing) and waits the closed form's latency term of the slowest latency:
    ``2(n-1)(alpha + S/(n B_nic))``."""
    S, n, alpha = 400e6, 8, 7e-6
    cl = Cluster(workers=n, latency=alpha, topology=topo(intra_latency=1e-6))
    net = Net("ar")
    fab = Fabric(net, cl)
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    _, end = allreduce(net, fab, cl, "ar", S, inputs=ins, outputs=outs, coarse=True, stream=None)
    assert _ends(net)[end] == pytest.approx(2 * (n - 1) * (alpha + S / (n * 10 * GB)),
                                            rel=1e-12)


def test_a_slower_node_nic_sets_the_ring_pace():
    """Per-node NIC rates (heterogeneous cluster): the ring's node crossings out of and into
    the slow node run at its rate, so the ring takes ``2(n-1) S/(n B_slow)``."""
    S, n = 256e6, 8
    t = topo(node_nic_bandwidth=["10GB/s", "4GB/s"])
    cl = Cluster(workers=n, latency=0, topology=t)
    assert allreduce_time(cl, "ring", S) == pytest.approx(2 * (n - 1) * S / (n * 4 * GB),
                                                          rel=1e-12)
    assert Cluster.from_dict(cl.to_dict()) == cl
    with pytest.raises(ClusterError, match="one NIC rate per node"):
        Cluster(workers=12, topology=t)


# ---------------------------------------------------------------------- published measurements
def test_published_nccl_ring_bus_bandwidths_are_predicted_within_10_percent():
    """nccl-tests ring all-reduce bus bandwidth of two multi-node systems, predicted from their
    link rates alone (``scripts/validate_nccl.py``, docs/validation.md): a DGX A100 with 8 HDR
    InfiniBand NICs, 192 GB/s (NVIDIA/nccl#812), and 5 nodes of 8 H100 with 4 x 400 Gb/s RoCE
    NICs, 190 GB/s (NVIDIA/nccl#1368). One ring per NIC (NCCL's channels), so the NICs bound
    the bus bandwidth; one ring alone would be 8 (resp. 4) times slower."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from validate_nccl import RING_SYSTEMS, ring_busbw

    for system in RING_SYSTEMS:
        predicted = ring_busbw(system, system.nodes[0])
        assert abs(predicted / system.measured - 1) < 0.10, (system.name, predicted)


@pytest.mark.parametrize("nics", [2, 4])
def test_coarse_ring_channels_on_a_topology_are_the_pipelined_rings(nics):
    """A coarse ring with ``channels`` on multi-GPU nodes is no closed form over one NIC but the
    channels' pipelined rings, the fine net's with ``ring_form="pipelined"``: the same time,
    and the bus bandwidth ``min(channels, nics) B`` of the fine closed form (no latency)."""
    S, n, B = 256e6, 16, 10 * GB
    cl = Cluster(workers=n, latency=0, topology=topo(nics_per_node=nics))
    ends = {}
    for coarse in (False, True):
        net = Net("ar")
        ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
        outs = {i: [net.place(f"out{i}").name] for i in range(n)}
        _, end = allreduce(net, Fabric(net, cl), cl, "ar", S, inputs=ins, outputs=outs,
                           coarse=coarse, stream=None, channels=nics, ring_form="pipelined")
        ends[coarse] = _ends(net)[end]
    assert ends[True] == ends[False]
    assert S / ends[True] * 2 * (n - 1) / n == pytest.approx(nics * B, rel=1e-9)


def test_variants_that_all_reduce_take_the_collective_options():
    """local-sgd, cocod and pipe-sgd all-reduce with the options of the allreduce variant
    (algorithm, chunks, channels, ring_form): on 2 p4d-like nodes (4 NICs) GPT-2 medium's
    averaging is NIC bound, so one ring per NIC, the hierarchical all-reduce and NCCL's tree
    all beat one ring; local-sgd with sync='ps' refuses them."""
    cl = Cluster.from_file(EXAMPLES / "p4d-8xa100-4x100g.yaml", workers=16)
    kw = dict(steps=10, replications=1, parallel=False, granularity="coarse")
    for variant, extra in (("local-sgd", {"H": 2}), ("pipe-sgd", {})):
        ring = predict(variant, "gpt2_medium", cl, **extra, **kw).samples_per_s.mean
        for opts in ({"channels": 4}, {"algorithm": "hierarchical", "chunks": 4},
                     {"algorithm": "dbtree", "channels": 4}):
            faster = predict(variant, "gpt2_medium", cl, **extra, **opts, **kw)
            assert faster.samples_per_s.mean > 1.05 * ring, (variant, opts)
    assert predict("cocod", "gpt2_medium", cl, k=2, channels=4, **kw).samples_per_s.mean > 0
    with pytest.raises(VariantError, match="option algorithm='dbtree' is modelled on the "
                                           "all-reduce; with sync='ps' pass algorithm='ring'"):
        predict("local-sgd", "resnet18", cl, sync="ps", algorithm="dbtree", **kw)
