"""Variants II against deterministic closed forms (exact to 1e-9 relative).

Homogeneous workers, deterministic durations: ``local-sgd`` period ``H T_c + T_AR``; ``cocod``
period ``max(k T_c, T_AR)`` after the first round; ``pipe-sgd`` step ``max(T_c, T_AR)`` (and
``T_c + T_AR`` for width 1); ``backup`` with ``b = 0`` (and, with identical workers, any ``b``)
equals synchronous PS SGD. ``T_AR`` is :func:`sgdnet.workload.ring_allreduce_time`. DSSP on
free messages (latency ``L`` only, speeds 1, 0.8, 0.5): capped at ``S_U = 0`` every worker's step
is ``T_c / 0.5 + 2L``; uncapped the fastest runs at ``T_c + 2L``.
"""

import functools
import math

import numpy as np
import pytest

from sgdnet import Cluster, Layer, ModelProfile, variants
from sgdnet.engine import simulate
from sgdnet.variants.parameter_server import build_ps_net
from sgdnet.workload import ring_allreduce_time

#: closed forms of the FIFO NIC model (flows: tests/test_fabric_flows.py)
build = functools.partial(variants.build, discipline="fifo")

N = 4
PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
TC = PROF.compute_s
FAST = Cluster(workers=N, bandwidth="10Gbps", latency="50us")   # T_AR < T_c
SLOW = Cluster(workers=N, bandwidth="1Gbps", latency="50us")    # T_AR > T_c


def t_ar(c):
    return ring_allreduce_time(PROF.grad_bytes, N, c.bandwidth, c.latency)


def per_worker_period(net, steps_per_period, periods=12, warmup_periods=6):
    """Time per period from a deterministic run (one replication; n workers' steps counted)."""
    k = N * steps_per_period
    r = simulate(net, steps=k * periods, warmup=k * warmup_periods, replications=1, seed=0)
    return float(r.sim_time[0]) / periods


def rel(a, b):
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("H", [1, 3])
@pytest.mark.parametrize("cluster", [FAST, SLOW], ids=["fast-net", "slow-net"])
def test_local_sgd_period(granularity, H, cluster):
    net = build("local-sgd", PROF, cluster, granularity=granularity, H=H)
    assert rel(per_worker_period(net, H), H * TC + t_ar(cluster)) < 1e-9


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("cluster", [FAST, SLOW], ids=["fast-net", "slow-net"])
def test_cocod_period(granularity, k, cluster):
    net = build("cocod", PROF, cluster, granularity=granularity, k=k)
    assert rel(per_worker_period(net, k), max(k * TC, t_ar(cluster))) < 1e-9


@pytest.mark.parametrize("granularity, opts", [("coarse", {}), ("fine", {}),
                                               ("fine", {"bucket_bytes": math.inf})])
@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("cluster", [FAST, SLOW], ids=["fast-net", "slow-net"])
def test_pipe_sgd_step(granularity, opts, width, cluster):
    net = build("pipe-sgd", PROF, cluster, granularity=granularity, width=width, **opts)
    want = TC + t_ar(cluster) if width == 1 else max(TC, t_ar(cluster))
    # the first steps run ahead on the initial credits: warm up past them
    assert rel(per_worker_period(net, 1, warmup_periods=6 * width), want) < 1e-9


def test_pipe_sgd_fine_buckets_overlap_backward():
    # one bucket per layer: the last layers' all-reduces start during the backward, so a
    # width-1 step is shorter than compute + one whole-model all-reduce
    c = SLOW
    net = build("pipe-sgd", PROF, c, granularity="fine", width=1, bucket_bytes=0)
    assert per_worker_period(net, 1) < TC + t_ar(c) * (1 - 1e-6)


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("cluster", [FAST, SLOW.replace(update_s_per_byte=1e-10)],
                         ids=["fast-net", "slow-net+update"])
