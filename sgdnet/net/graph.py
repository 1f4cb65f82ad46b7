"""networkx views of a :class:`~sgdnet.net.Net`.

- :func:`to_networkx`: the full bipartite view (places, transitions and resources as nodes), for
  drawing, inspection and graph algorithms.
- :func:`event_graph`: the transition-to-transition graph of a timed event graph (one arc per
  place, carrying the producer's duration as ``delay`` and the place's ``tokens``, plus the
  implicit self-loop that bounds concurrent firings), which :mod:`sgdnet.analysis.maxplus`
  analyses.

Node ids of :func:`to_networkx` are prefixed by kind (``"p:queue"``, ``"t:fwd0"``,
``"r:gpu0"``; see :func:`node_id`) because names are unique only per kind; every node also has
``name`` and ``kind`` attributes.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..errors import NotEventGraphError
from .builder import Net

__all__ = ["to_networkx", "event_graph", "event_graph_arcs", "node_id", "EventArc", "SERVERS_KEY"]

_PREFIX = {"place": "p:", "transition": "t:", "resource": "r:"}

#: first element of the key of the implicit self-loop arcs of :func:`event_graph`
SERVERS_KEY = "servers"


def node_id(kind: str, name: str) -> str:
    """Node id of a ``kind`` ("place", "transition" or "resource") named ``name`` in
    :func:`to_networkx`.

    Examples
    --------
    >>> node_id("place", "queue")
    'p:queue'
    """
    try:
        return _PREFIX[kind] + name
    except KeyError:
        raise ValueError(f"kind={kind!r} is unknown; use one of {list(_PREFIX)}") from None


def to_networkx(net: Net):
    """The bipartite graph of ``net`` (plus its resources).

    Parameters
    ----------
    net : Net
        Any net (it is not validated; dangling names become bare nodes of kind ``"missing"``).

    Returns
    -------
    networkx.MultiDiGraph
        Nodes (ids from :func:`node_id`), each with ``kind`` and ``name``:

        - ``kind="place"``: ``tokens``, ``tags``;
        - ``kind="transition"``: ``duration`` (repr of the distribution), ``mean`` (seconds),
          ``servers``, ``priority``, ``tags``, ``resources`` (list of names), ``modulator``,
          ``gate``, ``step`` (bool), ``switch_weight`` (the random-switch weight or None);
        - ``kind="resource"``: ``capacity``, ``discipline``, ``tags``.

        Arcs, keyed by their kind, each with ``kind`` and ``weight``: place -> transition
        ``"input"``; transition -> place ``"output"``; place -> transition ``"inhibitor"``
        (``weight`` = the threshold, also as ``threshold``); transition -> resource
        ``"holds"`` (``weight`` 1). Graph attributes: ``name``, ``gates`` and ``modulators``
        (lists of names), ``meta``.
    """
    import networkx as nx

    g = nx.MultiDiGraph(name=net.name, gates=list(net.gates), modulators=list(net.modulators),
                        meta=dict(net.meta))
    for p in net.places.values():
        g.add_node(node_id("place", p.name), kind="place", name=p.name, tokens=p.tokens,
                   tags=dict(p.tags))
    for r in net.resources.values():
        g.add_node(node_id("resource", r.name), kind="resource", name=r.name,
                   capacity=r.capacity, discipline=r.discipline, tags=dict(r.tags))
    for t in net.transitions.values():
        g.add_node(
            node_id("transition", t.name), kind="transition", name=t.name,
            duration=repr(t.duration), mean=float(t.duration.mean), servers=t.servers,
            priority=t.priority, tags=dict(t.tags), resources=list(t.resources),
            modulator=t.modulator, gate=t.gate, step=t.is_step, switch_weight=t.weight,
        )

    def ensure(kind: str, name: str) -> str:
        nid = node_id(kind, name)
        if nid not in g:
            g.add_node(nid, kind="missing", name=name)
        return nid

    for t in net.transitions.values():
        tid = node_id("transition", t.name)
        for p, w in t.inputs.items():
            g.add_edge(ensure("place", p), tid, key="input", kind="input", weight=w)
        for p, w in t.outputs.items():
            g.add_edge(tid, ensure("place", p), key="output", kind="output", weight=w)
        for p, w in t.inhibitors.items():
            g.add_edge(ensure("place", p), tid, key="inhibitor", kind="inhibitor", weight=w,
                       threshold=w)
        for r in t.resources:
            g.add_edge(tid, ensure("resource", r), key="holds", kind="holds", weight=1)
    return g


class EventArc(NamedTuple):
    """One arc of a timed event graph: ``src`` fires, ``delay`` seconds later a token is added
    to ``place`` (``None`` for the implicit servers self-loop), which ``dst`` consumes;
    ``tokens`` is the initial marking on the arc."""

    src: str
    dst: str
    delay: float
    tokens: int
    place: str | None


def _check_event_graph(net: Net) -> None:
    net.validate()
    bad = net.event_graph_violations()
    if bad:
        err = NotEventGraphError(
            f"net {net.name!r} is not a timed event graph: " + "; ".join(bad)
            + ". The exact max-plus analysis needs every place to have exactly one producer and "
            "one consumer, arc weights 1, and no resources, inhibitors, gates or modulators; "
            "simulate this net instead (sgdnet.simulate)"
        )
        err.problems = bad  # type: ignore[attr-defined]
        raise err


def event_graph_arcs(net: Net) -> list[EventArc]:
    """The arcs of the timed event graph of ``net``, in declaration order.

    One arc per place (producer -> consumer, ``delay`` = the producer's mean duration, holding
    semantics: a token is available ``delay`` after the producer starts), then for every
    transition with finite ``servers = k`` a self-loop with ``k`` tokens and its own duration
    (at most ``k`` concurrent firings). ``servers = inf`` adds no self-loop.

    Raises
    ------
    NetError
        If the net is structurally invalid.
    NotEventGraphError
        If it is not an event graph; the message names each offending place, arc,
        resource, inhibitor, gate or modulator.
    """
    _check_event_graph(net)
    prod: dict[str, str] = {}
    cons: dict[str, str] = {}
    for t in net.transitions.values():
        for p in t.outputs:
            prod[p] = t.name
        for p in t.inputs:
            cons[p] = t.name
    arcs = []
    for p in net.places.values():
        src = prod[p.name]
        arcs.append(EventArc(src, cons[p.name], float(net.transitions[src].duration.mean),
                             int(p.tokens), p.name))
    for t in net.transitions.values():
        if t.servers != math.inf:
            arcs.append(EventArc(t.name, t.name, float(t.duration.mean), int(t.servers), None))
    return arcs


def event_graph(net: Net):
    """The transition-level graph of a timed event graph.

    Parameters
    ----------
    net : Net
        A timed event graph (see :meth:`Net.is_event_graph`).

    Returns
    -------
    networkx.MultiDiGraph
        Nodes are transition names with ``duration`` (repr), ``mean`` (seconds), ``servers``,
        ``step``, ``tags``. One arc per place, keyed by the place name, with ``delay`` (the
        producer's mean duration, seconds), ``tokens`` (initial marking), ``place`` and
        ``kind="place"``; and, for transitions with finite ``servers = k``, a self-loop keyed
        ``("servers", name)`` with ``delay`` = its mean duration, ``tokens = k``,
        ``place=None``, ``kind="servers"``. The cycle time is the maximum over circuits of
        total delay / total tokens (:func:`sgdnet.analysis.cycle_time`).

    Raises
    ------
    NetError, NotEventGraphError
        As :func:`event_graph_arcs`.
    """
    import networkx as nx

    arcs = event_graph_arcs(net)
    g = nx.MultiDiGraph(name=net.name)
    for t in net.transitions.values():
        g.add_node(t.name, duration=repr(t.duration), mean=float(t.duration.mean),
                   servers=t.servers, step=t.is_step, tags=dict(t.tags))
    for a in arcs:
        key: Any = a.place if a.place is not None else (SERVERS_KEY, a.src)
        g.add_edge(a.src, a.dst, key=key, delay=a.delay, tokens=a.tokens, place=a.place,
                   kind="place" if a.place is not None else "servers")
    return g
