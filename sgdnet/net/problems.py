"""Structural validation of a :class:`~sgdnet.net.builder.Net`: every problem, each named with
its fix (``Net.problems()`` / ``Net.validate()``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import chain, repeat
from typing import Any

import numpy as np

from ..limits import limit, limit_problem
from .elements import DISCIPLINES, GATE_KINDS, MODULATOR_KINDS

__all__ = ["net_problems"]


def net_problems(net: Any, arcs_out: list | None = None) -> list[str]:
    """Every structural problem of ``net`` (a :class:`~sgdnet.net.builder.Net`), empty when it
    is valid: what :meth:`Net.problems` returns.

    ``arcs_out``: when given and the transitions pass the bulk check, it receives the three
    ``(ptr, place index, weight)`` CSR arrays of the input, output and inhibitor arcs (place
    indices in the order of ``net.places``), the very arrays :class:`~.compiled.CompiledNet`
    builds, then the transitions' fields as columns (:data:`COLUMNS`): the check has read every
    transition and looked every arc's place up already, so :meth:`Net.validate` keeps them for
    the compile of the unchanged net (one pass over ~400 k scattered transitions and ~1.5 M
    arcs instead of two on a fine net of 1,024 workers)."""
    P: list[str] = []
    max_tokens = limit("max_tokens")
    if not net.transitions:
        P.append("the net has no transitions; add at least one with net.transition(...)")
    if not _tokens_ok(net.places.values(), max_tokens):
        _place_problems(net, P, max_tokens)
    used_res: set[str] = set()
    for r in net.resources.values():
        if isinstance(r.capacity, bool) or not isinstance(r.capacity, int) or r.capacity < 1:
            P.append(f"resource {r.name!r}: capacity={r.capacity!r} must be an integer >= 1")
        elif r.capacity > max_tokens:
            P.append(f"resource {r.name!r}: capacity={r.capacity!r} is beyond the limit "
                     f"{max_tokens:,} (max_tokens)")
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
            if r.ack_path is not None:
                P.extend(_ack_path_problem(r, net.resources))
            bu, pk = r.burst, r.peak
            if isinstance(bu, bool) or not isinstance(bu, (int, float)) or not (math.isfinite(bu) and bu >= 0):
                P.append(f"link {r.name!r}: burst={bu!r} must be a finite number of bytes >= 0 (0: no token bucket)")
            elif pk is not None and (isinstance(pk, bool) or not isinstance(pk, (int, float))
                                     or not (math.isfinite(pk) and isinstance(bw, (int, float)) and pk > bw)):
                P.append(f"link {r.name!r}: peak={pk!r} must be a finite number of bytes/s above the "
                         "bandwidth, or None (1000 x bandwidth)")
    T = list(net.transitions.values())
    got = _transitions_ok(net, T, max_tokens)
    if got and T:  # the resources from the columns the bulk check read
        csr, cols = got
        used_res.update(chain.from_iterable(set(cols[COLUMNS.index("resources")])))
        if arcs_out is not None:
            arcs_out.extend(csr)
            arcs_out.append(cols)
    elif not got:
        _transition_problems(net, T, P, used_res, max_tokens)
    for r in net.resources:
        if r not in used_res and net.resources[r].discipline != "flow":  # an idle link is fine
            P.append(f"resource {r!r} is held by no transition; remove it or add it to a transition's resources")
    for g in net.gates.values():
        where = f"gate {g.name!r}"
        if g.kind not in GATE_KINDS:
            P.append(f"{where}: kind={g.kind!r} is unknown; use one of {list(GATE_KINDS)}")
        if len(g.counters) < 1:
            P.append(f"{where} has no counters; give one counter transition per member")
        for c in g.counters:
            if c not in net.transitions:
                P.append(f"{where}: counter transition {c!r} does not exist")
        for k in ("s", "s_lower", "r_max", "s_upper"):
            v = getattr(g, k)
            if k == "s_upper" and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                P.append(f"{where}: {k}={v!r} must be an integer >= 0"
                         + (" or None (no cap)" if k == "s_upper" else ""))
            else:  # the lead histogram grows with the bounds, DSSP's search with r_max squared
                over = limit_problem(v, "max_rmax" if k == "r_max" else "max_staleness")
                if over is not None:
                    P.append(f"{where}: {k}={v!r} {over}")
        su = g.s_upper
        if (su is not None and isinstance(su, int) and isinstance(g.s_lower, int)
                and su < g.s_lower):
            P.append(f"{where}: s_upper={su!r} must be None (no cap) or an integer >= "
                     f"s_lower={g.s_lower!r}")
        if not any(t.gate is not None and t.gate[0] == g.name for t in net.transitions.values()):
            P.append(f"{where} guards no transition; pass gate=({g.name!r}, i) to the guarded transitions")
    for m in net.modulators.values():
        where = f"modulator {m.name!r}"
        if m.kind == "iid":
            for t in m.resample_on:
                if t not in net.transitions:
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


def _place_problems(net: Any, P: list[str], max_tokens: int) -> None:
    """Append the problems of ``net``'s places to ``P``."""
    for p in net.places.values():
        if isinstance(p.tokens, bool) or not isinstance(p.tokens, int) or p.tokens < 0:
            P.append(f"place {p.name!r}: tokens={p.tokens!r} must be an integer >= 0")
        elif p.tokens > max_tokens:
            P.append(f"place {p.name!r}: tokens={p.tokens!r} exceeds the limit {max_tokens:,} "
                     "(max_tokens: markings are 64-bit integers; raise it with "
                     "SGDNET_MAX_TOKENS=N)")


