"""Users' time (issue #14): a model without randomness is simulated once, a net is validated
and hashed once while it does not change (and again after any edit the edit stamp sees), and
per-worker summaries give what the straightforward per-worker scan gives."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import ps_net, ring

import sgdnet
from sgdnet import (
    Cluster,
    Deterministic,
    Exponential,
    Gamma,
    LogNormal,
    NetError,
    Straggler,
    simulate,
)
from sgdnet.engine import api
from sgdnet.metrics import blocked_time, staleness
from sgdnet.net import builder as B
from sgdnet.net import compiled as C
from sgdnet.net.compiled import compile_net


# ------------------------------------------------------------------ deterministic models
@pytest.mark.parametrize("dist, fixed", [
    (Deterministic(0.5), True),
    (LogNormal(0.5, 0.0), True),
    (Gamma(0.5, 0.0), True),
    (sgdnet.Uniform(0.5, 0.5), True),
    (Straggler(Deterministic(0.5), p=0.0, factor=3.0), True),
    (Straggler(Deterministic(0.5), p=0.2, factor=1.0), True),
    (Straggler(Deterministic(0.5), p=0.2, factor=3.0), False),
    (LogNormal(0.5, 0.1), False),
    (Exponential(0.5), False),
])
def test_deterministic_is_read_from_the_sampled_rows(dist, fixed):
    net = ring([1.0, 2.0], [1, 0], name=f"det-{fixed}-{dist!r}")
    net.transitions["t1"].duration = dist
    assert compile_net(net).deterministic is fixed


def test_a_markov_modulator_is_random_unless_its_factor_is_one():
    for factor, fixed in ((1.0, True), (2.0, False)):
        net = ring([1.0, 2.0], [1, 0], name=f"mk{factor}")
        net.markov_modulator("m", factor, 3.0, 1.0)
        net.transitions["t0"].modulator = "m"
        assert compile_net(net).deterministic is fixed


def test_a_deterministic_net_is_simulated_once_and_every_replication_is_that_run(monkeypatch):
    net = ps_net(workers=3, layers=2, cv=0.0)
    for t in net.transitions.values():  # the pulls' exponential straggler too
        t.duration = Deterministic(t.duration.mean)
    cn = compile_net(net)
    assert cn.deterministic
    played = []
    real = api.run

    def spy(cn_, seeds, **kw):
        played.append(len(seeds))
        return real(cn_, seeds, **kw)

    monkeypatch.setattr(api, "run", spy)
    res = simulate(net, steps=60, warmup=6, replications=5, seed=4, trace=True, trace_limit=500)
    assert played == [1] and res.deterministic and res.replications == 5 and len(res.seeds) == 5
    # the same Result as five real runs (forcing the generic path on the same compiled net)
    monkeypatch.setattr(cn, "deterministic", False)
    full = simulate(net, steps=60, warmup=6, replications=5, seed=4, trace=True, trace_limit=500)
    assert played == [1, 5] and not full.deterministic
    assert full.seeds == res.seeds
    assert np.array_equal(full.throughput.samples, res.throughput.samples)
    assert np.array_equal(full.trace, res.trace)
    for k in range(5):
        a, b = full._raws[k], res._raws[k]
        for f in ("step_times", "step_trans", "firings", "busy", "wait_sum", "wait_n"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert (a.t0, a.t1, a.events) == (b.t0, b.t1, b.events)
    assert res.throughput.half_width() == 0.0
    assert res.to_dict()["deterministic"] is True


def test_a_noisy_net_runs_every_replication(monkeypatch):
    played = []
    real = api.run
    monkeypatch.setattr(api, "run", lambda cn, seeds, **kw: played.append(len(seeds)) or real(cn, seeds, **kw))
    res = simulate(ps_net(workers=2, layers=2, cv=0.1), steps=20, warmup=2, replications=3, seed=1)
    assert played == [3] and not res.deterministic
    assert np.unique(res.throughput.samples).size == 3


def test_predict_with_the_cli_defaults_is_deterministic():
    p = sgdnet.predict("sync-ps", "resnet18", Cluster(workers=2), granularity="coarse", steps=20,
                       replications=4, seed=0)
    assert p.result.deterministic and p.steps_per_s.n == 4 and p.steps_per_s.half_width() == 0.0


# ------------------------------------------------------------------ validation and key caching
def _count(monkeypatch):
    calls = {"problems": 0, "key": 0}
    real_p, real_k = B.net_problems, C.content_key

    def problems(net, *args):  # what Net.problems and Net.validate both run
        calls["problems"] += 1
        return real_p(net, *args)

    def key(cn):  # the compiled net's hash (compile_net's cache)
        calls["key"] += 1
        return real_k(cn)

    monkeypatch.setattr(B, "net_problems", problems)
    monkeypatch.setattr(C, "content_key", key)
    return calls


def test_predict_validates_once_and_never_hashes_the_net(monkeypatch):
    # the net of predict's inputs is found by the inputs' key (sgdnet.netcache): hashing the
    # whole net for a second key would cost 3-4x its compile
    calls = _count(monkeypatch)
    for seed in (0, 1):  # the second: the same inputs, found in memory, nothing done again
        sgdnet.predict("sync-ps", "resnet18", Cluster(workers=2, compute_cv=0.1),
                       granularity="coarse", steps=10, replications=2, seed=seed)
    assert calls == {"problems": 1, "key": 0}


def test_simulate_of_an_unchanged_net_neither_validates_nor_hashes_again(monkeypatch):
    net = ring([1.0, 2.0], [1, 0], name="cached")
    simulate(net, steps=5, warmup=0, replications=1, seed=0)
    calls = _count(monkeypatch)
    for _ in range(3):
        simulate(net, steps=5, warmup=0, replications=1, seed=0)
    assert calls == {"problems": 0, "key": 0}


def _throughput(net):
    return simulate(net, steps=20, warmup=2, replications=1, seed=0).throughput.mean


@pytest.mark.parametrize("edit", [
    "attribute", "input weight", "tag", "table entry", "builder", "net name", "replace dict", "touch"])
def test_every_seen_edit_invalidates_the_caches(edit):
    net = ring([1.0, 2.0], [1, 0], name=f"edit-{edit}")
    before = _throughput(net)
    key = C.structural_key(net)
    t0 = net.transitions["t0"]
    if edit == "attribute":
        t0.duration = Deterministic(3.0)
    elif edit == "input weight":
        net.places["p0"].tokens = 2
        t0.inputs["p0"] = 2
    elif edit == "tag":
        net.transitions["t1"].tags["step"] = True  # now two step transitions
    elif edit == "table entry":
        net.places["extra"] = sgdnet.net.Place("extra", 1)
    elif edit == "builder":
        net.place("extra2", 1)
    elif edit == "net name":
        net.name = "renamed"
    elif edit == "replace dict":
        t0.outputs = {"p1": 1}
        t0.outputs["p0"] = 1  # still tracked after the replacement
    else:
        net.touch()
    assert net.edit_stamp() != net.__dict__["_key_cache"][0]
    new_key = C.structural_key(net)
    if edit != "touch":
        assert new_key != key
    if edit in ("attribute", "tag", "replace dict"):
        assert _throughput(net) != before


def test_an_edit_that_breaks_the_net_is_reported_after_a_cached_validation():
    net = ring([1.0, 2.0], [1, 0], name="breaks")
    net.validate()
    net.transitions["t0"].inputs["nowhere"] = 1
    with pytest.raises(NetError, match="nowhere"):
        net.validate()
    with pytest.raises(NetError, match="nowhere"):
        simulate(net, steps=5, warmup=0, replications=1)


def test_copies_and_pickles_start_without_caches():
    net = ring([1.0, 2.0], [1, 0], name="copies")
    net.validate()
    C.structural_key(net)
    for other in (net.copy(), copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert "_valid_at" not in other.__dict__ and "_key_cache" not in other.__dict__
        other.transitions["t0"].inputs["p0"] = 1  # tracked in the copy too
        assert C.structural_key(other) == C.structural_key(net)
        other.transitions["t0"].duration = Deterministic(5.0)
        assert C.structural_key(other) != C.structural_key(net)


def test_elements_look_like_before():
    net = ring([1.0], [1], name="looks")
    t = net.transitions["t0"]
    assert isinstance(t, sgdnet.net.Transition) and repr(t).startswith("Transition(name='t0'")
    assert t.inputs == {"p0": 1} and isinstance(t.inputs, dict)


# ------------------------------------------------------------------ per-worker summaries
def _step_times_by_scan(res, worker):
    sel = np.array([bool(t.get("step")) and t.get("worker") == worker for t in res.transition_tags])
    out = [np.diff(np.asarray(r.step_times)[sel[np.asarray(r.step_trans)]]) for r in res._raws]
    return np.concatenate(out)


def test_step_times_per_worker_match_the_per_worker_scan():
    res = simulate(ps_net(workers=4, layers=2, cv=0.2), steps=200, warmup=10, replications=3,
                   seed=2, trace=True, trace_limit=100_000)
    for w in range(4):
        got = res.step_times(worker=w)
        assert got.size > 0 and np.array_equal(got, _step_times_by_scan(res, w))
        assert np.array_equal(res.step_times(worker=np.int64(w)), got)
    with pytest.raises(sgdnet.UnknownNameError, match="known workers"):
        res.step_times(worker=9)
    with pytest.raises(sgdnet.UnknownNameError):
        res.step_times(worker=[0])
    assert set(blocked_time(res)) == {0, 1, 2, 3}


def test_staleness_groups_like_before():
    p = sgdnet.predict("async-ps", "resnet18", Cluster(workers=3, compute_cv=0.2), granularity="coarse",
                       steps=30, replications=2, seed=1, trace=True)
    s = staleness(p.result)
    assert s.size > 0 and s.min() >= 0
