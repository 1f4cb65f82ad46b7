"""Fast path for round-structured nets with shared FIFO links: a sort-then-queue recursion.

The class (:func:`fifo_path_problems` lists why a net is outside it). Think of the net as
*rounds* (an SGD step): every transition fires once per round. Precisely:

- no inhibitors, gates, modulators, random switches, ps or flow resources; no transition whose
  duration can be zero (then every completion of an instant is in one batch and the generic
  engine's order at an instant is the scan key, see below);
- every transition has an input place and holds at most one resource, which has capacity 1 and
  discipline ``fifo``;
- every place has exactly one consumer, with input weight ``w`` equal to its number of
  producers, each producing 1 token (``w = 1``: an ordinary event-graph place; ``w = N``: a
  *join*, e.g. a sync barrier fed by N workers), and initial tokens ``m w`` (``m`` rounds);
- the *round graph* (an arc ``u -> c`` of offset ``m`` per producer of each place, and
  ``t -> t`` of offset 1 for ``servers = 1``) has no circuit of offset 0 and puts every
  transition on a circuit of offset 1 (its firings are then strictly in order: round k + 1
  starts after round k completed);
- *round separation*: for a join place with consumer ``c``, every producer ``u`` is reachable from
  ``c`` with offset at most ``1 - m`` (so round k + 1's tokens arrive only after ``c`` used round
  k's: the place holds one round's tokens at a time); for every resource, every user ``v'`` is
  reachable from every user ``v`` with offset at most 1 (round k + 1's requests come after round
  k's firings completed, so the queue never mixes rounds);
- the *stages* of a round (a transition without resource, or all users of one resource) form a
  DAG by the arcs of offset 0 (a resource whose users depend on one another within a round, e.g.
  a GPU running both forward and backward, is outside the class).

Then round k of the generic engine's holding semantics is, stage by stage in topological order:
a transition's request time ``a`` is the max over its input arcs of ``c_u(k - m)`` (a join is a
max, ``servers = 1`` adds ``c_t(k - 1)``); without a resource it starts at ``a``; the users of a
resource are sorted by ``(a, rank)`` — the generic kernel's fifo key (request time, then the static
``(priority, declaration)`` rank; no zero durations, so every request of an instant is present at
its scan) — and queued: ``x_i = max(a_i, c_{i-1})``, ``c_i = x_i + d_i``, ``c_{-1}`` the
resource's last completion of round k - 1. The sort is an insertion sort started from the
previous round's order (nearly sorted).

The history keeps the latest rounds only (:data:`MAX_HISTORY_BYTES` per array): when it is full,
the leading rounds wholly before the frontier are tallied and dropped, so memory does not grow
with ``steps`` (with ``samples=False``; with samples each step completion's key is kept, 48
bytes, for the step times). The record (window, step times, firings, busy time, waits, sojourns, marking
integrals; :mod:`sgdnet.engine.fifo_record`) is read off it in the generic engine's processing
order. A deterministic net gives the generic engine's run (floating sums may differ in the last
bits), random durations included: firing ``k`` of a transition lasts draw ``k`` of its
counter-based stream (:mod:`sgdnet.engine.rng`), as in the generic engine. Built-in variants are outside the class (their transfers hold two NICs at once, or
they have gates, inhibitors, modulators or flows), so their results do not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..net.compiled import DISC_CODES, CompiledNet
from ..results import RawReplication
from . import fifo_record, history_pool
from .fastpath import (
    _lanes_done,
    _topo,
    draw_lists,
    first_rounds,
    fixed_durations,
    round_durations,
    zero_rows,
)
from .fastrun import POLL_WORK, cached_analysis, run_lanes
from .fifo_record import Acc, replication
from .rng import (
    replication_bases,
    stream_bases,
)

#: files whose code or constants the compiled functions embed (see sgdnet.engine.jitcache)
JIT_DEPENDS = ("rng.py", "fastpath.py", "fifo_record.py", "../dists.py", "../net/compiled.py")

__all__ = ["FifoPlan", "fifo_plan", "fifo_path_problems", "run_fifo"]

#: bytes of each history array (requests, starts, completions) of one replication: when full,
#: the rounds before the frontier are tallied and dropped (a small history stays in cache)
MAX_HISTORY_BYTES = 2 << 20
#: replications per kernel call: one (:func:`_rounds` plays one), so that each history is
#: contiguous (interleaved lanes made 8 replications ~25% slower per completion); the histories
#: keep a lane axis of size 1 for :mod:`.fifo_record`
_LANES = 1
#: set once sgdnet.engine.jitcache has checked this module's numba cache in this process
CACHE_CHECKED = False


@dataclass
class FifoPlan:
    """Static data of the sort-then-queue recursion for one compiled net."""

    useq: np.ndarray  # (T,) transitions, stage by stage in compute order
    ustart: np.ndarray  # (S+1,) stage boundaries into useq
    ures: np.ndarray  # (S,) the stage's resource, -1 for a lone transition
    ip: np.ndarray  # (T+1,) CSR over transitions: their input arcs (one per producer)
    iprod: np.ndarray  # producer of each arc
    ioff: np.ndarray  # its offset in rounds
    fixed: np.ndarray  # (T,) 1 if the duration is one fixed value
    dfix: np.ndarray  # (T,) that value
    res_of: np.ndarray  # (T,) resource held, -1 none
    out_t: np.ndarray  # transition of each output arc
    in_t: np.ndarray  # transition of each input arc
    max_off: int


def _analyse(cn: CompiledNet) -> tuple[FifoPlan | None, list[str]]:
    T, P, R = cn.n_transitions, cn.n_places, cn.n_resources
    names = cn.transition_names
    why: list[str] = []
    if int(cn.psres_ptr[-1]):
        why.append("some transition holds a ps or flow resource")
    if int(cn.inh_ptr[-1]):
        why.append("the net has inhibitor arcs")
    if (cn.guard >= 0).any():
        why.append("the net has gates")
    if (cn.mod_of >= 0).any() or int(cn.rs_ptr[-1]):
        why.append("the net has modulators")
    if cn.weighted:
        why.append("the net has random switches")
    nq = np.diff(cn.qres_ptr)
    if (nq > 1).any():
        why.append(f"transition {names[int(np.argmax(nq > 1))]!r} holds more than one resource")
    for r in sorted({int(r) for r in cn.qres_idx}):
        if cn.r_cap[r] != 1 or cn.r_disc[r] != DISC_CODES["fifo"]:
            why.append(f"resource {cn.resource_names[r]!r} is not a one-server fifo resource")
            break
    if (np.diff(cn.in_ptr) == 0).any():
        why.append(f"transition {names[int(np.argmax(np.diff(cn.in_ptr) == 0))]!r} has no input place")
    zero = np.flatnonzero(zero_rows(cn))
    if zero.size:
        why.append(f"transition {names[int(zero[0])]!r} can take zero time")
    if why:
        return None, why
    ncons = np.bincount(cn.in_place, minlength=P)
    prods: list[list[int]] = [[] for _ in range(P)]
    for t in range(T):
        for k in range(cn.out_ptr[t], cn.out_ptr[t + 1]):
            if cn.out_w[k] != 1:
                return None, [f"transition {names[t]!r} puts {int(cn.out_w[k])} tokens into a place "
                              "(the class needs 1)"]
            prods[int(cn.out_place[k])].append(t)
    w_of = np.zeros(P, dtype=np.int64)
    cons_of = np.full(P, -1, dtype=np.int64)
    for t in range(T):
        for k in range(cn.in_ptr[t], cn.in_ptr[t + 1]):
            w_of[cn.in_place[k]] = cn.in_w[k]
            cons_of[cn.in_place[k]] = t
    for p in range(P):
        n = len(prods[p])
        if ncons[p] != 1 or n == 0 or w_of[p] != n or cn.m0[p] % n:
            return None, [f"place {cn.place_names[p]!r} has {n} producers, {int(ncons[p])} consumers, "
                          f"input weight {int(w_of[p])} and {int(cn.m0[p])} tokens (the class needs one "
                          "consumer of weight = producers, tokens a multiple of it)"]
    # the round graph: arcs (u, c, offset)
    arcs = [(u, int(cons_of[p]), int(cn.m0[p]) // len(prods[p]), p) for p in range(P) for u in prods[p]]
    arcs += [(t, t, 1, -1) for t in range(T) if cn.servers[t] == 1]
    order0 = _topo(T, [(u, c) for u, c, m, _ in arcs if m == 0])
    if order0 is None:
        return None, ["a circuit carries no token (the net deadlocks)"]
    # reachability bitsets (Python ints over transitions): B0 offset 0, B1 offset <= 1
    succ0: list[list[int]] = [[] for _ in range(T)]
    succ1: list[list[int]] = [[] for _ in range(T)]
    for u, c, m, _ in arcs:
        if m == 0:
            succ0[u].append(c)
        elif m == 1:
            succ1[u].append(c)
    B0 = [0] * T
    B1 = [0] * T
    for t in reversed(order0):
        b = 1 << t
        for c in succ0[t]:
            b |= B0[c]
        B0[t] = b
    for t in reversed(order0):
        b = B0[t]
        for c in succ0[t]:
            b |= B1[c]
        for c in succ1[t]:
            b |= B0[c]
        B1[t] = b
    pout: list[list[tuple[int, int]]] = [[] for _ in range(T)]  # place arcs (c, offset) from t
    for u, c, m, p in arcs:
        if p >= 0 and m <= 1:
            pout[u].append((c, m))
    placed = [False] * T  # t is on a circuit of offset 1 through places (not only servers=1)
    for t in range(T):  # a nonempty circuit of offset 1 through t
        placed[t] = any((B1[c] if m == 0 else B0[c]) >> t & 1 for c, m in pout[t])
        if not (placed[t] or cn.servers[t] == 1):
            return None, [f"transition {names[t]!r} is on no circuit carrying exactly one round "
                          "(its firings could overlap or overtake one another)"]
    for p in range(P):
        if len(prods[p]) > 1:
            m, c = int(cn.m0[p]) // len(prods[p]), int(cons_of[p])
            if m > 1 or any(not ((B0[c] if m == 1 else B1[c]) >> u & 1) for u in prods[p]):
                return None, [f"join place {cn.place_names[p]!r} could hold tokens of two rounds "
                              f"(its consumer {names[c]!r} does not precede every producer's next round)"]
    res_of = np.full(T, -1, dtype=np.int64)
    for t in range(T):
        if nq[t]:
            res_of[t] = int(cn.qres_idx[cn.qres_ptr[t]])
    users: list[list[int]] = [[] for _ in range(R)]
    for t in range(T):
        if res_of[t] >= 0:
            users[res_of[t]].append(t)
    for r in range(R):
        mask = sum(1 << v for v in users[r])
        for v in users[r]:
            if B1[v] & mask != mask:
                return None, [f"resource {cn.resource_names[r]!r} could queue requests of two rounds "
                              f"(a user is not reached from {names[v]!r} within one round)"]
    # stages: lone transitions and resources; a DAG by the offset-0 arcs
    stage = np.where(res_of >= 0, T + res_of, np.arange(T))
    ids = sorted(set(stage.tolist()))
    sidx = {s: i for i, s in enumerate(ids)}
    S = len(ids)
    sarcs = set()
    for u, c, m, _ in arcs:
        if m == 0:
            a, b = sidx[int(stage[u])], sidx[int(stage[c])]
            if a == b:
                return None, [f"resource {cn.resource_names[int(res_of[c])]!r} serves {names[u]!r} and "
                              f"{names[c]!r}, which depend on one another within a round"]
            sarcs.add((a, b))
    sorder = _topo(S, sorted(sarcs))
    if sorder is None:
        return None, ["the resources' stages depend on one another in a circuit within a round"]
    useq, ustart, ures = [], [0], []
    for s in sorder:
        sid = ids[s]
        if sid < T:
            useq.append(sid)
            ures.append(-1)
        else:
            r = sid - T
            useq.extend(sorted(users[r], key=lambda v: int(cn.rank[v])))
            ures.append(r)
        ustart.append(len(useq))
    ip, iprod, ioff = [0], [], []
    for t in range(T):
        for k in range(cn.in_ptr[t], cn.in_ptr[t + 1]):
            p = int(cn.in_place[k])
            for u in prods[p]:
                iprod.append(u)
                ioff.append(int(cn.m0[p]) // len(prods[p]))
        if cn.servers[t] == 1 and not placed[t]:  # else the circuit already orders t's firings
            iprod.append(t)
            ioff.append(1)
        ip.append(len(iprod))
    fixed, dfix = fixed_durations(cn)
    i64 = np.int64
    plan = FifoPlan(useq=np.array(useq, i64), ustart=np.array(ustart, i64), ures=np.array(ures, i64),
                    ip=np.array(ip, i64), iprod=np.array(iprod, i64), ioff=np.array(ioff, i64),
                    fixed=fixed, dfix=dfix, res_of=res_of,
                    out_t=np.repeat(np.arange(T), np.diff(cn.out_ptr)),
                    in_t=np.repeat(np.arange(T), np.diff(cn.in_ptr)),
                    max_off=max(ioff) if ioff else 0)
    return plan, []


def fifo_plan(cn: CompiledNet) -> FifoPlan | None:
    """The recursion's plan for ``cn``, or None when the net is outside the class (cached)."""
    return cached_analysis(cn, "_fastfifo", _analyse)[0]


