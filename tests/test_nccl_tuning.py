"""NCCL's algorithm / protocol / channel choice (sgdnet.workload.nccl) against NCCL's source and
published nccl-tests runs, and ``algorithm="nccl"`` in the all-reduce builder.

Sources
    [src] NCCL v2.18.3-1: src/graph/tuning.cc (ncclTopoTuneModel: baseLat, hwLat, llMaxBws,
          ncclTopoGetAlgoTime), src/graph/search.cc (speed tables, channel duplication),
          src/graph/connect.cc (ncclTopoPostset doubles the channels), src/enqueue.cc
          (getAlgoInfo). The closed forms below are recomputed by hand from those constants.
    [812] github.com/NVIDIA/nccl/issues/812 (2023-03-31, NVIDIA): "On an Nvidia DGX-A100 system
          we have 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW"; "Tree performs
          better on two nodes as there are fewer inter-node data transmissions".
    [412] github.com/NVIDIA/nccl/issues/412 (2023-04-24, NVIDIA): 8 NVLink A800 GPUs per node,
          one HDR 200G NIC, 12 nodes: "you should get ... 24GB/s inter-node".
    [175] github.com/NVIDIA/nccl-tests/issues/175 (2023-10-29): one node of 8 A100,
          all_reduce_perf -b 8 -e 4G: 232.54 GB/s bus bandwidth.
    [2.4] NVIDIA developer blog, "Massively Scale Your Deep Learning Training with NCCL 2.4"
          (S. Jeaugey, 2019): double binary trees give logarithmic latency and are used for
          small and medium operations across nodes; rings keep the best bandwidth for large ones.
"""

from __future__ import annotations

import math

import pytest

from sgdnet.errors import ClusterError
from sgdnet.workload import Cluster, ModelProfile, Topology, ring_allreduce_time
from sgdnet.workload.nccl import (
    nccl_allreduce_choice,
    nccl_choice_for_cluster,
    nccl_default_channels,
    nccl_plan,
    nccl_topology,
)

# DGX A100 as NCCL rates it: 12 NVLinks x 20 GB/s, 8 HDR NICs (25 GB/s) behind PCIe Gen4 (24)
DGX = dict(gpus_per_node=8, intra_bw=240e9, inter_bw=25e9, nics_per_node=8, cpu="amd")


def choice(nbytes, nodes, **kw):
    return nccl_allreduce_choice(nbytes, nodes=nodes, **{**DGX, **kw})


SIZES = [2 ** k for k in range(3, 31)]  # 8 B .. 1 GiB, as all_reduce_perf -b 8 -e 1G -f 2


def test_one_node_closed_forms_of_ring_ll_ll128_simple():
    # [src] one node, 8 ranks: 14 steps, NVLink; ring bandwidth = busBw * n / (2(n-1))
    t = nccl_topology(nodes=1, **DGX)
    assert (t.ring.channels, t.ring.bw_intra) == (12, 20.0)  # 6 x 40 GB/s duplicated at 20
    ratio = 8 / 14
    bw = {"LL": min(87.7, 12 * 20 / 4) * ratio, "LL128": min(12 * 20 * .92, 12 * 20.0) * ratio,
          "Simple": 12 * 20 * ratio}
    lat = {"LL": 6.6 + 14 * .6, "LL128": 14.0 + 14 * 1.9, "Simple": 8.4 + 14 * 3.4}
    c = choice(4096, 1)
    for p in ("LL", "LL128", "Simple"):
        assert c.times["ring", p] == pytest.approx((lat[p] + 4096 / (1000 * bw[p])) * 1e-6)
    # crossovers where two protocols' times are equal
    x1 = (lat["LL128"] - lat["LL"]) / (1 / bw["LL"] - 1 / bw["LL128"]) * 1000
    x2 = (lat["Simple"] - lat["LL128"]) / (1 / bw["LL128"] - 1 / bw["Simple"]) * 1000
    assert 1e6 < x1 < 2e6 and 2e7 < x2 < 5e7
    assert choice(0.9 * x1, 1).protocol == "LL" and choice(1.1 * x1, 1).protocol == "LL128"
    assert choice(0.9 * x2, 1).protocol == "LL128" and choice(1.1 * x2, 1).protocol == "Simple"


@pytest.mark.parametrize("nodes", [1, 2, 16])
def test_size_table_protocols_grow_with_size(nodes):
    # [src] LL has the lowest latency, Simple the highest bandwidth: small -> LL, large -> Simple
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    table = [(s, choice(s, nodes)) for s in SIZES]
    protos = [order[c.protocol] for _, c in table]
    assert protos == sorted(protos)
    assert table[0][1].protocol == "LL" and table[-1][1].protocol == "Simple"
    assert any(c.protocol == "LL128" for _, c in table)  # NVLink + sm80: LL128 enabled


def test_size_table_algorithms_one_node_ring_multi_node_tree_then_ring():
    # one node: ring at every size (the tree's chain inside a node halves the bandwidth)
    assert {choice(s, 1).algorithm for s in SIZES} == {"ring"}
    for nodes in (2, 16):  # [2.4], [812]: trees for small and medium sizes, rings for large
        algs = [choice(s, nodes).algorithm for s in SIZES]
        assert algs[0] == "tree" and algs[-1] == "ring"
        k = algs.index("ring")
        assert all(a == "ring" for a in algs[k:]) and 2 ** 20 < SIZES[k]
    # [src] 2 nodes: tree LL latency 6.8 + 2 (7 x 0.6 + 1 x 5.0) us beats ring LL's
    assert choice(8, 2).times["tree", "LL"] == pytest.approx((6.8 + 2 * (7 * .6 + 5.0)) * 1e-6,
                                                             rel=1e-3)


