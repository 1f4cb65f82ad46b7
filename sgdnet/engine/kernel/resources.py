"""Resources and their disciplines: queued (fifo, priority) servers and processor sharing.

Invariants: ``used[r]`` is the number of firings holding resource ``r``; a queued resource
(fifo, priority) never has more than ``r_cap[r]`` holders, the surplus waiting in its queue
(:mod:`~sgdnet.engine.kernel.candidates`); a ps resource (and a link, see
:mod:`~sgdnet.engine.kernel.flows`) keeps every holder, its slots in ``ps_h[r_ps[r], :ps_n]`` with
``s_php[s, j]`` the position of slot ``s`` among the holders of its ``j``-th shared resource. A
ps firing progresses at rate ``min over its ps resources of min(1, cap/n)``; whenever a holder
set changes, every holder's remaining work is brought up to date and its completion key is moved
in the completion heap (:func:`rerate`). While counting, the busy time of a ps resource is
integrated up to each change of its holder count (``blast``).
"""

from __future__ import annotations

from ...net.compiled import DISC_FLOW
from ..layout import (
    F_FLOW,
    TS_PS0,
    TS_PS1,
    TS_Q0,
    TS_Q1,
)
from . import candidates, event_heap, flows, statistics
from .jit import WORK_PER_EVENT, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'candidates.py', 'event_heap.py', 'flows.py', 'statistics.py', '../../net/compiled.py', '../../results.py', '../layout.py')


@inner
def ps_rate(t, psres_ptr, psres_idx, used, r_cap):
    rate = 1.0
    for k in range(psres_ptr[t], psres_ptr[t + 1]):
        r = psres_idx[k]
        x = r_cap[r] / used[r]
        if x < rate:
            rate = x
    return rate


@inner
def rerate(r, now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate, s_ctime, s_seq,
            eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap):
    rp = r_ps[r]
    for j in range(ps_n[rp]):
        s = ps_h[rp, j]
        rate = ps_rate(s_trans[s], psres_ptr, psres_idx, used, r_cap)
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
            event_heap.place(eh, ekt, eks, eh_pos, eh_pos[s], eh_n, s, s_ctime[s], s_seq[s])


@phase
def ps_hold(t, f, s, now, rt, counting, hist, TS, psres_idx, r_ps, used, r_cap, o_busy, blast,
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
                statistics.hist_add(o_hw, r, now - rt, hb_f, hb_i)
        used[r] += 1
        if ps_n[rp] == hcap:
            return False
        ps_h[rp, ps_n[rp]] = s
        s_php[s, j] = ps_n[rp]
        ps_n[rp] += 1
        j += 1
    return True


@phase
def ps_release(t, f, s, now, counting, TS, psres_ptr, psres_idx, r_ps, used, r_cap, o_busy,
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


@phase
def queue_hold(t, now, rt, counting, hist, TS, qres_idx, used, o_wsum, o_wn, o_hw, hb_f, hb_i):
    """Start: ``t`` (requested at ``rt``) takes a server of each of its queued resources; while
    counting, each records the wait ``now - rt`` (and its histogram)."""
    for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
        r = qres_idx[k]
        if counting:
            o_wsum[r] += now - rt
            o_wn[r] += 1
            if hist:
                statistics.hist_add(o_hw, r, now - rt, hb_f, hb_i)
        used[r] += 1


@phase
def first_full(t, TS, qres_idx, used, r_cap):
    """The first of ``t``'s queued resources with no free server, -1 when it can take them all."""
    for k in range(TS[t, TS_Q0], TS[t, TS_Q1]):
        r = qres_idx[k]
        if used[r] >= r_cap[r]:
            return r
    return -1


@phase
def ps_start(t, s, now, dur, hole, psres_ptr, psres_idx, used, r_cap, ps_h, ps_n, r_ps, s_trans,
             s_rem, s_last, s_rate, s_ctime, s_seq, eh, ekt, eks, eh_pos, eh_n):
    """Start of ps firing ``s`` of ``t`` (already a holder, :func:`ps_hold`): it enters the
    completion heap at its rate (the batch's hole, if any, popped first), and every holder of its
    ps resources is re-rated. Returns ``(eh_n, work)``, ``work`` the holders re-rated over
    ``WORK_PER_EVENT`` (counted against the halt poll)."""
    if hole:
        eh_n = event_heap.pop(eh, ekt, eks, eh_pos, eh_n)
    rate = ps_rate(t, psres_ptr, psres_idx, used, r_cap)
    s_rem[s] = dur
    s_last[s] = now
    s_rate[s] = rate
    s_ctime[s] = now + dur / rate
    eh_n = event_heap.push(eh, ekt, eks, eh_pos, eh_n, s, s_ctime[s], s_seq[s])
    work = 0
    for k in range(psres_ptr[t], psres_ptr[t + 1]):
        rerate(psres_idx[k], now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate, s_ctime, s_seq,
               eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap)
        work += ps_n[r_ps[psres_idx[k]]] // WORK_PER_EVENT
    return eh_n, work


@phase
def release_queued(t, s, now, t0, counting, hist, TS, TD, TF, qres_idx, o_busy, o_ssum, o_sn, o_hs,
                   hb_f, hb_i, s_start, s_req, used, r_cap, qh, qn, qhd, rq_base, r_disc, ih, ihs,
                   hd, n, heap):
    """Completion of firing ``s`` of ``t``: each of its queued resources frees a server (while
    counting: its busy time and the sojourn recorded) and promotes its queue's head. Returns the
    instant queue's ``(n, hd, heap)``."""
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
                statistics.hist_add(o_hs, r, now - s_req[s], hb_f, hb_i)
        used[r] -= 1
        n, hd, heap = candidates.promote(r, qh, qn, qhd, rq_base, r_disc, used, r_cap, ih, ihs, hd,
                                         n, heap, TD, TS, TF)
    return n, hd, heap


@phase
def rerate_touched(nt, tl, touched, r_disc, f_pend, f_seeds, nsd, now, ps_h, ps_n, r_ps, s_trans,
                   s_rem, s_last, s_rate, s_ctime, s_seq, eh, ekt, eks, eh_n, eh_pos, psres_ptr,
                   psres_idx, used, r_cap):
    """After a completion batch, the ``nt`` shared resources ``tl`` whose holders changed: a link
    joins the flows' seeds of the next re-allocation, a ps resource's holders are re-rated.
    Returns ``(nsd, work)``, ``work`` the holders re-rated over ``WORK_PER_EVENT`` (an expensive
    completion brings the next halt poll closer, so Ctrl-C is seen in bounded time)."""
    work = 0
    for i in range(nt):
        r = tl[i]
        touched[r] = False
        if r_disc[r] == DISC_FLOW:
            nsd = flows.seed(r, f_pend, f_seeds, nsd)
        else:
            rerate(r, now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate, s_ctime, s_seq,
                   eh, ekt, eks, eh_n, eh_pos, psres_ptr, psres_idx, used, r_cap)
            work += ps_n[r_ps[r]] // WORK_PER_EVENT
    return nsd, work
