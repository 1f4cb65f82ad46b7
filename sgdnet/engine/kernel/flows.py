"""Flows: max-min fair sharing of links, by progressive filling.

A flow is a firing holding links (resources of discipline ``DISC_FLOW``). Invariants: after the
re-allocation that ends every instant at which flows started or ended (``f_seeds``: the links
whose flow set changed), each flow of the changed connected component has its max-min fair rate:
the link (or flow cap) with the smallest fair share ``remaining capacity / unfixed flows`` fixes
its unfixed flows at that share, which is taken off the other links of their paths, until every
flow is fixed (:func:`allocate`). The flows a link fixes (its *group*) all move at the same rate:
a group keeps a virtual clock ``g_V`` (bytes moved by each member since an origin) and a heap of
its members by virtual finish (``s_vf``: ``g_V`` at arrival + bytes), and only the group's head
is in the completion heap (``s_inh``). A flow whose bottleneck did not change is not touched (its
group's clock just changes slope); a flow that changes group moves its remaining bytes to the new
clock (:func:`move`); a capped flow is on its own (``s_grp == -1``) with remaining bytes and a
rate, as a ps firing.

Fast path (:func:`star_test`, :func:`star_move`): a component whose flows all cross one link L and
are all bottlenecked there (a star into a parameter server, ``f_pure``) stays so when L's new fair
share ``cap(L)/n`` is below every other link's share (and no flow is capped): progressive filling
would fix every flow at L in its first round, so only L's clock, rate and group heap change. The
other links' shares are bounded from below by ``f_m[L]`` (kept at the last full allocation,
lowered by each changed link's share since), so the test is exact or conservative.

Links with a token bucket: :mod:`.buckets` (their components always take the full allocation).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..layout import TS_PS0, TS_PS1
from . import event_heap
from .jit import FALSE, IM1, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', 'event_heap.py', '../layout.py')


@inner
def link_capacity(r, n, r_bw, re_ptr, re_val):
    """The capacity of link ``r`` carrying ``n`` flows: its bandwidth times the incast
    efficiency at ``n`` (the table's last entry beyond its end; none when ``n`` is 0 or the link
    has no table)."""
    c = r_bw[r]
    ne = re_ptr[r + 1] - re_ptr[r]
    if n > 0 and ne > 0:
        c *= re_val[re_ptr[r] + (n - 1 if n <= ne else ne - 1)]
    return c


@inner
def group_less(a, b, s_vf, s_seq):
    return s_vf[a] < s_vf[b] or (s_vf[a] == s_vf[b] and s_seq[a] < s_seq[b])


@inner
def group_sift(gh, rp, n, i, s_gpos, s_vf, s_seq):
    """Restore the order of group heap ``rp`` (size ``n``) around position ``i``."""
    s = gh[rp, i]
    moved = False
    while i > 0:
        p = (i - 1) >> 1
        q = gh[rp, p]
        if group_less(s, q, s_vf, s_seq):
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
            if c + 1 < n and group_less(gh[rp, c + 1], gh[rp, c], s_vf, s_seq):
                c += 1
            q = gh[rp, c]
            if group_less(q, s, s_vf, s_seq):
                gh[rp, i] = q
                s_gpos[q] = i
                i = c
            else:
                break
    gh[rp, i] = s
    s_gpos[s] = i


@inner
def group_remove(gh, rp, gn, s, s_gpos, s_vf, s_seq):
    """Take flow ``s`` out of the group heap ``rp``."""
    i = s_gpos[s]
    n = gn[rp] - 1
    gn[rp] = n
    if i != n:
        gh[rp, i] = gh[rp, n]
        s_gpos[gh[rp, i]] = i
        group_sift(gh, rp, n, i, s_gpos, s_vf, s_seq)


@inner
def remaining(s, now, s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last):
    """Bytes flow ``s`` still has to move at ``now``."""
    g = s_grp[s]
    if g >= 0:
        rem = s_vf[s] - (g_V[g] + g_rate[g] * (now - g_tau[g]))
    else:
        rem = s_rem[s] - s_rate[s] * (now - s_last[s])
    return rem if rem > 0.0 else 0.0


@njit(cache=True, _nrt=False, error_model="numpy", no_cpython_wrapper=True,
      no_cfunc_wrapper=True, inline="always")
def fix(s, lvl, bott, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans, psres_ptr, psres_idx):
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


@inner
def ack_cap(t, cap, used, psres_ptr, psres_idx, re_ptr, re_val):
    """Transfer ``t``'s cap: its own (``cap``) and, for each link of its path with an ACK path
    (:meth:`sgdnet.net.Net.ack_path`) whose ACK link carries ``n >= 1`` flows, that link's
    ``n``-th cap (its last one beyond). The ACK paths follow the efficiencies' pointers in
    ``re_ptr`` (:func:`sgdnet.net.compiled._ack_arrays`)."""
    nR = used.size
    b = nR + 1
    for k in range(psres_ptr[t], psres_ptr[t + 1]):
        r = psres_idx[k]
        a = re_ptr[b + r]
        if a >= 0 and used[a] > 0:
            lo = re_ptr[b + nR + r]
            n = re_ptr[b + nR + r + 1] - lo
            c = re_val[lo + (used[a] - 1 if used[a] <= n else n - 1)]
            if c < cap:
                cap = c
    return cap


@inner
def allocate(now, used, nsd, f_seeds, f_epoch, f_lmark, f_fmark, f_CL, f_CF, f_rc, f_nu,
                 f_rate, f_fixed, f_lvl, f_bott, g_rate, g_V, g_tau, ps_h, ps_n, s_trans,
                 psres_ptr, psres_idx, r_ps, r_bw, re_ptr, re_val, fl_cap):
    """The full max-min fair allocation of the flows connected to the links ``f_seeds[:nsd]``
    (section C of :func:`run_replication`, when its single-bottleneck fast path does not apply),
    first of three steps (then :func:`move`, :func:`single_bottleneck`): progressive filling
    over that component; return ``(fu_nl, fu_nf, fu_cap)``: its links ``f_CL[:fu_nl]``, its flows
    ``f_CF[:fu_nf]`` with their rates ``f_rate`` and bottlenecks ``f_bott``, and whether a flow
    of it is capped.

    With ACK paths (after the efficiencies in ``re_ptr`` / ``re_val``:
    :func:`sgdnet.net.compiled._ack_arrays`), the component also takes in the links whose
    flows' caps a link of it sets (its dependents), and a flow's cap is the least of its own and its links' ACK-path caps at their ACK links' flow
    counts (:func:`ack_cap`); an unfixed flow's cap is kept in ``f_rate`` until it is fixed.
    (Every transfer crossing an ACK path's link is capped, so no such component is marked a star
    for :func:`star_test`.)

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
    nR = r_bw.size
    acks = re_ptr.size > nR + 1
    i = 0
    while i < fu_nl:
        r = f_CL[i]
        i += 1
        if acks:  # the links whose flows' caps r's flow count sets join the component
            for k in range(re_ptr[3 * nR + 2 + r], re_ptr[3 * nR + 3 + r]):
                r2 = re_ptr[4 * nR + 3 + k]
                if f_lmark[r2] != fu_ep:
                    f_lmark[r2] = fu_ep
                    f_CL[fu_nl] = r2
                    fu_nl += 1
        rp = r_ps[r]
        for j in range(ps_n[rp]):
            s = ps_h[rp, j]
            if f_fmark[s] != fu_ep:
                f_fmark[s] = fu_ep
                f_CF[fu_nf] = s
                fu_nf += 1
                f_fixed[s] = False
                t = s_trans[s]
                fu_c = fl_cap[t]
                if acks:
                    fu_c = ack_cap(t, fu_c, used, psres_ptr, psres_idx, re_ptr, re_val)
                f_rate[s] = fu_c
                if fu_c < np.inf:
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
        fu_c = link_capacity(r, fu_n, r_bw, re_ptr, re_val)
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
                if not f_fixed[s] and f_rate[s] < fu_lvl:
                    fu_lvl = f_rate[s]
                    fu_argf = s
        if fu_argf >= 0:
            fix(fu_argf, fu_lvl, IM1, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans,
                      psres_ptr, psres_idx)
            fu_left -= 1
        else:
            f_lvl[fu_arg] = fu_lvl
            rp = r_ps[fu_arg]
            for j in range(ps_n[rp]):
                s = ps_h[rp, j]
                if not f_fixed[s]:
                    fix(s, fu_lvl, fu_arg, f_fixed, f_rate, f_bott, f_rc, f_nu, s_trans,
                              psres_ptr, psres_idx)
                    fu_left -= 1
    return fu_nl, fu_nf, fu_cap


