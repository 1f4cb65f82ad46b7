"""``sgdnet.anchor``: a profile rescaled so that the one-GPU prediction equals a measured rate,
checked against the closed form of the one-GPU step (compute / speed + what does not scale)."""

from __future__ import annotations

import pytest

from sgdnet import Cluster, Topology, VariantError, models
from sgdnet.anchor import anchor_profile, one_gpu_cluster

M50 = models.load("resnet50").scaled(batch_size=64)


def test_without_communication_the_speed_is_the_pure_compute_ratio():
    # allreduce on one GPU communicates nothing: rate = batch / (step_s / speed)
    a = anchor_profile("allreduce", M50, Cluster(workers=8), 150.0, granularity="coarse")
    assert a.speed == pytest.approx(150.0 * M50.step_s / 64, rel=1e-9)
    assert a.iterations == 1
    assert 64 / a.profile.step_s == pytest.approx(150.0, rel=1e-9)


def test_a_ps_round_trip_stays_in_the_one_gpu_step():
    # coarse sync PS, one worker, dedicated PS: step = compute + 2 (M / B + latency)
    cl = Cluster(workers=4, bandwidth="10Gbps", latency="50us")
    a = anchor_profile("sync-ps", M50, cl, 80.0, granularity="coarse")
    comm = 2 * (M50.grad_bytes / 1.25e9 + 50e-6)
    assert 64 / (a.profile.step_s + comm) == pytest.approx(80.0, rel=1e-6)
    assert a.iterations <= 4  # the secant is exact once the critical path is fixed


def test_one_gpu_cluster_keeps_the_nodes_links():
    topo = Topology(gpus_per_node=8, intra="pcie", intra_bandwidth="12GB/s", nics_per_node=2,
                    nic_bandwidth="25Gbps")
    one = one_gpu_cluster(Cluster(workers=16, topology=topo, ps_placement="colocated",
                                  ps_shards=2))
    assert one.workers == 1 and one.ps_shards == 1
    assert one.topology.gpus_per_node == 1 and one.topology.nics_per_node == 1
    assert one.topology.intra_bandwidth == topo.intra_bandwidth
    assert one.topology.nic_bandwidth == topo.nic_bandwidth


def test_an_unreachable_rate_is_refused_with_the_rate_reached():
    # the PS round trip alone takes 2 * 102 MB / 1.25 GB/s = 0.16 s: 64 / 0.16 = 390 samples/s
    # is the ceiling, so 1,000 samples/s cannot be reached by any compute speed
    cl = Cluster(workers=4, bandwidth="10Gbps")
    with pytest.raises(VariantError, match="not the measured 1000"):
        anchor_profile("sync-ps", M50, cl, 1000.0, granularity="coarse", max_iter=4)


@pytest.mark.parametrize("bad", [0, -3.0, float("nan"), "fast", True])
def test_bad_rates_are_refused(bad):
    with pytest.raises(VariantError, match="samples_per_s"):
        anchor_profile("allreduce", M50, Cluster(workers=2), bad)


def test_cli_one_gpu_anchors_the_one_worker_row(capsys):
    # allreduce on one GPU is pure compute: the 1-worker row's samples/s is the given rate
    import json

    from sgdnet.cli import main

    rc = main(["predict", "--model", "resnet50", "--variant", "allreduce", "--workers", "1,2",
               "--batch-size", "64", "--one-gpu", "219", "--granularity", "coarse",
               "--steps", "20", "--replications", "1", "--json", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0 and "anchored on 219 samples/s" in out.err
    rows = json.loads(out.out)["rows"]
    assert rows[0]["samples_per_s_mean"] == pytest.approx(219.0, rel=1e-6)


@pytest.mark.parametrize("bad", ["0", "-5", "fast", "nan"])
def test_cli_one_gpu_refuses_a_rate_that_is_not_positive(bad, capsys):
    from sgdnet.cli import main

    rc = main(["predict", "--variant", "allreduce", "--one-gpu", bad])
    assert rc == 2 and "--one-gpu" in capsys.readouterr().err