def fifo_path_problems(cn: CompiledNet) -> list[str]:
    """Why the FIFO fast path does not apply to ``cn`` (empty when it does)."""
    return list(cached_analysis(cn, "_fastfifo", _analyse)[1])


# ------------------------------------------------------------------------------ kernel
@njit(cache=True, nogil=True, error_model="numpy")
def _rounds(A, X, C, T, k0, kmax, work, useq, ustart, ures, ip, iprod, ioff, rank, fixed, dfix,
            code, par, pool, SB, ob, dlast, steps_idx, need, ptr, phase, lo_a, kbase, moff):  # pragma: no cover
    """Rounds ``k0..`` of one replication into the flat histories ``A`` (requests, kept for
    resource users only), ``X`` (starts), ``C`` (completions), index ``k * T + t``; the stopping
    rule of :func:`sgdnet.engine.fastpath._rounds` (one lane). ``ob[i]``: the current order of
    the users ``useq[i]`` of a resource stage; ``dlast[r]`` its last completion. Returns the
    number of rounds made. ``kbase``: rounds dropped before row 0 (see :func:`_chunk`).

    A round's durations are drawn first (:func:`.fastpath.round_durations`: ~17 % less time
    per completion than drawing each inside the queue recursion)."""
    ns = steps_idx.size
    nst = ures.size
    big = 1
    for j in range(nst):
        if ustart[j + 1] - ustart[j] > big:
            big = ustart[j + 1] - ustart[j]
    ka = np.empty(big)
    kt = np.empty(big, dtype=np.int64)
    dr = dfix.copy()  # the fixed durations, once
    lidx, oidx = draw_lists(fixed, code)
    sb2 = SB.reshape((1, SB.size))  # lane 0 of round_durations
    lane0 = np.int64(0)  # not the literal 0: round_durations would compile a second version
    sbl = SB[lidx].reshape((1, lidx.size))  # the log-normal bases side by side (round_durations)
    zz = np.empty(lidx.size)
    ok = np.empty(lidx.size, dtype=np.bool_)
    k = k0
    done_work = 0
    scratch = np.zeros(1, dtype=np.uint64)
    while k < kmax and done_work < work:
        row = k * T
        # firing kbase + k of every transition (its draw: the generic engine's duration)
        round_durations(dr, kbase + k, code, par, pool, sb2, lane0, lidx, sbl, oidx, zz, ok, scratch)
        early = kbase + k < moff  # an arc may still read an initial token
        for j in range(nst):
            r = ures[j]
            b0 = ustart[j]
            b1 = ustart[j + 1]
            if r < 0:  # a lone transition starts at its request
                t = useq[b0]
                a = 0.0
                for q in range(ip[t], ip[t + 1]):
                    kk = k - ioff[q]
                    if not early or kk + kbase >= 0:  # else an initial token (row kk is kept otherwise)
                        v = C[kk * T + iprod[q]]
                        if v > a:
                            a = v
                X[row + t] = a
                C[row + t] = a + dr[t]
                continue
            # the users' requests, then an insertion sort by (request, rank) from the last order
            # (keys side by side: no indirection), then the queue. (The request loop is the lone
            # transition's above: one loop for both stages, through the sort keys, was 3-9 %
            # slower per completion on the anchor net, bench/anchor_ns.py, 4 pairs.)
            for i in range(b0, b1):
                t = ob[i]
                a = 0.0
                for q in range(ip[t], ip[t + 1]):
                    kk = k - ioff[q]
                    if not early or kk + kbase >= 0:
                        v = C[kk * T + iprod[q]]
                        if v > a:
                            a = v
                A[row + t] = a
                kt[i - b0] = t
                ka[i - b0] = a
            for i in range(1, b1 - b0):
                t = kt[i]
                at = ka[i]
                m = i - 1
                while m >= 0 and (ka[m] > at or (ka[m] == at and rank[kt[m]] > rank[t])):
                    ka[m + 1] = ka[m]
                    kt[m + 1] = kt[m]
                    m -= 1
                ka[m + 1] = at
                kt[m + 1] = t
            dp = dlast[r]
            for i in range(b0, b1):
                t = kt[i - b0]
                ob[i] = t
                x = ka[i - b0]
                if dp > x:
                    x = dp
                X[row + t] = x
                dp = x + dr[t]
                C[row + t] = dp
            dlast[r] = dp
        done_work += T
        k += 1
        if _lanes_done(C, k, T, 1, ns, steps_idx, ptr, need, phase, lo_a):
            break
    return k


