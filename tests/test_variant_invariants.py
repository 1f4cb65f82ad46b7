"""Invariants every registered variant keeps, fine and coarse, with each straggler model, on a
heterogeneous cluster with noise. Registering a variant is enough to have it tested here.

* ``variants.build`` returns a valid net whose ``meta`` names the variant and granularity;
* every worker has a ``step=True`` transition and computes; steps complete (a ``backup``
  worker's steps may all be dropped, so only their sum must be positive);
* straggler modulators sit on compute operations only;
* every transition is tagged with a known ``kind``; every resource with a host and a kind;
* utilisations lie in [0, 1] and the run ends without deadlock;
* fine and coarse nets of one profile have the same mean compute work per worker step
  (the sum of the profile's forward and backward times over the worker's speed).
"""

import math

import numpy as np
import pytest

from sgdnet import Cluster, Layer, MarkovSlowdown, ModelProfile, StepSlowdown, variants
from sgdnet.engine import simulate

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
STRAGGLERS = {"none": None, "step": StepSlowdown(0.2, 3, workers=[0, 2]),
              "markov": MarkovSlowdown(4, 0.5, 0.2)}
KINDS = {"compute", "comm", "update", "sync"}


def _cluster(straggler):
    return Cluster(workers=3, speeds=[1.0, 0.8, 0.5], compute_cv=0.1, comm_cv=0.1, ps_shards=2,
                   straggler=STRAGGLERS[straggler])


@pytest.mark.parametrize("straggler", list(STRAGGLERS))
@pytest.mark.parametrize("granularity", list(variants.GRANULARITIES))
@pytest.mark.parametrize("name", variants.names())
def test_builds_runs_and_keeps_the_conventions(name, granularity, straggler):
    net = variants.build(name, PROF, _cluster(straggler), granularity=granularity)
    assert net.meta["variant"] == name and net.meta["granularity"] == granularity
    assert net.meta["workers"] == 3 and net.meta["batch_size"] == 32
    steps = net.step_transitions()
    assert {net.transitions[t].tags.get("worker") for t in steps} == {0, 1, 2}
    for t in net.transitions.values():
        assert t.tags.get("kind") in KINDS, (t.name, t.tags)
        if t.modulator is not None:
            assert t.tags["kind"] == "compute", t.name
    for r in net.resources.values():
        assert r.tags.get("host") and r.tags.get("kind"), r.name
    res = simulate(net, steps=60, warmup=6, replications=2, seed=5)
    assert res.throughput.mean > 0
    assert set(res.throughput_by("worker")) == {0, 1, 2}
    for w in (0, 1, 2):
        work = [t.name for t in net.transitions.values()
                if t.tags.get("kind") == "compute" and t.tags.get("worker") == w]
        assert sum(res.firings(t).sum() for t in work) > 0, w
    for est in res.utilizations().values():
        assert np.all((est.samples >= 0) & (est.samples <= 1 + 1e-12))


@pytest.mark.parametrize("name", variants.names())
def test_fine_and_coarse_compute_the_same_mean_work(name):
    """Mean GPU compute work of one worker step is the profile's total in both granularities."""
    c = Cluster(workers=2, speeds=[1.0, 0.5])
    for g in variants.GRANULARITIES:
        net = variants.build(name, PROF, c, granularity=g)
        for w in (0, 1):
            work = [t for t in net.transitions.values()
                    if t.tags.get("kind") == "compute" and t.tags.get("worker") == w
                    and t.tags.get("phase") != "merge"]
            lanes = {t.tags.get("lane", 0) for t in work}
            total = math.fsum(t.duration.mean for t in work) / len(lanes)
            assert total == pytest.approx(PROF.compute_s / c.speed(w), rel=1e-12), (g, w)


#: Non-default values of the options of issue #16 / #18, tried on every variant that has them.
NEW_OPTIONS = {"balance": ["batch"], "compression": ["topk:0.2", "powersgd:2", "onebit"],
               "comm_granularity": ["tensor", "bucket"], "k": [[1, 2, 3]], "H": [[3, 2, 1]]}
TPROF = ModelProfile("toy-t", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                               Layer("c", 0.002, 0.004, 1e6)], batch_size=32).split_tensors()


def _new_cases():
    out = []
    for name in variants.names():
        for o in variants.get(name).option_names():
            out += [(name, o, v) for v in NEW_OPTIONS.get(o, ())]
    return out


@pytest.mark.parametrize("granularity", list(variants.GRANULARITIES))
@pytest.mark.parametrize("name,option,value", _new_cases())
def test_new_options_keep_the_conventions(name, option, value, granularity):
    """Every variant with a #16/#18 option builds, runs and keeps the conventions with it; the
    mean compute work of a worker step is the profile's at its batch (balance) and excludes the
    compress / decompress work (compression)."""
    c = _cluster("step")
    net = variants.build(name, PROF, c, granularity=granularity, **{option: value})
    bs = net.meta.get("batch_sizes") or [32] * 3
    if option == "balance":
        assert bs == [42, 33, 21]  # 96 * (1, .8, .5) / 2.3 = 41.7, 33.4, 20.9: sum kept at 96
    for t in net.transitions.values():
        assert t.tags.get("kind") in KINDS, (t.name, t.tags)
    res = simulate(net, steps=45, warmup=6, replications=2, seed=5)
    assert res.throughput.mean > 0 and set(res.throughput_by("worker")) == {0, 1, 2}
    if option == "compression":
        ops = [t for t in net.transitions.values() if t.tags.get("compression")]
        assert ops and {t.tags.get("phase") for t in ops if t.tags["kind"] == "compute"} == \
            {"compress", "decompress"}
    if name == "backup" and option != "balance" or option in ("k", "H"):
        return
    for w in range(3):
        work = [t for t in net.transitions.values()
                if t.tags.get("kind") == "compute" and t.tags.get("worker") == w
                and t.tags.get("phase") not in ("merge", "compress", "decompress")]
        lanes = {t.tags.get("lane", 0) for t in work}
        total = math.fsum(t.duration.mean for t in work) / len(lanes)
        assert total == pytest.approx(PROF.compute_s * bs[w] / 32 / c.speed(w), rel=1e-12)


def test_comm_granularity_on_a_tensor_profile_runs_for_every_variant_that_has_it():
    for name, option, value in _new_cases():
        if option == "comm_granularity":
            net = variants.build(name, TPROF, Cluster(workers=2), **{option: value})
            assert simulate(net, steps=10, warmup=2, replications=1, seed=1).throughput.mean > 0
