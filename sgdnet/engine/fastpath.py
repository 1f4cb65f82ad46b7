"""Fast path for timed event graphs: a max-plus recursion with replications as lanes.

When every place of a net has exactly one producer and one consumer (and nothing else can change
the order of firings), the k-th firing of every transition is known in advance, so the holding
semantics of the generic engine reduce to the (max, +) recursion

    x_t(k) = max( c_t(k - s_t),  max over input places p of c_{u_p}(k - m_p) ),
    c_t(k) = x_t(k) + d_t(k),

where ``x`` is a start, ``c`` a completion, ``u_p`` the producer of ``p``, ``m_p`` its initial
tokens, ``s_t`` the servers of ``t`` (no term for ``servers=inf``) and a negative index means a
token present at time 0. Each round ``k`` computes one firing of every transition (in
topological order of the token-free arcs) for all replications at once: the replications are the
innermost axis of the history array, so one round is a few contiguous loads and a max per lane.
The step completions, the window ``(t0, t1]`` and every counter of the generic engine's
:class:`~sgdnet.results.RawReplication` are then read off that history.

Which nets qualify (:func:`fast_path_problems` lists why a net does not): no resources (queued,
ps or flow), inhibitors, gates, modulators or priorities; every arc weight 1; every place with
exactly one producer and one consumer; ``servers = 1`` for every transition whose duration is
random (``servers > 1`` or ``inf`` only with a fixed duration: random durations would let
firings overtake one another); no circuit without tokens (the generic engine deadlocks there);
no circuit (or input-less transition) whose durations can all be zero (time would not advance).

Rounds go on until, in every lane, the ``warmup + steps``-th step completion is known (all step
completions below the latest round's earliest one are final: sequences are nondecreasing) and
every transition has completed past it, so the counters up to ``t1`` are complete. The history
holds every round (``rounds x transitions x lanes`` float64, lanes in chunks of 8, fewer when
their rounds would not fit :data:`MAX_HISTORY_BYTES`). A run whose one lane would not fit is not
started here (:func:`history_fits`): :func:`sgdnet.simulate` gives it to the FIFO fast path when
the net is in that class too (its history keeps the latest rounds only), else to the generic
engine; so does a run that outgrows the bound, or needs more completions than ``max_events``
(``run_fast`` returns None).

Equivalence with the generic engine: the very same run — step times and transitions, ``t0``,
``t1``, firings, events — for random durations too: firing ``k`` of a transition lasts draw ``k``
of that transition's counter-based stream (:mod:`sgdnet.engine.rng`), the draw the generic engine
makes for it, and completions at one instant are put in the generic engine's processing order
(see ``fkey`` in :func:`.eg_record.replication`: batch, start, batch of the start, rank, firing index).
Tested on random event graphs, deterministic (zero durations included) and stochastic.

What it cannot give: traces (``trace=True``) — :func:`sgdnet.simulate` then runs the generic
engine. Resource counters (busy time, waits) are zero because there are no resources.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..dists import (
    CODE_DET,
    CODE_EMP,
    CODE_EXP,
    CODE_LOGN,
    CODE_SHEXP,
    CODE_STRAG,
    CODE_UNIF,
    deterministic_rows,
)
from ..net.compiled import INF_SERVERS, CompiledNet
from ..results import RawReplication
from . import eg_record, history_pool
from .eg_record import replication
from .fastrun import POLL_WORK, cached_analysis, run_lanes
from .rng import (
    draw,
    draw_state,
    exponential_draw,
    next_normal,
    normal_first_try,
    replication_bases,
    sample,
    stream_bases,
)

#: files whose code or constants the compiled functions embed (see sgdnet.engine.jitcache)
JIT_DEPENDS = ("rng.py", "../dists.py", "../net/compiled.py")

__all__ = ["FastPlan", "fast_plan", "fast_path_problems", "history_fits", "run_fast",
           "MAX_HISTORY_BYTES"]

#: memory bound of one lane chunk's history (rounds x transitions x lanes float64); a run that
#: would need more falls back to the generic engine
MAX_HISTORY_BYTES = 128 << 20
_LANES = 8  # replications per chunk
#: set once sgdnet.engine.jitcache has checked this module's numba cache in this process
CACHE_CHECKED = False


@dataclass
class FastPlan:
    """The static data of the recursion for one compiled net (cached on the CompiledNet)."""

    order: np.ndarray  # (T,) transitions in topological order of the token-free arcs
    ip: np.ndarray  # (T+1,) CSR over transitions: their input arcs
    iprod: np.ndarray  # producer transition of each input arc
    itok: np.ndarray  # initial tokens of each input arc's place
    serv: np.ndarray  # (T,) servers bound (0: none, i.e. servers=inf)
    aptr: np.ndarray  # (T+1,) CSR over order positions: the arcs the recursion reads
    aprod: np.ndarray  # producer of each such arc (the transition itself for its servers bound)
    atok: np.ndarray  # its tokens (the servers count for the self-arc)
    aoff: np.ndarray  # aprod - atok * T: in round k >= max_tokens the arc reads row k * T + aoff
    fixed: np.ndarray  # (T,) 1 if the duration is one fixed value
    dfix: np.ndarray  # (T,) that value
    max_tokens: int


# --------------------------------------------------------------------------- detection
def _can_be_zero(code: int, par: np.ndarray, pool: np.ndarray) -> bool:
    """Whether a duration row can draw exactly 0 (with positive probability)."""
    if code == CODE_STRAG:
        return _can_be_zero(int(par[2]), par[3:6], pool)
    a, b = float(par[0]), float(par[1])
    if code in (CODE_DET, CODE_UNIF, CODE_SHEXP):
        return a == 0.0
    if code == CODE_EMP:
        lo, n = int(a), int(b)
        return n >= 1 and float(pool[lo:lo + n].min()) == 0.0
    return False


def zero_rows(cn: CompiledNet) -> np.ndarray:
    """Per transition: :func:`_can_be_zero` of its duration row (in bulk; rows with samples
    one by one)."""
    T = cn.n_transitions
    code, par = cn.d_code[:T], cn.d_par[:T]
    strag = code == CODE_STRAG
    base = np.where(strag, par[:, 2].astype(np.int64) if T else code, code)
    a = np.where(strag, par[:, 3], par[:, 0]) if T else np.zeros(0)
    out = np.isin(base, (CODE_DET, CODE_UNIF, CODE_SHEXP)) & (a == 0.0)
    for t in np.flatnonzero(base == CODE_EMP):
        out[t] = _can_be_zero(int(code[t]), par[t], cn.d_pool)
    return out


def _topo(n: int, arcs: list[tuple[int, int]]) -> list[int] | None:
    """Kahn's order (ties by index), or None if the arcs have a cycle."""
    import heapq

    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for s, d in arcs:
        out[s].append(d)
        indeg[d] += 1
    heap = [v for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        v = heapq.heappop(heap)
        order.append(v)
        for d in out[v]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(heap, d)
    return order if len(order) == n else None


def _analyse(cn: CompiledNet) -> tuple[FastPlan | None, list[str]]:
    T, P = cn.n_transitions, cn.n_places
    names = cn.transition_names
    why: list[str] = []
    if int(cn.qres_ptr[-1]) or int(cn.psres_ptr[-1]):
        held = np.flatnonzero((np.diff(cn.qres_ptr) > 0) | (np.diff(cn.psres_ptr) > 0))
        why.append(f"transitions hold resources (e.g. {names[int(held[0])]!r})")
    if int(cn.inh_ptr[-1]):
        why.append("the net has inhibitor arcs")
    if (cn.guard >= 0).any():
        why.append("the net has gates")
    if (cn.mod_of >= 0).any() or int(cn.rs_ptr[-1]):
        why.append("the net has modulators")
    if (cn.priority != 0).any():
        why.append("transitions have priorities")
    if (cn.in_w != 1).any() or (cn.out_w != 1).any():
        why.append("some arc weight is not 1")
    prod = np.full(P, -1, dtype=np.int64)
    nprod = np.bincount(cn.out_place, minlength=P)
    ncons = np.bincount(cn.in_place, minlength=P)
    bad = np.nonzero((nprod != 1) | (ncons != 1))[0]
    if bad.size:
        p = int(bad[0])
        why.append(f"place {cn.place_names[p]!r} has {int(nprod[p])} producers and {int(ncons[p])} "
                   "consumers (an event graph needs exactly one each)")
    if why:
        return None, why
    for t in range(T):
        for k in range(cn.out_ptr[t], cn.out_ptr[t + 1]):
            prod[cn.out_place[k]] = t
    fixed, dfix = fixed_durations(cn)
    for t in range(T):
        if cn.servers[t] != 1 and not fixed[t]:
            why.append(f"transition {names[t]!r} has servers={'inf' if cn.servers[t] == INF_SERVERS else int(cn.servers[t])}"
                       " and a random duration (firings could overtake one another)")
            break
    arcs0, arcsz = [], []
    zero = zero_rows(cn).tolist()
    for t in range(T):
        if zero[t] and cn.in_ptr[t + 1] == cn.in_ptr[t]:
            why.append(f"transition {names[t]!r} has no input place and can take zero time")
            break
        for k in range(cn.in_ptr[t], cn.in_ptr[t + 1]):
            p = int(cn.in_place[k])
            u = int(prod[p])
            if cn.m0[p] == 0:
                arcs0.append((u, t))
            if zero[u] and zero[t]:
                arcsz.append((u, t))
    order = _topo(T, arcs0)
    if order is None:
        why.append("a circuit carries no token (the net deadlocks)")
    if _topo(T, arcsz) is None:
        why.append("a circuit of transitions can all take zero time (time would not advance)")
    if why:
        return None, why
    itok = cn.m0[cn.in_place].astype(np.int64)
    serv = np.where(cn.servers == INF_SERVERS, 0, cn.servers).astype(np.int64)
    aptr, aprod, atok = [0], [], []
    for t in order:
        for k in range(cn.in_ptr[t], cn.in_ptr[t + 1]):
            aprod.append(int(prod[cn.in_place[k]]))
            atok.append(int(itok[k]))
        if serv[t] > 0:
            aprod.append(t)
            atok.append(int(serv[t]))
        aptr.append(len(aprod))
    mt = int(max(int(itok.max()) if itok.size else 0, int(serv.max()) if serv.size else 0))
    plan = FastPlan(order=np.array(order, dtype=np.int64), ip=cn.in_ptr.astype(np.int64),
                    iprod=prod[cn.in_place].astype(np.int64), itok=itok, serv=serv,
                    aptr=np.array(aptr, dtype=np.int64), aprod=np.array(aprod, dtype=np.int64),
                    atok=np.array(atok, dtype=np.int64),
                    aoff=np.array(aprod, dtype=np.int64) - np.array(atok, dtype=np.int64) * T,
                    fixed=fixed, dfix=dfix, max_tokens=mt)
    return plan, []


def fixed_durations(cn: CompiledNet) -> tuple[np.ndarray, np.ndarray]:
    """Per transition of ``cn``: 1 where its duration is one fixed value (int64, as the
    recursions of both fast paths read it), and that value (0 elsewhere)."""
    T = cn.n_transitions
    fixed = deterministic_rows(cn.d_code, cn.d_par, cn.d_pool)[:T].astype(np.int64)
    dfix = np.zeros(T)
    s = np.zeros(1, dtype=np.uint64)
    for t in np.flatnonzero(fixed):
        dfix[t] = sample(s, int(cn.d_code[t]), cn.d_par, int(t), cn.d_pool)
    return fixed, dfix


def fast_plan(cn: CompiledNet) -> FastPlan | None:
    """The recursion's plan for ``cn``, or None when the fast path does not apply (cached)."""
    return cached_analysis(cn, "_fastpath", _analyse)[0]


def fast_path_problems(cn: CompiledNet) -> list[str]:
    """Why the fast path does not apply to ``cn`` (empty when it does)."""
    return list(cached_analysis(cn, "_fastpath", _analyse)[1])


# ------------------------------------------------------------------------------ kernel
@njit(cache=True, nogil=True)
def draw_lists(fixed, code):  # pragma: no cover - compiled
    """``(lidx, oidx)``: the transitions whose durations are log-normal draws, and the other
    random ones (a fixed duration is set once, not drawn: see :func:`round_durations`)."""
    nl = 0
    no = 0
    for t in range(fixed.size):
        if not fixed[t]:
            if code[t] == CODE_LOGN:
                nl += 1
            else:
                no += 1
    lidx = np.empty(nl, dtype=np.int64)
    oidx = np.empty(no, dtype=np.int64)
    nl = 0
    no = 0
    for t in range(fixed.size):
        if not fixed[t]:
            if code[t] == CODE_LOGN:
                lidx[nl] = t
                nl += 1
            else:
                oidx[no] = t
                no += 1
    return lidx, oidx


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False, forceinline=True)
def round_durations(dr, k, code, par, pool, SB, l, lidx, SBL, oidx, zz, ok, scratch):  # pragma: no cover
    """``dr[t]``: the duration of firing ``k`` of every random transition ``t`` in lane ``l``
    (draw ``k`` of its stream, base ``SB[l, t]``: the generic engine's), for one round of a fast
    path; the fixed ones are set once by the caller. Shared by both fast paths; inlined, with the
    lane an index, not a row view: a call and two views per round cost ~3 ns per completion on
    the eg-ring toy (``bench/README.md``).

    Drawn in loops of independent draws, which the core overlaps, before the round's recursion,
    whose completions depend on one another: with the draws inside it, their latency sat on that
    chain (``bench/README.md``, "Draws first"). The log-normal ones (``lidx``) go in two loops:
    the ziggurat's first try for all of them (:func:`.rng.normal_first_try`, which numba
    vectorises when their bases are side by side: ``SBL[l] = SB[l, lidx]``), then the exponentials,
    with the rare rejected tries (1.5 %) drawn again in full. The same numbers as one
    :func:`.rng.lognormal_draw` each (``zz``, ``ok``: scratch of ``lidx``'s size)."""
    nl = lidx.size
    for i in range(nl):
        zz[i], ok[i] = normal_first_try(SBL[l, i], k)
    for i in range(nl):
        t = lidx[i]
        z = zz[i]
        if not ok[i]:
            z, _ = next_normal(draw_state(SB[l, t], k))
        dr[t] = math.exp(par[t, 0] + par[t, 1] * z)
    for i in range(oidx.size):
        t = oidx[i]
        c = code[t]
        if c == CODE_EXP:
            dr[t] = exponential_draw(SB[l, t], k, par[t, 0])
        else:
            dr[t] = draw(SB[l, t], k, c, par, t, pool, scratch)


