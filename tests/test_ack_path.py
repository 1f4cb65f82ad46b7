"""ACK paths (``Net.ack_path``): a link's flows are capped while the link their ACKs cross
carries data, at ``caps[n - 1]`` with ``n`` flows there (the last value beyond).

Closed forms on one-shot nets (transfers start from initial tokens; a slow clock is the step),
played by the kernel and by the reference oracle; completion times from the trace.
"""

from __future__ import annotations

import pytest

from sgdnet import Net, simulate
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import SgdnetError
from sgdnet.net import compile_net, from_pnml, to_pnml

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
BW = 1e6  # bytes/s: 1 kB per ms


def ends(sim, net: Net) -> dict[str, float]:
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


def scene(acks: list[float], caps, b_bytes: float = 100e3, b_at: float = 0.0,
          cap: float | None = None) -> Net:
    """Transfers ``A0, A1, ...`` of ``acks[i]`` bytes on link ``A`` from 0; transfer ``B`` of
    ``b_bytes`` on link ``L`` (own cap ``cap``) from ``b_at``; L's flows are acknowledged
    through A with ``caps``."""
    net = Net("ack")
    net.link("L", BW)
    net.link("A", BW)
    net.ack_path("L", "A", caps)
    for i, nb in enumerate(acks):
        go = net.place(f"a{i}.go", tokens=1)
        net.transfer(f"A{i}", nb, ["A"], inputs={go: 1})
    go = net.place("b.go", tokens=1)
    net.place("b.at")
    net.transition("delay", b_at, inputs={go: 1}, outputs={"b.at": 1})
    net.transfer("B", b_bytes, ["L"], inputs={"b.at": 1}, cap=cap)
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    return net


@ENGINES
def test_an_idle_ack_link_caps_nothing(sim):
    e = ends(sim, scene([], [0.25e6]))
    assert e["B"] == pytest.approx(100e3 / BW, rel=1e-12)


@ENGINES
@pytest.mark.parametrize("n, caps, rate", [
    (1, [0.5e6], 0.5e6),
    (2, [0.5e6, 0.25e6], 0.25e6),  # two flows on A: the second cap
    (3, [0.5e6, 0.25e6], 0.25e6),  # beyond the table: its last value
    (1, 0.2e6, 0.2e6),             # one number for any count
])
def test_a_busy_ack_link_caps_the_flow_at_its_count(sim, n, caps, rate):
    # A's flows outlast B: B moves at the cap throughout
    e = ends(sim, scene([1e6] * n, caps))
    assert e["B"] == pytest.approx(100e3 / rate, rel=1e-12)


@ENGINES
def test_the_cap_lifts_when_the_ack_link_empties(sim):
    # A0 (40 kB alone on A) ends at 40 ms; B has moved 0.5 MB/s x 40 ms = 20 kB by then and
    # moves its other 80 kB at the link's rate
    e = ends(sim, scene([40e3], [0.5e6]))
    assert e["A0"] == pytest.approx(0.040, rel=1e-12)
    assert e["B"] == pytest.approx(0.040 + 80e3 / BW, rel=1e-12)


@ENGINES
def test_the_cap_follows_the_count_down_and_up(sim):
    # A0 and A1 share A (0.5 MB/s each); A1 (10 kB) ends at 20 ms, A0 then runs alone; B
    # starts at 0: 0.25 MB/s while two, 0.5 MB/s while one: 5 kB by 20 ms, then A0's 190 kB at
    # 1 MB/s end at 210 ms: B has 95 kB - 0.5 MB/s x 190 ms = 0 left exactly at 210 ms
    e = ends(sim, scene([200e3, 10e3], [0.5e6, 0.25e6]))
    assert e["A1"] == pytest.approx(0.020, rel=1e-12)
    assert e["A0"] == pytest.approx(0.210, rel=1e-12)
    assert e["B"] == pytest.approx(0.210, rel=1e-9)


@ENGINES
def test_the_least_of_its_own_cap_and_the_ack_cap_wins(sim):
    e = ends(sim, scene([1e6], [0.5e6], cap=0.3e6))
    assert e["B"] == pytest.approx(100e3 / 0.3e6, rel=1e-12)
    e = ends(sim, scene([1e6], [0.5e6], cap=0.8e6))
    assert e["B"] == pytest.approx(100e3 / 0.5e6, rel=1e-12)


@ENGINES
def test_a_cap_above_the_fair_share_changes_nothing(sim):
    # two flows on L share it (0.5 MB/s each), the ACK cap 0.7 MB/s is above that
    net = scene([1e6], [0.7e6])
    go = net.place("b2.go", tokens=1)
    net.transfer("B2", 100e3, ["L"], inputs={go: 1})
    e = ends(sim, net)
    assert e["B"] == pytest.approx(0.2, rel=1e-12) and e["B2"] == pytest.approx(0.2, rel=1e-12)


