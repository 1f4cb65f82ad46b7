"""Periodic regimes of deterministic runs: find one, then skip the periods it repeats.

A net without randomness is a deterministic system, and the event kernel's future depends only
on its state (markings, pending requests, running firings and flows, queues, gate counters), not
on the absolute time: if the state at one instant equals the state at an earlier one with every
time shifted by ``P``, the run from then on repeats the run since then, shifted by ``P`` per
period. Most deterministic SGD nets settle into such a cycle within a few rounds (max-plus
theory guarantees it for event graphs). :func:`sgdnet.engine.kernel.run_replication` then jumps
``M`` whole periods ahead instead of playing them: every time in its state moves by ``M P``,
virtual clocks, start sequences and gate counters by ``M`` times their change over a period,
every counter and sum of the outputs by ``M`` times its change over a period, and the kept step
samples (and gate decisions) of the period are repeated, shifted; the last periods before the
end are played, so the run ends as a full run does.

How a period is found (at *checkpoints*: the first instant at which the step completions reach
a multiple of the net's step transitions; during the warm-up too, and again from its end):

1. The state is written out in a canonical form (:func:`_pz_core`, :func:`_pz_slots`,
   :func:`_pz_links`, :func:`_pz_gates`): integers as they are (a firing slot by its position
   among the running firings, sequence numbers relative to the next one, gate counters relative to the gate's minimum), times relative to
   now, bytes relative to their group's virtual clock, each float with the scale its rounding
   error is relative to.
2. A coarse hash of it (floats quantised at ``2**-HASH_BITS`` of their scale) is compared with
   the hashes of the last :data:`PZ_HIST` checkpoints: a match at distance ``p`` step
   completions is a candidate period.
3. The candidate is confirmed one period later by comparing the whole canonical state
   (:func:`_pz_same`): integers exactly, floats to :data:`TOL` of their scale (rounding in a
   long run is ~1e-15 of it). Only then does the kernel jump.

So a jump is exact up to rounding: the skipped periods' results differ from played ones by a
few units in the last place of the run's times (the tests compare to 1e-9). A run that never
repeats pays one canonical write-out per checkpoint (the checkpoints thin out, doubling their
spacing, when none matches), and is otherwise unchanged.

The warm-up is searched and skipped the same way (a deterministic SGD net usually repeats from
its first rounds, and a warm-up of 10-14 rounds was most of what a skipped run still played):
a jump there stops at least one step completion before the warm-up's end, so counting starts
as in a played run, and the search then starts over (:func:`_pz_restart`), so that a candidate
and its confirmation, and the counters a jump extrapolates, never straddle the start of counting;
when the warm-up skipped periods, its period is checked again at once (the state one period into
the count is the candidate).
The steps skipped in the warm-up are reported apart (``warmup_skipped_steps``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..net.compiled import DISC_FIFO, DISC_FLOW, DISC_PS
from .layout import (
    F_FLOW,
    F_PS,
    F_S1,
    TD_ACT,
    TD_DEG,
    TD_FROM,
    TD_RQCAP,
    TD_RQHEAD,
    TD_RQOFF,
    TD_WHERE,
    TF_KTIME,
    TS_FL,
    TS_PS0,
    TS_PS1,
)

__all__ = ["TOL", "HASH_BITS", "PZ_HIST", "MAX_STATE_BYTES", "state_bytes", "N_PF", "N_PFF", "PZ_OFF",
           "PZ_RESTART"]

JIT_DEPENDS = ("layout.py", "../net/compiled.py")

#: relative tolerance of the confirming comparison of two canonical states
TOL = 1e-11
#: the coarse hash quantises a float at 2**-HASH_BITS of the power of two above its scale
HASH_BITS = 24
#: checkpoint hashes kept (periods of up to this many checkpoint spacings are found)
PZ_HIST = 16
#: failed confirmations after which a run stops looking
PZ_FAILS = 8

# slots of the search's int64 state array ``pf_i`` (the kernel keeps no scalar of its own for the
# search, so that its event loop carries nothing more): the next checkpoint (PZ_OFF when not
# looking), searching (0), confirming (1), taking the next checkpoint as the candidate (2) or
# starting over (PZ_RESTART),
# checkpoint spacing, checkpoints without a match, failed confirmations, hashes kept and the next
# ring slot; the candidate's step completions, kept steps, completions, start sequence and logged
# gate decisions, the sizes of its canonical state; the jump: step completions at the repeated
# period's start, its length, steps skipped (after the warm-up, in it); ``pf_f``: the
# candidate's time, the period's duration
PF_NEXT, PF_STATE, PF_STRIDE, PF_MISS, PF_FAIL, PF_HN, PF_HK = 0, 1, 2, 3, 4, 5, 6
PF_CSTEPS, PF_CREC, PF_CEVENTS, PF_CSEQ, PF_CGLOG, PF_YNI, PF_YNF = 7, 8, 9, 10, 11, 12, 13
PF_START, PF_PER, PF_SKIP, PF_WSKIP = 14, 15, 16, 17
N_PF = 18
PF_CNOW, PF_CYC = 0, 1
N_PFF = 2
#: ``pf_i[PF_NEXT]`` when the kernel is not looking (never reached)
PZ_OFF = (1 << 62)
#: ``pf_i[PF_STATE]`` set by the kernel when counting starts: it calls :func:`_pz_restart` at
#: the next checkpoint site instead of writing the state out (a store in the completion loop,
#: not a call)
PZ_RESTART = 3

#: no search for a period when the canonical states would take more memory than this
MAX_STATE_BYTES = 1 << 30


def state_bytes(cn) -> int:
    """About the memory the search takes for compiled net ``cn`` (see :func:`_pz_room`): the
    canonical state and the kept candidate, sized for every slot busy (~13 ints and ~9 floats,
    with their scales, per transition), and the saved counters."""
    ni = cn.n_places + 13 * cn.n_transitions + 8 * cn.n_resources + 3 * cn.n_members + 64
    nf = 10 * cn.n_transitions + 3 * cn.n_resources + 2 * cn.n_members + 64
    return 8 * (2 * ni + 4 * nf + 3 * cn.n_transitions + cn.n_places)


_inner = njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
              no_cfunc_wrapper=True)
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_INF_KEY = np.int64(1) << 62


# ------------------------------------------------------------ canonical state
@_inner
def _rq_at(TD, t, i):
    """Where transition ``t``'s ``i``-th oldest pending request time is in the request pool."""
    j = TD[t, TD_RQHEAD] + i
    if j >= TD[t, TD_RQCAP]:
        j -= TD[t, TD_RQCAP]
    return TD[t, TD_RQOFF] + j


