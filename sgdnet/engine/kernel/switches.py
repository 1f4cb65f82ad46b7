"""Random switches: the choice among weighted candidates competing for one start.

Invariant: a draw of the switches' stream (the last row of ``sb``/``sk``) is consumed only when
two or more weighted candidates of the starting transition's priority class and priority could
start (their queued resources all have a free server); the candidates are ordered by rank
before the draw, so the choice does not depend on the queues' internal layout. A net with fewer
than two weighted transitions never gets here (no ``F_SW`` flag).
"""

from __future__ import annotations

from ...net.compiled import DISC_FIFO
from ..layout import (
    IN_IH,
    NONE,
    TD_FROM,
    TD_WHERE,
    TS_PCLS,
    TS_Q0,
    TS_Q1,
    TS_RANK,
)
from ..rng import uniform_draw
from . import candidates
from .jit import I0, I1, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'candidates.py', '../../net/compiled.py', '../layout.py', '../rng.py')


@inner
def admits(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
    """Whether candidate ``a`` is a weighted transition competing with ``t`` (same priority class
    and priority) whose queued resources all have a free server."""
    if sw_w[a] <= 0.0 or sw_prio[a] != sw_prio[t] or TS[a, TS_PCLS] != TS[t, TS_PCLS]:
        return False
    for k in range(TS[a, TS_Q0], TS[a, TS_Q1]):
        r = qres_idx[k]
        if used[r] >= r_cap[r]:
            return False
    return True


@inner
def from_heap(h, base, n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, nc, stk):
    """Append to ``cand`` the entries of heap ``h[base:base+n]`` that :func:`admits` admits.

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
        if admits(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
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


@inner
def from_ring(h, base, cap, head, n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, nc):
    """:func:`from_heap` for a fifo resource's sorted ring: ``t``'s priority class leads it."""
    p = head
    for _j in range(n):
        a = h[base + p]
        if TS[a, TS_PCLS] > TS[t, TS_PCLS]:
            break
        if admits(a, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap):
            cand[nc] = a
            nc += 1
        p += 1
        if p == cap:
            p = 0
    return nc


@inner
def pick(t, ih, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TS, TF, sw_w, sw_prio, sw_res,
             qres_idx, used, r_cap, cand, stk, sb, sk):
    """The random switch: ``t`` (weighted, able to start, the scan's next start) or a weighted
    candidate competing with it, drawn with probability proportional to weight. One uniform is drawn
    only when there are two or more to choose from; they are ordered by rank first."""
    cand[0] = t
    if ih_heap:
        nc = from_heap(ih, I0, ih_n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap, cand, I1, stk)
    else:
        nc = from_ring(ih, I0, ih.size, ih_hd, ih_n, t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap,
                      cand, I1)
    for j in range(sw_res.size):
        r = sw_res[j]
        if qn[r] > 0 and used[r] < r_cap[r]:
            if r_disc[r] == DISC_FIFO:
                nc = from_ring(qh, rq_base[r], rq_base[r + 1] - rq_base[r], qhd[r], qn[r], t, TS, TF,
                              sw_w, sw_prio, qres_idx, used, r_cap, cand, nc)
            else:
                nc = from_heap(qh, rq_base[r], qn[r], t, TS, TF, sw_w, sw_prio, qres_idx, used, r_cap,
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


@phase
def redirect(t, src, ih, ihs, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TD, TS, TF, sw_w,
             sw_prio, sw_res, qres_idx, used, r_cap, cand, stk, sb, sk):
    """Phase B, weighted ``t`` (promoted from ``src``'s queue, or -1) about to start: the switch
    (:func:`pick`) may start a competitor ``c`` instead; ``t`` then stays a candidate (with the
    promotion it carries) and ``c`` leaves its queue. Returns
    ``(the transition to start, its src, ih_n, ih_hd, ih_heap)``."""
    c = pick(t, ih, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TS, TF, sw_w, sw_prio, sw_res,
             qres_idx, used, r_cap, cand, stk, sb, sk)
    if c != t:
        ih_n, ih_hd, ih_heap = candidates.instant_push(ih, ihs, ih_hd, ih_n, ih_heap, t, TD, TS, TF)
        TD[t, TD_WHERE] = IN_IH
        TD[t, TD_FROM] = src
        wc = TD[c, TD_WHERE]
        if wc == IN_IH:
            ih_n, ih_hd, ih_heap = candidates.instant_remove(ih, ih_hd, ih_n, ih_heap, c, TD, TS, TF)
            src = TD[c, TD_FROM]
        else:
            candidates.unwait(wc, c, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
            src = NONE
        TD[c, TD_WHERE] = NONE
        TD[c, TD_FROM] = NONE
    return c, src, ih_n, ih_hd, ih_heap
