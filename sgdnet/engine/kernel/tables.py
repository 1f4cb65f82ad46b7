"""The per-transition row tables, filled once per replication from the compiled net's arrays.

Invariant: ``TS`` (static columns and the flag bits ``F_*`` of :mod:`sgdnet.engine.layout`),
``TD`` (dynamic) and ``TF`` (float) hold one row per transition, one or two cache lines each, so
the event loop reads a transition's data from adjacent memory; a flag is set exactly when the
transition uses the feature (``F_SELF``: its own degree after a start is not simply one less,
because inhibitors may be released by the consumption or a dynamic_lag release is consumed).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...net.compiled import DISC_FLOW, GATE_DYNAMIC_LAG
from ..layout import (
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
from ..periodic import N_PF, N_PFF, PF_NEXT, PF_STRIDE, PZ_HIST, PZ_OFF, _pa_sizes, _pz_room
from .jit import I0, JOIN_ARCS, inner

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../net/compiled.py', '../layout.py', '../periodic.py')


@inner
def fill(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr,
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


@njit(inline="always")
def checkpoint_buffers(period, nP, nT, nR, nMem, nG, scap, maxps, nqh, nrq, nps, hcap, o_glead,
                       o_ghist, o_hw):
    """The periodic search's state and buffers (:mod:`sgdnet.engine.periodic`), allocated once
    (inlined into the loop's set-up). With ``period`` > 0 (a net without randomness), a
    checkpoint every ``period`` step completions, in the warm-up too (its search starts over when
    counting starts); the search's state is in ``pf_i`` / ``pf_f`` and its buffers are sized for
    the largest state, so the event loop carries nothing more (``np.empty`` touches no page a
    smaller state does not use; they are written before they are read)."""
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
        pz_ni, pz_nf = _pz_room(nP, nT, nR, nMem, scap, maxps, nqh, nrq, max(nps, 1), hcap)
        pa_nf, pa_ni = _pa_sizes(nT, nP, nR, nMem, nG, o_glead, o_ghist, o_hw)
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
    return pf_i, pf_f, pf_hh, pf_hs, zi, zf, zs, yi, yf, ys, zn, a_f, a_i, pz_live, pz_idx


@njit(inline="always")
def request_rings(servers, cap_requests):
    """Each transition's ring of request times in one pool, allocated once (inlined into the
    loop's set-up): room for ``min(servers, 4)`` requests each at first (a ring moves to a larger
    place of the pool when full), the pool at least ``cap_requests`` long. Returns
    ``(rq_cap, rq_off, rq_pool, used length)``."""
    nT = servers.size
    rq_cap = np.empty(nT, dtype=np.int64)
    rq_off = np.empty(nT, dtype=np.int64)
    rq_used = I0  # an int64, not a literal: helpers it is passed to compile once
    for t in range(nT):
        c = servers[t]
        if c > 4:
            c = 4
        rq_cap[t] = c
        rq_off[t] = rq_used
        rq_used += c
    rq_pool = np.zeros(max(rq_used, cap_requests), dtype=np.float64)
    return rq_cap, rq_off, rq_pool, rq_used