def test_bus_bandwidth_of_large_messages_matches_published_runs():
    assert choice(2 ** 30, 1).busbw == pytest.approx(232.54e9, rel=0.05)  # [175]
    assert choice(2 ** 30, 2).busbw == pytest.approx(192e9, rel=0.05)  # [812]
    one_nic = nccl_allreduce_choice(8 * 2 ** 30, nodes=12, gpus_per_node=8, intra_bw=160e9,
                                    inter_bw=25e9, nics_per_node=1)
    assert one_nic.busbw == pytest.approx(24e9, rel=0.05)  # [412]


def test_default_channels():
    # [src] 2 nodes: one 24 GB/s ring per 25 GB/s NIC (PCIe Gen4 24 GB/s), 8 rings, doubled by
    # ncclTopoPostset; one node: 6 rings of 40 GB/s fill 240 GB/s, duplicated, doubled: 24
    assert nccl_default_channels(nodes=2, **DGX) == 16
    assert nccl_default_channels(nodes=1, **DGX) == 24
    assert nccl_default_channels(nodes=2, channels=4, **DGX) == 4  # NCCL_MIN/MAX_NCHANNELS
    # [src] getAlgoInfo: a small message runs on fewer channels; the largest on all of them
    assert choice(8, 2).channels == 1 and choice(2 ** 30, 2).channels == 16


def test_bad_inputs_name_the_value():
    with pytest.raises(ClusterError, match="version"):
        choice(1024, 2, version="2.3")
    with pytest.raises(ClusterError, match="nbytes"):
        choice(-1, 2)
    with pytest.raises(ClusterError, match="intra_bw"):
        nccl_topology(nodes=1, gpus_per_node=8, intra_bw=0, inter_bw=1e9)


def _toy(grad_bytes):
    return ModelProfile("toy", [{"name": "l0", "forward_s": 0.01, "backward_s": 0.02,
                                 "grad_bytes": grad_bytes}], batch_size=32)


def test_nccl_coarse_allreduce_is_the_closed_form_of_the_chosen_pair():
    # two hosts, no topology: step = compute + ring time of the protocol's wire bytes + base lat
    import sgdnet

    c = Cluster(workers=2, bandwidth="10Gbps", latency="5us")
    for nbytes in (4096.0, 64e6):
        ch = nccl_choice_for_cluster(c, nbytes)
        alg, wire, _, lat0 = nccl_plan(c, nbytes, "nccl", 1)
        assert wire == pytest.approx(nbytes / {"LL": .5, "LL128": 120 / 128, "Simple": 1}[
            ch.protocol])
        assert alg == "ring"  # [src] 1 GPU per node, 2 nodes: ring LL (15.4 us) < tree LL
        p = sgdnet.predict("allreduce", _toy(nbytes), c, granularity="coarse", steps=20,
                           replications=1, seed=0, algorithm="nccl")
        step = 0.03 + ring_allreduce_time(wire, 2, c.bandwidth, c.latency) + lat0
        assert 1 / p.iterations_per_s.mean == pytest.approx(step, rel=1e-6)


def test_nccl_fine_net_uses_the_chosen_algorithm_per_bucket():
    from sgdnet.variants import build

    topo = Topology(gpus_per_node=8, intra_bandwidth=240e9, nics_per_node=8,
                    nic_bandwidth="200Gbps")
    c = Cluster(workers=16, topology=topo, latency="3us")
    prof = ModelProfile("two", [{"name": "big", "forward_s": .01, "backward_s": .02,
                                 "grad_bytes": 512e6},
                                {"name": "small", "forward_s": .01, "backward_s": .02,
                                 "grad_bytes": 8192.0}], batch_size=32)
    net = build("allreduce", prof, c, "fine", algorithm="nccl", channels="auto", bucket_bytes=0)
    assert nccl_choice_for_cluster(c, 8192.0).algorithm == "tree"
    assert nccl_choice_for_cluster(c, 512e6).algorithm == "ring"
    names = set(net.transitions)
    small = [b for b, layers in enumerate(net.meta["buckets"]) if layers == [1]][0]
    # the small bucket: NCCL's tree (sgdnet's multi-node dbtree, channels named c<k>) on the
    # channels getAlgoInfo leaves an 8 KiB message
    k = nccl_choice_for_cluster(c, 8192.0).channels
    ref = build("allreduce", prof, c, "fine", algorithm="dbtree", channels=k, bucket_bytes=0)
    pick = {n for n in names if n.startswith(f"ar.b{small}.")}
    assert pick == {n for n in ref.transitions if n.startswith(f"ar.b{small}.")}
    assert any(n.startswith(f"ar.b{small}.c{k - 1}.") for n in pick)
    big = 1 - small
    # the large bucket's ring runs on one channel per NIC: 8 rings (lanes ch0..ch7)
    assert any(n.startswith(f"ar.b{big}.ch7") for n in names)
    assert not any(n.startswith(f"ar.b{big}.ch8") for n in names)
    begin = net.transitions[f"ar.b{small}.begin"]
    assert math.isclose(begin.duration.mean, 6.8e-6)  # [src] baseLat tree LL
