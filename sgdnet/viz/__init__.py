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

# The submodules import matplotlib inside their functions only, so these imports are cheap.
# (A function named like its module, e.g. ``timeline``, is bound here after the module.)
from .chrome_trace import chrome_trace_events, to_chrome_trace
from .dot import to_dot
from .draw import draw_net, layout_lanes
from .pareto import plot_pareto
from .plots import plot_distribution, plot_scaling, plot_table, plot_utilization
from .style import KIND_COLORS, kind_color
from .timeline import timeline

__all__ = [
    "draw_net",
    "layout_lanes",
    "to_dot",
    "to_networkx",
    "timeline",
    "to_chrome_trace",
    "chrome_trace_events",
    "plot_scaling",
    "plot_table",
    "plot_distribution",
    "plot_utilization",
    "plot_pareto",
    "KIND_COLORS",
    "kind_color",
]


def __getattr__(name: str):
    # Lazy: the networkx view belongs to sgdnet.net.graph (analysis layer).
    if name == "to_networkx":
        from ..net.graph import to_networkx

        return to_networkx
    raise AttributeError(f"module 'sgdnet.viz' has no attribute {name!r}")