def _tokens_ok(places: Any, max_tokens: int) -> bool:
    """Whether every place's tokens are an ``int`` in ``0..max_tokens`` (in bulk)."""
    return _ints_in([p.tokens for p in places], 0, max_tokens)


def _ints_in(values: list, lo: int, hi: int) -> bool:
    """Whether every value is an ``int`` (not a bool) in ``lo..hi``."""
    return not values or (set(map(type, values)) == {int} and min(values) >= lo
                          and max(values) <= hi)


def step_tag_problem(tags: Any) -> str | None:
    """Why a transition's ``step`` tag is not a bool (``'yes'``, 1, a PNML string), or None."""
    v = tags.get("step", False)
    if isinstance(v, (bool, np.bool_)):
        return None
    return (f"tag step={v!r} must be True or False (a step is a completion of a transition "
            "tagged step=True)")


def _transitions_ok(net: Any, T: list, max_tokens: int) -> tuple[list, list] | None:
    """What :func:`_bulk_ok` returns when :func:`_transition_problems` would find nothing,
    checked in bulk (one read of every transition, then set and min / max operations): the fast
    path of a valid net. None may be wrong (an odd but valid value, e.g. a numpy integer
    weight), a result never is."""
    try:
        return _bulk_ok(net, T, max_tokens)
    except TypeError:  # an unhashable or otherwise odd value: the element by element checks
        return None


