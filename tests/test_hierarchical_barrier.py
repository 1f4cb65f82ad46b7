"""The hierarchical all-reduce's pipelined phases as whole rings (``_ring_pipe(barrier=True)``:
one join per ring instead of a latency stage and a finish per member) give, same seed, the very
bits of the per-member form (built here with ``HIERARCHICAL_BARRIER = False``) whenever a ring's
flows end together, with far fewer transitions."""

from __future__ import annotations

import numpy as np
import pytest

from sgdnet import Cluster, StepSlowdown, Topology, simulate, variants
from sgdnet.variants import collectives

GB = 1e9


def _topo(**kw) -> Topology:
    base = dict(gpus_per_node=4, nics_per_node=2, nic_bandwidth=12.5 * GB,
                intra_bandwidth=150 * GB, intra_latency=3e-6)
    return Topology(**{**base, **kw})


def _build(monkeypatch, barrier: bool, cluster: Cluster, granularity: str, **opts):
    monkeypatch.setattr(collectives, "HIERARCHICAL_BARRIER", barrier)
    return variants.build("allreduce", "resnet18", cluster, granularity=granularity,
                          algorithm="hierarchical", **opts)


def _runs(net, seed: int = 3):
    return simulate(net, steps=24, warmup=4, replications=3, seed=seed, parallel=False)


CASES = {
    "coarse": (dict(workers=16, latency=15e-6), "coarse", {}),
    "coarse-noisy-compute": (dict(workers=16, latency=15e-6, compute_cv=0.2,
                                  speeds=[1.0] * 15 + [0.7]), "coarse", {}),
    "coarse-straggler": (dict(workers=24, latency=10e-6,
                              straggler=StepSlowdown(0.3, 2.0, workers=[5])), "coarse", {}),
    "coarse-one-nic": (dict(workers=12, latency=5e-6), "coarse", {"nics_per_node": 1}),
    "fine": (dict(workers=16, latency=15e-6, compute_cv=0.1), "fine",
             {"ring_form": "pipelined", "max_layers": 4}),
    "fused": (dict(workers=16, latency=15e-6), "fine",
              {"ring_form": "pipelined", "fuse_layers": True}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_whole_rings_give_the_per_member_bits(monkeypatch, case):
    ckw, gran, opts = CASES[case]
    topo = _topo(**{k: opts.pop(k) for k in ("nics_per_node",) if k in opts})
    cl = Cluster(topology=topo, **ckw)
    old = _build(monkeypatch, False, cl, gran, **opts)
    new = _build(monkeypatch, True, cl, gran, **opts)
    assert len(new.transitions) < len(old.transitions)
    a, b = _runs(old), _runs(new)
    np.testing.assert_array_equal(a.sim_time, b.sim_time)
    for ra, rb in zip(a._raws, b._raws):
        np.testing.assert_array_equal(ra.step_times, rb.step_times)
    for w, est in a.throughput_by("worker").items():
        np.testing.assert_array_equal(est.samples, b.throughput_by("worker")[w].samples)


def test_a_ring_is_one_join_and_its_members_end_together(monkeypatch):
    g, N = 4, 3
    cl = Cluster(workers=g * N, latency=10e-6, topology=_topo())
    net = _build(monkeypatch, True, cl, "coarse")
    names = list(net.transitions)
    # per phase and ring: a go, one send per member, one join; no latency or finish stages
    assert not [t for t in names if t.endswith((".lat", ".fin"))]
    joins = [t for t in names if t.endswith(".join")]
    assert len(joins) == N + g + N  # reduce-scatter per node, inter-node per rank, all-gather
    # the per-member form: the same rings with a latency stage per send and a finish per
    # member of the last phase
    old = _build(monkeypatch, False, cl, "coarse")
    assert len(old.transitions) - len(net.transitions) == \
        3 * g * N - (N + g + N) + g * N


def test_cpu_stages_keep_the_per_member_form(monkeypatch):
    cl = Cluster(workers=8, latency=10e-6, send_s_per_byte=1e-11, topology=_topo())
    net = _build(monkeypatch, True, cl, "coarse")
    assert not [t for t in net.transitions if t.endswith(".join")]
    assert [t for t in net.transitions if t.endswith(".fin")]
