"""One palette and one look for every sgdnet figure.

Colours are the Okabe–Ito colour-blind-safe set, assigned by operation *kind* so a compute bar
is the same blue in a net drawing, a timeline and a utilisation chart.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "KIND_COLORS", "RESOURCE_KIND_COLORS", "kind_color", "resource_color", "paper_rc", "time_unit", "lane_of",
    "host_key", "pack_slots", "short_name",
]

KIND_COLORS: dict[str, str] = {
    "compute": "#0072B2",  # blue
    "comm": "#E69F00",  # orange
    "update": "#009E73",  # green
    "sync": "#7F7F7F",  # grey
    "blocked": "#D9D9D9",  # light grey (idle, waiting)
    "other": "#CC79A7",  # purple
}

#: resource kind -> the operation kind it serves
RESOURCE_KIND_COLORS: dict[str, str] = {
    "gpu": KIND_COLORS["compute"],
    "cpu": KIND_COLORS["compute"],
    "nic_up": KIND_COLORS["comm"],
    "nic_down": KIND_COLORS["comm"],
    "link": KIND_COLORS["comm"],
    "ps_cpu": KIND_COLORS["update"],
}

#: the variant/extra colours used for several lines on one plot
LINE_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


def kind_color(kind: Any) -> str:
    """Colour of an operation kind (``compute``, ``comm``, ``update``, ``sync``, ``blocked``)."""
    return KIND_COLORS.get(str(kind), KIND_COLORS["other"])


def resource_color(tags: dict) -> str:
    """Colour of a resource from its ``kind`` tag (gpu blue, links orange, PS CPU green)."""
    return RESOURCE_KIND_COLORS.get(str(tags.get("kind", "")), KIND_COLORS["other"])


def paper_rc() -> dict[str, Any]:
    """matplotlib rc parameters for figures readable at paper column width."""
    return {
        "font.size": 8,
        "axes.titlesize": 9,
        "axes.labelsize": 8,
        "legend.fontsize": 7,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": False,
        "savefig.dpi": 200,
        "savefig.bbox": "tight",
        "figure.dpi": 100,
    }


def time_unit(span_s: float) -> tuple[str, float]:
    """A readable time unit for an axis spanning ``span_s`` seconds: (label, seconds per unit)."""
    if span_s < 2e-3:
        return "µs", 1e-6
    if span_s < 2.0:
        return "ms", 1e-3
    return "s", 1.0


def lane_of(tags: dict) -> str | None:
    """The lane (host) a worker-tagged node belongs to: ``worker{w}``, else ``None``."""
    w = tags.get("worker")
    if w is None or isinstance(w, bool):
        return None
    return f"worker{w}"


def host_key(host: str) -> tuple:
    """Sort key of hosts: workers by index first, then servers / links, then the rest."""
    import re

    m = re.fullmatch(r"([A-Za-z_]*?)(\d+)", host)
    if host in ("shared", "net"):
        return (3, 0, host)
    if m:
        return (0 if m.group(1) == "worker" else 1, int(m.group(2)), host)
    return (2, 0, host)


def pack_slots(intervals) -> list[int]:
    """Greedy interval partitioning: a slot index per ``(start, end)`` so that intervals in one
    slot never overlap (touching is allowed); uses as many slots as the maximum overlap."""
    import heapq

    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1]))
    slots = [0] * len(intervals)
    free: list[int] = []  # free slot ids (heap)
    busy: list[tuple[float, int]] = []  # (end, slot)
    n = 0
    for i in order:
        s, e = intervals[i]
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, n = n, n + 1
        slots[i] = k
        heapq.heappush(busy, (e, k))
    return slots


_HOST_PREFIX = None


def short_name(name: str) -> str:
    """A compact label: the host prefix (``w3.``, ``worker3/``, ``ps0.``) dropped, a layer part
    ``l<k>`` glued to the word before it, chunk ``c0`` dropped: ``w0.push.l2.c0.lat`` ->
    ``push2·lat``, ``w1/backward0`` -> ``backward0``, ``w0.gpu`` -> ``gpu``; a connection
    ``conn:worker0->ps0`` (drawn in its sender's lane) -> ``to ps0``."""
    import re

    if name.startswith("conn:") and "->" in name:
        return "to " + name.rsplit("->", 1)[1]
    global _HOST_PREFIX
    if _HOST_PREFIX is None:
        _HOST_PREFIX = re.compile(r"^(?:w|worker|ps|server|host|node)\d+[./:]")
    s = _HOST_PREFIX.sub("", name)
    parts = [x for x in re.split(r"[./:]", s) if x]
    out: list[str] = []
    for x in parts:
        m = re.fullmatch(r"l(\d+)", x)
        if m and out:
            out[-1] += m.group(1)
        elif x == "c0":
            continue
        else:
            out.append(x)
    return "·".join(out) if out else name
