"""The node model of issue #36: host CPUs and the input pipeline, the PCIe tree and the GPU-to-NIC
paths, and the one-node calibration.

Closed forms (deterministic nets):

- input pipeline on ``C`` cores at ``s`` CPU-seconds per sample: a node's throughput is
  ``min(g B / T, C / s)`` samples/s for ``g`` GPUs of step time ``T`` (batch ``B``), so ``C / s``
  whatever ``g`` when the pipeline binds, the compute's when it does not; with ``prefetch=0``
  preparation and compute alternate: one GPU alone runs at ``B / (T + B s / C)``;
- PCIe tree: the links on the paths (GPU pairs behind switches, uplinks, root complex, NIC on
  the switch or on a root port, GPUDirect or staged through host memory), and two GPUs of one
  switch staging through host memory at once each get half of the switch uplink;
- the calibration ``input_s_per_sample = host_cores / X_g`` reproduces ``X_g`` when the node
  is predicted again (the recipe of :mod:`sgdnet.workload.node`).
"""

from __future__ import annotations

import pytest
from test_topology import _ends

from sgdnet import Cluster, Layer, ModelProfile, Net, Topology, predict, variants
from sgdnet.errors import ClusterError
from sgdnet.variants.fabric import Fabric
from sgdnet.workload import ClusterFile, Link, load_cluster_file
from sgdnet.workload.node import calibrate_input_pipeline, write_node_calibration
from sgdnet.workload.topology import PCIE_X16

GB = 1e9
#: two layers of 1 gradient byte each: the all-reduce costs nothing measurable, so the GPUs of
#: a node are the "independent jobs" of the calibration recipe
F, B = 0.015, 0.035
PROF = ModelProfile("tiny", [Layer("a", 0.010, 0.020, 1.0), Layer("b", 0.005, 0.015, 1.0)],
                    batch_size=32)


def node(g: int, **kw) -> Cluster:
    t = Topology(gpus_per_node=g, intra_latency=0.0, **kw)
    return Cluster(workers=g, latency=0.0, topology=t)


def rate(cluster: Cluster, granularity: str = "fine", variant: str = "allreduce") -> float:
    p = predict(variant, PROF, cluster, granularity=granularity, steps=60, replications=1,
                seed=3)
    return p.samples_per_s.mean


# ---------------------------------------------------------------------- input pipeline
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
@pytest.mark.parametrize("g", [1, 2, 4])
@pytest.mark.parametrize("s", [10e-3, 2e-3])
def test_node_throughput_is_the_smaller_of_compute_and_the_cpu_pool(granularity, g, s):
    """C / s = 400 samples/s (s = 10 ms on 4 cores) binds at every g; at s = 2 ms (2,000
    samples/s) the pipeline binds from g = 4 (4 x 640 = 2,560 > 2,000) only."""
    C = 4
    compute = g * PROF.batch_size / (F + B)
    got = rate(node(g, host_cores=C, input_s_per_sample=s), granularity)
    assert got == pytest.approx(min(compute, C / s), rel=1e-6)


def test_pipeline_bound_node_delivers_cores_over_cost_whatever_its_gpus():
    C, s = 8, 20e-3  # 400 samples/s
    rates = [rate(node(g, host_cores=C, input_s_per_sample=s)) for g in (1, 2, 4, 8)]
    assert rates == pytest.approx([C / s] * 4, rel=1e-6)


@pytest.mark.parametrize("name", ["sync-ps", "async-ps", "local-sgd", "pipe-sgd"])
def test_every_variant_gets_the_pipeline(name):
    C, s = 2, 10e-3  # 200 samples/s against 4 x 640 of compute
    cl = node(4, host_cores=C, input_s_per_sample=s).replace(ps_bandwidth=1e15)
    assert rate(cl, "coarse", name) == pytest.approx(C / s, rel=1e-3)