@_inner
def _pz_core(now, m, TD, TS, TF, rq_pool, used, qn, qhd, qh, rq_base, r_disc, zi, zf, zs, zn):
    """Markings, each transition's firings, requests and where it waits, each resource's users
    and queue, appended to ``zi``/``zf`` (scales in ``zs``) from ``zn = (ints, floats)``;
    False when the arrays are too short."""
    ni = zn[0]
    nf = zn[1]
    nP = m.size
    nT = TD.shape[0]
    nR = used.size
    if ni + nP + 4 * nT + 2 * nR > zi.size:
        return False
    for p in range(nP):
        zi[ni] = m[p]
        ni += 1
    for t in range(nT):
        d = TD[t, TD_DEG]
        zi[ni] = TD[t, TD_ACT]
        zi[ni + 1] = d
        zi[ni + 2] = TD[t, TD_WHERE]
        zi[ni + 3] = TD[t, TD_FROM]
        ni += 4
        if d > 0:
            if nf + d > zf.size:
                return False
            if TS[t, TS_FL] & F_S1:
                zf[nf] = now - TF[t, TF_KTIME]
                zs[nf] = now
                nf += 1
            else:
                for i in range(d):
                    zf[nf] = now - rq_pool[_rq_at(TD, t, i)]
                    zs[nf] = now
                    nf += 1
    for r in range(nR):
        n = qn[r]
        if ni + 2 + n > zi.size:
            return False
        zi[ni] = used[r]
        zi[ni + 1] = n
        ni += 2
        qb = rq_base[r]
        cap = rq_base[r + 1] - qb
        for i in range(n):
            j = i
            if r_disc[r] == DISC_FIFO:
                j = qhd[r] + i
                if j >= cap:
                    j -= cap
            zi[ni] = qh[qb + j]
            ni += 1
    zn[0] = ni
    zn[1] = nf
    return True


