"""The reference oracle's data: the net's tables by index (:class:`_Model`), a firing in flight,
the per-replication record, and max-min fair sharing of links by progressive filling. The event
loop that uses them is :mod:`sgdnet.engine.reference`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..dists import flatten
from ..errors import SimulationError
from ..net.builder import Net
from ..net.compiled import law_rows, net_stream_ids

__all__ = ["ReferenceReplication", "backlog", "max_min", "pace"]


@dataclass
class ReferenceReplication:
    """Raw per-replication record (field names of ``sgdnet.results.RawReplication``)."""

    t0: float
    t1: float
    step_times: np.ndarray
    step_trans: np.ndarray
    firings: np.ndarray
    busy: np.ndarray
    wait_sum: np.ndarray
    wait_n: np.ndarray
    trace_trans: np.ndarray
    trace_start: np.ndarray
    trace_end: np.ndarray
    gate_log: list = field(default_factory=list)
    events: int = 0
    gate_lead: list = field(default_factory=list)
    token_time: np.ndarray | None = None
    sojourn_sum: np.ndarray | None = None
    sojourn_n: np.ndarray | None = None
    wait_hist: np.ndarray | None = None
    sojourn_hist: np.ndarray | None = None


class _Firing:
    __slots__ = ("seq", "t", "start", "end", "work", "rate", "last", "ps", "req", "size", "lag0")

    def __init__(self, seq, t, start, end, work, ps, req=0.0):
        self.req = req  # request time of the firing (its sojourns start there)
        self.seq = seq
        self.t = t
        self.start = start
        self.end = end
        self.work = work  # remaining work (ps firings only)
        self.size = work  # the work at the start (a transfer's bytes)
        self.lag0 = 0.0  # what its connection had sent beyond the message before it
        self.rate = 1.0
        self.last = start  # time `work` was last brought up to date
        self.ps = ps


class _Model:
    """The net's tables by index, built once per call from the Net object."""

    def __init__(self, net: Net):
        self.net = net
        self.pnames = list(net.places)
        pidx = {p: i for i, p in enumerate(self.pnames)}
        self.rnames = list(net.resources)
        ridx = {r: i for i, r in enumerate(self.rnames)}
        self.trans = list(net.transitions.values())
        self.tnames = [t.name for t in self.trans]
        tidx = {n: i for i, n in enumerate(self.tnames)}
        self.m0 = [net.places[p].tokens for p in self.pnames]
        self.cap = [net.resources[r].capacity for r in self.rnames]
        self.disc = [net.resources[r].discipline for r in self.rnames]
        nt = len(self.trans)
        self.inputs = [[(pidx[p], w) for p, w in t.inputs.items()] for t in self.trans]
        self.outputs = [[(pidx[p], w) for p, w in t.outputs.items()] for t in self.trans]
        self.inhib = [[(pidx[p], h) for p, h in t.inhibitors.items()] for t in self.trans]
        self.res = [[ridx[r] for r in t.resources] for t in self.trans]
        self.queued_res = [[r for r in rs if self.disc[r] not in ("ps", "flow")] for rs in self.res]
        self.ps_res = [[r for r in rs if self.disc[r] == "ps"] for rs in self.res]
        self.links = [[r for r in rs if self.disc[r] == "flow"] for rs in self.res]
        self.link_of = [net.resources[r] for r in self.rnames]
        self.flow_cap = [t.flow_cap for t in self.trans]
        # ACK paths (Net.ack_path): per link, (its ACK link's index, caps by that link's flows)
        self.ack = [None if r.ack_path is None else (ridx[r.ack_path[0]], r.ack_path[1])
                    for r in self.link_of]
        # join stages: (link index, bytes one transfer keeps queued at most) or None
        self.backlog = [None if t.backlog is None else (ridx[t.backlog[0]], float(t.backlog[1]))
                        for t in self.trans]
        self.joins = any(b is not None for b in self.backlog)
        self.servers = [t.servers for t in self.trans]
        self.is_step = [t.is_step for t in self.trans]
        self.weight = [t.weight for t in self.trans]
        for t in self.trans:
            if not t.inputs and t.servers == math.inf:
                raise SimulationError(
                    f"transition {t.name!r} has no input places and servers=inf, so it would start "
                    "infinitely many firings at once; give it an input place or a finite servers count"
                )
        # static parts of the scan key
        self.prio_class = [
            t.priority if any(self.disc[r] == "priority" for r in self.res[i]) else 0
            for i, t in enumerate(self.trans)
        ]
        self.priority = [t.priority for t in self.trans]
        # transitions whose degree depends on a place (input or inhibitor)
        self.dependents: list[list[int]] = [[] for _ in self.pnames]
        for i in range(nt):
            for p, _ in self.inputs[i] + self.inhib[i]:
                if i not in self.dependents[p]:
                    self.dependents[p].append(i)
        # gates
        self.gates = list(net.gates.values())
        gidx = {g.name: i for i, g in enumerate(self.gates)}
        self.tgate = [None if t.gate is None else (gidx[t.gate[0]], t.gate[1]) for t in self.trans]
        self.guarded = [[i for i in range(nt) if self.tgate[i] and self.tgate[i][0] == g] for g in range(len(self.gates))]
        # counter_of[t] = list of (gate, member) whose progress t's completions count
        self.counter_of: list[list[tuple[int, int]]] = [[] for _ in range(nt)]
        for gi, g in enumerate(self.gates):
            for member, c in enumerate(g.counters):
                self.counter_of[tidx[c]].append((gi, member))
        # modulators
        self.mods = list(net.modulators.values())
        midx = {m.name: i for i, m in enumerate(self.mods)}
        self.tmod = [None if t.modulator is None else midx[t.modulator] for t in self.trans]
        self.resamples: list[list[int]] = [[] for _ in range(nt)]
        for mi, m in enumerate(self.mods):
            if m.kind == "iid":
                for tn in m.resample_on:
                    self.resamples[tidx[tn]].append(mi)
        # random streams (sgdnet.engine.rng): the laws as rows (transitions, then modulators)
        # and one stream per name, the kernel's, so that both engines draw the same numbers
        self.d_code, self.d_par, self.d_pool = flatten(
            law_rows([t.duration for t in self.trans], self.mods))
        self.sid = net_stream_ids(self.tnames, [m.name for m in self.mods])


