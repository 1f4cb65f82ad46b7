"""The update schedules read from simulated runs, against closed forms.

Bounds tested (derivations in the test docstrings):

* sync PS (and backup workers): staleness 0 for every gradient, whatever the speeds and noise;
  every update holds one gradient of each of ``n`` workers (``n - b`` with backups);
* async PS, ``n`` identical deterministic workers, a PS CPU that serialises the updates:
  staleness exactly ``n - 1`` after the first round; without an update cost the ``n``
  gradients of a round arrive at one instant: staleness takes each value ``0..n-1`` once a
  round;
* SSP(s) on a coarse net: staleness at most ``(n - 1)(2 s + 3)``; async PS on the same cluster
  exceeds it when one worker is 10x slower;
* pipe-sgd(width): staleness ``width - 1`` (after the first updates), allreduce 0;
* the schedule's staleness is the multiset :func:`sgdnet.metrics.staleness` counts.
"""

from __future__ import annotations

import numpy as np
import pytest

import sgdnet
from sgdnet.accuracy import Schedule, schedule_of
from sgdnet.errors import SimulationError, VariantError


def _run(variant, cluster, steps=30, granularity="coarse", reps=1, **opts):
    return sgdnet.predict(variant, "resnet50", cluster, granularity=granularity, steps=steps,
                          warmup=0, replications=reps, seed=5, trace=True, parallel=False,
                          **opts)


@pytest.mark.parametrize("granularity,opts", [("coarse", {}), ("fine", {"max_layers": 4})])
def test_sync_ps_staleness_zero_with_stragglers(granularity, opts):
    cl = sgdnet.Cluster(workers=4, speeds=[1, 1, 0.7, 0.3], compute_cv=0.3, comm_cv=0.2)
    p = _run("sync-ps", cl, granularity=granularity, reps=2, **opts)
    for rep in range(2):
        s = schedule_of(p, rep)
        assert s.updates >= 25
        assert np.all(s.staleness == 0)
        # one gradient of every worker per update
        assert np.all(np.bincount(s.grad_update) == 4)
        assert np.all(np.diff(s.update_time) > 0)
        assert np.all(s.grad_samples == p.model.batch_size)


def test_async_ps_serialised_updates_staleness_n_minus_1():
    """Identical deterministic workers, each PS update ``u > 0`` s on the one PS CPU: in the
    periodic regime every worker makes one update per period and no two updates end together,
    so between worker i's pull (which starts when its own update ends, before the next update
    can end) and its next update every other worker applies exactly one: ``n - 1``."""
    for n in (2, 4, 6):
        cl = sgdnet.Cluster(workers=n, update_s_per_layer=0.005)
        s = schedule_of(_run("async-ps", cl, steps=20))
        assert s.updates >= 19 * n  # the last gradients are still in flight at the end
        st = s.staleness[s.grad_update >= n]
        assert np.all(st == n - 1), (n, np.unique(st))
        assert list(s.staleness[:n]) == list(range(n))  # the first round: 0, 1, ..., n-1


def test_async_ps_simultaneous_round_staleness_is_each_rank_once():
    """Without an update cost the ``n`` identical gradients of a round are applied at one
    instant and every worker then pulls all of them: in each later round the gradient applied
    ``j``-th of the round has staleness ``j`` (``0..n-1``)."""
    n = 4
    s = schedule_of(_run("async-ps", sgdnet.Cluster(workers=n), steps=20))
    st = s.staleness.reshape(-1, n)
    assert np.all(np.sort(st, axis=1) == np.arange(n))


@pytest.mark.parametrize("s_bound", [0, 1, 3])
def test_ssp_staleness_bound(s_bound):
    """SSP(s), worker i's ``m``-th gradient. i started step m only when every worker had
    completed at least ``m - 1 - s`` steps (the lag gate: ``count_i - min <= s``); in a coarse
    PS net a worker's next compute needs the pull of its last update, so it has at most one
    gradient not yet applied: at i's read every other worker ``j`` had applied at least
    ``m - 2 - s`` updates. Until i's step m completes, ``min <= m - 1``, so ``j`` starts at most
    step ``m + s``, and at most step ``m + s + 1`` before i's update is applied: ``j`` applies
    at most ``2 s + 3`` updates in between, staleness ``<= (n - 1)(2 s + 3)``."""
    n = 4
    cl = sgdnet.Cluster(workers=n, speeds=[1, 0.8, 0.5, 0.1], compute_cv=0.3,
                        update_s_per_layer=0.001)
    s = schedule_of(_run("ssp", cl, steps=60, staleness=s_bound))
    bound = (n - 1) * (2 * s_bound + 3)
    assert s.staleness.max() <= bound
    if s_bound == 0:
        a = schedule_of(_run("async-ps", cl, steps=60))
        assert a.staleness.max() > bound  # async is bounded by nothing


def test_staleness_matches_metrics():
    cl = sgdnet.Cluster(workers=3, speeds=[1, 0.6, 0.4], compute_cv=0.2)
    for v, o in (("async-ps", {}), ("dssp", {"s_lower": 1}), ("ssp", {"staleness": 2})):
        p = _run(v, cl, steps=25, **o)
        s = schedule_of(p)
        ref = np.sort(sgdnet.metrics.staleness(p.result))
        assert np.array_equal(np.sort(s.staleness), ref), v


