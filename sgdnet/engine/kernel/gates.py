"""Gates: bounded-staleness synchronisation of gate members (lag, dynamic lag).

Invariants: ``gcnt[gm]`` counts the completions of gate member ``gm``'s counting transitions
(``F_CNT``), ``gmin[g]`` is the smallest count of gate ``g``'s members; a guarded transition
(``F_GUARD``) may start only while its member's lead ``gcnt - gmin`` is within the gate's bound
(see :func:`sgdnet.engine.kernel.enabling.degree`), so each change of ``gmin`` re-tests the gate's
guarded transitions. A dynamic-lag member beyond ``s_lower`` needs a release (``grel``), granted
at its completion when the two-sided controller allows it; a start consumes it.
"""

from __future__ import annotations

import numpy as np

from ...net.compiled import GATE_DYNAMIC_LAG
from ..layout import TS_GUARD
from .jit import phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../net/compiled.py', '../layout.py')


@phase
def count(t, now, cnt_ptr, cnt_mem, mem_gate, g_kind, g_ptr, g_slow, g_rmax, gg_ptr,
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


@phase
def consume_release(t, TS, grel, mg_ptr, mg_trans, isd, dl, dn):
    """Start of guarded ``t``: a dynamic-lag release its member held is consumed, and the member's
    guarded transitions are re-tested (put on the dirty list). Returns the list's length."""
    gm = TS[t, TS_GUARD]
    if grel[gm] != 0:
        grel[gm] = 0
        for q in range(mg_ptr[gm], mg_ptr[gm + 1]):
            u = mg_trans[q]
            if not isd[u]:
                isd[u] = True
                dl[dn] = u
                dn += 1
    return dn