@_inner
def _pz_live(eh, eh_n, ps_h, ps_n, idx, live):
    """The slots of running firings (the completion heap's, then the shared resources' holders),
    each once, into ``live``, and each one's position there into ``idx`` (all -1 before; the
    caller puts the -1 back with :func:`_pz_unlive`); their number. Slot numbers are written
    out as these positions: which free slot a firing drew does not change the run."""
    n = 0
    for i in range(eh_n):
        s = eh[i]
        if idx[s] < 0:
            idx[s] = n
            live[n] = s
            n += 1
    for rp in range(ps_n.size):
        for j in range(ps_n[rp]):
            s = ps_h[rp, j]
            if idx[s] < 0:
                idx[s] = n
                live[n] = s
                n += 1
    return n


@_inner
def _pz_unlive(idx, live, n):
    for i in range(n):
        idx[live[i]] = -1


@_inner
def _pz_slots(now, seq, eh, ekt, eks, eh_n, idx, live, n_live, TS, s_trans, s_seq, s_start, s_req,
              s_rem, s_rate, s_last, s_grp, s_vf, s_inh, s_w0, s_gpos, s_php, g_V, zi, zf, zs, zn):
    """The completion heap (slot, sequence, time) and each running firing's state; bytes are
    scaled by the largest virtual clock (their rounding comes from it)."""
    vsc = 1.0
    for r in range(g_V.size):
        if abs(g_V[r]) > vsc:
            vsc = abs(g_V[r])
    ni = zn[0]
    nf = zn[1]
    if ni + 2 * eh_n + n_live * (6 + s_php.shape[1]) > zi.size or nf + eh_n + 7 * n_live > zf.size:
        return False
    for i in range(eh_n):
        zi[ni] = idx[eh[i]]
        zi[ni + 1] = seq - eks[i]
        ni += 2
        zf[nf] = ekt[i] - now
        zs[nf] = now
        nf += 1
    for i in range(n_live):
        # what a start sets for every firing; what a ps firing or a flow keeps besides (a slot
        # drawn from the free list keeps stale values of its earlier firings elsewhere)
        s = live[i]
        t = s_trans[s]
        f = TS[t, TS_FL]
        zi[ni] = t
        zi[ni + 1] = seq - s_seq[s]
        ni += 2
        zf[nf] = now - s_start[s]
        zs[nf] = now
        zf[nf + 1] = now - s_req[s]
        zs[nf + 1] = now
        nf += 2
        if f & F_PS:
            for j in range(TS[t, TS_PS1] - TS[t, TS_PS0]):
                zi[ni] = s_php[s, j]
                ni += 1
            zf[nf] = s_rem[s]
            zs[nf] = abs(s_rem[s]) + vsc
            zf[nf + 1] = s_rate[s]
            zs[nf + 1] = abs(s_rate[s])
            zf[nf + 2] = now - s_last[s]
            zs[nf + 2] = now
            nf += 3
        if f & F_FLOW:
            g = s_grp[s]
            zi[ni] = g
            zi[ni + 1] = 1 if s_inh[s] else 0
            ni += 2
            zf[nf] = s_w0[s]
            zs[nf] = abs(s_w0[s]) + vsc
            nf += 1
            if g >= 0:
                zi[ni] = s_gpos[s]
                ni += 1
                zf[nf] = s_vf[s] - g_V[g]
                zs[nf] = abs(s_vf[s]) + vsc
                nf += 1
    zn[0] = ni
    zn[1] = nf
    return True


