"""Skipped periods of deterministic runs (sgdnet.engine.periodic) against played runs and exact
answers.

- the same run: the deterministic generator nets of test_engine_vs_reference (resources of every
  discipline, inhibitors, lag and dynamic_lag gates, flows), fuzz nets and SGD variants' nets,
  each played event by event (``periodic=False``) and with its periods skipped: times and sums
  to 1e-9, every count exactly, histograms to one bin (a wait that falls on a bin edge lands on
  either side of it after a rounding);
- the period's duration against the max-plus cycle time of event graphs (an exact answer);
- the warm-up: its periods skipped too, up to a step before counting starts;
- what it must leave alone: random durations, a trace, modulators, a net that never repeats
  (the run is then the played run to the bit), and the event budget (a run that exhausts it
  fails as the played run does).
"""

import math

import numpy as np
import pytest
from conftest import loop
from test_engine_vs_reference import NETS, teg_net
from test_fuzz import random_net

import sgdnet
from sgdnet import simulate
from sgdnet.analysis.maxplus import cycle_time
from sgdnet.errors import SgdnetError, SimulationError
from sgdnet.net import Net

RTOL = 1e-9


def played_and_skipped(net, **kw):
    """The run of ``net`` played event by event and with its periods skipped (one replication,
    the generic kernel)."""
    kw = dict(dict(replications=1, seed=0, parallel=False, engine="generic"), **kw)
    return simulate(net, periodic=False, **kw), simulate(net, **kw)


def assert_same_run(a, b):
    """``b`` (periods skipped) is ``a`` (played): times and sums to RTOL, counts exactly."""
    ra, rb = a._raws[0], b._raws[0]
    scale = max(1.0, abs(ra.t1))
    close = dict(rtol=RTOL, atol=RTOL * scale)
    np.testing.assert_allclose([rb.t0, rb.t1], [ra.t0, ra.t1], **close)
    np.testing.assert_allclose(rb.step_times, ra.step_times, **close)
    assert rb.step_trans.tolist() == ra.step_trans.tolist()
    assert rb.firings.tolist() == ra.firings.tolist()
    assert rb.events == ra.events
    assert rb.wait_n.tolist() == ra.wait_n.tolist()
    assert rb.sojourn_n.tolist() == ra.sojourn_n.tolist()
    for f in ("busy", "wait_sum", "sojourn_sum", "token_time"):
        np.testing.assert_allclose(getattr(rb, f), getattr(ra, f), err_msg=f, **close)
    assert np.array_equal(rb.gate_log, ra.gate_log)
    assert np.array_equal(rb.gate_lead, ra.gate_lead)
    if ra.wait_hist is not None:
        for f in ("wait_hist", "sojourn_hist"):
            x, y = getattr(ra, f), getattr(rb, f)
            assert x.sum() == y.sum(), f
            # a count may move to the next bin, no further: cumulative counts differ by at most
            # the counts of the bins on either side of the edge
            assert np.all(np.abs(np.cumsum(x - y, axis=1)) <= np.maximum(x, y)), f


def outcomes(net, **kw):
    """``net`` run played (``periodic=False``) and skipped: each a Result or the SgdnetError."""
    out = []
    for periodic in (False, True):
        try:
            out.append(simulate(net, periodic=periodic, **kw))
        except SgdnetError as e:
            out.append(e)
    return tuple(out)


