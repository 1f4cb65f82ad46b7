"""The event loop of one replication: :func:`run_replication`. Each pass is A (enabling: dirty
transitions re-evaluated, candidates queued), B (a start: the first candidate takes tokens,
servers, a slot and its duration, or waits at a full resource) or C (time advances: flows
re-allocated, a periodic-search checkpoint, the next instant's completions in start order, ps
holders re-rated). Invariant between passes: the dirty list holds every transition whose degree
may have changed; when it and the instant queue are empty, nothing can start at ``now``. Phases
are other modules' functions inlined by LLVM (:data:`~.jit.phase`); all state is allocated here,
not by helpers returning tuples of arrays (~10-20 % slower on flows' nets, measured).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import abi, periodic
from ..layout import (
    F_BACKLOG,
    F_CNT,
    F_FLOW,
    F_GUARD,
    F_PS,
    F_QRES,
    F_S1,
    F_SELF,
    F_STEP,
    F_SW,
    N_TD,
    N_TF,
    N_TS,
    NONE,
    TD_ACT,
    TD_DEG,
    TD_FROM,
    TD_RQHEAD,
    TD_RQOFF,
    TD_WHERE,
    TF_KTIME,
    TS_FL,
    TS_SERV,
)
from ..rng import replication_bases
from . import (
    buckets,
    candidates,
    durations,
    enabling,
    event_heap,
    flows,
    gates,
    joins,
    resources,
    statistics,
    switches,
    tables,
)
from .jit import FALSE, HALT_POLL, I0, I1, IM1, TRUE, WORK_PER_EVENT

#: the features played (compile-time constants: all here; sgdnet.engine.kernel.specialise's copies
#: play a net's own): flags read as ``(TS_FL & FLAG_MASK) | FLAG_SET``, the sections below
FLAG_MASK = -1
FLAG_SET = 0
FLOWS = True  # links shared by max-min fair flows (the re-allocation of section C)
SHARED = True  # ps resources or links (the holders re-rated after a batch)

#: the files whose code (inlined phases and samplers) or constants this module's machine code
#: embeds: numba keys the cache by this file only, so sgdnet.engine.jitcache recompiles when one
#: of them changed (every module of the package, and what they read)
JIT_DEPENDS = ("jit.py", "buckets.py", "candidates.py", "durations.py", "enabling.py", "event_heap.py", "flows.py",
               "gates.py", "joins.py", "resources.py", "statistics.py", "switches.py", "tables.py", "../rng.py",
               "../abi.py", "../layout.py", "../periodic.py", "../../dists.py",
               "../../net/compiled.py", "../../results.py")

@njit(cache=True, nogil=True, error_model="numpy")
def run_replication(
    m0, dep_ptr, dep_trans,
    in_ptr, in_place, in_w, out_ptr, out_place, out_w, inh_ptr, inh_place, inh_thr,
    r_cap, r_disc, r_ps, r_users, rq_base,
    qres_ptr, qres_idx, psres_ptr, psres_idx,
    r_bw, re_ptr, re_val, r_tb, fl_cap, jn_link, jn_q,
    servers, pcls, rank, is_step, mod_of, guard,
    d_code, d_par, d_pool,
    g_kind, g_s, g_slow, g_rmax, g_ptr, mem_gate, mem_counter,
    cnt_ptr, cnt_mem, gg_ptr, gg_trans, mg_ptr, mg_trans, g_cap,
    mod_kind, mod_par, rs_ptr, rs_mod, sid,
    seed, steps, warmup, max_events, zeno_limit, samples, trace_limit, cap_slots, cap_requests, cap_holders,
    period,
    o_f, o_i, o_step_t, o_step_tr, o_firings, o_busy, o_wsum, o_wn,
    o_tr_t, o_tr_s, o_tr_e, o_glog, o_ghist, o_mark, o_gcnt, o_grel, o_glead, halt, prog,
    sw_w, sw_prio, sw_res, o_ptok, o_ssum, o_sn, o_hw, o_hs,
):
    """Play one replication into the ``o_*`` arrays (arguments, slots: :mod:`sgdnet.engine.abi`;
    ``o_hw``/``o_hs`` without rows: no histograms). ``halt`` (int64[1], set by another thread)
    stops it (``ST_HALTED``), read every ``HALT_POLL`` completions or sooner when completions are
    expensive; ``prog`` (int64[1]) gets the step completions then and at the end."""
    nP = m0.size
    nT = servers.size
    nR = r_cap.size
    nG = g_kind.size
    nM = mod_kind.size
    nMem = mem_gate.size
    # random streams (sgdnet.engine.rng): row t < nT a transition's, nT + mi modulator mi's, the
    # last the random switches'; draw k of row i starts its generator at rng.draw_state(sb[i], k)
    nS = sid.size
    sb = np.empty(nS, dtype=np.uint64)
    replication_bases(seed, sid, sb)
    sk = np.zeros(nS, dtype=np.int64)
    rng = np.zeros(1, dtype=np.uint64)  # a draw's generator state when it goes through sample()
    hist = o_hw.shape[0] > 0  # histograms kept (else o_hw and o_hs have no rows)

    # ---------------------------------------------------------------- state
    m = m0.copy()
    # each transition's ring of request times in one pool: room for min(servers, 4) requests at
    # first (a full ring moves to a larger place of the pool), the pool >= cap_requests long
    rq_cap = np.empty(nT, dtype=np.int64)
    rq_off = np.empty(nT, dtype=np.int64)
    rq_used = tables.request_rings(servers, rq_cap, rq_off)  # an int64 (helpers compile once)
    rq_pool = np.zeros(max(rq_used, cap_requests), dtype=np.float64)
    # the instant queue (a sorted ring, a heap when long and out of order: see candidates.instant_push)
    ih = np.zeros(max(nT, 1), dtype=np.int64)
    ihs = np.zeros(max(nT, 1), dtype=np.int64)  # scratch of the ring -> heap switch
    ih_n = I0  # an int64 from the start: a literal 0 would compile the heap helpers twice
    ih_hd = I0  # ring head
    ih_heap = FALSE  # not a literal False (see FALSE)
    qh = np.zeros(max(rq_base[nR], 1), dtype=np.int64)
    qn = np.zeros(nR, dtype=np.int64)
    qhd = np.zeros(nR, dtype=np.int64)  # fifo resources: ring head of the sorted queue
    used = np.zeros(nR, dtype=np.int64)
    dl = np.zeros(max(nT, 1), dtype=np.int64)
    isd = np.zeros(nT, dtype=np.bool_)
    watch = np.zeros(nT, dtype=np.int64)  # joins: offset of the input arc that last blocked
    # firing slots: slot t is single-server transition t's; the others draw from a free list
    scap = nT + cap_slots
    s_trans = np.arange(scap, dtype=np.int64)
    s_seq = np.zeros(scap, dtype=np.int64)
    s_next = np.arange(1, scap + 1, dtype=np.int64)
    s_next[scap - 1] = -1
    free_head = nT
    s_start = np.zeros(scap, dtype=np.float64)
    s_rem = np.zeros(scap, dtype=np.float64)
    s_last = np.zeros(scap, dtype=np.float64)
    s_rate = np.ones(scap, dtype=np.float64)
    s_ctime = np.zeros(scap, dtype=np.float64)
    eh = np.zeros(scap, dtype=np.int64)
    eh_pos = np.zeros(scap, dtype=np.int64)
    ekt = np.zeros(scap, dtype=np.float64)
    eks = np.zeros(scap, dtype=np.int64)
    eh_n = I0
    hole = FALSE  # eh[0] is a completion already applied, left for the next start to replace
    seq = I0
    nps, maxps = tables.holder_sizes(r_ps, psres_ptr)  # ps resources (and links), most per transition
    hcap = cap_holders
    ps_h = np.zeros((max(nps, 1), hcap), dtype=np.int64)
    ps_n = np.zeros(max(nps, 1), dtype=np.int64)
    s_php = np.zeros((scap, maxps), dtype=np.int64)
    touched = np.zeros(nR, dtype=np.bool_)
    tl = np.zeros(max(nR, 1), dtype=np.int64)
    # flows (links are shared resources of discipline 3): groups (per bottleneck link) and scratch
    g_rate = np.zeros(nR, dtype=np.float64)
    g_V = np.zeros(nR, dtype=np.float64)
    g_tau = np.zeros(nR, dtype=np.float64)
    g_head = np.full(nR, -1, dtype=np.int64)
    gh = np.zeros((max(nps, 1), hcap), dtype=np.int64)
    gn = np.zeros(max(nps, 1), dtype=np.int64)
    s_gpos = np.zeros(scap, dtype=np.int64)
    s_grp = np.full(scap, -1, dtype=np.int64)
    s_vf = np.zeros(scap, dtype=np.float64)
    s_inh = np.zeros(scap, dtype=np.bool_)
    s_w0 = np.zeros(scap, dtype=np.float64)  # bytes of the flow counted in its links' busy time
    # join stages (sgdnet.engine.kernel.joins): flows' bytes and lags, connections' last lags
    lags = joins.any_backlog(jn_link)
    s_size = np.zeros(scap, dtype=np.float64)
    s_lag0 = np.zeros(scap, dtype=np.float64)
    c_lag = np.zeros(nR, dtype=np.float64)
    c_t = np.full(nR, -np.inf, dtype=np.float64)
    f_lmark = np.zeros(nR, dtype=np.int64)
    f_fmark = np.zeros(scap, dtype=np.int64)
    f_epoch = np.zeros(1, dtype=np.int64)
    f_CL = np.zeros(max(nR, 1), dtype=np.int64)
    f_CF = np.zeros(scap, dtype=np.int64)
    f_rc = np.zeros(nR, dtype=np.float64)
    f_nu = np.zeros(nR, dtype=np.int64)
    f_rate = np.zeros(scap, dtype=np.float64)
    f_fixed = np.zeros(scap, dtype=np.bool_)
    f_lvl = np.zeros(nR, dtype=np.float64)
    f_bott = np.zeros(scap, dtype=np.int64)
    f_pend = np.zeros(nR, dtype=np.bool_)  # links in f_seeds[:nsd], for the next allocation
    nsd = I0  # int64 values, not literals: the flows' phases compile once (see I0)
    f_seeds = np.zeros(max(nR, 1), dtype=np.int64)
    # single-bottleneck components (f_comp, f_pure, f_m: sgdnet.engine.kernel.flows)
    f_comp = np.full(nR, -1, dtype=np.int64)
    f_pure = np.zeros(nR, dtype=np.bool_)
    f_m = np.zeros(nR, dtype=np.float64)
    f_new = np.zeros(scap, dtype=np.int64)  # the flows started at this instant
    nfn = I0
    # token buckets (sgdnet.engine.kernel.buckets): each link's base capacity in the allocations
    # (its peak while its bucket holds tokens) and its bucket's state
    r_cur = np.empty(nR, dtype=np.float64)
    tb = np.zeros((nR, buckets.N_TB), dtype=np.float64)
    bk = np.zeros(max(nR, 1), dtype=np.int64)
    nbk = buckets.init(r_tb, r_bw, r_cur, tb, bk)
    # gates
    gcnt = np.zeros(nMem, dtype=np.int64)
    grel = np.zeros(nMem, dtype=np.int64)
    galw = np.zeros(nMem, dtype=np.int64)
    glast = np.zeros(nMem, dtype=np.float64)
    gprev = np.zeros(nMem, dtype=np.float64)
    gmin = np.zeros(nG, dtype=np.int64)
    nglog = I0
    # modulators
    modval = np.ones(nM, dtype=np.float64)
    mk_state = np.zeros(nM, dtype=np.int64)
    mk_next = np.full(nM, np.inf, dtype=np.float64)
    durations.modulators_init(nT, mod_kind, mod_par, sb, sk, d_code, d_par, d_pool, rng, modval, mk_state, mk_next)
    # accounting (o_ptok: the marking changes, see sgdnet.engine.kernel.statistics)
    blast = np.zeros(nR, dtype=np.float64)
    s_req = np.zeros(scap, dtype=np.float64)  # request time of the firing in each slot
    hb_f = np.zeros(1, dtype=np.float64)
    hb_i = hb_f.view(np.int64)
    sw_cand = np.zeros(nT + 1, dtype=np.int64)
    sw_stk = np.zeros(nT + 2, dtype=np.int64)
    counting = warmup == 0
    t0, t1, now = 0.0, np.nan, 0.0
    nsteps, nrec, ntr, events = I0, I0, 0, I0
    ev_limit = min(max_events, HALT_POLL)
    same = 0
    status, grow, stop = abi.ST_OK, 0, False
    target_steps = warmup + steps

    TS = np.zeros((nT, N_TS), dtype=np.int64)
    TD = np.zeros((nT, N_TD), dtype=np.int64)
    TF = np.zeros((nT, N_TF), dtype=np.float64)
    tables.fill(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr,
            mod_of, psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls, rank,
            d_code, d_par, rq_off, rq_cap, jn_link)
    dn = tables.all_dirty(dl, isd)

    # periodic regimes (sgdnet.engine.periodic): with ``period`` > 0 a checkpoint every
    # ``period`` step completions (the search starts over when counting starts); its buffers
    # are sized once for the largest state (np.empty: untouched pages cost nothing)
    pf_i = np.zeros(periodic.N_PF, dtype=np.int64)
    pf_f = np.zeros(periodic.N_PFF, dtype=np.float64)
    pf_i[periodic.PF_NEXT] = period if period > 0 else periodic.PZ_OFF
    pf_i[periodic.PF_STRIDE] = period
    pf_hh = np.zeros((periodic.PZ_HIST, 2), dtype=np.uint64)
    pf_hs = np.zeros(periodic.PZ_HIST, dtype=np.int64)
    pz_ni, pz_nf, pa_nf, pa_ni = 1, 1, 1, 1
    if period > 0:
        pz_ni, pz_nf = periodic._pz_room(nP, nT, nR, nMem, scap, maxps, qh.size, rq_pool.size,
                                         max(nps, 1), hcap)
        pa_nf, pa_ni = periodic._pa_sizes(nT, nP, nR, nMem, nG, o_glead, o_ghist, o_hw)
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

    while True:
        # -------------------------------------------- A: re-evaluate the dirty transitions
        # in the order they were marked (a transition's outputs' consumers in arc order, usually
        # rank order): candidates then mostly arrive in key order, each push one comparison
        di = 0
        while di < dn:
            t = dl[di]
            di += 1
            isd[t] = False
            f = (TS[t, TS_FL] & FLAG_MASK) | FLAG_SET
            d, rq_used = enabling.reevaluate(t, f, now, m, in_place, in_w, inh_ptr, inh_place, inh_thr,
                                             watch, TS, TD, TF, mem_gate, gcnt, gmin, g_kind, g_s,
                                             grel, g_slow, g_cap, rq_pool, rq_used)
            if rq_used < 0:
                status = abi.ST_GROW
                grow = abi.GROW_REQUESTS
                break
            ih_n, ih_hd, ih_heap = candidates.update(t, f, d, TD, TS, TF, rq_pool, qres_idx, used,
                                                     r_cap, qh, qn, qhd, rq_base, r_disc, ih, ihs,
                                                     ih_hd, ih_n, ih_heap)
        dn = 0
        if status == abi.ST_GROW:
            break

        if ih_n > 0:
            # ---------------------------------------- B: examine the first candidate
            t, ih_n, ih_hd, ih_heap = candidates.pop_first(ih, ih_hd, ih_n, ih_heap, TD, TS, TF)
            TD[t, TD_WHERE] = NONE
            src = TD[t, TD_FROM]
            TD[t, TD_FROM] = NONE
            blocked = resources.first_full(t, TS, qres_idx, used, r_cap)
            if blocked >= 0:
                candidates.wait(blocked, t, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
            else:
                # start t (or the random switch's choice): take its oldest request
                f = (TS[t, TS_FL] & FLAG_MASK) | FLAG_SET
                if f & F_SW:
                    t, src, ih_n, ih_hd, ih_heap = switches.redirect(
                        t, src, ih, ihs, ih_n, ih_hd, ih_heap, qh, qn, qhd, r_disc, rq_base, TD, TS,
                        TF, sw_w, sw_prio, sw_res, qres_idx, used, r_cap, sw_cand, sw_stk, sb, sk)
                    f = (TS[t, TS_FL] & FLAG_MASK) | FLAG_SET
                rt = enabling.take_request(t, f, TD, TF, rq_pool)
                selfdirty = (f & F_SELF) != 0
                dn = enabling.consume(t, now, t0, selfdirty, TS, in_place, in_w, m, o_ptok, dep_ptr,
                                      dep_trans, isd, dl, dn)
                TD[t, TD_ACT] += 1
                if selfdirty:
                    if not isd[t]:
                        isd[t] = True
                        dl[dn] = t
                        dn += 1
                elif TD[t, TD_DEG] > 0:
                    # degree and requests dropped by exactly one: t stays a candidate
                    # (never for one server: its degree is 0 while it runs)
                    TF[t, TF_KTIME] = rq_pool[TD[t, TD_RQOFF] + TD[t, TD_RQHEAD]]
                    ih_n, ih_hd, ih_heap = candidates.enqueue(ih, ihs, ih_hd, ih_n, ih_heap, t, TD, TS,
                                                              TF)
                if f & F_QRES:
                    resources.queue_hold(t, now, rt, counting, hist, TS, qres_idx, used, o_wsum, o_wn,
                                         o_hw, hb_f, hb_i)
                if f & F_GUARD:
                    dn = gates.consume_release(t, TS, grel, mg_ptr, mg_trans, isd, dl, dn)
                dur = durations.duration(t, f, now, nT, TS, TF, sb, sk, d_code, d_par, d_pool, rng,
                                         rs_ptr, rs_mod, modval, mod_kind, mod_par, mk_state, mk_next)
                if f & F_BACKLOG:  # a join stage: also the queue its link holds now
                    dur += joins.backlog_wait(jn_link[t], jn_q[t], now, r_ps, ps_h, ps_n, s_size,
                                              s_start, s_lag0, s_trans, TS, psres_idx, fl_cap,
                                              s_grp, s_vf, g_V, g_rate, g_tau, s_rem, s_rate,
                                              s_last, r_bw)
                # a firing slot
                if f & F_S1:
                    s = t
                else:
                    if free_head < 0:
                        status = abi.ST_GROW
                        grow = abi.GROW_SLOTS
                        break
                    s = free_head
                    free_head = s_next[s]
                    s_trans[s] = t
                s_seq[s] = seq
                seq += 1
                s_start[s] = now
                s_req[s] = rt
                if not f & F_PS:
                    tc = now + dur
                    s_ctime[s] = tc
                    eh_n = event_heap.start(eh, ekt, eks, eh_pos, eh_n, hole, s, tc, s_seq[s])
                    hole = FALSE
                else:
                    if not resources.ps_hold(t, f, s, now, rt, counting, hist, TS, psres_idx, r_ps,
                                             used, r_cap, o_busy, blast, o_wsum, o_wn, o_hw, hb_f,
                                             hb_i, ps_h, ps_n, s_php):
                        status = abi.ST_GROW
                        grow = abi.GROW_HOLDERS
                        break
                    if f & F_FLOW:
                        if lags:
                            joins.carry_in(t, s, now, TS, qres_idx, s_lag0, c_lag, c_t)
                        nfn, nsd = flows.start(t, s, now, dur, TS, psres_idx, s_rem, s_last, s_rate,
                                               s_ctime, s_grp, s_inh, s_w0, s_size, f_new, nfn,
                                               f_pend, f_seeds, nsd)
                    else:
                        eh_n, work = resources.ps_start(t, s, now, dur, hole, psres_ptr, psres_idx,
                                                        used, r_cap, ps_h, ps_n, r_ps, s_trans, s_rem,
                                                        s_last, s_rate, s_ctime, s_seq, eh, ekt, eks,
                                                        eh_pos, eh_n)
                        hole = FALSE
                        ev_limit -= work
            if src >= 0:
                ih_n, ih_hd, ih_heap = candidates.promote(src, qh, qn, qhd, rq_base, r_disc, used,
                                                          r_cap, ih, ihs, ih_hd, ih_n, ih_heap, TD,
                                                          TS, TF)
            continue

        # -------------------------------------------- C: time advances
        if hole:
            hole = FALSE
            eh_n = event_heap.pop(eh, ekt, eks, eh_pos, eh_n)
        if FLOWS and nsd > 0:
            # the changed links' flows get max-min fair rates (sgdnet.engine.kernel.flows): the
            # single-bottleneck fast path, else the full allocation; then groups' heads in the heap
            fq, fu_m, fu_rate = IM1, 0.0, 0.0
            if nbk == 0 or not buckets.touched(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr,
                                                    psres_idx, r_tb):
                fq, fu_m, fu_rate = flows.star_test(nfn, nsd, f_new, f_seeds, s_trans, psres_ptr,
                                                    psres_idx, used, fl_cap, f_pure, f_comp, f_m,
                                                    f_epoch, f_lmark, r_cur, re_ptr, re_val)
            if fq >= 0:
                flows.star_move(now, fq, fu_m, fu_rate, nfn, nsd, f_new, f_seeds, s_trans, psres_ptr,
                                psres_idx, used, f_comp, f_m, r_ps, g_V, g_rate, g_tau, s_rem, s_vf,
                                s_seq, s_gpos, s_grp, gh, gn, f_lvl, f_CL)
                fu_nl = I1
            else:
                fu_nl, fu_nf, fu_cap = flows.allocate(
                    now, used, nsd, f_seeds, f_epoch, f_lmark, f_fmark, f_CL, f_CF, f_rc, f_nu,
                    f_rate, f_fixed, f_lvl, f_bott, g_rate, g_V, g_tau, ps_h, ps_n, s_trans,
                    psres_ptr, psres_idx, r_ps, r_cur, re_ptr, re_val, fl_cap)
                if nbk > 0:
                    buckets.after_allocation(now, fu_nl, f_CL, f_rc, used, r_bw, r_cur, r_tb, re_ptr, re_val, tb)
                eh_n = flows.move(now, fu_nf, f_CF, f_bott, f_rate, g_V, g_head, gh, gn, r_ps, s_grp,
                                  s_vf, s_ctime, s_rem, s_rate, s_last, s_gpos, s_seq, s_inh, eh, ekt,
                                  eks, eh_pos, eh_n)
                flows.single_bottleneck(fu_nf, fu_nl, fu_cap, f_CF, f_CL, f_bott, f_pure, f_comp,
                                        f_m, used, r_cur, re_ptr, re_val, nbk, r_tb)
                fu_work = (fu_nf + fu_nl) // WORK_PER_EVENT
                ev_limit -= fu_work
            eh_n = flows.heads(now, fu_nl, f_CL, r_ps, gn, gh, g_rate, f_lvl, s_vf, g_V, g_head,
                               s_ctime, s_seq, s_inh, eh, ekt, eks, eh_pos, eh_n)
            for i in range(nsd):
                f_pend[f_seeds[i]] = False
            nsd = I0
            nfn = I0
        if FLOWS and nbk > 0:  # a token bucket that runs dry first (sgdnet.engine.kernel.buckets)
            played, now, same, nsd = buckets.dry_next(now, same, eh_n, ekt, nbk, bk, r_bw, r_cur,
                                                      tb, f_pend, f_seeds, nsd)
            if played:  # an instant like a completion's, for the budget, the halt poll and Zeno
                events += 1
                if events > ev_limit:
                    status, ev_limit = statistics.poll(events, max_events, halt, prog, nsteps)
                    if status != abi.ST_OK:
                        break
                if same > zeno_limit:
                    status = abi.ST_ZENO
                    break
                continue
        if nsteps >= pf_i[periodic.PF_NEXT] and pf_i[periodic.PF_STATE] == periodic.PZ_RESTART:
            periodic._pz_restart(nsteps, period, pf_i)  # counting started: no state to write out
        elif nsteps >= pf_i[periodic.PF_NEXT]:
            # a checkpoint (sgdnet.engine.periodic): the state in canonical form, then the search
            pz_nl = periodic._pz_live(eh, eh_n, ps_h, ps_n, pz_idx, pz_live)
            zn[0] = 0
            zn[1] = 0
            pz_act = -1
            if (periodic._pz_core(now, m, TD, TS, TF, rq_pool, used, qn, qhd, qh, rq_base, r_disc, zi, zf, zs, zn)
                    and periodic._pz_slots(now, seq, eh, ekt, eks, eh_n, pz_idx, pz_live, pz_nl, TS, s_trans,
                                  s_seq, s_start, s_req, s_rem, s_rate, s_last, s_grp, s_vf, s_inh, s_w0,
                                  s_gpos, s_php, g_V, zi, zf, zs, zn)
                    and periodic._pz_links(now, pz_idx, r_disc, r_ps, ps_h, ps_n, gn, gh, g_head, g_rate, g_tau, f_comp,
                                  f_pure, f_m, blast, zi, zf, zs, zn)
                    and periodic._pz_gates(now, gcnt, gmin, mem_gate, grel, galw, glast, gprev, zi, zf, zs, zn)):
                pz_act = periodic._pz_search(nsteps, nrec, events, seq, nglog, now, zi, zf, zs, zn, yi, yf, ys, pf_i,
                                    pf_f, pf_hh, pf_hs)
            else:  # cannot happen (the buffers hold the largest state): stop looking
                pf_i[periodic.PF_NEXT] = periodic.PZ_OFF
            periodic._pz_unlive(pz_idx, pz_live, pz_nl)
            if pz_act == 1:
                periodic._pa_step(I0, a_f, a_i, o_busy, o_wsum, o_ssum, o_ptok, g_V, o_firings, o_wn, o_sn, gcnt,
                         gmin, o_glead, o_ghist, o_hw, o_hs)
            elif pz_act == 2:
                # confirmed: jump M periods (the last ones before the end, or before counting
                # starts, are played)
                pz_M = periodic._pz_jump(nsteps, events, now, target_steps if counting else warmup,
                                max_events, not counting, pf_i, pf_f, pf_hs)
                if pz_M > 0:
                    pz_P = pf_f[periodic.PF_CYC]
                    pz_D = pz_M * pz_P
                    pz_dq = seq - pf_i[periodic.PF_CSEQ]
                    periodic._pz_shift_slots(pz_D, pz_dq, pz_M, pz_live, pz_nl, s_seq, s_start, s_req, s_last,
                                    s_ctime, s_grp, s_vf, g_V, a_f, ekt, eks, eh_n)
                    periodic._pz_shift_rest(pz_D, TD, TS, TF, rq_pool, g_tau, blast, glast, gprev)
                    periodic._pz_copy(pz_M, pz_P, pf_i[periodic.PF_CREC], nrec, o_step_t, o_step_tr,
                                      pf_i[periodic.PF_CGLOG], nglog, o_glog)
                    periodic._pa_step(pz_M, a_f, a_i, o_busy, o_wsum, o_ssum, o_ptok, g_V, o_firings, o_wn,
                             o_sn, gcnt, gmin, o_glead, o_ghist, o_hw, o_hs)
                    now += pz_D
                    seq += pz_M * pz_dq
                    nrec += pz_M * (nrec - pf_i[periodic.PF_CREC])
                    nglog += pz_M * (nglog - pf_i[periodic.PF_CGLOG])
                    events += pz_M * (events - pf_i[periodic.PF_CEVENTS])
                    nsteps += pz_M * pf_i[periodic.PF_PER]
                    ev_limit = min(max_events, events + HALT_POLL)
        if eh_n == 0:
            status = abi.ST_DEADLOCK
            break
        tn = ekt[0]
        if tn != now:
            same = 0
            now = tn
        # the batch of completions at now, in start order
        nt_touched = I0
        ev0 = events
        while not hole and eh_n > 0 and ekt[0] == now:
            s = eh[0]
            if not ((eh_n > 1 and ekt[1] == now) or (eh_n > 2 and ekt[2] == now)):
                # the instant's last completion stays at the root, for the next start (often one
                # it enables) to replace: one sift instead of a pop and a push
                hole = TRUE
            else:
                eh_n = event_heap.drop_top(eh, ekt, eks, eh_pos, eh_n)
            events += 1
            if events > ev_limit:  # one comparison per completion: the budget and the halt poll
                status, ev_limit = statistics.poll(events, max_events, halt, prog, nsteps)
                if status != abi.ST_OK:
                    stop = True
                    break
            same += 1
            if same > zeno_limit:
                status = abi.ST_ZENO
                stop = True
                break
            t = s_trans[s]
            f = (TS[t, TS_FL] & FLAG_MASK) | FLAG_SET
            if counting:
                o_firings[t] += 1
            a = TD[t, TD_ACT]
            TD[t, TD_ACT] = a - 1
            # the freed server raises t's degree only if the server bound was the binding one
            # (its outputs' consumers are marked below)
            if not isd[t] and TD[t, TD_DEG] >= TS[t, TS_SERV] - a:
                isd[t] = True
                dl[dn] = t
                dn += 1
            ih_n, ih_hd, ih_heap = resources.release_queued(
                t, s, now, t0, counting, hist, TS, TD, TF, qres_idx, o_busy, o_ssum, o_sn, o_hs, hb_f,
                hb_i, s_start, s_req, used, r_cap, qh, qn, qhd, rq_base, r_disc, ih, ihs, ih_hd, ih_n,
                ih_heap)
            if counting and f & F_PS:
                statistics.shared_sojourn(t, s, now, hist, TS, psres_idx, o_ssum, o_sn, o_hs, hb_f,
                                          hb_i, s_req)
            if f & F_FLOW:
                if lags:
                    joins.carry_out(t, s, now, TS, psres_idx, qres_idx, fl_cap, r_bw, s_start,
                                    s_size, s_lag0, c_lag, c_t)
                eh_n, hole = flows.complete(t, s, now, counting, TS, psres_idx, o_busy, s_w0, r_bw,
                                            s_grp, r_ps, s_vf, gh, gn, s_gpos, s_seq, g_head, s_ctime,
                                            s_inh, hole, eh, ekt, eks, eh_pos, eh_n)
            if f & F_PS:
                nt_touched = resources.ps_release(t, f, s, now, counting, TS, psres_ptr, psres_idx,
                                                  r_ps, used, r_cap, o_busy, blast, ps_h, ps_n, s_php,
                                                  s_trans, touched, tl, nt_touched)
            dn = enabling.deposit(t, now, t0, TS, out_place, out_w, m, o_ptok, dep_ptr, dep_trans, isd,
                                  dl, dn)
            if ntr < trace_limit:
                o_tr_t[ntr] = t
                o_tr_s[ntr] = s_start[s]
                o_tr_e[ntr] = now
                ntr += 1
            if s >= nT:
                s_next[s] = free_head
                free_head = s
            if f & F_CNT:  # gate counters
                dn, nglog = gates.count(t, now, cnt_ptr, cnt_mem, mem_gate, g_kind, g_ptr, g_slow,
                                        g_rmax, gg_ptr, gg_trans, mg_ptr, mg_trans, gcnt, gmin, grel,
                                        galw, glast, gprev, isd, dl, dn, o_glead, o_ghist, o_glog,
                                        nglog)
            if f & F_STEP:
                nsteps += 1
                if counting:
                    if samples:
                        o_step_t[nrec] = now
                        o_step_tr[nrec] = t
                    nrec += 1
                if nsteps == warmup:
                    counting = True
                    t0 = now
                    if period > 0:  # the search starts over at the next checkpoint site
                        pf_i[periodic.PF_STATE] = periodic.PZ_RESTART
                        pf_i[periodic.PF_NEXT] = nsteps
                    statistics.count_start(now, o_ptok, blast, r_disc, r_ps, ps_h, ps_n, s_w0, s_grp,
                                           s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last)
                if nsteps == target_steps:
                    t1 = now
                    stop = True
                    break
        if stop:
            break
        if events == ev0:
            # nothing completed: only a clock the flows made NaN (rates ~1e-300 B/s) does this
            # (issue #43); the pass counts against the budget and the halt poll as a completion
            events += 1
            if events > ev_limit:
                status, ev_limit = statistics.poll(events, max_events, halt, prog, nsteps)
                if status != abi.ST_OK:
                    break
        # shared resources whose holders changed: links seed the re-allocation, ps re-rated
        if SHARED:
            if hole and nt_touched > 0:
                hole = FALSE
                eh_n = event_heap.pop(eh, ekt, eks, eh_pos, eh_n)
            nsd, work = resources.rerate_touched(nt_touched, tl, touched, r_disc, f_pend, f_seeds, nsd,
                                                 now, ps_h, ps_n, r_ps, s_trans, s_rem, s_last, s_rate,
                                                 s_ctime, s_seq, eh, ekt, eks, eh_n, eh_pos, psres_ptr,
                                                 psres_idx, used, r_cap)
            ev_limit -= work

    # ------------------------------------------------------------- finish
    if hole:
        eh_n = event_heap.pop(eh, ekt, eks, eh_pos, eh_n)
    if status == abi.ST_OK:
        statistics.finish(now, t0, m, o_ptok, o_busy, eh, eh_n, s_trans, s_start, qres_ptr, qres_idx,
                          r_disc, r_ps, r_cap, used, blast, gh, gn, ps_h, ps_n, s_inh, s_w0, s_grp,
                          s_vf, g_V, g_rate, g_tau, s_rem, s_rate, s_last, r_bw)
    prog[0] = nsteps
    statistics.write_outputs(o_f, o_i, t0, t1, now, status, events, nsteps, ntr, nglog, nrec, grow,
                             pf_i, pf_f, m, gcnt, grel, o_mark, o_gcnt, o_grel)
    return status
