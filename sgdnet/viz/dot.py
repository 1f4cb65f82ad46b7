"""Graphviz DOT text of a :class:`~sgdnet.net.Net` (no Graphviz needed to produce it).

Places are circles showing their tokens, transitions are boxes filled by ``kind`` colour
(thin black bars for zero-duration ones), resources are rounded boxes with their discipline,
joined to the transitions holding them by dotted undirected edges; inhibitor arcs end in an
open dot. Nodes are grouped into one ``cluster`` per lane (worker, server host), the same lanes
as :func:`sgdnet.viz.draw_net`. Render with ``dot -Tsvg net.dot -o net.svg``.
"""

from __future__ import annotations

from collections import defaultdict

from ..dists import Deterministic
from ..errors import SgdnetError
from ..net.builder import Net
from .draw import _lane_key, _lanes, _short
from .style import kind_color, resource_color

__all__ = ["to_dot"]


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(**kw) -> str:
    return "[" + ", ".join(f"{k}={_q(v)}" for k, v in kw.items()) + "]"


def to_dot(net: Net, path=None, *, rankdir: str = "LR", clusters: bool = True, resources: bool = True) -> str:
    """Return (and optionally write) the Graphviz DOT text of ``net``.

    Parameters
    ----------
    net : Net
    path : str or path-like, optional
        File to write the text to.
    rankdir : ``"LR"`` or ``"TB"``
        Graphviz layout direction.
    clusters : bool
        Group nodes into one cluster per lane (worker / server host).
    resources : bool
        Include resource nodes and their holding edges.

    Returns
    -------
    str

    Raises
    ------
    SgdnetError
        ``net`` is not a Net or ``rankdir`` is not one of LR, TB, RL, BT.
    """
    if not isinstance(net, Net):
        raise SgdnetError(f"to_dot needs a sgdnet Net, got {type(net).__name__}")
    if rankdir not in ("LR", "TB", "RL", "BT"):
        raise SgdnetError(f"rankdir={rankdir!r} is unknown; use 'LR', 'TB', 'RL' or 'BT'")
    lane = _lanes(net)
    ids = {("place", p): f"p:{p}" for p in net.places}
    ids.update({("transition", t): f"t:{t}" for t in net.transitions})
    ids.update({("resource", r): f"r:{r}" for r in net.resources})

    node_lines: dict[str, list[str]] = defaultdict(list)
    for p in net.places.values():
        label = "" if p.tokens == 0 else ("●" if p.tokens == 1 else str(p.tokens))
        node_lines[lane[("place", p.name)]].append(
            f"{_q(ids[('place', p.name)])} {_attrs(shape='circle', width='0.3', fixedsize='true', label=label, xlabel=_short(p.name), tooltip=p.name)};"
        )
    for t in net.transitions.values():
        immediate = isinstance(t.duration, Deterministic) and t.duration.value == 0
        if immediate:
            a = _attrs(shape="box", style="filled", fillcolor="#222222", width="0.06", height="0.4",
                       fixedsize="true", label="", xlabel=_short(t.name), tooltip=t.name)
        else:
            a = _attrs(shape="box", style="filled", fillcolor=kind_color(t.tags.get("kind", "other")),
                       fontcolor="white", height="0.3", label=_short(t.name),
                       tooltip=f"{t.name}: {t.duration!r}")
        node_lines[lane[("transition", t.name)]].append(f"{_q(ids[('transition', t.name)])} {a};")
    if resources:
        for r in net.resources.values():
            cap = "" if r.capacity == 1 else f" x{r.capacity}"
            node_lines[lane[("resource", r.name)]].append(
                f"{_q(ids[('resource', r.name)])} "
                + _attrs(shape="box", style="rounded,filled", fillcolor=resource_color(r.tags) + "40",
                         color=resource_color(r.tags), label=f"{_short(r.name)}\n{r.discipline}{cap}",
                         tooltip=r.name)
                + ";"
            )

    out = [f"digraph {_q(net.name)} {{", f"  rankdir={rankdir};", '  node [fontname="Helvetica", fontsize=10];',
           '  edge [color="#555555", arrowsize=0.6];']
    for k, ln in enumerate(sorted(node_lines, key=_lane_key)):
        if clusters:
            out.append(f"  subgraph {_q('cluster_' + ln)} {{")
            out.append(f"    label={_q(ln)}; style=filled; color={_q('#F4F4F4' if k % 2 == 0 else '#FBFBFB')};")
            out.extend("    " + s for s in node_lines[ln])
            out.append("  }")
        else:
            out.extend("  " + s for s in node_lines[ln])
    for t in net.transitions.values():
        tn = _q(ids[("transition", t.name)])
        for p, w in t.inputs.items():
            out.append(f"  {_q(ids.get(('place', p), 'p:' + p))} -> {tn}" + (f" {_attrs(label=w)}" if w != 1 else "") + ";")
        for p, w in t.outputs.items():
            out.append(f"  {tn} -> {_q(ids.get(('place', p), 'p:' + p))}" + (f" {_attrs(label=w)}" if w != 1 else "") + ";")
        for p, th in t.inhibitors.items():
            out.append(f"  {_q(ids.get(('place', p), 'p:' + p))} -> {tn} "
                       + _attrs(arrowhead="odot", color="#C0392B", label=f"<{th}") + ";")
        if resources:
            for r in t.resources:
                out.append(f"  {_q(ids.get(('resource', r), 'r:' + r))} -> {tn} "
                           + _attrs(dir="none", style="dotted", color=resource_color(net.resources[r].tags) if r in net.resources else "#999999", constraint="false")
                           + ";")
    out.append("}")
    text = "\n".join(out) + "\n"
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text