@_inner
def _pz_links(now, idx, r_disc, r_ps, ps_h, ps_n, gn, gh, g_head, g_rate, g_tau, f_comp, f_pure, f_m,
              blast, zi, zf, zs, zn):
    """Each shared resource's holders and flow groups, and each link's allocation state."""
    ni = zn[0]
    nf = zn[1]
    nR = r_disc.size
    for r in range(nR):
        rp = r_ps[r]
        k = 0 if rp < 0 else ps_n[rp] + gn[rp]
        if ni + 5 + k > zi.size or nf + 4 > zf.size:
            return False
        zi[ni] = f_comp[r]
        zi[ni + 1] = 1 if f_pure[r] else 0
        zi[ni + 2] = idx[g_head[r]] if g_head[r] >= 0 else -1
        ni += 3
        if rp >= 0:
            zi[ni] = ps_n[rp]
            zi[ni + 1] = gn[rp]
            ni += 2
            for j in range(ps_n[rp]):
                zi[ni] = idx[ps_h[rp, j]]
                ni += 1
            for j in range(gn[rp]):
                zi[ni] = idx[gh[rp, j]]
                ni += 1
        if r_disc[r] == DISC_FLOW:
            zf[nf] = g_rate[r]
            zs[nf] = abs(g_rate[r])
            zf[nf + 1] = f_m[r]
            zs[nf + 1] = abs(f_m[r])
            nf += 2
            if g_rate[r] != 0.0:
                zf[nf] = now - g_tau[r]
                zs[nf] = now
                nf += 1
        elif r_disc[r] == DISC_PS:
            zf[nf] = now - blast[r]
            zs[nf] = now
            nf += 1
    zn[0] = ni
    zn[1] = nf
    return True


@_inner
def _pz_gates(now, gcnt, gmin, mem_gate, grel, galw, glast, gprev, zi, zf, zs, zn):
    """Each gate member's lead over its gate's slowest, release state and last two completions."""
    ni = zn[0]
    nf = zn[1]
    nMem = gcnt.size
    if ni + 3 * nMem > zi.size or nf + 2 * nMem > zf.size:
        return False
    for q in range(nMem):
        zi[ni] = gcnt[q] - gmin[mem_gate[q]]
        zi[ni + 1] = grel[q]
        zi[ni + 2] = galw[q]
        ni += 3
        zf[nf] = now - glast[q]
        zs[nf] = now
        zf[nf + 1] = now - gprev[q]
        zs[nf + 1] = now
        nf += 2
    zn[0] = ni
    zn[1] = nf
    return True


@_inner
def _pz_hash(zi, zf, zs, ni, nf):
    """Two 64-bit hashes of a canonical state, floats quantised at ``2**-HASH_BITS`` of the power
    of two above their scale (two states that hash alike are then confirmed by :func:`_pz_same`)."""
    h1 = np.uint64(ni * 1000003 + nf)
    h2 = np.uint64(nf * 1000033 + ni)
    for i in range(ni):
        v = np.uint64(zi[i] & 0x7FFFFFFFFFFFFFFF)
        h1 = (h1 ^ v) * _M1
        h2 = (h2 ^ (v + np.uint64(i))) * _M2
        h1 ^= h1 >> np.uint64(29)
        h2 ^= h2 >> np.uint64(31)
    for i in range(nf):
        x = zf[i]
        if math.isfinite(x):
            e = math.frexp(zs[i])[1] if zs[i] > 0.0 else -1074
            k = np.int64(math.floor(math.ldexp(x, HASH_BITS - e)))
        else:
            k = _INF_KEY if x > 0 else -_INF_KEY
        v = np.uint64(k & 0x7FFFFFFFFFFFFFFF)
        h1 = (h1 ^ v) * _M2
        h2 = (h2 ^ (v + np.uint64(i))) * _M1
        h1 ^= h1 >> np.uint64(31)
        h2 ^= h2 >> np.uint64(29)
    return h1, h2


@_inner
def _pz_same(zi, zf, zs, ni, nf, yi, yf, ys, mi, mf):
    """Whether two canonical states are the same: integers equal, floats within :data:`TOL` of
    their scale."""
    if ni != mi or nf != mf:
        return False
    for i in range(ni):
        if zi[i] != yi[i]:
            return False
    for i in range(nf):
        a = zf[i]
        b = yf[i]
        if a != b:
            s = zs[i] if zs[i] > ys[i] else ys[i]
            if not abs(a - b) <= TOL * s:
                return False
    return True


