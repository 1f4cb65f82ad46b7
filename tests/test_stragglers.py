"""Straggler models: validation, specs, the modulator protocol, and their effect on step times
against closed forms (per-step slowdown mean; Markov slow/fast mode via its embedded chain)."""

import math

import numpy as np
import pytest

from sgdnet import Cluster, ClusterError, Layer, MarkovSlowdown, ModelProfile, StepSlowdown
from sgdnet.engine import simulate
from sgdnet.net import Net
from sgdnet.workload.stragglers import NoStraggler, from_spec, modulator_name


def one_worker_net(T=1.0, straggler=None):
    """A worker whose step is a deterministic T-second compute, then a zero-time sync."""
    net = Net("one")
    a = net.place("a", 1)
    b = net.place("b")
    net.transition("c", T, inputs={a: 1}, outputs={b: 1},
                   tags={"worker": 0, "kind": "compute", "step": True})
    net.transition("s", 0.0, inputs={b: 1}, outputs={a: 1}, tags={"worker": 0, "kind": "sync"})
    if straggler is not None:
        m = straggler.modulator(net, 0, "c")
        net.transitions["c"].modulator = m
    return net


# ------------------------------------------------------------------ validation and specs
@pytest.mark.parametrize("kw, match", [
    ({"p": 1.5, "factor": 3}, "p=1.5"),
    ({"p": -0.1, "factor": 3}, "p=-0.1"),
    ({"p": 0.1, "factor": 0.5}, "factor=0.5"),
    ({"p": 0.1, "factor": float("nan")}, "factor=nan"),
    ({"p": 0.1, "factor": 2, "workers": []}, r"workers=\[\]"),
    ({"p": 0.1, "factor": 2, "workers": [1, 1]}, "twice"),
    ({"p": 0.1, "factor": 2, "workers": [-1]}, "-1"),
])
def test_step_slowdown_rejects_bad_values(kw, match):
    with pytest.raises(ClusterError, match=match):
        StepSlowdown(**kw)


@pytest.mark.parametrize("kw, match", [
    ({"slow_factor": 0.9, "mean_fast": 1, "mean_slow": 1}, "slow_factor=0.9"),
    ({"slow_factor": 2, "mean_fast": 0, "mean_slow": 1}, "mean_fast"),
    ({"slow_factor": 2, "mean_fast": "3 parsecs", "mean_slow": 1}, "mean_fast"),
])
def test_markov_slowdown_rejects_bad_values(kw, match):
    with pytest.raises(ClusterError, match=match):
        MarkovSlowdown(**kw)


@pytest.mark.parametrize("model", [
    NoStraggler(),
    StepSlowdown(0.1, 3),
    StepSlowdown(0.25, 2, workers=[0, 3]),
    MarkovSlowdown(3, "2s", "500ms"),
    MarkovSlowdown(2, 4.0, 1.0, workers=[1]),
])
def test_to_dict_round_trips_through_from_spec(model):
    assert from_spec(model.to_dict()) == model


def test_string_specs():
    assert from_spec("step:p=0.1,factor=3") == StepSlowdown(0.1, 3)
    assert from_spec("markov:slow_factor=3,mean_fast=2s,mean_slow=500ms,workers=0/2") == \
        MarkovSlowdown(3, 2.0, 0.5, workers=[0, 2])
    assert from_spec("none") == NoStraggler() and from_spec(None) == NoStraggler()


@pytest.mark.parametrize("spec, match", [
    ({"kind": "sometimes"}, "kind 'sometimes' is unknown"),
    ({"kind": "step", "p": 0.1}, r"needs field\(s\) \['factor'\]"),
    ({"kind": "step", "p": 0.1, "factor": 2, "mean_fast": 1}, "no field"),
    ("step:p", "not key=value"),
    ("step:p=often,factor=2", "p='often' is not a number"),
    (42, "not a straggler model"),
])
def test_bad_specs_name_the_problem(spec, match):
    with pytest.raises(ClusterError, match=match):
        from_spec(spec)


def test_check_rejects_workers_outside_the_cluster():
    with pytest.raises(ClusterError, match=r"workers \[5\] do not exist"):
        StepSlowdown(0.1, 2, workers=[0, 5]).check(4)


