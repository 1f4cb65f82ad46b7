"""Bad input: each class of mistake raises its own SgdnetError subclass, and the message names the
offending value (and, where there is one, the fix). Simulation errors are checked on both engines."""

import math

import numpy as np
import pytest
from conftest import loop, ring

import sgdnet
from sgdnet import units
from sgdnet.dists import Deterministic, Exponential
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import (
    DeadlockError,
    DistributionError,
    NetError,
    SgdnetError,
    SimulationError,
    UnitError,
    UnknownNameError,
)
from sgdnet.net import Net

engines = pytest.mark.parametrize("sim", [sgdnet.simulate, simulate_reference], ids=["kernel", "reference"])


# ------------------------------------------------------------------ net errors
def _net_error(net, sim, *fragments):
    with pytest.raises(NetError) as e:
        sim(net, steps=5, warmup=0, replications=1, seed=0)
    msg = str(e.value)
    for f in fragments:
        assert f in msg, (f, msg)
    assert isinstance(e.value, SgdnetError) and e.value.problems
    return e.value


@engines
def test_unknown_place_in_arc_is_named(sim):
    net = loop()
    net.transition("u", 1.0, inputs={"p": 1, "nowhere": 1}, outputs=["elsewhere"])
    err = _net_error(net, sim, "'nowhere'", "'elsewhere'", "'u'", "net.place(")
    assert len(err.problems) == 2  # collect-all: both problems reported at once


@engines
def test_unknown_resource_bad_discipline_and_capacity(sim):
    net = loop()
    net.resource("nic", capacity=0, discipline="lifo")
    net.transition("u", 1.0, inputs=["p"], outputs=["p"], resources=["nic", "gpu9"])
    _net_error(net, sim, "'gpu9'", "capacity=0", "'lifo'", "fifo")


@engines
@pytest.mark.parametrize("servers", [0, 1.5, -1])
def test_bad_servers(sim, servers):
    net = loop()
    net.transition("u", 1.0, inputs=["p"], outputs=["p"], servers=servers)
    _net_error(net, sim, f"servers={servers!r}", "math.inf")


@engines
def test_bad_weights_tokens_and_priority(sim):
    net = loop()
    net.place("q", tokens=-2)
    net.transition("u", 1.0, inputs={"p": 0}, outputs={"q": 1}, priority=0.5)
    _net_error(net, sim, "tokens=-2", "weight 0", "priority=0.5")


@engines
def test_gate_and_modulator_references(sim):
    net = loop()
    net.gate("g", "lag", counters=["t"], s=1)
    net.transition("u", 1.0, inputs=["p"], outputs=["p"], gate=("g", 3), modulator="noisy")
    net.transition("v", 1.0, inputs=["p"], outputs=["p"], gate=("h", 0))
    _net_error(net, sim, "member 3", "'noisy'", "'h'")


@engines
def test_bad_gate_kind_and_parameters(sim):
    net = loop()
    net.gate("g", "stale", counters=["t", "ghost"], s=-1)
    net.transition("u", 1.0, inputs=["p"], outputs=["p"], gate=("g", 0))
    _net_error(net, sim, "'stale'", "'ghost'", "s=-1")


@engines
def test_transition_without_inputs_and_empty_net(sim):
    net = loop()
    net.transition("spring", 1.0, outputs=["p"])
    _net_error(net, sim, "'spring'", "no input places")
    _net_error(Net("empty"), sim, "no transitions")


def test_net_builder_rejects_names_and_gate_pairs():
    net = loop()
    with pytest.raises(NetError, match="'p' is already used"):
        net.place("p")
    with pytest.raises(NetError, match="gate='g'"):
        net.transition("u", 1.0, inputs=["p"], gate="g")
    with pytest.raises(NetError, match="42"):
        net.transition("w", 1.0, inputs=[42])


# ------------------------------------------------------ durations and units
@pytest.mark.parametrize("bad", [-1.0, float("nan"), -0.5])
def test_negative_or_nan_duration_is_a_distribution_error(bad):
    net = loop()
    with pytest.raises(DistributionError) as e:
        net.transition("u", bad, inputs=["p"])
    assert "'u'" in str(e.value) and repr(bad) in str(e.value)
    with pytest.raises(DistributionError, match=r"mean=-2"):
        Exponential(-2)