@_inner
def _pz_room(nP, nT, nR, nMem, scap, maxps, qh_size, rq_size, nps, hcap):
    """Ints and floats a canonical state can take at most (every slot running, every queue and
    request ring full): what :func:`_pz_core`, :func:`_pz_slots`, :func:`_pz_links` and
    :func:`_pz_gates` write."""
    ni = (nP + 4 * nT + 2 * nR + qh_size + 2 * scap + scap * (5 + maxps) + 5 * nR + 2 * nps * hcap
          + 3 * nMem + 16)
    nf = rq_size + nT + 8 * scap + 3 * nR + 2 * nMem + 16
    return ni, nf


@_inner
def _pz_search(nsteps, nrec, events, seq, nglog, now, zi, zf, zs, zn, yi, yf, ys, pf_i, pf_f, pf_hh,
               pf_hs):
    """One checkpoint of the search, the canonical state in ``zi``/``zf``/``zs``: 1 when it is a
    candidate (copied into ``yi``/``yf``/``ys``; the caller saves the accumulators), 2 when it
    confirms the candidate (the caller jumps, :func:`_pz_jump`), else 0. A candidate is a hash
    equal to a kept one (searching), or any state when the warm-up's period is to be confirmed
    (:func:`_pz_restart`)."""
    if pf_i[PF_STATE] == 1:
        if nsteps == pf_i[PF_NEXT] and _pz_same(zi, zf, zs, zn[0], zn[1], yi, yf, ys, pf_i[PF_YNI],
                                                pf_i[PF_YNF]):
            return 2
        pf_i[PF_STATE] = 0
        pf_i[PF_FAIL] += 1
        pf_i[PF_NEXT] = PZ_OFF if pf_i[PF_FAIL] >= PZ_FAILS else nsteps + pf_i[PF_STRIDE]
        return 0
    d = 0
    if pf_i[PF_STATE] == 2:
        d = pf_i[PF_PER]
    else:
        h1, h2 = _pz_hash(zi, zf, zs, zn[0], zn[1])
        for i in range(pf_i[PF_HN]):  # the newest first: the shortest candidate period
            j = (pf_i[PF_HK] - 1 - i) % PZ_HIST
            if pf_hh[j, 0] == h1 and pf_hh[j, 1] == h2:
                d = nsteps - pf_hs[j]
                break
        if d == 0:
            hk = pf_i[PF_HK]
            pf_hh[hk, 0] = h1
            pf_hh[hk, 1] = h2
            pf_hs[hk] = nsteps
            pf_i[PF_HK] = (hk + 1) % PZ_HIST
            if pf_i[PF_HN] < PZ_HIST:
                pf_i[PF_HN] += 1
            pf_i[PF_MISS] += 1
            if pf_i[PF_MISS] >= 4 * PZ_HIST:  # no period in sight: thin the checkpoints out
                pf_i[PF_STRIDE] *= 2
                pf_i[PF_MISS] = 0
                pf_i[PF_HN] = 0
            pf_i[PF_NEXT] = nsteps + pf_i[PF_STRIDE]
            return 0
    # a candidate period d: keep this state, confirm one period later
    for i in range(zn[0]):
        yi[i] = zi[i]
    for i in range(zn[1]):
        yf[i] = zf[i]
        ys[i] = zs[i]
    pf_i[PF_YNI] = zn[0]
    pf_i[PF_YNF] = zn[1]
    pf_i[PF_CSTEPS] = nsteps
    pf_i[PF_CREC] = nrec
    pf_i[PF_CEVENTS] = events
    pf_i[PF_CSEQ] = seq
    pf_i[PF_CGLOG] = nglog
    pf_f[PF_CNOW] = now
    pf_i[PF_STATE] = 1
    pf_i[PF_NEXT] = nsteps + d
    return 1


