"""The builders' fast path (issue #15): :meth:`Net.insert` of prepared elements builds the very
net the checked builder methods build.

:func:`sgdnet.variants.compute.compute_chain` makes a worker's places and transitions directly
and inserts them at once; when a name is taken it goes the checked way (which reports it).
Each variant is built both ways here (the fast path switched off by making ``insert`` refuse)
and the two nets compared element by element, in declaration order, and by structural key.
"""

import pytest

from sgdnet import Cluster
from sgdnet.errors import NetError
from sgdnet.net import Net
from sgdnet.net.compiled import structural_key
from sgdnet.net.elements import new_place, new_transition
from sgdnet.variants import get
from sgdnet.workload.stragglers import StepSlowdown

SMALL = Cluster(workers=3, bandwidth="10Gbps", latency="10us", compute_cv=0.1, comm_cv=0.05)
TOPO = Cluster.from_file("examples/clusters/p4d-8xa100-4x100g.yaml", workers=16)

CASES = [("allreduce", SMALL, {}), ("allreduce", TOPO, {"algorithm": "hierarchical"}),
         ("sync-ps", SMALL, {}), ("async-ps", SMALL, {}), ("ssp", SMALL, {"staleness": 1}),
         ("dssp", SMALL, {}), ("local-sgd", SMALL, {}), ("backup", SMALL, {}),
         ("pipe-sgd", SMALL, {}), ("cocod", SMALL, {}),
         ("allreduce", SMALL.replace(straggler=StepSlowdown(0.2, 3.0)), {})]


def _elements(net: Net) -> list:
    out = []
    for table in ("places", "resources", "transitions", "gates", "modulators"):
        for name, el in getattr(net, table).items():
            d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(el).items()}
            out.append((table, name, type(el).__name__, d))
    return out


@pytest.mark.parametrize("variant,cluster,opts", CASES,
                         ids=[f"{v}-{o.get('algorithm', '')}{i}" for i, (v, _, o) in enumerate(CASES)])
def test_fast_and_checked_builds_are_the_same_net(variant, cluster, opts, monkeypatch):
    fast = get(variant).build("resnet18", cluster, "fine", **opts)
    with monkeypatch.context() as m:
        m.setattr(Net, "insert", lambda self, places, transitions: False)
        checked = get(variant).build("resnet18", cluster, "fine", **opts)
    assert _elements(fast) == _elements(checked)
    assert structural_key(fast) == structural_key(checked)


def test_insert_refuses_a_taken_or_repeated_name_and_adds_nothing():
    net = Net()
    net.place("p", 1)
    t = new_transition("t", 1.0, {"p": 1}, {"p": 1}, (), {})
    assert not net.insert([new_place("p", 0, {})], [t])
    assert not net.insert([new_place("q", 0, {}), new_place("q", 0, {})], [])
    assert not net.insert([], [t, new_transition("t", 1.0, {"p": 1}, {}, (), {})])
    assert list(net.places) == ["p"] and not net.transitions
    assert net.insert([new_place("q", 0, {"worker": 1})], [t])
    assert list(net.places) == ["p", "q"] and list(net.transitions) == ["t"]
    assert net.places["q"].tags == {"worker": 1}


def test_a_taken_chain_name_is_reported_by_the_checked_builder():
    from sgdnet.variants.compute import compute_chain
    from sgdnet.variants.fabric import Fabric
    from sgdnet.variants.inputs import resolve_model

    net = Net()
    fab = Fabric(net, SMALL, "flows")
    net.place("w0.f1.done")
    with pytest.raises(NetError, match="'w0.f1.done' is already used"):
        compute_chain(net, fab, resolve_model("resnet18"), SMALL, 0)


def test_add_places_is_place_one_by_one():
    a, b = Net(), Net()
    specs = [("p", 1, {"worker": 0}), ("q", 0, {}), ("r", 2, {"layer": 3, "worker": 1})]
    assert a.add_places(iter(specs)) == ["p", "q", "r"]
    for name, tokens, tags in specs:
        b.place(name, tokens, **tags)
    assert _elements(a) == _elements(b)
    with pytest.raises(NetError, match="'q' is already used"):
        a.add_places([("s", 0, {}), ("q", 0, {})])
    for bad in ("", 3, None):
        with pytest.raises(NetError, match="must be a non-empty string"):
            Net().add_places([(bad, 0, {})])
