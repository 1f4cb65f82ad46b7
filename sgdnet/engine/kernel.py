"""The serial Numba kernel: one replication of a compiled net.

Design (see DESIGN.md "The engine" and the normative firing semantics of the team contract):

- **State** is flat arrays allocated once per replication; per-transition data sits in row
  tables (``TS`` static, ``TD`` dynamic, ``TF`` float: one or two cache lines per transition).
  Firing *slots* hold (transition, start sequence, start time, remaining work, rate, completion
  time); a single-server transition owns slot ``t``, the others draw from a free list. Nothing
  is allocated per event; when a net needs more slots, requests or ps holders than sized, the
  kernel stops with ``ST_GROW`` and the driver replays the replication (same seed, same result)
  with 4x the room.
- **Requests**: each transition keeps its pending requests (one per unit of enabling degree) as
  a ring buffer of timestamps (oldest first), so a start takes the oldest and a degree drop
  withdraws the newest; a single-server transition keeps its one request time in its key.
- **Incremental enabling**: only transitions adjacent to a changed place (inputs or inhibitor
  arcs, via a place -> transition CSR), to a changed gate, or whose own active count changed are
  put on a dirty list and re-evaluated; after a start the starter's own degree is known to drop
  by exactly one unless inhibitors or a dynamic_lag release are involved, and a completion
  re-tests its own transition only if the server bound was the binding one. A degree test stops
  at the first empty input; a join (more than ``JOIN_ARCS`` inputs) starts at the input that
  blocked it last time, so an arrival at a 64-way join usually reads one place, not 64.
- **Candidates**: a transition with a pending request is in exactly one structure: the *instant
  queue* (candidates to examine now) or the waiting queue of one busy resource. Both are ordered
  by the scan key ``(prio_class, oldest request time, rank)`` where rank is the static
  ``(priority, declaration index)`` order, so keys are unique. The instant queue is a ring buffer
  kept sorted (newcomers mostly arrive in key order: placed at the back or the front after one
  comparison, moved into place while the queue is short), which becomes a binary heap when a
  long queue (``IQ_RING`` entries) receives an out-of-order newcomer, until it is down to one
  entry (see :func:`_iq_push`); both give the same pop order. A candidate that finds a resource
  busy goes to that resource's queue; when the resource frees a server, the queue head is
  promoted back to the instant queue. Because nothing frees a resource during a scan, a blocked
  candidate stays blocked until then, so repeatedly popping the minimum of the instant queue
  reproduces the normative scan "start the first candidate in key order that can start,
  re-evaluate, repeat".
  A fifo resource's queue is a ring buffer kept sorted by the same key instead of a heap (a
  waiting transition's key never changes and a newcomer is almost always the latest, so it is
  placed after one comparison and the head leaves in O(1)); priority resources keep the heap.
  A candidate whose first resource is already full when it becomes a candidate goes straight to
  that resource's queue (it would be found blocked there when popped: nothing frees a resource
  before the next completion batch), which saves an instant-queue push and pop for ~0.4 of the
  completions of the bench model.
- **Completions**: a binary heap of slots keyed by (completion time, start sequence), keys
  stored in heap order, bottom-up pops; all completions of one instant are applied (in start
  order) before the scan, zero-duration firings form the next batch of the same instant. The
  last completion of a batch is left at the root (``hole``) and the next start replaces it with
  one sift-down instead of a pop and a push (ps starts, ps re-rates, the next batch and the end
  of the run pop it first); keys (time, start sequence) are unique, so the order is unchanged.
- **Processor sharing**: each ps resource keeps its holder slots; when the holder set changes,
  every holder's remaining work is brought up to date and its completion key is moved in the
  heap, rates ``min over its ps resources of min(1, cap/n)``.
- **Durations**: firing k of transition t lasts draw k of t's own stream (:mod:`sgdnet.engine.rng`:
  counter-based, so a draw does not depend on the order events are processed in); the kernel keeps
  each stream's base and counter (``sb``, ``sk``). Log-normal (ziggurat) and exponential draws are
  inlined in the start path with the generator state in a register.
- **Gates and modulators** are evaluated inside the enabling test and at starts/completions.
- **Random switches** (``F_SW``): when the candidate about to start is weighted,
  :func:`_sw_pick` collects the weighted candidates of its priority class that could start (the
  instant queue and the queues of resources with a free server that weighted transitions hold)
  and draws one by weight; a net with fewer than two weighted transitions never gets there.
- **Statistics**: the marking integral (one update per marking change), sojourns (a slot keeps
  its request time) and, when the histogram arrays have rows, log-linear wait and sojourn
  histograms.
- **Phases**: the event loop of :func:`run_replication` is A (re-evaluate the dirty
  transitions: :func:`_degree`, :func:`_requests`, then the candidate queues), B (start the
  first candidate: :func:`_consume`, :func:`_q_hold`, :func:`_duration`, a slot,
  :func:`_e_start` or :func:`_ps_hold`) and C
  (flows: :func:`_flows_star`, :func:`_flows_star_move` or the full allocation, then
  :func:`_flows_heads`; the periodic search's checkpoints; the batch of completions: :func:`_e_drop`,
  releases, :func:`_ps_release`, :func:`_deposit`, :func:`_gate_count`, :func:`_count_start`). The phases and the queue operations of the hot path (:func:`_iq_append`,
  :func:`_q_take`) are helpers that LLVM always inlines into the loop (``_phase``), so the
  loop's machine code is what it was when they were written out there.
- **Helpers** are compiled with ``_nrt=False``: array arguments then carry no reference-count
  traffic, which otherwise dominated the event loop. Those that only jitted code calls (``_inner``)
  are compiled without numba's CPython and C wrappers, which a cold compile would otherwise
  build, optimise and emit for each of them.

The kernel assumes a valid compiled net (see :mod:`sgdnet.net.compiled`) and never raises; it
reports a status code: 0 done, 1 deadlock, 2 event budget exhausted, 3 time does not advance,
4 needs more room, 5 halted by the caller (the ``halt`` flag: how Ctrl-C reaches a running kernel).

Every code it reads or writes is a named module-level integer, which numba folds into the
machine code: the status codes and output slots of :mod:`sgdnet.engine.abi`, the distribution
codes ``CODE_*`` of :mod:`sgdnet.dists`, and the resource disciplines ``DISC_*``, gate kinds
``GATE_*`` and modulator kinds ``MOD_*`` of :mod:`sgdnet.net.compiled`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..dists import CODE_DET, CODE_EXP, CODE_LOGN  # the codes the kernel reads (rng has the rest)
from ..net.compiled import (  # resource disciplines, gate and modulator kinds, folded likewise
    DISC_FIFO,
    DISC_FLOW,
    DISC_PS,
    GATE_DYNAMIC_LAG,
    GATE_LAG,
    MOD_IID,
    MOD_MARKOV,
)
from ..results import HIST_BINS, HIST_KEY0, HIST_LO, HIST_SUB_BITS
from .abi import (  # the interface's slots and codes (sgdnet.engine.abi), folded as constants
    GROW_HOLDERS,
    GROW_REQUESTS,
    GROW_SLOTS,
    OF_CYCLE,
    OF_NOW,
    OF_T0,
    OF_T1,
    OI_EVENTS,
    OI_GROW,
    OI_NGLOG,
    OI_NREC,
    OI_NSTEPS,
    OI_NTRACE,
    OI_PERIOD,
    OI_PSKIP,
    OI_PSTART,
    OI_PWSKIP,
    OI_STATUS,
    ST_BUDGET,
    ST_DEADLOCK,
    ST_GROW,
    ST_HALTED,
    ST_OK,
    ST_ZENO,
)
from .layout import (  # the row tables' columns and the flag bits, shared with periodic.py
    F_CNT,
    F_FLOW,
    F_GUARD,
    F_INH,
    F_JOIN,
    F_MOD,
    F_PS,
    F_QRES,
    F_RS,
    F_S1,
    F_SELF,
    F_STEP,
    F_SW,
    F_W1,
    IN_IH,
    N_TD,
    N_TF,
    N_TS,
    NONE,
    TD_ACT,
    TD_CPOS,
    TD_DEG,
    TD_FROM,
    TD_RQCAP,
    TD_RQHEAD,
    TD_RQOFF,
    TD_WHERE,
    TF_KTIME,
    TF_PAR0,
    TF_PAR1,
    TS_CODE,
    TS_FL,
    TS_GUARD,
    TS_IN0,
    TS_IN1,
    TS_MOD,
    TS_OUT0,
    TS_OUT1,
    TS_PCLS,
    TS_PS0,
    TS_PS1,
    TS_Q0,
    TS_Q1,
    TS_RANK,
    TS_SERV,
)
from .periodic import (  # periodic regimes of deterministic runs: found, then skipped
    N_PF,
    N_PFF,
    PF_CEVENTS,
    PF_CGLOG,
    PF_CREC,
    PF_CSEQ,
    PF_CYC,
    PF_NEXT,
    PF_PER,
    PF_SKIP,
    PF_START,
    PF_STATE,
    PF_STRIDE,
    PF_WSKIP,
    PZ_HIST,
    PZ_OFF,
    PZ_RESTART,
    _pa_sizes,
    _pa_step,
    _pz_copy,
    _pz_core,
    _pz_gates,
    _pz_jump,
    _pz_links,
    _pz_live,
    _pz_restart,
    _pz_room,
    _pz_search,
    _pz_shift_rest,
    _pz_shift_slots,
    _pz_slots,
    _pz_unlive,
)
from .rng import (
    draw,
    exponential_draw,
    lognormal_draw,
    replication_bases,
    uniform_draw,
    uniform_pair,
)

#: the files whose code (inlined samplers) or constants this module's machine code embeds: numba
#: keys the cache by this file only, so sgdnet.engine.jitcache recompiles when one of them changed
JIT_DEPENDS = ("rng.py", "abi.py", "layout.py", "periodic.py", "../dists.py", "../net/compiled.py", "../results.py")

# ------------------------------------------------------------------ constants
# random numbers: sgdnet.engine.rng (one counter-based stream per transition, modulator and the
# random switches; the kernel keeps each stream's base and draw counter)
_U = np.uint64
# integer arguments of helpers as int64 values, not literals: numba compiles a helper once per
# distinct argument types, and a literal 0 is a type of its own (Literal[int](0))
_I0, _I1, _IM1 = (np.int64(k) for k in (0, 1, -1))
# and a bool argument as a bool value: a variable first set from a literal False is typed
# Literal[bool](False) until type inference unifies it, and a helper it is passed to is compiled
# for both types
_FALSE, _TRUE = np.bool_(False), np.bool_(True)
#: The decorator of the helpers only jitted code calls: without the CPython and C wrappers numba
#: otherwise generates, optimises and emits for every compiled function (Python-side argument
#: unboxing, never used for these; ~1/3 less LLVM work on a cold compile of the kernel). The
#: helpers also called from Python (``sample``, the instant-queue functions) keep them.
_inner = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
              no_cfunc_wrapper=True, forceinline=False)
#: The decorator of the event loop's phases and hot queue operations: helpers (``_nrt=False``, at
#: most 30 arguments, so a call takes no array references) that LLVM always inlines into
#: :func:`run_replication`, whose machine code is then the one it had with their code written
#: out there. (numba's own ``inline="always"`` inlines the IR instead, and the NRT-enabled
#: kernel then took and dropped a reference to every array argument at every inlined call:
#: 0.36-0.51x the speed on the anchors' nets.) ``forceinline`` passes to callees that do not
#: set it, so ``_inner`` and the other helpers they call set it to False.
_phase = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
              no_cfunc_wrapper=True, forceinline=True)


HALT_POLL = 4096  # completions between two reads of the halt flag
WORK_PER_EVENT = 16  # holders re-rated (ps) or flows re-allocated that count as one completion
# a transition with more input arcs than this is a join: its degree test starts at a watched arc
JOIN_ARCS = 4

HIST_SUB_BITS_SHIFT = 52 - HIST_SUB_BITS  # float64 bits -> (biased exponent, leading mantissa bits)


# ------------------------------------------------------------ candidate heaps
@_inner
def _cless(a, b, TS, TF):
    pa = TS[a, TS_PCLS]
    pb = TS[b, TS_PCLS]
    if pa != pb:
        return pa < pb
    ta = TF[a, TF_KTIME]
    tb = TF[b, TF_KTIME]
    if ta != tb:
        return ta < tb
    return TS[a, TS_RANK] < TS[b, TS_RANK]


@_inner
def _c_up(h, base, i, TD, TS, TF):
    x = h[base + i]
    while i > 0:
        par = (i - 1) >> 1
        y = h[base + par]
        if _cless(x, y, TS, TF):
            h[base + i] = y
            TD[y, TD_CPOS] = i
            i = par
        else:
            break
    h[base + i] = x
    TD[x, TD_CPOS] = i


@_inner
def _c_down(h, base, n, i, TD, TS, TF):
    x = h[base + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _cless(h[base + c + 1], h[base + c], TS, TF):
            c += 1
        y = h[base + c]
        if _cless(y, x, TS, TF):
            h[base + i] = y
            TD[y, TD_CPOS] = i
            i = c
        else:
            break
    h[base + i] = x
    TD[x, TD_CPOS] = i


@_inner
def _c_push(h, base, n, t, TD, TS, TF):
    h[base + n] = t
    _c_up(h, base, n, TD, TS, TF)
    return n + 1


@_inner
def _c_pop(h, base, n, TD, TS, TF):
    """Remove the top; the caller reads ``h[base]`` before and passes the old size."""
    n -= 1
    if n > 0:
        h[base] = h[base + n]
        _c_down(h, base, n, _I0, TD, TS, TF)
    return n


@_inner
def _c_remove(h, base, n, t, TD, TS, TF):
    i = TD[t, TD_CPOS]
    n -= 1
    if i != n:
        last = h[base + n]
        h[base + i] = last
        TD[last, TD_CPOS] = i
        if i > 0 and _cless(last, h[base + ((i - 1) >> 1)], TS, TF):
            _c_up(h, base, i, TD, TS, TF)
        else:
            _c_down(h, base, n, i, TD, TS, TF)
    return n


# ------------------------------------------------------------ sorted ring queues
# A fifo resource's waiting transitions: a ring buffer in qh[base : base + cap] kept sorted by
# the scan key (keys do not change while a transition waits), so the head is the minimum. A
# newcomer usually has the latest request time and is placed after one comparison, and the head
# leaves in O(1), where a heap of the ~50-280 waiting transfers at a PS link costs ~2 log n
# scattered key comparisons per promotion. TD_CPOS holds the physical ring index.
@_inner
def _d_push(h, base, cap, head, n, t, TD, TS, TF):
    p = head + n
    if p >= cap:
        p -= cap
    k = n
    while k > 0:
        pr = p - 1
        if pr < 0:
            pr += cap
        y = h[base + pr]
        if _cless(t, y, TS, TF):
            h[base + p] = y
            TD[y, TD_CPOS] = p
            p = pr
            k -= 1
        else:
            break
    h[base + p] = t
    TD[t, TD_CPOS] = p
    return n + 1


@_inner
def _d_remove(h, base, cap, head, n, t, TD):
    """Remove t (anywhere in the ring): the elements after it move one place forward."""
    p = TD[t, TD_CPOS]
    li = p - head
    if li < 0:
        li += cap
    for _j in range(li, n - 1):
        nx = p + 1
        if nx == cap:
            nx = 0
        y = h[base + nx]
        h[base + p] = y
        TD[y, TD_CPOS] = p
        p = nx
    return n - 1


# ------------------------------------------------------------ the instant queue
# The candidates to examine at the current instant: a ring buffer ih[0 : cap] kept sorted by the
# scan key (head = minimum), since candidates mostly arrive in key order (dirty transitions are
# re-evaluated in arc order, usually rank order, and new requests carry the current time): a
# newcomer goes to the back (or the front) after one comparison, the head leaves in O(1). An
# out-of-order newcomer is moved into place while the queue is short; a long queue (IQ_RING or
# more entries) that receives one becomes a binary heap (_c_push / _c_pop / _c_remove on ih[0:n])
# until it holds at most one entry again. Keys are unique (rank breaks every tie) and do not
# change while queued, so ring and heap give the same pop order. TD_CPOS holds the physical
# ring index or the heap position.
IQ_RING = 32


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def _iq_push(ih, ihs, hd, n, heap, t, TD, TS, TF):
    """Put candidate ``t`` into the instant queue; return ``(n, hd, heap)``."""
    if heap:
        return _c_push(ih, _I0, n, t, TD, TS, TF), hd, heap
    cap = ih.size
    p = hd + n
    if p >= cap:
        p -= cap
    if n == 0:
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    pr = p - 1
    if pr < 0:
        pr += cap
    if not _cless(t, ih[pr], TS, TF):  # the common case: after the last one
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    if _cless(t, ih[hd], TS, TF):  # before the first one
        hd -= 1
        if hd < 0:
            hd += cap
        ih[hd] = t
        TD[t, TD_CPOS] = hd
        return n + 1, hd, heap
    if n < IQ_RING:
        # move the larger entries one place back
        k = n
        while k > 0:
            pr = p - 1
            if pr < 0:
                pr += cap
            y = ih[pr]
            if _cless(t, y, TS, TF):
                ih[p] = y
                TD[y, TD_CPOS] = p
                p = pr
                k -= 1
            else:
                break
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    # long and out of order: the sorted entries, moved to ih[0:n], are a valid heap
    p = hd
    for i in range(n):
        ihs[i] = ih[p]
        p += 1
        if p == cap:
            p = 0
    for i in range(n):
        y = ihs[i]
        ih[i] = y
        TD[y, TD_CPOS] = i
    return _c_push(ih, _I0, n, t, TD, TS, TF), _I0, True


@_phase
def _iq_append(ih, hd, n, heap, t, TD, TS, TF):
    """Candidate ``t`` (its key set) after the last entry of the instant queue when the queue is
    an empty ring or a sorted ring whose last key is smaller (the common case: one comparison);
    return the new size, unchanged when ``t`` must go through :func:`_iq_push` instead. The
    caller then calls :func:`_iq_push` itself (a call in the kernel, not inlined at every site)
    and marks ``t`` ``IN_IH``."""
    cap = ih.size
    p = hd + n
    if p >= cap:
        p -= cap
    ok = n == 0
    if not ok and not heap:
        y = ih[p - 1] if p > 0 else ih[cap - 1]
        a = TS[t, TS_PCLS]
        b = TS[y, TS_PCLS]
        if a != b:
            ok = a > b
        elif TF[t, TF_KTIME] != TF[y, TF_KTIME]:
            ok = TF[t, TF_KTIME] > TF[y, TF_KTIME]
        else:
            ok = TS[t, TS_RANK] > TS[y, TS_RANK]
    if ok:
        ih[p] = t
        TD[t, TD_CPOS] = p
        n += 1
    return n


@_phase
def _q_take(r, qh, qn, qhd, rq_base, r_disc, TD, TS, TF):
    """Take the head of resource ``r``'s (non-empty) waiting queue out of it and return it: the
    front of a fifo resource's sorted ring, the root of a priority resource's heap. Inlined like
    :func:`_iq_append`."""
    qb = rq_base[r]
    if r_disc[r] == DISC_FIFO:
        qd = qhd[r]
        u = qh[qb + qd]
        qd += 1
        if qd == rq_base[r + 1] - qb:
            qd = 0
        qhd[r] = qd
        qn[r] -= 1
    else:
        u = qh[qb]
        qn[r] = _c_pop(qh, qb, qn[r], TD, TS, TF)
    return u


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def _iq_pop(ih, hd, n, heap, TD, TS, TF):
    """Take the first candidate out of the (non-empty) instant queue; return ``(t, n, hd, heap)``."""
    if heap:
        t = ih[0]
        n = _c_pop(ih, _I0, n, TD, TS, TF)
        if n <= 1:
            return t, n, _I0, False
        return t, n, hd, heap
    t = ih[hd]
    hd += 1
    if hd == ih.size:
        hd = 0
    return t, n - 1, hd, heap


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def _iq_remove(ih, hd, n, heap, t, TD, TS, TF):
    """Take candidate ``t`` out of the instant queue (anywhere in it); return ``(n, hd, heap)``."""
    if heap:
        n = _c_remove(ih, _I0, n, t, TD, TS, TF)
        if n <= 1:  # ih[0] (if any) is also a ring of one entry at head 0
            return n, _I0, False
        return n, hd, heap
    cap = ih.size
    p = TD[t, TD_CPOS]
    li = p - hd
    if li < 0:
        li += cap
    if 2 * li < n:
        # the entries before it move one place back, the head too
        for _j in range(li):
            pr = p - 1
            if pr < 0:
                pr += cap
            y = ih[pr]
            ih[p] = y
            TD[y, TD_CPOS] = p
            p = pr
        hd += 1
        if hd == cap:
            hd = 0
    else:
        # the entries after it move one place forward
        for _j in range(li, n - 1):
            nx = p + 1
            if nx == cap:
                nx = 0
            y = ih[nx]
            ih[p] = y
            TD[y, TD_CPOS] = p
            p = nx
    return n - 1, hd, heap


# ------------------------------------------------------------ completion heap
# Slots ordered by (completion time, start sequence); the keys live in heap order next to the
# slot ids (ekt, eks) so comparisons read adjacent memory; pos[slot] supports key updates (ps).
@_inner
def _ekless(ta, qa, tb, qb):
    return (ta < tb) | ((ta == tb) & (qa < qb))


@_inner
def _e_place(eh, ekt, eks, pos, i, n, s, t, q):
    """Put (s, t, q) into hole i and restore heap order (moving up or down)."""
    p = (i - 1) >> 1
    if i > 0 and _ekless(t, q, ekt[p], eks[p]):  # smaller than its parent: up, else down
        _e_up(eh, ekt, eks, pos, i, s, t, q)
    else:
        _e_down(eh, ekt, eks, pos, i, n, s, t, q)


@_phase
def _e_up(eh, ekt, eks, pos, i, s, t, q):
    """Put slot ``s`` with key ``(t, q)`` into the heap's hole ``i``, moving it up past its
    larger parents. Inlined into :func:`_e_push`, :func:`_e_drop`, :func:`_e_start` and
    :func:`_e_place`."""
    while i > 0:
        p = (i - 1) >> 1
        pt = ekt[p]
        if t < pt or (t == pt and q < eks[p]):
            y = eh[p]
            eh[i] = y
            ekt[i] = pt
            eks[i] = eks[p]
            pos[y] = i
            i = p
        else:
            break
    eh[i] = s
    ekt[i] = t
    eks[i] = q
    pos[s] = i


@_phase
def _e_child(ekt, eks, i, n):
    """The smaller child of node ``i`` in a heap of ``n`` keys, the smaller of two chosen
    branch-free; ``>= n`` when ``i`` has none. The descent of :func:`_e_down` and
    :func:`_e_drop`."""
    c = 2 * i + 1
    if c + 1 < n:
        ta = ekt[c + 1]
        tb = ekt[c]
        c += np.int64((ta < tb) | ((ta == tb) & (eks[c + 1] < eks[c])))
    return c


@_phase
def _e_down(eh, ekt, eks, pos, i, n, s, t, q):
    """Put slot ``s`` with key ``(t, q)`` into hole ``i`` of a heap of ``n`` keys, moving it down
    past its smaller children. Inlined into :func:`_e_place` and :func:`_e_start`."""
    while True:
        c = _e_child(ekt, eks, i, n)
        if c >= n:
            break
        pt = ekt[c]
        if pt < t or (pt == t and eks[c] < q):
            y = eh[c]
            eh[i] = y
            ekt[i] = pt
            eks[i] = eks[c]
            pos[y] = i
            i = c
        else:
            break
    eh[i] = s
    ekt[i] = t
    eks[i] = q
    pos[s] = i


@_inner
def _e_push(eh, ekt, eks, pos, n, s, t, q):
    """Push slot ``s`` with key ``(t, q)`` on a heap of ``n`` keys; return the new size."""
    _e_up(eh, ekt, eks, pos, n, s, t, q)
    return n + 1


@_inner
def _e_pop(eh, ekt, eks, pos, n):
    """Remove the top (:func:`_e_drop`); return the new size."""
    if n == 1:
        return 0
    return _e_drop(eh, ekt, eks, pos, n)


@_phase
def _e_drop(eh, ekt, eks, pos, n):
    """Remove the top of a heap of ``n`` >= 2 keys, bottom-up: the hole descends along the
    smaller children (:func:`_e_child`), then the last element is placed in it and moved up;
    return the new size. Inlined into :func:`_e_pop` and into the kernel's completion batch."""
    n -= 1
    i = _I0  # not a literal 0: _e_up compiles once
    while True:
        c = _e_child(ekt, eks, i, n)
        if c >= n:
            break
        y = eh[c]
        eh[i] = y
        ekt[i] = ekt[c]
        eks[i] = eks[c]
        pos[y] = i
        i = c
    _e_up(eh, ekt, eks, pos, i, eh[n], ekt[n], eks[n])
    return n