def assert_same_outcome(a, b):
    """The same error, or the same run (:func:`assert_same_run`)."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), f"{a!r:.120} != {b!r:.120}"
    else:
        assert_same_run(a, b)


@pytest.mark.parametrize("name", sorted(NETS))
def test_generator_nets_skipped_are_the_played_run(name):
    a, b = played_and_skipped(NETS[name](True), steps=400, warmup=20, histograms=True)
    assert a.periodic is None
    assert_same_run(a, b)


def test_generator_nets_that_repeat_are_skipped():
    # the comparisons above mean something only if periods are skipped. Event graphs and gate
    # nets settle; the flow nets' step times do not repeat within 400 steps, and in some resource
    # nets a starved transition's request only grows older (the runs repeat, their states do not)
    found = {name: played_and_skipped(NETS[name](True), steps=400, warmup=20)[1].periodic
             for name in sorted(NETS)}
    skipped = {n for n, p in found.items() if p}
    assert skipped >= {"teg-1", "teg-2", "teg-3", "lag-1", "lag-2", "dssp-1", "dssp-3", "dssp-5", "inh-7",
                       "res-6"}, found
    for p in filter(None, found.values()):
        assert p["skipped_steps"] % p["period_steps"] == 0 and p["cycle_time"] > 0


@pytest.mark.parametrize("seed", range(0, 90, 3))
def test_fuzz_nets_skipped_are_the_played_run(seed):
    # seeds = 0 mod 3: deterministic fuzz nets (inhibitors, weights, infinite servers, zero-time
    # firings, deadlocks, unbounded places); an error must be the played run's error
    assert_same_outcome(*outcomes(random_net(seed), steps=300, warmup=10, replications=1, seed=0,
                                  max_events=20_000))


@pytest.mark.parametrize("variant, workers, bandwidth", [
    ("sync-ps", 4, "1Gbps"), ("async-ps", 3, "10Gbps"), ("ssp", 4, "1Gbps"), ("dssp", 3, "1Gbps"),
    ("allreduce", 4, "10Gbps"), ("local-sgd", 2, "1Gbps"), ("backup", 4, "1Gbps"),
])
def test_sgd_nets_repeat_and_skipped_are_the_played_run(variant, workers, bandwidth):
    net = sgdnet.variants.build(variant, "resnet18", {"workers": workers, "bandwidth": bandwidth}, "fine")
    a, b = played_and_skipped(net, steps=60 * workers, warmup=5 * workers)
    assert b.periodic is not None and b.periodic["skipped_steps"] >= 30 * workers, b.periodic
    assert_same_run(a, b)
    assert b.periodic["cycle_time"] == pytest.approx(
        a.sim_time[0] / a.steps * b.periodic["period_steps"], rel=1e-9)


@pytest.mark.parametrize("variant, workers", [("sync-ps", 4), ("allreduce", 3), ("ssp", 3)])
def test_a_long_warmup_is_skipped_and_the_count_starts_as_played(variant, workers):
    # 30 warm-up rounds: the regime (reached within a few rounds) is skipped up to a step before
    # counting starts, then the warm-up's period is confirmed again once a period into the count
    net = sgdnet.variants.build(variant, "resnet18", {"workers": workers, "bandwidth": "1Gbps"}, "fine")
    warmup = 30 * workers
    a, b = played_and_skipped(net, steps=20 * workers, warmup=warmup)
    assert_same_run(a, b)
    p = b.periodic
    assert p is not None and 0 < p["warmup_skipped_steps"] <= warmup - 1, p
    assert p["warmup_skipped_steps"] >= 20 * workers, p  # most of the warm-up
    assert p["start_step"] == warmup + p["period_steps"], p  # the count's candidate, at once
    assert p["skipped_steps"] > 0 and p["skipped_steps"] % p["period_steps"] == 0, p


def test_a_warmup_too_short_to_find_the_regime_skips_nothing_of_it():
    net = sgdnet.variants.build("sync-ps", "resnet18", {"workers": 4, "bandwidth": "1Gbps"}, "fine")
    a, b = played_and_skipped(net, steps=200, warmup=4)
    assert_same_run(a, b)
    assert b.periodic["warmup_skipped_steps"] == 0 and b.periodic["skipped_steps"] > 0, b.periodic


@pytest.mark.parametrize("seed", [2, 5, 9])
def test_a_skipped_warmup_keeps_the_max_plus_cycle_time(seed):
    # an event graph whose warm-up is mostly skipped: the window and the throughput are exact
    net = teg_net(seed, det=True)
    lam = cycle_time(net).cycle_time
    a, b = played_and_skipped(net, steps=100, warmup=600)
    assert b.periodic["warmup_skipped_steps"] > 0, b.periodic
    assert_same_run(a, b)
    assert b.throughput.mean == pytest.approx(1 / lam, rel=1e-9)


@pytest.mark.parametrize("seed", range(1, 13))
def test_period_is_the_max_plus_cycle_time(seed):
    # a strongly connected event graph: its step transition fires once per lambda seconds in
    # the periodic regime; the kernel's period of p step completions lasts p * lambda
    net = teg_net(seed, det=True)
    lam = cycle_time(net).cycle_time
    res = simulate(net, steps=500, warmup=20, replications=1, seed=0, engine="generic")
    p = res.periodic
    assert p is not None
    assert p["cycle_time"] == pytest.approx(p["period_steps"] * lam, rel=1e-12)
    assert res.throughput.mean == pytest.approx(1 / lam, rel=1e-9)


def test_random_durations_trace_and_modulators_play_every_event():
    net = teg_net(3, det=False)
    assert simulate(net, steps=300, replications=2, seed=1, engine="generic").periodic is None
    det = teg_net(3, det=True)
    a, b = played_and_skipped(det, steps=300, warmup=10, trace=True)
    assert b.periodic is None and b.to_dict() == a.to_dict()
    mod = Net("modulated")
    mod.place("p", 1)
    mod.modulator("m", 1.0, resample_on=["t"])
    mod.transition("t", 1.0, inputs=["p"], outputs=["p"], modulator="m", tags={"step": True})
    assert sgdnet.compile_net(mod).deterministic
    assert simulate(mod, steps=300, replications=1, engine="generic").periodic is None


def test_a_net_that_never_repeats_is_the_played_run_to_the_bit():
    # two independent loops of 1 s and sqrt(2) s: the phase of the second at the first's
    # completions never comes back, so no checkpoint matches and nothing is skipped
    net = Net("incommensurate")
    net.place("a", 1)
    net.place("b", 1)
    net.transition("ta", 1.0, inputs=["a"], outputs=["a"], tags={"step": True})
    net.transition("tb", math.sqrt(2.0), inputs=["b"], outputs=["b"])
    a, b = played_and_skipped(net, steps=2000, warmup=10)
    assert b.periodic is None
    assert b.to_dict() == a.to_dict()
    assert np.array_equal(a._raws[0].step_times, b._raws[0].step_times)


def test_without_samples_the_sums_are_the_played_ones():
    a, b = played_and_skipped(teg_net(2, det=True), steps=400, warmup=10, samples=False)
    assert b.periodic is not None
    assert a.throughput.mean == pytest.approx(b.throughput.mean, rel=RTOL)
    assert b._raws[0].firings.tolist() == a._raws[0].firings.tolist()


def test_the_jump_stops_short_of_the_event_budget():
    net = teg_net(2, det=True)
    full = simulate(net, steps=400, warmup=10, replications=1, engine="generic", periodic=False)
    need = int(full.events[0])
    ok = simulate(net, steps=400, warmup=10, replications=1, engine="generic", max_events=need)
    assert ok.periodic is not None and int(ok.events[0]) == need
    errors = []
    for periodic in (False, True):
        with pytest.raises(SimulationError) as e:
            simulate(net, steps=400, warmup=10, replications=1, seed=1, engine="generic",
                     max_events=need - 1, periodic=periodic)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_a_budget_that_runs_out_in_the_warmup_fails_as_the_played_run():
    # the warm-up's jump is bounded by max_events too: a budget below the warm-up's completions
    # raises the played run's error, and one just large enough is met exactly
    net = teg_net(2, det=True)
    kw = dict(steps=50, warmup=500, replications=1, engine="generic")
    warm = simulate(net, **kw, periodic=False)
    need = int(warm.events[0])
    ok = simulate(net, **kw, max_events=need)
    assert ok.periodic["warmup_skipped_steps"] > 0 and int(ok.events[0]) == need
    errors = []
    for periodic in (False, True):
        with pytest.raises(SimulationError) as e:
            simulate(net, **kw, seed=1, max_events=need // 3, periodic=periodic)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_periodic_is_a_bool():
    with pytest.raises(SimulationError, match="periodic"):
        simulate(loop(), steps=10, periodic="yes")


def test_nets_whose_states_would_take_too_much_memory_are_played(monkeypatch):
    import sgdnet.engine.periodic as Pz

    net = teg_net(2, det=True)
    monkeypatch.setattr(Pz, "MAX_STATE_BYTES", Pz.state_bytes(sgdnet.compile_net(net)) - 1)
    a, b = played_and_skipped(net, steps=400, warmup=10)
    assert b.periodic is None and b.to_dict() == a.to_dict()
