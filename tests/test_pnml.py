"""PNML interchange: standard P/T structure other tools read, and a lossless sgdnet round trip."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import exotic_net, ps_net

from sgdnet.errors import NetError, SgdnetError
from sgdnet.net import Net
from sgdnet.net.pnml import PNML_NS, PTNET_TYPE, from_pnml, to_pnml

Q = "{" + PNML_NS + "}"
NCNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def check_ptnet_structure(text: str) -> dict:
    """A small structural checker of ISO/IEC 15909-2 P/T nets (the parts of the ptnet grammar
    other tools rely on). Returns {"places": {id: marking}, "transitions": {id}, "arcs": [...]}."""
    root = ET.fromstring(text)
    assert root.tag == Q + "pnml", "root must be <pnml> in the PNML 2009 namespace"
    nets = root.findall(Q + "net")
    assert len(nets) >= 1
    ids: list[str] = []
    places: dict[str, int] = {}
    transitions: set[str] = set()
    arcs: list[tuple[str, str, int]] = []
    for net in nets:
        assert net.get("type") == PTNET_TYPE
        ids.append(net.get("id"))
        pages = net.findall(Q + "page")
        assert len(pages) == 1, "sgdnet writes exactly one page"
        for child in net:
            assert child.tag in {Q + "name", Q + "page", Q + "toolspecific"}, child.tag
        for page in pages:
            ids.append(page.get("id"))
            for e in page:
                tag = e.tag.replace(Q, "")
                assert tag in {"place", "transition", "arc", "toolspecific", "name"}, tag
                if tag in ("place", "transition", "arc"):
                    ids.append(e.get("id"))
                    for lab in e:
                        ltag = lab.tag.replace(Q, "")
                        if ltag == "toolspecific":
                            assert lab.get("tool") and lab.get("version")
                            continue
                        allowed = {"place": {"name", "initialMarking"}, "transition": {"name"},
                                   "arc": {"inscription"}}[tag]
                        assert ltag in allowed, f"<{ltag}> is not a standard label of <{tag}>"
                        txt = lab.findall(Q + "text")
                        assert len(txt) == 1, f"<{ltag}> needs exactly one <text>"
                if tag == "place":
                    m = e.find(Q + "initialMarking/" + Q + "text")
                    places[e.get("id")] = 0 if m is None else int(m.text)
                    assert places[e.get("id")] >= 0
                elif tag == "transition":
                    transitions.add(e.get("id"))
                elif tag == "arc":
                    w = e.find(Q + "inscription/" + Q + "text")
                    arcs.append((e.get("source"), e.get("target"), 1 if w is None else int(w.text)))
    assert all(i and NCNAME.match(i) for i in ids), [i for i in ids if not (i and NCNAME.match(i))]
    assert len(ids) == len(set(ids)), "ids must be unique in the document"
    for s, d, w in arcs:
        assert (s in places and d in transitions) or (s in transitions and d in places), (s, d)
        assert w >= 1
    return {"places": places, "transitions": transitions, "arcs": arcs}


def flow_net() -> Net:
    """Two hosts exchanging over links with latency, an incast curve, a connection and a cap."""
    net = Net("flows")
    net.link("h0.up", "10Gbps", latency="20us", host="h0", kind="nic_up")
    net.link("h1.down", "10Gbps", efficiency=[1.0, 0.9, 0.8], host="h1", kind="nic_down")
    net.resource("h0.gpu", host="h0", kind="gpu")
    ready, grad = net.place("ready", tokens=2), net.place("grad")
    net.transition("compute", "2ms", inputs={ready: 1}, outputs={grad: 1}, resources=["h0.gpu"],
                   tags={"step": True, "worker": 0})
    net.transfer("push", "4MB", ["h0.up", "h1.down"], inputs={grad: 1}, outputs={ready: 1},
                 connection="h0->h1", cap="8Gbps")
    return net.validate()


def same_net(a: Net, b: Net) -> None:
    assert a.name == b.name
    for table in ("places", "resources", "transitions", "gates", "modulators"):
        A, B = getattr(a, table), getattr(b, table)
        assert list(A) == list(B), table
        for k in A:
            assert vars(A[k]) == vars(B[k]), (table, k)
            if table == "transitions":  # dict order of arcs is kept too
                for f in ("inputs", "outputs", "inhibitors"):
                    assert list(getattr(A[k], f)) == list(getattr(B[k], f))
    assert a.meta == b.meta


@pytest.mark.parametrize("make", [ps_net, exotic_net, flow_net])
def test_round_trip_is_lossless(make, tmp_path):
    net = make()
    path = tmp_path / "net.pnml"
    text = to_pnml(net, path)
    assert path.read_text(encoding="utf-8") == text
    same_net(net, from_pnml(path))
    same_net(net, from_pnml(text))


@pytest.mark.parametrize("make", [ps_net, exotic_net, flow_net])
def test_structure_is_a_standard_ptnet(make):
    net = make()
    s = check_ptnet_structure(to_pnml(net))
    # The P/T view: every place with its marking, every transition, every input/output arc
    # with its weight; inhibitors are not P/T arcs and must not appear as such.
    assert sorted(s["places"].values()) == sorted(p.tokens for p in net.places.values())
    assert len(s["transitions"]) == len(net.transitions)
    n_arcs = sum(len(t.inputs) + len(t.outputs) for t in net.transitions.values())
    assert len(s["arcs"]) == n_arcs
    assert sorted(w for *_, w in s["arcs"]) == sorted(
        [w for t in net.transitions.values() for w in (*t.inputs.values(), *t.outputs.values())]
    )
    _check_structure_matches(to_pnml(net), net)  # and node by node, without the sgdnet extension


def test_names_with_odd_characters_keep_their_text_and_get_distinct_ids():
    net = exotic_net()
    root = ET.fromstring(to_pnml(net))
    names = {e.findtext(f"{Q}name/{Q}text"): e.get("id") for e in root.iter(Q + "place")}
    assert set(names) == {"a b", "1st:place", "a_b"}
    assert len(set(names.values())) == 3
    assert root.find(Q + "net").findtext(f"{Q}name/{Q}text") == "exotic <net> & co"


def test_foreign_plain_ptnet_is_read_with_default_durations():
    doc = f"""<?xml version="1.0"?>
    <pnml xmlns="{PNML_NS}"><net id="n" type="{PTNET_TYPE}"><name><text>pingpong</text></name>
      <page id="pg"><place id="p1"><initialMarking><text>1</text></initialMarking></place>
        <page id="sub"><place id="p2"/><transition id="t1"><name><text>ping</text></name></transition>
          <referencePlace id="r1" ref="p1"/></page>
        <transition id="t2"/>
        <arc id="a1" source="p1" target="t1"/><arc id="a2" source="t1" target="p2"><inscription><text>2</text></inscription></arc>
        <arc id="a3" source="p2" target="t2"><inscription><text>2</text></inscription></arc>
        <arc id="a4" source="t2" target="r1"/></page></net></pnml>"""
    net = from_pnml(doc, default_duration=0.5)
    assert list(net.places) == ["p1", "p2"] and list(net.transitions) == ["ping", "t2"]
    assert net.places["p1"].tokens == 1
    assert net.transitions["ping"].outputs == {"p2": 2}
    assert net.transitions["t2"].outputs == {"p1": 1}  # through the reference place
    assert net.transitions["t2"].duration.mean == 0.5
    assert not net.resources


def _doc(body: str, ntype: str = PTNET_TYPE) -> str:
    return f'<pnml xmlns="{PNML_NS}"><net id="n" type="{ntype}"><page id="pg">{body}</page></net></pnml>'


@pytest.mark.parametrize(
    "text, needle",
    [
        ("<pnml", "not well-formed"),
        ('<pnml xmlns="urn:other"/>', "expected <pnml>"),
        (f'<pnml xmlns="{PNML_NS}"/>', "no <net>"),
        (_doc("", ntype="http://www.pnml.org/version-2009/grammar/symmetricnet"), "not supported"),
        (_doc('<place id="p"><initialMarking><text>two</text></initialMarking></place>'), "<place id='p'>"),
        (_doc('<place id="p"><initialMarking><text>-1</text></initialMarking></place>'), ">= 0"),
        (_doc('<place id="p"/><transition id="t"/><arc id="a" source="p" target="q"/>'), "<arc id='a'>"),
        (_doc('<place id="p"/><place id="q"/><transition id="t"/><arc id="a" source="p" target="q"/>'), "other kind"),
        (_doc('<place id="p"/><transition id="t"/><arc id="a" source="p" target="t">'
              "<inscription><text>0</text></inscription></arc>"), ">= 1"),
        (_doc('<place id="p"/><transition id="t"><toolspecific tool="sgdnet" version="1">'
              "<duration>{oops</duration></toolspecific></transition>"), "not valid JSON"),
        (_doc('<place id="p"/><transition id="t"><toolspecific tool="sgdnet" version="1">'
              '<duration>{"type": "Bogus"}</duration></toolspecific></transition>'), "<transition id='t'>"),
        (_doc('<place id="p"/><transition id="t"/>'), "no input places"),
    ],
)
def test_malformed_documents_raise_net_error_naming_the_element(text, needle):
    with pytest.raises(NetError, match=re.escape(needle)) as ei:
        from_pnml(text)
    assert isinstance(ei.value, SgdnetError)
    assert "PNML" in str(ei.value)


def test_missing_file_and_bad_file_name_the_path(tmp_path):
    with pytest.raises(NetError, match="nope.pnml"):
        from_pnml(tmp_path / "nope.pnml")
    bad = tmp_path / "bad.pnml"
    bad.write_text("<pnml><net>", encoding="utf-8")
    with pytest.raises(NetError, match="bad.pnml"):
        from_pnml(bad)
    with pytest.raises(NetError, match="needs a sgdnet Net"):
        to_pnml("not a net")


def test_infinite_servers_and_tuple_tags_survive():
    net = exotic_net()
    back = from_pnml(to_pnml(net))
    assert back.transitions["back"].servers == math.inf
    assert back.transitions["go!"].tags["pair"] == (1, 2)
    assert back.meta["shape"] == (2, 3) and back.meta["inf"] == math.inf


# ----------------------------------------------------------------------------- simulation
def _same_result(a: Net, b: Net, **kw) -> None:
    import numpy as np

    import sgdnet

    ra = sgdnet.simulate(a, seed=2024, **kw)
    rb = sgdnet.simulate(b, seed=2024, **kw)
    assert ra.seeds == rb.seeds
    np.testing.assert_array_equal(ra.throughput.samples, rb.throughput.samples)
    assert ra.to_dict() == rb.to_dict()
    if ra.trace is not None:
        np.testing.assert_array_equal(ra.trace, rb.trace)


@pytest.mark.parametrize("make", [ps_net, exotic_net, flow_net])
def test_round_trip_simulates_identically(make):
    net = make()
    _same_result(net, from_pnml(to_pnml(net)), steps=40, warmup=5, replications=2, trace=True)


def _variant_names() -> list[str]:
    from sgdnet import variants

    return list(variants.names())


def _strip_toolspecific(text: str) -> str:
    """The document as a tool that knows nothing of sgdnet sees it: every <toolspecific> gone."""
    root = ET.fromstring(text)
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == Q + "toolspecific":
                parent.remove(child)
    return ET.tostring(root, encoding="unicode")


def _check_structure_matches(text: str, net: Net) -> None:
    """The standard P/T part alone carries the net's places, markings, transitions and arcs."""
    s = check_ptnet_structure(text)
    assert sorted(s["places"].values()) == sorted(p.tokens for p in net.places.values())
    assert len(s["transitions"]) == len(net.transitions)
    weights = [w for t in net.transitions.values() for w in (*t.inputs.values(), *t.outputs.values())]
    assert sorted(w for *_, w in s["arcs"]) == sorted(weights)
    # node by node: with the sgdnet extension removed, the plain P/T net read back by name has
    # the same markings and the same weighted arcs (what another PNML tool would load)
    plain = from_pnml(_strip_toolspecific(text), validate=False)
    assert {p: q.tokens for p, q in plain.places.items()} == {p: q.tokens for p, q in net.places.items()}
    assert set(plain.transitions) == set(net.transitions)
    for name, t in net.transitions.items():
        assert plain.transitions[name].inputs == t.inputs, name
        assert plain.transitions[name].outputs == t.outputs, name
        assert not plain.transitions[name].resources


