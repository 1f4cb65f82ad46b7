"""The Net builder: places, resources, transitions, gates and modulators.

A :class:`Net` is a plain description (names, arcs, distributions, tags). It does not simulate;
:func:`sgdnet.net.compile_net` flattens it into arrays for the engine. Names are unique per kind
and every builder call returns its node, so arcs may be given by node or by name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any

from ..dists import Distribution, as_distribution
from ..errors import NetError
from ..units import bandwidth as _bw
from ..units import nbytes as _nb
from .elements import (  # noqa: F401 - the element types and kinds are re-exported from here
    _EDITS,
    DISCIPLINES,
    GATE_KINDS,
    MODULATOR_KINDS,
    Gate,
    Modulator,
    Place,
    Resource,
    Transition,
    _arcs,
    _name_of,
    _names,
    _new,
    _TrackedDict,
    new_place,
    new_transition,
)
from .problems import net_problems, step_tag_problem

_TABLES = ("places", "resources", "transitions", "gates", "modulators")

__all__ = ["Net", "Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS"]


def _tags_of(tags: Any, name: Any) -> Mapping:
    """The tags of transition ``name``: a mapping with string keys whose ``step`` is a bool (a
    string such as ``'step'`` or ``'yes'`` would otherwise fail obscurely or count silently)."""
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise NetError(f"transition {name!r}: tags={tags!r:.80} must be a mapping such as "
                       "{'step': True, 'worker': 0}")
    bad = [k for k in tags if not isinstance(k, str)]
    if bad:
        raise NetError(f"transition {name!r}: tag name {bad[0]!r} must be a string "
                       "(e.g. 'step', 'worker', 'kind', 'layer')")
    problem = step_tag_problem(tags)
    if problem:
        raise NetError(f"transition {name!r}: {problem}")
    return tags


class Net:
    """A stochastic timed Petri net with queueing resources.

    Examples
    --------
    >>> from sgdnet import Net, Exponential
    >>> net = Net("mm1")
    >>> q = net.place("queue"); idle = net.place("idle", tokens=1)
    >>> cpu = net.resource("cpu")
    >>> _ = net.transition("arrive", Exponential(1.0), inputs={idle: 1}, outputs={q: 1, idle: 1})
    """

    def __init__(self, name: str = "net"):
        if not isinstance(name, str) or not name:
            raise NetError(f"net name {name!r} must be a non-empty string")
        self._version = 0
        self.name = name
        self.places: dict[str, Place] = _TrackedDict()
        self.resources: dict[str, Resource] = _TrackedDict()
        self.transitions: dict[str, Transition] = _TrackedDict()
        self.gates: dict[str, Gate] = _TrackedDict()
        self.modulators: dict[str, Modulator] = _TrackedDict()
        self.meta: dict[str, Any] = {}

    # ------------------------------------------------------------ edit stamp
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _TABLES and type(value) is dict:
            value = _TrackedDict(value)
        d = self.__dict__
        d[name] = value
        d["_version"] = d.get("_version", 0) + 1

    def _add(self, table: dict, name: str, node: Any) -> None:
        dict.__setitem__(table, name, node)
        self.__dict__["_version"] += 1

    def edit_stamp(self) -> tuple[int, int]:
        """A stamp that changes whenever the net may have changed.

        The net's validation and its structural key are cached against this stamp. Contract:
        every builder method bumps the net's version; assigning an attribute of the net, of an
        element in it (``net.transitions["t"].priority = 2``), or an entry of an element's
        ``inputs`` / ``outputs`` / ``inhibitors`` / ``tags`` or of one of the net's tables bumps
        a process-wide edit counter (any such edit invalidates every net's caches). Not seen:
        edits inside a mutable tag *value* (``tags["x"].append(...)``) or of a dict you kept a
        reference to before handing it over (the net keeps its own copy); after such an edit
        call :meth:`touch`. Distributions are immutable.
        """
        return self.__dict__["_version"], _EDITS[0]

    def touch(self) -> Net:
        """Invalidate the cached validation and structural key (see :meth:`edit_stamp`)."""
        self.__dict__["_version"] += 1
        return self

    def __getstate__(self) -> dict:
        # the caches are stamped with this process's edit counter: never carry them over
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_valid_at", "_key_cache", "_arcs_at")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    # ----------------------------------------------------------------- builders
    def _fresh(self, name, table: dict, kind: str) -> str:
        if not isinstance(name, str) or not name:
            raise NetError(f"{kind} name {name!r} must be a non-empty string", self.name)
        if name in table:
            raise NetError(f"{kind} name {name!r} is already used; names must be unique", self.name)
        return name

    def place(self, name: str, tokens: int = 0, **tags) -> Place:
        """Add a place with ``tokens`` initial tokens."""
        self._fresh(name, self.places, "place")
        p = new_place(name, tokens, tags)
        self._add(self.places, name, p)
        return p

    def resource(self, name: str, capacity: int = 1, discipline: str = "fifo", **tags) -> Resource:
        """Add a resource (server pool) of ``capacity`` servers and a queue ``discipline``."""
        self._fresh(name, self.resources, "resource")
        r = _new(Resource, name=name, capacity=capacity, discipline=discipline, tags=_TrackedDict(tags),
                 bandwidth=None, latency=0.0, efficiency=())
        self._add(self.resources, name, r)
        return r

    def link(self, name: str, bandwidth, latency=0.0, efficiency=None, *, burst=0.0, peak=None,
             **tags) -> Resource:
        """Add a network link: a ``flow`` resource whose holders share ``bandwidth`` max-min fairly.

        Parameters
        ----------
        name : str
            Unique resource name.
        bandwidth : float or str
            Capacity in bytes/s (``"10Gbps"``, ``"1.25GB/s"`` or a number of bytes/s), > 0.
        latency : float or str
            Seconds added once to every transfer whose path crosses the link (>= 0).
        efficiency : float, sequence of float or None
            Goodput factor in ``(0, 1]``: one value for any number of flows, or a sequence whose
            ``n-1``-th entry applies while ``n`` flows cross the link (the last one beyond; e.g.
            an incast curve measured by ``sgdnet calibrate``). ``None`` is 1.
        burst : float or str
            Depth of the link's token bucket, bytes (``"64KiB"``, ``"64kB"`` or a number; 0, the
            default: none). A shaper (Linux ``tbf``, a cloud NIC's burst credit) passes that many
            bytes at ``peak`` after an idle period: the bucket starts full, fills at the
            sustained rate (``bandwidth`` times ``efficiency``) while the flows through the
            link move less, drains at the excess while they move more, and while it holds tokens
            the link's capacity is ``peak`` (times ``efficiency``) instead of ``bandwidth``. One
            message of ``S`` bytes after an idle period then takes ``latency + S / peak`` when
            ``S <= burst * peak / (peak - bandwidth)``, else ``latency + burst / (peak -
            bandwidth) + (S - burst * peak / (peak - bandwidth)) / bandwidth``.
        peak : float or str or None
            The rate while the bucket holds tokens, bytes/s, above ``bandwidth``; ``None`` (the
            default) is :data:`~sgdnet.net.elements.PEAK_FACTOR` times ``bandwidth`` (the burst
            leaves almost at once).
        **tags
            Tags (``host``, ``kind``...), as for :meth:`resource`.

        Returns
        -------
        Resource
            The link (``discipline="flow"``).
        """
        from ..units import seconds as _s

        self._fresh(name, self.resources, "resource")
        bw = _bw(bandwidth, what=f"link {name!r} bandwidth")
        lat = _s(latency, what=f"link {name!r} latency")
        if efficiency is None:
            eff: tuple = ()
        elif isinstance(efficiency, (int, float)) and not isinstance(efficiency, bool):
            eff = (float(efficiency),)
        else:
            try:
                eff = tuple(float(e) for e in efficiency)
            except (TypeError, ValueError):
                raise NetError(f"link {name!r}: efficiency={efficiency!r} must be a number or a "
                               "sequence of numbers in (0, 1]", self.name) from None
        bu = _nb(burst, what=f"link {name!r} burst")
        pk = None if peak is None else _bw(peak, what=f"link {name!r} peak")
        if pk is not None and not pk > bw:
            raise NetError(f"link {name!r}: peak={peak!r} must be above the bandwidth "
                           f"({bw:.6g} B/s): the token bucket's rate while it holds tokens; "
                           "leave it None for the default (1000 x bandwidth)", self.name)
        r = _new(Resource, name=name, capacity=1, discipline="flow", tags=_TrackedDict(tags), bandwidth=bw,
                 latency=lat, efficiency=eff, burst=bu, peak=pk)
        self._add(self.resources, name, r)
        return r

    def ack_path(self, link: str, via: str, caps) -> Resource:
        """Cap the flows of ``link`` while the link their ACKs travel, ``via``, carries data.

        A TCP flow whose window is ``W`` bytes moves at most ``W / RTT``; when its ACKs queue
        behind other flows' data in the opposite direction's link (a parameter server's pushes
        in while its pulls go out: the pushes' ACKs leave behind the pulls in the PS's uplink),
        the RTT grows by that queue. While ``n >= 1`` flows cross ``via``, every flow of
        ``link`` is capped at ``caps[n - 1]`` bytes/s (the last value for more), besides its
        own cap; with none, no cap. The caps change (and the rates are re-allocated) whenever
        ``via``'s flow count does.

        Parameters
        ----------
        link, via : str
            Two different links of the net (:meth:`link`).
        caps : float or sequence of float
            Bytes/s, each > 0 (``inf`` allowed: no cap at that count).

        Returns
        -------
        Resource
            ``link``, with ``ack_path = (via, caps)``.
        """
        for n in (link, via):
            if n not in self.resources or self.resources[n].discipline != "flow":
                raise NetError(f"ack_path({link!r}, {via!r}): {n!r} is not a link of the net; "
                               "declare both with Net.link first", self.name)
        if link == via:
            raise NetError(f"ack_path({link!r}, {via!r}): a link cannot be its own ACK path",
                           self.name)
        import numbers

        try:
            vals = (caps,) if isinstance(caps, numbers.Real) else tuple(caps)
        except TypeError:
            vals = ()
        if (isinstance(caps, (str, bytes)) or not vals
                or any(isinstance(x, bool) or not isinstance(x, numbers.Real) or not x > 0
                       for x in vals)):
            raise NetError(f"ack_path({link!r}, {via!r}): caps={caps!r} must be a number or a "
                           "non-empty sequence of bytes/s > 0", self.name)
        r = self.resources[link]
        r.ack_path = (via, tuple(float(x) for x in vals))
        return r

    def transfer(
        self,
        name: str,
        nbytes,
        path: Iterable,
        *,
        inputs=None,
        outputs=None,
        link_outputs=None,
        connection: str | None = None,
        connection_tags: Mapping[str, Any] | None = None,
        cap=None,
        resources: Iterable | None = None,
        servers: float = 1,
        priority: int = 0,
        tags: Mapping[str, Any] | None = None,
        modulator=None,
    ) -> list[str]:
        """Add a transfer of ``nbytes`` over the links of ``path``; return its transition names.

        The transfer is a flow: while its bytes are on the wire its rate is its max-min fair share
        over every link of ``path`` among all active flows (at most ``cap`` bytes/s), recomputed
        whenever a flow starts or ends. Transfers with the same ``connection`` key go one at a
        time in request order, as messages of one TCP connection do; distinct connections share.
        When the path's latency (the sum of its links' latencies) is > 0, the data arrives that
        long after its last byte left: a second transition ``name + ".lat"`` (a pure delay)
        produces ``outputs``; the connection is free again as soon as the bytes are through.

        Parameters
        ----------
        name : str
            Name of the transfer transition.
        nbytes : float, str or Distribution
            Bytes to move (``"25MB"`` or a number), or a distribution of bytes (per-message noise
            multiplies the bytes' work, not the latency).
        path : sequence of links (names or :class:`Resource` of discipline ``flow``)
            The links crossed, e.g. ``[uplink_of_a, downlink_of_b]``.
        inputs, outputs : arcs as for :meth:`transition`
            ``outputs`` are produced when the data has arrived (after the latency).
        link_outputs : arcs, optional
            Produced as soon as the bytes are through (before the latency).
        connection : str, optional
            Connection key; a fifo resource ``"conn:" + key`` of one server is created on first
            use (tagged ``kind="connection"`` and ``connection_tags``) and held by the transfer.
            ``None``: the transfer orders with nothing.
        cap : float or str, optional
            Rate cap of this flow, bytes/s.
        resources : optional
            Further (queued) resources held while the bytes are on the wire.
        servers, priority, tags, modulator
            As for :meth:`transition`; ``tags`` default to ``kind="comm"``.

        Returns
        -------
        list of str
            ``[name]`` or ``[name, name + ".lat"]``.
        """
        links = _names(path, Resource, f"transfer {name!r} path")
        if not links:
            raise NetError(f"transfer {name!r}: path is empty; give the links it crosses", self.name)
        for ln in links:
            r = self.resources.get(ln)
            if r is None or r.discipline != "flow":
                raise NetError(f"transfer {name!r}: path element {ln!r} is not a link; declare it "
                               "with net.link(name, bandwidth)", self.name)
        work = nbytes if isinstance(nbytes, Distribution) else _nb(nbytes, what=f"transfer {name!r} nbytes")
        fcap = math.inf if cap is None else _bw(cap, what=f"transfer {name!r} cap")
        extra = [] if resources is None else _names(resources, Resource, f"transfer {name!r} resource")
        if connection is not None:
            extra.append(self.connection(connection, connection_tags))
        tg = {"kind": "comm", **(tags or {})}
        latency = sum(self.resources[ln].latency for ln in links)
        lout = _arcs(link_outputs, f"transfer {name!r}", "link_outputs")
        outs = _arcs(outputs, f"transfer {name!r}", "outputs")
        if latency > 0:
            wire = self.place(f"{name}.wire")
            t = self.transition(name, work, inputs=inputs, outputs={**lout, wire.name: 1},
                                resources=[*links, *extra], servers=servers, priority=priority,
                                tags={**tg, "stage": "link"}, modulator=modulator)
            t.flow_cap = fcap
            self.transition(f"{name}.lat", latency, inputs={wire.name: 1}, outputs=outs,
                            servers=math.inf, tags={**tg, "stage": "latency"})
            return [name, f"{name}.lat"]
        if set(lout) & set(outs):
            raise NetError(f"transfer {name!r}: a place is in both outputs and link_outputs", self.name)
        t = self.transition(name, work, inputs=inputs, outputs={**lout, **outs},
                            resources=[*links, *extra], servers=servers, priority=priority,
                            tags={**tg, "stage": "link"}, modulator=modulator)
        t.flow_cap = fcap
        return [name]

    def connection(self, key: str, tags: Mapping[str, Any] | None = None) -> str:
        """The connection resource ``"conn:" + key`` of :meth:`transfer` (a fifo resource of
        one server tagged ``kind="connection"``, ``connection=key`` and ``tags``), created on
        first use; returns its name."""
        cname = f"conn:{key}"
        if cname not in self.resources:
            self.resource(cname, 1, "fifo", **{"kind": "connection", "connection": str(key),
                                              **(tags or {})})
        return cname

    def transition(
        self,
        name: str,
        duration=0.0,
        inputs=None,
        outputs=None,
        inhibitors=None,
        resources: Iterable | None = None,
        servers: float = 1,
        priority: int = 0,
        tags: Mapping[str, Any] | None = None,
        modulator=None,
        gate=None,
        weight: float | None = None,
        backlog: tuple[Any, float] | None = None,
    ) -> Transition:
        """Add a transition; see :class:`Transition` for the arguments.

        ``backlog=(link, bytes)`` makes it a join stage: each firing lasts its duration plus
        the time the link (a resource of discipline ``flow``) needs to carry what its transfers
        have queued when the firing starts: each has queued what it has fallen behind its pace
        (the rate it would have alone), at most ``bytes`` (what one connection keeps queued at
        most, e.g. its standing queue) and no more than it has left
        (:mod:`sgdnet.engine.kernel.joins`).

        ``weight`` makes the transition a GSPN *random switch*. Transitions that could start at
        the same instant and compete -- for the tokens of a shared input place, or for a
        resource -- otherwise start in scan order (request time, then priority and declaration
        order); when the next one to start is weighted, it is instead drawn among the weighted
        transitions that could start now with its priority class and priority, with probability
        ``weight / sum(weights)`` (as a GSPN's enabled immediate transitions: one waiting for a
        busy resource is not in the draw, as it would lack the resource's token). Probabilistic
        routing is a place feeding zero-duration weighted transitions, one per destination (give
        them ``servers=math.inf`` so that simultaneous tokens are routed independently). A net
        with fewer than two weighted transitions draws no extra random numbers.
        """
        self._fresh(name, self.transitions, "transition")
        try:
            dist = as_distribution(duration)
        except Exception as e:  # DistributionError
            raise type(e)(f"transition {name!r}: {e}") from None
        owner = f"transition {name!r}"
        res = () if resources is None else tuple(_names(resources, Resource, f"{owner} resource"))
        g = None
        if gate is not None:
            if not (isinstance(gate, tuple) and len(gate) == 2):
                raise NetError(f"transition {name!r}: gate={gate!r} must be a (gate name, member index) pair", self.name)
            g = (_name_of(gate[0], "gate"), gate[1])
        t = _new(
            Transition,
            name=name,
            duration=dist,
            inputs=_TrackedDict(_arcs(inputs, owner, "inputs")),
            outputs=_TrackedDict(_arcs(outputs, owner, "outputs")),
            inhibitors=_TrackedDict(_arcs(inhibitors, owner, "inhibitors")),
            resources=res,
            servers=servers,
            priority=priority,
            tags=_TrackedDict(_tags_of(tags, name)),
            modulator=None if modulator is None else _name_of(modulator, "modulator"),
            gate=g,
            flow_cap=math.inf,
            weight=weight,
            backlog=None if backlog is None else _backlog(backlog, name, self.name),
        )
        self._add(self.transitions, name, t)
        return t

    def insert(self, places: list[Place], transitions: list[Transition]) -> bool:
        """Add prepared places and transitions at once (the builders' fast path).

        The elements come from :func:`~sgdnet.net.elements.new_place` /
        :func:`~sgdnet.net.elements.new_transition` (or are otherwise well formed: names and
        weights are not checked here; :meth:`validate` checks the net as a whole). Inserts
        nothing and returns False when a name is already used or repeated, so that the caller
        can go the checked way (:meth:`place`, :meth:`transition`), which reports it.
        """
        pt, tt = self.places, self.transitions
        pn = [p.name for p in places]
        tn = [t.name for t in transitions]
        if not set(map(type, chain(pn, tn))) <= {str}:
            return False
        sp, st = set(pn), set(tn)
        if (len(sp) != len(pn) or len(st) != len(tn) or "" in sp or "" in st
                or not pt.keys().isdisjoint(sp) or not tt.keys().isdisjoint(st)):
            return False
        dict.update(pt, zip(pn, places))
        dict.update(tt, zip(tn, transitions))
        self.__dict__["_version"] += 1
        return True

    def add_places(self, specs: Iterable[tuple[str, int, dict]]) -> list[str]:
        """Add places ``(name, tokens, tags)`` in order, as :meth:`place` would one by one
        (at once, :meth:`insert`; one by one through :meth:`place`, which reports a bad or
        taken name, when that refuses); return their names."""
        ps = [new_place(n, k, tg) for n, k, tg in specs]
        if not self.insert(ps, []):
            for p in ps:
                self.place(p.name, p.tokens, **p.tags)
        return [p.name for p in ps]

    def gate(self, name: str, kind: str, counters: Iterable, *, s: int = 0, s_lower: int = 0, r_max: int = 0,
             s_upper: int | None = None) -> Gate:
        """Add a ``lag`` (SSP, threshold ``s``) or ``dynamic_lag`` (DSSP, ``s_lower``, ``r_max``,
        optional hard cap ``s_upper``) gate.

        ``counters`` lists one transition per member; guard a transition of member ``i`` with
        ``transition(..., gate=(name, i))``.
        """
        self._fresh(name, self.gates, "gate")
        g = _new(Gate, name=name, kind=kind,
                 counters=tuple(_name_of(c, f"gate {name!r} counter") for c in counters),
                 s=s, s_lower=s_lower, r_max=r_max, s_upper=s_upper)
        self._add(self.gates, name, g)
        return g

    def modulator(self, name: str, multiplier, resample_on: Iterable) -> Modulator:
        """Add an ``iid`` modulator: ``multiplier`` redrawn whenever a ``resample_on`` transition starts."""
        self._fresh(name, self.modulators, "modulator")
        m = _new(Modulator, name=name, kind="iid", multiplier=as_distribution(multiplier),
                 resample_on=tuple(_name_of(t, f"modulator {name!r} resample_on") for t in resample_on),
                 slow_factor=1.0, mean_fast=1.0, mean_slow=1.0)
        self._add(self.modulators, name, m)
        return m

    def markov_modulator(self, name: str, slow_factor: float, mean_fast, mean_slow) -> Modulator:
        """Add a two-state (fast = 1, slow = ``slow_factor``) Markov modulator with mean sojourns in seconds."""
        from ..units import seconds

        self._fresh(name, self.modulators, "modulator")
        m = _new(Modulator, name=name, kind="markov", multiplier=None, resample_on=(),
                 slow_factor=slow_factor,
                 mean_fast=seconds(mean_fast, what=f"modulator {name!r} mean_fast"),
                 mean_slow=seconds(mean_slow, what=f"modulator {name!r} mean_slow"))
        self._add(self.modulators, name, m)
        return m

    # ---------------------------------------------------------------- queries
    def step_transitions(self) -> list[str]:
        """Names of transitions tagged ``step=True``."""
        return [t.name for t in self.transitions.values() if t.is_step]

    def tag_values(self, tag: str) -> list:
        """Distinct values of ``tag`` over transitions, in first-seen order."""
        seen: dict = {}
        for t in self.transitions.values():
            if tag in t.tags:
                seen.setdefault(t.tags[tag], None)
        return list(seen)

    def is_event_graph(self) -> bool:
        """True when every place has exactly one producer and one consumer, weights are 1, and
        there are no resources, inhibitors, gates or modulators."""
        return not self.event_graph_violations()

    def event_graph_violations(self) -> list[str]:
        """Reasons this net is not a timed event graph (empty list if it is one)."""
        out: list[str] = []
        prod: dict[str, list[str]] = {p: [] for p in self.places}
        cons: dict[str, list[str]] = {p: [] for p in self.places}
        for t in self.transitions.values():
            if t.resources:
                out.append(f"transition {t.name!r} holds resources {list(t.resources)}")
            if t.inhibitors:
                out.append(f"transition {t.name!r} has inhibitor arcs")
            if t.gate is not None:
                out.append(f"transition {t.name!r} is guarded by gate {t.gate[0]!r}")
            if t.modulator is not None:
                out.append(f"transition {t.name!r} uses modulator {t.modulator!r}")
            for p, w in t.inputs.items():
                cons.setdefault(p, []).append(t.name)
                if w != 1:
                    out.append(f"arc {p!r} -> {t.name!r} has weight {w}, not 1")
            for p, w in t.outputs.items():
                prod.setdefault(p, []).append(t.name)
                if w != 1:
                    out.append(f"arc {t.name!r} -> {p!r} has weight {w}, not 1")
        for p in self.places:
            if len(prod[p]) != 1 or len(cons[p]) != 1:
                out.append(f"place {p!r} has producers {prod[p]} and consumers {cons[p]} (needs exactly one each)")
        return out

    # ------------------------------------------------------------- validation
    def problems(self) -> list[str]:
        """Every structural problem of the net (empty when valid); see :mod:`sgdnet.net.problems`."""
        return net_problems(self)

    def validate(self) -> Net:
        """Raise :class:`~sgdnet.NetError` listing every structural problem; return ``self`` if valid."""
        stamp = self.edit_stamp()
        if self.__dict__.get("_valid_at") == stamp:  # valid and unchanged since
            return self
        arcs: list = []
        P = net_problems(self, arcs)
        if P:
            raise NetError(P, self.name)
        self.__dict__["_valid_at"] = stamp
        if len(arcs) == 4:  # the arcs' CSR arrays and the columns, for the compile of this net
            self.__dict__["_arcs_at"] = (stamp, tuple(arcs))
        return self

    def _take_arcs(self) -> tuple | None:
        """``(inputs CSR, outputs CSR, inhibitors CSR, transition columns)`` that :meth:`validate`
        kept (:func:`~.problems.net_problems`), if the net is unchanged since (handed over once:
        the net does not keep them)."""
        kept = self.__dict__.pop("_arcs_at", None)
        return kept[1] if kept is not None and kept[0] == self.edit_stamp() else None

    # ------------------------------------------------------------------ misc
    def copy(self, name: str | None = None) -> Net:
        """A deep copy (distributions are immutable and shared)."""
        import copy

        n = copy.deepcopy(self)
        if name:
            n.name = name
        return n

    def __repr__(self) -> str:
        return (
            f"Net({self.name!r}: {len(self.places)} places, {len(self.transitions)} transitions, "
            f"{len(self.resources)} resources, {len(self.gates)} gates, {len(self.modulators)} modulators)"
        )


def _backlog(backlog: Any, name: str, net: str) -> tuple[str, float]:
    """``backlog=(link, bytes)`` of :meth:`Net.transition` as ``(link name, bytes)``; the
    link itself is checked by the validation (it may be declared later)."""
    if not (isinstance(backlog, tuple) and len(backlog) == 2):
        raise NetError(f"transition {name!r}: backlog={backlog!r} must be a (link, bytes) pair, "
                       "e.g. ('ps.down', '64KB')", net)
    return (_name_of(backlog[0], "backlog link"),
            _nb(backlog[1], allow_zero=False, what=f"transition {name!r} backlog bytes"))