def arcs_csr(arcs: tuple, pidx: dict, weights: list | None = None,
             ptr: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(ptr, place, weight)`` of one kind of arc (``arcs[t]``: transition ``t``'s ``{place:
    weight}``), place indices from ``pidx``, built at C speed; None when an arc names a place
    not in ``pidx``. ``weights``: the arcs' weights in that order, when the caller has them;
    ``ptr``: the CSR's row pointers (:func:`arcs_ptr`), likewise.
    Shared by the bulk check and :class:`~.compiled.CompiledNet`."""
    if ptr is None:
        ptr = arcs_ptr(arcs)
    m = int(ptr[-1])
    place = np.fromiter(map(pidx.get, chain.from_iterable(arcs), repeat(-1, m)), dtype=np.int64,
                        count=m)
    if m and place.min() < 0:
        return None
    if weights is None:
        w = np.fromiter(chain.from_iterable(map(dict.values, arcs)), dtype=np.int64, count=m)
    else:
        w = np.array(weights, dtype=np.int64).reshape(m)
    return ptr, place, w


def arcs_ptr(arcs: tuple) -> np.ndarray:
    """The row pointers of :func:`arcs_csr`: ``ptr[t + 1] - ptr[t]`` arcs of transition ``t``."""
    n = len(arcs)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, arcs), dtype=np.int64, count=n), out=ptr[1:])
    return ptr


#: The transition fields :func:`_bulk_ok` reads, in this order: every field
#: :class:`~.compiled.CompiledNet` reads too, so that it takes these columns instead of reading
#: every transition again.
COLUMNS = ("name", "tags", "inputs", "outputs", "inhibitors", "resources", "servers", "priority",
           "modulator", "duration", "flow_cap", "gate", "weight", "backlog")


def transition_columns(T: list) -> list[tuple]:
    """The fields :data:`COLUMNS` of the transitions ``T``, one tuple per field, read in one pass
    (a large net's transitions are scattered over memory: each pass costs mostly cache misses).
    Spelled out rather than ``attrgetter(*COLUMNS)``, which measured 20 % slower;
    ``tests/test_validate_arcs.py`` checks the order against :data:`COLUMNS`."""
    return list(zip(*[(t.name, t.tags, t.inputs, t.outputs, t.inhibitors, t.resources,
                       t.servers, t.priority, t.modulator, t.duration, t.flow_cap, t.gate,
                       t.weight, t.backlog) for t in T]))


def _bulk_ok(net: Any, T: list, max_tokens: int) -> tuple[list, list] | None:
    """``(the arcs' CSR arrays (inputs, outputs, inhibitors), the transitions' fields as columns
    in the order of :data:`COLUMNS`)`` when every check passes, else None."""
    if not T:
        return [], []
    cols = transition_columns(T)
    (_, tags, ins, outs, inhs, res, servers, prios, mods, _, caps, gates, weights, backlogs) = cols
    if not {type(tg.get("step", False)) for tg in tags} <= {bool, np.bool_}:
        return None
    pidx = dict(zip(net.places, range(len(net.places))))
    csr = []
    for arcs in (ins, outs, inhs):
        ptr = arcs_ptr(arcs)
        if not ptr[-1]:  # no arcs of this kind (inhibitors, usually): nothing more to read
            csr.append((ptr, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
            continue
        values = list(chain.from_iterable(map(dict.values, arcs)))
        if not _ints_in(values, 1, max_tokens):
            return None
        c = arcs_csr(arcs, pidx, values, ptr)
        if c is None:
            return None
        csr.append(c)
    if ((np.diff(csr[0][0]) == 0) & (np.diff(csr[2][0]) == 0)).any():  # no input, no inhibitor
        return None
    resources = net.resources
    flow: dict[tuple, bool] = {}
    for rt in set(res):
        if not all(r in resources for r in rt) or len(set(rt)) != len(rt):
            return None
        discs = {resources[r].discipline for r in rt}
        if "flow" in discs and "ps" in discs:
            return None
        flow[rt] = "flow" in discs
    if not set(map(type, caps)) <= {float, int} or not all(c > 0 for c in caps):  # nan: not > 0
        return None
    if any(c != math.inf and not flow[r] for c, r in zip(caps, res)):
        return None
    finite = [s for s in servers if s != math.inf]
    if not _ints_in(finite, 1, max_tokens):
        return None
    if not _ints_in(list(prios), -2**62, 2**62 - 1):
        return None
    if set(weights) != {None}:
        for w in weights:
            if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float))
                                  or not (math.isfinite(w) and w > 0)):
                return None
    if not {m for m in mods if m is not None} <= net.modulators.keys():
        return None
    if set(backlogs) != {None} and any(_backlog_problem(b, resources) for b in backlogs):
        return None
    for g in set(gates):
        if g is None:
            continue
        if type(g) is not tuple or len(g) != 2:
            return None
        gate = net.gates.get(g[0])
        if gate is None or not (isinstance(g[1], int) and 0 <= g[1] < len(gate.counters)):
            return None
    return csr, cols


def _ack_path_problem(r: Any, resources: dict) -> list[str]:
    """What is wrong with link ``r``'s ``ack_path`` (set by hand rather than by
    :meth:`Net.ack_path`)."""
    a = r.ack_path
    if not (isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], tuple) and a[1]):
        return [f"link {r.name!r}: ack_path={a!r} must be (link name, caps); use Net.ack_path"]
    via, caps = a
    if via not in resources or resources[via].discipline != "flow" or via == r.name:
        return [f"link {r.name!r}: ack_path's link {via!r} must be another link of the net"]
    if any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 for c in caps):
        return [f"link {r.name!r}: ack_path caps {caps!r} must be bytes/s > 0"]
    return []


def _backlog_problem(b: Any, resources: dict) -> str:
    """What is wrong with a transition's ``backlog`` (``""``: nothing; None is fine)."""
    if b is None:
        return ""
    if not (isinstance(b, tuple) and len(b) == 2 and isinstance(b[0], str)
            and isinstance(b[1], (int, float)) and not isinstance(b[1], bool)
            and math.isfinite(b[1]) and b[1] > 0):
        return (f"backlog={b!r} must be (link name, bytes > 0), e.g. ('ps.down', 65536.0); "
                "set it with net.transition(..., backlog=(link, bytes))")
    r = resources.get(b[0])
    if r is None or r.discipline != "flow":
        return (f"backlog link {b[0]!r} is not a link; declare it with net.link({b[0]!r}, "
                "bandwidth)")
    return ""


