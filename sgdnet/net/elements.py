"""The net's elements: places, resources, transitions, gates and modulators (dataclasses
whose in-place edits are tracked), the kinds they may take, and the helpers that turn
nodes-or-names into names. :class:`~sgdnet.net.builder.Net` creates them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dists import Distribution
from ..errors import NetError

__all__ = ["Place", "Resource", "Transition", "Gate", "Modulator", "DISCIPLINES", "GATE_KINDS",
           "MODULATOR_KINDS", "new_place", "new_transition"]

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
    builder's path: no tracked assignment per field, which would cost more than the rest; the
    keyword dict becomes the element's ``__dict__``, not copied into a second one)."""
    obj = _object_new(cls)
    _set_dict(obj, "__dict__", fields)
    return obj


_object_new = object.__new__
_set_dict = object.__setattr__


def new_place(name: str, tokens: int, tags: dict) -> Place:
    """A place as :meth:`Net.place` makes it (``tags`` taken over), for :meth:`Net.insert`."""
    obj = _object_new(Place)
    _set_dict(obj, "__dict__", {"name": name, "tokens": tokens, "tags": _TrackedDict(tags)})
    return obj


def new_transition(name: str, duration: Distribution, inputs: dict[str, int],
                   outputs: dict[str, int], resources: tuple[str, ...], tags: dict, *,
                   servers: float = 1, priority: int = 0) -> Transition:
    """A transition as :meth:`Net.transition` makes it from a distribution, ``{place name:
    weight}`` arcs, resource names and tags (all taken over; ``servers`` and ``priority`` as
    given, no inhibitors, modulator, gate, cap or weight), for :meth:`Net.insert`."""
    obj = _object_new(Transition)  # _new's work with a dict literal: ~20 % less per transition
    _set_dict(obj, "__dict__", {
        "name": name, "duration": duration, "inputs": _TrackedDict(inputs),
        "outputs": _TrackedDict(outputs), "inhibitors": _TrackedDict(), "resources": resources,
        "servers": servers, "priority": priority, "tags": _TrackedDict(tags), "modulator": None,
        "gate": None, "flow_cap": math.inf, "weight": None, "backlog": None})
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



#: A token bucket's default peak rate as a multiple of its link's sustained bandwidth: the burst
#: leaves (almost) at once, as a shaper on a far faster device lets it (``tc``'s ``tbf`` without a
#: ``peakrate``, on a veth or a 10-100x faster NIC).
PEAK_FACTOR = 1000.0


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
    ``efficiency[n - 1]`` with ``n`` flows, the last value for more; empty means 1), and a
    token bucket (a shaper such as Linux's ``tbf``): ``burst`` bytes of tokens (0: none) that
    fill at the sustained rate while the link carries less, and while it holds any the link
    runs at ``peak`` bytes/s (``None``: :data:`PEAK_FACTOR` times ``bandwidth``).
    ``ack_path`` (:meth:`Net.ack_path`): ``(link, caps)``, the link this one's flows are
    acknowledged through and their rate cap while it carries ``n >= 1`` flows, ``caps[n - 1]``
    bytes/s (the last value for more); None: no such cap.
    """

    name: str
    capacity: int = 1
    discipline: str = "fifo"
    tags: dict[str, Any] = field(default_factory=dict)
    bandwidth: float | None = None
    latency: float = 0.0
    efficiency: tuple[float, ...] = ()
    burst: float = 0.0
    peak: float | None = None
    ack_path: tuple[str, tuple[float, ...]] | None = None

    def peak_rate(self) -> float:
        """A link's rate (bytes/s) while its token bucket holds tokens (``peak``, or
        :data:`PEAK_FACTOR` times ``bandwidth`` when it is None)."""
        return float(self.peak) if self.peak is not None else PEAK_FACTOR * float(self.bandwidth)

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
    backlog : ``(link name, bytes)`` or None; a *join* stage: each firing also waits the bytes
        the transfers on that link have queued there when it starts, at the link's bandwidth:
        each keeps what it has fallen behind its pace (the rate it would have alone), at most
        ``bytes`` and no more than it has left (:mod:`sgdnet.engine.kernel.joins`). Put before
        a transfer onto ``link``, it stands for the message's first byte queueing behind the
        other connections' backlog (a drop-tail queue, not fair sharing); see
        :meth:`Net.transition`.
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
    backlog: tuple[str, float] | None = None

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
