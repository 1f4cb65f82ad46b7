"""Net drawing (lanes layout), DOT text, and the lazy matplotlib import."""

from __future__ import annotations

import re
import subprocess
import sys

import matplotlib
import pytest
from conftest import exotic_net, ps_net

from sgdnet.errors import SgdnetError
from sgdnet.viz import draw_net, layout_lanes, to_dot
from sgdnet.viz.style import short_name

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def net4():
    return ps_net(4)


def _lane_of_y(pos, y):
    for name, top, bot in pos.lanes:
        if bot <= y <= top:
            return name
    return None


def test_lanes_put_each_worker_and_server_in_its_band(net4):
    pos = layout_lanes(net4)
    assert [ln for ln, *_ in pos.lanes] == ["worker0", "worker1", "worker2", "worker3", "ps0"]
    for t in net4.transitions.values():
        lane = _lane_of_y(pos, pos[("transition", t.name)][1])
        if "worker" in t.tags:
            assert lane == f"worker{t.tags['worker']}", t.name
        else:  # PS update and its fan-out sit with the server
            assert lane == "ps0", t.name
    for r in net4.resources.values():
        assert _lane_of_y(pos, pos[("resource", r.name)][1]) == r.tags["host"]
    # bands do not overlap
    bands = sorted((bot, top) for _, top, bot in pos.lanes)
    assert all(a[1] < b[0] for a, b in zip(bands, bands[1:]))


def test_lanes_order_follows_the_step(net4):
    pos = layout_lanes(net4)
    x = {n: pos[("transition", n)][0] for n in net4.transitions}
    for w in range(4):
        chain = [f"w{w}/forward", f"w{w}/backward2", f"w{w}/backward1", f"w{w}/backward0"]
        assert [x[n] for n in chain] == sorted(x[n] for n in chain)
        assert x[f"w{w}/push2"] > x[f"w{w}/backward2"]
        assert x[f"w{w}/pull2"] > x["ps/update2"] > x[f"w{w}/push2"]
        assert x[f"w{w}/step"] == max(x[n] for n in x if n.startswith(f"w{w}/"))
    # the initially marked place starts the lane
    assert pos[("place", "w0/ready")][0] < x["w0/forward"]
    # no two nodes share a position
    assert len(set(pos.values())) == len(pos)


@pytest.mark.parametrize("make", [ps_net, exotic_net])
def test_draw_net_writes_a_png(make, tmp_path):
    net = make()
    ax = draw_net(net, labels="all")
    path = tmp_path / "net.png"
    ax.figure.savefig(path, dpi=100)
    assert 8_000 < path.stat().st_size < 2_000_000
    texts = {t.get_text() for t in ax.texts}
    for t in net.transitions:  # every transition is labelled (by its short name)
        assert short_name(t) in texts
    plt.close(ax.figure)


def test_draw_net_shows_tokens_weights_and_disciplines(net4):
    ax = draw_net(net4)
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("4") == 3  # the PS aggregates consume 4 gradients per layer
    assert texts.count("ps") == 2 and texts.count("fifo") == 13
    assert {"worker0", "worker3", "ps0"} <= set(texts)
    plt.close(ax.figure)


def test_draw_net_on_given_axes_and_with_explicit_positions():
    net = exotic_net()
    fig, ax = plt.subplots()
    pos = {n: (i, 0) for i, n in enumerate([*net.places, *net.transitions, *net.resources])}
    assert draw_net(net, ax=ax, layout=pos, legend=False) is ax
    with pytest.raises(SgdnetError, match="no position"):
        draw_net(net, ax=ax, layout={"a b": (0, 0)})
    with pytest.raises(SgdnetError, match="layout='spring'"):
        draw_net(net, layout="spring")
    with pytest.raises(SgdnetError, match="labels="):
        draw_net(net, labels="some")
    with pytest.raises(SgdnetError, match="needs a sgdnet Net"):
        draw_net("net")
    plt.close(fig)


def _parse_dot(text):
    """Minimal DOT reader for what to_dot writes: declared nodes, edges, attributes."""
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    q = r'"((?:[^"\\]|\\.)*)"'
    nodes = {m.group(1): m.group(2) for m in re.finditer(rf"^\s*{q} \[(.*)\];$", text, re.M)}
    edges = [(m.group(1), m.group(2), m.group(3) or "") for m in re.finditer(rf"^\s*{q} -> {q}(?: \[(.*)\])?;$", text, re.M)]
    return nodes, edges


def test_dot_declares_every_node_and_arc(net4):
    nodes, edges = _parse_dot(to_dot(net4))
    assert len(nodes) == len(net4.places) + len(net4.transitions) + len(net4.resources)
    assert all(s in nodes and d in nodes for s, d, _ in edges)
    n_arcs = sum(len(t.inputs) + len(t.outputs) for t in net4.transitions.values())
    n_hold = sum(len(t.resources) for t in net4.transitions.values())
    assert len(edges) == n_arcs + n_hold
    assert sum('label="4"' in a for *_, a in edges) == 3
    assert to_dot(net4).count("subgraph") == 5


def test_dot_escapes_names_and_marks_inhibitors(tmp_path):
    net = exotic_net()
    text = to_dot(net, tmp_path / "n.dot")
    assert (tmp_path / "n.dot").read_text() == text
    nodes, edges = _parse_dot(text)
    assert "p:a b" in nodes and "t:go!" in nodes and "r:gpu#0" in nodes
    inh = [e for e in edges if "odot" in e[2]]
    assert inh == [("p:a_b", "t:go!", inh[0][2])] and "<3" in inh[0][2]
    with pytest.raises(SgdnetError, match="rankdir"):
        to_dot(net, rankdir="XY")


def test_importing_viz_does_not_import_matplotlib():
    code = "import sys, sgdnet, sgdnet.viz; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_to_networkx_is_the_analysis_one():
    import sgdnet.net.graph as graph
    import sgdnet.viz as viz

    assert viz.to_networkx is graph.to_networkx
    with pytest.raises(AttributeError):
        viz.no_such_function  # noqa: B018
