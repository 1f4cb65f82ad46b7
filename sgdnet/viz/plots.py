"""Study plots: throughput scaling, step-time distributions, resource utilisation.

Inputs are duck-typed so the plots work on what :func:`sgdnet.scaling`, :func:`sgdnet.predict`
and :func:`sgdnet.simulate` return as well as on plain numbers:

- a *throughput value* is an :class:`~sgdnet.results.Estimate` (drawn with its confidence
  interval), a ``(mean, lo, hi)`` triple or a number;
- a *scaling point* is an object or dict with ``workers`` and a throughput value under the
  requested ``metric`` (``samples_per_s`` or ``steps_per_s``; ``throughput`` also accepted), or a
  ``(workers, value)`` pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._check import number_or_none
from ..errors import SgdnetError
from .style import LINE_COLORS, host_key, paper_rc, resource_color, time_unit

__all__ = ["plot_scaling", "plot_distribution", "plot_utilization", "plot_table",
           "as_interval"]


def as_interval(v: Any, level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` of an Estimate, a triple or a number (``lo = hi = mean``)."""
    if hasattr(v, "mean") and hasattr(v, "ci"):
        m = float(v.mean)
        try:
            lo, hi = v.ci(level)
        except Exception:  # one replication: no interval
            lo = hi = m
        lo, hi = (m, m) if not (np.isfinite(lo) and np.isfinite(hi)) else (float(lo), float(hi))
        return m, lo, hi
    if isinstance(v, (tuple, list)) and len(v) == 3:
        return float(v[0]), float(v[1]), float(v[2])
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise SgdnetError(f"cannot read a throughput from {v!r}; give an Estimate, (mean, lo, hi) or a number") from None
    return x, x, x


def _get(obj: Any, key: str):
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _point(p: Any, metric: str) -> tuple[float, Any]:
    if isinstance(p, (tuple, list)) and len(p) == 2:
        return float(p[0]), p[1]
    w = _get(p, "workers")
    if w is None:
        cl = _get(p, "cluster")
        w = getattr(cl, "workers", None) if cl is not None else None
    keys = (metric, "throughput") if metric != "throughput" else ("throughput",)
    val = next((v for v in (_get(p, k) for k in keys) if v is not None), None)
    if val is None:
        pred = _get(p, "prediction")
        if pred is not None:
            val = _get(pred, metric)
    if w is None or val is None:
        raise SgdnetError(f"scaling point {p!r} has no 'workers' and {metric!r}; give (workers, value) pairs instead")
    return float(w), val


