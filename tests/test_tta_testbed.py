"""SSP as the emulated testbed runs it (issue #40's validation): the model's SSP counts a step
when the server has received all of it, and the testbed has an ``ssp`` scheme.

* Model: worker ``i`` may start its step ``k`` only once every worker's push of step
  ``k - s - 1`` has fully arrived at the server (Ho et al. 2013: a worker at clock ``c`` sees
  every update of clocks ``<= c - s - 1``, which the server can give only once it has them).
  Checked on the trace against the pushes' own arrival times (their latency stages), with a
  slow worker so that the bound binds; a net whose gate counts the end of the backward (the
  rule before, which let the fast workers' pushes collide with the slow worker's) fails the
  same check.
* Testbed: ``ssp`` in the runner's schemes and in ``sgdnet testbed``; on the emulated cluster
  (root, torch) the PS's log of updates keeps every worker within ``s + 1`` pushes of the
  slowest.
"""

from __future__ import annotations

import numpy as np
import pytest

import sgdnet
from sgdnet import Cluster
from sgdnet.errors import TestbedError
from sgdnet.testbed.netns import can_create_namespaces

OK, WHY = can_create_namespaces()
needs_ns = pytest.mark.skipif(not OK, reason=f"cannot create network namespaces here: {WHY}")
CL = Cluster(workers=3, speeds=(1.0, 1.0, 0.25), bandwidth="10Gbps")


def _by_count(tr, ids, what, how):
    """Per ``c``: the max (or min) over ``ids`` of their ``c``-th ``what`` times."""
    arrs = [np.sort(tr[what][tr["transition"] == i]) for i in ids]
    m = min(a.size for a in arrs)
    stack = np.vstack([a[:m] for a in arrs])
    return stack.max(axis=0) if how == "max" else stack.min(axis=0)


def _gaps(res, n: int, s: int) -> np.ndarray:
    """``start_i(k) - arrival_j(k - s - 1)`` for every pair and step: the time worker ``i``
    started step ``k`` after worker ``j``'s push of step ``k - s - 1`` reached the server."""
    tr, tags = res.trace, res.transition_tags
    arrival = [_by_count(tr, [i for i, t in enumerate(tags) if t.get("worker") == j and
                              t.get("direction") == "push" and t.get("stage") == "latency"],
                         "end", "max") for j in range(n)]
    start = [_by_count(tr, [i for i, t in enumerate(tags) if t.get("worker") == j and
                            t.get("kind") == "compute" and t.get("layer", 0) == 0 and
                            t.get("phase", "fwd") == "fwd"], "start", "min") for j in range(n)]
    out = [start[i][k] - arrival[j][k - s - 1] for i in range(n) for j in range(n)
           for k in range(s + 1, start[i].size) if k - s - 1 < arrival[j].size]
    return np.asarray(out)


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("impl", ["gate", "places"])
@pytest.mark.parametrize("s", [0, 2])
def test_ssp_starts_a_step_only_after_the_pushes_it_waits_for_arrived(granularity, impl, s):
    p = sgdnet.predict("ssp", "resnet50", CL, granularity=granularity, steps=60, warmup=0,
                       replications=1, trace=True, seed=0, staleness=s, impl=impl)
    gaps = _gaps(p.result, 3, s)
    assert gaps.size > 100
    assert gaps.min() >= -1e-9          # never before the push it waits for has arrived
    assert np.sum(np.abs(gaps) < 1e-9) > 20  # and the bound binds: it waits exactly until then


def test_counting_at_the_end_of_the_backward_fails_the_same_check():
    """The check can fail: the gate of the same net moved back to the workers' step
    transitions (the end of their backward) lets a fast worker start before the slow
    worker's push has arrived."""
    from sgdnet.engine import simulate
    from sgdnet.models import load
    from sgdnet.variants import get

    net = get("ssp").build(load("resnet50"), CL, "coarse", staleness=1)
    gate = net.gates["ssp"]
    assert gate.counters == ("ssp.w0.push", "ssp.w1.push", "ssp.w2.push")
    gate.counters = tuple(next(t.name for t in net.transitions.values()
                               if t.is_step and t.tags.get("worker") == i) for i in range(3))
    res = simulate(net, steps=60, warmup=0, replications=1, seed=0, trace=True)
    assert _gaps(res, 3, 1).min() < -1e-3


