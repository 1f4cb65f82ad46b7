"""Framework profiles (sgdnet.workload.frameworks), fusion and bucketing closed forms (messages
per step), transports (sgdnet.workload.transports), predict(framework=...) and the CLI.

Sources: PyTorch DDP (torch/nn/parallel/distributed.py: bucket_cap_mb=25;
torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB; reducer.cpp
compute_bucket_assignment_by_size: a bucket closes once its size reaches its limit, limits
[first, cap]); Horovod docs/tensor-fusion.rst (ready tensors fused each cycle up to
HOROVOD_FUSION_THRESHOLD) and CHANGELOG v0.21.0 (#2468: cycle 1 ms, threshold 128 MB);
NVIDIA/nccl#812 (192 GB/s bus bandwidth on 8 x 200 Gbit/s HDR: 96% of line rate); TCP/IPv4 at
MTU 1500: 1448 payload bytes per 1538 wire bytes.
"""

from __future__ import annotations

import math

import pytest

import sgdnet
from sgdnet.errors import ClusterError, UnknownNameError, VariantError
from sgdnet.prediction import apply_framework
from sgdnet.variants import build
from sgdnet.variants.allreduce import cycle_buckets, fusion_buckets
from sgdnet.workload import Cluster, ModelProfile, Topology
from sgdnet.workload.frameworks import FRAMEWORKS, framework_options
from sgdnet.workload.transports import TRANSPORTS, apply_transport

MIB = 2 ** 20


def uniform(n, nbytes, fwd=1e-3, bwd=2e-3):
    return ModelProfile("uniform", [{"name": f"l{i}", "forward_s": fwd, "backward_s": bwd,
                                     "grad_bytes": nbytes} for i in range(n)], batch_size=32)


def test_ddp_messages_per_step_closed_form():
    # N layers of s bytes: the first bucket closes after ceil(f/s) layers, each later one after
    # ceil(c/s): 1 + ceil((N - ceil(f/s)) / ceil(c/s)) messages
    n, s = 100, 0.75 * MIB
    f, c = 1 * MIB, 25 * MIB
    _, opts = framework_options("ddp")
    assert (opts["bucket_bytes"], opts["first_bucket_bytes"]) == (c, f)
    b = fusion_buckets(uniform(n, s), opts["bucket_bytes"], "ddp", opts["first_bucket_bytes"])
    head, per = math.ceil(f / s), math.ceil(c / s)
    assert len(b) == 1 + math.ceil((n - head) / per) == 4
    assert [len(g) for g in b[:2]] == [head, per]
    assert b[0] == [99, 98]  # reverse parameter order: the last layers' gradients first
    # without the small first bucket, DDP's rule alone: ceil(N / ceil(c/s))
    assert len(fusion_buckets(uniform(n, s), c)) == math.ceil(n / per)


def test_horovod_static_fusion_closed_form():
    # Horovod's rule: a bucket holds floor(c/s) layers: ceil(N / floor(c/s)) messages
    n, s, c = 50, 3 * MIB, 128 * MIB
    b = fusion_buckets(uniform(n, s), c, "horovod")
    assert len(b) == math.ceil(n / math.floor(c / s)) == 2


def test_horovod_cycle_fusion_closed_form():
    # backward b = cycle/4 per layer, forward total = m cycles + cycle/8: the first cycle takes
    # 3 gradients, every later one 4, and each fused all-reduce waits cycle/8 for its tick
    cyc, n = 1e-3, 23
    bwd = cyc / 4
    fwd = (3 * cyc + cyc / 8) / n
    buckets, delays = cycle_buckets(uniform(n, 1e3, fwd, bwd), cyc, 128 * MIB)
    assert len(buckets) == 1 + math.ceil((n - 3) / 4) == 6
    assert [len(g) for g in buckets] == [3, 4, 4, 4, 4, 4]
    assert delays == pytest.approx([cyc / 8] * 6)
    # the threshold still cuts a cycle's tensors (Horovod's rule inside one cycle)
    buckets, _ = cycle_buckets(uniform(n, 1 * MIB, fwd, bwd), cyc, 2 * MIB)
    assert [len(g) for g in buckets][:3] == [2, 1, 2]
    # in the net: one delay transition of cycle/8 per worker and bucket
    net = build("allreduce", uniform(n, 1e3, fwd, bwd), Cluster(workers=2), "fine",
                cycle_time=cyc, bucket_bytes=128 * MIB)
    assert net.transitions["w1.b5.cycle"].duration.mean == pytest.approx(cyc / 8)


