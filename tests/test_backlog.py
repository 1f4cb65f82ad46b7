"""Join stages (``Transition.backlog``): a message's first byte waits the queue the other
transfers keep in a link's buffer, ``sum(min(q, moved, left)) / bandwidth``.

Closed forms on one-shot nets (transfers start from initial tokens or after a delay; a slow clock
is the step), played by the kernel and by the reference oracle; completion times from the trace.
"""

from __future__ import annotations

import pytest

from sgdnet import Net, simulate
from sgdnet.dists import Deterministic
from sgdnet.net import compile_net, from_pnml, to_pnml
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import SgdnetError

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
BW = 1e6  # bytes/s: 1 kB per ms


def ends(sim, net: Net) -> dict[str, float]:
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


def scene(early: dict[str, float], t_join: float, q: float, late_bytes: float = 1e3) -> Net:
    """Transfers ``early`` (name -> bytes) start at 0 on link L; at ``t_join`` a join stage
    ``J`` (backlog ``q`` on L) starts, then the late transfer ``B`` of ``late_bytes``."""
    net = Net("backlog")
    net.link("L", BW)
    for name, nb in early.items():
        go = net.place(f"{name}.go", tokens=1)
        net.transfer(name, nb, ["L"], inputs={go: 1})
    go = net.place("late.go", tokens=1)
    net.place("late.at")
    net.place("late.in")
    net.transition("delay", t_join, inputs={go: 1}, outputs={"late.at": 1})
    net.transition("J", 0.0, inputs={"late.at": 1}, outputs={"late.in": 1}, backlog=("L", q))
    net.transfer("B", late_bytes, ["L"], inputs={"late.in": 1})
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    return net


@ENGINES
@pytest.mark.parametrize("t_join, q, wait", [
    (0.010, 50e3, 0.010),   # queue still building: A has moved 10 kB < q
    (0.080, 50e3, 0.050),   # A's standing queue q is full
    (0.195, 50e3, 0.005),   # only 5 kB of A left: it cannot queue more than that
])
def test_one_transfer_ahead_queues_min_of_q_moved_and_left(sim, t_join, q, wait):
    e = ends(sim, scene({"A": 200e3}, t_join, q))
    assert e["J"] == pytest.approx(t_join + wait, rel=1e-12)
    # while B waits, A has the link alone; afterwards they share it
    a_left = 200e3 - BW * (t_join + wait)
    assert e["B"] == pytest.approx(t_join + wait + (2 * 1e3 if a_left >= 1e3 else a_left + 1e3) / BW,
                                   rel=1e-9)


@ENGINES
def test_each_transfer_ahead_adds_its_own_queue(sim):
    # two transfers share L from 0: each has moved 20 kB at 40 ms; q = 15 kB each -> 30 ms
    e = ends(sim, scene({"A1": 100e3, "A2": 100e3}, 0.040, 15e3))
    assert e["J"] == pytest.approx(0.040 + 2 * 15e3 / BW, rel=1e-12)


@ENGINES
def test_an_idle_link_and_transfers_that_start_together_cost_nothing(sim):
    e = ends(sim, scene({}, 0.010, 50e3))
    assert e["J"] == pytest.approx(0.010, rel=1e-12)
    assert e["B"] == pytest.approx(0.010 + 1e3 / BW, rel=1e-12)
    # a transfer starting at the join's very instant has moved nothing yet
    e = ends(sim, scene({"A": 100e3}, 0.0, 50e3))
    assert e["J"] == 0.0


@ENGINES
def test_the_wait_is_added_to_the_sampled_duration(sim):
    net = scene({"A": 200e3}, 0.080, 50e3)
    net.transitions["J"].duration = Deterministic(0.002)
    e = ends(sim, net)
    assert e["J"] == pytest.approx(0.080 + 0.002 + 0.050, rel=1e-12)


def test_kernel_and_reference_agree_on_a_random_backlog_net():
    """Three connections pushing messages of random size in a loop into one link, each
    message behind a join stage: both engines give the same step times."""
    from sgdnet.dists import LogNormal
    net = Net("backlog-loop")
    net.link("L", BW)
    for w in range(3):
        ready = net.place(f"w{w}.ready", tokens=1)
        net.place(f"w{w}.msg")
        net.place(f"w{w}.go")
        net.transition(f"w{w}.compute", LogNormal(0.02, 0.5), inputs={ready: 1},
                       outputs={f"w{w}.msg": 1})
        net.transition(f"w{w}.join", 0.0, inputs={f"w{w}.msg": 1}, outputs={f"w{w}.go": 1},
                       backlog=("L", 8e3))
        net.transfer(f"w{w}.push", LogNormal(20e3, 0.3), ["L"], inputs={f"w{w}.go": 1},
                     outputs={ready: 1}, tags={"step": True})
    a = simulate(net, steps=300, warmup=10, replications=2, seed=5, samples=True)
    b = simulate_reference(net, steps=300, warmup=10, replications=2, seed=5)
    assert a.throughput.mean == pytest.approx(b.throughput.mean, rel=1e-9)
    back = from_pnml(to_pnml(net))
    assert back.transitions["w0.join"].backlog == ("L", 8e3)
    assert compile_net(back).key == compile_net(net).key


@pytest.mark.parametrize("backlog, match", [
    (("L", 0), "backlog bytes"),
    (("L", -5), "backlog bytes"),
    ("L", "backlog="),
    (("nolink", 1e3), "is not a link"),
])
def test_bad_backlogs_are_refused_naming_the_value(backlog, match):
    net = Net("bad")
    net.link("L", BW)
    net.resource("nolink", 1)
    p = net.place("p", tokens=1)
    with pytest.raises(SgdnetError, match=match):
        net.transition("J", 0.0, inputs={p: 1}, outputs={p: 1}, backlog=backlog,
                       tags={"step": True})
        net.validate()