def test_the_round_trip_covers_every_builtin_variant():
    # the parametrised round trip below would pass vacuously on an empty registry
    assert set(_variant_names()) >= {"sync-ps", "async-ps", "ssp", "dssp", "allreduce", "local-sgd", "cocod",
                                     "pipe-sgd", "backup"}


@pytest.fixture(scope="module")
def small_setup():
    from sgdnet import Cluster, models

    # 3 workers so ring/tree all-reduce, backups and staleness gates have more than a pair
    return models.load("resnet18"), Cluster(workers=3, bandwidth="10Gbps", compute_cv=0.1, comm_cv=0.1)


@pytest.mark.parametrize("variant", _variant_names())
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_every_builtin_variant_round_trips(variant, granularity, small_setup):
    from sgdnet import variants

    model, cluster = small_setup
    opts = {"max_layers": 4} if "max_layers" in variants.get(variant).option_names() else {}
    net = variants.build(variant, model, cluster, granularity=granularity, **opts)
    text = to_pnml(net)
    _check_structure_matches(text, net)
    back = from_pnml(text)
    same_net(net, back)  # includes net.meta, e.g. the Cluster object the variant keeps there
    _same_result(net, back, steps=15, warmup=3, replications=1)


@pytest.mark.parametrize("variant, options", [
    ("ssp", {"impl": "places", "staleness": 1}),
    ("allreduce", {"algorithm": "tree"}),
    ("sync-ps", {"shards": 2, "discipline": "ps"}),
    ("local-sgd", {"sync": "ps", "H": 2}),
    ("dssp", {"s_lower": 1, "r_max": 2}),
    ("dssp", {"s_lower": 1, "r_max": 2, "s_upper": 2}),
])
def test_variant_options_that_change_the_structure_round_trip(variant, options, small_setup):
    from sgdnet import variants

    model, cluster = small_setup
    net = variants.build(variant, model, cluster, max_layers=3, **options)
    text = to_pnml(net)
    _check_structure_matches(text, net)
    back = from_pnml(text)
    same_net(net, back)
    _same_result(net, back, steps=15, warmup=3, replications=1, trace=True)
