"""The Net builder: names, arcs by object or name, collect-all validation, event-graph test."""

import math

import numpy as np
import pytest
from conftest import ring as shared_ring

from sgdnet.dists import Deterministic, Exponential
from sgdnet.errors import DistributionError, NetError
from sgdnet.net import Net


def ring(n=3, tokens=1):
    """The shared ring: durations 1, 2, ..., tokens on p0, last transition the step, worker 0."""
    return shared_ring([1.0 + i for i in range(n)], [tokens] + [0] * (n - 1), step=-1,
                       tags={"worker": 0})


def test_arcs_by_object_and_name_are_the_same():
    a = Net("a")
    p = a.place("p", 1)
    a.transition("t", 1.0, inputs={p: 1}, outputs=["p"])
    t = a.transitions["t"]
    assert t.inputs == {"p": 1} and t.outputs == {"p": 1}
    assert isinstance(t.duration, Deterministic) and t.duration.mean == 1.0


def test_string_durations_parse_units():
    net = Net()
    p = net.place("p", 1)
    t = net.transition("t", "3ms", inputs=[p], outputs=[p])
    assert t.duration.mean == pytest.approx(0.003)


def test_duplicate_names_rejected_at_once():
    net = Net()
    net.place("p")
    with pytest.raises(NetError, match="'p' is already used"):
        net.place("p")


def test_validate_collects_every_problem():
    net = Net("bad")
    a = net.place("a", 1)
    net.place("neg", -1)
    net.resource("r")
    net.resource("unused")
    net.resource("weird", capacity=0, discipline="lifo")
    net.transition("t", 1.0, inputs={a: 1}, outputs={"zz": 0}, resources=["r", "q", "weird"], servers=0)
    net.transition("src", 1.0, outputs=[a])
    with pytest.raises(NetError) as ei:
        net.validate()
    msg = str(ei.value)
    for needle in ["'zz' does not exist", "weight 0", "resource 'q' does not exist", "servers=0",
                   "'src' has no input places", "'unused' is held by no transition",
                   "tokens=-1", "capacity=0", "discipline='lifo'"]:
        assert needle in msg, needle
    assert len(ei.value.problems) >= 9


def test_gate_and_modulator_references_checked():
    net = Net("g")
    p = net.place("p", 1)
    net.transition("t", 1.0, inputs=[p], outputs=[p], gate=("nogate", 0), modulator="nomod")
    net.gate("g", "lag", counters=["t", "missing"], s=-1)
    net.modulator("m", Exponential(1.0), resample_on=["ghost"])
    msg = "\n".join(net.problems())
    assert "gate 'nogate' does not exist" in msg
    assert "modulator 'nomod' does not exist" in msg
    assert "counter transition 'missing' does not exist" in msg
    assert "s=-1" in msg
    assert "guards no transition" in msg
    assert "resample_on transition 'ghost'" in msg


def test_bad_duration_names_transition():
    net = Net()
    p = net.place("p", 1)
    with pytest.raises(DistributionError, match="transition 'x'.*-1"):
        net.transition("x", -1.0, inputs=[p], outputs=[p])


def test_event_graph_property():
    net = ring()
    assert net.is_event_graph()
    assert net.step_transitions() == ["t2"]
    assert net.tag_values("worker") == [0]
    net.validate()
    shared = ring()
    shared.resource("gpu")
    shared.transitions["t0"].resources = ("gpu",)
    v = shared.event_graph_violations()
    assert any("holds resources" in s for s in v)
    two = ring()
    two.transition("t_extra", 1.0, inputs={"p1": 1}, outputs={"p2": 1})
    assert any("place 'p1'" in s for s in two.event_graph_violations())


def test_infinite_servers_are_valid_and_copy_is_deep():
    net = ring()
    net.transitions["t0"].servers = math.inf
    net.validate()
    c = net.copy("c")
    c.places["p0"].tokens = 5
    assert net.places["p0"].tokens == 1 and c.name == "c"


