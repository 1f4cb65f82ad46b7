"""A slow, obviously-correct pure-Python simulator: the oracle of the Numba engine.

:func:`simulate_reference` plays the normative firing semantics of the team contract directly
from the :class:`~sgdnet.net.Net` object (never from the compiled arrays), so that it is an
independent implementation. It draws from the kernel's counter-based random streams
(:mod:`sgdnet.engine.rng`: firing ``k`` of a transition lasts draw ``k`` of that transition's
stream, whatever order events are processed in), so tests compare it with :func:`sgdnet.simulate`
run against run, stochastic nets included; the samplers themselves are tested against their laws
in ``tests/test_rng.py``.

Semantics implemented (the contract's, plus the readings chosen where it is silent)
-----------------------------------------------------------------------------------
Enabling and requests
    The enabling degree of ``t`` is ``min(servers - active, min_p floor(m[p] / w))``, 0 when an
    inhibitor place holds ``>= threshold`` tokens or the guarding gate member forbids it. Each
    unit of degree is a request stamped with the instant it appeared; a drop withdraws the newest
    requests, a start takes the oldest. Because the degree is capped by free servers, a request
    of a single-server transition that is busy appears at the completion that frees the server.
    A transition without input arcs has degree ``servers - active`` while its inhibitors allow;
    with ``servers=inf`` that is unbounded, which is refused with :class:`SimulationError`.

Instants
    Time advances to the earliest completion. *All* completions at that instant are applied
    (in start order), then candidates are scanned: sorted by ``(prio_class, request_time,
    priority, declaration index)`` with ``prio_class = priority`` if the transition holds any
    ``priority`` resource else 0; the first whose non-``ps`` resources all have a free server
    starts; enabling is re-evaluated and the scan restarts until nothing can start.
    Random switches: when that first candidate ``i`` is weighted (``Transition.weight``), the
    one started is drawn among the weighted candidates that could start and have ``i``'s
    ``prio_class`` and ``priority`` (whatever their request times: a GSPN marking has no ages),
    with probability proportional to weight (one uniform of the switches' stream, only when there
    are two or more), ordered by (priority, declaration index) for the draw.
    Zero-duration firings started during a scan complete at the same instant, in start order,
    as the next batch (before time advances).

Processor sharing
    Each firing carries its sampled work. Holders of a ``ps`` resource progress at
    ``min(1, capacity / n_holders)``; a holder of several ``ps`` resources at the minimum; other
    (``fifo``/``priority``) resources do not slow a firing. Rates are recomputed whenever the
    holder set of a ``ps`` resource changes. Busy server-seconds of a ``ps`` resource are
    ``min(n_holders, capacity)`` integrated over time.

Flows (links, discipline ``flow``)
    A transition holding links is a transfer: its sampled "duration" is its work in bytes. The
    active transfers' rates are the max-min fair allocation over all links (progressive filling
    from scratch over every active transfer, each link's capacity ``bandwidth * efficiency(n)``
    with ``n`` the transfers crossing it, each transfer also bounded by its ``flow_cap``),
    recomputed whenever a transfer starts or ends. A link's busy level is the sum of its
    transfers' rates divided by its bandwidth. Links never queue; a transfer's other resources
    (its connection) are queued resources as usual. A join stage (``backlog=(link, q)``) also
    waits what the transfers on that link have queued (:func:`.reference_model.backlog`).

Token buckets (links with a ``burst``)
    A bucket starts full (``burst`` bytes); between two re-allocations the link's load ``x`` (the
    sum of its transfers' rates) is constant and its tokens move at ``sustained - x`` (sustained:
    ``bandwidth * efficiency(n)``), clamped to ``[0, burst]``. A re-allocation takes a bucket
    link's capacity from its *base*: its ``peak`` while it holds tokens or was not saturated,
    else its bandwidth. After it, every bucket link counts its tokens up to now at its old load
    and takes the new one; with a load above the sustained rate the bucket runs dry at
    ``now + tokens / excess``: an instant of its own (before the completions of that time; the
    first link by index when several run dry at once, each counted as an event), at which its
    tokens are 0, its base its bandwidth, and the flows re-allocated. Otherwise the base is the
    peak if it holds tokens or has room to spare, else the bandwidth.

Accounting window
    Completions are a sequence ordered by (time, start order). Counting is on from time 0 when
    ``warmup == 0``, else from just after the ``warmup``-th step completion (``t0`` its time);
    the run stops right after the ``(warmup + steps)``-th step completion (``t1``), the rest of
    that instant's batch is not applied. Firings are counted at completion, waits
    (``grant - request`` time, for every resource the starter holds) at grant, busy time by
    integration, all while counting is on. Hence ``firings(step transition)`` sums to ``steps``.
    ``step_times`` holds the ``steps`` counted step completion times (``t0`` excluded).
    Sojourns (completion - request time, for every resource the firing held) are counted at
    completion; the marking is integrated over ``[t0, t1]`` (``token_time``).

Gates (see :class:`~sgdnet.net.builder.Gate`)
    Member counts are completions of ``counters[i]`` since time 0. ``lag``: member ``i`` may
    start iff ``count[i] - min(count) <= s``. ``dynamic_lag``: per member a *released* flag and an
    *allowance*; member ``p`` may start iff released or ``count[p] - min(count) <= s_lower``,
    and, when ``s_upper`` is set, ``count[p] - min(count) <= s_upper``; a guarded start clears
    the flag. On a completion of ``counters[p]`` (count already incremented; the lead
    ``count[p] - min(count)`` is logged for every gate): allowance > 0 -> use one, release; elif
    within ``s_lower`` -> release; elif ``count[p] == max(count)`` -> controller; else nothing.
    The controller takes ``t_f = now``, ``I_f`` = p's last inter-completion interval, the
    slowest member ``s`` (minimum count, lowest index on ties) with last completion ``t_s`` and
    last interval ``I_s`` (missing completion times count as time 0), and picks the smallest
    ``r`` in ``0..r_max`` minimising ``min over k in 1..r_max of |t_f + r I_f - (t_s + k I_s)|``;
    every controller decision is logged as ``(gate index, r)``; p is released with allowance
    ``r`` (``r + 1`` releases).

Modulators (see :class:`~sgdnet.net.builder.Modulator`)
    ``iid``: drawn at time 0 and whenever a ``resample_on`` transition starts, before that
    transition's own duration is sampled. ``markov``: advanced lazily to the start instant of a
    transition that reads it (exponential sojourns are memoryless, so this is the continuous-time
    chain observed at starts); initial state from the stationary law
    ``P(slow) = mean_slow / (mean_fast + mean_slow)``.

Stops and errors
    An *event* is a completion; more than ``max_events`` (default
    ``min(1000 * (warmup + steps) * n_transitions, 10**9)``) raises :class:`SimulationError`.
    Nothing running and nothing able to start raises :class:`DeadlockError` with the marking and
    the stuck transitions: inputs partially marked (some input place non-empty, degree 0 by
    tokens) or enough tokens but inhibited or gated.

Trace
    When ``trace=True``, each replication records its first ``trace_limit`` completed firings
    (from time 0) as ``(transition, start, end)`` in completion order.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .._check import derive_seeds
from .._check import int_arg as _check_int
from ..dists import CODE_DET
from ..errors import DeadlockError, SimulationError
from ..net.builder import Net
from ..results import HIST_BINS, hist_bin
from .reference_model import ReferenceReplication, _Firing, _Model, _Streams, backlog, max_min, pace

__all__ = ["simulate_reference", "ReferenceReplication", "derive_seeds"]


class _Replication:
    """One replication: the state and the event loop."""

    def __init__(self, M: _Model, rng, steps, warmup, trace, trace_limit, max_events, rep,
                 histograms=False):
        self.M = M
        self.rng = rng
        self.steps, self.warmup = steps, warmup
        self.trace, self.trace_limit = trace, trace_limit
        self.max_events, self.rep = max_events, rep
        nt, nr = len(M.trans), len(M.rnames)
        self.now = 0.0
        self.m = list(M.m0)
        self.active = [0] * nt
        self.requests: list[list[float]] = [[] for _ in range(nt)]
        self.dirty = set(range(nt))
        self.cand: set[int] = set()  # transitions with a pending request
        self.used = [0] * nr  # servers in use (queued resources) / holders (ps resources)
        self.heap: list[tuple[float, int, _Firing]] = []  # non-ps firings by (end, seq)
        self.psf: list[_Firing] = []  # firings holding a ps resource or links (transfers)
        self.load = [0.0] * nr  # links: sum of their transfers' rates / bandwidth
        # token buckets: link -> tokens counted at tb_t, load and sustained rate since, base, dry
        links = M.link_of
        self.buckets = [r for r, d in enumerate(M.disc) if d == "flow" and links[r].burst]
        self.tok = {r: float(links[r].burst) for r in self.buckets}
        self.tb_t = {r: 0.0 for r in self.buckets}
        self.tb_x = {r: 0.0 for r in self.buckets}
        self.tb_cs = {r: float(links[r].bandwidth) for r in self.buckets}
        self.base = {r: links[r].peak_rate() for r in self.buckets}
        self.dry = {r: math.inf for r in self.buckets}
        self.seq = 0
        self.c_lag: dict[int, float] = {}  # join stages: a connection's last message's lag
        self.c_t: dict[int, float] = {}  # ... and when that message ended
        # gate state
        self.count = [[0] * len(g.counters) for g in M.gates]
        self.last_t = [[0.0] * len(g.counters) for g in M.gates]
        self.prev_t = [[0.0] * len(g.counters) for g in M.gates]
        self.released = [[False] * len(g.counters) for g in M.gates]
        self.allowance = [[0] * len(g.counters) for g in M.gates]
        self.gate_log: list[tuple[int, int]] = []
        self.gate_lead: list[tuple[int, int]] = []  # (gate, lead) at every counter completion
        # modulator state
        self.modval = [1.0] * len(M.mods)
        self.mstate = [0] * len(M.mods)  # markov: 0 fast, 1 slow
        self.mnext = [math.inf] * len(M.mods)
        nt = len(M.trans)
        for mi, mod in enumerate(M.mods):
            if mod.kind == "iid":
                self.modval[mi] = rng.sample(nt + mi)
            else:  # the first state and its sojourn from the modulator's first draw
                u, v = rng.uniforms(nt + mi, 2)
                slow = u < mod.mean_slow / (mod.mean_fast + mod.mean_slow)
                self.mstate[mi] = int(slow)
                self.modval[mi] = mod.slow_factor if slow else 1.0
                self.mnext[mi] = -(mod.mean_slow if slow else mod.mean_fast) * math.log(1.0 - v)
        # accounting
        self.nsteps = 0
        self.counting = warmup == 0
        self.t0 = 0.0
        self.t1 = math.nan
        self.step_times: list[float] = []
        self.step_trans: list[int] = []
        self.firings = [0] * nt
        self.busy = [0.0] * nr
        self.since = [0.0] * nr  # busy level of resource r constant since this time
        self.wait_sum = [0.0] * nr
        self.wait_n = [0] * nr
        self.tr: list[tuple[int, float, float]] = []
        self.events = 0
        # place and queue statistics
        self.ptok = [0.0] * len(self.m)
        self.plast = [0.0] * len(self.m)
        self.soj_sum = [0.0] * nr
        self.soj_n = [0] * nr
        self.hw = np.zeros((nr, HIST_BINS), dtype=np.int64) if histograms else None
        self.hs = np.zeros((nr, HIST_BINS), dtype=np.int64) if histograms else None

    # --------------------------------------------------------------- enabling
    def gate_allows(self, i: int) -> bool:
        g = self.M.tgate[i]
        if g is None:
            return True
        gi, p = g
        gate = self.M.gates[gi]
        c = self.count[gi]
        lead = c[p] - min(c)
        if gate.kind == "lag":
            return lead <= gate.s
        if gate.s_upper is not None and lead > gate.s_upper:
            return False
        return self.released[gi][p] or lead <= gate.s_lower

    def token_degree(self, i: int):
        d = math.inf
        for p, w in self.M.inputs[i]:
            d = min(d, self.m[p] // w)
        return d

    def inhibited(self, i: int) -> bool:
        return any(self.m[p] >= h for p, h in self.M.inhib[i])

    def degree(self, i: int) -> int:
        """Enabling degree: free servers and tokens, 0 when inhibited or gated."""
        M, m = self.M, self.m
        for p, h in M.inhib[i]:
            if m[p] >= h:
                return 0
        if M.tgate[i] is not None and not self.gate_allows(i):
            return 0
        d = M.servers[i] - self.active[i]
        for p, w in M.inputs[i]:
            k = m[p] // w
            if k < d:
                d = k
        return d

    def refresh(self) -> None:
        """Bring the requests of every transition whose degree may have changed up to date."""
        degree, requests = self.degree, self.requests
        for i in self.dirty:
            d = degree(i)
            r = requests[i]
            if d > len(r):
                r.extend([self.now] * int(d - len(r)))
            elif d < len(r):
                del r[int(d):]  # withdraw the newest
            if r:
                self.cand.add(i)
            else:
                self.cand.discard(i)
        self.dirty.clear()

    def level(self, r: int) -> int:
        """Busy servers of resource ``r`` (``min(holders, capacity)`` for ``ps``, the load of a link)."""
        d = self.M.disc[r]
        if d == "flow":
            return self.load[r]
        return self.used[r] if d != "ps" else min(self.used[r], self.M.cap[r])

    def use(self, r: int, delta: int) -> None:
        """Change the holders of ``r``, integrating its busy level up to now first."""
        if self.counting:
            self.busy[r] += self.level(r) * (self.now - self.since[r])
        self.since[r] = self.now
        self.used[r] += delta

    def touch_place(self, p: int) -> None:
        self.dirty.update(self.M.dependents[p])

    def mark(self, p: int, delta: int) -> None:
        """Change ``m[p]`` by ``delta``, integrating the marking up to now first."""
        self.ptok[p] += self.m[p] * (self.now - self.plast[p])
        self.plast[p] = self.now
        self.m[p] += delta
        self.touch_place(p)

    def touch_gate(self, gi: int) -> None:
        self.dirty.update(self.M.guarded[gi])

    # ------------------------------------------------------------------ scan
    def scan(self) -> None:
        M = self.M
        while True:
            self.refresh()
            rq = self.requests
            cands = sorted((M.prio_class[i], rq[i][0], M.priority[i], i) for i in self.cand)
            for *key, i in cands:
                if self.can_start(i):
                    if M.weight[i] is not None:
                        i = self.switch(i, key, cands)
                    self.start(i)
                    break
            else:
                return

    def can_start(self, i: int) -> bool:
        return all(self.used[r] < self.M.cap[r] for r in self.M.queued_res[i])

    def switch(self, i: int, key: list, cands: list) -> int:
        """The random switch: among the weighted candidates competing with ``i`` that could start."""
        W = self.M.weight
        tied = sorted(j for pc, _, prio, j in cands
                      if (pc, prio) == (key[0], key[2]) and W[j] is not None and self.can_start(j))
        if len(tied) < 2:
            return i
        x = self.rng.uniforms(len(self.M.sid) - 1, 1)[0] * sum(W[j] for j in tied)
        acc = 0.0
        for j in tied[:-1]:
            acc += W[j]
            if x < acc:
                return j
        return tied[-1]

    def start(self, i: int) -> None:
        M, now = self.M, self.now
        req = self.requests[i].pop(0)  # the oldest request
        for p, w in M.inputs[i]:
            self.mark(p, -w)
        self.active[i] += 1
        self.dirty.add(i)
        for r in M.res[i]:
            self.use(r, +1)
            if self.counting:
                self.wait_sum[r] += now - req
                self.wait_n[r] += 1
                if self.hw is not None:
                    self.hw[r, hist_bin(now - req)] += 1
        g = M.tgate[i]
        if g is not None and M.gates[g[0]].kind == "dynamic_lag":
            self.released[g[0]][g[1]] = False
            self.touch_gate(g[0])
        nt = len(M.trans)
        for mi in M.resamples[i]:
            self.modval[mi] = self.rng.sample(nt + mi)
        dur = self.rng.sample(i) if M.d_code[i] != CODE_DET else float(M.d_par[i, 0])
        mi = M.tmod[i]
        if mi is not None:
            if M.mods[mi].kind == "markov":
                self.advance_markov(mi)
            dur *= self.modval[mi]
        if M.backlog[i] is not None:  # a join stage: also the queue its link holds now
            dur += backlog(M, self.psf, now, *M.backlog[i])
        self.seq += 1
        if M.ps_res[i] or M.links[i]:
            f = _Firing(self.seq, i, now, math.inf, dur, True, req)
            f.rate = 0.0  # forces the end to be computed below
            if M.joins and M.links[i]:  # right behind its connection's last message: its lag
                f.lag0 = next((self.c_lag[r] for r in M.queued_res[i] if self.c_t.get(r) == now), 0.0)
            self.psf.append(f)
            self.rerate()
        else:
            f = _Firing(self.seq, i, now, now + dur, 0.0, False, req)
            heapq.heappush(self.heap, (f.end, f.seq, f))

    def advance_markov(self, mi: int) -> None:
        mod = self.M.mods[mi]
        while self.mnext[mi] <= self.now:
            s = 1 - self.mstate[mi]
            self.mstate[mi] = s
            self.modval[mi] = mod.slow_factor if s else 1.0
            (v,) = self.rng.uniforms(len(self.M.trans) + mi, 1)
            self.mnext[mi] += -(mod.mean_slow if s else mod.mean_fast) * math.log(1.0 - v)

    # -------------------------------------------------------------------- ps
    def rerate(self) -> None:
        """Recompute the rate (and projected end) of every ps firing after a holder change."""
        M, now = self.M, self.now
        flows = []
        rate_of: dict[int, float] = {}  # the rate depends on the transition only: once each
        for f in self.psf:
            if M.links[f.t]:
                flows.append(f)
                continue
            rate = rate_of.get(f.t)
            if rate is None:
                rate = rate_of[f.t] = min(min(1.0, M.cap[r] / self.used[r]) for r in M.ps_res[f.t])
            if rate != f.rate:
                f.rate = rate
                f.end = now + f.work / rate
        rates = max_min(M, flows, self.base)
        for f in flows:
            if rates[f.seq] != f.rate:
                f.rate = rates[f.seq]
                f.end = now + f.work / f.rate
        if self.buckets:
            self.count_buckets(flows, rates)
        links = {r for f in flows for r in M.links[f.t]} | {
            r for r, d in enumerate(M.disc) if d == "flow" and self.load[r]}
        for r in sorted(links):
            self.use(r, 0)  # integrate the old load up to now
            self.load[r] = sum(f.rate for f in flows if r in M.links[f.t]) / M.link_of[r].bandwidth


    def count_buckets(self, flows: list, rates: dict) -> None:
        """After a re-allocation: each bucket link's tokens up to now, its new load, its base
        and the time it runs dry (the module docstring's rules)."""
        M, now, eps = self.M, self.now, 1e-12
        for r in self.buckets:
            link = M.link_of[r]
            b = float(link.burst)
            tok = self.tok[r] + (self.tb_cs[r] - self.tb_x[r]) * (now - self.tb_t[r])
            tok = b if tok > b else (tok if tok > b * eps else 0.0)
            on = [f for f in flows if r in M.links[f.t]]
            cs = link.effective_bandwidth(len(on)) if on else float(link.bandwidth)
            x = sum(rates[f.seq] for f in on)
            self.tok[r], self.tb_t[r], self.tb_x[r], self.tb_cs[r] = tok, now, x, cs
            if x > cs * (1.0 + eps):
                self.dry[r] = now + tok / (x - cs)
            else:
                self.dry[r] = math.inf
                self.base[r] = link.peak_rate() if tok > 0.0 or x < cs * (1.0 - eps) else float(
                    link.bandwidth)

    def run_dry(self, r: int) -> None:
        """Link ``r``'s bucket runs dry now (an event): no tokens, its bandwidth as base, flows
        re-allocated."""
        self.count_event()
        self.tok[r], self.tb_t[r], self.dry[r] = 0.0, self.now, math.inf
        self.base[r] = float(self.M.link_of[r].bandwidth)
        self.rerate()

    def advance_ps(self, t: float) -> None:
        """Bring every ps firing's remaining work to time ``t``."""
        for f in self.psf:
            if f.end == t:
                f.work = 0.0
            else:
                f.work = max(f.work - f.rate * (t - f.last), 0.0)
            f.last = t

    # ------------------------------------------------------------ completion
    def count_event(self) -> None:
        """One more event (a completion, or a bucket running dry) against ``max_events``."""
        self.events += 1
        if self.events > self.max_events:
            raise SimulationError(
                f"replication {self.rep}: event budget max_events={self.max_events} exhausted at "
                f"t={self.now:.6g}s after {self.nsteps} step completions (of "
                f"{self.warmup + self.steps} needed); the net may loop without completing steps, "
                "or raise max_events"
            )

    def complete(self, f: _Firing) -> bool:
        """Apply one completion; return True when the run is over."""
        M, now, i = self.M, self.now, f.t
        self.count_event()
        self.active[i] -= 1
        self.dirty.add(i)
        if M.joins and M.links[i]:  # what its connection had sent beyond it
            lag = max(f.lag0 + pace(M, i) * (now - f.start) - f.size, 0.0)
            for r in M.queued_res[i]:
                self.c_lag[r], self.c_t[r] = lag, now
        for r in M.res[i]:
            self.use(r, -1)
            if self.counting:
                self.soj_sum[r] += now - f.req
                self.soj_n[r] += 1
                if self.hs is not None:
                    self.hs[r, hist_bin(now - f.req)] += 1
        for p, w in M.outputs[i]:
            self.mark(p, w)
        if self.trace and len(self.tr) < self.trace_limit:
            self.tr.append((i, f.start, now))
        for gi, p in M.counter_of[i]:
            self.gate_progress(gi, p)
        if self.counting:
            self.firings[i] += 1
        if M.is_step[i]:
            self.nsteps += 1
            if self.counting:
                self.step_times.append(now)
                self.step_trans.append(i)
            if self.nsteps == self.warmup:
                self.counting = True
                self.t0 = now
                self.since = [now] * len(self.since)
                self.ptok = [0.0] * len(self.m)
                self.plast = [now] * len(self.m)
            if self.nsteps == self.warmup + self.steps:
                self.t1 = now
                for r in range(len(self.used)):
                    self.use(r, 0)  # integrate the busy levels up to t1
                for p in range(len(self.m)):
                    self.mark(p, 0)  # and the markings
                return True
        return False

    def gate_progress(self, gi: int, p: int) -> None:
        gate, now = self.M.gates[gi], self.now
        c = self.count[gi]
        c[p] += 1
        self.prev_t[gi][p], self.last_t[gi][p] = self.last_t[gi][p], now
        self.touch_gate(gi)
        self.gate_lead.append((gi, c[p] - min(c)))
        if gate.kind != "dynamic_lag":
            return
        if self.allowance[gi][p] > 0:
            self.allowance[gi][p] -= 1
            self.released[gi][p] = True
        elif c[p] - min(c) <= gate.s_lower:
            self.released[gi][p] = True
        elif c[p] == max(c):
            s = c.index(min(c))
            i_f = self.last_t[gi][p] - self.prev_t[gi][p]
            i_s = self.last_t[gi][s] - self.prev_t[gi][s]
            t_s = self.last_t[gi][s]

            def gap(r):
                t_f = now + r * i_f
                return min((abs(t_f - (t_s + k * i_s)) for k in range(1, gate.r_max + 1)), default=math.inf)

            best = min(range(gate.r_max + 1), key=lambda r: (gap(r), r))
            self.gate_log.append((gi, best))
            self.released[gi][p] = True
            self.allowance[gi][p] = best

    # ------------------------------------------------------------------ loop
    def next_time(self) -> float:
        t = self.heap[0][0] if self.heap else math.inf
        for f in self.psf:
            t = min(t, f.end)
        return t

    def run(self) -> ReferenceReplication:
        self.scan()
        while True:
            t = self.next_time()
            dry = min(self.buckets, key=lambda r: (self.dry[r], r)) if self.buckets else None
            if dry is not None and self.dry[dry] <= t:
                t = self.dry[dry]  # a bucket runs dry first (or with the completions of t)
                self.now = t
                self.advance_ps(t)
                self.run_dry(dry)
                continue
            if t == math.inf:
                self.deadlock()
            self.now = t
            self.advance_ps(t)
            batch = []
            while self.heap and self.heap[0][0] == t:
                batch.append(heapq.heappop(self.heap)[2])
            done_ps = [f for f in self.psf if f.end == t]
            if done_ps:
                self.psf = [f for f in self.psf if f.end != t]
                batch.extend(done_ps)
            batch.sort(key=lambda f: f.seq)
            for f in batch:
                if self.complete(f):
                    return self.record()
            if done_ps:
                self.rerate()
            self.scan()

    def deadlock(self) -> None:
        M = self.M
        marking = dict(zip(M.pnames, self.m))
        stuck = []
        for i, t in enumerate(M.trans):
            td = self.token_degree(i)
            partial = td == 0 and any(self.m[p] > 0 for p, _ in M.inputs[i])
            blocked = td > 0 and (self.inhibited(i) or not self.gate_allows(i))
            if partial or blocked:
                stuck.append(t.name)
        nonzero = {p: k for p, k in marking.items() if k}
        raise DeadlockError(
            f"net {M.net.name!r} deadlocked at t={self.now:.6g}s in replication {self.rep} after "
            f"{self.nsteps} of {self.warmup + self.steps} step completions: nothing is running and "
            f"nothing can start. Marked places: {nonzero}; stuck transitions: {stuck}. Check the "
            "initial tokens of the cycles through these transitions.",
            marking=marking, stuck=stuck, time=self.now, replication=self.rep,
        )

    def record(self) -> ReferenceReplication:
        tr = np.array(self.tr, dtype=float).reshape(-1, 3)
        return ReferenceReplication(
            t0=self.t0,
            t1=self.t1,
            step_times=np.array(self.step_times, dtype=float),
            step_trans=np.array(self.step_trans, dtype=np.int64),
            firings=np.array(self.firings, dtype=np.int64),
            busy=np.array(self.busy, dtype=float),
            wait_sum=np.array(self.wait_sum, dtype=float),
            wait_n=np.array(self.wait_n, dtype=np.int64),
            trace_trans=tr[:, 0].astype(np.int64),
            trace_start=tr[:, 1].copy(),
            trace_end=tr[:, 2].copy(),
            gate_log=list(self.gate_log),
            events=self.events,
            gate_lead=list(self.gate_lead),
            token_time=np.array(self.ptok, dtype=float),
            sojourn_sum=np.array(self.soj_sum, dtype=float),
            sojourn_n=np.array(self.soj_n, dtype=np.int64),
            wait_hist=self.hw,
            sojourn_hist=self.hs,
        )


def run_reference(net: Net, *, steps=1000, warmup=100, replications=8, seed=None, seeds=None,
                  trace=False, trace_limit=200_000, max_events=None, histograms=False, step=None):
    """Run the reference simulator and return ``(raws, seeds)`` (list of ReferenceReplication)."""
    if not isinstance(net, Net):
        raise SimulationError(f"simulate_reference needs a Net, got {type(net).__name__}")
    if step is not None:
        from .api import with_steps

        net = with_steps(net, step)
    net.validate()
    steps = _check_int("steps", steps, 1)
    warmup = _check_int("warmup", warmup, 0)
    trace_limit = _check_int("trace_limit", trace_limit, 0)
    if not isinstance(trace, (bool, np.bool_)):
        raise SimulationError(f"trace={trace!r} must be True or False")
    if seeds is not None:
        if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
            raise SimulationError(f"seeds={seeds!r} must be a list of integers, e.g. seeds=[result.seeds[0]]")
        seeds = list(seeds)
        if not seeds:
            raise SimulationError("seeds=[] is empty; give at least one seed or use seed=")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= int(s) < 2**64:
                raise SimulationError(f"seed {s!r} in seeds must be an integer in [0, 2**64)")
        seeds = [int(s) for s in seeds]
    else:
        replications = _check_int("replications", replications, 1)
        if seed is not None and not isinstance(seed, np.random.Generator) and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
        ):
            raise SimulationError(
                f"seed={seed!r} must be None, a non-negative integer or a numpy.random.Generator")
        seeds = derive_seeds(seed, replications)
    if not net.step_transitions():
        raise SimulationError(
            f"net {net.name!r} has no step transition; tag the transition that ends a step with "
            "tags={'step': True}"
        )
    M = _Model(net)
    if max_events is None:
        max_events = min(1000 * (warmup + steps) * len(M.trans), 10**9)
    max_events = _check_int("max_events", max_events, 1)
    raws = []
    for rep, s in enumerate(seeds):
        raws.append(_Replication(M, _Streams(M, s), steps, warmup, trace, trace_limit, max_events, rep,
                                 bool(histograms)).run())
    return raws, seeds