def test_kernel_and_reference_agree_on_a_random_ack_net():
    """A PS host's pattern: three workers push random messages into D (acknowledged through
    U) and take pulls back out of U in a loop: both engines give the same step times; the
    ACK path survives a PNML round trip and enters the content key."""
    from sgdnet.dists import LogNormal
    net = Net("ack-loop")
    net.link("D", BW)
    net.link("U", BW)
    net.ack_path("D", "U", [0.6e6, 0.4e6, 0.3e6])
    for w in range(3):
        ready = net.place(f"w{w}.ready", tokens=1)
        for p in ("msg", "in"):
            net.place(f"w{w}.{p}")
        net.transition(f"w{w}.compute", LogNormal(0.02, 0.5), inputs={ready: 1},
                       outputs={f"w{w}.msg": 1})
        net.transfer(f"w{w}.push", LogNormal(20e3, 0.3), ["D"], inputs={f"w{w}.msg": 1},
                     outputs={f"w{w}.in": 1})
        net.transfer(f"w{w}.pull", LogNormal(20e3, 0.3), ["U"], inputs={f"w{w}.in": 1},
                     outputs={ready: 1}, tags={"step": True})
    a = simulate(net, steps=300, warmup=10, replications=2, seed=5, samples=True)
    b = simulate_reference(net, steps=300, warmup=10, replications=2, seed=5)
    assert a.throughput.mean == pytest.approx(b.throughput.mean, rel=1e-9)
    plain = net.copy()
    plain.resources["D"].ack_path = None
    c = simulate(plain, steps=300, warmup=10, replications=2, seed=5)
    assert c.throughput.mean > 1.02 * a.throughput.mean  # the caps cost something here
    back = from_pnml(to_pnml(net))
    assert back.resources["D"].ack_path == ("U", (0.6e6, 0.4e6, 0.3e6))
    assert compile_net(back).key == compile_net(net).key != compile_net(plain).key


@pytest.mark.parametrize("args, match", [
    (("L", "A", 0), "caps=0 must be"),
    (("L", "A", []), "caps=\\[\\] must be"),
    (("L", "A", [1e5, -1]), "must be a number or a non-empty sequence"),
    (("L", "A", "fast"), "caps='fast'"),
    (("L", "A", ["5"]), "caps=\\['5'\\] must be"),  # a string is not a number of bytes/s
    (("L", "A", None), "caps=None must be"),
    (("L", "L", 1e5), "its own ACK path"),
    (("L", "cpu", 1e5), "'cpu' is not a link"),
    (("nolink", "A", 1e5), "'nolink' is not a link"),
])
def test_bad_ack_paths_are_refused_naming_the_value(args, match):
    net = Net("bad")
    net.link("L", BW)
    net.link("A", BW)
    net.resource("cpu", 1)
    with pytest.raises(SgdnetError, match=match):
        net.ack_path(*args)


def test_an_ack_path_set_by_hand_is_checked_by_the_validation():
    net = Net("bad")
    net.link("L", BW)
    net.resources["L"].ack_path = ("gone", (1e5,))
    p = net.place("p", tokens=1)
    net.transition("t", 1.0, inputs={p: 1}, outputs={p: 1}, tags={"step": True})
    with pytest.raises(SgdnetError, match="ack_path's link 'gone' must be another link"):
        net.validate()


def test_a_clusters_ack_share_puts_the_cap_on_each_ps_hosts_downlink_only():
    from sgdnet import Cluster, variants
    from sgdnet.errors import ClusterError
    from sgdnet.models import load

    prof = load("resnet50")
    net = variants.build("sync-ps", prof, Cluster(workers=3, bandwidth="1Gbps", ps_shards=2,
                                                  tcp_ack_share=(1.0, 0.5)), granularity="fine")
    acked = {n: r.ack_path for n, r in net.resources.items() if r.ack_path is not None}
    bw = 1e9 / 8
    assert acked == {f"ps{k}.down": (f"ps{k}.up", (float("inf"), 0.5 * bw)) for k in range(2)}
    one = variants.build("sync-ps", prof, Cluster(workers=1, bandwidth="1Gbps",
                                                  tcp_ack_share=(0.5,)), granularity="fine")
    assert all(r.ack_path is None for r in one.resources.values())  # one connection: none
    for bad in ("0.5", (0.5, 0), (True,), 0.5):
        with pytest.raises(ClusterError, match="Cluster.tcp_ack_share="):
            Cluster(workers=2, tcp_ack_share=bad)
