"""Join stages (``Transition.backlog``): a message's first byte waits the queue the other
transfers keep in a link's buffer, ``sum(min(q, moved, left)) / bandwidth``.

Closed forms on one-shot nets (transfers start from initial tokens or after a delay; a slow clock
is the step), played by the kernel and by the reference oracle; completion times from the trace.
"""

from __future__ import annotations

import pytest

from sgdnet import Net, simulate
from sgdnet.dists import Deterministic
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import SgdnetError
from sgdnet.net import compile_net, from_pnml, to_pnml

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
BW = 1e6  # bytes/s: 1 kB per ms


def ends(sim, net: Net) -> dict[str, float]:
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


def scene(early: dict[str, tuple], t_join: float, q: float, late_bytes: float = 1e3) -> Net:
    """Transfers ``early`` (name -> (bytes, cap or None)) start at 0 on link L; at ``t_join`` a
    join stage ``J`` (backlog ``q`` on L) starts, then the late transfer ``B`` of
    ``late_bytes``."""
    net = Net("backlog")
    net.link("L", BW)
    for name, (nb, cap) in early.items():
        go = net.place(f"{name}.go", tokens=1)
        net.transfer(name, nb, ["L"], inputs={go: 1}, cap=cap)
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
@pytest.mark.parametrize("cap", [None, 0.5e6])
def test_a_transfer_alone_at_its_pace_queues_nothing(sim, cap):
    # alone on L (at L's rate, or at its own cap) it sends as fast as it is served
    e = ends(sim, scene({"A": (200e3, cap)}, 0.080, 50e3))
    assert e["J"] == pytest.approx(0.080, rel=1e-12)


@ENGINES
@pytest.mark.parametrize("q, each", [(15e3, 15e3), (50e3, 20e3)])
def test_transfers_that_share_build_the_queue_at_what_they_fall_behind_their_pace(sim, q, each):
    # two transfers share L from 0: at 40 ms each has moved 20 kB of the 40 kB its pace sent
    e = ends(sim, scene({"A1": (100e3, None), "A2": (100e3, None)}, 0.040, q))
    assert e["J"] == pytest.approx(0.040 + 2 * each / BW, rel=1e-12)


@ENGINES
@pytest.mark.parametrize("t_join, q, wait", [
    (0.060, 50e3, 0.010),  # A fell 10 kB behind while A2 shared L (0-20 ms) and keeps them
    (0.060, 4e3, 0.004),   # ... at most q
    (0.205, 50e3, 0.005),  # 5 kB of A left: no more than that can be queued
])
def test_a_queue_built_while_sharing_stays_until_it_is_carried(sim, t_join, q, wait):
    e = ends(sim, scene({"A": (200e3, None), "A2": (10e3, None)}, t_join, q))
    assert e["A2"] == pytest.approx(0.020, rel=1e-12)
    assert e["J"] == pytest.approx(t_join + wait, rel=1e-9)
    # the link carried A alone meanwhile; then B's 1 kB shares it with A (or follows A's end)
    a_left = 210e3 - BW * (t_join + wait)
    assert e["B"] == pytest.approx(
        t_join + wait + (2e3 if a_left >= 1e3 else a_left + 1e3) / BW, rel=1e-9)


@ENGINES
@pytest.mark.parametrize("carry", [True, False])
def test_a_connection_streaming_messages_back_to_back_keeps_its_queue(sim, carry):
    """X sends m1 (20 kB) then m2 (100 kB) on one connection while Y sends 100 kB: m1 ends at
    40 ms having fallen 20 kB behind its pace, which m2 carries on; at 60 ms m2 has moved 10 kB
    of the 20 kB its pace sent since, so X queues 30 kB, and so does Y (60 kB sent, 30 moved).
    Without the connection, m2 starts afresh: 10 kB."""
    net = Net("stream")
    net.link("L", BW)
    conn = {"connection": "cx"} if carry else {}
    for name, nb, opts in (("m1", 20e3, conn), ("m2", 100e3, conn), ("Y", 100e3, {})):
        go = net.place(f"{name}.go", tokens=1)
        net.transfer(name, nb, ["L"], inputs={go: 1}, **opts)
    if not carry:  # m2 after m1 all the same
        net.transitions["m2"].inputs.clear()
        net.transitions["m2"].inputs["m1.done"] = 1
        net.place("m1.done")
        net.transitions["m1"].outputs["m1.done"] = 1
    go = net.place("late.go", tokens=1)
    net.place("late.at")
    net.place("late.done")
    net.transition("delay", 0.060, inputs={go: 1}, outputs={"late.at": 1})
    net.transition("J", 0.0, inputs={"late.at": 1}, outputs={"late.done": 1}, backlog=("L", 50e3))
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    ev = [e for e in res.trace_events(0) if e["name"] in ("m1", "J")]
    assert ev[0]["name"] == "m1" and ev[0]["end"] == pytest.approx(0.040, rel=1e-12)
    j = next(e for e in ev if e["name"] == "J")
    assert j["end"] - j["start"] == pytest.approx((60e3 if carry else 40e3) / BW, rel=1e-9)


@ENGINES
def test_an_idle_link_and_transfers_that_start_together_cost_nothing(sim):
    e = ends(sim, scene({}, 0.010, 50e3))
    assert e["J"] == pytest.approx(0.010, rel=1e-12)
    assert e["B"] == pytest.approx(0.010 + 1e3 / BW, rel=1e-12)
    # transfers starting at the join's very instant have moved nothing and fallen behind nothing
    e = ends(sim, scene({"A1": (100e3, None), "A2": (100e3, None)}, 0.0, 50e3))
    assert e["J"] == 0.0


@ENGINES
def test_the_wait_is_added_to_the_sampled_duration(sim):
    net = scene({"A": (200e3, None), "A2": (10e3, None)}, 0.060, 50e3)
    net.transitions["J"].duration = Deterministic(0.002)
    e = ends(sim, net)
    assert e["J"] == pytest.approx(0.060 + 0.002 + 0.010, rel=1e-9)


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