@_inner
def _pz_jump(nsteps, events, now, bound, max_events, warm, pf_i, pf_f, pf_hs):
    """The periods to skip once a candidate is confirmed at ``nsteps``: as many as leave at least
    one step completion to play before ``bound`` (the run's last, or in the warm-up (``warm``)
    the one that starts counting) and keep the completions within ``max_events``; records the
    jump in ``pf_i``/``pf_f`` and stops the search (until counting starts, when ``warm``: the
    kept checkpoints' step counts then move with the jump, so that they still name the states
    their hashes are of). 0: none (too close to the bound, or time did not advance over the
    period)."""
    p = nsteps - pf_i[PF_CSTEPS]
    P = now - pf_f[PF_CNOW]
    de = events - pf_i[PF_CEVENTS]
    M = (bound - 1 - nsteps) // p
    if de > 0 and (max_events - events) // de - 1 < M:
        M = (max_events - events) // de - 1
    pf_i[PF_NEXT] = PZ_OFF
    if not P > 0.0 or M < 1:
        return 0
    pf_i[PF_START] = pf_i[PF_CSTEPS]
    pf_i[PF_PER] = p
    if warm:
        pf_i[PF_WSKIP] += M * p
        for j in range(pf_hs.size):
            pf_hs[j] += M * p
    else:
        pf_i[PF_SKIP] = M * p
    pf_f[PF_CYC] = P
    return M


@_inner
def _pz_restart(nsteps, period, pf_i):
    """Start the search over when counting has started (at ``nsteps``, or in the completions
    of the same instant; the kernel then only sets ``PZ_RESTART``, a store in its completion
    loop, and calls this at the next checkpoint site): no candidate (a candidate's
    saved counters must be counting ones), no misses or failures, the first spacing. When the
    warm-up skipped periods, its period is confirmed again at once: the state one period on is
    the candidate (a period of counting makes the accounting fields reset here, such as a link's
    last busy update, repeat), compared one period later, so the count plays two periods before
    it jumps instead of the three or more a new search takes. Else the next checkpoint is one
    ``period`` on, and the warm-up's hashes are kept."""
    pf_i[PF_STRIDE] = period
    pf_i[PF_MISS] = 0
    pf_i[PF_FAIL] = 0
    if pf_i[PF_WSKIP] > 0:
        pf_i[PF_STATE] = 2
        pf_i[PF_NEXT] = nsteps + pf_i[PF_PER]
    else:
        pf_i[PF_STATE] = 0
        pf_i[PF_NEXT] = nsteps + period


# ------------------------------------------------------------ the jump
@_inner
def _pa_sizes(nT, nP, nR, nMem, nG, o_glead, o_ghist, o_hw):
    """Sizes of the saved float and int accumulators (see :func:`_pa_step`)."""
    return 4 * nR + nP, nT + 2 * nR + nMem + nG + o_glead.size + o_ghist.size + 2 * o_hw.size


@_inner
def _pa_step(M, a_f, a_i, o_busy, o_wsum, o_ssum, o_ptok, g_V, o_firings, o_wn, o_sn, gcnt, gmin,
             o_glead, o_ghist, o_hw, o_hs):
    """What grows over a period (the outputs' counters and sums, virtual clocks, gate counters),
    against its copy in ``a_f`` (floats: busy, wait and sojourn sums, g_V, marking integrals)
    and ``a_i`` (ints), one layout for both uses: ``M = 0`` copies the current values (at the
    candidate period's start), ``M > 0`` adds ``M`` times each one's change since (``M``
    periods skipped)."""
    nR = o_busy.size
    for r in range(nR):
        if M == 0:
            a_f[r] = o_busy[r]
            a_f[r + nR] = o_wsum[r]
            a_f[r + 2 * nR] = o_ssum[r]
            a_f[r + 3 * nR] = g_V[r]
        else:
            o_busy[r] += M * (o_busy[r] - a_f[r])
            o_wsum[r] += M * (o_wsum[r] - a_f[r + nR])
            o_ssum[r] += M * (o_ssum[r] - a_f[r + 2 * nR])
            g_V[r] += M * (g_V[r] - a_f[r + 3 * nR])
    k = 4 * nR
    for p in range(o_ptok.size):
        if M == 0:
            a_f[k] = o_ptok[p]
        else:
            o_ptok[p] += M * (o_ptok[p] - a_f[k])
        k += 1
    k = 0
    for t in range(o_firings.size):
        if M == 0:
            a_i[k] = o_firings[t]
        else:
            o_firings[t] += M * (o_firings[t] - a_i[k])
        k += 1
    for r in range(nR):
        if M == 0:
            a_i[k] = o_wn[r]
            a_i[k + nR] = o_sn[r]
        else:
            o_wn[r] += M * (o_wn[r] - a_i[k])
            o_sn[r] += M * (o_sn[r] - a_i[k + nR])
        k += 1
    k += nR
    for q in range(gcnt.size):
        if M == 0:
            a_i[k] = gcnt[q]
        else:
            gcnt[q] += M * (gcnt[q] - a_i[k])
        k += 1
    for g in range(gmin.size):
        if M == 0:
            a_i[k] = gmin[g]
        else:
            gmin[g] += M * (gmin[g] - a_i[k])
        k += 1
    k = _pa_step2(M, o_glead, a_i, k)
    k = _pa_step2(M, o_ghist, a_i, k)
    k = _pa_step2(M, o_hw, a_i, k)
    _pa_step2(M, o_hs, a_i, k)