_I0, _I1 = np.int64(0), np.int64(1)  # typed constants: a literal would compile a second version


@njit(cache=True, nogil=True, error_model="numpy", _nrt=False, forceinline=True)
def _round_from_rows(C, row, L, l, order, aptr, aoff, dr):  # pragma: no cover - compiled
    """One round of the recursion in lane ``l`` once no arc can read an initial token: arc ``a``
    reads row ``row + aoff[a]`` of the flat history (see :func:`_rounds`). Inlined; called with
    ``L`` and ``l`` constant when there is one lane, so LLVM drops the stride."""
    for j in range(order.size):
        a0, a1 = aptr[j], aptr[j + 1]
        x = 0.0
        if a1 > a0:  # max(0, inputs) as selects, not branches (which input is latest is random)
            x = C[(row + aoff[a0]) * L + l]
            for a in range(a0 + 1, a1):
                v = C[(row + aoff[a]) * L + l]
                x = v if v > x else x
            x = x if x > 0.0 else 0.0
        t = order[j]
        C[(row + t) * L + l] = x + dr[t]


@njit(cache=True, nogil=True, error_model="numpy")
def _rounds(C, T, L, k0, kmax, work, order, aptr, aprod, atok, aoff, ksafe, fixed, dfix, code, par,
            pool, SB, steps_idx, need, ptr, phase, lo_a):  # pragma: no cover - compiled
    """Compute rounds ``k0..`` of the recursion into the flat history ``C`` (index
    ``(k * T + t) * L + lane``) until every lane is done (``phase == 2``), ``kmax`` rounds
    exist, or about ``work`` completions were made. Transition ``order[j]`` reads the arcs
    ``aptr[j]..aptr[j+1]`` (producer, tokens), its servers bound included as a self-arc; from
    round ``ksafe`` (the most tokens of any arc) on, no arc reads an initial token and arc ``a``
    reads row ``k * T + aoff[a]``, with no test per arc.

    A lane's phase: 0 = its ``need``-th step completion is not known yet; 1 = it is known to lie
    below ``lo_a`` (every step completion below ``lo_a`` is computed) and the lane waits until
    every transition has completed past ``lo_a``; 2 = done. Returns the number of rounds."""
    ns = steps_idx.size
    k = k0
    done_work = 0
    scratch = np.zeros(1, dtype=np.uint64)
    dr = dfix.copy()  # the fixed durations, once
    lidx, oidx = draw_lists(fixed, code)
    SBL = np.empty((L, lidx.size), dtype=np.uint64)  # each lane's log-normal bases, side by side
    for l in range(L):
        for i in range(lidx.size):
            SBL[l, i] = SB[l, lidx[i]]
    zz = np.empty(lidx.size)
    ok = np.empty(lidx.size, dtype=np.bool_)
    while k < kmax and done_work < work:
        row = k * T
        for l in range(L):
            # the round's durations first, then the recursion, whose completions depend on one
            # another (see round_durations)
            round_durations(dr, k, code, par, pool, SB, l, lidx, SBL, oidx, zz, ok, scratch)
            if k >= ksafe:
                if L == 1:  # the same loop, its lane stride and lane constants (~1.5 ns less)
                    _round_from_rows(C, row, _I1, _I0, order, aptr, aoff, dr)
                else:
                    _round_from_rows(C, row, L, l, order, aptr, aoff, dr)
                continue
            for j in range(T):
                t = order[j]
                x = 0.0
                for a in range(aptr[j], aptr[j + 1]):
                    kk = k - atok[a]
                    if kk >= 0:
                        v = C[(kk * T + aprod[a]) * L + l]
                        if v > x:
                            x = v
                C[(row + t) * L + l] = x + dr[t]
        done_work += T * L
        k += 1
        if _lanes_done(C, k, T, L, ns, steps_idx, ptr, need, phase, lo_a):
            break
    return k