def test_framework_profiles_name_their_variants_and_defaults():
    assert set(FRAMEWORKS) == {"ddp", "horovod", "tf-ps", "tf-replicated", "byteps",
                               "mxnet-kvstore"}
    assert framework_options("horovod")[1]["bucket_bytes"] == 128 * MIB
    assert framework_options("horovod")[1]["cycle_time"] == 1e-3
    assert framework_options("tf-ps")[1]["aggregation"] == "none"
    for fw in ("tf-replicated", "byteps", "mxnet-kvstore"):
        v, o = framework_options(fw)
        assert (v, o["aggregation"]) == ("sync-ps", "node")
    assert framework_options("byteps")[1]["partition_bytes"] == 4096000
    topo = Topology(gpus_per_node=4, nics_per_node=1)
    assert framework_options("byteps", cluster=Cluster(workers=12, topology=topo))[1][
        "shards"] == 3
    with pytest.raises(VariantError, match="runs variant 'allreduce'"):
        framework_options("ddp", "sync-ps")
    with pytest.raises(UnknownNameError, match="unknown framework"):
        framework_options("caffe")


def test_explicit_options_win_and_transport_applies():
    c = Cluster(workers=4, bandwidth="10Gbps")
    v, clu, o = apply_framework(None, c, {"bucket_bytes": 5 * MIB}, "ddp")
    assert (v, o["bucket_bytes"], o["first_bucket_bytes"]) == ("allreduce", 5 * MIB, MIB)
    assert clu.bandwidth == c.bandwidth  # NCCL frameworks: the cluster's NICs as given
    _, clu, _ = apply_framework(None, c, {}, "tf-ps")  # gRPC: TCP
    assert clu.bandwidth == pytest.approx(c.bandwidth * 1448 / 1538)
    _, clu, _ = apply_framework(None, c, {}, "tf-ps", transport=None)
    assert clu.bandwidth == c.bandwidth
    with pytest.raises(VariantError, match="no variant"):
        apply_framework(None, c, {})


def test_transports():
    assert TRANSPORTS["tcp"].goodput == pytest.approx(1448 / 1538)
    assert TRANSPORTS["rdma"].goodput == pytest.approx(192 / 200)  # NVIDIA/nccl#812
    topo = Topology(gpus_per_node=8, nics_per_node=8, nic_bandwidth="200Gbps")
    c = Cluster(workers=16, topology=topo, latency="50us")
    r = apply_transport(c, "rdma")
    assert r.topology.nic_bandwidth == pytest.approx(25e9 * 0.96)
    assert r.topology.intra_bandwidth == c.topology.intra_bandwidth
    assert r.latency == TRANSPORTS["rdma"].latency
    assert r.send_s_per_byte == 0 and apply_transport(c, "tcp", cpu_costs=True).recv_s_per_byte > 0
    with pytest.raises(ClusterError, match="unknown transport"):
        apply_transport(c, "carrier-pigeon")


def test_predict_with_a_framework_equals_its_options_spelt_out():
    c = Cluster(workers=4, bandwidth="10Gbps", latency="20us")
    kw = dict(granularity="coarse", steps=20, replications=1, seed=0)
    a = sgdnet.predict(None, "resnet50", c, framework="horovod", **kw)
    _, opts = framework_options("horovod")
    b = sgdnet.predict("allreduce", "resnet50", c, **opts, **kw)
    assert a.samples_per_s.mean == b.samples_per_s.mean
    assert a.options["algorithm"] == "nccl"


def test_cli_predict_framework(capsys):
    from sgdnet.cli import main

    rc = main(["predict", "--framework", "ddp", "--model", "resnet50", "--workers", "2",
               "--granularity", "coarse", "--steps", "5", "--replications", "1",
               "--no-progress", "--json"])
    assert rc == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["variant"] == "allreduce" and out["options"]["algorithm"] == "nccl"
