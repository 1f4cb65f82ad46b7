"""Chrome Trace Event JSON of a traced replication, for Perfetto (https://ui.perfetto.dev) and
``chrome://tracing``.

Every traced firing becomes one complete (``"ph": "X"``) event per resource it holds, with
``ts`` / ``dur`` in microseconds of simulated time, a process (``pid``) per host and a thread
(``tid``) per resource. A viewer needs the slices of one thread to nest, so a resource whose
firings overlap — capacity > 1, or processor-sharing flows on a ``ps`` link — gets one thread
per concurrent slot (``nic_up``, ``nic_up #2``, ...). Firings that hold no resource and take
time go to an ``ops`` thread of their worker's host. Metadata events name and order the
processes and threads. ``args`` carry the transition's tags, its resources and the replication;
a transfer's (``stage="link"``) also its mean rate in bytes/s (``mean_rate_Bps``: its bytes over
its duration, lower than the link's bandwidth when flows shared it).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from ..errors import SgdnetError
from ._tracks import tracks_of
from .style import pack_slots

__all__ = ["chrome_trace_events", "to_chrome_trace"]

_US = 1e6


def _jsonable(v: Any) -> Any:
    """``v`` as strict JSON (RFC 8259): a non-finite float (an ``inf`` tag) becomes its string,
    since ``NaN`` / ``Infinity`` literals make Perfetto and chrome://tracing reject the file."""
    if hasattr(v, "item"):  # a numpy scalar
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def chrome_trace_events(result, rep: int = 0, *, window: tuple[float, float] | None = None) -> list[dict]:
    """The list of trace events (metadata first) of replication ``rep``.

    Parameters
    ----------
    result : sgdnet.results.Result
        Simulated with ``trace=True``.
    rep : int
        Which replication.
    window : (start, end) seconds, optional
        Keep only firings overlapping this interval (clipped to it).

    Returns
    -------
    list of dict
        Each has ``name``, ``ph``, ``ts``, ``dur``, ``pid``, ``tid`` (metadata events use
        ``ts = dur = 0``).
    """
    if window is not None:
        lo, hi = map(float, window)
        if not hi > lo:
            raise SgdnetError(f"window={window!r} must be (start, end) seconds with end > start")
    tracks = tracks_of(result, rep)
    hosts: list[str] = []
    for tk in tracks:
        if tk.host not in hosts:
            hosts.append(tk.host)
    pid_of = {h: i + 1 for i, h in enumerate(hosts)}
    meta: list[dict] = []
    body: list[dict] = []
    for h in hosts:
        pid = pid_of[h]
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": 0, "args": {"name": h}})
        meta.append({"name": "process_sort_index", "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": 0,
                     "args": {"sort_index": pid}})
    next_tid = {h: 1 for h in hosts}
    for tk in tracks:
        evs = tk.events
        if window is not None:
            evs = [(max(s, lo), min(e, hi), t) for s, e, t in evs if e >= lo and s <= hi]
        slots = pack_slots([(s, e) for s, e, _ in evs]) if evs else []
        n_slots = max(slots) + 1 if slots else 1
        pid = pid_of[tk.host]
        tids = []
        for k in range(n_slots):
            tid = next_tid[tk.host]
            next_tid[tk.host] += 1
            tids.append(tid)
            tname = tk.label if k == 0 else f"{tk.label} #{k + 1}"
            meta.append({"name": "thread_name", "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": tid,
                         "args": {"name": tname}})
            meta.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": tid,
                         "args": {"sort_index": tid}})
        for (s, e, t), k in zip(evs, slots):
            tags = result.transition_tags[t]
            body.append({
                "name": result.transition_names[t],
                "cat": str(tags.get("kind", "other")),
                "ph": "X",
                "ts": s * _US,
                "dur": (e - s) * _US,
                "pid": pid,
                "tid": tids[k],
                "args": {**_jsonable(tags), "resources": list(result.transition_resources[t]),
                         "track": tk.resource or "ops", "replication": int(rep),
                         **_flow_rate(tags, s, e)},
            })
    body.sort(key=lambda ev: (ev["ts"], -ev["dur"]))
    return meta + body


def _flow_rate(tags: dict, start: float, end: float) -> dict:
    """A transfer's mean rate over its firing (its nominal bytes over its duration), so that a
    flow slowed by sharing shows it; empty for other firings."""
    nb = tags.get("bytes")
    if tags.get("stage") != "link" or not isinstance(nb, (int, float)) or not end > start:
        return {}
    return {"mean_rate_Bps": float(nb) / (end - start)}


def to_chrome_trace(result, path: str | os.PathLike | None = None, rep: int = 0, *,
                    window: tuple[float, float] | None = None) -> dict:
    """Write a traced replication as Chrome Trace Event JSON.

    Parameters
    ----------
    result : sgdnet.results.Result
        Simulated with ``trace=True``.
    path : str or path-like, optional
        File to write (JSON object format).
    rep : int
        Which replication.
    window : (start, end) seconds, optional
        Restrict to firings overlapping this interval.

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``.

    Notes
    -----
    The trace holds *completed* firings. The simulation stops at the last counted step, so
    firings still in flight then (e.g. another worker's backward pass in an asynchronous
    variant) are missing, and per-resource sums of the slices inside ``[t0, t1]`` can fall short
    of the busy time the result reports. Simulating a few more steps with the same seed gives
    the same trajectory up to ``t1`` plus those firings: pass ``window=(t0, t1)`` of the shorter
    run to the longer run's trace and the sums match its busy times.

    Raises
    ------
    SimulationError
        The result carries no trace.
    SgdnetError
        ``rep`` out of range or a bad ``window``.
    """
    events = chrome_trace_events(result, rep, window=window)
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "sgdnet",
            "net": result.net_name,
            "replication": int(rep),
            "seed": int(result.seeds[rep]),
            "t0_us": float(result.t0[rep]) * _US,
            "t1_us": float(result.t1[rep]) * _US,
            "time_unit": "simulated microseconds",
        },
    }
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"), allow_nan=False)
    return doc