def test_bad_units_are_unit_errors():
    with pytest.raises(UnitError, match="'parsecs'"):
        units.seconds("3 parsecs")
    with pytest.raises(UnitError, match="Gbananas"):
        units.bandwidth("10 Gbananas")
    with pytest.raises(UnitError, match="'-3ms'"):
        units.seconds("-3ms")
    with pytest.raises(UnitError, match="'fast'"):
        Net().markov_modulator("m", 2.0, "fast", "1s")
    # a duration string with a bad unit: an SgdnetError naming it, at the transition
    with pytest.raises((UnitError, DistributionError)) as e:
        loop().transition("u", "3 parsecs", inputs=["p"])
    assert "3 parsecs" in str(e.value) and "'u'" in str(e.value)


# ------------------------------------------------------------ simulate args
@engines
@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"steps": 0}, "steps=0"),
        ({"steps": 2.5}, "steps=2.5"),
        ({"warmup": -1}, "warmup=-1"),
        ({"replications": 0}, "replications=0"),
        ({"seed": "abc"}, "seed='abc'"),
        ({"seed": -1}, "seed=-1"),
        ({"trace_limit": -5}, "trace_limit=-5"),
        ({"trace": "yes"}, "trace='yes'"),
        ({"max_events": 0}, "max_events=0"),
        ({"seeds": []}, "seeds=[]"),
        ({"seeds": [-3]}, "-3"),
    ],
)
def test_bad_simulate_arguments(sim, kwargs, fragment):
    with pytest.raises(SimulationError) as e:
        sim(loop(), **{"steps": 5, "warmup": 0, "replications": 1, **kwargs})
    assert fragment in str(e.value)


@engines
def test_not_a_net(sim):
    with pytest.raises(SimulationError, match="str"):
        sim("loop.pnml", steps=5)


@engines
def test_no_step_transition(sim):
    net = Net("nostep")
    net.place("p", 1)
    net.transition("t", 1.0, inputs=["p"], outputs=["p"])
    with pytest.raises(SimulationError, match="step"):
        sim(net, steps=5, warmup=0, replications=1)


@engines
def test_no_input_infinite_servers(sim):
    net = loop()
    net.place("q")
    net.transition("burst", 1.0, outputs=["q"], inhibitors={"q": 5}, servers=math.inf)
    with pytest.raises(SimulationError, match="'burst'"):
        sim(net, steps=5, warmup=0, replications=1)


# ---------------------------------------------------------------- deadlock
@engines
def test_deadlock_reports_marking_and_stuck_transitions(sim):
    # "first" fires once (1.5 s), then "second" needs b and c but c is never marked
    net = Net("dead")
    net.place("a", 1)
    net.place("b")
    net.place("c")
    net.place("d")
    net.transition("first", 1.5, inputs=["a"], outputs=["b"], tags={"step": True})
    net.transition("second", 1.0, inputs=["b", "c"], outputs=["d"])
    net.transition("third", 1.0, inputs=["d"], outputs=["a"])
    with pytest.raises(DeadlockError) as e:
        sim(net, steps=5, warmup=0, replications=2, seed=0)
    err = e.value
    assert isinstance(err, SimulationError)
    assert err.marking == {"a": 0, "b": 1, "c": 0, "d": 0}
    assert err.stuck == ["second"]
    assert err.time == 1.5 and err.replication == 0
    msg = str(err)
    assert "'second'" in msg and "'b': 1" in msg and "1.5" in msg