@inner
def move(now, fu_nf, f_CF, f_bott, f_rate, g_V, g_head, gh, gn, r_ps, s_grp, s_vf,
                s_ctime, s_rem, s_rate, s_last, s_gpos, s_seq, s_inh, eh, ekt, eks, eh_pos, eh_n):
    """Second step of a full allocation (:func:`allocate`): the flows whose bottleneck
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
            group_remove(gh, r_ps[fu_g], gn, s, s_gpos, s_vf, s_seq)
            if g_head[fu_g] == s:
                g_head[fu_g] = -1
                eh_n = event_heap.remove(eh, ekt, eks, eh_pos, eh_n, s)
                s_inh[s] = False
        if fu_g2 >= 0:
            if s_inh[s]:  # an individual flow joins a group: only heads are in the heap
                eh_n = event_heap.remove(eh, ekt, eks, eh_pos, eh_n, s)
                s_inh[s] = False
            s_vf[s] = g_V[fu_g2] + fu_rem
            rp = r_ps[fu_g2]
            gh[rp, gn[rp]] = s
            s_gpos[s] = gn[rp]
            gn[rp] += 1
            group_sift(gh, rp, gn[rp], gn[rp] - 1, s_gpos, s_vf, s_seq)
        elif fu_g == -1 and f_rate[s] == s_rate[s]:
            pass
        else:
            s_rem[s] = fu_rem
            s_last[s] = now
            s_rate[s] = f_rate[s]
            s_ctime[s] = now + fu_rem / f_rate[s]
            if s_inh[s]:
                event_heap.place(eh, ekt, eks, eh_pos, eh_pos[s], eh_n, s, s_ctime[s], s_seq[s])
            else:
                eh_n = event_heap.push(eh, ekt, eks, eh_pos, eh_n, s, s_ctime[s], s_seq[s])
                s_inh[s] = True
        s_grp[s] = fu_g2
    return eh_n


@inner
def single_bottleneck(fu_nf, fu_nl, fu_cap, f_CF, f_CL, f_bott, f_pure, f_comp, f_m, used, r_bw,
                  re_ptr, re_val, nbk, r_tb):
    """Last step of a full allocation (:func:`allocate`): whether the component now has a
    single bottleneck (and no token bucket), remembered for section C's fast path."""
    # is the result a single-bottleneck component (every flow fixed by one link L)?
    # then remember it for the fast path: L, and the smallest fair share of its
    # other links (each of their flows crosses L, so these are first-round shares)
    fu_root = f_bott[f_CF[0]] if fu_nf > 0 else -1
    fu_pure = fu_root >= 0 and not fu_cap
    for i in range(1, fu_nf if fu_pure else 0):
        if f_bott[f_CF[i]] != fu_root:
            fu_pure = False
            break
    for i in range(fu_nl if fu_pure and nbk > 0 else 0):
        if r_tb[f_CL[i], 0] > 0.0:
            fu_pure = False
            break
    fu_m = np.inf
    for i in range(fu_nl):
        r = f_CL[i]
        f_pure[r] = False
        f_comp[r] = fu_root if fu_pure else -1
        if fu_pure and r != fu_root and used[r] > 0:
            fu_n = used[r]
            fu_c = link_capacity(r, fu_n, r_bw, re_ptr, re_val)
            fu_x = fu_c / fu_n
            if fu_x < fu_m:
                fu_m = fu_x
    if fu_pure:
        f_pure[fu_root] = True
        f_m[fu_root] = fu_m


