"""Draw a :class:`~sgdnet.net.Net` with matplotlib.

Places are circles with their tokens, transitions are bars coloured by ``kind`` (thin black
for zero-duration ones, a bold outline for ``step`` transitions), resources are boxes labelled with their discipline and joined by dotted
lines to the transitions that hold them, arcs are arrows labelled with their weight when it is
not 1, inhibitor arcs end in a small circle.

The ``"lanes"`` layout gives every host its own band — one per worker (``worker`` tag of
transitions and places, ``host`` tag of resources), then servers and shared links — and orders
nodes left to right by their depth in the net once the arcs that refill initially marked places
are taken as the back edges of the step cycle, so a compiled sync-PS or all-reduce net reads as
a per-worker pipeline.

Places, tokens and transition bars are three collections, not one patch each, and the artists
inside the axes are left out of ``savefig(bbox_inches="tight")``'s measure of the figure: a fine
4-worker sync-PS net has ~6,000 nodes, ~6,800 arcs and ~2,700 labels.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from ..dists import Deterministic
from ..errors import SgdnetError
from ..net.builder import Net
from .style import KIND_COLORS, kind_color, lane_of, paper_rc, resource_color, short_name

__all__ = ["draw_net", "layout_lanes", "Layout", "check_draw_size"]


def check_draw_size(workers: int, layers: int, granularity: str) -> None:
    """Refuse, before building it, a net to draw whose places and transitions would exceed
    the ``max_draw_elements`` limit, by a lower bound: a fine net has at least one transition
    per layer and worker, any net one per worker (``sgdnet draw sync-ps --workers 4096
    --granularity fine`` gave no answer for minutes: issue #43).

    Raises
    ------
    SgdnetError
        Naming the bound, the limit and how to raise it.
    """
    from ..limits import limit

    low = workers * (layers if granularity == "fine" else 1)
    lim = limit("max_draw_elements")
    if low > lim:
        raise SgdnetError(
            f"a {granularity} net of {workers:,} workers x {layers} layers has at least {low:,} "
            f"transitions, beyond the limit {lim:,} for a drawing (max_draw_elements); draw fewer "
            "workers or --granularity coarse, or raise the limit with SGDNET_MAX_DRAW_ELEMENTS=N")

_SHARED = "shared"


class Layout(dict):
    """Node positions ``{("place"|"transition"|"resource", name): (x, y)}`` plus lane bands.

    Attributes
    ----------
    lanes : list of (lane name, y_top, y_bottom)
    n_columns : int
    node_lane : dict node -> lane name
    """

    lanes: list[tuple[str, float, float]]
    n_columns: int
    node_lane: dict[tuple[str, str], str]


def _lane_key(lane: str) -> tuple:
    m = re.fullmatch(r"([A-Za-z_]*?)(\d+)", lane)
    order = {"worker": 0}
    if lane == _SHARED:
        return (3, 0, lane)
    if m:
        return (order.get(m.group(1), 1), int(m.group(2)), lane)
    return (2, 0, lane)


def _lanes(net: Net) -> dict[tuple[str, str], str]:
    lane: dict[tuple[str, str], str] = {}
    for r in net.resources.values():
        lane[("resource", r.name)] = str(r.tags.get("host", _SHARED))
    for t in net.transitions.values():
        lw = lane_of(t.tags)
        if lw is None:
            hosts = [lane[("resource", r)] for r in t.resources if ("resource", r) in lane]
            lw = hosts[0] if hosts else _SHARED
        lane[("transition", t.name)] = lw
    producers: dict[str, list[str]] = defaultdict(list)
    consumers: dict[str, list[str]] = defaultdict(list)
    for t in net.transitions.values():
        for p in t.outputs:
            producers[p].append(t.name)
        for p in (*t.inputs, *t.inhibitors):
            consumers[p].append(t.name)
    # a transition with neither worker tag nor resource (a barrier, a fan-out) joins the lane
    # of the transitions feeding it when they all share one
    for t in net.transitions.values():
        if lane[("transition", t.name)] == _SHARED:
            feed = {lane[("transition", u)] for p in t.inputs for u in producers[p]} - {_SHARED}
            if len(feed) == 1:
                lane[("transition", t.name)] = feed.pop()
    producers = {p: [lane[("transition", u)] for u in us] for p, us in producers.items()}
    consumers = {p: [lane[("transition", u)] for u in us] for p, us in consumers.items()}
    for p in net.places.values():
        lw = lane_of(p.tags)
        if lw is None:
            for group in (consumers.get(p.name, []), producers.get(p.name, [])):
                if group and len(set(group)) == 1:
                    lw = group[0]
                    break
        if lw is None:  # joins several lanes: prefer the non-worker one (a server, a barrier)
            cands = [x for x in (*consumers.get(p.name, []), *producers.get(p.name, [])) if not x.startswith("worker")]
            lw = cands[0] if cands else _SHARED
        lane[("place", p.name)] = lw
    return lane


def _depths(net: Net) -> dict[tuple[str, str], int]:
    """Longest-path depth of every place/transition in the net with its cycles cut.

    Arcs into initially marked places are the back edges (a token there starts the cycle);
    any cycle left is cut at the edge that closes it in a depth-first search.
    """
    succ: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    nodes = [("place", p) for p in net.places] + [("transition", t) for t in net.transitions]
    for t in net.transitions.values():
        tn = ("transition", t.name)
        for p in t.inputs:
            succ[("place", p)].append(tn)
        for p in t.outputs:
            if p in net.places and net.places[p].tokens == 0:
                succ[tn].append(("place", p))
    # remaining cycles: iterative DFS, drop edges to nodes on the stack
    color: dict = {}
    dag: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    roots = [n for n in nodes if n[0] == "place" and net.places[n[1]].tokens > 0] + nodes
    for root in roots:
        if root in color:
            continue
        color[root] = 1
        stack = [(root, iter(succ[root]))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                continue
            c = color.get(nxt, 0)
            if c == 1:
                continue  # back edge
            dag[node].append(nxt)
            if c == 0:
                color[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    indeg: dict = defaultdict(int)
    for u in dag:
        for v in dag[u]:
            indeg[v] += 1
    depth = {n: 0 for n in nodes}
    queue = [n for n in nodes if indeg[n] == 0]
    while queue:
        u = queue.pop()
        for v in dag[u]:
            depth[v] = max(depth[v], depth[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    # a transition right after a place: pull places next to their consumer when they have
    # no producer in the DAG (e.g. marked start places), so they sit just before it
    for n in nodes:
        if n[0] == "place" and dag[n]:
            d = min(depth[v] for v in dag[n]) - 1
            if d > depth[n]:
                depth[n] = d
    return depth


def layout_lanes(net: Net) -> Layout:
    """Compute the ``"lanes"`` layout of ``net`` (see the module docstring)."""
    lane = _lanes(net)
    depth = _depths(net)
    preds: dict = defaultdict(list)
    for t in net.transitions.values():
        for p in t.inputs:
            preds[("transition", t.name)].append(("place", p))
        for p in t.outputs:
            preds[("place", p)].append(("transition", t.name))
    cols = (max(depth.values()) + 1) if depth else 1
    by_lane: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for n, d in depth.items():
        by_lane[lane[n]][d].append(n)
    res_by_lane: dict[str, list] = defaultdict(list)
    for r in net.resources:
        res_by_lane[lane[("resource", r)]].append(("resource", r))
    lanes = sorted(set(by_lane) | set(res_by_lane), key=_lane_key)
    pos = Layout()
    pos.lanes = []
    pos.node_lane = dict(lane)
    y = 0.0
    for ln in lanes:
        height = max([len(v) for v in by_lane[ln].values()] + [math.ceil(len(res_by_lane[ln]) / 1), 1])
        top = y
        for d in sorted(by_lane[ln]):
            ns = by_lane[ln][d]
            # order a column by the mean height of its predecessors (fewer crossings)
            def bary(n, ns=ns, ln=ln):
                ys = [pos[u][1] for u in preds[n] if u in pos and lane[u] == ln]
                return (-sum(ys) / len(ys) if ys else math.inf, ns.index(n))
            ns = sorted(ns, key=bary) if d else ns
            for k, n in enumerate(ns):
                pos[n] = (float(d), top - 0.5 - k - (height - len(ns)) / 2.0)
        for k, n in enumerate(res_by_lane[ln]):
            pos[n] = (-2.2, top - 0.5 - k - (height - len(res_by_lane[ln])) / 2.0)
        pos.lanes.append((ln, top, top - height))
        y = top - height - 0.35
    pos.n_columns = cols
    return pos


def _short(name: str) -> str:
    return short_name(name)


def _inside(artist):
    """Mark ``artist``, drawn inside the axes' limits, as left out of the tight bounding box
    (``savefig(bbox_inches="tight")`` otherwise measures each of a big net's ~20,000 artists)."""
    artist.set_in_layout(False)
    return artist


def _add_patches(ax, patches: list, **style) -> None:
    """Add ``patches`` to ``ax`` as one :class:`~matplotlib.collections.PatchCollection` with
    ``style`` (one value, or one per patch), the axes' limits left alone (they are set
    explicitly), left out of the tight bounding box as :func:`_inside` says."""
    from matplotlib.collections import PatchCollection

    if patches:
        _inside(ax.add_collection(PatchCollection(patches, **style), autolim=False))


#: Resolution at which ``sgdnet draw`` saves drawings; new figures are capped at
#: ``max_drawing_px`` (see :mod:`sgdnet.limits`) on their longer side at this resolution.
DRAW_DPI = 120


def draw_net(
    net: Net,
    ax=None,
    layout: str | dict = "lanes",
    *,
    labels: str = "transitions",
    resource_edges: bool | str = "lane",
    legend: bool = True,
    title: str | None = None,
    scale: float = 0.32,
):
    """Draw ``net`` on a matplotlib Axes.

    Parameters
    ----------
    net : Net
    ax : matplotlib Axes, optional
        Drawn on a new figure sized to the net when omitted.
    layout : ``"lanes"`` or dict
        ``"lanes"``: a band per worker / server host (see module docstring). A dict maps
        ``("place"|"transition"|"resource", name)`` (or a bare name) to ``(x, y)``.
    labels : ``"transitions"``, ``"all"`` or ``"none"``
        Which nodes get a text label (:func:`sgdnet.viz.style.short_name` of the name).
    resource_edges : ``"lane"``, True or False
        Draw dotted lines from each resource box to the transitions holding it: only to those in
        the resource's own lane (``"lane"``, the default: shared links held from every lane would
        cross the drawing), to all of them (True), or none.
    legend : bool
    title : str, optional
        Defaults to the net's name.
    scale : float
        Inches per layout unit for a new figure.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    SgdnetError
        Unknown ``layout`` or ``labels``, or a position missing from a layout dict.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
    from matplotlib.path import Path

    if not isinstance(net, Net):
        raise SgdnetError(f"draw_net needs a sgdnet Net, got {type(net).__name__}")
    if labels not in ("transitions", "all", "none"):
        raise SgdnetError(f"labels={labels!r} is unknown; use 'transitions', 'all' or 'none'")
    if isinstance(layout, str):
        if layout != "lanes":
            raise SgdnetError(f"layout={layout!r} is unknown; use 'lanes' or a dict of positions")
        pos = layout_lanes(net)
    elif isinstance(layout, dict):
        pos = Layout()
        pos.lanes, pos.n_columns, pos.node_lane = [], 1, {}
        for kind, table in (("place", net.places), ("transition", net.transitions), ("resource", net.resources)):
            for n in table:
                xy = layout.get((kind, n), layout.get(n))
                if xy is None:
                    raise SgdnetError(f"layout has no position for {kind} {n!r}; give ({kind!r}, {n!r}): (x, y)")
                pos[(kind, n)] = tuple(map(float, xy))
    else:
        raise SgdnetError(f"layout={layout!r} must be 'lanes' or a dict of positions")

    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    xmin, xmax = min(xs) - 1.45, max(xs) + 0.9
    ymin, ymax = min(ys) - 0.9, max(ys) + 0.9
    shrink = 1.0
    if ax is None:
        w, h = max(4.0, (xmax - xmin) * scale), max(2.0, (ymax - ymin) * scale + 0.6)
        # a fine-grained net of many layers would be a 13,000-pixel image: cap the longer side
        # at max_drawing_px at the CLI's 120 dpi, shrinking the whole drawing (fonts too)
        from ..limits import limit

        longest = limit("max_drawing_px") / DRAW_DPI
        shrink = min(1.0, longest / max(w, h))
        with plt.rc_context(paper_rc()):
            fig, ax = plt.subplots(figsize=(w * shrink, h * shrink))
    fs = 6.0 * max(shrink, 0.3)  # text shrinks with a capped drawing, as the nodes do

    # lane bands
    for i, (ln, top, bot) in enumerate(pos.lanes):
        ax.add_artist(Rectangle((xmin + 0.2, bot - 0.05), xmax - xmin - 0.4, top - bot + 0.1,
                               facecolor="#F4F4F4" if i % 2 == 0 else "#FBFBFB", edgecolor="none", zorder=0))
        ax.text(xmin + 0.45, (top + bot) / 2, ln, ha="center", va="center", rotation=90, fontsize=fs + 0.5,
                fontweight="bold", color="#444444", zorder=1)

    R_PLACE, BAR_W, BAR_H, BOX_W, BOX_H = 0.22, 0.16, 0.62, 1.5, 0.8
    # places, their tokens and the transitions' bars are drawn as three collections, not one
    # patch each: a fine 4-worker net has ~6,000 of them, and each patch cost its own draw and
    # its own extent in the tight bounding box of savefig
    outline: dict = {}
    circles, dots = [], []
    for p in net.places.values():
        x, y = pos[("place", p.name)]
        circles.append(Circle((x, y), R_PLACE))
        outline[("place", p.name)] = ("circle", R_PLACE)
        if p.tokens == 1:
            dots.append(Circle((x, y), 0.06))
        elif p.tokens > 1:
            _inside(ax.text(x, y, str(p.tokens), ha="center", va="center", fontsize=fs, zorder=4))
        if labels == "all":
            _inside(ax.text(x, y + R_PLACE + 0.05, _short(p.name), ha="center", va="bottom", fontsize=fs - 1.5,
                            color="#555555", zorder=4))
    _add_patches(ax, circles, facecolor="white", edgecolor="#222222", linewidth=0.7, zorder=3)
    _add_patches(ax, dots, facecolor="black", edgecolor="black", zorder=4)
    bars, bar_fc, bar_lw = [], [], []
    for t in net.transitions.values():
        x, y = pos[("transition", t.name)]
        immediate = isinstance(t.duration, Deterministic) and t.duration.value == 0
        # a step transition gets a wider bar so its fill still shows inside the bold outline
        w = BAR_W * (0.45 if immediate else 1.0) * (1.8 if t.is_step else 1.0)
        bars.append(Rectangle((x - w / 2, y - BAR_H / 2), w, BAR_H))
        bar_fc.append(kind_color(t.tags.get("kind", "other")) if not immediate else "#222222")
        bar_lw.append(1.3 if t.is_step else 0.5)
        outline[("transition", t.name)] = ("box", w / 2, BAR_H / 2)
        if labels in ("transitions", "all"):
            _inside(ax.text(x, y - BAR_H / 2 - 0.05, _short(t.name), ha="center", va="top", fontsize=fs - 1,
                            rotation=0, color="#222222", zorder=4,
                            bbox=dict(boxstyle="round,pad=0.08", fc="white", ec="none", alpha=0.8)))
    _add_patches(ax, bars, facecolor=bar_fc, edgecolor="black", linewidth=bar_lw, zorder=3)
    for r in net.resources.values():
        x, y = pos[("resource", r.name)]
        col = resource_color(r.tags)
        b = FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H, boxstyle="round,pad=0.02,rounding_size=0.08",
                           facecolor=col, alpha=0.22, edgecolor=col, lw=0.9, zorder=3)
        ax.add_artist(b)
        ax.add_artist(FancyBboxPatch((x - BOX_W / 2, y - BOX_H / 2), BOX_W, BOX_H,
                                    boxstyle="round,pad=0.02,rounding_size=0.08", facecolor="none",
                                    edgecolor=col, lw=0.9, zorder=3))
        cap = "" if r.capacity == 1 else f" ×{r.capacity}"
        ax.text(x, y + 0.14, _short(r.name), ha="center", va="center", fontsize=fs - 0.5, zorder=4)
        ax.text(x, y - 0.2, f"{r.discipline}{cap}", ha="center", va="center", fontsize=fs - 1.5,
                style="italic", color="#333333", zorder=4)

    def edge_point(node, ux: float, uy: float) -> tuple[float, float]:
        """Where a line leaving ``node``'s centre in direction (ux, uy) crosses its outline
        (computed here rather than by matplotlib's path clipping, which is slow on big nets)."""
        x, y = pos[node]
        d = math.hypot(ux, uy) or 1.0
        ux, uy = ux / d, uy / d
        shape = outline[node]
        if shape[0] == "circle":
            k = shape[1]
        else:
            hw, hh = shape[1], shape[2]
            k = min(hw / abs(ux) if ux else math.inf, hh / abs(uy) if uy else math.inf)
        return x + ux * k, y + uy * k

    node_lane = getattr(pos, "node_lane", {}) or {}

    def arrow(a, b, weight: int, inhibitor: bool = False):
        (x1, y1), (x2, y2) = pos[a], pos[b]
        # arcs between lanes (a push to the server, a pull back) are drawn lighter so that the
        # per-lane pipeline stays readable where they cross other lanes
        cross = bool(node_lane) and node_lane.get(a) != node_lane.get(b)
        if x2 > x1 + 1e-9 or (abs(x2 - x1) < 1e-9 and abs(y2 - y1) > 0):
            pa = edge_point(a, x2 - x1, y2 - y1)
            pb = edge_point(b, x1 - x2, y1 - y2)
            kw = dict(posA=pa, posB=pb, connectionstyle="arc3,rad=0.0" if abs(y2 - y1) < 1e-9 else "arc3,rad=0.08")
        else:  # back edge: route above the source and target lanes
            top = max(y1, y2) + 0.55
            pa = edge_point(a, 0.35, top - y1)
            pb = edge_point(b, -0.35, top - y2)
            path = Path([pa, (x1 + 0.35, top), (x2 - 0.35, top), pb],
                        [Path.MOVETO, Path.CURVE4, Path.CURVE4, Path.CURVE4])
            kw = dict(path=path)
        style = "-" if inhibitor else "-|>,head_length=2.2,head_width=1.1"
        color = "#C0392B" if inhibitor else ("#A6A6A6" if cross else "#555555")
        fa = FancyArrowPatch(**kw, arrowstyle=style, mutation_scale=1.6,
                             lw=0.35 if cross else 0.45, color=color, zorder=1.5 if cross else 2,
                             shrinkA=0.0, shrinkB=0.0 if not inhibitor else 2.0)
        _inside(ax.add_artist(fa))  # limits are set explicitly below; add_patch would recompute them
        if inhibitor:
            # a small circle at the transition end
            dx, dy = x2 - x1, y2 - y1
            d = math.hypot(dx, dy) or 1.0
            ex, ey = x2 - dx / d * (BAR_W / 2 + 0.06), y2 - dy / d * (BAR_W / 2 + 0.06)
            _inside(ax.add_artist(Circle((ex, ey), 0.05, facecolor="white", edgecolor="#C0392B", lw=0.6, zorder=3)))
        if weight != 1:
            _inside(ax.text((x1 + x2) / 2, (y1 + y2) / 2 + 0.08, str(weight), ha="center", va="bottom",
                            fontsize=fs, color="#8E1B10", fontweight="bold", zorder=5,
                            bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8)))

    for t in net.transitions.values():
        tn = ("transition", t.name)
        for p, w in t.inputs.items():
            arrow(("place", p), tn, w)
        for p, w in t.outputs.items():
            arrow(tn, ("place", p), w)
        for p, th in t.inhibitors.items():
            arrow(("place", p), tn, th, inhibitor=True)
        if resource_edges:
            for r in t.resources:
                (x1, y1), (x2, y2) = pos[("resource", r)], pos[tn]
                if resource_edges == "lane" and node_lane and node_lane[("resource", r)] != node_lane[tn]:
                    continue
                _inside(ax.add_line(Line2D([x1 + BOX_W / 2, x2], [y1, y2], lw=0.35, ls=(0, (1, 1.5)),
                                           color=resource_color(net.resources[r].tags), alpha=0.55, zorder=1)))

    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(net.name if title is None else title, fontsize=9)
    if legend:
        kinds = sorted({str(t.tags.get("kind", "other")) for t in net.transitions.values()
                        if not (isinstance(t.duration, Deterministic) and t.duration.value == 0)},
                       key=lambda k: list(KIND_COLORS).index(k) if k in KIND_COLORS else 99)
        handles: list[Any] = [
            Rectangle((0, 0), 1, 1, facecolor=kind_color(k), edgecolor="#222222", lw=0.5, label=k) for k in kinds
        ]
        handles.append(Rectangle((0, 0), 1, 1, facecolor="#222222", label="immediate (0 s)"))
        if any(t.is_step for t in net.transitions.values()):
            handles.append(Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", lw=1.3, label="step"))
        handles.append(Line2D([], [], marker="o", ls="none", mfc="white", mec="#222222", label="place"))
        if net.resources:
            handles.append(Rectangle((0, 0), 1, 1, facecolor="#BBBBBB", alpha=0.5, label="resource (discipline)"))
        if any(t.inhibitors for t in net.transitions.values()):
            handles.append(Line2D([], [], color="#C0392B", marker="o", mfc="white", label="inhibitor arc"))
        width_in = ax.figure.get_figwidth() * ax.get_position().width
        ncol = max(1, min(len(handles), int(width_in / 0.9)))
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                  frameon=False, fontsize=6, handlelength=1.2, columnspacing=1.0)
    return ax