class _Streams:
    """One replication's draws: row ``i``'s ``k``-th draw from stream ``i`` (the kernel's)."""

    def __init__(self, M: _Model, seed: int):
        from .rng import stream_bases

        self.M = M
        self.base = stream_bases(seed, M.sid)
        self.k = [0] * len(M.sid)

    def sample(self, row: int) -> float:
        """The next draw of row ``row``'s law (a transition's duration, an iid multiplier)."""
        from .rng import durations

        M = self.M
        x = durations(self.base[row], self.k[row], 1, M.d_code[row], M.d_par, row, M.d_pool)[0]
        self.k[row] += 1
        return float(x)

    def uniforms(self, row: int, n: int) -> list[float]:
        """The first ``n`` uniforms of row ``row``'s next draw (switches, Markov modulators)."""
        from .rng import words

        u = words(self.base[row], self.k[row], n)
        self.k[row] += 1
        return [float(v) for v in u]


def max_min(M: _Model, flows: list, base: dict | None = None) -> dict:
    """Max-min fair rates (bytes/s) of the transfers ``flows`` (firings of ``M``'s transitions, by
    their ``seq``), by progressive filling: the plain textbook algorithm, recomputed from scratch.
    ``base``: link -> the bandwidth its capacity is taken from instead of its own (a token
    bucket's peak), times its efficiency."""
    rate: dict[int, float] = {}
    on = {}
    for f in flows:
        for r in M.links[f.t]:
            on.setdefault(r, []).append(f)
    cap = {r: M.link_of[r].effective_bandwidth(len(fs)) for r, fs in on.items()}
    for r in (base or {}):
        if r in on:
            cap[r] *= base[r] / float(M.link_of[r].bandwidth)
    fcap = {f.seq: flow_cap(M, f.t, on) for f in flows}
    unfixed = list(flows)
    while unfixed:
        level, bottleneck = math.inf, None
        for r in sorted(on):
            free = [f for f in on[r] if f.seq not in rate]
            if free:
                share = (cap[r] - sum(rate[f.seq] for f in on[r] if f.seq in rate)) / len(free)
                if share < level:
                    level, bottleneck = share, free
        for f in unfixed:
            if fcap[f.seq] < level:
                level, bottleneck = fcap[f.seq], [f]
        for f in bottleneck:
            rate[f.seq] = max(level, 0.0)
        unfixed = [f for f in unfixed if f.seq not in rate]
    return rate


def flow_cap(M: _Model, i: int, on: dict) -> float:
    """Transfer ``i``'s cap while the links carry the flows ``on`` (link -> its flows): its own
    and, for each link of its path whose ACK link carries ``n >= 1`` flows, that link's
    ``n``-th ACK-path cap (the last one beyond)."""
    cap = M.flow_cap[i]
    for r in M.links[i]:
        a = M.ack[r]
        n = len(on.get(a[0], ())) if a is not None else 0
        if n:
            cap = min(cap, a[1][min(n, len(a[1])) - 1])
    return cap


def pace(M: _Model, i: int) -> float:
    """The rate transfer ``i`` would have alone: its cap and its path's slowest bandwidth."""
    return min([M.flow_cap[i]] + [float(M.link_of[x].bandwidth) for x in M.links[i]])


def backlog(M: _Model, firings: list, now: float, r: int, q: float) -> float:
    """Seconds a join stage on link ``r`` waits at ``now``: each transfer crossing ``r`` keeps
    ``min(q, lag0 + pace * (now - start) - moved, left)`` in its queue, all of it carried at
    ``r``'s bandwidth before the stage ends (``lag0``: what its connection had sent beyond the
    message before it, when that one ended at the instant this one started)."""
    b = 0.0
    for f in firings:
        if r in M.links[f.t]:
            left = max(f.work - f.rate * (now - f.last), 0.0)
            x = f.lag0 + pace(M, f.t) * (now - f.start) - (f.size - left)
            b += max(min(q, x, left), 0.0)
    return b / float(M.link_of[r].bandwidth)
