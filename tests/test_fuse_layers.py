"""``fuse_layers=True`` (fine all-reduce nets): each gradient bucket's layers merged into one
forward and one backward transition per worker.

A bucket's layers run back to back on the GPU between the same two events (their parameters
come back together, their gradients are ready after the bucket's last backward), so without
compute noise, GPU-side updates or per-byte CPU costs the fused net plays the per-layer net's
times (to rounding: one sum instead of several); checked on several bucket layouts, both
overlap settings, ring and hierarchical all-reduces. Under noise the merged layers keep the
mean and variance of their sum, so throughputs agree within their confidence intervals.
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, Topology, simulate, variants

TOY = ModelProfile("toy5", [Layer("a", 0.004, 0.008, 8e6), Layer("b", 0.006, 0.012, 20e6),
                            Layer("c", 0.002, 0.004, 12e6), Layer("d", 0.003, 0.005, 3e6),
                            Layer("e", 0.001, 0.002, 9e6)], batch_size=32, device="test",
                   source="hand-made for tests")
KW = dict(steps=30, warmup=5, replications=1, seed=0, parallel=False)


def _thr(cl: Cluster, fuse: bool, **opts) -> float:
    net = variants.build("allreduce", TOY, cl, fuse_layers=fuse, **opts)
    n = cl.workers
    return simulate(net, **{**KW, "steps": KW["steps"] * n, "warmup": KW["warmup"] * n}
                    ).throughput.mean


@pytest.mark.parametrize("bucket_bytes", [0, 15e6, 25e6, math.inf])
@pytest.mark.parametrize("overlap", [True, False])
def test_fused_net_plays_the_per_layer_times(bucket_bytes, overlap):
    cl = Cluster(workers=4, bandwidth="10Gbps", latency="20us")
    a = _thr(cl, False, bucket_bytes=bucket_bytes, overlap=overlap)
    b = _thr(cl, True, bucket_bytes=bucket_bytes, overlap=overlap)
    assert b == pytest.approx(a, rel=1e-12)


def test_fused_hierarchical_on_a_topology_and_fewer_transitions():
    t = Topology(gpus_per_node=2, intra_bandwidth="100GB/s", nics_per_node=1,
                 nic_bandwidth="10Gbps")
    cl = Cluster(workers=6, latency="10us", topology=t)
    opts = dict(algorithm="hierarchical", bucket_bytes=25e6)
    assert _thr(cl, True, **opts) == pytest.approx(_thr(cl, False, **opts), rel=1e-12)
    sizes = {f: len(variants.build("allreduce", TOY, cl, fuse_layers=f, **opts).transitions)
             for f in (False, True)}
    n_buckets = len(TOY.buckets(25e6))
    # per worker: 2 L compute transitions become 2 x (buckets)
    assert sizes[False] - sizes[True] == 6 * 2 * (TOY.n_layers - n_buckets)


def test_noisy_fused_net_agrees_within_confidence_intervals():
    cl = Cluster(workers=3, bandwidth="10Gbps", latency="20us", compute_cv=0.3, comm_cv=0.1)
    kw = dict(steps=300, warmup=30, replications=6, seed=5, parallel=False)
    est = {}
    for f in (False, True):
        net = variants.build("allreduce", TOY, cl, fuse_layers=f, bucket_bytes=25e6)
        est[f] = simulate(net, **{**kw, "steps": kw["steps"] * 3, "warmup": kw["warmup"] * 3}
                          ).throughput
    a, b = est[False], est[True]
    assert abs(a.mean - b.mean) <= math.hypot(a.half_width(), b.half_width())
    assert a.half_width() < 0.02 * a.mean  # the test can tell a 2 % bias
