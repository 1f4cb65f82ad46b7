"""The Pareto plot of ``sgdnet choose``: cost against time of every configuration, a colour per
instance type, a marker per variant, the front as a staircase."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SgdnetError
from .plots import _MARKERS, _number
from .style import LINE_COLORS, paper_rc

__all__ = ["plot_pareto"]


def plot_pareto(rows: Sequence[Mapping[str, Any]], front: Sequence[tuple] = (), ax=None, *,
                x: str = "time_h", y: str = "cost", title: str | None = None):
    """Cost against time of ``sgdnet choose``'s configurations: a colour per instance type, a
    marker per variant, the Pareto front as a staircase with its points labelled.

    Parameters
    ----------
    rows : sequence of dict
        :attr:`sgdnet.choose.Choice.rows` (``instance``, ``nodes``, ``variant``, ``x``, ``y``,
        ``within``).
    front : sequence of (instance, nodes, variant)
        The front's configurations (:meth:`~sgdnet.choose.Choice.front_keys`).
    ax : matplotlib Axes, optional
    x, y : str
        The two columns (hours, dollars).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    SgdnetError
        No row with both figures.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    pts = [r for r in rows if _number(r.get(x)) is not None and _number(r.get(y)) is not None]
    if not pts:
        raise SgdnetError(f"plot_pareto: no row has both {x!r} and {y!r} (prices unknown?)")
    if ax is None:
        with plt.rc_context(paper_rc()):
            _, ax = plt.subplots(figsize=(5.2, 3.4), layout="constrained")
    insts = sorted({str(r["instance"]) for r in pts})
    variants = sorted({str(r["variant"]) for r in pts})
    keys = {tuple(k) for k in front}
    for r in pts:
        c = LINE_COLORS[insts.index(str(r["instance"])) % len(LINE_COLORS)]
        m = _MARKERS[variants.index(str(r["variant"])) % 4]
        inside = r.get("within", True)
        ax.scatter([r[x]], [r[y]], s=22, marker=m, color=c if inside else "none",
                   edgecolors=c, linewidths=0.9, alpha=1.0 if inside else 0.5, zorder=3)
    on = sorted((r for r in pts if (r["instance"], r["nodes"], r["variant"]) in keys),
                key=lambda r: r[x])
    if on:
        ax.step([r[x] for r in on], [r[y] for r in on], where="post", color="#333333", lw=0.9,
                ls="--", zorder=2)
        for r in on:
            ax.annotate(f"{r['instance']} ×{r['nodes']}", (r[x], r[y]), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    xs, ys = [r[x] for r in pts], [r[y] for r in pts]
    for axis, vs, setter in ((ax.xaxis, xs, ax.set_xscale), (ax.yaxis, ys, ax.set_yscale)):
        if min(vs) > 0 and max(vs) / min(vs) > 10:  # log, ticks at 1-2-5 in plain numbers
            setter("log")
            axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.4g}"))
            axis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.12, y=0.08)
    per_m = x != "time_h" or any(r.get("time_to_train_h_mean") is None for r in pts)
    ax.set_xlabel("hours per 10⁶ samples" if per_m else "time to train (h)", fontsize=8)
    ax.set_ylabel("$ per 10⁶ samples" if per_m else "cost to train ($)", fontsize=8)
    ax.grid(True, lw=0.3, color="#DDDDDD")
    handles = [Line2D([], [], ls="", marker="o", color=LINE_COLORS[i % len(LINE_COLORS)],
                      label=n) for i, n in enumerate(insts)]
    if len(variants) > 1:
        handles += [Line2D([], [], ls="", marker=_MARKERS[i % 4], color="#333333", label=v)
                    for i, v in enumerate(variants)]
    handles.append(Line2D([], [], ls="--", color="#333333", lw=0.9, label="Pareto front"))
    if any(not r.get("within", True) for r in pts):
        handles.append(Line2D([], [], ls="", marker="o", color="none", markeredgecolor="#333333",
                              label="over budget / deadline"))
    ax.legend(handles=handles, frameon=False, fontsize=6, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    if title:
        ax.set_title(title, fontsize=8)
    return ax
