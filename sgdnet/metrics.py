"""Per-worker figures only a stochastic model gives: step-time percentiles, blocked time,
staleness of applied updates, and DSSP's chosen allowances.

All functions read a :class:`~sgdnet.results.Result`; :func:`blocked_time` and :func:`staleness`
need one simulated with ``trace=True`` (and ``trace_limit`` large enough to cover the counting
window: the trace keeps the first ``trace_limit`` completed firings of each replication from
time 0; when it stops before ``t1`` the figures use the traced part of the window only).

Definitions
-----------
Step time of worker ``i``
    The interval between two successive completions of ``i``'s ``step=True`` transition inside
    the counting window (``Result.step_times(worker=i)``), pooled over replications.
Blocked time of worker ``i``
    Inside the window ``[t0, t1]``, the time during which *no operation of worker i is in
    progress*: no firing of a transition tagged ``worker=i`` with ``kind`` other than ``"sync"``
    (compute, its own transfers and their latency stages, server updates of its gradient). Each
    such second is spent waiting for something outside the worker — a barrier (other workers'
    gradients, an aggregated update), a staleness gate, another worker's data, or a shared
    resource (NIC, PS CPU) busy with someone else's work. Reported per counted step of the worker
    (seconds/step) or as a fraction of the window. Background communication of the worker
    (e.g. CoCoD's all-reduce) counts as *busy*, as it is the worker's own work.
Staleness of an applied update (parameter-server variants)
    The server's model *versions* are its completed update groups: for asynchronous variants, all
    the ``kind="update"`` transitions tagged ``worker=j`` completing their ``c``-th firing make
    worker ``j``'s ``c``-th version; for synchronous variants the update transitions without a
    ``worker`` tag completing their ``c``-th firing make the ``c``-th aggregated version. Worker
    ``i``'s step ``c`` read the model of its latest *pull group* (all its transfers tagged
    ``direction="pull"`` (or ``role="pull"``), ``m``-th firings) that completed no later than the
    step's compute ended; it read every version completed by the time the last piece of that
    group started to be sent (the link stage's start; 0 versions before the first pull). The staleness of the update of ``i``'s step ``c`` is the number
    of versions completed strictly before that update's own version completes, minus the number
    it read. BSP gives 0; ASP with ``n`` identical workers about ``n - 1``; SSP(s) and DSSP with
    ``s_upper`` are bounded by the gate (DSSP's gate bounds nothing without it). Updates whose version completes inside the window are reported.
``r*`` (DSSP)
    Every decision of a ``dynamic_lag`` gate's controller, in ``[0, r_max]``
    (``Result.gate_log``; per replication, with the members' leads, ``Result.gate_stats``).

Tags read (the variants' conventions): ``worker``, ``kind``, ``step``, ``direction`` (or
``role``) ``"pull"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .analysis.stats import rows_mean_quantiles
from .errors import SimulationError, UnknownNameError, VariantError
from .results import Estimate

__all__ = [
    "workers_of",
    "step_time_percentiles",
    "blocked_time",
    "staleness",
    "staleness_percentiles",
    "r_star",
    "worker_table",
]

DEFAULT_Q = (50, 90, 99)


def _need_trace(result: Any, what: str) -> None:
    if getattr(result, "trace", None) is None:
        raise SimulationError(f"{what} needs the firing trace; simulate with trace=True (and a "
                              "trace_limit that covers the counting window)")


def workers_of(result: Any) -> list:
    """Worker ids that own a ``step=True`` transition, sorted."""
    groups = getattr(result, "_worker_groups", None)
    if groups is not None:  # a Result: its step transitions' workers, found once
        return sorted(groups()[0])
    return sorted({t["worker"] for t in result.transition_tags if t.get("step") and "worker" in t})


def _check_q(q: Sequence[float]) -> list[float]:
    qs = [float(x) for x in q]
    bad = [x for x in qs if not 0 <= x <= 100]
    if bad:
        raise SimulationError(f"percentiles {bad} are outside 0..100; give e.g. q=(50, 90, 99)")
    return qs


def step_time_percentiles(result: Any, q: Sequence[float] = DEFAULT_Q) -> dict:
    """Per-worker distribution of step times.

    Parameters
    ----------
    result : Result
        Simulated with ``samples=True`` (the default).
    q : sequence of float
        Percentiles in ``0..100``.

    Returns
    -------
    dict
        ``{worker: {"n": count, "mean_s": ..., "p50_s": ..., ...}}`` (seconds).
    """
    qs = _check_q(q)
    ws = workers_of(result)
    if hasattr(result, "step_times_by_worker"):
        by = result.step_times_by_worker()
        xs = [by[w] for w in ws]
    else:
        xs = [result.step_times(worker=w) for w in ws]
    rows = rows_mean_quantiles(xs, qs, percent=True)  # in bulk when every worker has as many
    return {w: {"n": int(x.size), "mean_s": m, **{f"p{p:g}_s": y for p, y in zip(qs, v)}}
            for w, x, (m, v) in zip(ws, xs, rows)}


def _rep_trace(result: Any, rep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    tr = result.trace[result.trace["rep"] == rep]
    t0 = float(result.t0[rep])
    t1 = float(result.t1[rep])
    horizon = min(t1, float(tr["end"].max())) if tr.size else t0
    return tr["transition"].astype(np.int64), tr["start"], tr["end"], t0, horizon


def _busy_union(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of ``[start, end]`` intervals clipped to ``[lo, hi]``."""
    if hi <= lo or start.size == 0:
        return 0.0
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return 0.0
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    # a new block begins where an interval starts after everything before it has ended
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    starts = s[new]
    ends = reach[np.r_[np.nonzero(new)[0][1:] - 1, s.size - 1]]
    return float(np.sum(ends - starts))


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _by_group(g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)``: indices sorted by group id (stable), group ``j`` (``0 <= j < n``) at
    ``order[bounds[j]:bounds[j + 1]]``; ids -1 (no group) sort first and belong to none."""
    order = np.argsort(g, kind="stable")
    return order, np.searchsorted(g[order], np.arange(n + 1), side="left")


def blocked_time(result: Any, per: str = "step") -> dict:
    """Time each worker spends blocked (no own operation in progress; see the module docstring).

    Parameters
    ----------
    result : Result
        Simulated with ``trace=True``.
    per : {"step", "fraction"}
        ``"step"``: seconds blocked per counted step of the worker; ``"fraction"``: share of the
        window's time.

    Returns
    -------
    dict
        ``{worker: Estimate}`` across replications (unit ``"s/step"`` or ``""``).
    """
    if per not in ("step", "fraction"):
        raise SimulationError(f"per={per!r} is unknown; use 'step' or 'fraction'")
    _need_trace(result, "blocked_time")
    tags = result.transition_tags
    ws = workers_of(result)
    # one pass over the transitions: the worker (as an index into ws) each one belongs to as an
    # own operation and as a step (-1: none), then one stable sort of each replication's trace
    # by worker, so all workers cost O(trace log trace), not O(workers x trace)
    widx = {w: i for i, w in enumerate(ws)}
    own = np.full(len(tags), -1, dtype=np.int64)
    step = np.full(len(tags), -1, dtype=np.int64)
    for i, t in enumerate(tags):
        w = t.get("worker")
        j = widx.get(w, -1) if w is not None and _hashable(w) else -1
        if j >= 0:
            if t.get("kind") != "sync":
                own[i] = j
            if t.get("step"):
                step[i] = j
    vals: dict = {w: [] for w in ws}
    for rep in range(result.replications):
        tt, st, en, lo, hi = _rep_trace(result, rep)
        span = hi - lo
        o_ord, o_b = _by_group(own[tt], len(ws))
        s_ord, s_b = _by_group(step[tt], len(ws))
        for j, w in enumerate(ws):
            m = o_ord[o_b[j]:o_b[j + 1]]
            blocked = span - _busy_union(st[m], en[m], lo, hi)
            if per == "fraction":
                vals[w].append(blocked / span if span > 0 else np.nan)
            else:
                e = en[s_ord[s_b[j]:s_b[j + 1]]]
                n = int(np.count_nonzero((e > lo) & (e <= hi)))
                vals[w].append(blocked / n if n else np.nan)
    unit = "s/step" if per == "step" else ""
    return {w: Estimate(v, unit=unit, label=f"blocked worker={w}") for w, v in vals.items()}


def _role(tags: dict, role: str) -> bool:
    return tags.get("direction") == role or tags.get("role") == role


def _nth_group(ids: list[int], times_by_t: dict[int, np.ndarray], how: str) -> np.ndarray:
    """Per index ``c``: min (``how="min"``) or max of the ``c``-th time of each transition."""
    arrs = [times_by_t.get(t, np.zeros(0)) for t in ids]
    if not arrs:
        return np.zeros(0)
    n = min(a.size for a in arrs)
    if n == 0:
        return np.zeros(0)
    m = np.vstack([a[:n] for a in arrs])
    return m.min(axis=0) if how == "min" else m.max(axis=0)


def staleness(result: Any) -> np.ndarray:
    """Staleness of every update applied inside the window, pooled over replications.

    See the module docstring for the definition.

    Parameters
    ----------
    result : Result
        A parameter-server variant simulated with ``trace=True``.

    Returns
    -------
    numpy.ndarray of int
        One value per applied update.

    Raises
    ------
    VariantError
        The net has no ``kind="update"`` transitions (not a parameter-server variant): staleness
        of all-reduce variants is structural (``pipe-sgd`` 1 step, ``cocod`` one round of ``k``
        steps, ``local-sgd`` 0).
    SimulationError
        No trace.
    """
    _need_trace(result, "staleness")
    tags = result.transition_tags
    upd = [i for i, t in enumerate(tags) if t.get("kind") == "update"]
    if not upd:
        raise VariantError(
            f"net {result.net_name!r} has no transitions tagged kind='update', so it has no "
            "server versions to count; staleness applies to parameter-server variants (sync-ps, "
            "async-ps, ssp, dssp, backup)")
    ws = workers_of(result)
    agg = [i for i in upd if "worker" not in tags[i]]
    # one pass over the transitions (not one per worker): updates, pulls and steps by worker
    per_w: dict = {w: [] for w in ws}
    pulls: dict = {w: [] for w in ws}
    steps: dict = {w: [] for w in ws}
    for i, t in enumerate(tags):
        w = t.get("worker")
        if w is None or not _hashable(w) or w not in per_w:
            continue
        if t.get("kind") == "update":
            per_w[w].append(i)
        if _role(t, "pull"):
            pulls[w].append(i)
        if t.get("step"):
            steps[w].append(i)
    sends = {w: [i for i in pulls[w] if tags[i].get("stage") != "latency"] for w in ws}
    out = []
    for rep in range(result.replications):
        tt, st, en, lo, hi = _rep_trace(result, rep)
        ends: dict[int, np.ndarray] = {}
        starts: dict[int, np.ndarray] = {}
        order = np.argsort(tt, kind="stable")  # each transition's firings in trace order
        ids, first = np.unique(tt[order], return_index=True)
        cuts = np.r_[first, tt.size]
        for j, t in enumerate(ids):
            sel = order[cuts[j]:cuts[j + 1]]
            ends[int(t)] = en[sel]
            starts[int(t)] = st[sel]
        # versions: (time, kind, worker or -1, c)
        vt, vkey = [], []
        if agg:
            g = _nth_group(agg, ends, "max")
            vt.append(g)
            vkey += [(-1, c) for c in range(g.size)]
        for w in ws:
            if per_w[w]:
                g = _nth_group(per_w[w], ends, "max")
                vt.append(g)
                vkey += [(w, c) for c in range(g.size)]
        if not vkey:
            continue
        vtime = np.concatenate(vt)
        order = np.lexsort((np.arange(vtime.size), vtime))
        rank = np.empty(vtime.size, dtype=np.int64)
        rank[order] = np.arange(vtime.size)  # versions completed strictly before this one
        sorted_t = vtime[order]
        pos = {k: i for i, k in enumerate(vkey)}
        for w in ws:
            step_end = _nth_group(steps[w], ends, "max")
            pull_end = _nth_group(pulls[w], ends, "max") if pulls[w] else np.zeros(0)
            pull_sent = _nth_group(sends[w] or pulls[w], starts, "max") if pulls[w] else pull_end
            for c in range(step_end.size):
                key = (w, c) if per_w[w] else (-1, c)
                j = pos.get(key)
                if j is None:
                    break
                T = vtime[j]
                if not (lo < T <= hi):
                    continue
                k = np.searchsorted(pull_end, step_end[c], side="right") - 1
                read = 0 if k < 0 else int(np.searchsorted(sorted_t, pull_sent[k], side="right"))
                out.append(int(rank[j]) - read)
    return np.asarray(out, dtype=np.int64)


def staleness_percentiles(result: Any, q: Sequence[float] = DEFAULT_Q) -> dict:
    """``{"n", "mean", "max", "p50", ...}`` of :func:`staleness`."""
    qs = _check_q(q)
    x = staleness(result)
    row: dict[str, float] = {"n": int(x.size), "mean": float(x.mean()) if x.size else np.nan,
                             "max": int(x.max()) if x.size else np.nan}
    for p in qs:
        row[f"p{p:g}"] = float(np.percentile(x, p)) if x.size else np.nan
    return row


def r_star(result: Any, gate: str | None = None) -> np.ndarray:
    """The ``r*`` values DSSP's controller chose (all replications, decision order).

    Parameters
    ----------
    gate : str or None
        Gate name; ``None`` picks the only gate of the net (``"dssp"`` in DSSP nets).

    Raises
    ------
    UnknownNameError
        No such gate, or ``None`` with zero or several gates.
    """
    names = list(getattr(result, "gate_names", []))
    if gate is None:
        if len(names) != 1:
            raise UnknownNameError(f"net {result.net_name!r} has gates {names}; pass gate=<name>")
        gate = names[0]
    return result.gate_log(gate)


def worker_table(result: Any, q: Sequence[float] = DEFAULT_Q) -> list[dict]:
    """One row per worker: steps/s (mean, CI), step-time percentiles, blocked s/step.

    Blocked time is included when the result has a trace.
    """
    tp = result.throughput_by("worker")
    pct = step_time_percentiles(result, q)
    blk = blocked_time(result) if getattr(result, "trace", None) is not None else {}
    rows = []
    for w in workers_of(result):
        e = tp[w]
        lo, hi = e.ci()
        row = {"worker": w, "steps_per_s": e.mean, "steps_per_s_lo": lo, "steps_per_s_hi": hi}
        row.update(pct[w])
        if w in blk:
            row["blocked_s_per_step"] = blk[w].mean
        rows.append(row)
    return rows
