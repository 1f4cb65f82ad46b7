"""Seeing the model: net drawings, DOT, timelines, Chrome/Perfetto traces, study plots.

Nothing in sgdnet imports this package, and matplotlib is imported only inside the functions
that draw, so ``import sgdnet.viz`` is cheap and headless-safe (use the ``Agg`` backend)::

    import sgdnet.viz as viz
    ax = viz.draw_net(net)                       # places, transitions, resources, lanes
    print(viz.to_dot(net))                       # Graphviz text
    viz.timeline(result)                         # Gantt chart of a traced replication
    viz.to_chrome_trace(result, "trace.json")    # open in https://ui.perfetto.dev
    viz.plot_scaling({"sync-ps": points})        # throughput vs workers with CI bands

:func:`to_networkx` is :func:`sgdnet.net.graph.to_networkx`, re-exported.
"""

from __future__ import annotations

from .draw import draw_net, layout_lanes
from .style import KIND_COLORS, kind_color

__all__ = [
    "draw_net",
    "layout_lanes",
    "to_dot",
    "to_networkx",
    "timeline",
    "to_chrome_trace",
    "chrome_trace_events",
    "plot_scaling",
    "plot_distribution",
    "plot_utilization",
    "KIND_COLORS",
    "kind_color",
]


def __getattr__(name: str):
    # Lazy so that the modules written by other engineers are imported only when used.
    if name == "to_networkx":
        from ..net.graph import to_networkx

        return to_networkx
    if name == "to_dot":
        from .dot import to_dot

        return to_dot
    if name == "timeline":
        from .timeline import timeline

        return timeline
    if name in ("to_chrome_trace", "chrome_trace_events"):
        from . import chrome_trace

        return getattr(chrome_trace, name)
    if name in ("plot_scaling", "plot_distribution", "plot_utilization"):
        from . import plots

        return getattr(plots, name)
    raise AttributeError(f"module 'sgdnet.viz' has no attribute {name!r}")
