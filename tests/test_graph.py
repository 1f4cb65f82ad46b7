"""networkx views of a net: the bipartite graph and the transition-level event graph."""

import math

import pytest

from sgdnet.dists import Deterministic, Exponential
from sgdnet.errors import NotEventGraphError
from sgdnet.net import Net
from sgdnet.net.graph import SERVERS_KEY, event_graph, event_graph_arcs, node_id, to_networkx


@pytest.fixture(scope="module")
def rich():
    """Every kind of node and arc: weights, an inhibitor, resources, a gate and a modulator."""
    net = Net("rich")
    net.place("ready", 2, worker=0)
    net.place("grad", 0, worker=0)
    net.place("credit", 1)
    net.resource("gpu0", kind="gpu", host="worker0")
    net.resource("nic0", capacity=2, discipline="ps", kind="nic_up")
    net.transition("compute", Exponential(0.01), inputs={"ready": 1, "credit": 1},
                   outputs={"grad": 2}, resources=["gpu0"], tags={"worker": 0, "kind": "compute"},
                   modulator="slow", gate=("ssp", 0))
    net.transition("push", Deterministic(0.002), inputs={"grad": 2}, outputs=["ready", "credit"],
                   inhibitors={"ready": 5}, resources=["gpu0", "nic0"],
                   tags={"worker": 0, "kind": "comm", "step": True}, servers=math.inf)
    net.gate("ssp", "lag", counters=["push"], s=1)
    net.modulator("slow", Exponential(1.0), resample_on=["compute"])
    net.validate()
    return net, to_networkx(net)


def test_nodes_carry_kind_and_attributes(rich):
    net, g = rich
    kinds = {n: d["kind"] for n, d in g.nodes(data=True)}
    assert kinds == {
        "p:ready": "place", "p:grad": "place", "p:credit": "place",
        "t:compute": "transition", "t:push": "transition",
        "r:gpu0": "resource", "r:nic0": "resource",
    }
    ready = g.nodes[node_id("place", "ready")]
    assert ready["name"] == "ready" and ready["tokens"] == 2 and ready["tags"] == {"worker": 0}
    push = g.nodes["t:push"]
    assert push["mean"] == pytest.approx(0.002) and push["duration"] == repr(Deterministic(0.002))
    assert push["servers"] == math.inf and push["step"] is True
    assert push["resources"] == ["gpu0", "nic0"] and push["tags"]["kind"] == "comm"
    comp = g.nodes["t:compute"]
    assert comp["modulator"] == "slow" and comp["gate"] == ("ssp", 0) and comp["step"] is False
    nic = g.nodes["r:nic0"]
    assert nic["capacity"] == 2 and nic["discipline"] == "ps" and nic["tags"]["kind"] == "nic_up"
    assert g.graph["name"] == "rich" and g.graph["gates"] == ["ssp"]
    assert g.graph["modulators"] == ["slow"]


def test_arcs_carry_kind_and_weight(rich):
    net, g = rich
    arcs = sorted((u, v, k, d["weight"]) for u, v, k, d in g.edges(keys=True, data=True))
    assert arcs == sorted([
        ("p:ready", "t:compute", "input", 1),
        ("p:credit", "t:compute", "input", 1),
        ("t:compute", "p:grad", "output", 2),
        ("t:compute", "r:gpu0", "holds", 1),
        ("p:grad", "t:push", "input", 2),
        ("t:push", "p:ready", "output", 1),
        ("t:push", "p:credit", "output", 1),
        ("p:ready", "t:push", "inhibitor", 5),
        ("t:push", "r:gpu0", "holds", 1),
        ("t:push", "r:nic0", "holds", 1),
    ])
    for u, v, d in g.edges(data=True):
        assert d["kind"] == g.edges[u, v, d["kind"]]["kind"]
        ku, kv = g.nodes[u]["kind"], g.nodes[v]["kind"]
        # bipartite: places only touch transitions; resources are held by transitions
        assert {ku, kv} in ({"place", "transition"}, {"transition", "resource"})
    assert g.edges["p:ready", "t:push", "inhibitor"]["threshold"] == 5


def test_names_shared_across_kinds_do_not_collide():
    net = Net("same")
    net.place("x", 1)
    net.transition("x", 1.0, inputs=["x"], outputs=["x"])
    g = to_networkx(net)
    assert set(g.nodes) == {"p:x", "t:x"}
    assert g.number_of_edges() == 2


def test_event_graph_has_one_arc_per_place_plus_server_loops():
    net = Net("eg")
    net.place("a", 1)
    net.place("b", 0)
    net.place("c", 3)
    net.transition("f", 1.5, inputs=["a"], outputs=["b"], servers=2)
    net.transition("g", 0.5, inputs=["b", "c"], outputs=["a", "c"], servers=math.inf)
    eg = event_graph(net)
    assert set(eg.nodes) == {"f", "g"} and eg.nodes["f"]["servers"] == 2
    got = {(u, v, k): (d["delay"], d["tokens"], d["kind"]) for u, v, k, d in eg.edges(keys=True, data=True)}
    assert got == {
        ("g", "f", "a"): (0.5, 1, "place"),  # delay = the producer's duration
        ("f", "g", "b"): (1.5, 0, "place"),
        ("g", "g", "c"): (0.5, 3, "place"),
        ("f", "f", (SERVERS_KEY, "f")): (1.5, 2, "servers"),  # no loop for servers=inf
    }
    assert [a.place for a in event_graph_arcs(net)] == ["a", "b", "c", None]


def test_event_graph_rejects_other_nets(rich):
    net, _ = rich
    with pytest.raises(NotEventGraphError) as e:
        event_graph(net)
    msg = str(e.value)
    for what in ("gpu0", "inhibitor", "gate 'ssp'", "modulator 'slow'", "weight 2"):
        assert what in msg
    assert len(e.value.problems) >= 5 and any("'push' holds resources" in p for p in e.value.problems)
