"""``Cluster(comm_uses_compute=True)``: transfers also hold the receiver's compute resource.

With CPU collectives (gloo) the host that receives a message copies and reduces it on the same
cores that compute, so communication cannot hide behind computation. Deterministic closed forms
(latency 0, so every ring round holds a GPU): overlapping buckets then cost exactly the
no-overlap step ``T_c + 2(n-1)/n * M/B``; CoCoD's background all-reduce costs ``k T_c + T_AR``
instead of ``max(k T_c, T_AR)``; Pipe-SGD's step ``T_c + T_AR`` instead of ``max``.
"""

import functools

import pytest

from sgdnet import Cluster, Layer, ModelProfile, simulate, variants
from sgdnet.errors import ClusterError
from sgdnet.workload import ring_allreduce_time

#: comm_uses_compute is a flag of the FIFO/ps NIC models
build = functools.partial(variants.build, discipline="fifo")

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
TC = PROF.compute_s


def cluster(n, bw, uses):
    return Cluster(workers=n, bandwidth=bw, latency=0, comm_uses_compute=uses)


def period(net, n, steps_per_period, periods=12, warmup_periods=12):
    k = n * steps_per_period
    r = simulate(net, steps=k * periods, warmup=k * warmup_periods, replications=1, seed=0)
    return float(r.sim_time[0]) / periods


def t_ar(c):
    return ring_allreduce_time(PROF.grad_bytes, c.workers, c.bandwidth, c.latency)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("bw", ["1Gbps", "10Gbps"])
def test_overlapping_buckets_cost_the_no_overlap_step(n, bw):
    want = TC + t_ar(cluster(n, bw, True))
    on = period(build("allreduce", PROF, cluster(n, bw, True), bucket_bytes=0), n, 1)
    off = period(build("allreduce", PROF, cluster(n, bw, False), bucket_bytes=0), n, 1)
    assert on == pytest.approx(want, rel=1e-9)
    assert off < want * (1 - 1e-3)          # with NIC-only transfers the buckets do overlap


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("bw", ["1Gbps", "10Gbps"])
def test_cocod_background_allreduce_is_not_free(granularity, k, bw):
    c = cluster(4, bw, True)
    net = build("cocod", PROF, c, granularity=granularity, k=k)
    assert period(net, 4, k) == pytest.approx(k * TC + t_ar(c), rel=1e-9)


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
def test_pipe_sgd_no_longer_pipelines(granularity):
    c = cluster(4, "10Gbps", True)
    net = build("pipe-sgd", PROF, c, granularity=granularity, width=2)
    assert period(net, 4, 1) == pytest.approx(TC + t_ar(c), rel=1e-9)


@pytest.mark.parametrize("name", ["sync-ps", "async-ps", "backup"])
def test_ps_variants_hold_compute_on_the_receiving_side(name):
    c = cluster(4, "10Gbps", True)
    net = build(name, PROF, c)
    pulls = [t for t in net.transitions.values()
             if t.tags.get("kind") == "comm" and any(r.endswith(".gpu") for r in t.resources)]
    pushes = [t for t in net.transitions.values()
              if t.tags.get("kind") == "comm" and any(r.endswith(".cpu") for r in t.resources)]
    assert pulls and pushes                  # pulls hold the worker, pushes the PS CPU
    fast = simulate(build(name, PROF, c.replace(comm_uses_compute=False)), steps=40,
                    warmup=8, replications=1, seed=0).throughput.mean
    slow = simulate(net, steps=40, warmup=8, replications=1, seed=0).throughput.mean
    assert slow < fast


def test_flag_is_validated_and_round_trips():
    with pytest.raises(ClusterError, match="comm_uses_compute='yes'"):
        Cluster(comm_uses_compute="yes")
    c = Cluster(workers=3, comm_uses_compute=True)
    assert Cluster.from_dict(c.to_dict()) == c