# ------------------------------------------------------------------ helpers
@_inner
def _ps_rate(t, psres_ptr, psres_idx, used, r_cap):
    rate = 1.0
    for k in range(psres_ptr[t], psres_ptr[t + 1]):
        r = psres_idx[k]
        x = r_cap[r] / used[r]
        if x < rate:
            rate = x
    return rate


@_inner
def _link_cap(r, n, r_bw, re_ptr, re_val):
    """The capacity of link ``r`` carrying ``n`` flows: its bandwidth times the incast
    efficiency at ``n`` (the table's last entry beyond its end; none when ``n`` is 0 or the link
    has no table)."""
    c = r_bw[r]
    ne = re_ptr[r + 1] - re_ptr[r]
    if n > 0 and ne > 0:
        c *= re_val[re_ptr[r] + (n - 1 if n <= ne else ne - 1)]
    return c


@_inner
def _rerate(r, now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate, s_ctime, s_seq,
            eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap):
    rp = r_ps[r]
    for j in range(ps_n[rp]):
        s = ps_h[rp, j]
        rate = _ps_rate(s_trans[s], psres_ptr, psres_idx, used, r_cap)
        if rate != s_rate[s]:
            if s_ctime[s] == now:
                rem = 0.0
            else:
                rem = s_rem[s] - s_rate[s] * (now - s_last[s])
                if rem < 0.0:
                    rem = 0.0
            s_rem[s] = rem
            s_last[s] = now
            s_rate[s] = rate
            s_ctime[s] = now + rem / rate
            _e_place(eh, ekt, eks, eh_pos, eh_pos[s], eh_n, s, s_ctime[s], s_seq[s])


@_inner
def _g_less(a, b, s_vf, s_seq):
    return s_vf[a] < s_vf[b] or (s_vf[a] == s_vf[b] and s_seq[a] < s_seq[b])


