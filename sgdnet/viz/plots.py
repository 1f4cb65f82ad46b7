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

from ..errors import SgdnetError
from .style import LINE_COLORS, host_key, paper_rc, resource_color, time_unit

__all__ = ["plot_scaling", "plot_distribution", "plot_utilization", "plot_table", "as_interval"]


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


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def plot_table(table, x: str, y: str = "samples_per_s", hue: str | None = None, ax=None, *,
               title: str | None = None):
    """A study table as lines: ``y`` (mean, with its CI band) against ``x``, one line per value
    of ``hue``. Against ``cluster.workers`` it is :func:`plot_scaling` (log axes, ideal line).

    Parameters
    ----------
    table : list of dict, StudyResult or pandas.DataFrame
        Rows as :func:`sgdnet.study.read_table` returns them.
    x : str
        A numeric column; a unit label column (``cluster.bandwidth``) is plotted by its numeric
        twin (``cluster.bandwidth_Bps``).
    y : str
        A metric: ``samples_per_s``, ``steps_per_s`` (read from ``<y>_mean/_lo/_hi``) or any
        numeric column.
    hue : str, optional
        Column whose values split the rows into lines (e.g. ``variant``).
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    SgdnetError
        Unknown columns (the message lists the table's), no plottable row, non-numeric ``x``.
    """
    import matplotlib.pyplot as plt

    rows = [r for r in _table_rows(table) if not r.get("error")]
    if not rows:
        raise SgdnetError("plot_table: the table has no rows without an error")
    cols = list(dict.fromkeys(k for r in rows for k in r))
    xcol = x
    for suffix in ("_Bps", "_s", "_B"):
        if x + suffix in cols:
            xcol = x + suffix
    ycols = (f"{y}_mean", f"{y}_lo", f"{y}_hi") if f"{y}_mean" in cols else (y, y, y)
    for name, col in (("x", xcol), ("y", ycols[0])) + ((("hue", hue),) if hue else ()):
        if col not in cols:
            raise SgdnetError(f"plot_table: {name} column {col!r} is not in the table; its "
                              f"columns are {', '.join(cols)}")
    series: dict[str, list[tuple[float, tuple[float, float, float]]]] = {}
    for r in rows:
        xv, m = _number(r.get(xcol)), _number(r.get(ycols[0]))
        if xv is None or m is None:
            continue
        lo, hi = _number(r.get(ycols[1])), _number(r.get(ycols[2]))
        label = str(r.get(hue)) if hue else y
        series.setdefault(label, []).append((xv, (m, lo if lo is not None else m,
                                                  hi if hi is not None else m)))
    if not series:
        raise SgdnetError(f"plot_table: no row has numeric {xcol!r} and {ycols[0]!r}")
    if xcol == "cluster.workers":
        return plot_scaling(series, ax, metric=y, title=title)
    if ax is None:
        with plt.rc_context(paper_rc()):
            _, ax = plt.subplots(figsize=(3.4, 2.5), layout="constrained")
    for k, (label, pts) in enumerate(series.items()):
        pts.sort(key=lambda p: p[0])
        xs = np.array([p[0] for p in pts])
        iv = np.array([p[1] for p in pts])
        col = LINE_COLORS[k % len(LINE_COLORS)]
        ax.plot(xs, iv[:, 0], marker="o", ms=3.2, lw=1.3, color=col, label=label, zorder=3)
        if np.any(iv[:, 2] > iv[:, 1]):
            ax.fill_between(xs, iv[:, 1], iv[:, 2], color=col, alpha=0.2, lw=0, zorder=2)
    xs_all = [p[0] for pts in series.values() for p in pts]
    if min(xs_all) > 0 and max(xs_all) / min(xs_all) > 20:
        ax.set_xscale("log")
    ax.set_xlabel(xcol, fontsize=8)
    ax.set_ylabel({"samples_per_s": "samples/s", "steps_per_s": "steps/s"}.get(y, y), fontsize=8)
    ax.grid(True, lw=0.3, color="#DDDDDD")
    ax.legend(frameon=False, fontsize=7)
    if title:
        ax.set_title(title)
    return ax
