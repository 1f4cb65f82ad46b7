"""Enabling: the token game and the degree of each transition.

Invariants: ``m`` is the current marking; a transition's degree ``TD_DEG`` is the number of
firings it could start now (free servers, tokens // weight of each input, 0 when an inhibitor
place reaches its threshold or its gate member may not start), and it holds one pending request
per unit of degree (a ring of request times, oldest first; a single-server transition keeps its
one request time in its key). Every change of a place's marking puts the transitions reading it
on the dirty list ``dl`` (once: ``isd``), and only dirty transitions are re-evaluated.
"""

from __future__ import annotations

from ...net.compiled import GATE_LAG
from ..layout import (
    F_GUARD,
    F_INH,
    F_JOIN,
    F_S1,
    F_W1,
    TD_ACT,
    TD_DEG,
    TD_RQCAP,
    TD_RQHEAD,
    TD_RQOFF,
    TF_KTIME,
    TS_GUARD,
    TS_IN0,
    TS_IN1,
    TS_OUT0,
    TS_OUT1,
    TS_SERV,
)
from .jit import phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../net/compiled.py', '../layout.py')


@phase
def degree(t, f, d, m, in_place, in_w, inh_ptr, inh_place, inh_thr, watch, TS, mem_gate, gcnt,
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


@phase
def add_requests(t, d, cur, now, TD, rq_pool, used):
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


@phase
def consume(t, now, t0, selfdirty, TS, in_place, in_w, m, o_ptok, dep_ptr, dep_trans, isd, dl,
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


@phase
def deposit(t, now, t0, TS, out_place, out_w, m, o_ptok, dep_ptr, dep_trans, isd, dl, dn):
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


@phase
def reevaluate(t, f, now, m, in_place, in_w, inh_ptr, inh_place, inh_thr, watch, TS, TD, TF, mem_gate,
               gcnt, gmin, g_kind, g_s, grel, g_slow, g_cap, rq_pool, rq_used):
    """Phase A for dirty transition ``t`` (flags ``f``): its new degree ``d`` (:func:`degree`,
    bounded by its free servers), and the requests its rise made ``now`` (a single-server
    transition keeps its one request time in its key ``TF_KTIME``). Returns ``(d, rq_used)``
    with ``TD_DEG`` set to ``d``, or ``rq_used`` -1 (``TD_DEG`` unchanged) when the request pool
    has no room (the kernel stops with ``ST_GROW``)."""
    d = TS[t, TS_SERV] - TD[t, TD_ACT]
    if d > 0:
        d = degree(t, f, d, m, in_place, in_w, inh_ptr, inh_place, inh_thr, watch, TS, mem_gate, gcnt,
                   gmin, g_kind, g_s, grel, g_slow, g_cap)
    cur = TD[t, TD_DEG]
    if f & F_S1:
        # one server: at most one request, its time kept in ktime
        if d > cur:
            TF[t, TF_KTIME] = now
    elif d > cur:
        rq_used = add_requests(t, d, cur, now, TD, rq_pool, rq_used)
        if rq_used < 0:
            return d, rq_used
    TD[t, TD_DEG] = d
    return d, rq_used


@phase
def take_request(t, f, TD, TF, rq_pool):
    """Phase B, ``t`` starts: its oldest request leaves (its degree drops by one); returns the
    request's time."""
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
    return rt
