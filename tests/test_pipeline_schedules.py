"""Pipeline schedules as nets (sgdnet.variants.pipeline): the bubble's closed forms, the
schedules' order and memory, stragglers against hand-derived bounds, kernel vs oracle.

Closed forms (Narayanan et al., SC'21, §2.2): with p equal stages of forward t_f and backward
t_b per micro-batch and free communication, an iteration of m micro-batches takes
(m + p - 1)(t_f + t_b) with GPipe and 1F1B, (m + (p - 1)/v)(t_f + t_b) interleaved with v
chunks per device, so every stage idles (p-1)/(m+p-1), resp. (p-1)/(v m + p - 1).
"""

import math

import numpy as np
import pytest
from test_engine_vs_reference import assert_same_run

import sgdnet
from sgdnet import simulate
from sgdnet.engine.reference import simulate_reference
from sgdnet.pipeline_metrics import in_flight_peak, pipeline_report
from sgdnet.variants import build
from sgdnet.workload import Cluster, ModelProfile
from sgdnet.workload.parallelism import bubble_fraction, peak_in_flight, schedule_ops
from sgdnet.workload.topology import Topology
from sgdnet.workload.transformers import gpt2

TF, TB = 1.0, 2.0  # per layer; one layer per chunk below


def equal(layers: int, cv=None) -> ModelProfile:
    return ModelProfile("equal", [{"name": f"l{i}", "forward_s": TF, "backward_s": TB,
                                   "grad_bytes": 0, "cv": cv} for i in range(layers)], 1)


def run(prof, workers, trace=False, steps=4, replications=1, seed=3, cluster=None, **opts):
    cl = cluster or Cluster(workers=workers)
    return sgdnet.predict("pipeline", prof, cl, steps=steps, replications=replications,
                          seed=seed, trace=trace, activation_bytes=0, partition="balanced",
                          **opts)


@pytest.mark.parametrize("schedule,p,m,v", [
    ("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("1f1b", 3, 2, 1), ("gpipe", 2, 5, 1),
    ("interleaved", 4, 8, 2), ("interleaved", 2, 4, 3)])
def test_bubble_fraction_closed_form(schedule, p, m, v):
    pr = run(equal(p * v), p, pp=p, microbatches=m, schedule=schedule, virtual_stages=v)
    it = 1.0 / pr.iterations_per_s.mean  # a device's v chunks: v (TF + TB) per micro-batch
    assert it == pytest.approx((m + (p - 1) / v) * v * (TF + TB), rel=1e-12)
    rep = pipeline_report(pr)
    for q in range(p):
        assert rep.idle[q].mean == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-9)
    assert rep.bubble == bubble_fraction(p, m, v)


def test_bubble_with_data_parallel_replicas():
    # dp replicas with no gradient bytes: the same closed form for every replica
    pr = run(equal(4), 8, pp=4, dp=2, microbatches=6, schedule="1f1b")
    rep = pipeline_report(pr)
    assert 1 / pr.iterations_per_s.mean == pytest.approx((6 + 3) * (TF + TB), rel=1e-12)
    assert all(rep.idle[q].mean == pytest.approx(3 / 9, rel=1e-9) for q in range(4))
    assert pr.samples_per_s.mean == pytest.approx(2 * 6 / ((6 + 3) * (TF + TB)), rel=1e-12)


def test_schedule_orders():
    p, m = 4, 8
    for sched, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        for q in range(p):
            ops = schedule_ops(p, m, q, sched, v)
            # every pass of every micro-batch and chunk once, a backward after its forward
            assert sorted(ops) == sorted((k, j, c) for k in "FB" for j in range(m)
                                         for c in range(v))
            assert all(ops.index(("F", j, c)) < ops.index(("B", j, c))
                       for j in range(m) for c in range(v))
    # 1F1B (PipeDream-Flush): stage q warms up with p-q-1 forwards, then one forward one backward
    assert schedule_ops(4, 8, 0, "1f1b")[:5] == [("F", 0, 0), ("F", 1, 0), ("F", 2, 0),
                                                 ("F", 3, 0), ("B", 0, 0)]
    assert schedule_ops(4, 8, 3, "1f1b")[:4] == [("F", 0, 0), ("B", 0, 0), ("F", 1, 0),
                                                 ("B", 1, 0)]
    # interleaved, p=4, v=2, m=8 (Narayanan et al. 2021, Fig. 4): device 0 runs micro-batches
    # 1-4 on chunk 1, 1-4 on chunk 2, then 5 and 6 on chunk 1 before its first backward
    ops = schedule_ops(4, 8, 0, "interleaved", 2)
    assert ops[:11] == [("F", j, 0) for j in range(4)] + [("F", j, 1) for j in range(4)] + [
        ("F", 4, 0), ("F", 5, 0), ("F", 6, 0)]
    assert ops[11] == ("B", 0, 1)  # the first backward is the last chunk's


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_peak_in_flight_from_the_run(schedule):
    p, m = 4, 6
    pr = run(equal(p), p, trace=True, steps=3, pp=p, microbatches=m, schedule=schedule)
    got = [in_flight_peak(pr.result, q) for q in range(p)]
    want = [p - q for q in range(p)] if schedule == "1f1b" else [m] * p
    assert got == want  # 1F1B holds at most p micro-batches (stage 0), GPipe all m
    assert got == [peak_in_flight(p, m, q, schedule) for q in range(p)]
    # the activations held by the memory report follow the same counts
    net = build("pipeline", equal(p), Cluster(workers=p), pp=p, microbatches=m,
                schedule=schedule, activation_bytes=0, partition="balanced")
    assert sum(1 for t in net.transitions.values() if t.tags.get("step")) == p