@phase
def star_test(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr, psres_idx, used, fl_cap, f_pure,
                f_comp, f_m, f_epoch, f_lmark, r_bw, re_ptr, re_val):
    """Flows, the fast path's test: the component whose flow set changed is a star into one link
    L (``f_pure``: every flow crosses L and is bottlenecked there), and stays one: no new flow
    is capped or touches another component, and L's new fair share ``cap(L) / n`` is below every
    other changed link's share and below ``f_m[L]`` (a lower bound of the others'). Returns
    ``(L, that bound, L's share)``, L -1 when the full allocation must run. Always advances
    ``f_epoch``. (The transfers of a net with ACK paths that cross a link of one are capped,
    :data:`sgdnet.net.compiled.ACK_MARK` at least: they always take the full allocation, since
    a flow count that changes caps other components' flows.)"""
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
            fu_c = link_capacity(r, fu_n, r_bw, re_ptr, re_val)
            fu_x = fu_c / fu_n
            if fu_x < fu_m:
                fu_m = fu_x
        fu_n = used[fq]
        fu_c = link_capacity(fq, fu_n, r_bw, re_ptr, re_val)
        fu_rate = fu_c / fu_n
        if not fu_rate < fu_m:
            fu_fast = False
    if not fu_fast:
        return -1, fu_m, fu_rate
    return fq, fu_m, fu_rate