def test_deadlock_with_nothing_stuck_names_its_cause():
    # no token anywhere: nothing is "stuck" (no input is partially marked), so the report says why
    net = Net("empty")
    net.place("p")
    net.transition("t", 1.0, inputs=["p"], outputs=["p"], tags={"step": True})
    with pytest.raises(DeadlockError, match=r"No place holds a token.*tokens=1") as e:
        sgdnet.simulate(net, steps=3, warmup=0, replications=1, seed=0)
    assert e.value.stuck == [] and e.value.time == 0.0
    # the only token ends in a place nothing takes from: the report names that place
    net = Net("sink")
    net.place("a", 1)
    net.place("lost")
    net.place("b")
    net.transition("go", 2.0, inputs=["a"], outputs=["lost"], tags={"step": True})
    net.transition("back", 1.0, inputs=["b"], outputs=["a"])
    with pytest.raises(DeadlockError, match=r"no transition takes from \(\['lost'\]\)") as e:
        sgdnet.simulate(net, steps=3, warmup=0, replications=1, seed=0)
    assert e.value.stuck == [] and e.value.marking["lost"] == 1 and e.value.time == 2.0


@engines
def test_deadlock_through_an_inhibitor_and_a_gate(sim):
    net = Net("blocked")
    net.place("go", 1)
    net.place("full", 1)
    net.place("x", 1)
    net.place("y", 0)
    net.transition("step", 1.0, inputs=["go"], tags={"step": True})
    net.transition("blocked", 1.0, inputs=["x"], outputs=["y"], inhibitors={"full": 1})
    net.transition("drain", 1.0, inputs=["y"], outputs=["go"])
    with pytest.raises(DeadlockError) as e:
        sim(net, steps=3, warmup=0, replications=1, seed=0)
    assert e.value.stuck == ["blocked"] and e.value.time == 1.0
    assert e.value.marking == {"go": 0, "full": 1, "x": 1, "y": 0}


# ------------------------------------------------------------- never hangs
@engines
def test_event_budget(sim):
    # two completions per step: 40 steps fit the budget's count of step completions (checked
    # before the run) but spend it
    two = ring([1.0, 1.0], [1, 0], name="two")
    with pytest.raises(SimulationError) as e:
        sim(two, steps=40, warmup=0, replications=1, seed=0, max_events=50)
    assert "max_events=50" in str(e.value) and "exhausted" in str(e.value)


@engines
def test_zero_duration_cycle_stops_with_an_error(sim):
    net = Net("zeno")
    net.place("a", 1)
    net.place("c", 1)
    net.transition("spin", Deterministic(0.0), inputs=["a"], outputs=["a"])
    net.transition("s", 1.0, inputs=["c"], outputs=["c"], tags={"step": True})
    with pytest.raises(SimulationError) as e:
        sim(net, steps=3, warmup=0, replications=1, seed=0, max_events=20_000)
    assert not isinstance(e.value, DeadlockError)
    assert "max_events" in str(e.value) or "zero-duration" in str(e.value)


# ------------------------------------------------------------ result lookups
@pytest.fixture(scope="module")
def result():
    net = loop()
    net.resource("cpu")
    net.transitions["t"].resources = ("cpu",)
    net.transitions["t"].tags["worker"] = 0
    return sgdnet.simulate(net, steps=5, warmup=0, replications=2, seed=1)


def test_unknown_names_in_results_list_the_known_ones(result):
    with pytest.raises(UnknownNameError, match=r"'nope'.*\['t'\]"):
        result.firings("nope")
    with pytest.raises(UnknownNameError, match=r"'gpu'.*\['cpu'\]"):
        result.utilization("gpu")
    with pytest.raises(UnknownNameError, match=r"'gpu'.*\['cpu'\]"):
        result.mean_wait("gpu")
    with pytest.raises(UnknownNameError, match="'g'"):
        result.gate_log("g")
    with pytest.raises(UnknownNameError, match=r"worker=7.*\[0\]"):
        result.step_times(worker=7)
    with pytest.raises(SimulationError, match="trace=True"):
        result.trace_events(0)
    with pytest.raises(SimulationError, match="rep=5"):
        result.step_completion_times(5)
    assert isinstance(UnknownNameError("x"), KeyError)


def test_every_error_is_an_sgdnet_error():
    for cls in (UnitError, DistributionError, NetError, DeadlockError, SimulationError, UnknownNameError):
        assert issubclass(cls, SgdnetError)
    assert np.all([issubclass(c, ValueError) for c in (UnitError, DistributionError, NetError)])