@_inner
def _g_sift(gh, rp, n, i, s_gpos, s_vf, s_seq):
    """Restore the order of group heap ``rp`` (size ``n``) around position ``i``."""
    s = gh[rp, i]
    moved = False
    while i > 0:
        p = (i - 1) >> 1
        q = gh[rp, p]
        if _g_less(s, q, s_vf, s_seq):
            gh[rp, i] = q
            s_gpos[q] = i
            i = p
            moved = True
        else:
            break
    if not moved:
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _g_less(gh[rp, c + 1], gh[rp, c], s_vf, s_seq):
                c += 1
            q = gh[rp, c]
            if _g_less(q, s, s_vf, s_seq):
                gh[rp, i] = q
                s_gpos[q] = i
                i = c
            else:
                break
    gh[rp, i] = s
    s_gpos[s] = i


@_inner
def _g_remove(gh, rp, gn, s, s_gpos, s_vf, s_seq):
    """Take flow ``s`` out of the group heap ``rp``."""
    i = s_gpos[s]
    n = gn[rp] - 1
    gn[rp] = n
    if i != n:
        gh[rp, i] = gh[rp, n]
        s_gpos[gh[rp, i]] = i
        _g_sift(gh, rp, n, i, s_gpos, s_vf, s_seq)


@_inner
def _e_remove(eh, ekt, eks, pos, n, s):
    """Take slot ``s`` out of the completion heap; return the new size."""
    _e_place(eh, ekt, eks, pos, pos[s], n, s, -np.inf, _IM1)
    return _e_pop(eh, ekt, eks, pos, n)


@_inner
def _flow_rem(s, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last):
    """Bytes flow ``s`` still has to move at ``now``."""
    g = s_grp[s]
    if g >= 0:
        rem = s_vf[s] - (g_V[g] + g_rate[g] * (now - g_tau[g]))
    else:
        rem = s_rem[s] - s_rate[s] * (now - s_last[s])
    return rem if rem > 0.0 else 0.0


@_inner
def _queued_busy(s, now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy):
    """Add the busy time firing ``s``, still running at the end, gave its queued resources."""
    t = s_trans[s]
    st0 = s_start[s]
    if st0 < t0:
        st0 = t0
    for k in range(qres_ptr[t], qres_ptr[t + 1]):
        o_busy[qres_idx[k]] += now - st0