@phase
def star_move(now, fq, fu_m, fu_rate, nfn, nsd, f_new, f_seeds, s_trans, psres_ptr,
                     psres_idx, used, f_comp, f_m, r_ps, g_V, g_rate, g_tau, s_rem, s_vf, s_seq,
                     s_gpos, s_grp, gh, gn, f_lvl, f_CL):
    """Flows, the fast path (:func:`star_test` said yes): the links that lost their flows stop
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
        group_sift(gh, rp, gn[rp], gn[rp] - 1, s_gpos, s_vf, s_seq)
        s_grp[s] = r
    f_lvl[r] = fu_rate
    f_CL[0] = r


@phase
def heads(now, nl, f_CL, r_ps, gn, gh, g_rate, f_lvl, s_vf, g_V, g_head, s_ctime, s_seq,
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
                eh_n = event_heap.remove(eh, ekt, eks, eh_pos, eh_n, fu_old)
                s_inh[fu_old] = False
            s_ctime[fu_h] = fu_tc
            eh_n = event_heap.push(eh, ekt, eks, eh_pos, eh_n, fu_h, fu_tc, s_seq[fu_h])
            s_inh[fu_h] = True
            g_head[r] = fu_h
        elif fu_tc != s_ctime[fu_h]:
            s_ctime[fu_h] = fu_tc
            event_heap.place(eh, ekt, eks, eh_pos, eh_pos[fu_h], eh_n, fu_h, fu_tc, s_seq[fu_h])
    return eh_n


@phase
def start(t, s, now, dur, TS, psres_idx, s_rem, s_last, s_rate, s_ctime, s_grp, s_inh, s_w0,
          s_size, f_new, nfn, f_pend, f_seeds, nsd):
    """Start of flow ``s`` of ``t`` (``dur`` bytes; already a holder of its links): it gets its
    rate (and its neighbours' new rates) from the re-allocation played before time advances,
    once for all the flows that start and end at this instant; its links join that
    re-allocation's seeds. Returns ``(nfn, nsd)``."""
    s_rem[s] = dur
    s_last[s] = now
    s_rate[s] = 0.0
    s_ctime[s] = np.inf
    s_grp[s] = -2
    s_inh[s] = False
    s_w0[s] = dur
    s_size[s] = dur
    f_new[nfn] = s
    nfn += 1
    for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
        nsd = seed(psres_idx[k], f_pend, f_seeds, nsd)
    return nfn, nsd


@phase
def seed(r, f_pend, f_seeds, nsd):
    """Link ``r`` joins the seeds ``f_seeds[:nsd]`` of the next re-allocation (once: ``f_pend``
    marks the seeds); returns ``nsd``."""
    if not f_pend[r]:
        f_pend[r] = True
        f_seeds[nsd] = r
        nsd += 1
    return nsd


@phase
def complete(t, s, now, counting, TS, psres_idx, o_busy, s_w0, r_bw, s_grp, r_ps, s_vf, gh, gn,
             s_gpos, s_seq, g_head, s_ctime, s_inh, hole, eh, ekt, eks, eh_pos, eh_n):
    """Completion of flow ``s`` of ``t`` (while counting, its bytes added to its links' busy
    time): it leaves its group; the group's next member finishing at the very same virtual time
    (a tie) completes in this batch too, after ``s`` (a larger start sequence). Returns
    ``(eh_n, hole)``."""
    if counting:
        for k in range(TS[t, TS_PS0], TS[t, TS_PS1]):
            r = psres_idx[k]
            o_busy[r] += s_w0[s] / r_bw[r]
    g = s_grp[s]
    if g >= 0:
        rp = r_ps[g]
        vf = s_vf[s]
        group_remove(gh, rp, gn, s, s_gpos, s_vf, s_seq)
        g_head[g] = -1
        if gn[rp] > 0 and s_vf[gh[rp, 0]] == vf:
            h = gh[rp, 0]
            if hole:
                hole = FALSE
                eh_n = event_heap.pop(eh, ekt, eks, eh_pos, eh_n)
            s_ctime[h] = now
            eh_n = event_heap.push(eh, ekt, eks, eh_pos, eh_n, h, now, s_seq[h])
            s_inh[h] = True
            g_head[g] = h
    s_grp[s] = -1
    s_inh[s] = False
    return eh_n, hole
