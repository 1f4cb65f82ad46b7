"""Every Variants II builder, both granularities, with each straggler model, on a heterogeneous
cluster: builds a valid net, simulates without deadlock, and its modulators sit on compute only."""

import pytest

from sgdnet import Cluster, Layer, MarkovSlowdown, ModelProfile, StepSlowdown, variants
from sgdnet.engine import simulate

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
CASES = [("dssp", {}), ("cocod", {"balance": "batch"}), ("local-sgd", {"sync": "ps"}),
         ("local-sgd", {}), ("pipe-sgd", {"bucket_bytes": 0}), ("backup", {})]
STRAGGLERS = [None, StepSlowdown(0.2, 3, workers=[0, 2]), MarkovSlowdown(4, 0.5, 0.2)]


@pytest.mark.parametrize("straggler", STRAGGLERS, ids=["none", "step", "markov"])
@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("name, opts", CASES, ids=[f"{n}{o}" for n, o in CASES])
def test_builds_and_runs(name, opts, granularity, straggler):
    c = Cluster(workers=3, speeds=[1.0, 0.8, 0.5], compute_cv=0.1, comm_cv=0.1, ps_shards=2,
                straggler=straggler)
    net = variants.build(name, PROF, c, granularity=granularity, **opts)
    for t in net.transitions.values():
        if t.modulator is not None:
            assert t.tags.get("kind") == "compute"
    assert net.meta["variant"] == name and net.step_transitions()
    res = simulate(net, steps=60, warmup=6, replications=2, seed=5)
    assert set(res.throughput_by("worker")) == {0, 1, 2}
    assert res.throughput.mean > 0