def simulate_reference(net: Net, steps: int = 1000, warmup: int = 100, replications: int = 8,
                       seed=None, trace: bool = False, trace_limit: int = 200_000, *, seeds=None,
                       max_events=None, histograms: bool = False, step=None):
    """Simulate ``net`` with the pure-Python reference engine.

    Parameters
    ----------
    net : Net
        The net (validated here).
    steps, warmup : int
        Step completions counted after ``warmup`` discarded ones.
    replications : int
        Independent replications (ignored when ``seeds`` is given).
    seed : None, int or numpy.random.Generator
        Root of the per-replication seeds (``numpy.random.SeedSequence``).
    trace, trace_limit : bool, int
        Record up to ``trace_limit`` completed firings per replication.
    seeds : list of int, optional
        Explicit per-replication seeds (replays replications of an earlier result).
    max_events : int, optional
        Completion budget per replication.
    histograms, step
        As for :func:`sgdnet.simulate`.

    Returns
    -------
    sgdnet.results.Result
        The same type :func:`sgdnet.simulate` returns.
    """
    if step is not None and isinstance(net, Net):
        from .api import with_steps

        net = with_steps(net, step)
    raws, seeds = run_reference(net, steps=steps, warmup=warmup, replications=replications, seed=seed,
                                seeds=seeds, trace=trace, trace_limit=trace_limit, max_events=max_events,
                                histograms=histograms)
    from ..results import RawReplication, Result

    for k, r in enumerate(raws):  # as the kernel's diagnosis: steps at one instant are no rate
        if not r.t1 > r.t0:
            raise SimulationError(
                f"net {net.name!r}, replication {k}: no time passed between the first and the "
                f"last of the steps={steps} counted step completions: count more steps than "
                "complete together (a synchronous net's workers do), or else time stopped "
                "advancing: a cycle of zero-duration transitions fires forever")
    conv = [RawReplication(**vars(r)) for r in raws]
    return Result.from_raw(net, conv, seeds, steps=steps, warmup=warmup, trace=trace)
