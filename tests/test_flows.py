"""Flows: closed forms of max-min sharing, connections, latency, incast and accounting.

Each case is a one-shot net (transfers start from initial tokens, a slow clock transition is the
step) played by the kernel and the reference oracle; completion times come from the trace.
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Net, simulate
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import NetError, SgdnetError

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
MB = 1e6
BW = 125e6  # 1 Gb/s in bytes/s


def _clock(net: Net, period: float = 1e4) -> None:
    clk = net.place("clock", tokens=1)
    net.transition("tick", period, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})


def ends(sim, net: Net) -> dict[str, float]:
    """Completion time of every traced firing (name -> end; the last one for repeated names)."""
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


def oneshot(links: dict, flows: dict, **kw) -> Net:
    """``flows``: name -> (bytes, path, options for Net.transfer); all start at time 0."""
    net = Net("oneshot")
    for name, bw in links.items():
        net.link(name, bw, **kw.get(name, {}))
    for name, (nb, path, opts) in flows.items():
        go = net.place(f"{name}.go", tokens=1)
        net.transfer(name, nb, path, inputs={go: 1}, **opts)
    _clock(net)
    return net


@ENGINES
def test_three_flows_on_two_unit_links_each_get_half(sim):
    # the textbook example: A crosses both links, B and C one each -> every flow gets 1/2
    net = oneshot({"L1": BW, "L2": BW}, {"A": (MB, ["L1", "L2"], {}), "B": (MB, ["L1"], {}),
                                        "C": (MB, ["L2"], {})})
    e = ends(sim, net)
    for f in "ABC":
        assert e[f] == pytest.approx(2 * MB / BW, rel=1e-12)


@ENGINES
def test_a_flow_limited_elsewhere_leaves_its_share_to_the_others(sim):
    # A is held to BW/4 by L2, so B gets 3/4 of L1: B (3 MB) and A (1 MB) both end at 4 MB / BW
    net = oneshot({"L1": BW, "L2": BW / 4}, {"A": (MB, ["L1", "L2"], {}), "B": (3 * MB, ["L1"], {})})
    e = ends(sim, net)
    assert e["A"] == pytest.approx(4 * MB / BW, rel=1e-12)
    assert e["B"] == pytest.approx(4 * MB / BW, rel=1e-12)


@ENGINES
def test_a_rate_cap_is_a_private_bottleneck(sim):
    # A capped at BW/5: B gets 4/5 until it ends at 1.25 s-units; then A alone, still capped
    net = oneshot({"L": BW}, {"A": (MB, ["L"], {"cap": BW / 5}), "B": (MB, ["L"], {})})
    e = ends(sim, net)
    assert e["B"] == pytest.approx(1.25 * MB / BW, rel=1e-12)
    assert e["A"] == pytest.approx(5 * MB / BW, rel=1e-12)


@ENGINES
def test_two_messages_on_one_connection_go_in_order(sim):
    s1, s2 = 3 * MB, 2 * MB
    net = Net("conn")
    net.link("L", BW)
    a, b = net.place("a", tokens=1), net.place("b", tokens=1)
    # declared second but requested at the same instant: declaration order breaks the tie
    net.transfer("m1", s1, ["L"], inputs={a: 1}, connection="x->y")
    net.transfer("m2", s2, ["L"], inputs={b: 1}, connection="x->y")
    _clock(net)
    e = ends(sim, net)
    assert e["m1"] == pytest.approx(s1 / BW, rel=1e-12)
    assert e["m2"] == pytest.approx((s1 + s2) / BW, rel=1e-12)


@ENGINES
@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_n_connections_into_one_link_each_finish_at_n_s_over_b(sim, n):
    net = oneshot({"down": BW, **{f"up{i}": BW for i in range(n)}},
                  {f"f{i}": (MB, [f"up{i}", "down"], {"connection": f"{i}->ps"}) for i in range(n)})
    e = ends(sim, net)
    for i in range(n):
        assert e[f"f{i}"] == pytest.approx(n * MB / BW, rel=1e-12)


@ENGINES
def test_incast_efficiency_lowers_the_goodput_of_many_flows_into_a_link(sim):
    eff = (1.0, 0.9, 0.8)
    n = 4  # beyond the curve: its last value applies
    net = oneshot({"down": BW, **{f"up{i}": BW for i in range(n)}},
                  {f"f{i}": (MB, [f"up{i}", "down"], {}) for i in range(n)},
                  down={"efficiency": eff})
    e = ends(sim, net)
    for i in range(n):
        assert e[f"f{i}"] == pytest.approx(n * MB / (BW * 0.8), rel=1e-12)


@ENGINES
def test_latency_is_added_once_and_the_connection_frees_when_the_bytes_are_through(sim):
    lat_up, lat_down = 0.003, 0.002
    net = Net("lat")
    net.link("up", BW, latency=lat_up)
    net.link("down", BW, latency=lat_down)
    a, b = net.place("a", tokens=1), net.place("b", tokens=1)
    got1, got2 = net.place("got1"), net.place("got2")
    names = net.transfer("m1", MB, ["up", "down"], inputs={a: 1}, outputs={got1: 1}, connection="c")
    net.transfer("m2", MB, ["up", "down"], inputs={b: 1}, outputs={got2: 1}, connection="c")
    assert names == ["m1", "m1.lat"]
    _clock(net)
    e = ends(sim, net)
    assert e["m1"] == pytest.approx(MB / BW, rel=1e-12)  # bytes through
    assert e["m1.lat"] == pytest.approx(MB / BW + lat_up + lat_down, rel=1e-12)  # arrived
    assert e["m2"] == pytest.approx(2 * MB / BW, rel=1e-12)  # pipelined behind m1's bytes
    assert e["m2.lat"] == pytest.approx(2 * MB / BW + lat_up + lat_down, rel=1e-12)


@ENGINES
def test_link_utilization_is_its_carried_rate_over_its_bandwidth(sim):
    # a closed loop: 1 MB over the link (8 ms), then 8 ms of compute: the link carries its full
    # bandwidth half of the time; with efficiency 0.5 it carries half of it 16 ms out of 24
    for eff, util in ((None, 0.5), (0.5, 1 / 3)):
        net = Net("util")
        net.link("L", BW, efficiency=eff)
        p, q = net.place("p", tokens=1), net.place("q")
        net.transfer("send", MB, ["L"], inputs={p: 1}, outputs={q: 1})
        net.transition("work", 8e-3, inputs={q: 1}, outputs={p: 1}, tags={"step": True})
        res = sim(net, steps=50, warmup=5, replications=1, seed=0)
        cycle = 8e-3 + MB / (BW * (eff or 1.0))
        assert res.throughput.mean == pytest.approx(1 / cycle, rel=1e-9)
        assert res.utilization("L").mean == pytest.approx(util, rel=1e-9)


def test_many_concurrent_flows_grow_the_kernel_tables():
    # 300 transfers of one infinite-server transition at once: more holders than first sized
    net = Net("many")
    net.link("L", BW)
    go = net.place("go", tokens=300)
    net.transfer("f", MB, ["L"], inputs={go: 1}, servers=math.inf)
    _clock(net)
    e = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True).trace_events(0)
    done = [x["end"] for x in e if x["name"] == "f"]
    assert len(done) == 300
    assert max(done) == pytest.approx(min(done)) == pytest.approx(300 * MB / BW, rel=1e-12)


@pytest.mark.parametrize("build, match", [
    (lambda n: n.link("L", 0), "bandwidth"),
    (lambda n: n.link("L", "-1Gbps"), "bandwidth"),
    (lambda n: n.link("L", "1Gbps", latency=-1), "latency"),
    (lambda n: n.link("L", "1Gbps", efficiency="high"), "efficiency"),
    (lambda n: n.transfer("t", MB, ["nowhere"]), "not a link"),
    (lambda n: n.transfer("t", MB, []), "path is empty"),
    (lambda n: n.transfer("t", -5, ["L0"]), "nbytes"),
    (lambda n: n.transfer("t", MB, ["L0"], cap=0), "cap"),
])
def test_bad_links_and_transfers_are_refused_at_once(build, match):
    net = Net("bad")
    net.link("L0", BW)
    with pytest.raises(SgdnetError, match=match):
        build(net)


def test_invalid_link_fields_are_listed_by_validate():
    net = Net("bad")
    link = net.link("L", BW, efficiency=[1.0, 1.5])
    net.resource("cpu", 1, "ps")
    p = net.place("p", tokens=1)
    net.transfer("t", MB, ["L"], inputs={p: 1}, outputs={p: 1}, resources=["cpu"])
    net.transition("x", 1.0, inputs={p: 1}, outputs={p: 1}, tags={"step": True})
    net.transitions["x"].flow_cap = 5.0
    link.latency = math.nan
    with pytest.raises(NetError) as ei:
        net.validate()
    msg = str(ei.value)
    assert "efficiency 1.5" in msg and "latency=nan" in msg
    assert "both links and ps resources" in msg
    assert "holds no link" in msg
