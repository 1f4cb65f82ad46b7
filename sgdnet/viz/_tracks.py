"""Tracks of a traced replication: who held what, when — shared by the timeline and the trace.

A track is one resource (or, for firings that hold no resource, a per-host ``ops`` track),
on the host named by the resource's ``host`` tag (or the transition's ``worker`` tag). A
firing that holds several resources appears on each of their tracks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._check import is_int
from ..errors import SgdnetError, SimulationError
from .style import host_key, lane_of, short_name

__all__ = ["Track", "tracks_of", "busy_from_intervals"]


@dataclass
class Track:
    """Firings on one resource (``resource`` None: resource-less firings of ``host``)."""

    host: str
    label: str
    resource: str | None
    capacity: int
    discipline: str
    kind: str
    events: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, transition)


def _need_trace(result) -> None:
    if getattr(result, "trace", None) is None:
        raise SimulationError("this result has no trace; simulate with trace=True")


def tracks_of(result, rep: int = 0, *, include_ops: bool = True, min_duration: float = 0.0) -> list[Track]:
    """Build the tracks of replication ``rep`` of a traced ``result``.

    Parameters
    ----------
    result : sgdnet.results.Result
        Simulated with ``trace=True``.
    rep : int
    include_ops : bool
        Also make per-host ``ops`` tracks for timed firings holding no resource.
    min_duration : float
        Resource-less firings shorter than this (seconds) are left out (zero-duration
        transitions by default).

    Returns
    -------
    list of Track
        Sorted by host (workers first) then declaration order.
    """
    _need_trace(result)
    if not is_int(rep) or not 0 <= rep < result.replications:
        raise SgdnetError(f"rep={rep!r} is out of range 0..{result.replications - 1}")
    tr = result.trace[result.trace["rep"] == rep]
    caps = list(getattr(result, "resource_capacity", [1] * len(result.resource_names)))
    res_tracks: list[Track] = []
    for j, name in enumerate(result.resource_names):
        tags = result.resource_tags[j]
        host = str(tags.get("host", "shared"))
        label = short_name(name)
        res_tracks.append(Track(host, label, name, int(caps[j]), str(tags.get("discipline", "")),
                                str(tags.get("kind", ""))))
    ridx = {n: j for j, n in enumerate(result.resource_names)}
    ops: dict[str, Track] = {}
    t_res = [tuple(ridx[r] for r in rs if r in ridx) for rs in result.transition_resources]
    for t, s, e in zip(tr["transition"].tolist(), tr["start"].tolist(), tr["end"].tolist()):
        rs = t_res[t]
        if rs:
            for j in rs:
                res_tracks[j].events.append((s, e, t))
        elif include_ops and e - s > min_duration:
            tags = result.transition_tags[t]
            host = lane_of(tags) or "net"
            if host not in ops:
                ops[host] = Track(host, "ops", None, 0, "", "ops")
            ops[host].events.append((s, e, t))
    tracks = res_tracks + list(ops.values())
    order = {id(tk): i for i, tk in enumerate(tracks)}
    tracks.sort(key=lambda tk: (host_key(tk.host), tk.resource is None, order[id(tk)]))
    return tracks


def busy_from_intervals(events, t0: float, t1: float, capacity: int) -> float:
    """Busy server-seconds inside ``[t0, t1]`` of a resource held during ``events``
    (``(start, end, ...)`` tuples): the integral of ``min(holders, capacity)``.

    For ``fifo`` / ``priority`` resources holders never exceed capacity, so this is the sum of
    the clipped durations; for ``ps`` resources concurrent flows share the servers.
    """
    pts = []
    for ev in events:
        s, e = max(ev[0], t0), min(ev[1], t1)
        if e > s:
            pts.append((s, 1))
            pts.append((e, -1))
    pts.sort()
    busy, n, last = 0.0, 0, t0
    for x, d in pts:
        busy += min(n, capacity) * (x - last)
        n += d
        last = x
    return busy