def test_no_prefetch_alternates_preparation_and_compute():
    C, s = 4, 2e-3  # one batch: 32 * 2 ms / 4 = 16 ms of preparation, then 50 ms of compute
    got = rate(node(1, host_cores=C, input_s_per_sample=s, prefetch=0))
    assert got == pytest.approx(32 / (F + B + 32 * s / C), rel=1e-9)
    # prefetch hides the same preparation entirely
    assert rate(node(1, host_cores=C, input_s_per_sample=s)) == pytest.approx(32 / (F + B))


def test_synthetic_data_adds_nothing_and_the_pipeline_is_one_pool_per_node():
    plain = variants.build("allreduce", PROF, node(4))
    zero = variants.build("allreduce", PROF, node(4, host_cores=8, input_s_per_sample=0.0))
    assert list(zero.transitions) == list(plain.transitions)
    assert list(zero.places) == list(plain.places)
    cl = Cluster(workers=8, topology=Topology(gpus_per_node=4, host_cores=8,
                                              input_s_per_sample=1e-3))
    net = variants.build("allreduce", PROF, cl)
    pools = {n: r for n, r in net.resources.items() if r.tags.get("kind") == "cpu"}
    assert sorted(pools) == ["n0.cpu", "n1.cpu"]
    assert {r.discipline for r in pools.values()} == {"ps"}
    prep = net.transitions["w5.prep"]
    assert tuple(prep.resources) == ("n1.cpu",)
    assert prep.inputs == {"w5.prefetch": 1} and prep.outputs == {"w5.batch": 1}
    assert prep.duration.mean == pytest.approx(32 * 1e-3 / 8)
    assert net.places["w5.prefetch"].tokens == 3  # the batch in use + 2 ahead
    assert "w5.batch" in net.transitions["w5.fwd0"].inputs
    assert "w5.prefetch" in net.transitions["w5.bwd0"].outputs  # the credit back at step end


def test_bad_host_fields_are_refused_with_the_fix():
    with pytest.raises(ClusterError, match="needs host_cores"):
        Topology(input_s_per_sample="2ms")
    with pytest.raises(ClusterError, match="prefetch"):
        Topology(prefetch=-1)
    with pytest.raises(ClusterError, match="input_s_per_sample"):
        Topology(host_cores=4, input_s_per_sample=-1.0)


# ---------------------------------------------------------------------- PCIe tree
def test_pcie_tree_links_on_the_paths():
    """DGX-1-like: 8 GPUs in pairs behind 4 switches, a NIC on each switch."""
    t = Topology(gpus_per_node=8, nics_per_node=4, pcie_switch_gpus=2,
                 pcie_uplink_bandwidth="pcie3")
    names = [n for n, _, _ in t.path(2, 8 + 3)]
    assert names == ["n0.nic1.up", "n1.nic1.down"]  # GPUDirect: peer to peer via the switch
    assert t.path(0, 5) == Topology(gpus_per_node=8, nics_per_node=4).path(0, 5)  # NVLink
    staged = t.replace(gpudirect=False)
    assert [n for n, _, _ in staged.path(2, 11)] == [
        "n0.sw1.up", "n0.sw1.down", "n0.nic1.up", "n1.nic1.down", "n1.sw1.up", "n1.sw1.down"]
    assert staged.path(2, 11)[0][1] == PCIE_X16["pcie3"] == 15.75e9


