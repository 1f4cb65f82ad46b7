"""Closed-form network costs against the facts in tests/data/reference/README.md (NCCL, BytePS)."""

import math

import pytest

from sgdnet.errors import ClusterError, SgdnetError, UnitError
from sgdnet.workload import network as nw

S, B, A = 100e6, 1.25e9, 50e-6  # 100 MB over 10 Gbps, 50 us


def test_transfer():
    assert nw.transfer_time(S, B) == pytest.approx(0.08)
    assert nw.transfer_time("100MB", "10Gbps", "50us") == pytest.approx(0.08 + 50e-6)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_ring_allreduce_matches_nccl_fact(n):
    # t = 2(n-1) alpha + 2(n-1)/n * S/B
    t = nw.ring_allreduce_time(S, n, B, A)
    assert t == pytest.approx(2 * (n - 1) * A + 2 * (n - 1) / n * S / B)
    assert nw.allreduce_time(S, n, B, A) == t
    # and it is reduce-scatter followed by all-gather
    assert t == pytest.approx(nw.reduce_scatter_time(S, n, B, A) + nw.allgather_time(S, n, B, A))


@pytest.mark.parametrize("n", [2, 4, 8])
def test_reduce_scatter_allgather(n):
    assert nw.reduce_scatter_time(S, n, B) == pytest.approx((n - 1) / n * S / B)
    assert nw.allgather_time(S, n, B, A) == pytest.approx((n - 1) * (A + S / (n * B)))


def test_one_rank_costs_nothing():
    for f in (nw.ring_allreduce_time, nw.tree_allreduce_time, nw.reduce_scatter_time,
              nw.allgather_time, nw.broadcast_time, nw.reduce_time):
        assert f(S, 1, B, A) == 0.0


@pytest.mark.parametrize("n, depth", [(2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4)])
def test_tree_allreduce(n, depth):
    assert nw.tree_allreduce_time(S, n, B, A) == pytest.approx(2 * depth * (A + S / B))
    c = 16
    assert nw.tree_allreduce_time(S, n, B, A, chunks=c) == pytest.approx(
        (2 * depth + c - 1) * (A + S / (c * B)))
    assert nw.allreduce_time(S, n, B, A, algorithm="tree") == nw.tree_allreduce_time(S, n, B, A)


def test_tree_pipelining_approaches_bandwidth_bound():
    t = nw.tree_allreduce_time(S, 8, B, 0.0, chunks=10_000)
    assert t == pytest.approx(S / B, rel=1e-2)


def test_broadcast_reduce():
    assert nw.broadcast_time(S, 4, B, A) == pytest.approx(3 * A + S / B)
    assert nw.reduce_time(S, 4, B) == pytest.approx(S / B)


@pytest.mark.parametrize("n, k", [(1, 1), (4, 1), (4, 2), (8, 8), (16, 4), (2, 8)])
def test_ps_dedicated_byteps_bound(n, k):
    assert nw.ps_step_lower_bound(S, n, k, B) == pytest.approx(max(S / B, n * S / (k * B)))
    bps = 4 * B
    assert nw.ps_step_lower_bound(S, n, k, B, ps_bandwidth=bps, latency=A) == pytest.approx(
        A + max(S / B, n * S / (k * bps)))


def test_ps_colocated():
    n = 8
    # one shard per worker: each host sends (n-1)/n M and receives (n-1) M/n
    assert nw.ps_step_lower_bound(S, n, n, B, placement="colocated") == pytest.approx(
        (n - 1) / n * S / B)
    # 2 shards on 8 hosts: the 6 shard-less hosts send M; shard hosts receive 7 M/2
    assert nw.ps_step_lower_bound(S, n, 2, B, placement="colocated") == pytest.approx(
        3.5 * S / B)
    assert nw.ps_step_lower_bound(S, 1, 1, B, placement="colocated") == 0.0


@pytest.mark.parametrize("call, exc, pat", [
    (lambda: nw.transfer_time(S, 0), UnitError, "positive"),
    (lambda: nw.transfer_time(-1, B), UnitError, "non-negative"),
    (lambda: nw.transfer_time(S, B, math.nan), UnitError, "latency"),
    (lambda: nw.transfer_time(S, "10 Gfoo"), UnitError, "unknown rate unit"),
    (lambda: nw.ring_allreduce_time(S, 0, B), ClusterError, "n"),
    (lambda: nw.ring_allreduce_time(S, 2.0, B), ClusterError, "n"),
    (lambda: nw.tree_allreduce_time(S, 4, B, chunks=0), ClusterError, "chunks"),
    (lambda: nw.allreduce_time(S, 4, B, algorithm="butterfly"), ClusterError, "ring"),
    (lambda: nw.ps_step_lower_bound(S, 4, 0, B), ClusterError, "shards"),
    (lambda: nw.ps_step_lower_bound(S, 2, 4, B, placement="colocated"), ClusterError, "shards"),
    (lambda: nw.ps_step_lower_bound(S, 2, 1, B, placement="edge"), ClusterError, "placement"),
])
def test_bad_input(call, exc, pat):
    with pytest.raises(exc, match=pat) as info:
        call()
    assert isinstance(info.value, SgdnetError)