def test_backup_without_backups_is_sync_ps(granularity, cluster):
    # b = 0 is synchronous SGD on a PS: compared with the synchronous PS net of common.py
    # (what sync-ps builds) in its coarse form, compute then push / update / pull. Backup's fine
    # net pushes once the whole backward is done, so it times like the coarse one.
    net = build("backup", PROF, cluster, granularity=granularity, backups=0)
    ref = build_ps_net("sync", PROF, cluster, synchronous=True, coarse=True, discipline="fifo")
    assert rel(per_worker_period(net, 1), per_worker_period(ref, 1)) < 1e-9


@pytest.mark.parametrize("late", ["finish", "abort"])
def test_backup_rounds_do_not_wait_for_the_last_pushes(late):
    # pushes queue at the PS NIC, so the last b arrivals come later: dropping them shortens a
    # round by exactly b pushes' worth at least, never lengthens it
    c = SLOW
    r0 = per_worker_period(build("backup", PROF, c, granularity="coarse", backups=0), 1)
    r1 = per_worker_period(build("backup", PROF, c, granularity="coarse", backups=1,
                                          late=late), 1) * (N - 1) / N  # N-1 steps a round
    assert r1 < r0 * (1 - 1e-6)


#: DSSP on free messages: one compute op, zero bytes, pushes and pulls that take the latency L
ONE = ModelProfile("one", [Layer("all", 0.010, 0.020, 0.0)], batch_size=32)
DSSP_C = Cluster(workers=3, speeds=[1.0, 0.8, 0.5], latency="1ms", update_s_per_layer=0,
                 update_s_per_byte=0)


def worker_periods(net):
    """Each worker's (min, max) time between its counted steps in a deterministic run."""
    r = simulate(net, steps=600, warmup=60, replications=1, seed=0)
    t, tr = r.step_completion_times(0)
    out = {}
    for i in range(3):
        step = next(n for n, x in net.transitions.items() if x.is_step and x.tags.get("worker") == i)
        d = np.diff(t[tr == r.transition_names.index(step)])
        out[i] = (float(d.min()), float(d.max()))
    return out


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_dssp_capped_at_zero_is_bsp_paced_by_the_slowest(granularity):
    # S_L = S_U = 0: every OK waits for the last push of the round, then the pull: T_c/0.5 + 2L
    net = build("dssp", ONE, DSSP_C, granularity=granularity, s_lower=0, r_max=0, s_upper=0)
    want = ONE.compute_s / 0.5 + 2 * DSSP_C.latency
    for lo, hi in worker_periods(net).values():
        assert rel(lo, want) < 1e-9 and rel(hi, want) < 1e-9


def test_dssp_without_cap_lets_the_fastest_run_free():
    # as published, the fastest worker beyond S_L is released at every push (r* + 1 >= 1), so it
    # runs at its own pace T_c + 2L; the second fastest is never the fastest and waits for the
    # slowest at every push
    net = build("dssp", ONE, DSSP_C, granularity="coarse", s_lower=0, r_max=0)
    per = worker_periods(net)
    fast, slow = ONE.compute_s + 2 * DSSP_C.latency, ONE.compute_s / 0.5 + 2 * DSSP_C.latency
    assert all(rel(x, fast) < 1e-9 for x in per[0])
    assert all(rel(x, slow) < 1e-9 for x in per[1] + per[2])


@pytest.mark.parametrize("name, opts, want", [
    ("pipe-sgd", {"width": 2}, lambda c: max(TC, t_ar(c))),
    ("pipe-sgd", {"width": 1}, lambda c: TC + t_ar(c)),
    ("cocod", {"k": 1}, lambda c: max(TC, t_ar(c))),
    ("local-sgd", {"H": 1}, lambda c: TC + t_ar(c)),
])
@pytest.mark.parametrize("cluster", [FAST, SLOW], ids=["fast-net", "slow-net"])
def test_event_graph_forms_match_cycle_time(name, opts, want, cluster):
    # With one step per round the coarse nets' places are an event graph once the resources
    # (already serialised by the places) are dropped: max-plus cycle time = the closed form.
    from sgdnet import analysis
    from sgdnet.variants.allreduce import without_resources

    eg = without_resources(build(name, PROF, cluster, granularity="coarse", **opts))
    assert eg.is_event_graph(), eg.event_graph_violations()
    ct = analysis.cycle_time(eg)
    assert rel(ct.cycle_time, want(cluster)) < 1e-9
