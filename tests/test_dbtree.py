"""NCCL's double binary tree all-reduce (``algorithm="dbtree"``): the trees' shape as NCCL
builds them (ncclGetBtree / ncclGetDtree) and its cost, derived by hand for flows over
per-worker NICs (uplink and downlink of B bytes/s, latency alpha, each tree carrying S/2)."""

from __future__ import annotations

import math

import pytest
from test_looped_ring import _end

from sgdnet import Cluster, predict
from sgdnet.variants.collectives import double_binary_tree, nccl_btree

S, ALPHA, B = 512e6, 5e-6, 10e9


def test_nccl_btree_of_eight_ranks():
    # NCCL: 0 is the root with the one child 4; 4 -> {2, 6}; 2 -> {1, 3}; 6 -> {5, 7}
    assert nccl_btree(8, 0) == (-1, [4])
    assert nccl_btree(8, 4) == (0, [2, 6])
    assert nccl_btree(8, 2) == (4, [1, 3]) and nccl_btree(8, 6) == (4, [5, 7])
    assert all(nccl_btree(8, r) == ((r ^ 1) | 2, []) for r in (1, 3, 5, 7))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 64, 100])
def test_two_trees_span_every_rank_and_share_no_inner_node(n):
    for parent in double_binary_tree(n):
        assert sorted(parent) == list(range(n)) and list(parent.values()).count(-1) == 1
        for r in range(n):  # every rank reaches the root within ceil(log2 n) + 1 hops
            hops, x = 0, r
            while parent[x] >= 0:
                x, hops = parent[x], hops + 1
            assert hops <= math.ceil(math.log2(n)) + 1
        kids = [list(parent.values()).count(r) for r in range(n)]
        assert max(kids) <= 2
    inner = [{p for p in t.values() if p >= 0} for t in double_binary_tree(n)]
    # NCCL's point: a rank is an inner node of at most one tree (odd n: but rank 0, the
    # one-child root of tree 0)
    assert inner[0] & inner[1] <= ({0} if n % 2 else set())


def test_double_tree_time_on_two_and_four_ranks():
    """n = 2: each tree moves S/2 once up and once down, the two in opposite directions, so
    ``2 (alpha + S/(2B))``. n = 4 (tree 0: 0 <- 2 <- {1, 3}; tree 1: 3 <- 1 <- {2, 0}): the
    leaves' reduces share the parents' downlinks (S/2 at B/2), the inner nodes' reduces and the
    roots' broadcasts are alone (S/2 at B), the inner nodes' two broadcasts share their
    uplinks: ``4 alpha + 3 S/B``, below the single tree (at least ``4 (alpha + S/B)``)."""
    two = Cluster(workers=2, bandwidth=B, latency=ALPHA)
    assert _end(two, "dbtree", "auto") == pytest.approx(2 * (ALPHA + S / (2 * B)), rel=1e-12)
    four = Cluster(workers=4, bandwidth=B, latency=ALPHA)
    assert _end(four, "dbtree", "auto") == pytest.approx(4 * ALPHA + 3 * S / B, rel=1e-12)
    assert _end(four, "tree", "auto") >= 4 * (ALPHA + S / B)


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_dbtree_variant_predicts(granularity):
    cl = Cluster(workers=6, bandwidth="10Gbps", latency=ALPHA)
    p = predict("allreduce", "resnet18", cl, algorithm="dbtree", granularity=granularity,
                steps=5, replications=1, parallel=False)
    assert p.samples_per_s.mean > 0