def test_straggling_stage_gpipe_exact_and_1f1b_bounded():
    # the last of p stages 10 % slower (its GPU's speed 1/1.1), free communication.
    # GPipe is a flow shop of m identical jobs, forward then backward: its makespan is
    # sum_s t_s + (m - 1) max_s t_s per phase, i.e. (p - 1)(TF + TB) + 1.1 m (TF + TB).
    # 1F1B: at least the slow stage's work plus the first forward's way to it and the last
    # backward's way back, 1.1 m (TF + TB) + (p - 1)(TF + TB); at most every duration times
    # 1.1 (the net is a monotone, homogeneous max-plus system): 1.1 (m + p - 1)(TF + TB).
    p, m = 4, 8
    speeds = [1.0] * (p - 1) + [1 / 1.1]
    cl = Cluster(workers=p, speeds=speeds)
    g = 1 / run(equal(p), p, cluster=cl, pp=p, microbatches=m, schedule="gpipe"
                ).iterations_per_s.mean
    assert g == pytest.approx((p - 1) * (TF + TB) + 1.1 * m * (TF + TB), rel=1e-12)
    t = 1 / run(equal(p), p, cluster=cl, pp=p, microbatches=m, schedule="1f1b"
                ).iterations_per_s.mean
    lo, hi = 1.1 * m * (TF + TB) + (p - 1) * (TF + TB), 1.1 * (m + p - 1) * (TF + TB)
    assert lo - 1e-9 <= t <= hi + 1e-9


def test_noise_grows_the_bubble():
    # per-pass noise (CV 0.1): E[max] >= max E, so the mean iteration is longer than the
    # deterministic one, by more than its 95 % CI half-width (fixed seed)
    p, m = 4, 8
    det = 1 / run(equal(p), p, pp=p, microbatches=m).iterations_per_s.mean
    pr = run(equal(p, cv=0.1), p, pp=p, microbatches=m, steps=40, replications=4, seed=11)
    it = pipeline_report(pr).iteration_s
    lo, _ = it.ci()
    assert lo > det
    idle = pipeline_report(pr).idle[0].mean
    assert idle > bubble_fraction(p, m)


def _small_3d():
    prof = gpt2("g", n_layers=4, d_model=256, n_heads=4, seq_len=128, batch_size=2,
                device="A100", precision="bf16", vocab=1000, n_ctx=128)
    topo = Topology(gpus_per_node=2, intra_bandwidth="300GB/s", nics_per_node=1,
                    nic_bandwidth="100Gbps")
    return prof, topo


@pytest.mark.parametrize("det", [True, False])
def test_kernel_against_reference_oracle(det):
    prof, topo = _small_3d()
    cl = Cluster(workers=8, topology=topo, latency="5us", compute_cv=0.0 if det else 0.2,
                 comm_cv=0.0 if det else 0.1)
    net = build("pipeline", prof, cl, tp=2, pp=2, dp=2, microbatches=2, tp_ranks="all")
    kw = dict(steps=16, warmup=8, replications=1 if det else 2, seed=5, trace=True,
              trace_limit=4000)
    k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)
    assert_same_run(net, k, r, True)


def test_coarse_net_runs_the_same_schedule():
    p, m = 4, 8
    pr = sgdnet.predict("pipeline", equal(p), Cluster(workers=p), granularity="coarse",
                        steps=3, replications=1, seed=1, pp=p, microbatches=m,
                        activation_bytes=0, partition="balanced")
    assert 1 / pr.iterations_per_s.mean == pytest.approx((m + p - 1) * (TF + TB), rel=1e-12)
    assert not math.isnan(float(np.mean(pr.iterations_per_s.samples)))