def test_pcie_node_paths_between_switches_and_to_a_root_port_nic():
    """p3.16xlarge-like PCIe node: pairs behind switches, one NIC on a root port."""
    t = Topology(gpus_per_node=8, intra="pcie", intra_bandwidth=12 * GB, nics_per_node=1,
                 pcie_switch_gpus=2, bridge_bandwidth=20 * GB)
    assert t.nic_switch(0) is None and t.switch_of(5) == 2
    names = lambda a, b: [n for n, _, _ in t.path(a, b)]  # noqa: E731
    assert names(0, 1) == ["n0.g0.pcie.up", "n0.g1.pcie.down"]  # one switch: no bridge
    assert names(1, 2) == ["n0.g1.pcie.up", "n0.sw0.up", "n0.bridge", "n0.sw1.down",
                           "n0.g2.pcie.down"]
    assert names(3, 12) == ["n0.g3.pcie.up", "n0.sw1.up", "n0.bridge", "n0.nic0.up",
                            "n1.nic0.down", "n1.bridge", "n1.sw2.down", "n1.g4.pcie.down"]
    assert t.path(1, 2)[1][1] == 12 * GB  # the uplink defaults to the GPU's x16 rate
    flat = Topology(gpus_per_node=8, intra="pcie", intra_bandwidth=12 * GB,
                    bridge_bandwidth=20 * GB)
    assert [n for n, _, _ in flat.path(1, 2)] == ["n0.g1.pcie.up", "n0.bridge",
                                                  "n0.g2.pcie.down"]  # unchanged without a tree


@pytest.mark.parametrize("gpudirect", [True, False])
def test_two_gpus_of_one_switch_share_its_uplink_when_staged(gpudirect):
    """GPUs 0 and 1 (one switch) each send S bytes to node 1 at once. Staged through host
    memory both cross the switch uplink U = 4 GB/s: each gets U / 2 and both end at 2 S / U;
    with GPUDirect they share only their node's NIC (N = 12.5 GB/s): 2 S / N."""
    S, U, N = 100e6, 4 * GB, 12.5 * GB
    t = Topology(gpus_per_node=2, intra_latency=0.0, nics_per_node=1, nic_bandwidth=N,
                 pcie_switch_gpus=2, pcie_uplink_bandwidth=U, gpudirect=gpudirect)
    cl = Cluster(workers=4, latency=0.0, topology=t)
    net = Net("x")
    fab = Fabric(net, cl)
    for i in range(2):
        fab.transfer(f"x{i}", S, ("worker", i), ("worker", 2 + i),
                     inputs=[net.place(f"s{i}", 1).name], outputs=[net.place(f"d{i}").name])
    ends = _ends(net)
    want = 2 * S / (N if gpudirect else U)
    assert ends["x0"] == ends["x1"] == pytest.approx(want, rel=1e-12)
    assert ("n0.sw0.up" in net.resources) is (not gpudirect)
    if not gpudirect:
        assert net.resources["n0.sw0.up"].tags == {"host": "node0", "kind": "pcie_sw_up"}


@pytest.mark.parametrize("kw, match", [
    (dict(pcie_switch_gpus=3), "does not divide"),
    (dict(pcie_switch_gpus=2), "needs pcie_uplink_bandwidth"),
    (dict(gpudirect=False), "give pcie_switch_gpus"),
    (dict(pcie_uplink_bandwidth="pcie3"), "give pcie_switch_gpus"),
    (dict(pcie_switch_gpus=2, pcie_uplink_bandwidth="pcie9"), "pcie_uplink_bandwidth"),
    (dict(pcie_switch_gpus=2, pcie_uplink_bandwidth="pcie4", gpudirect="no"), "gpudirect"),
])
def test_bad_pcie_tree_is_refused_with_the_fix(kw, match):
    with pytest.raises(ClusterError, match=match):
        Topology(gpus_per_node=8, **kw)


def test_vendor_pcie_rates():
    """PCI-SIG: 8 / 16 / 32 GT/s per lane, 128b/130b, x16, each direction."""
    for key, gts in (("pcie3", 8e9), ("pcie4", 16e9), ("pcie5", 32e9)):
        assert PCIE_X16[key] == pytest.approx(gts * 128 / 130 * 16 / 8, rel=2e-3)