@njit(cache=True, nogil=True, _nrt=False, forceinline=True)
def _lanes_done(C, k, T, L, ns, steps_idx, ptr, need, phase, lo_a):  # pragma: no cover - compiled
    """Advance each lane's stopping rule after round ``k - 1`` and say whether every lane is done.

    A lane's phase goes 0 -> 1 when at least ``need`` step completions lie below the earliest
    step completion of the last round (``lo_a`` keeps that time), and 1 -> 2 when every
    transition's last completion is at or after it: no later round can complete earlier, so the
    window is final. Shared by both fast paths (:mod:`.fastpath_fifo` too), and inlined into
    their round loops: a call every round cost ~1 ns per completion on the eg-ring toy.
    """
    alldone = True
    for l in range(L):
        # below <= ns * k (each step transition has completed k times at most), so no lane can
        # pass the test before ns * k >= need; the pointers catch up then (lo never decreases)
        if phase[l] == 0 and ns * k >= need:
            lo = np.inf
            for i in range(ns):
                v = C[((k - 1) * T + steps_idx[i]) * L + l]
                if v < lo:
                    lo = v
            below = 0
            for i in range(ns):
                q = ptr[i, l]
                while q < k and C[(q * T + steps_idx[i]) * L + l] < lo:
                    q += 1
                ptr[i, l] = q
                below += q
            if below >= need:
                phase[l] = 1
                lo_a[l] = lo
        if phase[l] == 1:
            m = np.inf
            for t in range(T):
                v = C[((k - 1) * T + t) * L + l]
                if v < m:
                    m = v
            if m >= lo_a[l]:
                phase[l] = 2
        if phase[l] != 2:
            alldone = False
    return alldone


