"""Gantt chart of a traced replication: a row per resource, grouped by host.

Bars are coloured by the ``kind`` of the firing (compute, comm, update, sync); idle gaps on a
worker's compute resource are shaded as *blocked* (the worker waits for parameters, a barrier
or a credit), so overlap of communication with backpropagation and stragglers show at a
glance. A resource whose firings overlap (capacity > 1, processor-sharing links) is drawn in
stacked sub-rows, one per concurrent slot. Dashed ticks mark each worker's step completions.

Each row is drawn as one :class:`~matplotlib.collections.PolyCollection` of its bars (gid
``bars:<resource>``, ``bars:<host>/ops`` for a resource-less row) and one of its idle spans
(gid ``blocked:<resource>``), not one artist per bar: a 4-worker fine sync-PS trace has ~9,000
bars, and drawing them one by one autoscaled the axes at each (a minute per figure).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SgdnetError
from ._tracks import tracks_of
from .style import KIND_COLORS, kind_color, pack_slots, paper_rc, short_name, time_unit

__all__ = ["timeline", "default_window"]

_COMPUTE_KINDS = ("gpu", "cpu")


def default_window(result, rep: int = 0, n_steps: int = 3) -> tuple[float, float]:
    """A window of about ``n_steps`` per-worker steps starting at the first counted step.

    Uses the step completions of the trace: from the ``t0`` of the replication (or the first
    traced step completion after it) to the completion of the ``n_steps``-th next step of the
    first worker; falls back to the whole trace.
    """
    tr = result.trace[result.trace["rep"] == rep]
    if len(tr) == 0:
        raise SgdnetError(f"replication {rep} has an empty trace; raise trace_limit or simulate longer")
    is_step = np.array([bool(t.get("step")) for t in result.transition_tags])
    workers = [t.get("worker") for t in result.transition_tags]
    steps = tr[is_step[tr["transition"]]]
    t0 = float(result.t0[rep])
    lo = t0 if t0 <= float(tr["end"].max()) else float(tr["start"].min())
    later = steps[steps["end"] > lo]
    if len(later) == 0:
        return float(tr["start"].min()), float(tr["end"].max())
    w0 = workers[int(later["transition"][0])]
    mine = later[[workers[int(t)] == w0 for t in later["transition"]]]
    k = min(n_steps, len(mine)) - 1
    hi = float(np.sort(mine["end"])[k])
    if hi <= lo:
        hi = float(tr["end"].max())
    return lo, hi


def _short(name: str) -> str:
    return short_name(name)


def _add_bars(ax, bars, **style):
    """Add the rectangles ``(x, width, y, height)`` of ``bars`` to ``ax`` as one
    :class:`~matplotlib.collections.PolyCollection` (the vertices ``broken_barh`` would make),
    the axes' limits updated once for all of them; ``style``: the collection's keyword
    arguments (one value, or one per bar)."""
    from matplotlib.collections import PolyCollection

    verts = [[(x, y), (x, y + h), (x + w, y + h), (x + w, y)] for x, w, y, h in bars]
    coll = PolyCollection(verts, **style)
    ax.add_collection(coll, autolim=True)
    return coll


def timeline(
    result,
    ax=None,
    workers=None,
    window: tuple[float, float] | None = None,
    *,
    rep: int = 0,
    n_steps: int = 3,
    labels: bool = True,
    blocked: bool = True,
    ops: bool | str = "auto",
    title: str | None = None,
):
    """Draw a Gantt chart of replication ``rep`` of a traced ``result``.

    Parameters
    ----------
    result : sgdnet.results.Result
        Simulated with ``trace=True``.
    ax : matplotlib Axes, optional
    workers : iterable of int, optional
        Show only these workers' hosts (server and link rows are always shown).
    window : (start, end) seconds, optional
        Time interval shown; default :func:`default_window` (about ``n_steps`` steps).
    rep : int
        Which replication.
    n_steps : int
        Steps in the default window.
    labels : bool
        Write operation names inside bars wide enough to hold them.
    blocked : bool
        Shade idle time of worker compute resources as *blocked*.
    ops : ``"auto"``, True or False
        Rows for firings holding no resource (latencies, delays): shown when they cover at
        least 1% of the window (``"auto"``), always, or never.
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    SimulationError
        The result has no trace.
    SgdnetError
        Bad ``rep``, ``window`` or ``workers``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tracks = tracks_of(result, rep)
    if window is None:
        window = default_window(result, rep, n_steps)
    try:
        lo, hi = float(window[0]), float(window[1])
    except (TypeError, ValueError, IndexError):
        raise SgdnetError(f"window={window!r} must be (start, end) seconds") from None
    if not hi > lo:
        raise SgdnetError(f"window={window!r} must have end > start")
    if workers is not None:
        wanted = {f"worker{int(w)}" for w in workers}
        known = {tk.host for tk in tracks if tk.host.startswith("worker")}
        if not wanted <= known:
            raise SgdnetError(f"workers={sorted(workers)!r} not in this net; known hosts: {sorted(known)}")
        tracks = [tk for tk in tracks if not tk.host.startswith("worker") or tk.host in wanted]
    # resource-less "ops" rows (latencies, delays) only when they take visible time
    def visible(tk) -> float:
        return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e, _ in tk.events)

    if ops == "auto":
        tracks = [tk for tk in tracks if tk.resource is not None or visible(tk) >= 0.01 * (hi - lo)]
    elif not ops:
        tracks = [tk for tk in tracks if tk.resource is not None]
    else:
        tracks = [tk for tk in tracks if tk.resource is not None or tk.events]

    unit, scale = time_unit(hi - lo)
    step_t: dict[str, list[float]] = {}
    tr = result.trace[result.trace["rep"] == rep]
    for t, e in zip(tr["transition"].tolist(), tr["end"].tolist()):
        tags = result.transition_tags[t]
        if tags.get("step") and lo <= e <= hi and tags.get("worker") is not None:
            step_t.setdefault(f"worker{tags['worker']}", []).append(e)

    rows: list[tuple[Any, list, int]] = []  # (track, visible events with slot, n_slots)
    for tk in tracks:
        evs = [(s, e, t) for s, e, t in tk.events if e >= lo and s <= hi]
        slots = pack_slots([(s, e) for s, e, _ in evs]) if evs else []
        rows.append((tk, list(zip(evs, slots)), max(slots) + 1 if slots else 1))

    if ax is None:
        n = len(rows)
        height = max(1.6, 0.22 * n + 0.9)
        with plt.rc_context(paper_rc()):
            fig, ax = plt.subplots(figsize=(7.0, height))
        # room on the left for the host names written outside the axes (at -52 pt), and on top
        # for the legend (and title), so a plain savefig without bbox_inches="tight" clips nothing
        fig.subplots_adjust(left=1.25 / 7.0, right=0.98, top=1.0 - (0.45 if title is None else 0.65) / height,
                            bottom=0.45 / height)
    width_pt = ax.figure.get_figwidth() * ax.get_position().width * 72.0
    y = 0.0
    yticks, ylabels = [], []
    host_spans: dict[str, list[float]] = {}
    seen_kinds: list[str] = []
    any_blocked = False
    gap = 0.25
    prev_host = None
    for tk, evs, n_slots in rows:
        if prev_host is not None and tk.host != prev_host:
            y += gap
        prev_host = tk.host
        h = 0.8
        top = y
        sub = h / n_slots
        row_id = tk.resource if tk.resource is not None else f"{tk.host}/ops"
        # each row is drawn as (at most) two collections, its idle spans and its bars: one
        # broken_barh per bar autoscaled the axes at each bar (8,786 calls, ~50 s for 4
        # workers), now once per collection; the limits are set explicitly below
        if blocked and tk.kind in _COMPUTE_KINDS and tk.host.startswith("worker"):
            # idle = the complement of the union of busy intervals inside the window
            iv = sorted((max(s, lo), min(e, hi)) for (s, e, _), _k in evs)
            idle: list[tuple[float, float]] = []
            cur = lo
            for s, e in iv:
                if s > cur:
                    idle.append(((cur - lo) / scale, (s - cur) / scale))
                cur = max(cur, e)
            if cur < hi:
                idle.append(((cur - lo) / scale, (hi - cur) / scale))
            if idle:
                _add_bars(ax, [(x, w, top, h) for x, w in idle], gid=f"blocked:{row_id}",
                          facecolors=KIND_COLORS["blocked"], edgecolors="#BDBDBD", hatch="////",
                          linewidths=0, zorder=1)
                any_blocked = True
        bars: list[tuple[float, float, float, float]] = []
        faces: list[str] = []
        edges: list[str] = []
        widths: list[float] = []
        for (s, e, t), k in evs:
            kind = str(result.transition_tags[t].get("kind", "other"))
            s_c, e_c = max(s, lo), min(e, hi)
            if kind not in seen_kinds and e_c > s_c:
                seen_kinds.append(kind)
            # a white separator between back-to-back bars, but not on bars too narrow to hold it
            # (a 0.3 pt white edge on a 1 pt bar washes its colour out)
            wide = (e_c - s_c) / (hi - lo) * width_pt >= 1.5
            bars.append(((s_c - lo) / scale, max((e_c - s_c) / scale, 0.0), top + k * sub + 0.02, sub - 0.04))
            faces.append(kind_color(kind))
            edges.append("white" if wide else "none")
            widths.append(0.3 if wide else 0.0)
            name = _short(result.transition_names[t])
            if labels and sub >= 0.39 and (e_c - s_c) / (hi - lo) * width_pt > 3.2 * len(name) + 3:
                ax.text(((s_c + e_c) / 2 - lo) / scale, top + k * sub + sub / 2, name,
                        ha="center", va="center", fontsize=5, color="white", zorder=3, clip_on=True)
        if bars:
            _add_bars(ax, bars, gid=f"bars:{row_id}", facecolors=faces, edgecolors=edges,
                      linewidths=widths, zorder=2)
        yticks.append(top + h / 2)
        ylabels.append(tk.label if tk.resource is not None else "ops (no resource)")
        host_spans.setdefault(tk.host, [top, top + h])[1] = top + h
        y = top + 1.0
    for host, ts in step_t.items():
        if host in host_spans:
            a, b = host_spans[host]
            for e in ts:
                ax.plot([(e - lo) / scale] * 2, [a - 0.08, b + 0.08], color="black", lw=0.6, ls=(0, (2, 1.5)), zorder=4)

    ax.set_ylim(y - 1.0 + 0.8 + 0.15, -0.15)
    ax.set_xlim(0, (hi - lo) / scale)
    ax.set_yticks(yticks, ylabels)
    ax.tick_params(axis="y", length=0)
    # host names to the left of their rows
    for host, (a, b) in host_spans.items():
        ax.annotate(host, xy=(0, (a + b) / 2), xycoords=("axes fraction", "data"), xytext=(-52, 0),
                    textcoords="offset points", ha="right", va="center", fontsize=7, fontweight="bold")
        ax.axhline(b + gap / 2 + 0.1, color="#DDDDDD", lw=0.5, zorder=0)
    ax.set_xlabel(f"simulated time ({unit}) after t = {lo:.3f} s")
    ax.spines[["top", "right", "left"]].set_visible(False)
    order = [k for k in KIND_COLORS if k in seen_kinds] + [k for k in seen_kinds if k not in KIND_COLORS]
    handles = [Patch(facecolor=kind_color(k), label=k) for k in order]
    if any_blocked:
        handles.append(Patch(facecolor=KIND_COLORS["blocked"], hatch="////", edgecolor="#AAAAAA", lw=0.3,
                             label="blocked (idle)"))
    if step_t:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="black", lw=0.6, ls=(0, (2, 1.5)), label="step done"))
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles), frameon=False,
              fontsize=6.5, handlelength=1.4, columnspacing=1.2)
    if title is not None:
        ax.set_title(title, pad=18)
    return ax