# ------------------------------------------------------------------ the protocol
def test_step_modulator_is_added_once_and_extended():
    net = one_worker_net()
    net.transition("c2", 1.0, inputs={"a": 1}, outputs={"b": 1}, tags={"worker": 0})
    st = StepSlowdown(0.2, 4)
    assert st.modulator(net, 0, "c") == modulator_name(0)
    assert st.modulator(net, 0, "c2") == modulator_name(0)
    m = net.modulators[modulator_name(0)]
    assert m.kind == "iid" and m.resample_on == ("c", "c2")
    assert m.multiplier.mean == pytest.approx(1 - 0.2 + 0.2 * 4)
    net.validate()


def test_subset_returns_none_for_other_workers_and_no_straggler_adds_nothing():
    net = one_worker_net()
    assert StepSlowdown(0.2, 4, workers=[1]).modulator(net, 0, "c") is None
    assert NoStraggler().modulator(net, 0, "c") is None
    assert net.modulators == {}


def test_markov_modulator_parameters_and_unknown_start():
    net = one_worker_net()
    name = MarkovSlowdown(3, "2s", "500ms").modulator(net, 0, "c")
    m = net.modulators[name]
    assert (m.kind, m.slow_factor, m.mean_fast, m.mean_slow) == ("markov", 3.0, 2.0, 0.5)
    with pytest.raises(ClusterError, match="'nope' is not in net"):
        StepSlowdown(0.1, 2).modulator(net, 0, "nope")


def test_cluster_carries_a_straggler_into_its_dict():
    c = Cluster(workers=2, straggler=StepSlowdown(0.1, 3))
    assert from_spec(c.to_dict()["straggler"]) == StepSlowdown(0.1, 3)


# ------------------------------------------------------------------ effect vs closed forms
def _mean_step_ci(res):
    x = res.sim_time / res.steps  # mean step time per replication
    from sgdnet.results import Estimate

    e = Estimate(x)
    return e.mean, e.half_width(0.99)


def test_step_slowdown_mean_step_time():
    T, p, f = 1.0, 0.2, 3.0
    res = simulate(one_worker_net(T, StepSlowdown(p, f)), steps=4000, warmup=10, replications=8,
                   seed=11)
    m, hw = _mean_step_ci(res)
    assert abs(m - T * (1 - p + p * f)) < hw
    # each step is either T or f*T: the slowdown is per whole step
    st = res.step_times(worker=0)
    assert np.all(np.isclose(st, T) | np.isclose(st, f * T))
    assert abs(np.mean(np.isclose(st, f * T)) - p) < 0.02


def test_markov_slowdown_matches_embedded_chain():
    # State seen at step starts is a Markov chain: from fast (step T) the chain moves to slow with
    # P_FS(T) = a/(a+b) (1 - exp(-(a+b) T)); from slow (step fT) back with P_SF(fT).
    T, f, mf, ms = 1.0, 3.0, 4.0, 2.0
    a, b = 1 / mf, 1 / ms
    p = a / (a + b) * (1 - math.exp(-(a + b) * T))
    q = b / (a + b) * (1 - math.exp(-(a + b) * f * T))
    nu_slow = p / (p + q)
    expected = (1 - nu_slow) * T + nu_slow * f * T
    res = simulate(one_worker_net(T, MarkovSlowdown(f, mf, ms)), steps=5000, warmup=10,
                   replications=8, seed=12)
    m, hw = _mean_step_ci(res)
    assert abs(m - expected) < hw
    # and it is not the naive time-stationary figure
    assert abs(expected - T * MarkovSlowdown(f, mf, ms).mean_slowdown) > 3 * hw


def test_variant_builders_apply_the_straggler_to_compute():
    from sgdnet.variants import local_sgd

    prof = ModelProfile("toy", [Layer("a", 0.01, 0.02, 1e6), Layer("b", 0.01, 0.02, 1e6)], 32)
    c = Cluster(workers=3, straggler=StepSlowdown(0.1, 3, workers=[1]))
    for coarse in (True, False):
        net = (local_sgd.build_coarse if coarse else local_sgd.build_fine)(
            prof, c, H=2, sync="allreduce", shards=None, placement=None, discipline="fifo",
            max_layers=None)
        mods = {t.name: t.modulator for t in net.transitions.values()
                if t.tags.get("kind") == "compute"}
        assert all((m == modulator_name(1)) == n.startswith("w1.")
                   for n, m in mods.items())
        assert list(net.modulators) == [modulator_name(1)]