@pytest.mark.parametrize("impl", ["gate", "places"])
def test_build_ps_net_with_staleness_counts_at_the_server_too(impl):
    # the builder called directly (not through the ssp variant) waits for the same pushes
    from sgdnet.engine import simulate
    from sgdnet.models import load
    from sgdnet.variants.parameter_server import build_ps_net

    net = build_ps_net("ssp-direct", load("resnet50"), CL, synchronous=False, coarse=True,
                       staleness=1, staleness_impl=impl)
    assert [t for t in net.transitions if t.startswith("ssp.w") and t.endswith(".push")] == [
        "ssp.w0.push", "ssp.w1.push", "ssp.w2.push"]
    res = simulate(net, steps=60, warmup=0, replications=1, seed=0, trace=True)
    gaps = _gaps(res, 3, 1)
    assert gaps.min() >= -1e-9 and np.sum(np.abs(gaps) < 1e-9) > 20


def test_per_node_ssp_counts_a_gpu_step_when_its_node_push_arrived():
    from sgdnet.models import load
    from sgdnet.variants import get
    from sgdnet.workload.topology import Topology

    cl = Cluster(workers=4, topology=Topology(gpus_per_node=2, nic_bandwidth="10Gbps"))
    net = get("ssp").build(load("resnet50"), cl, "coarse", staleness=1, aggregation="node")
    joins = net.gates["ssp"].counters
    assert joins == tuple(f"ssp.w{i}.push" for i in range(4))
    # GPU 0 and 1 (node 0) wait for the same receipts: every part node 0 pushes
    feeders = [{t.name for t in net.transitions.values()
                if any(p in t.outputs for p in net.transitions[j].inputs)} for j in joins]
    assert feeders[0] == feeders[1] and feeders[2] == feeders[3]
    assert not feeders[0] & feeders[2]


# ----------------------------------------------------------------------------- testbed
def test_ssp_is_a_testbed_scheme_and_the_cli_passes_its_staleness(monkeypatch):
    from sgdnet.cli import main
    from sgdnet.testbed import runner

    assert "ssp" in runner.SCHEMES and "ssp" not in runner.DEFAULT_SCHEMES
    seen = {}

    def fake(**kw):
        seen.update(kw)
        return {"meta": {"elapsed_s": 0.0, "netem": False}, "runs": []}

    monkeypatch.setattr(runner, "run_campaign", fake)
    assert main(["testbed", "--schemes", "ssp,async-ps", "--staleness", "2"]) == 0
    assert seen["schemes"] == ["ssp", "async-ps"] and seen["staleness"] == 2


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_staleness_fails_before_any_set_up(bad):
    from sgdnet.testbed.runner import run_campaign

    with pytest.raises(TestbedError, match="staleness"):
        run_campaign(schemes=["ssp"], staleness=bad, log=lambda s: None)


@needs_ns
def test_testbed_ssp_keeps_every_worker_within_s_plus_one_pushes_of_the_slowest():
    """Two workers, the second slowed by sleeps (as the validation's slow worker), s = 1: the
    PS's log (every applied push and its worker) never has a worker more than ``s + 1``
    pushes ahead of the other, and without the bound (``async-ps``) the fast one runs ahead."""
    pytest.importorskip("torch")
    from sgdnet.testbed import EmulatedCluster
    from sgdnet.testbed.runner import launch

    slow = {"rank": 2, "fwd_s": [0.01] * 4, "bwd_s": [0.01] * 4}
    jobs = [{"kind": "train", "id": s, "scheme": s, "steps": 12, "warmup": 1,
             "model": "tb-mlp", "batch": 32, "bucket_cap_mb": 0.5, "task": "logreg",
             "task_lr": 0.2, "task_seed": 0, "staleness": 1, "slow": slow}
            for s in ("ssp", "async-ps")]
    with EmulatedCluster(3, rate="1Gbit/s", burst="64KB") as cl:
        res = launch(cl, 3, jobs, timeout_s=300)
    leads = {}
    for k, s in enumerate(("ssp", "async-ps")):
        log = res["ranks"][0]["jobs"][k]["task_log"]
        who = np.array([w[0] for w in log["workers"]])
        assert sorted(set(who.tolist())) == [0, 1] and who.size == 26
        c = np.cumsum(np.vstack([who == 0, who == 1]), axis=1)
        leads[s] = int(np.max(np.abs(c[0] - c[1])))
    assert leads["ssp"] <= 2
    assert leads["async-ps"] > 2
