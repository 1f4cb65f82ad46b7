"""The Net builder: places, resources, transitions, gates and modulators.

A :class:`Net` is a plain description (names, arcs, distributions, tags). It does not simulate;
:func:`sgdnet.net.compile_net` flattens it into arrays for the engine. Names are unique per kind
and every builder call returns its node, so arcs may be given by node or by name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dists import Distribution, as_distribution
from ..errors import NetError
from ..limits import limit
from ..units import bandwidth as _bw
from ..units import nbytes as _nb

_TABLES = ("places", "resources", "transitions", "gates", "modulators")

__all__ = ["Net", "Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS"]

DISCIPLINES = ("fifo", "priority", "ps", "flow")
GATE_KINDS = ("lag", "dynamic_lag")
MODULATOR_KINDS = ("iid", "markov")

# ------------------------------------------------------------------ edit tracking
# A Net caches its validation and its structural key (see Net.edit_stamp). Builder methods bump
# the net's version; an in-place edit anywhere else -- an attribute of an element that is in a
# net, an entry of its ``inputs``/``outputs``/``inhibitors``/``tags`` dicts, an entry of one of
# the net's tables -- bumps this process-wide edit counter, which invalidates every net's caches
# (conservative: an edit is rare after building, and recomputing is always correct).
_EDITS = [0]


def _edited() -> None:
    _EDITS[0] += 1


class _TrackedDict(dict):
    """A dict that reports in-place edits (see ``_EDITS``); reads are plain dict reads."""

    __slots__ = ()

    def __setitem__(self, k, v):
        dict.__setitem__(self, k, v)
        _edited()

    def __delitem__(self, k):
        dict.__delitem__(self, k)
        _edited()

    def __ior__(self, other):
        dict.update(self, other)
        _edited()
        return self

    def _wrap(name):  # noqa: N805 - builds the mutating methods below
        f = getattr(dict, name)

        def method(self, *a, **k):
            _edited()
            return f(self, *a, **k)

        method.__name__ = name
        return method

    update = _wrap("update")
    pop = _wrap("pop")
    popitem = _wrap("popitem")
    clear = _wrap("clear")
    setdefault = _wrap("setdefault")
    del _wrap


def _tracked_setattr(self, name, value):
    if type(value) is dict:  # keep the element's dicts tracked when one is replaced
        value = _TrackedDict(value)
    object.__setattr__(self, name, value)
    _edited()


def _new(cls, **fields):
    """An element of the tracked public class ``cls`` built from all its ``fields`` at once (the
    builder's path: no tracked assignment per field, which would cost more than the rest)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


@dataclass(eq=False)
class _PlaceFields:
    """A place: ``name`` and initial ``tokens``; ``tags`` for grouping (e.g. ``worker``)."""

    name: str
    tokens: int = 0
    tags: dict[str, Any] = field(default_factory=dict)


class Place(_PlaceFields):
    __doc__ = _PlaceFields.__doc__
    __setattr__ = _tracked_setattr



@dataclass(eq=False)
class _ResourceFields:
    """A server pool held by transitions while they run.

    ``discipline``: ``fifo`` (by request time; ties by priority then declaration order),
    ``priority`` (lowest transition priority first, FIFO among equals), ``ps`` (processor
    sharing: all holders progress at rate ``min(1, capacity / n_holders)``; never queues) or
    ``flow`` (a network link, made by :meth:`Net.link`: its holders are flows whose rates, in
    bytes/s, are the max-min fair allocation over every link of their paths; never queues).
    ``tags`` such as ``host="worker3"``, ``kind="nic_up"`` drive lanes, traces and reports.

    Links only: ``bandwidth`` (bytes/s), ``latency`` (seconds, added once per transfer that
    crosses the link) and ``efficiency`` (goodput factors by number of concurrent flows:
    ``efficiency[n - 1]`` with ``n`` flows, the last value for more; empty means 1).
    """

    name: str
    capacity: int = 1
    discipline: str = "fifo"
    tags: dict[str, Any] = field(default_factory=dict)
    bandwidth: float | None = None
    latency: float = 0.0
    efficiency: tuple[float, ...] = ()

    def effective_bandwidth(self, n: int) -> float:
        """A link's capacity (bytes/s) while ``n >= 1`` flows cross it."""
        e = self.efficiency[min(n, len(self.efficiency)) - 1] if self.efficiency else 1.0
        return float(self.bandwidth) * e


class Resource(_ResourceFields):
    __doc__ = _ResourceFields.__doc__
    __setattr__ = _tracked_setattr



@dataclass(eq=False)
class _TransitionFields:
    """An elementary operation (see DESIGN.md, *Firing*).

    Attributes
    ----------
    inputs, outputs : dict place name -> weight (>= 1)
    inhibitors : dict place name -> threshold; enabled only while tokens < threshold
    resources : tuple of resource names, acquired all at once
    servers : int >= 1 or ``math.inf`` (concurrent firings of this transition)
    priority : int; lower is served first by ``priority`` resources and breaks ``fifo`` ties
    tags : dict, e.g. ``worker=3, kind="compute", layer=17, step=True``
    modulator : name of a modulator whose current value multiplies sampled durations
    gate : ``(gate name, member index)``: the transition is guarded by that gate member
    flow_cap : a transfer's rate cap, bytes/s (``math.inf``: none); see :meth:`Net.transfer`
    weight : float > 0 or None; a *random switch* (GSPN) weight. When the scan's next start is a
        weighted transition, it is drawn among the weighted transitions that could start now (their
        tokens and resources are there) with the same priority class and priority, with
        probability proportional to ``weight`` (see :meth:`Net.transition`). ``None`` (the
        default): no draw, ties go by request time, then priority and declaration order.
    """

    name: str
    duration: Distribution
    inputs: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    inhibitors: dict[str, int] = field(default_factory=dict)
    resources: tuple[str, ...] = ()
    servers: float = 1
    priority: int = 0
    tags: dict[str, Any] = field(default_factory=dict)
    modulator: str | None = None
    gate: tuple[str, int] | None = None
    flow_cap: float = math.inf
    weight: float | None = None

    @property
    def is_step(self) -> bool:
        """True when this transition's firings count as steps."""
        return bool(self.tags.get("step", False))


class Transition(_TransitionFields):
    __doc__ = _TransitionFields.__doc__
    __setattr__ = _tracked_setattr



@dataclass
class _GateFields:
    """A built-in guard evaluated inside the kernel.

    ``counters[i]`` is the transition whose completions count member ``i``'s progress (e.g.
    worker i's gradient push). A transition guarded by ``(gate, i)`` may start only when:

    - ``lag``: ``count[i] - min(count) <= s`` (stale synchronous parallel);
    - ``dynamic_lag``: DSSP's server (Zhao et al., 2019). A completion of ``counters[p]`` is a
      push of member p arriving at the server. With ``count`` incremented: if p has allowance
      left it uses one and is released; else if ``count[p] - min(count) <= s_lower`` it is
      released; else if p is (one of) the fastest (``count[p] == max(count)``), the controller
      simulates the next pushes of p, ``t_f + r * I_f`` for ``r = 0..r_max``, and of the
      slowest member s (lowest index among the minimum counts), ``t_s + k * I_s`` for
      ``k = 1..r_max`` (``t`` the last push times, ``I`` the last intervals between pushes;
      missing times count as 0), picks ``r*``, the smallest ``r`` whose least gap
      ``min_k |t_f + r I_f - t_s - k I_s|`` is the least, releases p and leaves it ``r*``
      allowance (``r* + 1`` releases in all). Otherwise nothing. A guarded transition of p may
      start when p is released or ``count[p] - min(count) <= s_lower``, and, with ``s_upper``
      set, only while ``count[p] - min(count) <= s_upper`` (a hard cap); a start consumes
      the release. Nothing else bounds the lead: a fastest member beyond ``s_lower`` is
      released at each of its pushes.
    """

    name: str
    kind: str
    counters: tuple[str, ...]
    s: int = 0
    s_lower: int = 0
    r_max: int = 0
    s_upper: int | None = None


class Gate(_GateFields):
    __doc__ = _GateFields.__doc__
    __setattr__ = _tracked_setattr



@dataclass
class _ModulatorFields:
    """A random multiplier of durations shared by the transitions that name it.

    - ``iid``: a value drawn from ``multiplier`` each time a transition in ``resample_on``
      starts (that transition, if it names the modulator, already sees the new value); the initial
      value is drawn at time 0.
    - ``markov``: a two-state continuous-time chain, value 1 in the fast state and ``slow_factor``
      in the slow state, exponential sojourns with means ``mean_fast`` and ``mean_slow`` seconds;
      the initial state is drawn from the stationary law. A transition sees the state at its start.
    """

    name: str
    kind: str
    multiplier: Distribution | None = None
    resample_on: tuple[str, ...] = ()
    slow_factor: float = 1.0
    mean_fast: float = 1.0
    mean_slow: float = 1.0


class Modulator(_ModulatorFields):
    __doc__ = _ModulatorFields.__doc__
    __setattr__ = _tracked_setattr



def _name_of(x, what: str) -> str:
    if isinstance(x, str):
        return x
    n = getattr(x, "name", None)
    if isinstance(n, str):
        return n
    raise NetError(f"{what} {x!r} is neither a name nor a net node")


def _arcs(arcs, owner: str, kind: str) -> dict[str, int]:
    """``arcs`` (a place, places, or {place: weight}) as {place name: weight}; errors name
    ``owner`` (e.g. ``"transition 'x'"``) and the ``kind`` of arcs."""
    if arcs is None:
        return {}
    if type(arcs) is dict:  # the builders' common case: {place name: weight}, taken as is
        for k in arcs:
            if type(k) is not str:
                break
        else:
            return arcs
    what = f"{owner} {kind}"
    if isinstance(arcs, (str, Place)):
        arcs = [arcs]
    if not isinstance(arcs, (Mapping, Iterable)):
        raise NetError(f"{what}={arcs!r} must be a place, a list of places or a dict place -> "
                       "weight, e.g. {'ready': 1}")
    out: dict[str, int] = {}
    items = arcs.items() if isinstance(arcs, Mapping) else ((a, 1) for a in arcs)
    for k, w in items:
        name = _name_of(k, what)
        if name in out:
            raise NetError(f"{what} lists place {name!r} twice; give one arc with the summed weight")
        out[name] = w
    return out


def _names(xs, single: type, what: str) -> list[str]:
    """Names of ``xs`` (one element of type ``single``, or an iterable of names or nodes)."""
    if isinstance(xs, (str, single)):
        xs = [xs]
    if type(xs) in (list, tuple):
        for x in xs:
            if type(x) is not str:
                break
        else:
            return list(xs)
    return [_name_of(x, what) for x in xs]


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
        return {k: v for k, v in self.__dict__.items() if k not in ("_valid_at", "_key_cache")}

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
        p = _new(Place, name=name, tokens=tokens, tags=_TrackedDict(tags))
        self._add(self.places, name, p)
        return p

    def resource(self, name: str, capacity: int = 1, discipline: str = "fifo", **tags) -> Resource:
        """Add a resource (server pool) of ``capacity`` servers and a queue ``discipline``."""
        self._fresh(name, self.resources, "resource")
        r = _new(Resource, name=name, capacity=capacity, discipline=discipline, tags=_TrackedDict(tags),
                 bandwidth=None, latency=0.0, efficiency=())
        self._add(self.resources, name, r)
        return r

    def link(self, name: str, bandwidth, latency=0.0, efficiency=None, **tags) -> Resource:
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
        r = _new(Resource, name=name, capacity=1, discipline="flow", tags=_TrackedDict(tags), bandwidth=bw,
                 latency=lat, efficiency=eff)
        self._add(self.resources, name, r)
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
            cname = f"conn:{connection}"
            if cname not in self.resources:
                self.resource(cname, 1, "fifo", **{"kind": "connection", "connection": str(connection),
                                                  **(connection_tags or {})})
            extra.append(cname)
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
    ) -> Transition:
        """Add a transition; see :class:`Transition` for the arguments.

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
            tags=_TrackedDict(tags or {}),
            modulator=None if modulator is None else _name_of(modulator, "modulator"),
            gate=g,
            flow_cap=math.inf,
            weight=weight,
        )
        self._add(self.transitions, name, t)
        return t

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
        """Every structural problem of the net (empty when valid)."""
        P: list[str] = []
        max_tokens = limit("max_tokens")
        if not self.transitions:
            P.append("the net has no transitions; add at least one with net.transition(...)")
        for p in self.places.values():
            if isinstance(p.tokens, bool) or not isinstance(p.tokens, int) or p.tokens < 0:
                P.append(f"place {p.name!r}: tokens={p.tokens!r} must be an integer >= 0")
            elif p.tokens > max_tokens:
                P.append(f"place {p.name!r}: tokens={p.tokens!r} exceeds the limit {max_tokens:,} "
                         "(max_tokens: markings are 64-bit integers; raise it with "
                         "SGDNET_MAX_TOKENS=N)")
        used_res: set[str] = set()
        for r in self.resources.values():
            if isinstance(r.capacity, bool) or not isinstance(r.capacity, int) or r.capacity < 1:
                P.append(f"resource {r.name!r}: capacity={r.capacity!r} must be an integer >= 1")
            if r.discipline not in DISCIPLINES:
                P.append(f"resource {r.name!r}: discipline={r.discipline!r} is unknown; use one of {list(DISCIPLINES)}")
            if r.discipline == "flow":
                bw = r.bandwidth
                if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not (math.isfinite(bw) and bw > 0):
                    P.append(f"link {r.name!r}: bandwidth={bw!r} must be a finite number of bytes/s > 0")
                if isinstance(r.latency, bool) or not isinstance(r.latency, (int, float)) or not (
                        math.isfinite(r.latency) and r.latency >= 0):
                    P.append(f"link {r.name!r}: latency={r.latency!r} must be a finite number of seconds >= 0")
                if r.capacity != 1:
                    P.append(f"link {r.name!r}: capacity={r.capacity!r}; a link's capacity is its bandwidth, leave capacity at 1")
                for e in r.efficiency:
                    if not (isinstance(e, (int, float)) and 0 < e <= 1):
                        P.append(f"link {r.name!r}: efficiency {e!r} must be in (0, 1]")
                        break
        for t in self.transitions.values():
            where = f"transition {t.name!r}"
            for kind, arcs in (("input", t.inputs), ("output", t.outputs), ("inhibitor", t.inhibitors)):
                for p, w in arcs.items():
                    if p not in self.places:
                        P.append(f"{where}: {kind} place {p!r} does not exist; declare it with net.place({p!r})")
                    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
                        what = "threshold" if kind == "inhibitor" else "weight"
                        P.append(f"{where}: {kind} arc {p!r} has {what} {w!r}; it must be an integer >= 1")
                    elif w > max_tokens:
                        P.append(f"{where}: {kind} arc {p!r} has weight {w!r}, beyond the limit "
                                 f"{max_tokens:,} (max_tokens; raise it with SGDNET_MAX_TOKENS=N)")
            if not t.inputs and not t.inhibitors:
                P.append(f"{where} has no input places, so it would fire forever; give it an input or an inhibitor arc")
            for r in t.resources:
                if r not in self.resources:
                    P.append(f"{where}: resource {r!r} does not exist; declare it with net.resource({r!r})")
                used_res.add(r)
            if len(set(t.resources)) != len(t.resources):
                P.append(f"{where}: resources {list(t.resources)} list one twice")
            discs = {self.resources[r].discipline for r in t.resources if r in self.resources}
            if "flow" in discs and "ps" in discs:
                P.append(f"{where} holds both links and ps resources; a transfer's rate comes from its links only")
            if not (isinstance(t.flow_cap, (int, float)) and not isinstance(t.flow_cap, bool) and t.flow_cap > 0
                    and not math.isnan(t.flow_cap)):
                P.append(f"{where}: flow_cap={t.flow_cap!r} must be a number of bytes/s > 0 (or math.inf)")
            elif t.flow_cap != math.inf and "flow" not in discs:
                P.append(f"{where}: flow_cap={t.flow_cap!r} is set but it holds no link; only transfers have a rate cap")
            s = t.servers
            if not (s == math.inf or (isinstance(s, int) and not isinstance(s, bool) and s >= 1)):
                P.append(f"{where}: servers={s!r} must be an integer >= 1 or math.inf")
            elif s != math.inf and s > max_tokens:
                P.append(f"{where}: servers={s!r} is beyond the limit {max_tokens:,} (max_tokens); "
                         "use math.inf for unbounded servers")
            if isinstance(t.priority, bool) or not isinstance(t.priority, int):
                P.append(f"{where}: priority={t.priority!r} must be an integer")
            elif not -2**62 <= t.priority < 2**62:
                P.append(f"{where}: priority={t.priority!r} must be within +-2**62 (kernel integers)")
            w = t.weight
            if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float))
                                  or not (math.isfinite(w) and w > 0)):
                P.append(f"{where}: weight={w!r} must be a finite number > 0 (or None: no random switch)")
            if t.modulator is not None and t.modulator not in self.modulators:
                P.append(f"{where}: modulator {t.modulator!r} does not exist; known: {sorted(self.modulators)}")
            if t.gate is not None:
                gname, member = t.gate
                g = self.gates.get(gname)
                if g is None:
                    P.append(f"{where}: gate {gname!r} does not exist; known: {sorted(self.gates)}")
                elif not (isinstance(member, int) and 0 <= member < len(g.counters)):
                    P.append(f"{where}: gate member {member!r} is out of range 0..{len(g.counters) - 1} of gate {gname!r}")
        for r in self.resources:
            if r not in used_res and self.resources[r].discipline != "flow":  # an idle link is fine
                P.append(f"resource {r!r} is held by no transition; remove it or add it to a transition's resources")
        for g in self.gates.values():
            where = f"gate {g.name!r}"
            if g.kind not in GATE_KINDS:
                P.append(f"{where}: kind={g.kind!r} is unknown; use one of {list(GATE_KINDS)}")
            if len(g.counters) < 1:
                P.append(f"{where} has no counters; give one counter transition per member")
            for c in g.counters:
                if c not in self.transitions:
                    P.append(f"{where}: counter transition {c!r} does not exist")
            for k in ("s", "s_lower", "r_max"):
                v = getattr(g, k)
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    P.append(f"{where}: {k}={v!r} must be an integer >= 0")
            su = g.s_upper
            if su is not None and (isinstance(su, bool) or not isinstance(su, int) or not
                                   (isinstance(g.s_lower, int) and su >= g.s_lower)):
                P.append(f"{where}: s_upper={su!r} must be None (no cap) or an integer >= "
                         f"s_lower={g.s_lower!r}")
            if not any(t.gate is not None and t.gate[0] == g.name for t in self.transitions.values()):
                P.append(f"{where} guards no transition; pass gate=({g.name!r}, i) to the guarded transitions")
        for m in self.modulators.values():
            where = f"modulator {m.name!r}"
            if m.kind == "iid":
                for t in m.resample_on:
                    if t not in self.transitions:
                        P.append(f"{where}: resample_on transition {t!r} does not exist")
                if not m.resample_on:
                    P.append(f"{where}: resample_on is empty, so its value would never change; use a constant factor instead")
            elif m.kind == "markov":
                if not (isinstance(m.slow_factor, (int, float)) and math.isfinite(m.slow_factor) and m.slow_factor > 0):
                    P.append(f"{where}: slow_factor={m.slow_factor!r} must be a finite number > 0")
                for k in ("mean_fast", "mean_slow"):
                    if not getattr(m, k) > 0:
                        P.append(f"{where}: {k}={getattr(m, k)!r} must be > 0 seconds")
            else:
                P.append(f"{where}: kind={m.kind!r} is unknown; use one of {list(MODULATOR_KINDS)}")
        return P

    def validate(self) -> Net:
        """Raise :class:`~sgdnet.NetError` listing every structural problem; return ``self`` if valid."""
        stamp = self.edit_stamp()
        if self.__dict__.get("_valid_at") == stamp:  # valid and unchanged since
            return self
        P = self.problems()
        if P:
            raise NetError(P, self.name)
        self.__dict__["_valid_at"] = stamp
        return self

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