# ------------------------------------------------------------------------------ driver
def _chunk(cn: CompiledNet, plan: FifoPlan, seeds: list[int], steps: int, warmup: int,
           samples: bool, max_events: int, halt: np.ndarray, prog: np.ndarray,
           i: int) -> list[RawReplication] | None:
    """One replication (``seeds`` holds one seed). The history keeps the latest rounds only: when
    it is full, the leading rounds that lie wholly before the current frontier (the earliest
    latest step completion, so before the window's end) are tallied into running sums and
    dropped, so memory does not grow with ``steps``. Between kernel calls it reads ``halt[0]``
    (set: None at once) and keeps ``prog[i]`` at the step completions so far (:mod:`.fastrun`)."""
    T, L = cn.n_transitions, 1
    assert len(seeds) == L, "run_fifo deals one seed per chunk"
    st = np.array(cn.step_transitions, dtype=np.int64)
    ns = st.size
    need = warmup + steps
    kcap = max(MAX_HISTORY_BYTES // (8 * T * L), 2 * plan.max_off + 4)
    K = min(kcap, first_rounds(need, ns, plan.max_off))
    with history_pool.held(*[K * T * L] * 3) as hold:  # grown: replaced in hold, handed back
        A, X, C = (h.reshape(K, T, L) for h in hold)
        SB = stream_bases(seeds[0], cn.sid[:T])
        ob = plan.useq.copy()
        dlast = np.zeros(max(1, cn.n_resources))
        ptr = np.zeros((ns, L), dtype=np.int64)
        phase = np.zeros(L, dtype=np.int64)
        lo_a = np.zeros(L)
        rank = cn.rank.astype(np.int64)
        acc = Acc(T, cn.n_resources, warmup, samples)
        k = 0
        while True:
            k = _rounds(A.reshape(-1), X.reshape(-1), C.reshape(-1), T, k, K, POLL_WORK, plan.useq,
                        plan.ustart, plan.ures, plan.ip, plan.iprod, plan.ioff, rank, plan.fixed,
                        plan.dfix, cn.d_code, cn.d_par, cn.d_pool, SB, ob, dlast, st,
                        np.int64(need - ns * acc.kbase), ptr, phase, lo_a, np.int64(acc.kbase),
                        np.int64(plan.max_off))
            prog[i] = L * min(need, (acc.kbase + k) * ns)
            if (phase == 2).all():
                break
            if halt[0]:
                return None
            if (acc.kbase + k) * T > max_events + T:
                return None
            if k == K:
                kd = acc.compact(cn, plan, A, X, C, k, st, rank, need, int(phase[0]))
                if kd > 0:
                    for H in (A, X, C):
                        H[:k - kd] = H[kd:k]
                    ptr -= kd
                    np.maximum(ptr, 0, out=ptr)
                    k -= kd
                    continue
                if K >= kcap:
                    return None
                K = min(kcap, 2 * K)
                for j, H in enumerate((A, X, C)):
                    hold[j] = history_pool.grow(H, K * T * L)
                A, X, C = (h.reshape(K, T, L) for h in hold)
        raw = replication(cn, plan, A[:k], X[:k], C[:k], 0, st, steps, warmup, samples, acc)
        return None if raw.events > max_events else [raw]


def run_fifo(cn: CompiledNet, seeds: list[int], *, steps: int, warmup: int, samples: bool,
             max_events: int, parallel: bool = False,
             progress: Callable[[int], None] | None = None) -> list[RawReplication] | None:
    """Replications of ``cn`` by the sort-then-queue recursion (one :class:`RawReplication` per
    seed, from the generic engine's random streams), or None when the net is outside the class or
    the run would need more history memory or events than allowed. ``parallel``: the
    replications are spread over the engine's threads (the kernel releases the GIL); results do
    not depend on it. ``progress``: called with the step completions so far (see
    :func:`.fastrun.run_chunks`, which also stops the run at Ctrl-C within one kernel call)."""
    plan = fifo_plan(cn)
    if plan is None:
        return None
    chunks = [seeds[a:a + _LANES] for a in range(0, len(seeds), _LANES)]

    return run_lanes(chunks, lambda ch, halt, prog, i: _chunk(cn, plan, ch, steps, warmup, samples,
                                                              max_events, halt, prog, i),
                     parallel=parallel, progress=progress)


#: The compiled functions this path calls from Python, loaded up front by ``simulate``
#: (:func:`sgdnet.engine.jitcache.preload`).
PRELOAD = (replication_bases, _rounds, fifo_record._upto, fifo_record._tally_rows, fifo_record._tally,
           fifo_record._rows_below)
