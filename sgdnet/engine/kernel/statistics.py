"""Statistics of the counting window: busy times, sojourns, marking integrals, histograms.

Invariants, while counting (from ``t0``, the warm-up's last step): ``o_ptok[p]`` holds
``sum(delta * (tau - t0))`` over the marking changes of place ``p`` (one update per change; at
``t1`` the integral of the marking over ``[t0, t1]`` is ``m(t1) (t1 - t0)`` minus that sum,
:func:`finish`); a queued resource's busy time is added at each completion (from
``max(start, t0)``), a ps resource's integrated at each holder change, a link's is the bytes it
carried over its bandwidth; histograms are log-linear (:mod:`sgdnet.results`), their bin read
from the bits of the duration (:func:`hist_add`).
"""

from __future__ import annotations

from ...net.compiled import DISC_FLOW, DISC_PS
from ...results import HIST_BINS, HIST_KEY0, HIST_LO, HIST_SUB_BITS
from ..abi import (
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
    ST_HALTED,
    ST_OK,
)
from ..layout import TS_PS0, TS_PS1
from ..periodic import PF_CYC, PF_PER, PF_SKIP, PF_START, PF_WSKIP
from . import flows
from .jit import HALT_POLL, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'event_heap.py', 'flows.py', '../../net/compiled.py', '../../results.py', '../abi.py',
               '../layout.py', '../periodic.py')


@inner
def queued_busy(s, now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy):
    """Add the busy time firing ``s``, still running at the end, gave its queued resources."""
    t = s_trans[s]
    st0 = s_start[s]
    if st0 < t0:
        st0 = t0
    for k in range(qres_ptr[t], qres_ptr[t + 1]):
        o_busy[qres_idx[k]] += now - st0


HIST_SUB_BITS_SHIFT = 52 - HIST_SUB_BITS  # float64 bits -> (biased exponent, leading mantissa bits)


@inner
def hist_add(h, r, x, hb_f, hb_i):
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


@inner
def finish(now, t0, m, o_ptok, o_busy, eh, eh_n, s_trans, s_start, qres_ptr, qres_idx, r_disc,
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
        queued_busy(eh[i], now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy)
    for r in range(nR):
        if r_disc[r] == DISC_FLOW:
            for j in range(gn[r_ps[r]]):
                s = gh[r_ps[r], j]
                if not s_inh[s]:
                    queued_busy(s, now, t0, s_trans, s_start, qres_ptr, qres_idx, o_busy)
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
                o_busy[r] += (s_w0[s] - flows.remaining(s, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem,
                                                  s_rate, s_last)) / r_bw[r]


@inner
def count_start(now, o_ptok, blast, r_disc, r_ps, ps_h, ps_n, s_w0, s_grp, s_vf, g_V, g_rate,
                 g_tau, s_rem, s_rate, s_last):
    """Counting starts ``now`` (the warm-up's last step): the marking integrals start from zero,
    the resources' busy clocks from ``now``, and each flow in progress counts only the bytes it
    has left (``s_w0``) in its links' busy time. Once per replication: an ``inner`` helper, not
    forced inline (LLVM inlines it anyway, at its one call site)."""
    for p in range(o_ptok.size):
        o_ptok[p] = 0.0
    for r in range(blast.size):
        blast[r] = now
        if r_disc[r] == DISC_FLOW:
            rp = r_ps[r]
            for j in range(ps_n[rp]):
                s2 = ps_h[rp, j]
                s_w0[s2] = flows.remaining(s2, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate,
                                     s_last)


@phase
def shared_sojourn(t, s, now, hist, TS, psres_idx, o_ssum, o_sn, o_hs, hb_f, hb_i, s_req):
    """While counting, completion of firing ``s`` of ``t``: its sojourn (completion - request) at
    each of its shared resources (ps, links)."""
    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
        r = psres_idx[k]
        o_ssum[r] += now - s_req[s]
        o_sn[r] += 1
        if hist:
            hist_add(o_hs, r, now - s_req[s], hb_f, hb_i)


@inner
def write_outputs(o_f, o_i, t0, t1, now, status, events, nsteps, ntr, nglog, nrec, grow, pf_i, pf_f,
                  m, gcnt, grel, o_mark, o_gcnt, o_grel):
    """The end of a replication: its scalars into the ``o_f`` / ``o_i`` slots of
    :mod:`sgdnet.engine.abi`, the final marking and gate counters into their arrays."""
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
    for p in range(m.size):
        o_mark[p] = m[p]
    for q in range(gcnt.size):
        o_gcnt[q] = gcnt[q]
        o_grel[q] = grel[q]


@phase
def poll(events, max_events, halt, prog, nsteps):
    """The budget and the halt flag, read when ``events`` passes the loop's ``ev_limit``: returns
    ``(status, next limit)``, the status ``ST_BUDGET`` beyond ``max_events``, ``ST_HALTED`` when
    another thread set ``halt``, else ``ST_OK`` with the step completions so far in ``prog``."""
    if events > max_events:
        return ST_BUDGET, events
    if halt[0] != 0:
        return ST_HALTED, events
    prog[0] = nsteps
    return ST_OK, min(max_events, events + HALT_POLL)
