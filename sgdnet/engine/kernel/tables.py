"""The per-transition row tables, filled once per replication from the compiled net's arrays.

Invariant: ``TS`` (static columns and the flag bits ``F_*`` of :mod:`sgdnet.engine.layout`),
``TD`` (dynamic) and ``TF`` (float) hold one row per transition, one or two cache lines each, so
the event loop reads a transition's data from adjacent memory; a flag is set exactly when the
transition uses the feature (``F_SELF``: its own degree after a start is not simply one less,
because inhibitors may be released by the consumption or a dynamic_lag release is consumed).
"""

from __future__ import annotations

from ...net.compiled import DISC_FLOW, GATE_DYNAMIC_LAG
from ..layout import (
    F_BACKLOG,
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
    NONE,
    TD_FROM,
    TD_RQCAP,
    TD_RQOFF,
    TD_WHERE,
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
from .jit import I0, I1, JOIN_ARCS, inner

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../net/compiled.py', '../layout.py')


@inner
def fill(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr,
            mod_of, psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls, rank,
            d_code, d_par, rq_off, rq_cap, jn_link):
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
        if jn_link[t] >= 0:
            f |= F_BACKLOG
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


@inner
def request_rings(servers, rq_cap, rq_off):
    """Each transition's ring of request times in one pool: room for ``min(servers, 4)``
    requests at first (``rq_cap``, at offset ``rq_off``); returns the pool's used length."""
    used = 0
    for t in range(servers.size):
        c = min(servers[t], 4)
        rq_cap[t] = c
        rq_off[t] = used
        used += c
    return used


@inner
def all_dirty(dl, isd):
    """Mark every transition dirty for the loop's first pass (``dl[:nT]`` in index order,
    ``isd``); returns the dirty list's length ``nT``."""
    nT = isd.size
    for t in range(nT):
        dl[t] = t
        isd[t] = True
    return nT


@inner
def holder_sizes(r_ps, psres_ptr):
    """``(nps, maxps)``: the number of processor-sharing resources and links (``r_ps[r] >= 0``),
    and the most of them one transition holds (at least 1)."""
    nps = I0
    for r in range(r_ps.size):
        if r_ps[r] >= 0:
            nps += 1
    maxps = I1
    for t in range(psres_ptr.size - 1):
        k = psres_ptr[t + 1] - psres_ptr[t]
        if k > maxps:
            maxps = k
    return nps, maxps