def test_unshared_compile_hashes_nothing_and_keeps_the_net_s_own_form(monkeypatch):
    """``compile_net(net, share=False)`` (a study's re-rating template) never hashes the net,
    gives the same compiled form back for the unchanged net (also to a plain ``compile_net``)
    and compiles an edited one again; an equal net built apart is compiled apart."""
    from conftest import ring

    from sgdnet import simulate
    from sgdnet.dists import Deterministic
    from sgdnet.net import compiled as C

    calls = []
    real = C.content_key
    monkeypatch.setattr(C, "content_key", lambda cn: calls.append(1) or real(cn))
    net = ring([1.0, 2.0], [1, 0], name="template")
    a = C.compile_net(net, share=False)
    assert C.compile_net(net) is a and C.compile_net(net, share=False) is a and not calls
    twin = ring([1.0, 2.0], [1, 0], name="template")
    assert C.compile_net(twin, share=False) is not a and not calls
    kw = dict(steps=10, warmup=0, replications=1, seed=0)
    assert simulate(twin, **kw).throughput.mean == simulate(net, **kw).throughput.mean
    net.transitions["t0"].duration = Deterministic(3.0)
    b = C.compile_net(net, share=False)
    assert b is not a and b.d_par[0, 0] == 3.0 and not calls


@pytest.mark.parametrize("edit", [None, "net name", "transition name", "place name", "tokens",
                                  "weight", "duration", "cv", "servers", "priority", "tag",
                                  "resource", "capacity", "discipline"])
def test_compiled_nets_are_shared_by_content_and_any_difference_splits_them(edit):
    """compile_net keys a compiled net by its content (content_key): an equal net built apart
    gets the compiled form of the first (with what its runs learned); a net that differs in
    anything the kernel, the oracle or the results read gets its own, under another key."""
    from sgdnet import simulate
    from sgdnet.dists import LogNormal
    from sgdnet.net import compiled as C

    def make(edit=None):
        net = Net("other" if edit == "net name" else "shared")
        net.place("p0", 2 if edit == "tokens" else 1)
        net.place("q" if edit == "place name" else "p1", 0)
        p1 = "q" if edit == "place name" else "p1"
        net.resource("gpu", capacity=2 if edit == "capacity" else 1,
                     discipline="priority" if edit == "discipline" else "fifo")
        net.resource("nic" if edit == "resource" else "gpu2")
        net.transition("a" if edit == "transition name" else "t0",
                       LogNormal(1.5 if edit == "duration" else 1.0, 0.3 if edit == "cv" else 0.2),
                       inputs={"p0": 1}, outputs={p1: 2 if edit == "weight" else 1},
                       resources=("gpu",), tags={"step": True, "worker": 1 if edit == "tag" else 0})
        net.transition("t1", LogNormal(2.0, 0.2), inputs={p1: 2 if edit == "weight" else 1},
                       outputs={"p0": 1}, servers=2 if edit == "servers" else 1,
                       priority=1 if edit == "priority" else 0,
                       resources=("nic" if edit == "resource" else "gpu2",))
        return net

    first = C.compile_net(make())
    again = C.compile_net(make(edit))
    if edit is None:
        assert again is first and again.key == C.content_key(C.CompiledNet(make()))
        kw = dict(steps=20, warmup=0, replications=2, seed=3)
        assert np.array_equal(simulate(make(), **kw).throughput.samples,
                              simulate(C.CompiledNet(make()), **kw).throughput.samples)
    else:
        assert again is not first and again.key != first.key


def test_nets_too_big_to_hash_are_compiled_once_and_recompiled_after_an_edit(monkeypatch):
    """Above HASH_MAX_ELEMENTS a net is not hashed: the net itself, unchanged, gets its
    compiled form back; an edit compiles it again; an equal net built apart is compiled apart
    (and simulates the same)."""
    from conftest import ring

    from sgdnet import simulate
    from sgdnet.dists import Deterministic
    from sgdnet.net import compiled as C

    monkeypatch.setattr(C, "HASH_MAX_ELEMENTS", 3)
    calls = []
    real = C.content_key
    monkeypatch.setattr(C, "content_key", lambda cn: calls.append(1) or real(cn))
    net = ring([1.0, 2.0], [1, 0], name="big")
    a = C.compile_net(net)
    assert C.compile_net(net) is a and a.key.startswith("unhashed:") and not calls
    twin = ring([1.0, 2.0], [1, 0], name="big")
    assert C.compile_net(twin) is not a
    kw = dict(steps=10, warmup=0, replications=1, seed=0)
    assert simulate(twin, **kw).throughput.mean == simulate(net, **kw).throughput.mean
    net.transitions["t0"].duration = Deterministic(3.0)
    b = C.compile_net(net)
    assert b is not a and C.compile_net(net) is b and not calls