# ------------------------------------------------------------------------------ driver
def first_rounds(need: int, per_round: int, extra: int) -> int:
    """The rounds a history first holds: ``need`` step completions at ``per_round`` a round,
    25 % more, and ``extra`` (the rounds of initial tokens) + 16; a run that needs more grows it
    (both fast paths)."""
    return int(1.25 * need / max(1, per_round)) + extra + 16


def _chunk(cn: CompiledNet, plan: FastPlan, seeds: list[int], steps: int, warmup: int,
           samples: bool, max_events: int, halt: np.ndarray, prog: np.ndarray,
           i: int) -> list[RawReplication] | None:
    """Lanes ``seeds``; between kernel calls reads ``halt[0]`` (set: None at once) and keeps
    ``prog[i]`` at the lanes' step completions so far (see :mod:`.fastrun`)."""
    T, L = cn.n_transitions, len(seeds)
    st = np.array(cn.step_transitions, dtype=np.int64)
    need = warmup + steps
    per_round = max(1, st.size)
    kcap = max(MAX_HISTORY_BYTES // (8 * T * L), 1)
    K = min(kcap, first_rounds(need, per_round, plan.max_tokens))
    with history_pool.held(K * T * L) as hold:  # grown: replaced in hold, handed back
        C = hold[0]
        SB = np.stack([stream_bases(sd, cn.sid[:T]) for sd in seeds])
        ptr = np.zeros((st.size, L), dtype=np.int64)
        phase = np.zeros(L, dtype=np.int64)
        lo_a = np.zeros(L)
        k = 0
        while True:
            k = _rounds(C, T, L, k, K, POLL_WORK, plan.order, plan.aptr, plan.aprod, plan.atok,
                        plan.aoff, np.int64(plan.max_tokens), plan.fixed, plan.dfix, cn.d_code,
                        cn.d_par, cn.d_pool, SB, st, np.int64(need), ptr, phase, lo_a)
            prog[i] = L * min(need, k * st.size)
            if (phase == 2).all():
                break
            if halt[0]:
                return None
            if k * T > max_events + T:
                return None  # the generic engine reports the exhausted budget
            if k == K:
                if K >= kcap:
                    return None  # too much history: the generic engine runs instead
                K = min(kcap, 2 * K)
                C = hold[0] = history_pool.grow(C, K * T * L)
        C = C[:k * T * L].reshape(k, T, L)
        raws = []
        for l in range(L):
            raws.append(replication(cn, plan, C, l, st, steps, warmup, samples))
            if raws[-1].events > max_events:
                return None  # the generic engine reports the exhausted budget
        return raws


def _lanes_that_fit(cn: CompiledNet, plan: FastPlan, steps: int, warmup: int) -> int:
    """How many lanes' histories of the run's first size (:func:`first_rounds`) fit
    :data:`MAX_HISTORY_BYTES` (0: not even one)."""
    rounds = first_rounds(warmup + steps, len(cn.step_transitions), plan.max_tokens)
    return MAX_HISTORY_BYTES // (8 * cn.n_transitions * rounds)


def history_fits(cn: CompiledNet, steps: int, warmup: int) -> bool:
    """Whether one lane's history of the run fits :data:`MAX_HISTORY_BYTES` (its first size,
    :func:`first_rounds`; a run may still need to grow it past the bound, and then goes to the
    generic engine). False for a net outside the class."""
    plan = fast_plan(cn)
    return plan is not None and _lanes_that_fit(cn, plan, steps, warmup) >= 1


def run_fast(cn: CompiledNet, seeds: list[int], *, steps: int, warmup: int, samples: bool,
             max_events: int, parallel: bool = False,
             progress: Callable[[int], None] | None = None) -> list[RawReplication] | None:
    """Replications of ``cn`` by the max-plus recursion, one :class:`RawReplication` per seed
    (the fields the generic engine fills, from the generic engine's random streams), or None when
    the fast path does not apply or would need more memory or events than allowed (then the
    caller runs the generic engine). ``parallel``: the lanes are split over the engine's threads
    (the kernel releases the GIL); results do not depend on it (each lane owns its stream).
    ``progress``: called with the step completions so far (see :func:`.fastrun.run_chunks`,
    which also stops the run at Ctrl-C within one kernel call)."""
    plan = fast_plan(cn)
    if plan is None:
        return None
    from .driver import n_threads

    nt = min(n_threads(), len(seeds)) if parallel else 1
    # fewer lanes per chunk when the rounds of 8 would not fit the history bound
    size = min(_LANES, -(-len(seeds) // nt), max(1, _lanes_that_fit(cn, plan, steps, warmup)))
    chunks = [seeds[a:a + size] for a in range(0, len(seeds), size)]

    return run_lanes(chunks, lambda ch, halt, prog, i: _chunk(cn, plan, ch, steps, warmup, samples,
                                                              max_events, halt, prog, i),
                     parallel=parallel, progress=progress)


#: The compiled functions this path calls from Python, loaded up front by ``simulate``
#: (:func:`sgdnet.engine.jitcache.preload`).
PRELOAD = (sample, replication_bases, _rounds, eg_record._start, eg_record._upto, eg_record._kth_step)