def plot_scaling(
    data,
    ax=None,
    *,
    metric: str = "samples_per_s",
    ideal: bool = True,
    level: float = 0.95,
    title: str | None = None,
    ylabel: str | None = None,
    logx: bool = True,
):
    """Throughput against the number of workers, one line per variant, with CI bands.

    Parameters
    ----------
    data : mapping label -> sequence of points, or a sequence of points
        See the module docstring for what a point may be.
    ax : matplotlib Axes, optional
    metric : str
        ``"samples_per_s"`` (default) or ``"steps_per_s"``: the attribute read from each point.
    ideal : bool
        Draw the ideal linear speed-up of the best smallest-cluster throughput (dashed).
    level : float
        Confidence level of the bands.
    title, ylabel : str, optional
    logx : bool
        Base-2 log-log axes (default) when the worker counts span a factor > 4, so the ideal
        line is straight; linear axes from 0 otherwise.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    if isinstance(data, Mapping):
        series = dict(data)
    elif isinstance(data, Sequence) and not isinstance(data, str):
        label = next((str(v) for v in (_get(p, "variant") for p in data) if v), "throughput")
        series = {label: data}
    else:
        raise SgdnetError(f"plot_scaling needs a dict label -> points or a list of points, got {type(data).__name__}")
    if not series or not any(len(v) for v in series.values()):
        raise SgdnetError("plot_scaling got no points")
    if ax is None:
        with plt.rc_context(paper_rc()):
            _, ax = plt.subplots(figsize=(3.4, 2.5), layout="constrained")
    all_w: list[float] = []
    base: tuple[float, float] | None = None
    banded = False
    for k, (label, pts) in enumerate(series.items()):
        rows = sorted((_point(p, metric) for p in pts), key=lambda r: r[0])
        w = np.array([r[0] for r in rows])
        iv = np.array([as_interval(r[1], level) for r in rows])
        col = LINE_COLORS[k % len(LINE_COLORS)]
        ax.plot(w, iv[:, 0], marker="o", ms=3.2, lw=1.3, color=col, label=str(label), zorder=3)
        if np.any(iv[:, 2] > iv[:, 1]):
            ax.fill_between(w, iv[:, 1], iv[:, 2], color=col, alpha=0.2, lw=0, zorder=2)
            banded = True
        all_w.extend(w.tolist())
        if base is None or w[0] < base[0] or (w[0] == base[0] and iv[0, 0] > base[1]):
            base = (float(w[0]), float(iv[0, 0]))
    wmin, wmax = min(all_w), max(all_w)
    if ideal and base is not None and wmax > wmin:
        xs = np.array(sorted(set(all_w)))
        ax.plot(xs, base[1] * xs / base[0], ls="--", lw=0.9, color="#555555", label="ideal linear", zorder=1)
    log = logx and wmax / max(wmin, 1e-12) > 4
    if log:  # log-log: the ideal line is straight, ratios read as distances
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
    ticks = sorted(set(all_w))
    if len(ticks) <= 12:
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    unit = {"samples_per_s": "samples/s", "steps_per_s": "steps/s"}.get(metric, metric)
    ax.set_xlabel("workers", fontsize=8)
    ax.set_ylabel(ylabel or f"throughput ({unit})", fontsize=8)
    if not log:
        ax.set_ylim(bottom=0)
    ax.grid(True, which="major", lw=0.3, color="#DDDDDD")
    handles, labels = ax.get_legend_handles_labels()
    if banded:  # say what the shading is (bands are often thinner than the line at a glance)
        from matplotlib.patches import Patch

        handles.append(Patch(facecolor="#888888", alpha=0.3, lw=0))
        labels.append(f"{level:.0%} CI")
    ax.legend(handles, labels, frameon=False, loc="upper left", fontsize=7)
    if title:
        ax.set_title(title)
    return ax


def _step_workers(result) -> list:
    seen: dict = {}
    for t in result.transition_tags:
        if t.get("step") and "worker" in t:
            seen.setdefault(t["worker"], None)
    return list(seen)


def plot_distribution(result, ax=None, *, workers=None, kind: str = "hist", bins: int = 40,
                      title: str | None = None):
    """Distribution of step times (intervals between a worker's step completions).

    Parameters
    ----------
    result : sgdnet.results.Result
        Simulated with ``samples=True`` (the default).
    ax : matplotlib Axes, optional
    workers : iterable, optional
        Workers to show, one curve each (default: every worker tagged on a step transition; a
        net without worker tags gives one pooled curve).
    kind : ``"hist"`` or ``"cdf"``
        Density histogram (outlines) or empirical CDF.
    bins : int
        Histogram bins (shared by all workers).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    if kind not in ("hist", "cdf"):
        raise SgdnetError(f"kind={kind!r} is unknown; use 'hist' or 'cdf'")
    ws = list(workers) if workers is not None else _step_workers(result)
    samples = {f"worker {w}": np.asarray(result.step_times(w)) for w in ws} if ws else {
        "all steps": np.asarray(result.step_times())}
    samples = {k: v[np.isfinite(v)] for k, v in samples.items()}
    allv = np.concatenate([v for v in samples.values() if v.size] or [np.zeros(1)])
    unit, scale = time_unit(float(np.max(allv)) if allv.size else 1.0)
    if ax is None:
        with plt.rc_context(paper_rc()):
            _, ax = plt.subplots(figsize=(3.4, 2.4), layout="constrained")
    lo, hi = float(np.min(allv)) / scale, float(np.max(allv)) / scale
    # a deterministic run has one step time: widen the axis around it so the CDF is a visible
    # 0 -> 1 step and the histogram one bar, not a line on a zero-width axis
    spread = hi - lo > 1e-9 * max(abs(hi), 1e-12)  # float jitter of equal durations is none
    pad = 0.05 * (hi - lo) if spread else max(0.05 * abs(lo), 1e-9)
    edges = np.linspace(lo, hi, bins + 1) if spread else np.linspace(lo - pad, hi + pad, 2)
    for k, (label, v) in enumerate(samples.items()):
        col = LINE_COLORS[k % len(LINE_COLORS)]
        x = v / scale
        if not x.size:
            continue
        if kind == "hist":
            ax.hist(x, bins=edges, density=True, histtype="step", lw=1.1, color=col,
                    label=f"{label} (mean {x.mean():.3g} {unit})")
        else:
            xs = np.concatenate([[lo - pad], np.sort(x), [hi + pad]])
            ys = np.concatenate([[0.0], np.arange(1, x.size + 1) / x.size, [1.0]])
            ax.step(xs, ys, where="post", lw=1.1, color=col,
                    label=f"{label} (mean {x.mean():.3g} {unit})")
    ax.set_xlabel(f"step time ({unit})", fontsize=8)
    ax.set_ylabel(f"density (1/{unit})" if kind == "hist" else "fraction of steps ≤ x", fontsize=8)
    if kind == "cdf":
        ax.set_ylim(0, 1.02)
        ax.set_xlim(lo - pad, hi + pad)
    ax.legend(frameon=False, fontsize=6)
    ax.grid(True, lw=0.3, color="#EEEEEE")
    if title:
        ax.set_title(title)
    return ax


def plot_utilization(source, ax=None, *, resources=None, level: float = 0.95, title: str | None = None):
    """Mean utilisation of each resource (busy server-time / capacity / time) with CIs.

    Parameters
    ----------
    source : Result, Prediction or mapping name -> Estimate
        Anything with ``utilizations()`` or a ``utilization`` dict.
    ax : matplotlib Axes, optional
    resources : iterable of str, optional
        Subset (and order) of resources to show; default all, grouped by host.
    level : float
        Confidence level of the error bars.
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tags: dict[str, dict] = {}
    if hasattr(source, "utilizations"):
        util = source.utilizations()
        tags = dict(zip(source.resource_names, source.resource_tags))
    elif isinstance(source, Mapping):
        util = dict(source)
    elif isinstance(getattr(source, "utilization", None), Mapping):
        util = dict(source.utilization)
        res = getattr(source, "result", None)
        if res is not None:
            tags = dict(zip(res.resource_names, res.resource_tags))
    else:
        raise SgdnetError(f"plot_utilization needs a Result, a Prediction or a dict, got {type(source).__name__}")
    if resources is not None:
        missing = [r for r in resources if r not in util]
        if missing:
            raise SgdnetError(f"resources {missing} are unknown; known: {sorted(util)}")
        names = list(resources)
    else:
        names = sorted(util, key=lambda n: (host_key(str(tags.get(n, {}).get("host", "~"))), list(util).index(n)))
    if not names:
        raise SgdnetError("plot_utilization: there are no resources to show")
    iv = np.array([as_interval(util[n], level) for n in names])
    if ax is None:
        with plt.rc_context(paper_rc()):
            _, ax = plt.subplots(figsize=(3.4, max(1.4, 0.16 * len(names) + 0.7)),
                                 layout="constrained")
    y = np.arange(len(names))
    cols = [resource_color(tags.get(n, {})) for n in names]
    ax.barh(y, iv[:, 0] * 100, color=cols, height=0.7, zorder=2)
    err = np.vstack([iv[:, 0] - iv[:, 1], iv[:, 2] - iv[:, 0]]) * 100
    if np.any(err > 0):
        ax.errorbar(iv[:, 0] * 100, y, xerr=err, fmt="none", ecolor="black", elinewidth=0.6, capsize=1.5, zorder=3)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(100.0, math.ceil(float(iv[:, 2].max()) * 100 / 10) * 10))
    ax.set_xlabel(f"utilisation (%), {int(level * 100)}% CI", fontsize=8)
    ax.grid(True, axis="x", lw=0.3, color="#DDDDDD", zorder=0)
    by_color: dict[str, list[str]] = {}
    for n in names:
        k = str(tags.get(n, {}).get("kind", ""))
        if k and k not in by_color.setdefault(resource_color({"kind": k}), []):
            by_color[resource_color({"kind": k})].append(k)
    if by_color:
        ax.legend(handles=[Patch(facecolor=c, label=", ".join(ks)) for c, ks in by_color.items()], frameon=False,
                  fontsize=6, loc="upper center", bbox_to_anchor=(0.5, 1.0 + 0.9 / max(len(names), 4)),
                  ncol=len(by_color))
    hosts = [str(tags.get(n, {}).get("host", "")) for n in names]
    for i in range(1, len(names)):
        if hosts[i] != hosts[i - 1]:
            ax.axhline(i - 0.5, color="#BBBBBB", lw=0.4, zorder=1)
    if title:
        ax.set_title(title)
    return ax


def _table_rows(table: Any) -> list[dict]:
    """A study table as a list of dicts: rows, a StudyResult or a pandas DataFrame."""
    if hasattr(table, "to_dict") and hasattr(table, "columns"):  # a DataFrame
        return list(table.to_dict("records"))
    rows = getattr(table, "rows", table)
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not all(
            isinstance(r, Mapping) for r in rows):
        raise SgdnetError(f"plot_table needs study rows (a list of dicts, a StudyResult or a "
                          f"DataFrame), got {type(table).__name__}")
    return [dict(r) for r in rows]


_number = number_or_none


#: Numeric twins of unit columns (``cluster.bandwidth`` -> ``cluster.bandwidth_Bps``).
_TWINS = ("_Bps", "_s", "_B")
#: Columns that are never a parameter of a row.
_NOT_PARAMS = {"row_id", "seed", "n", "seeds", "error", "speed_up", "efficiency", "nodes",
               "price_per_hour", "cost_per_hour", "train_samples"}
#: Axis labels with units: column -> (label, scale applied to the tick values).
_UNITS = {"cluster.workers": ("workers", 1.0), "nodes": ("instances", 1.0), "cluster.bandwidth_Bps": ("bandwidth (Gbit/s)", 8e-9),
          "cluster.uplink_Bps": ("uplink (Gbit/s)", 8e-9),
          "cluster.downlink_Bps": ("downlink (Gbit/s)", 8e-9),
          "cluster.ps_bandwidth_Bps": ("PS bandwidth (Gbit/s)", 8e-9),
          "cluster.latency_s": ("latency (µs)", 1e6), "samples_per_s": ("throughput (samples/s)", 1),
          "steps_per_s": ("throughput (steps/s)", 1.0), "efficiency": ("scaling efficiency", 1.0),
          "speed_up": ("speed-up (×)", 1.0), "cost_per_hour": ("cost ($/h)", 1.0),
          "cost_per_m_samples": ("cost ($ per 10⁶ samples)", 1.0),
          "cost_per_m_tokens": ("cost ($ per 10⁶ tokens)", 1.0),
          "cost_to_train": ("cost to train ($)", 1.0), "time_to_train_h": ("time to train (h)", 1)}
_STYLES = ["-", "--", ":", "-.", (0, (5, 1.5, 1, 1.5, 1, 1.5))]
_MARKERS = ["o", "s", "^", "D", "v"]


def _is_param(c: str, cols: Sequence[str]) -> bool:
    if c in _NOT_PARAMS or c.startswith(("util_", "steps_per_s_", "samples_per_s_", "cost_",
                                         "time_to_train_")):
        return False
    return not any(c.endswith(t) and c[: -len(t)] in cols for t in _TWINS)


def _name(col: str) -> str:
    """A column as a reader names it: ``cluster.bandwidth`` -> ``bandwidth``."""
    return col.split(".", 1)[1] if col.startswith(("cluster.", "model.")) else col


def _show(v: Any) -> str:
    """A parameter value for a legend or a panel title (a JSON spec as ``kind k=v ...``)."""
    if v is None or v == "":
        return "none"
    if isinstance(v, str) and v.startswith("{"):
        import json

        try:
            d = json.loads(v)
        except ValueError:
            return v
        if isinstance(d, dict):
            head = str(d.pop("kind", ""))
            return " ".join([head] + [f"{k}={d[k]}" for k in sorted(d)]).strip()
    return f"{v:g}" if isinstance(v, float) else str(v)


def _key(v: Any) -> tuple:
    """Sort key: numbers by value (a unit label by its parsed value), text after."""
    x = _number(v)
    if x is None and isinstance(v, str):
        from ..units import parse_quantity

        for kind in ("rate", "time", "bytes"):
            try:
                x = float(parse_quantity(v, kind))
                break
            except Exception:  # not this kind of quantity
                continue
    return (0, x, "") if x is not None else (1, 0.0, _show(v))


def _matches(v: Any, want: str) -> bool:
    if want.strip() in ("", "none", "null", "None") and v in (None, ""):
        return True
    a, b = _number(v), _number(want)
    return a == b if a is not None and b is not None else str(v) == want


def _split_axes(rows: list[dict], cols: list[str], x: str, hue: str | None, facet: str | None,
                style: str | None) -> tuple[str | None, str | None, str | None]:
    """``(hue, facet, style)``: the given ones, then the parameters that vary among ``rows``
    (variant first to colour); a parameter still varying is refused."""
    for name, col in (("hue", hue), ("facet", facet), ("style", style)):
        if col is not None and col not in cols:
            raise SgdnetError(f"plot_table: {name} column {col!r} is not in the table; its "
                              f"columns are {', '.join(cols)}")
    base = next((x[: -len(t)] for t in _TWINS if x.endswith(t) and x[: -len(t)] in cols), x)
    # a study table writes its parameters before its "seed" column; other tables: by name
    params = ([c for c in cols[:cols.index("seed")] if c != "row_id" and not any(
        c.endswith(t) and c[: -len(t)] in cols for t in _TWINS)] if "seed" in cols else
              [c for c in cols if _is_param(c, cols)])
    varying = [c for c in params if c not in (x, base) and len({_show(r.get(c)) for r in rows}) > 1]
    free = [c for c in varying if c not in (hue, facet, style)]
    free.sort(key=lambda c: c != "variant")
    if hue is None and free:
        hue = free.pop(0)
    if facet is None and free:
        facet = free.pop(0)
    if style is None and free:
        style = free.pop(0)
    if free:
        vals = {c: sorted({_show(r.get(c)) for r in rows}) for c in free}
        raise SgdnetError(
            f"plot_table: the rows also differ in {', '.join(free)} ({'; '.join(f'{c}: ' + ', '.join(v) for c, v in vals.items())}) "
            f"besides x={x}, hue={hue}, facet={facet}, style={style}: a line would run through "
            "mixed settings; keep one value with where=[(column, value)] (CLI --where "
            "COLUMN=VALUE) or split by it with hue/facet/style")
    return hue, facet, style


def plot_table(table, x: str, y: str = "samples_per_s", hue: str | None = None, ax=None, *,
               title: str | None = None, facet: str | None = None, style: str | None = None,
               where: Sequence[tuple[str, Any]] = ()):
    """A study table as lines: ``y`` (mean, with its CI band) against ``x``, one line per
    combination of the other parameters that vary: colour by ``hue`` (``variant`` first), a
    panel per value of ``facet``, a line style per value of ``style``.

    Parameters left unnamed are assigned in that order among the parameters that vary; a
    parameter still varying after the three is refused (a line would zig-zag through mixed
    settings), as are two rows at the same point of one line. Against ``cluster.workers`` the
    axes are base-2 log-log with each panel's ideal (linear scaling from its best smallest
    cluster; flat at 1 for ``efficiency``). Axis labels carry units; a unit column
    (``cluster.bandwidth``) is plotted by its numeric twin (``cluster.bandwidth_Bps``, ticks
    in Gbit/s).

    Parameters
    ----------
    table : list of dict, StudyResult or pandas.DataFrame
        Rows as :func:`sgdnet.study.read_table` returns them.
    x : str
        A numeric column (or a unit column with a numeric twin).
    y : str
        ``samples_per_s``, ``steps_per_s`` (read from ``<y>_mean/_lo/_hi``), ``efficiency`` or
        any numeric column.
    hue, facet, style : str, optional
        Columns splitting the rows into colours, panels and line styles.
    ax : matplotlib Axes, optional
        Draw into it (one panel only).
    title : str, optional
    where : sequence of (column, value) or of "column=value"
        Keep the rows whose column equals the value (``""`` / ``"none"`` match an empty cell).

    Returns
    -------
    matplotlib.axes.Axes
        The first panel; ``ax.figure.axes`` are all of them.

    Raises
    ------
    SgdnetError
        Unknown columns (the message lists the table's), no plottable row, non-numeric ``x``,
        rows that would mix settings on one line.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, NullLocator

    rows = [r for r in _table_rows(table) if not r.get("error")]
    cols = list(dict.fromkeys(k for r in rows for k in r))
    for w in where:
        if isinstance(w, str):
            col, want = w.split("=", 1) if "=" in w else (w, None)
        else:
            col, want = w
        if want is None:
            raise SgdnetError(f"plot_table: where {w!r} is not COLUMN=VALUE; write e.g. "
                              "cluster.bandwidth=10Gbps")
        if col not in cols:
            raise SgdnetError(f"plot_table: where column {col!r} is not in the table; its "
                              f"columns are {', '.join(cols)}")
        rows = [r for r in rows if _matches(r.get(col), str(want))]
    if not rows:
        raise SgdnetError("plot_table: the table has no rows without an error"
                          + (f" matching {list(where)}" if where else ""))
    xcol = next((x + t for t in _TWINS if x + t in cols), x)
    ycols = (f"{y}_mean", f"{y}_lo", f"{y}_hi") if f"{y}_mean" in cols else (y, y, y)
    for name, col in (("x", xcol), ("y", ycols[0])):
        if col not in cols:
            raise SgdnetError(f"plot_table: {name} column {col!r} is not in the table; its "
                              f"columns are {', '.join(cols)}")
    hue, facet, style = _split_axes(rows, cols, xcol, hue, facet, style)
    series: dict[tuple, dict[tuple, list]] = {}
    for r in rows:
        xv, m = _number(r.get(xcol)), _number(r.get(ycols[0]))
        if xv is None or m is None:
            continue
        lo, hi = _number(r.get(ycols[1])), _number(r.get(ycols[2]))
        p = tuple(r.get(c) if c else None for c in (facet, hue, style))
        line = series.setdefault((p[0],), {}).setdefault(p[1:], [])
        if any(q[0] == xv for q in line):
            raise SgdnetError(f"plot_table: two rows at {xcol}={xv:g} on one line "
                              f"({dict(zip(('facet', 'hue', 'style'), p))}): they differ in a "
                              "column that is not a parameter; filter them with where=")
        line.append((xv, m, lo if lo is not None else m, hi if hi is not None else m))
    if not series:
        raise SgdnetError(f"plot_table: no row has numeric {xcol!r} and {ycols[0]!r}")
    panels = sorted(series, key=lambda k: _key(k[0]))
    hues = sorted({k[0] for s in series.values() for k in s}, key=_key)
    styles = sorted({k[1] for s in series.values() for k in s}, key=_key)
    if ax is not None and len(panels) > 1:
        raise SgdnetError(f"plot_table: {len(panels)} panels (facet={facet}) do not fit one ax; "
                          "leave ax=None or filter with where=")
    if ax is None:
        nc = min(3, len(panels))
        nr = math.ceil(len(panels) / nc)
        with plt.rc_context(paper_rc()):
            fig, axs = plt.subplots(nr, nc, figsize=(2.9 * nc + 1.3, 2.4 * nr + 0.3),
                                    layout="constrained", sharex=True, sharey=True,
                                    squeeze=False)
        axes = list(axs.ravel())
        for extra in axes[len(panels):]:
            extra.set_visible(False)
    else:
        fig, axes = ax.figure, [ax]
    scaling = xcol == "cluster.workers"
    xs_all = [q[0] for s in series.values() for line in s.values() for q in line]
    log = scaling and max(xs_all) / max(min(xs_all), 1e-12) > 4
    banded = False
    for a, pk in zip(axes, panels):
        a._sgdnet_series = []
        lines = series[pk]
        for (hv, sv), pts in sorted(lines.items(), key=lambda kv: (_key(kv[0][0]), _key(kv[0][1]))):
            pts.sort()
            iv = np.array(pts)
            col = LINE_COLORS[hues.index(hv) % len(LINE_COLORS)]
            si = styles.index(sv)
            label = _show(hv) if hue else (_show(sv) if style else y)
            a.plot(iv[:, 0], iv[:, 1], marker=_MARKERS[si % 5], ms=3.0, lw=1.3, color=col,
                   ls=_STYLES[si % 5], label=label, zorder=3)
            a._sgdnet_series.append((hv, sv))
            if np.any(iv[:, 3] > iv[:, 2]):
                a.fill_between(iv[:, 0], iv[:, 2], iv[:, 3], color=col, alpha=0.2, lw=0, zorder=2)
                banded = True
        if scaling and y in ("efficiency",):
            a.axhline(1.0, ls="--", lw=0.9, color="#555555", label="ideal (1)", zorder=1)
        elif scaling and y in ("samples_per_s", "steps_per_s", "speed_up"):
            firsts = [sorted(p)[0] for p in lines.values()]
            x0 = min(f[0] for f in firsts)
            b = max(f[1] for f in firsts if f[0] == x0)
            xs = np.array(sorted({q[0] for p in lines.values() for q in p}))
            if len(xs) > 1:
                a.plot(xs, b * xs / x0, ls="--", lw=0.9, color="#555555", label="ideal linear",
                       zorder=1)
        if facet:
            a.set_title(f"{_name(facet)} {_show(pk[0])}", fontsize=8)
        a.grid(True, which="major", lw=0.3, color="#DDDDDD")
    xl, xscale = _UNITS.get(xcol, (xcol, 1.0))
    for a in axes[:len(panels)]:
        if log:
            a.set_xscale("log", base=2)
            if y in ("samples_per_s", "steps_per_s", "speed_up"):
                a.set_yscale("log", base=2)
                a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        elif xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) > 20:
            a.set_xscale("log")
        if (scaling or (xscale == 1.0 and all(float(v).is_integer() for v in xs_all))) and \
                len(set(xs_all)) <= 12:  # integer x (workers, nodes): ticks at the data
            a.set_xticks(sorted(set(xs_all)), [f"{t:g}" for t in sorted(set(xs_all))])
            a.xaxis.set_minor_locator(NullLocator())
        elif xscale != 1.0 and len(set(xs_all)) <= 8:  # ticks at the data, in the unit
            a.set_xticks(sorted(set(xs_all)), [f"{t * xscale:g}" for t in sorted(set(xs_all))])
            a.xaxis.set_minor_locator(NullLocator())
        elif xscale != 1.0:
            a.xaxis.set_major_formatter(FuncFormatter(lambda v, _, s=xscale: f"{v * s:g}"))
        if not log and y not in ("efficiency",):
            a.set_ylim(bottom=0)
    for a in axes[:len(panels)]:
        i = axes.index(a)
        if ax is not None or \
                i + axes[0].get_gridspec().ncols >= len(panels):  # nothing drawn below it
            a.set_xlabel(xl, fontsize=8)
            a.xaxis.set_tick_params(labelbottom=True)
        if a.get_subplotspec().is_first_col() or ax is not None:
            a.set_ylabel(_UNITS.get(y, (y,))[0], fontsize=8)
    handles: list[Any] = []
    if hue:
        handles += [Line2D([], [], color=LINE_COLORS[i % len(LINE_COLORS)], lw=1.3,
                           label=_show(h)) for i, h in enumerate(hues)]
    if style:
        handles += [Line2D([], [], color="#333333", lw=1.1, ls=_STYLES[i % 5],
                           marker=_MARKERS[i % 5], ms=3, label=_show(sv))
                    for i, sv in enumerate(styles)]
    ideal = [ln for ln in axes[0].get_lines() if ln.get_label().startswith("ideal")]
    if ideal:
        handles.append(Line2D([], [], color="#555555", ls="--", lw=0.9,
                              label=ideal[0].get_label()))
    if banded:
        handles.append(Patch(facecolor="#888888", alpha=0.3, lw=0, label="95% CI"))
    heads = [(hue, len(hues) if hue else 0), (style, len(styles) if style else 0)]
    legend_title = " / ".join(_name(h) for h, n in heads if h)
    if handles:
        if len(panels) > 1 or style:
            fig.legend(handles=handles, loc="outside right upper", frameon=False, fontsize=7,
                       title=legend_title or None, title_fontsize=7)
        else:
            axes[0].legend(handles=handles, frameon=False, fontsize=7, title=legend_title or None,
                           title_fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9) if len(panels) > 1 else axes[0].set_title(title)
    axes[0]._sgdnet_split = {"colour": hue, "panel": facet, "line style": style}
    return axes[0]