def test_lockstep_all_reduce_variants():
    cl = sgdnet.Cluster(workers=3, compute_cv=0.1)
    s = schedule_of(_run("allreduce", cl))
    assert np.all(s.staleness == 0) and s.updates == 30
    for width in (2, 3):
        s = schedule_of(_run("pipe-sgd", cl, width=width))
        assert np.all(s.staleness[s.grad_update >= width - 1] == width - 1)
        assert np.all(s.staleness[s.grad_update < width - 1] == s.grad_update[s.grad_update <
                                                                               width - 1])


def test_backup_rounds():
    n, b = 4, 1
    cl = sgdnet.Cluster(workers=n, compute_cv=0.3)
    s = schedule_of(_run("backup", cl, steps=30, backups=b))
    counts = np.bincount(s.grad_update)
    assert np.all(counts == n - b)
    for u in range(s.updates):  # distinct workers in a round
        w = s.grad_worker[s.grad_update == u]
        assert len(set(w.tolist())) == n - b
    assert np.all(s.staleness == 0)


def test_local_rounds():
    cl = sgdnet.Cluster(workers=3, speeds=[1, 1, 0.5])
    for v, key in (("local-sgd", "H"), ("cocod", "k")):
        s = schedule_of(_run(v, cl, steps=24, **{key: [4, 4, 2]}))
        assert s.kind == "local"
        R = s.round_time.size
        assert R >= 4
        assert list(s.round_steps) == [4, 4, 2]
        assert s.updates == R * 10
        assert np.all(np.diff(s.round_time) > 0)
        # a round ends after each worker's steps of that round
        for w, h in enumerate([4, 4, 2]):
            t = s.step_time[s.step_worker == w].reshape(R, h)
            if v == "local-sgd":
                assert np.all(t[:, -1] <= s.round_time + 1e-12)


def test_errors():
    p = sgdnet.predict("async-ps", "resnet50", sgdnet.Cluster(workers=2), granularity="coarse",
                       steps=5, replications=1, seed=0)
    with pytest.raises(SimulationError, match="trace=True"):
        schedule_of(p)
    with pytest.raises(VariantError, match=r"reads\[1\]=2"):
        Schedule.from_reads([0, 2])
    s = Schedule.from_reads([0, 0, 1], workers=[0, 1, 0])
    assert list(s.staleness) == [0, 1, 1] and list(s.grad_step) == [0, 0, 1]


# ------------------------------------------------------------- per-node aggregation (node tag)
def _node_cluster(g: int) -> sgdnet.Cluster:
    from sgdnet.workload.topology import Topology

    return sgdnet.Cluster(workers=4, speeds=(1.0, 1.0, 1.0, 0.5),
                          topology=Topology(gpus_per_node=g, nic_bandwidth="10Gbps"))


def _sched(variant: str, cl, **kw):
    return schedule_of(sgdnet.predict(variant, "resnet50", cl, granularity="coarse", steps=40,
                                      warmup=0, replications=1, trace=True, seed=0, **kw))


@pytest.mark.parametrize("variant", ["async-ps", "ssp", "dssp", "sync-ps"])
def test_nodes_of_one_gpu_give_the_per_gpu_schedule(variant):
    """On nodes of one GPU per-node aggregation changes nothing (the per-GPU net is the
    oracle, as in tests/test_ps_aggregation.py), so neither does the schedule read from it."""
    a = _sched(variant, _node_cluster(1))
    b = _sched(variant, _node_cluster(1), aggregation="node")
    assert a.updates == b.updates > 30
    for k in ("grad_update", "grad_worker", "grad_read", "grad_samples", "grad_step"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    np.testing.assert_allclose(a.update_time, b.update_time, rtol=1e-12)


@pytest.mark.parametrize("variant", ["async-ps", "ssp", "dssp"])
def test_per_node_async_updates_sum_the_gpus_of_one_node(variant):
    """Nodes of 2 GPUs: every update applies one gradient of each GPU of one node (node 0 =
    GPUs 0, 1), all read the same version, and each node's GPUs have as many gradients as the
    node has updates."""
    s = _sched(variant, _node_cluster(2), aggregation="node")
    assert s.updates > 20
    for u in range(s.updates):
        sel = s.grad_update == u
        w = s.grad_worker[sel]
        assert sorted(w.tolist()) in ([0, 1], [2, 3])
        assert np.unique(s.grad_read[sel]).size == 1
    assert np.all(s.staleness >= 0)
    node = s.grad_worker // 2
    for m in (0, 1):
        assert np.unique(s.grad_update[node == m]).size == np.sum(node == m) // 2


def test_per_node_time_to_accuracy_runs():
    from sgdnet.accuracy import Target, time_to_accuracy

    r = time_to_accuracy("async-ps", "resnet50", _node_cluster(2),
                         Target("logreg", loss=0.45), replications=2, steps=80,
                         method="replay", aggregation="node")
    assert r.reached == 2 and r.wall_time.mean > 0