def _transition_problems(net: Any, T: list, P: list[str], used_res: set[str],
                         max_tokens: int) -> None:
    """Append the problems of the transitions ``T`` to ``P``, their resources to ``used_res``."""
    for t in T:
        where = f"transition {t.name!r}"
        for kind, arcs in (("input", t.inputs), ("output", t.outputs), ("inhibitor", t.inhibitors)):
            for p, w in arcs.items():
                if p not in net.places:
                    P.append(f"{where}: {kind} place {p!r} does not exist; declare it with net.place({p!r})")
                if isinstance(w, bool) or not isinstance(w, int) or w < 1:
                    what = "threshold" if kind == "inhibitor" else "weight"
                    P.append(f"{where}: {kind} arc {p!r} has {what} {w!r}; it must be an integer >= 1")
                elif w > max_tokens:
                    P.append(f"{where}: {kind} arc {p!r} has weight {w!r}, beyond the limit "
                             f"{max_tokens:,} (max_tokens; raise it with SGDNET_MAX_TOKENS=N)")
        problem = (step_tag_problem(t.tags) if isinstance(t.tags, Mapping)
                   else f"tags={t.tags!r:.60} must be a mapping")
        if problem:
            P.append(f"{where}: {problem}")
        if not t.inputs and not t.inhibitors:
            P.append(f"{where} has no input places, so it would fire forever; give it an input or an inhibitor arc")
        for r in t.resources:
            if r not in net.resources:
                P.append(f"{where}: resource {r!r} does not exist; declare it with net.resource({r!r})")
            used_res.add(r)
        if len(set(t.resources)) != len(t.resources):
            P.append(f"{where}: resources {list(t.resources)} list one twice")
        discs = {net.resources[r].discipline for r in t.resources if r in net.resources}
        if "flow" in discs and "ps" in discs:
            P.append(f"{where} holds both links and ps resources; a transfer's rate comes from its links only")
        if not (isinstance(t.flow_cap, (int, float)) and not isinstance(t.flow_cap, bool) and t.flow_cap > 0
                and not math.isnan(t.flow_cap)):
            P.append(f"{where}: flow_cap={t.flow_cap!r} must be a number of bytes/s > 0 (or math.inf)")
        elif t.flow_cap != math.inf and "flow" not in discs:
            P.append(f"{where}: flow_cap={t.flow_cap!r} is set but it holds no link; only transfers have a rate cap")
        problem = _backlog_problem(t.backlog, net.resources)
        if problem:
            P.append(f"{where}: {problem}")
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
        if t.modulator is not None and t.modulator not in net.modulators:
            P.append(f"{where}: modulator {t.modulator!r} does not exist; known: {sorted(net.modulators)}")
        if t.gate is not None:
            gname, member = t.gate
            g = net.gates.get(gname)
            if g is None:
                P.append(f"{where}: gate {gname!r} does not exist; known: {sorted(net.gates)}")
            elif not (isinstance(member, int) and 0 <= member < len(g.counters)):
                P.append(f"{where}: gate member {member!r} is out of range 0..{len(g.counters) - 1} of gate {gname!r}")