# ------------------------------------------------------------ random switches
@_inner
def _sw_ok(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
    """Whether candidate ``a`` is a weighted transition competing with ``t`` (same priority class
    and priority) whose queued resources all have a free server."""
    if sw_w[a] <= 0.0 or sw_prio[a] != sw_prio[t] or TS[a, TS_PCLS] != TS[t, TS_PCLS]:
        return False
    for k in range(TS[a, TS_Q0], TS[a, TS_Q1]):
        r = qres_idx[k]
        if used[r] >= r_cap[r]:
            return False
    return True


@_inner
def _sw_heap(h, base, n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, nc, stk):
    """Append to ``cand`` the entries of heap ``h[base:base+n]`` that :func:`_sw_ok` admits.

    Entries of ``t``'s priority class form a subtree at the root (the class leads the key, and
    no entry is smaller than ``t``): a depth-first walk pruned at the first larger class."""
    if n == 0:
        return nc
    ns = 1
    stk[0] = 0
    while ns > 0:
        ns -= 1
        i = stk[ns]
        a = h[base + i]
        if TS[a, TS_PCLS] > TS[t, TS_PCLS]:
            continue
        if _sw_ok(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
            cand[nc] = a
            nc += 1
        c = 2 * i + 1
        if c < n:
            stk[ns] = c
            ns += 1
        if c + 1 < n:
            stk[ns] = c + 1
            ns += 1
    return nc


@_inner
def _sw_ring(h, base, cap, head, n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, nc):
    """:func:`_sw_heap` for a fifo resource's sorted ring: ``t``'s priority class leads it."""
    p = head
    for _j in range(n):
        a = h[base + p]
        if TS[a, TS_PCLS] > TS[t, TS_PCLS]:
            break
        if _sw_ok(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
            cand[nc] = a
            nc += 1
        p += 1
        if p == cap:
            p = 0
    return nc


@_inner
def _sw_pick(t, ih, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TS, TF, sw_w, sw_prio, sw_res,
             qres_idx, used, r_cap, cand, stk, sb, sk):
    """The random switch: ``t`` (weighted, able to start, the scan's next start) or a weighted
    candidate competing with it, drawn with probability proportional to weight. One uniform is drawn
    only when there are two or more to choose from; they are ordered by rank first."""
    cand[0] = t
    if ih_heap:
        nc = _sw_heap(ih, _I0, ih_n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, _I1, stk)
    else:
        nc = _sw_ring(ih, _I0, ih.size, ih_hd, ih_n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap,
                      cand, _I1)
    for j in range(sw_res.size):
        r = sw_res[j]
        if qn[r] > 0 and used[r] < r_cap[r]:
            if r_disc[r] == DISC_FIFO:
                nc = _sw_ring(qh, rq_base[r], rq_base[r + 1] - rq_base[r], qhd[r], qn[r], t, TS, TF,
                              sw_w, sw_prio, qres_idx, used, r_cap, cand, nc)
            else:
                nc = _sw_heap(qh, rq_base[r], qn[r], t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap,
                              cand, nc, stk)
    if nc == 1:
        return t
    for i in range(1, nc):  # by rank (insertion sort: a handful of entries)
        a = cand[i]
        j = i
        while j > 0 and TS[cand[j - 1], TS_RANK] > TS[a, TS_RANK]:
            cand[j] = cand[j - 1]
            j -= 1
        cand[j] = a
    tot = 0.0
    for i in range(nc):
        tot += sw_w[cand[i]]
    i = sb.size - 1  # the random switches' stream, one draw per choice among two or more
    su = uniform_draw(sb[i], sk[i])
    sk[i] += 1
    x = su * tot
    acc = 0.0
    for i in range(nc - 1):
        acc += sw_w[cand[i]]
        if x < acc:
            return cand[i]
    return cand[nc - 1]


# ------------------------------------------------------------ sojourn / wait histograms
@_inner
def _hadd(h, r, x, hb_f, hb_i):
    """Count duration ``x`` in row ``r`` of a log-linear histogram (see :mod:`sgdnet.results`):
    the bin is read from the bits of ``x`` (``hb_f``, ``hb_i``: one float64 and its int64 view),
    since a logarithm in the event loop slowed every net by ~7%, histograms or not."""
    k = 0
    if x >= HIST_LO:
        hb_f[0] = x
        k = (hb_i[0] >> HIST_SUB_BITS_SHIFT) - HIST_KEY0
        if k >= HIST_BINS:
            k = HIST_BINS - 1
    h[r, k] += 1


# ------------------------------------------------------------ set-up and finish
@_inner
def _mod_init(nT, mod_kind, mod_par, sb, sk, d_code, d_par, d_pool, rng, modval, mk_state, mk_next):
    """Each modulator's first multiplier (an iid one's first draw, a Markov one's first state and
    sojourn), from draw 0 of its stream (row ``nT + mi``)."""
    for mi in range(mod_kind.size):
        j = nT + mi  # draw 0 of the modulator's stream
        if mod_kind[mi] == MOD_IID:
            modval[mi] = draw(sb[j], sk[j], d_code[j], d_par, j, d_pool, rng)
        else:  # a Markov modulator's first state (a uniform) and sojourn, from one draw
            sf = mod_par[mi, 0]
            mf = mod_par[mi, 1]
            ms = mod_par[mi, 2]
            ru, rv = uniform_pair(sb[j], sk[j])
            if ru < ms / (mf + ms):
                mk_state[mi] = 1
                modval[mi] = sf
                mk_next[mi] = -ms * math.log(1.0 - rv)
            else:
                mk_next[mi] = -mf * math.log(1.0 - rv)
        sk[j] += 1


@_inner
def _tables(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr,
            mod_of, psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls, rank,
            d_code, d_par, rq_off, rq_cap):
    """Fill the per-transition tables ``TS`` (flags ``F_*`` and static columns), ``TD`` and ``TF``
    (see the ``TS_*``, ``TD_*``, ``TF_*`` columns) from the compiled net's arrays."""
    nT = servers.size
    n_sw = 0
    for t in range(nT):
        if sw_w[t] > 0.0:
            n_sw += 1
    # flags: F_SELF marks transitions whose own degree after a start is not simply one less
    # (inhibitors may be released by the consumption, a dynamic_lag release is consumed)
    for t in range(nT):
        f = F_W1
        for k in range(in_ptr[t], in_ptr[t + 1]):
            if in_w[k] != 1:
                f &= ~F_W1
        if inh_ptr[t + 1] > inh_ptr[t]:
            f |= F_INH | F_SELF
        if guard[t] >= 0:
            f |= F_GUARD
            if g_kind[mem_gate[guard[t]]] == GATE_DYNAMIC_LAG:
                f |= F_SELF
        if rs_ptr[t + 1] > rs_ptr[t]:
            f |= F_RS
        if mod_of[t] >= 0:
            f |= F_MOD
        if psres_ptr[t + 1] > psres_ptr[t]:
            f |= F_PS
            if r_disc[psres_idx[psres_ptr[t]]] == DISC_FLOW:
                f |= F_FLOW
        if qres_ptr[t + 1] > qres_ptr[t]:
            f |= F_QRES
        if cnt_ptr[t + 1] > cnt_ptr[t]:
            f |= F_CNT
        if is_step[t] != 0:
            f |= F_STEP
        if servers[t] == 1:
            f |= F_S1
        if in_ptr[t + 1] - in_ptr[t] > JOIN_ARCS:
            f |= F_JOIN
        if n_sw >= 2 and sw_w[t] > 0.0:
            f |= F_SW
        TS[t, TS_FL] = f

    for t in range(nT):
        TS[t, TS_SERV] = servers[t]
        TS[t, TS_IN0] = in_ptr[t]
        TS[t, TS_IN1] = in_ptr[t + 1]
        TS[t, TS_OUT0] = out_ptr[t]
        TS[t, TS_OUT1] = out_ptr[t + 1]
        TS[t, TS_Q0] = qres_ptr[t]
        TS[t, TS_Q1] = qres_ptr[t + 1]
        TS[t, TS_PCLS] = pcls[t]
        TS[t, TS_RANK] = rank[t]
        TS[t, TS_CODE] = d_code[t]
        TS[t, TS_GUARD] = guard[t]
        TS[t, TS_MOD] = mod_of[t]
        TS[t, TS_PS0] = psres_ptr[t]
        TS[t, TS_PS1] = psres_ptr[t + 1]
        TD[t, TD_WHERE] = NONE
        TD[t, TD_FROM] = NONE
        TD[t, TD_RQOFF] = rq_off[t]
        TD[t, TD_RQCAP] = rq_cap[t]
        TF[t, TF_PAR0] = d_par[t, 0]
        TF[t, TF_PAR1] = d_par[t, 1]


@_inner
def _finish(now, t0, m, o_ptok, o_busy, eh, eh_n, s_trans, s_start, qres_ptr, qres_idx, r_disc,
            r_ps, r_cap, used, blast, gh, gn, ps_h, ps_n, s_inh, s_w0, s_grp, s_vf, g_V, g_rate,
            g_tau, s_rem, s_rate, s_last, r_bw):
    """At the end of a completed run (``now`` = t1): the markings' integrals over [t0, t1], and the
    busy time of the firings still running."""
    nP = m.size
    nR = r_cap.size
    for p in range(nP):  # the markings' integrals over [t0, t1]
        o_ptok[p] = m[p] * (now - t0) - o_ptok[p]
    # firings still running at t1: queued resources by firing, ps ones by integration;
    # flows waiting behind their group's head are not in the completion heap
    for i in range(eh_n):
        _queued_busy(eh[i], now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy)
    for r in range(nR):
        if r_disc[r] == DISC_FLOW:
            for j in range(gn[r_ps[r]]):
                s = gh[r_ps[r], j]
                if not s_inh[s]:
                    _queued_busy(s, now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy)
    for r in range(nR):
        if r_disc[r] == DISC_PS:
            b = used[r]
            if b > r_cap[r]:
                b = r_cap[r]
            o_busy[r] += b * (now - blast[r])
        elif r_disc[r] == DISC_FLOW:
            # a link's busy time is the bytes it carried over its bandwidth: add what the
            # flows still on it moved since the window opened (or since they started)
            rp = r_ps[r]
            for j in range(ps_n[rp]):
                s = ps_h[rp, j]
                o_busy[r] += (s_w0[s] - _flow_rem(s, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem,
                                                  s_rate, s_last)) / r_bw[r]


# ------------------------------------------------------------ flows (max-min fair sharing)
@njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
      no_cfunc_wrapper=True, inline="always")
def _fix_flow(s, lvl, bott, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans, psres_ptr, psres_idx):
    """Progressive filling: flow ``s`` gets the rate ``lvl`` (bottleneck link ``bott``, -1 for
    its own cap), which every link it crosses gives up."""
    f_fixed[s] = True
    f_rate[s] = lvl
    f_bott[s] = bott
    t = s_trans[s]
    for k in range(psres_ptr[t], psres_ptr[t + 1]):
        r2 = psres_idx[k]
        f_rc[r2] -= lvl
        f_nu[r2] -= 1


@_inner
def _flows_alloc(now, used, nsd, f_seeds, f_epoch, f_lmark, f_fmark, f_CL, f_CF, f_rc, f_nu,
                 f_rate, f_fixed, f_lvl, f_bott, g_rate, g_V, g_tau, ps_h, ps_n, s_trans,
                 psres_ptr, psres_idx, r_ps, r_bw, re_ptr, re_val, fl_cap):
    """The full max-min fair allocation of the flows connected to the links ``f_seeds[:nsd]``
    (section C of :func:`run_replication`, when its single-bottleneck fast path does not apply),
    first of three steps (then :func:`_flows_move`, :func:`_flows_single`): progressive filling
    over that component; return ``(fu_nl, fu_nf, fu_cap)``: its links ``f_CL[:fu_nl]``, its flows
    ``f_CF[:fu_nf]`` with their rates ``f_rate`` and bottlenecks ``f_bott``, and whether a flow
    of it is capped.

    Functions of their own, to shorten run_replication's cold compile (numba's live-variable
    maps of a function cost more than linearly in its size), each called with at most 30
    arguments: CPython compiles a call of more into one that packs them in a tuple
    (CALL_FUNCTION_EX), and numba then takes a reference to every array of it and drops it after
    the call, two atomic operations per array (its reference-count pruning keeps them in this
    function's control flow). Written as one call of 48 arguments, that was
    26 % of a fine sync-PS run of one worker, where every flow ties on two links of one speed."""
    f_epoch[0] += 1
    fu_ep = f_epoch[0]
    fu_nl = 0
    fu_nf = 0
    for i in range(nsd):
        r = f_seeds[i]
        if f_lmark[r] != fu_ep:
            f_lmark[r] = fu_ep
            f_CL[fu_nl] = r
            fu_nl += 1
    fu_cap = False
    i = 0
    while i < fu_nl:
        r = f_CL[i]
        i += 1
        rp = r_ps[r]
        for j in range(ps_n[rp]):
            s = ps_h[rp, j]
            if f_fmark[s] != fu_ep:
                f_fmark[s] = fu_ep
                f_CF[fu_nf] = s
                fu_nf += 1
                f_fixed[s] = False
                t = s_trans[s]
                if fl_cap[t] < np.inf:
                    fu_cap = True
                for k in range(psres_ptr[t], psres_ptr[t + 1]):
                    r2 = psres_idx[k]
                    if f_lmark[r2] != fu_ep:
                        f_lmark[r2] = fu_ep
                        f_CL[fu_nl] = r2
                        fu_nl += 1
    for i in range(fu_nl):
        r = f_CL[i]
        # every clock of the component to now, at the old rates
        g_V[r] += g_rate[r] * (now - g_tau[r])
        g_tau[r] = now
        f_lvl[r] = -1.0
        fu_n = used[r]
        fu_c = _link_cap(r, fu_n, r_bw, re_ptr, re_val)
        f_rc[r] = fu_c
        f_nu[r] = fu_n
    # progressive filling
    fu_left = fu_nf
    while fu_left > 0:
        fu_lvl = np.inf
        fu_arg = -1
        for i in range(fu_nl):
            r = f_CL[i]
            if f_nu[r] > 0:
                fu_x = f_rc[r] / f_nu[r]
                if fu_x < fu_lvl:
                    fu_lvl = fu_x
                    fu_arg = r
        fu_argf = -1
        if fu_cap:
            for i in range(fu_nf):
                s = f_CF[i]
                if not f_fixed[s] and fl_cap[s_trans[s]] < fu_lvl:
                    fu_lvl = fl_cap[s_trans[s]]
                    fu_argf = s
        if fu_argf >= 0:
            _fix_flow(fu_argf, fu_lvl, _IM1, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans,
                      psres_ptr, psres_idx)
            fu_left -= 1
        else:
            f_lvl[fu_arg] = fu_lvl
            rp = r_ps[fu_arg]
            for j in range(ps_n[rp]):
                s = ps_h[rp, j]
                if not f_fixed[s]:
                    _fix_flow(s, fu_lvl, fu_arg, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans,
                              psres_ptr, psres_idx)
                    fu_left -= 1
    return fu_nl, fu_nf, fu_cap


@_inner
def _flows_move(now, fu_nf, f_CF, f_bott, f_rate, g_V, g_head, gh, gn, r_ps, s_grp, s_vf,
                s_ctime, s_rem, s_rate, s_last, s_gpos, s_seq, s_inh, eh, ekt, eks, eh_pos, eh_n):
    """Second step of a full allocation (:func:`_flows_alloc`): the flows whose bottleneck
    changed move their remaining bytes to their new group's clock, or to their own completion
    time; return the completion heap's new size."""
    # flows whose bottleneck changed move (their remaining bytes) to their new group
    for i in range(fu_nf):
        s = f_CF[i]
        fu_g = s_grp[s]
        fu_g2 = f_bott[s]
        if fu_g == fu_g2 and fu_g >= 0:
            continue
        if fu_g >= 0:
            fu_rem = s_vf[s] - g_V[fu_g]
        elif fu_g == -1:
            fu_rem = 0.0 if s_ctime[s] == now else s_rem[s] - s_rate[s] * (now - s_last[s])
        else:  # a new flow
            fu_rem = s_rem[s]
        if fu_rem < 0.0:
            fu_rem = 0.0
        if fu_g >= 0:
            _g_remove(gh, r_ps[fu_g], gn, s, s_gpos, s_vf, s_seq)
            if g_head[fu_g] == s:
                g_head[fu_g] = -1
                eh_n = _e_remove(eh, ekt, eks, eh_pos, eh_n, s)
                s_inh[s] = False
        if fu_g2 >= 0:
            if s_inh[s]:  # an individual flow joins a group: only heads are in the heap
                eh_n = _e_remove(eh, ekt, eks, eh_pos, eh_n, s)
                s_inh[s] = False
            s_vf[s] = g_V[fu_g2] + fu_rem
            rp = r_ps[fu_g2]
            gh[rp, gn[rp]] = s
            s_gpos[s] = gn[rp]
            gn[rp] += 1
            _g_sift(gh, rp, gn[rp], gn[rp] - 1, s_gpos, s_vf, s_seq)
        elif fu_g == -1 and f_rate[s] == s_rate[s]:
            pass
        else:
            s_rem[s] = fu_rem
            s_last[s] = now
            s_rate[s] = f_rate[s]
            s_ctime[s] = now + fu_rem / f_rate[s]
            if s_inh[s]:
                _e_place(eh, ekt, eks, eh_pos, eh_pos[s], eh_n, s, s_ctime[s], s_seq[s])
            else:
                eh_n = _e_push(eh, ekt, eks, eh_pos, eh_n, s, s_ctime[s], s_seq[s])
                s_inh[s] = True
        s_grp[s] = fu_g2
    return eh_n


@_inner
def _flows_single(fu_nf, fu_nl, fu_cap, f_CF, f_CL, f_bott, f_pure, f_comp, f_m, used, r_bw,
                  re_ptr, re_val):
    """Last step of a full allocation (:func:`_flows_alloc`): whether the component now has a
    single bottleneck, remembered for section C's fast path."""
    # is the result a single-bottleneck component (every flow fixed by one link L)?
    # then remember it for the fast path: L, and the smallest fair share of its
    # other links (each of their flows crosses L, so these are first-round shares)
    fu_root = f_bott[f_CF[0]] if fu_nf > 0 else -1
    fu_pure = fu_root >= 0 and not fu_cap
    for i in range(1, fu_nf if fu_pure else 0):
        if f_bott[f_CF[i]] != fu_root:
            fu_pure = False
            break
    fu_m = np.inf
    for i in range(fu_nl):
        r = f_CL[i]
        f_pure[r] = False
        f_comp[r] = fu_root if fu_pure else -1
        if fu_pure and r != fu_root and used[r] > 0:
            fu_n = used[r]
            fu_c = _link_cap(r, fu_n, r_bw, re_ptr, re_val)
            fu_x = fu_c / fu_n
            if fu_x < fu_m:
                fu_m = fu_x
    if fu_pure:
        f_pure[fu_root] = True
        f_m[fu_root] = fu_m


# ------------------------------------------------------------------ phases of run_replication
# Each is inlined by LLVM into run_replication (``_phase``), so the kernel's machine code keeps
# no call where these phases were written out; they take the arrays they touch and return the
# loop scalars they change.


@_phase
def _degree(t, f, d, m, in_place, in_w, inh_ptr, inh_place, inh_thr, watch, TS, mem_gate, gcnt,
            gmin, g_kind, g_s, grel, g_slow, g_cap):
    """Enabling: the degree of ``t`` (flags ``f``) with ``d`` > 0 servers free, bounded by its
    input places (tokens // weight), 0 when an inhibitor place reaches its threshold or ``t``'s
    gate member may not start (lag: lead over the slowest member > ``s``; dynamic lag: lead >
    ``s_lower`` without a release, or over the cap). A test stops at the first empty input; a
    join (``F_JOIN``) starts at the input that blocked it last time (``watch``)."""
    if f & F_JOIN:
        # a join is usually re-tested when one of many inputs gets a token while another
        # is still empty: test the arc that blocked last time first, then scan from it
        i0 = TS[t, TS_IN0]
        nin = TS[t, TS_IN1] - i0
        j = watch[t]
        for _i in range(nin):
            k = i0 + j
            v = m[in_place[k]] // in_w[k]
            if v < d:
                d = v
                if d == 0:
                    watch[t] = j
                    break
            j += 1
            if j == nin:
                j = 0
    elif f & F_W1:
        for k in range(TS[t, TS_IN0], TS[t, TS_IN1]):
            v = m[in_place[k]]
            if v < d:
                d = v
                if d == 0:
                    break
    else:
        for k in range(TS[t, TS_IN0], TS[t, TS_IN1]):
            v = m[in_place[k]] // in_w[k]
            if v < d:
                d = v
                if d == 0:
                    break
    if d > 0 and f & F_INH:
        for k in range(inh_ptr[t], inh_ptr[t + 1]):
            if m[inh_place[k]] >= inh_thr[k]:
                d = 0
                break
    if d > 0 and f & F_GUARD:
        gm = TS[t, TS_GUARD]
        if gm >= 0:
            g = mem_gate[gm]
            lead = gcnt[gm] - gmin[g]
            if g_kind[g] == GATE_LAG:
                if lead > g_s[g]:
                    d = 0
            elif (grel[gm] == 0 and lead > g_slow[g]) or (g_cap[g] >= 0 and lead > g_cap[g]):
                d = 0
    return d


@_phase
def _duration(t, f, now, nT, TS, TF, sb, sk, d_code, d_par, d_pool, rng, rs_ptr, rs_mod, modval,
              mod_kind, mod_par, mk_state, mk_next):
    """Start: the duration of ``t``'s next firing, draw ``sk[t]`` of its stream (log-normal and
    exponential draws inlined), times its modulator's value; first the modulators ``t``
    resamples (``F_RS``) draw their next value, and a Markov modulator catches up with ``now``."""
    if f & F_RS:
        for k in range(rs_ptr[t], rs_ptr[t + 1]):
            mi = rs_mod[k]
            j = nT + mi
            modval[mi] = draw(sb[j], sk[j], d_code[j], d_par, j, d_pool, rng)
            sk[j] += 1
    code = TS[t, TS_CODE]
    if code == CODE_DET:
        dur = TF[t, TF_PAR0]
    else:  # draw k of t's stream
        if code == CODE_LOGN:
            dur = lognormal_draw(sb[t], sk[t], TF[t, TF_PAR0], TF[t, TF_PAR1])
        elif code == CODE_EXP:
            dur = exponential_draw(sb[t], sk[t], TF[t, TF_PAR0])
        else:
            dur = draw(sb[t], sk[t], code, d_par, t, d_pool, rng)
        sk[t] += 1
    mi = TS[t, TS_MOD]
    if f & F_MOD:
        if mod_kind[mi] == MOD_MARKOV:
            while mk_next[mi] <= now:
                st = 1 - mk_state[mi]
                mk_state[mi] = st
                j = nT + mi  # the next draw of the modulator's stream
                rv = uniform_draw(sb[j], sk[j])
                sk[j] += 1
                if st == 1:
                    modval[mi] = mod_par[mi, 0]
                    mk_next[mi] += -mod_par[mi, 2] * math.log(1.0 - rv)
                else:
                    modval[mi] = 1.0
                    mk_next[mi] += -mod_par[mi, 1] * math.log(1.0 - rv)
        dur *= modval[mi]
    return dur


@_phase
def _e_start(eh, ekt, eks, pos, n, hole, s, tc, qs):
    """Start: slot ``s`` into the completion heap with key ``(tc, qs)``; return the heap's size.
    With a ``hole`` (the batch's last completion, applied, left at the root) the new key replaces
    it and sifts down; else it is pushed and sifts up."""
    if hole:
        _e_down(eh, ekt, eks, pos, _I0, n, s, tc, qs)
        return n
    _e_up(eh, ekt, eks, pos, n, s, tc, qs)
    return n + 1


@_phase
def _requests(t, d, cur, now, TD, rq_pool, used):
    """Enabling: ``t``'s degree rose from ``cur`` to ``d`` (more than one server): ``d - cur``
    requests made ``now`` join its ring of request times, which moves to a larger place of
    ``rq_pool`` (twice the room, or ``d``) when full. Returns the pool's used length, -1 when the
    pool has no room (the kernel stops with ``ST_GROW``)."""
    cap = TD[t, TD_RQCAP]
    if d > cap:
        newcap = 2 * cap
        if newcap < d:
            newcap = d
        if used + newcap > rq_pool.size:
            return -1
        off = TD[t, TD_RQOFF]
        h = TD[t, TD_RQHEAD]
        for i in range(cur):
            j = h + i
            if j >= cap:
                j -= cap
            rq_pool[used + i] = rq_pool[off + j]
        TD[t, TD_RQOFF] = used
        TD[t, TD_RQHEAD] = 0
        TD[t, TD_RQCAP] = newcap
        used += newcap
        cap = newcap
    off = TD[t, TD_RQOFF]
    j = TD[t, TD_RQHEAD] + cur
    if j >= cap:
        j -= cap
    for _i in range(d - cur):
        rq_pool[off + j] = now
        j += 1
        if j == cap:
            j = 0
    return used


@_phase
def _ps_hold(t, f, s, now, rt, counting, hist, TS, psres_idx, r_ps, used, r_cap, o_busy, blast,
             o_wsum, o_wn, o_hw, hb_f, hb_i, ps_h, ps_n, s_php):
    """Start: firing slot ``s`` of ``t`` (requested at ``rt``) becomes a holder of each of its
    shared resources (ps, links); while counting, a ps resource's busy time is brought up to
    ``now`` first and the wait is recorded. False when a resource has no room for one more holder
    (the kernel stops with ``ST_GROW``)."""
    hcap = ps_h.shape[1]
    j = 0
    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
        r = psres_idx[k]
        rp = r_ps[r]
        if counting:
            if not f & F_FLOW:
                b = used[r]
                if b > r_cap[r]:
                    b = r_cap[r]
                o_busy[r] += b * (now - blast[r])
                blast[r] = now
            o_wsum[r] += now - rt
            o_wn[r] += 1
            if hist:
                _hadd(o_hw, r, now - rt, hb_f, hb_i)
        used[r] += 1
        if ps_n[rp] == hcap:
            return False
        ps_h[rp, ps_n[rp]] = s
        s_php[s, j] = ps_n[rp]
        ps_n[rp] += 1
        j += 1
    return True


@_phase
def _ps_release(t, f, s, now, counting, TS, psres_ptr, psres_idx, r_ps, used, r_cap, o_busy,
                blast, ps_h, ps_n, s_php, s_trans, touched, tl, nt):
    """Complete: firing slot ``s`` of ``t`` leaves the holders of its shared resources (swapped
    with the last holder; while counting, a ps resource's busy time is brought up to ``now``
    first); each resource goes on the list ``tl`` of resources whose holders are re-rated after
    the batch (once). Returns that list's length."""
    j = 0
    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
        r = psres_idx[k]
        rp = r_ps[r]
        if counting and not f & F_FLOW:
            b = used[r]
            if b > r_cap[r]:
                b = r_cap[r]
            o_busy[r] += b * (now - blast[r])
            blast[r] = now
        used[r] -= 1
        # remove slot s from r's holders (swap with the last)
        i = s_php[s, j]
        last = ps_n[rp] - 1
        if i != last:
            s2 = ps_h[rp, last]
            ps_h[rp, i] = s2
            t2 = s_trans[s2]
            jj = 0
            for k2 in range(psres_ptr[t2], psres_ptr[t2 + 1]):
                if psres_idx[k2] == r:
                    s_php[s2, jj] = i
                    break
                jj += 1
        ps_n[rp] = last
        if not touched[r]:
            touched[r] = True
            tl[nt] = r
            nt += 1
        j += 1
    return nt


@_inner
def _count_start(now, o_ptok, blast, r_disc, r_ps, ps_h, ps_n, s_w0, s_grp, s_vf, g_V, g_rate,
                 g_tau, s_rem, s_rate, s_last):
    """Counting starts ``now`` (the warm-up's last step): the marking integrals start from zero,
    the resources' busy clocks from ``now``, and each flow in progress counts only the bytes it
    has left (``s_w0``) in its links' busy time. Once per replication: an ``_inner`` helper, not
    forced inline (LLVM inlines it anyway, at its one call site)."""
    for p in range(o_ptok.size):
        o_ptok[p] = 0.0
    for r in range(blast.size):
        blast[r] = now
        if r_disc[r] == DISC_FLOW:
            rp = r_ps[r]
            for j in range(ps_n[rp]):
                s2 = ps_h[rp, j]
                s_w0[s2] = _flow_rem(s2, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate,
                                     s_last)


@_phase
def _flows_star(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr, psres_idx, used, fl_cap, f_pure,
                f_comp, f_m, f_epoch, f_lmark, r_bw, re_ptr, re_val):
    """Flows, the fast path's test: the component whose flow set changed is a star into one link
    L (``f_pure``: every flow crosses L and is bottlenecked there), and stays one: no new flow
    is capped or touches another component, and L's new fair share ``cap(L) / n`` is below every
    other changed link's share and below ``f_m[L]`` (a lower bound of the others'). Returns
    ``(L, that bound, L's share)``, L -1 when the full allocation must run. Always advances
    ``f_epoch``."""
    fq = -1
    if nfn > 0:
        t = s_trans[f_new[0]]
        for k in range(psres_ptr[t], psres_ptr[t + 1]):
            if f_pure[psres_idx[k]]:
                fq = psres_idx[k]
                break
    else:
        for i in range(nsd):
            if used[f_seeds[i]] > 0:
                fq = f_comp[f_seeds[i]]
                break
    fu_fast = fq >= 0 and f_pure[fq] and used[fq] > 0
    f_epoch[0] += 1
    fu_ep = f_epoch[0]
    for i in range(nfn if fu_fast else 0):
        # each new flow crosses L, is not capped, and its other links carry no flow of
        # another component
        t = s_trans[f_new[i]]
        fu_cross = 0
        if fl_cap[t] < np.inf:
            fu_fast = False
        for k in range(psres_ptr[t], psres_ptr[t + 1]):
            r = psres_idx[k]
            f_lmark[r] = fu_ep
            if r == fq:
                fu_cross += 1
            elif used[r] > 1 and f_comp[r] != fq:
                fu_fast = False
        if fu_cross == 0 or not fu_fast:
            fu_fast = False
            break
    fu_m = np.inf
    fu_rate = 0.0
    if fu_fast:
        fu_m = f_m[fq]
        for i in range(nsd):
            r = f_seeds[i]
            if r == fq or used[r] == 0:
                continue
            if f_comp[r] != fq and f_lmark[r] != fu_ep:
                fu_fast = False
                break
            fu_n = used[r]
            fu_c = _link_cap(r, fu_n, r_bw, re_ptr, re_val)
            fu_x = fu_c / fu_n
            if fu_x < fu_m:
                fu_m = fu_x
        fu_n = used[fq]
        fu_c = _link_cap(fq, fu_n, r_bw, re_ptr, re_val)
        fu_rate = fu_c / fu_n
        if not fu_rate < fu_m:
            fu_fast = False
    if not fu_fast:
        return -1, fu_m, fu_rate
    return fq, fu_m, fu_rate


@_phase
def _flows_star_move(now, fq, fu_m, fu_rate, nfn, nsd, f_new, f_seeds, s_trans, psres_ptr,
                     psres_idx, used, f_comp, f_m, r_ps, g_V, g_rate, g_tau, s_rem, s_vf, s_seq,
                     s_gpos, s_grp, gh, gn, f_lvl, f_CL):
    """Flows, the fast path (:func:`_flows_star` said yes): the links that lost their flows stop
    their clocks, the new flows join L's group (virtual finish: L's clock + their bytes), L's
    rate becomes ``fu_rate``; ``f_CL[0]`` = L, the one link whose group rate and head change."""
    f_m[fq] = fu_m
    # what the full allocation does to the links that left the component
    for i in range(nsd):
        r = f_seeds[i]
        if used[r] == 0:
            g_V[r] += g_rate[r] * (now - g_tau[r])
            g_tau[r] = now
            g_rate[r] = 0.0
    r = fq
    rp = r_ps[r]
    g_V[r] += g_rate[r] * (now - g_tau[r])
    g_tau[r] = now
    for i in range(nfn):
        s = f_new[i]
        t = s_trans[s]
        for k in range(psres_ptr[t], psres_ptr[t + 1]):
            f_comp[psres_idx[k]] = fq
        fu_rem = s_rem[s]
        if fu_rem < 0.0:
            fu_rem = 0.0
        s_vf[s] = g_V[r] + fu_rem
        gh[rp, gn[rp]] = s
        s_gpos[s] = gn[rp]
        gn[rp] += 1
        _g_sift(gh, rp, gn[rp], gn[rp] - 1, s_gpos, s_vf, s_seq)
        s_grp[s] = r
    f_lvl[r] = fu_rate
    f_CL[0] = r


@_phase
def _flows_heads(now, nl, f_CL, r_ps, gn, gh, g_rate, f_lvl, s_vf, g_V, g_head, s_ctime, s_seq,
                 s_inh, eh, ekt, eks, eh_pos, eh_n):
    """Flows: each of the ``nl`` links of ``f_CL`` whose allocation changed gets its group's new
    rate (``f_lvl``), and its group's head (the member of the least virtual finish) its
    completion time in the completion heap, replacing the previous head there. Returns the
    heap's size."""
    for i in range(nl):
        r = f_CL[i]
        rp = r_ps[r]
        if gn[rp] == 0:
            g_rate[r] = 0.0
            continue
        fu_rate = f_lvl[r]
        fu_h = gh[rp, 0]
        fu_rem = s_vf[fu_h] - g_V[r]
        if fu_rem < 0.0:
            fu_rem = 0.0
        fu_tc = now + fu_rem / fu_rate
        g_rate[r] = fu_rate
        fu_old = g_head[r]
        if fu_old != fu_h:
            if fu_old >= 0:
                eh_n = _e_remove(eh, ekt, eks, eh_pos, eh_n, fu_old)
                s_inh[fu_old] = False
            s_ctime[fu_h] = fu_tc
            eh_n = _e_push(eh, ekt, eks, eh_pos, eh_n, fu_h, fu_tc, s_seq[fu_h])
            s_inh[fu_h] = True
            g_head[r] = fu_h
        elif fu_tc != s_ctime[fu_h]:
            s_ctime[fu_h] = fu_tc
            _e_place(eh, ekt, eks, eh_pos, eh_pos[fu_h], eh_n, fu_h, fu_tc, s_seq[fu_h])
    return eh_n


@_phase
def _consume(t, now, t0, selfdirty, TS, in_place, in_w, m, o_ptok, dep_ptr, dep_trans, isd, dl,
             dn):
    """Start: ``t`` takes its input tokens (the marking integrals updated: ``o_ptok`` keeps
    ``sum(delta * (tau - t0))``), and each transition that reads one of those places goes on the
    dirty list ``dl`` (once; ``t`` itself only when ``selfdirty``). Returns the list's length."""
    for k in range(TS[t, TS_IN0], TS[t, TS_IN1]):
        p = in_place[k]
        o_ptok[p] -= in_w[k] * (now - t0)
        m[p] -= in_w[k]
        for q in range(dep_ptr[p], dep_ptr[p + 1]):
            u = dep_trans[q]
            if not isd[u] and (u != t or selfdirty):
                isd[u] = True
                dl[dn] = u
                dn += 1
    return dn


@_phase
def _q_hold(t, now, rt, counting, hist, TS, qres_idx, used, o_wsum, o_wn, o_hw, hb_f, hb_i):
    """Start: ``t`` (requested at ``rt``) takes a server of each of its queued resources; while
    counting, each records the wait ``now - rt`` (and its histogram)."""
    for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
        r = qres_idx[k]
        if counting:
            o_wsum[r] += now - rt
            o_wn[r] += 1
            if hist:
                _hadd(o_hw, r, now - rt, hb_f, hb_i)
        used[r] += 1


@_phase
def _deposit(t, now, t0, TS, out_place, out_w, m, o_ptok, dep_ptr, dep_trans, isd, dl, dn):
    """Complete: ``t``'s output tokens arrive (the marking integrals updated), and each
    transition that reads one of those places goes on the dirty list ``dl`` (once). Returns the
    list's length."""
    for k in range(TS[t, TS_OUT0], TS[t, TS_OUT1]):
        p = out_place[k]
        o_ptok[p] += out_w[k] * (now - t0)
        m[p] += out_w[k]
        for q in range(dep_ptr[p], dep_ptr[p + 1]):
            u = dep_trans[q]
            if not isd[u]:
                isd[u] = True
                dl[dn] = u
                dn += 1
    return dn


@_phase
def _gate_count(t, now, cnt_ptr, cnt_mem, mem_gate, g_kind, g_ptr, g_slow, g_rmax, gg_ptr,
                gg_trans, mg_ptr, mg_trans, gcnt, gmin, grel, galw, glast, gprev, isd, dl, dn,
                o_glead, o_ghist, o_glog, nglog):
    """Complete: the gate members ``t`` counts for (``F_CNT``) advance; a new slowest count
    re-tests the gate's guarded transitions, and each member's own guarded ones are re-tested;
    the member's lead is histogrammed, and a dynamic-lag member is released (or gets the
    controller's allowance, logged). Returns the dirty list's length and the log's."""
    glead_cap = o_glead.shape[1]
    glog_cap = o_glog.shape[0]
    for k in range(cnt_ptr[t], cnt_ptr[t + 1]):
        gm = cnt_mem[k]
        g = mem_gate[gm]
        old = gcnt[gm]
        gcnt[gm] = old + 1
        gprev[gm] = glast[gm]
        glast[gm] = now
        if old == gmin[g]:
            mn = gcnt[g_ptr[g]]
            for q in range(g_ptr[g] + 1, g_ptr[g + 1]):
                if gcnt[q] < mn:
                    mn = gcnt[q]
            if mn != gmin[g]:
                gmin[g] = mn
                for q in range(gg_ptr[g], gg_ptr[g + 1]):
                    u = gg_trans[q]
                    if not isd[u]:
                        isd[u] = True
                        dl[dn] = u
                        dn += 1
        for q in range(mg_ptr[gm], mg_ptr[gm + 1]):
            u = mg_trans[q]
            if not isd[u]:
                isd[u] = True
                dl[dn] = u
                dn += 1
        # lead of the member at this completion, histogrammed (last bin: that or more)
        ld = gcnt[gm] - gmin[g]
        if ld >= glead_cap:
            ld = glead_cap - 1
        o_glead[g, ld] += 1
        if g_kind[g] == GATE_DYNAMIC_LAG:
            if galw[gm] > 0:
                galw[gm] -= 1
                grel[gm] = 1
            elif gcnt[gm] - gmin[g] <= g_slow[g]:
                grel[gm] = 1
            else:
                mx = gcnt[g_ptr[g]]
                sl = g_ptr[g]
                for q in range(g_ptr[g] + 1, g_ptr[g + 1]):
                    if gcnt[q] > mx:
                        mx = gcnt[q]
                    if gcnt[q] < gcnt[sl]:
                        sl = q
                if gcnt[gm] == mx:
                    # the two-sided controller: the fastest's next pushes now + r I_f
                    # (r = 0..r_max) against the slowest's t_s + k I_s (k = 1..r_max);
                    # r* = the smallest r with the least gap; r* + 1 releases
                    i_f = glast[gm] - gprev[gm]
                    i_s = glast[sl] - gprev[sl]
                    ts = glast[sl]
                    best = 0
                    bestv = np.inf
                    for rr in range(g_rmax[g] + 1):
                        tf = now + rr * i_f
                        v = np.inf
                        for kk in range(1, g_rmax[g] + 1):
                            w = abs(tf - (ts + kk * i_s))
                            if w < v:
                                v = w
                        if v < bestv:
                            bestv = v
                            best = rr
                    if nglog < glog_cap:
                        o_glog[nglog, 0] = g
                        o_glog[nglog, 1] = best
                    nglog += 1
                    o_ghist[g, best] += 1
                    grel[gm] = 1
                    galw[gm] = best
    return dn, nglog


@njit(cache=True, nogil=True, error_model="numpy")
def run_replication(
    m0, dep_ptr, dep_trans,
    in_ptr, in_place, in_w, out_ptr, out_place, out_w, inh_ptr, inh_place, inh_thr,
    r_cap, r_disc, r_ps, r_users, rq_base,
    qres_ptr, qres_idx, psres_ptr, psres_idx,
    r_bw, re_ptr, re_val, fl_cap,
    servers, pcls, rank, is_step, mod_of, guard,
    d_code, d_par, d_pool,
    g_kind, g_s, g_slow, g_rmax, g_ptr, mem_gate, mem_counter,
    cnt_ptr, cnt_mem, gg_ptr, gg_trans, mg_ptr, mg_trans, g_cap,
    mod_kind, mod_par, rs_ptr, rs_mod, sid,
    seed, steps, warmup, max_events, zeno_limit, samples, trace_limit, cap_slots, cap_requests, cap_holders,
    period,
    o_f, o_i, o_step_t, o_step_tr, o_firings, o_busy, o_wsum, o_wn,
    o_tr_t, o_tr_s, o_tr_e, o_glog, o_ghist, o_mark, o_gcnt, o_grel, o_glead, halt, prog,
    sw_w, sw_prio, sw_res, o_ptok, o_ssum, o_sn, o_hw, o_hs,
):
    """Play one replication; write the outputs into the ``o_*`` arrays (see the module doc).

    Random switches (``sw_*``, see :data:`sgdnet.engine.abi.SWITCH_ARGS`) come after the
    control arrays, then the place and queue statistics of the counting window: ``o_ptok`` (P,)
    the time integral of each place's marking, ``o_ssum``/``o_sn`` (R,) the sojourn (completion -
    request time) sums and counts per resource held, at completions, and ``o_hw``/``o_hs``
    (R, HIST_BINS) the wait and sojourn histograms, or (0, HIST_BINS) arrays when they are not
    kept: a runtime switch, so one compiled specialization serves both (a None there compiled a
    second one, another ~30 s on a cold cache, for no measurable speed).

    ``halt`` is an int64[1] another thread may set non-zero to stop the replication early (read
    every ``HALT_POLL`` completions, sooner when completions are expensive (re-rating many ps
    holders or re-allocating many flows); the status is then ``ST_HALTED`` and the outputs are
    incomplete).
    ``prog`` (int64[1]) receives the step completions so far at the same polls and at the end,
    for a progress bar.
    """
    nP = m0.size
    nT = servers.size
    nR = r_cap.size
    nG = g_kind.size
    nM = mod_kind.size
    nMem = mem_gate.size
    # random streams (sgdnet.engine.rng): row t < nT a transition's, nT + mi modulator mi's, the
    # last the random switches'; draw k of row i starts its generator at rng.draw_state(sb[i], k)
    nS = sid.size
    sb = np.empty(nS, dtype=np.uint64)
    replication_bases(seed, sid, sb)
    sk = np.zeros(nS, dtype=np.int64)
    rng = np.zeros(1, dtype=np.uint64)  # a draw's generator state when it goes through sample()
    hist = o_hw.shape[0] > 0  # histograms kept (else o_hw and o_hs have no rows)

    # ---------------------------------------------------------------- state
    m = m0.copy()
    rq_cap = np.empty(nT, dtype=np.int64)
    rq_off = np.empty(nT, dtype=np.int64)
    rq_used = _I0  # an int64, not a literal: helpers it is passed to compile once
    for t in range(nT):
        c = servers[t]
        if c > 4:
            c = 4
        rq_cap[t] = c
        rq_off[t] = rq_used
        rq_used += c
    rq_pool = np.zeros(max(rq_used, cap_requests), dtype=np.float64)
    # the instant queue (a sorted ring, a heap when long and out of order: see _iq_push)
    ih = np.zeros(max(nT, 1), dtype=np.int64)
    ihs = np.zeros(max(nT, 1), dtype=np.int64)  # scratch of the ring -> heap switch
    ih_n = _I0  # an int64 from the start: a literal 0 would compile the heap helpers twice
    ih_hd = _I0  # ring head
    ih_heap = _FALSE  # not a literal False (see _FALSE)
    ih_cap = ih.size
    qh = np.zeros(max(rq_base[nR], 1), dtype=np.int64)
    qn = np.zeros(nR, dtype=np.int64)
    qhd = np.zeros(nR, dtype=np.int64)  # fifo resources: ring head of the sorted queue
    used = np.zeros(nR, dtype=np.int64)
    dl = np.zeros(max(nT, 1), dtype=np.int64)
    isd = np.zeros(nT, dtype=np.bool_)
    watch = np.zeros(nT, dtype=np.int64)  # joins: offset of the input arc that last blocked
    dn = 0
    # firing slots
    # slot t is reserved for single-server transition t; the others draw from a free list
    scap = nT + cap_slots
    s_trans = np.arange(scap, dtype=np.int64)
    s_seq = np.zeros(scap, dtype=np.int64)
    s_next = np.arange(1, scap + 1, dtype=np.int64)
    s_next[scap - 1] = -1
    free_head = nT
    s_start = np.zeros(scap, dtype=np.float64)
    s_rem = np.zeros(scap, dtype=np.float64)
    s_last = np.zeros(scap, dtype=np.float64)
    s_rate = np.ones(scap, dtype=np.float64)
    s_ctime = np.zeros(scap, dtype=np.float64)
    eh = np.zeros(scap, dtype=np.int64)
    eh_pos = np.zeros(scap, dtype=np.int64)
    ekt = np.zeros(scap, dtype=np.float64)
    eks = np.zeros(scap, dtype=np.int64)
    eh_n = _I0
    hole = _FALSE  # eh[0] is a completion already applied, left for the next start to replace
    seq = _I0
    # processor sharing
    nps = 0
    for r in range(nR):
        if r_ps[r] >= 0:
            nps += 1
    maxps = _I1
    for t in range(nT):
        k = psres_ptr[t + 1] - psres_ptr[t]
        if k > maxps:
            maxps = k
    hcap = cap_holders
    ps_h = np.zeros((max(nps, 1), hcap), dtype=np.int64)
    ps_n = np.zeros(max(nps, 1), dtype=np.int64)
    s_php = np.zeros((scap, maxps), dtype=np.int64)
    touched = np.zeros(nR, dtype=np.bool_)
    tl = np.zeros(max(nR, 1), dtype=np.int64)
    # flows (links are shared resources of discipline 3): groups (per bottleneck link) and scratch
    g_rate = np.zeros(nR, dtype=np.float64)
    g_V = np.zeros(nR, dtype=np.float64)
    g_tau = np.zeros(nR, dtype=np.float64)
    g_head = np.full(nR, -1, dtype=np.int64)
    gh = np.zeros((max(nps, 1), hcap), dtype=np.int64)
    gn = np.zeros(max(nps, 1), dtype=np.int64)
    s_gpos = np.zeros(scap, dtype=np.int64)
    s_grp = np.full(scap, -1, dtype=np.int64)
    s_vf = np.zeros(scap, dtype=np.float64)
    s_inh = np.zeros(scap, dtype=np.bool_)
    s_w0 = np.zeros(scap, dtype=np.float64)  # bytes of the flow counted in its links' busy time
    f_lmark = np.zeros(nR, dtype=np.int64)
    f_fmark = np.zeros(scap, dtype=np.int64)
    f_epoch = np.zeros(1, dtype=np.int64)
    f_CL = np.zeros(max(nR, 1), dtype=np.int64)
    f_CF = np.zeros(scap, dtype=np.int64)
    f_rc = np.zeros(nR, dtype=np.float64)
    f_nu = np.zeros(nR, dtype=np.int64)
    f_rate = np.zeros(scap, dtype=np.float64)
    f_fixed = np.zeros(scap, dtype=np.bool_)
    f_lvl = np.zeros(nR, dtype=np.float64)
    f_bott = np.zeros(scap, dtype=np.int64)
    f_pend = np.zeros(nR, dtype=np.bool_)  # links in f_seeds[:nsd], waiting for the next allocation
    nsd = _I0  # int64 values, not literals: _flows is compiled once (see _I0)
    f_seeds = np.zeros(max(nR, 1), dtype=np.int64)
    # single-bottleneck components (see section C): f_comp[r] is the link every flow of r's
    # component crosses and is bottlenecked at, or -1 (exact for every link carrying flows);
    # f_pure marks those links, f_m[L] is a lower bound of the other links' fair shares
    f_comp = np.full(nR, -1, dtype=np.int64)
    f_pure = np.zeros(nR, dtype=np.bool_)
    f_m = np.zeros(nR, dtype=np.float64)
    f_new = np.zeros(scap, dtype=np.int64)  # the flows started at this instant
    nfn = _I0
    # gates
    gcnt = np.zeros(nMem, dtype=np.int64)
    grel = np.zeros(nMem, dtype=np.int64)
    galw = np.zeros(nMem, dtype=np.int64)
    glast = np.zeros(nMem, dtype=np.float64)
    gprev = np.zeros(nMem, dtype=np.float64)
    gmin = np.zeros(nG, dtype=np.int64)
    nglog = _I0
    # modulators
    modval = np.ones(nM, dtype=np.float64)
    mk_state = np.zeros(nM, dtype=np.int64)
    mk_next = np.full(nM, np.inf, dtype=np.float64)
    _mod_init(nT, mod_kind, mod_par, sb, sk, d_code, d_par, d_pool, rng, modval, mk_state, mk_next)
    # accounting
    blast = np.zeros(nR, dtype=np.float64)
    # o_ptok accumulates sum(delta * (tau - t0)) over the marking changes (delta at tau) while
    # counting; at t1, integral of m over [t0, t1] = m(t1) (t1 - t0) - that sum (one update per
    # change instead of integrating piecewise)
    s_req = np.zeros(scap, dtype=np.float64)  # request time of the firing in each slot
    hb_f = np.zeros(1, dtype=np.float64)
    hb_i = hb_f.view(np.int64)
    sw_cand = np.zeros(nT + 1, dtype=np.int64)
    sw_stk = np.zeros(nT + 2, dtype=np.int64)
    counting = warmup == 0
    t0 = 0.0
    t1 = np.nan
    now = 0.0
    nsteps = _I0
    nrec = _I0
    ntr = 0
    events = _I0
    ev_limit = min(max_events, HALT_POLL)
    same = 0
    status = ST_OK
    grow = 0
    stop = False
    target_steps = warmup + steps

    TS = np.zeros((nT, N_TS), dtype=np.int64)
    TD = np.zeros((nT, N_TD), dtype=np.int64)
    TF = np.zeros((nT, N_TF), dtype=np.float64)
    _tables(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr,
            mod_of, psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls, rank,
            d_code, d_par, rq_off, rq_cap)

    # periodic regimes (sgdnet.engine.periodic): with ``period`` > 0 (a net without randomness),
    # a checkpoint every ``period`` step completions, in the warm-up too (its search starts over
    # when counting starts). The search's state is in pf_i / pf_f and its buffers are sized once,
    # so the event loop carries nothing more
    pf_i = np.zeros(N_PF, dtype=np.int64)
    pf_f = np.zeros(N_PFF, dtype=np.float64)
    pf_i[PF_NEXT] = period if period > 0 else PZ_OFF
    pf_i[PF_STRIDE] = period
    pf_hh = np.zeros((PZ_HIST, 2), dtype=np.uint64)
    pf_hs = np.zeros(PZ_HIST, dtype=np.int64)
    pz_ni = 1
    pz_nf = 1
    pa_nf = 1
    pa_ni = 1
    if period > 0:
        pz_ni, pz_nf = _pz_room(nP, nT, nR, nMem, scap, maxps, qh.size, rq_pool.size, max(nps, 1), hcap)
        pa_nf, pa_ni = _pa_sizes(nT, nP, nR, nMem, nG, o_glead, o_ghist, o_hw)
    # written before they are read, and sized for the largest state: np.empty touches no page
    # a smaller state does not use
    zi = np.empty(pz_ni, dtype=np.int64)
    zf = np.empty(pz_nf, dtype=np.float64)
    zs = np.empty(pz_nf, dtype=np.float64)
    yi = np.empty(pz_ni, dtype=np.int64)
    yf = np.empty(pz_nf, dtype=np.float64)
    ys = np.empty(pz_nf, dtype=np.float64)
    zn = np.zeros(2, dtype=np.int64)
    a_f = np.zeros(pa_nf, dtype=np.float64)
    a_i = np.zeros(pa_ni, dtype=np.int64)
    pz_live = np.zeros(scap if period > 0 else 1, dtype=np.int64)
    pz_idx = np.full(scap if period > 0 else 1, -1, dtype=np.int64)

    for t in range(nT):
        dl[dn] = t
        dn += 1
        isd[t] = True

    while True:
        # -------------------------------------------- A: re-evaluate dirty transitions
        # in the order they were marked (a transition's outputs' consumers in arc order, usually
        # rank order): candidates then mostly arrive in key order, each heap push one comparison
        di = 0
        while di < dn:
            t = dl[di]
            di += 1
            isd[t] = False
            f = TS[t, TS_FL]
            d = TS[t, TS_SERV] - TD[t, TD_ACT]
            if d > 0:
                d = _degree(t, f, d, m, in_place, in_w, inh_ptr, inh_place, inh_thr, watch, TS,
                            mem_gate, gcnt, gmin, g_kind, g_s, grel, g_slow, g_cap)
            cur = TD[t, TD_DEG]
            if f & F_S1:
                # one server: at most one request, its time kept in ktime
                if d > cur:
                    TF[t, TF_KTIME] = now
            elif d > cur:
                rq_used = _requests(t, d, cur, now, TD, rq_pool, rq_used)
                if rq_used < 0:
                    status = ST_GROW
                    grow = GROW_REQUESTS
                    break
            TD[t, TD_DEG] = d
            if d > 0:
                if TD[t, TD_WHERE] == NONE:
                    if not f & F_S1:
                        TF[t, TF_KTIME] = rq_pool[TD[t, TD_RQOFF] + TD[t, TD_RQHEAD]]
                    # a candidate whose first resource is full would be found blocked on it when
                    # popped (nothing frees a resource before the next completion batch, and an
                    # earlier resource cannot become the blocking one): queue it there at once
                    r = -1
                    if f & F_QRES:
                        r = qres_idx[TS[t, TS_Q0]]
                        if used[r] < r_cap[r]:
                            r = -1
                    if r >= 0:
                        if r_disc[r] == DISC_FIFO:
                            qn[r] = _d_push(qh, rq_base[r], rq_base[r + 1] - rq_base[r], qhd[r], qn[r], t,
                                            TD, TS, TF)
                        else:
                            qn[r] = _c_push(qh, rq_base[r], qn[r], t, TD, TS, TF)
                        TD[t, TD_WHERE] = r
                    else:
                        iq_n = _iq_append(ih, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                        if iq_n == ih_n:
                            iq_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                        ih_n = iq_n
                        TD[t, TD_WHERE] = IN_IH
            elif TD[t, TD_WHERE] != NONE:
                wt = TD[t, TD_WHERE]
                TD[t, TD_WHERE] = NONE
                if wt == IN_IH:
                    ih_n, ih_hd, ih_heap = _iq_remove(ih, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                    src = TD[t, TD_FROM]
                    if src >= 0:
                        TD[t, TD_FROM] = NONE
                        # the promotion of src's queue head (here, at the end of B and in C's
                        # releases: inlined helpers, no call on the hot path of a FIFO hand-over)
                        if used[src] < r_cap[src] and qn[src] > 0:
                            u = _q_take(src, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
                            iq_n = _iq_append(ih, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                            if iq_n == ih_n:
                                iq_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                            ih_n = iq_n
                            TD[u, TD_WHERE] = IN_IH
                            TD[u, TD_FROM] = src
                else:
                    if r_disc[wt] == DISC_FIFO:
                        qn[wt] = _d_remove(qh, rq_base[wt], rq_base[wt + 1] - rq_base[wt], qhd[wt],
                                           qn[wt], t, TD)
                    else:
                        qn[wt] = _c_remove(qh, rq_base[wt], qn[wt], t, TD, TS, TF)
        dn = 0
        if status == ST_GROW:
            break

        if ih_n > 0:
            # ---------------------------------------- B: examine the first candidate
            if ih_heap:
                t, ih_n, ih_hd, ih_heap = _iq_pop(ih, ih_hd, ih_n, ih_heap, TD, TS, TF)
            else:  # the ring's head (the common case of _iq_pop, written out)
                t = ih[ih_hd]
                ih_hd += 1
                if ih_hd == ih_cap:
                    ih_hd = 0
                ih_n -= 1
            TD[t, TD_WHERE] = NONE
            src = TD[t, TD_FROM]
            TD[t, TD_FROM] = NONE
            blocked = -1
            for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
                r = qres_idx[k]
                if used[r] >= r_cap[r]:
                    blocked = r
                    break
            if blocked >= 0:
                if r_disc[blocked] == DISC_FIFO:
                    qn[blocked] = _d_push(qh, rq_base[blocked], rq_base[blocked + 1] - rq_base[blocked],
                                          qhd[blocked], qn[blocked], t, TD, TS, TF)
                else:
                    qn[blocked] = _c_push(qh, rq_base[blocked], qn[blocked], t, TD, TS, TF)
                TD[t, TD_WHERE] = blocked
            else:
                # start t: take its oldest request
                f = TS[t, TS_FL]
                if f & F_SW:
                    c = _sw_pick(t, ih, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TS, TF, sw_w,
                                 sw_prio, sw_res, qres_idx, used, r_cap, sw_cand, sw_stk, sb, sk)
                    if c != t:
                        # start c instead: t stays a candidate (with the promotion it carries)
                        ih_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                        TD[t, TD_WHERE] = IN_IH
                        TD[t, TD_FROM] = src
                        wc = TD[c, TD_WHERE]
                        if wc == IN_IH:
                            ih_n, ih_hd, ih_heap = _iq_remove(ih, ih_hd, ih_n, ih_heap, c, TD, TS, TF)
                            src = TD[c, TD_FROM]
                        elif r_disc[wc] == DISC_FIFO:
                            qn[wc] = _d_remove(qh, rq_base[wc], rq_base[wc + 1] - rq_base[wc], qhd[wc],
                                               qn[wc], c, TD)
                            src = NONE
                        else:
                            qn[wc] = _c_remove(qh, rq_base[wc], qn[wc], c, TD, TS, TF)
                            src = NONE
                        TD[c, TD_WHERE] = NONE
                        TD[c, TD_FROM] = NONE
                        t = c
                        f = TS[t, TS_FL]
                if f & F_S1:
                    rt = TF[t, TF_KTIME]
                else:
                    h = TD[t, TD_RQHEAD]
                    rt = rq_pool[TD[t, TD_RQOFF] + h]
                    h += 1
                    if h == TD[t, TD_RQCAP]:
                        h = 0
                    TD[t, TD_RQHEAD] = h
                TD[t, TD_DEG] -= 1
                selfdirty = (f & F_SELF) != 0
                dn = _consume(t, now, t0, selfdirty, TS, in_place, in_w, m, o_ptok, dep_ptr, dep_trans,
                              isd, dl, dn)
                TD[t, TD_ACT] += 1
                if selfdirty:
                    if not isd[t]:
                        isd[t] = True
                        dl[dn] = t
                        dn += 1
                elif TD[t, TD_DEG] > 0:
                    # degree and requests dropped by exactly one: t stays a candidate
                    # (never for one server: its degree is 0 while it runs)
                    TF[t, TF_KTIME] = rq_pool[TD[t, TD_RQOFF] + TD[t, TD_RQHEAD]]
                    iq_n = _iq_append(ih, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                    if iq_n == ih_n:
                        iq_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
                    ih_n = iq_n
                    TD[t, TD_WHERE] = IN_IH
                if f & F_QRES:
                    _q_hold(t, now, rt, counting, hist, TS, qres_idx, used, o_wsum, o_wn, o_hw, hb_f,
                            hb_i)
                if f & F_GUARD:
                    gm = TS[t, TS_GUARD]
                    if grel[gm] != 0:
                        grel[gm] = 0
                        for q in range(mg_ptr[gm], mg_ptr[gm + 1]):
                            u = mg_trans[q]
                            if not isd[u]:
                                isd[u] = True
                                dl[dn] = u
                                dn += 1
                dur = _duration(t, f, now, nT, TS, TF, sb, sk, d_code, d_par, d_pool, rng, rs_ptr,
                                rs_mod, modval, mod_kind, mod_par, mk_state, mk_next)
                # a firing slot
                if f & F_S1:
                    s = t
                else:
                    if free_head < 0:
                        status = ST_GROW
                        grow = GROW_SLOTS
                        break
                    s = free_head
                    free_head = s_next[s]
                    s_trans[s] = t
                s_seq[s] = seq
                seq += 1
                s_start[s] = now
                s_req[s] = rt
                if not f & F_PS:
                    tc = now + dur
                    s_ctime[s] = tc
                    eh_n = _e_start(eh, ekt, eks, eh_pos, eh_n, hole, s, tc, s_seq[s])
                    hole = _FALSE
                else:
                    if not _ps_hold(t, f, s, now, rt, counting, hist, TS, psres_idx, r_ps, used, r_cap,
                                    o_busy, blast, o_wsum, o_wn, o_hw, hb_f, hb_i, ps_h, ps_n, s_php):
                        status = ST_GROW
                        grow = GROW_HOLDERS
                        break
                    if f & F_FLOW:
                        # a new flow: it gets its rate (and its neighbours' new rates) from the
                        # max-min allocation played before time advances (section C), once for
                        # all the flows that start and end at this instant
                        s_rem[s] = dur
                        s_last[s] = now
                        s_rate[s] = 0.0
                        s_ctime[s] = np.inf
                        s_grp[s] = -2
                        s_inh[s] = False
                        s_w0[s] = dur
                        f_new[nfn] = s
                        nfn += 1
                        for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
                            r = psres_idx[k]
                            if not f_pend[r]:
                                f_pend[r] = True
                                f_seeds[nsd] = r
                                nsd += 1
                    else:
                        if hole:
                            hole = _FALSE
                            eh_n = _e_pop(eh, ekt, eks, eh_pos, eh_n)
                        rate = _ps_rate(t, psres_ptr, psres_idx, used, r_cap)
                        s_rem[s] = dur
                        s_last[s] = now
                        s_rate[s] = rate
                        s_ctime[s] = now + dur / rate
                        eh_n = _e_push(eh, ekt, eks, eh_pos, eh_n, s, s_ctime[s], s_seq[s])
                        for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
                            _rerate(psres_idx[k], now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate,
                                    s_ctime, s_seq, eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap)
                            ev_limit -= ps_n[r_ps[psres_idx[k]]] // WORK_PER_EVENT
            if src >= 0 and qn[src] > 0 and used[src] < r_cap[src]:
                u = _q_take(src, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)  # its queue's head
                iq_n = _iq_append(ih, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                if iq_n == ih_n:
                    iq_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                ih_n = iq_n
                TD[u, TD_WHERE] = IN_IH
                TD[u, TD_FROM] = src
            continue

        # -------------------------------------------- C: the next batch of completions
        if hole:
            hole = _FALSE
            eh_n = _e_pop(eh, ekt, eks, eh_pos, eh_n)
        if nsd > 0:
            # FLOWS: the max-min fair rates of the flows connected to the links whose flow set
            # changed at this instant (f_seeds). Only that connected component of links and flows
            # is recomputed, by progressive filling: the link (or flow cap) with the smallest fair
            # share ``remaining capacity / unfixed flows`` fixes its unfixed flows at that share,
            # which is taken off the other links of their paths, until every flow is fixed.
            # The flows a link fixes (its group) all move at the same rate, so a group keeps a
            # virtual clock g_V (bytes moved by each member since an origin) and a heap of its
            # members by virtual finish (g_V at arrival + bytes): only the head is in the
            # completion heap. A flow whose bottleneck did not change is not touched at all (its
            # group's clock just changes slope); a flow that changes group moves its remaining
            # bytes to the new clock; a capped flow is on its own (s_grp == -1) with remaining
            # bytes and a rate, as a ps firing. The fast path's test and move and the groups'
            # heads are inlined phases (_flows_star, _flows_star_move, _flows_heads: each of at
            # most 30 arguments; this whole section as one plain call of ~50 arrays cost ~15 %
            # of the fine sync-ps net's speed at N = 4); the full allocation (_flows_alloc,
            # _flows_move, _flows_single), long and run where links tie, is called.
            # Fast path: a component whose flows all cross one link L and are all bottlenecked
            # there (a star into a parameter server) stays so when L's new fair share
            # cap(L)/n is below every other link's share (and no flow is capped): progressive
            # filling would fix every flow at L in its first round. Then only L's clock, rate
            # and group heap change, in O(flows started + links changed + log n). The
            # other links' shares are bounded from below by f_m[L] (kept at the last full
            # allocation, lowered by each changed link's share since), so the test is exact
            # or conservative; otherwise the full allocation below runs.
            fq, fu_m, fu_rate = _flows_star(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr, psres_idx,
                                            used, fl_cap, f_pure, f_comp, f_m, f_epoch, f_lmark,
                                            r_bw, re_ptr, re_val)
            if fq >= 0:
                _flows_star_move(now, fq, fu_m, fu_rate, nfn, nsd, f_new, f_seeds, s_trans,
                                 psres_ptr, psres_idx, used, f_comp, f_m, r_ps, g_V, g_rate, g_tau,
                                 s_rem, s_vf, s_seq, s_gpos, s_grp, gh, gn, f_lvl, f_CL)
                fu_nl = _I1
            else:
                fu_nl, fu_nf, fu_cap = _flows_alloc(
                    now, used, nsd, f_seeds, f_epoch, f_lmark, f_fmark, f_CL, f_CF, f_rc, f_nu,
                    f_rate, f_fixed, f_lvl, f_bott, g_rate, g_V, g_tau, ps_h, ps_n, s_trans,
                    psres_ptr, psres_idx, r_ps, r_bw, re_ptr, re_val, fl_cap)
                eh_n = _flows_move(now, fu_nf, f_CF, f_bott, f_rate, g_V, g_head, gh, gn, r_ps,
                                   s_grp, s_vf, s_ctime, s_rem, s_rate, s_last, s_gpos, s_seq,
                                   s_inh, eh, ekt, eks, eh_pos, eh_n)
                _flows_single(fu_nf, fu_nl, fu_cap, f_CF, f_CL, f_bott, f_pure, f_comp, f_m,
                              used, r_bw, re_ptr, re_val)
                fu_work = (fu_nf + fu_nl) // WORK_PER_EVENT
                ev_limit -= fu_work
            # each group's rate, and its head in the completion heap
            eh_n = _flows_heads(now, fu_nl, f_CL, r_ps, gn, gh, g_rate, f_lvl, s_vf, g_V, g_head,
                                s_ctime, s_seq, s_inh, eh, ekt, eks, eh_pos, eh_n)
            for i in range(nsd):
                f_pend[f_seeds[i]] = False
            nsd = _I0
            nfn = _I0
        if nsteps >= pf_i[PF_NEXT] and pf_i[PF_STATE] == PZ_RESTART:
            _pz_restart(nsteps, period, pf_i)  # counting started: no state to write out
        elif nsteps >= pf_i[PF_NEXT]:
            # a checkpoint (sgdnet.engine.periodic): the state in canonical form, then the search
            pz_nl = _pz_live(eh, eh_n, ps_h, ps_n, pz_idx, pz_live)
            zn[0] = 0
            zn[1] = 0
            pz_act = -1
            if (_pz_core(now, m, TD, TS, TF, rq_pool, used, qn, qhd, qh, rq_base, r_disc, zi, zf, zs, zn)
                    and _pz_slots(now, seq, eh, ekt, eks, eh_n, pz_idx, pz_live, pz_nl, TS, s_trans,
                                  s_seq, s_start, s_req, s_rem, s_rate, s_last, s_grp, s_vf, s_inh, s_w0,
                                  s_gpos, s_php, g_V, zi, zf, zs, zn)
                    and _pz_links(now, pz_idx, r_disc, r_ps, ps_h, ps_n, gn, gh, g_head, g_rate, g_tau, f_comp,
                                  f_pure, f_m, blast, zi, zf, zs, zn)
                    and _pz_gates(now, gcnt, gmin, mem_gate, grel, galw, glast, gprev, zi, zf, zs, zn)):
                pz_act = _pz_search(nsteps, nrec, events, seq, nglog, now, zi, zf, zs, zn, yi, yf, ys, pf_i,
                                    pf_f, pf_hh, pf_hs)
            else:  # cannot happen (the buffers hold the largest state): stop looking
                pf_i[PF_NEXT] = PZ_OFF
            _pz_unlive(pz_idx, pz_live, pz_nl)
            if pz_act == 1:
                _pa_step(_I0, a_f, a_i, o_busy, o_wsum, o_ssum, o_ptok, g_V, o_firings, o_wn, o_sn, gcnt,
                         gmin, o_glead, o_ghist, o_hw, o_hs)
            elif pz_act == 2:
                # confirmed: jump M periods (the last ones before the end, or before counting
                # starts, are played)
                pz_M = _pz_jump(nsteps, events, now, target_steps if counting else warmup,
                                max_events, not counting, pf_i, pf_f, pf_hs)
                if pz_M > 0:
                    pz_P = pf_f[PF_CYC]
                    pz_D = pz_M * pz_P
                    pz_dq = seq - pf_i[PF_CSEQ]
                    _pz_shift_slots(pz_D, pz_dq, pz_M, pz_live, pz_nl, s_seq, s_start, s_req, s_last,
                                    s_ctime, s_grp, s_vf, g_V, a_f, ekt, eks, eh_n)
                    _pz_shift_rest(pz_D, TD, TS, TF, rq_pool, g_tau, blast, glast, gprev)
                    _pz_copy(pz_M, pz_P, pf_i[PF_CREC], nrec, o_step_t, o_step_tr, pf_i[PF_CGLOG], nglog,
                             o_glog)
                    _pa_step(pz_M, a_f, a_i, o_busy, o_wsum, o_ssum, o_ptok, g_V, o_firings, o_wn,
                             o_sn, gcnt, gmin, o_glead, o_ghist, o_hw, o_hs)
                    now += pz_D
                    seq += pz_M * pz_dq
                    nrec += pz_M * (nrec - pf_i[PF_CREC])
                    nglog += pz_M * (nglog - pf_i[PF_CGLOG])
                    events += pz_M * (events - pf_i[PF_CEVENTS])
                    nsteps += pz_M * pf_i[PF_PER]
                    ev_limit = min(max_events, events + HALT_POLL)
        if eh_n == 0:
            status = ST_DEADLOCK
            break
        tn = ekt[0]
        if tn != now:
            same = 0
            now = tn
        nt_touched = _I0
        ev0 = events
        while not hole and eh_n > 0 and ekt[0] == now:
            s = eh[0]
            if not ((eh_n > 1 and ekt[1] == now) or (eh_n > 2 and ekt[2] == now)):
                # the last completion of this instant: leave it at the root, where the next start
                # (usually one of the transitions this completion enables) replaces it, one sift
                # instead of a pop and a push
                hole = _TRUE
            else:
                eh_n = _e_drop(eh, ekt, eks, eh_pos, eh_n)
            events += 1
            if events > ev_limit:
                # one comparison per completion serves both the budget and the halt poll
                if events > max_events:
                    status = ST_BUDGET
                    stop = True
                    break
                if halt[0] != 0:
                    status = ST_HALTED
                    stop = True
                    break
                prog[0] = nsteps
                ev_limit = min(max_events, events + HALT_POLL)
            same += 1
            if same > zeno_limit:
                status = ST_ZENO
                stop = True
                break
            t = s_trans[s]
            f = TS[t, TS_FL]
            if counting:
                o_firings[t] += 1
            a = TD[t, TD_ACT]
            TD[t, TD_ACT] = a - 1
            # the freed server can raise t's degree only if the server bound was the binding one
            # (else its tokens, inhibitors or gate bound it, and this completion changes none of
            # them; output places mark their consumers below)
            if not isd[t] and TD[t, TD_DEG] >= TS[t, TS_SERV] - a:
                isd[t] = True
                dl[dn] = t
                dn += 1
            st0 = s_start[s]
            if st0 < t0:
                st0 = t0
            for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
                r = qres_idx[k]
                if counting:
                    o_busy[r] += now - st0
                    o_ssum[r] += now - s_req[s]
                    o_sn[r] += 1
                    if hist:
                        _hadd(o_hs, r, now - s_req[s], hb_f, hb_i)
                used[r] -= 1
                if qn[r] > 0 and used[r] < r_cap[r]:
                    u = _q_take(r, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)  # its queue's head
                    iq_n = _iq_append(ih, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                    if iq_n == ih_n:
                        iq_n, ih_hd, ih_heap = _iq_push(ih, ihs, ih_hd, ih_n, ih_heap, u, TD, TS, TF)
                    ih_n = iq_n
                    TD[u, TD_WHERE] = IN_IH
                    TD[u, TD_FROM] = r
            if counting and f & F_PS:
                # sojourn at shared resources (ps, links): completion - request
                for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
                    r = psres_idx[k]
                    o_ssum[r] += now - s_req[s]
                    o_sn[r] += 1
                    if hist:
                        _hadd(o_hs, r, now - s_req[s], hb_f, hb_i)
            if f & F_FLOW:
                if counting:
                    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
                        r = psres_idx[k]
                        o_busy[r] += s_w0[s] / r_bw[r]
                g = s_grp[s]
                if g >= 0:
                    # the head of its group: the next member finishing at the very same virtual
                    # time (a tie) completes in this batch too, after s (larger start sequence)
                    rp = r_ps[g]
                    vf = s_vf[s]
                    _g_remove(gh, rp, gn, s, s_gpos, s_vf, s_seq)
                    g_head[g] = -1
                    if gn[rp] > 0 and s_vf[gh[rp, 0]] == vf:
                        h = gh[rp, 0]
                        if hole:
                            hole = _FALSE
                            eh_n = _e_pop(eh, ekt, eks, eh_pos, eh_n)
                        s_ctime[h] = now
                        eh_n = _e_push(eh, ekt, eks, eh_pos, eh_n, h, now, s_seq[h])
                        s_inh[h] = True
                        g_head[g] = h
                s_grp[s] = -1
                s_inh[s] = False
            if f & F_PS:
                nt_touched = _ps_release(t, f, s, now, counting, TS, psres_ptr, psres_idx, r_ps, used,
                                         r_cap, o_busy, blast, ps_h, ps_n, s_php, s_trans, touched, tl,
                                         nt_touched)
            dn = _deposit(t, now, t0, TS, out_place, out_w, m, o_ptok, dep_ptr, dep_trans, isd, dl, dn)
            if ntr < trace_limit:
                o_tr_t[ntr] = t
                o_tr_s[ntr] = s_start[s]
                o_tr_e[ntr] = now
                ntr += 1
            if s >= nT:
                s_next[s] = free_head
                free_head = s
            if f & F_CNT:  # gate counters
                dn, nglog = _gate_count(t, now, cnt_ptr, cnt_mem, mem_gate, g_kind, g_ptr, g_slow,
                                        g_rmax, gg_ptr, gg_trans, mg_ptr, mg_trans, gcnt, gmin, grel,
                                        galw, glast, gprev, isd, dl, dn, o_glead, o_ghist, o_glog,
                                        nglog)
            if f & F_STEP:
                nsteps += 1
                if counting:
                    if samples:
                        o_step_t[nrec] = now
                        o_step_tr[nrec] = t
                    nrec += 1
                if nsteps == warmup:
                    counting = True
                    t0 = now
                    if period > 0:  # the search starts over at the next checkpoint site
                        pf_i[PF_STATE] = PZ_RESTART
                        pf_i[PF_NEXT] = nsteps
                    _count_start(now, o_ptok, blast, r_disc, r_ps, ps_h, ps_n, s_w0, s_grp, s_vf, g_V,
                                 g_rate, g_tau, s_rem, s_rate, s_last)
                if nsteps == target_steps:
                    t1 = now
                    stop = True
                    break
        if stop:
            break
        if events == ev0:
            # nothing completed at the next event time: only a clock the flows made NaN (rates
            # of ~1e-300 B/s, inf - inf) does this, and the loop would spin with no completion
            # (issue #43); the pass counts as one against the budget and the halt poll, as a
            # completion does (a healthy run always completes the heap's head here)
            events += 1
            if events > ev_limit:
                if events > max_events:
                    status = ST_BUDGET
                    break
                if halt[0] != 0:
                    status = ST_HALTED
                    break
                prog[0] = nsteps
                ev_limit = min(max_events, events + HALT_POLL)
        if hole and nt_touched > 0:
            hole = _FALSE
            eh_n = _e_pop(eh, ekt, eks, eh_pos, eh_n)
        for i in range(nt_touched):
            r = tl[i]
            touched[r] = False
            if r_disc[r] == DISC_FLOW:
                if not f_pend[r]:
                    f_pend[r] = True
                    f_seeds[nsd] = r
                    nsd += 1
            else:
                _rerate(r, now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate, s_ctime, s_seq,
                        eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap)
                # an expensive completion brings the next halt poll closer (WORK_PER_EVENT
                # holders re-rated count as one completion), so Ctrl-C is seen in bounded time
                ev_limit -= ps_n[r_ps[r]] // WORK_PER_EVENT

    # ------------------------------------------------------------- finish
    if hole:
        eh_n = _e_pop(eh, ekt, eks, eh_pos, eh_n)
    if status == ST_OK:
        _finish(now, t0, m, o_ptok, o_busy, eh, eh_n, s_trans, s_start, qres_ptr, qres_idx, r_disc,
                r_ps, r_cap, used, blast, gh, gn, ps_h, ps_n, s_inh, s_w0, s_grp, s_vf, g_V,
                g_rate, g_tau, s_rem, s_rate, s_last, r_bw)
    prog[0] = nsteps
    o_f[OF_T0] = t0
    o_f[OF_T1] = t1
    o_f[OF_NOW] = now
    o_i[OI_STATUS] = status
    o_i[OI_EVENTS] = events
    o_i[OI_NSTEPS] = nsteps
    o_i[OI_NTRACE] = ntr
    o_i[OI_NGLOG] = nglog
    o_i[OI_NREC] = nrec
    o_i[OI_GROW] = grow
    o_i[OI_PSTART] = pf_i[PF_START]
    o_i[OI_PERIOD] = pf_i[PF_PER]
    o_i[OI_PSKIP] = pf_i[PF_SKIP]
    o_i[OI_PWSKIP] = pf_i[PF_WSKIP]
    o_f[OF_CYCLE] = pf_f[PF_CYC]
    for p in range(nP):
        o_mark[p] = m[p]
    for q in range(nMem):
        o_gcnt[q] = gcnt[q]
        o_grel[q] = grel[q]
    return status