@_inner
def _pa_step2(M, a, saved, k):
    """:func:`_pa_step` for a 2-d counter array against ``saved[k:k + a.size]``; the next
    offset."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if M == 0:
                saved[k] = a[i, j]
            else:
                a[i, j] += M * (a[i, j] - saved[k])
            k += 1
    return k


@_inner
def _pz_shift_slots(D, dq, M, live, n_live, s_seq, s_start, s_req, s_last, s_ctime, s_grp, s_vf, g_V,
                    a_f, ekt, eks, eh_n):
    """Move the running firings ``M`` periods ahead: times by ``D``, start sequences by ``M dq``,
    a grouped flow's virtual finish by ``M`` times its clock's change over a period (read from
    the saved clocks in ``a_f``; call before :func:`_pa_step` moves the clocks)."""
    nR = g_V.size
    for i in range(n_live):
        s = live[i]
        s_seq[s] += M * dq
        s_start[s] += D
        s_req[s] += D
        s_last[s] += D
        if s_ctime[s] < np.inf:
            s_ctime[s] += D
        g = s_grp[s]
        if g >= 0:
            s_vf[s] += M * (g_V[g] - a_f[3 * nR + g])
    for i in range(eh_n):
        ekt[i] += D
        eks[i] += M * dq


@_inner
def _pz_shift_rest(D, TD, TS, TF, rq_pool, g_tau, blast, glast, gprev):
    """Move the other times ``D`` ahead: pending requests, links' clock origins, ps resources'
    last changes, gate members' last completions."""
    for t in range(TD.shape[0]):
        d = TD[t, TD_DEG]
        if d > 0:
            TF[t, TF_KTIME] += D
            if not TS[t, TS_FL] & F_S1:
                for i in range(d):
                    rq_pool[_rq_at(TD, t, i)] += D
    for r in range(g_tau.size):
        g_tau[r] += D
        blast[r] += D
    for q in range(glast.size):
        glast[q] += D
        gprev[q] += D


@_inner
def _pz_copy(M, P, r1, r2, o_step_t, o_step_tr, l1, l2, o_glog):
    """Repeat the kept step samples ``[r1, r2)`` and logged gate decisions ``[l1, l2)`` of one
    period ``M`` times after it, the samples shifted by ``P`` each time (within the arrays)."""
    n = r2 - r1
    if o_step_t.size > 0:
        for k in range(1, M + 1):
            for i in range(n):
                j = r2 + (k - 1) * n + i
                if j >= o_step_t.size:
                    break
                o_step_t[j] = o_step_t[r1 + i] + k * P
                o_step_tr[j] = o_step_tr[r1 + i]
    n = l2 - l1
    cap = o_glog.shape[0]
    for k in range(1, M + 1):
        for i in range(n):
            j = l2 + (k - 1) * n + i
            if j >= cap or l1 + i >= cap:
                return
            o_glog[j, 0] = o_glog[l1 + i, 0]
            o_glog[j, 1] = o_glog[l1 + i, 1]
