"""Cluster: unit parsing, per-host figures, MXNet-style sharding, validation."""

import math

import pytest

from sgdnet import Cluster
from sgdnet.errors import ClusterError, SgdnetError, UnitError


def test_defaults_and_units():
    c = Cluster()
    assert c.workers == 1
    assert c.bandwidth == pytest.approx(10e9 / 8)
    assert c.latency == pytest.approx(50e-6)
    assert c.shard_min_bytes == 1e6
    assert c.up_bw(0) == c.down_bw(0) == c.bandwidth
    c = Cluster(workers=3, bandwidth="25Gbps", uplink="1GB/s", latency="2ms",
                update_s_per_byte="1ns", update_s_per_layer="20us", shard_min_bytes="4MiB")
    assert c.up_bw(2) == 1e9 and c.down_bw(2) == pytest.approx(25e9 / 8)
    assert c.latency == pytest.approx(2e-3)
    assert c.update_s_per_byte == pytest.approx(1e-9)
    assert c.shard_min_bytes == 4 * 1024**2
    assert Cluster(latency=1e-4, update_s_per_layer=0).latency == 1e-4


def test_speeds():
    c = Cluster(workers=3, speeds=[1, 0.5, 2.0])
    assert [c.speed(i) for i in range(3)] == [1.0, 0.5, 2.0]
    assert c.speeds == (1.0, 0.5, 2.0)
    assert Cluster(workers=2).speed(1) == 1.0


def test_ps_bandwidth_dedicated_and_colocated():
    d = Cluster(workers=4, ps_shards=2, bandwidth="10Gbps", ps_bandwidth="40Gbps")
    assert d.ps_host(1) is None
    assert d.ps_up_bw(1) == d.ps_down_bw(0) == pytest.approx(5e9)
    assert Cluster(workers=4, ps_shards=2).ps_up_bw(0) == pytest.approx(1.25e9)
    c = Cluster(workers=4, ps_shards=2, ps_placement="colocated", uplink="1GB/s")
    assert c.ps_host(1) == 1
    assert c.ps_up_bw(1) == 1e9 and c.ps_down_bw(1) == pytest.approx(1.25e9)


def test_replace_moves_derived_bandwidths():
    c = Cluster(workers=2, bandwidth="10Gbps")
    r = c.replace(bandwidth="1Gbps")
    assert r.up_bw(0) == r.down_bw(1) == r.ps_up_bw(0) == pytest.approx(1.25e8)
    assert c.up_bw(0) == pytest.approx(1.25e9)  # original untouched
    with pytest.raises(ClusterError, match="no field"):
        c.replace(bandwith="1Gbps")
    with pytest.raises(ClusterError, match="speeds"):
        Cluster(workers=2, speeds=(1, 1)).replace(workers=3)


def test_shard_tensor_mxnet_rule():
    c = Cluster(ps_shards=4, shard_min_bytes="1MB")
    assert c.shard_tensor(5, 1000) == [(1, 1000.0)]            # small: whole, round robin
    assert c.shard_tensor(6, 999_999) == [(2, 999_999.0)]
    assert c.shard_tensor(7, "8MB") == [(j, 2e6) for j in range(4)]  # large: split evenly
    assert c.shard_tensor(7, 1e6) == [(j, 2.5e5) for j in range(4)]  # bound is inclusive
    assert c.shard_tensor(3, 0) == [(3, 0.0)]
    assert Cluster(ps_shards=3, shard_min_bytes=0).shard_tensor(0, 30) == [(0, 10.0), (1, 10.0),
                                                                           (2, 10.0)]
    assert Cluster(ps_shards=3, shard_min_bytes=math.inf).shard_tensor(4, 1e12) == [(1, 1e12)]
    assert Cluster(ps_shards=1).shard_tensor(9, 1e9) == [(0, 1e9)]


def test_shard_plan_conserves_bytes_and_balances():
    sizes = [5e5, 4e5, 3e6, 1e5, 2e5, 9e5]
    c = Cluster(ps_shards=2, shard_min_bytes="1MB")
    for policy in ("round_robin", "least_loaded"):
        plan = c.shard_plan(sizes, policy=policy)
        assert [sum(b for _, b in pieces) for pieces in plan] == sizes
    ll = c.shard_plan(sizes, policy="least_loaded")
    # greedy by hand: 5e5->0, 4e5->1, 3e6 split (loads 2.0e6, 1.9e6), 1e5->1 (tie 2e6/2e6),
    # 2e5->0 (tie broken by lowest index), 9e5->1
    assert [[j for j, _ in p] for p in ll] == [[0], [1], [0, 1], [1], [0], [1]]
    with pytest.raises(ClusterError, match="policy"):
        c.shard_plan(sizes, policy="random")


def test_update_time():
    c = Cluster(update_s_per_byte=2e-9, update_s_per_layer="10us")
    assert c.update_time("1MB") == pytest.approx(10e-6 + 2e-3)
    assert Cluster().update_time(1e9) == 0.0


def test_to_from_dict():
    c = Cluster(workers=2, speeds=[1, 0.5], ps_shards=2, shard_min_bytes=math.inf, comm_cv=0.1)
    d = c.to_dict()
    assert d["speeds"] == [1.0, 0.5] and d["shard_min_bytes"] == "inf"
    assert Cluster.from_dict(d) == c
    with pytest.raises(ClusterError, match="unknown"):
        Cluster.from_dict({"nodes": 3})


@pytest.mark.parametrize("kw, exc, pat", [
    ({"workers": 0}, ClusterError, "workers"),
    ({"workers": 2.5}, ClusterError, "workers"),
    ({"workers": True}, ClusterError, "workers"),
    ({"workers": 2, "speeds": [1.0]}, ClusterError, "one speed factor per worker"),
    ({"workers": 2, "speeds": [1.0, 0]}, ClusterError, r"speeds\[1\]"),
    ({"workers": 1, "speeds": [math.nan]}, ClusterError, r"speeds\[0\]"),
    ({"bandwidth": 0}, UnitError, "bandwidth"),
    ({"bandwidth": "0Gbps"}, UnitError, "bandwidth"),
    ({"bandwidth": "10 furlongs/s"}, UnitError, "unknown rate unit"),
    ({"uplink": -1}, UnitError, "uplink"),
    ({"latency": "5 lightyears"}, UnitError, "latency"),
    ({"latency": -1e-3}, UnitError, "latency"),
    ({"ps_shards": 0}, ClusterError, "ps_shards"),
    ({"ps_placement": "cloud"}, ClusterError, "dedicated"),
    ({"workers": 2, "ps_shards": 3, "ps_placement": "colocated"}, ClusterError, "colocated"),
    ({"compute_cv": -0.1}, ClusterError, "compute_cv"),
    ({"comm_cv": math.inf}, ClusterError, "comm_cv"),
    ({"shard_min_bytes": "1 bushel"}, UnitError, "shard_min_bytes"),
])
def test_bad_input(kw, exc, pat):
    with pytest.raises(exc, match=pat) as info:
        Cluster(**kw)
    assert isinstance(info.value, SgdnetError)


def test_bad_indices():
    c = Cluster(workers=2, ps_shards=2)
    with pytest.raises(ClusterError, match="0..1"):
        c.speed(2)
    with pytest.raises(ClusterError, match="shard"):
        c.ps_up_bw(5)
    with pytest.raises(ClusterError, match="layer_index"):
        c.shard_tensor(-1, 10)
