"""Token buckets: links with a burst (a shaper such as Linux's ``tbf``, ``r_tb``: burst bytes,
peak bytes/s), in the flows' max-min allocation (:mod:`.flows`).

Invariants: a link's allocations use its *base* capacity ``r_cur`` (times its efficiency), which is
its peak while its bucket holds tokens or while the link is not saturated (it is then nobody's
bottleneck, so its capacity changes no rate), else its bandwidth. Between two allocations of its
component a link's load ``x`` (bytes/s through it) is constant, so its tokens move linearly:
``tb[r, TB_TOK]`` counted at ``tb[r, TB_T]``, slope ``sustained - x`` (the sustained capacity
``bandwidth x efficiency``, ``TB_CS``), clamped to ``[0, burst]``. A bucket that drains (``x`` above
the sustained capacity) runs dry at ``tb[r, TB_NEXT]``, an instant the loop plays before the next
completion (:func:`dry_next`): the link drops to its bandwidth and its component is re-allocated.
A component with a bucket link always takes the full allocation, never the star fast path
(:func:`touched`; :func:`.flows.single_bottleneck` never marks one pure), so every change of a
bucket link's load passes through :func:`after_allocation`. Buckets start full. The reference
oracle (:mod:`sgdnet.engine.reference`) plays the same rules.
"""

from __future__ import annotations

import numpy as np

from . import flows
from .jit import FALSE, TRUE, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'flows.py', 'event_heap.py', '../layout.py')

#: columns of the buckets' state ``tb`` (R, 5): tokens (bytes) at time ``TB_T``, the load
#: (bytes/s through the link) and the sustained capacity since then, the time the bucket runs dry
TB_TOK, TB_T, TB_X, TB_CS, TB_NEXT = 0, 1, 2, 3, 4
N_TB = 5
#: relative tolerance of "saturated" and "above the sustained rate" (the rates' rounding)
TB_EPS = 1e-12


@inner
def init(r_tb, r_bw, r_cur, tb, bk):
    """Every link's base capacity and its bucket, full at time 0; the links with one in
    ``bk[:n]``, ``n`` returned."""
    n = 0
    for r in range(r_bw.size):
        r_cur[r] = r_bw[r]
        tb[r, TB_NEXT] = np.inf
        if r_tb[r, 0] > 0.0:
            bk[n] = r
            n += 1
            r_cur[r] = r_tb[r, 1]
            tb[r, TB_TOK] = r_tb[r, 0]
            tb[r, TB_CS] = r_bw[r]
    return n


@inner
def touched(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr, psres_idx, r_tb):
    """Whether a link of the flows started at this instant, or one whose flow set changed, has a
    token bucket (then the full allocation runs: the fast path keeps no bucket's load)."""
    for i in range(nsd):
        if r_tb[f_seeds[i], 0] > 0.0:
            return True
    for i in range(nfn):
        t = s_trans[f_new[i]]
        for k in range(psres_ptr[t], psres_ptr[t + 1]):
            if r_tb[psres_idx[k], 0] > 0.0:
                return True
    return False


@inner
def after_allocation(now, fu_nl, f_CL, f_rc, used, r_bw, r_cur, r_tb, re_ptr, re_val, tb):
    """After a full allocation: each bucket link of the component counts its tokens up to now
    (at the load it had), takes its new load (its capacity in that allocation minus what is left of
    it), and sets its base capacity and the time its bucket runs dry. A link whose flows move more
    than its sustained rate drains (dry at ``now + tokens / excess``: at once when it holds none,
    the allocation having used a peak it no longer has); else it keeps its peak while it holds
    tokens or has room to spare (a link that is nobody's bottleneck: its capacity changes no
    rate), and its bandwidth while it is saturated with an empty bucket."""
    for i in range(fu_nl):
        r = f_CL[i]
        b = r_tb[r, 0]
        if b <= 0.0:
            continue
        tok = tb[r, TB_TOK] + (tb[r, TB_CS] - tb[r, TB_X]) * (now - tb[r, TB_T])
        if tok > b:
            tok = b
        elif not tok > b * TB_EPS:
            tok = 0.0
        n = used[r]
        cs = flows.link_capacity(r, n, r_bw, re_ptr, re_val)
        x = flows.link_capacity(r, n, r_cur, re_ptr, re_val) - f_rc[r] if n > 0 else 0.0
        if x < 0.0:
            x = 0.0
        tb[r, TB_TOK] = tok
        tb[r, TB_T] = now
        tb[r, TB_X] = x
        tb[r, TB_CS] = cs
        if x > cs * (1.0 + TB_EPS):
            tb[r, TB_NEXT] = now + tok / (x - cs)
        else:
            tb[r, TB_NEXT] = np.inf
            r_cur[r] = r_tb[r, 1] if tok > 0.0 or x < cs * (1.0 - TB_EPS) else r_bw[r]


@inner
def due(nbk, bk, tb):
    """The bucket link (of ``bk[:nbk]``, in index order) that runs dry first and when (-1 and
    inf: none)."""
    bt = np.inf
    br = -1
    for i in range(nbk):
        r = bk[i]
        if tb[r, TB_NEXT] < bt:
            bt = tb[r, TB_NEXT]
            br = r
    return br, bt


@phase
def run_dry(r, now, r_bw, r_cur, tb, f_pend, f_seeds, nsd):
    """Link ``r``'s bucket runs dry at ``now``: no tokens, its bandwidth as base capacity, its
    component re-allocated before time advances (``r`` joins the seeds). Returns ``nsd``."""
    tb[r, TB_TOK] = 0.0
    tb[r, TB_T] = now
    tb[r, TB_NEXT] = np.inf
    r_cur[r] = r_bw[r]
    return flows.seed(r, f_pend, f_seeds, nsd)


@phase
def dry_next(now, same, eh_n, ekt, nbk, bk, r_bw, r_cur, tb, f_pend, f_seeds, nsd):
    """Section C, after the re-allocation: the bucket that runs dry first, if that is before the
    next completion or with it, is played now (:func:`run_dry`). Returns ``(played, now, same,
    nsd)``; ``same`` counts the instants played at one time, as completions do."""
    br, bt = due(nbk, bk, tb)
    if br < 0 or bt > (ekt[0] if eh_n > 0 else np.inf):
        return FALSE, now, same, nsd
    if bt != now:
        same = 0
        now = bt
    nsd = run_dry(br, now, r_bw, r_cur, tb, f_pend, f_seeds, nsd)
    return TRUE, now, same + 1, nsd