# ---------------------------------------------------------------------- calibration
def test_calibration_explains_the_measured_node_and_predicts_it_back(tmp_path):
    """Measured: one GPU alone 640 samples/s (the profile's rate), 4 copies at once 2,000
    samples/s (78% of 4 x 640). The calibrated node, predicted again, delivers 2,000."""
    x1, xg = 32 / (F + B), 2000.0
    cal = calibrate_input_pipeline(x1, xg, 4, 16)
    assert cal.input_s_per_sample == pytest.approx(16 / 2000.0)
    assert cal.efficiency == pytest.approx(xg / (4 * x1))
    cf = ClusterFile(link=Link(bandwidth=10 * GB), topology=Topology(gpus_per_node=4,
                                                                      intra_latency=0.0))
    out = tmp_path / "node.yaml"
    got = write_node_calibration(cf, cal, out)
    back = load_cluster_file(out)
    assert back.topology.input_s_per_sample == pytest.approx(cal.input_s_per_sample)
    assert back.topology.host_cores == 16
    assert back.measurements["node_calibration"]["all_gpus"] == xg
    assert got.notes and "node calibration" in got.notes[-1]
    cl = Cluster(workers=4, latency=0.0, topology=back.topology)
    assert rate(cl) == pytest.approx(xg, rel=1e-6)
    assert rate(cl.replace(workers=1, topology=back.topology.replace(gpus_per_node=1))) == \
        pytest.approx(x1, rel=1e-6)


def test_calibration_without_contention_adds_no_pipeline():
    cal = calibrate_input_pipeline(1000.0, 7950.0, 8, 64)  # 99.4%: noise
    assert cal.input_s_per_sample == 0.0 and cal.bound_s_per_sample == pytest.approx(64 / 7950)


@pytest.mark.parametrize("args, match", [
    ((1000.0, 9000.0, 8, 64), "more than gpus"),
    ((1000.0, 500.0, 8, 64), "below one_gpu"),
    ((0.0, 500.0, 8, 64), "one_gpu"),
    ((1000.0, 5000.0, 0, 64), "gpus"),
])
def test_bad_calibration_inputs_are_refused(args, match):
    with pytest.raises(ClusterError, match=match):
        calibrate_input_pipeline(*args)


def test_calibration_needs_a_matching_topology():
    cal = calibrate_input_pipeline(1000.0, 6000.0, 8, 64)
    with pytest.raises(ClusterError, match="no topology"):
        write_node_calibration(ClusterFile(link=Link(bandwidth=GB)), cal)
    with pytest.raises(ClusterError, match="gpus_per_node=4"):
        write_node_calibration(ClusterFile(link=Link(bandwidth=GB),
                                           topology=Topology(gpus_per_node=4)), cal)


def test_without_peer_to_peer_gpus_of_one_switch_go_through_its_uplink():
    # consumer GPUs / NCCL_P2P_DISABLE: a copy between the two GPUs of switch 0 goes up the
    # switch's uplink to host memory and back down it, so in a ring both directions of the
    # uplink carry two flows (the pair's own edge and the edge leaving or entering the pair)
    from sgdnet import Topology

    p2p = Topology(gpus_per_node=4, intra="pcie", intra_bandwidth="12GB/s", pcie_switch_gpus=2)
    none = p2p.replace(peer_to_peer=False)
    assert [n for n, _, _ in p2p.path(0, 1)] == ["n0.g0.pcie.up", "n0.g1.pcie.down"]
    assert [n for n, _, _ in none.path(0, 1)] == ["n0.g0.pcie.up", "n0.sw0.up", "n0.sw0.down",
                                                  "n0.g1.pcie.down"]
    assert none.path(0, 2) == p2p.path(0, 2)  # across switches: the same either way


def test_peer_to_peer_false_needs_a_pcie_tree():
    from sgdnet import ClusterError, Topology

    with pytest.raises(ClusterError, match="peer_to_peer=False.*pcie_switch_gpus"):
        Topology(gpus_per_node=4, intra="pcie", peer_to_peer=False)
    with pytest.raises(ClusterError, match="peer_to_peer"):
        Topology(gpus_per_node=4, intra="pcie", pcie_switch_gpus=2, peer_to_peer="no")
