"""The record of a replication of the FIFO fast path (:mod:`sgdnet.engine.fastpath_fifo`): the
window, step times and counters read off the recursion's history, with the running sums of the
rounds dropped from it.

Completions at one instant are processed by the generic engine in start order, i.e. by the key
(completion, start, request, rank, round) — no zero durations, so one batch per instant and one
scan, whose order is the fifo key (request, rank). ``t0`` and ``t1`` are the ``warmup``-th and
``(warmup + steps)``-th step completions in that order; busy time counts every firing started
before ``t1`` clipped to ``(t0, t1]``, waits the starts in ``[t0, t1)``, sojourns and firings the
completions processed after the warm-up's last step completion up to ``t1``'s, and the marking
integrals add each producer's processed completions and take each consumer's starts (tokens are
consumed at the grant).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..results import RawReplication
from .eg_record import first_not_before

#: files whose code the compiled functions embed (see sgdnet.engine.jitcache)
JIT_DEPENDS = ("eg_record.py",)

__all__ = ["Acc", "replication"]

class Acc:
    """Running sums of the rounds dropped from a one-lane history (absolute round = kbase + row)."""

    def __init__(self, T: int, R: int, warmup: int, samples: bool = True):
        self.kbase = 0
        self.t0_known = warmup == 0
        self.t0 = 0.0
        self.b0 = None  # the warm-up's last step completion key
        self.n0 = np.zeros(T, dtype=np.int64)
        self.busy, self.wsum, self.ssum = np.zeros(R), np.zeros(R), np.zeros(R)
        self.wn, self.sn = np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64)
        self.pn, self.ps, self.qn, self.qs = np.zeros(T), np.zeros(T), np.zeros(T), np.zeros(T)
        self.pre = np.zeros(T)  # completions (and starts) dropped before t0 was known
        self.steps: list[np.ndarray] = []  # dropped step completions: rows (c, x, a, rank, k)
        #: dropped step completions counted, not kept: without samples, once the warm-up's end
        #: is known, a dropped one matters only by its rank, and every one lies below the
        #: window's end (the frontier it was dropped under is at most that end), so the
        #: (need - ndrop)-th smallest kept key is the window's end (memory then does not grow)
        self.ndrop = 0
        self.samples = samples
        self.warmup = warmup

    def step_keys(self, A, X, C, k, st, rank, res_of, l=0) -> np.ndarray:
        """(n, 6) rows (completion, start, request, rank, absolute round, index into ``st``) of
        every step completion: the dropped ones and rows ``0..k-1`` of lane ``l``; the first
        five are the processing-order key."""
        here = self._rows_keys(A, X, C, k, st, rank, res_of, l)
        return np.concatenate(self.steps + [here]) if self.steps else here

    def _rows_keys(self, A, X, C, k, st, rank, res_of, l=0) -> np.ndarray:
        """:meth:`step_keys` of rows ``0..k-1`` only."""
        sc, sx = C[:k, st, l], X[:k, st, l]
        sa = np.where(res_of[st] >= 0, A[:k, st, l], sx)
        kk = np.broadcast_to((self.kbase + np.arange(k))[:, None], sc.shape)
        rr = np.broadcast_to(rank[st][None, :], sc.shape)
        ii = np.broadcast_to(np.arange(st.size)[None, :], sc.shape)
        return np.stack([sc.ravel(), sx.ravel(), sa.ravel(), rr.ravel().astype(float),
                         kk.ravel().astype(float), ii.ravel().astype(float)], axis=1)

    def compact(self, cn, plan, A, X, C, k, st, rank, need, phase) -> int:
        """Tally and drop the leading rows wholly below the frontier: the earliest latest step
        completion while the window's end is unknown (``phase`` 0: that end lies above it), the
        end itself once known (``phase`` 1). Returns the number of rows dropped."""
        if phase == 0:
            lo = float(C[k - 1, st, 0].min())
            below = 0
            if not self.t0_known:  # the step completions below lo (only to find the warm-up)
                below = st.size * self.kbase + sum(int(np.searchsorted(C[:k, t, 0], lo))
                                                   for t in st.tolist())
        else:  # every step completion up to the window's end is in: the end is the frontier
            keys = self.step_keys(A, X, C, k, st, rank, plan.res_of)
            lo = float(np.partition(keys[:, 0], need - 1 - self.ndrop)[need - 1 - self.ndrop])
            below = need
        if not self.t0_known and below >= self.warmup:  # the warm-up ends below lo: find it
            keys = self.step_keys(A, X, C, k, st, rank, plan.res_of)
            keys = keys[np.lexsort(keys[:, :5].T[::-1])]
            b = keys[self.warmup - 1]
            self.b0, self.t0, self.t0_known = b, float(b[0]), True
            out = np.zeros(cn.n_transitions, dtype=np.int64)
            _upto(A[:k], X[:k], C[:k], 0, rank, plan.res_of, b[0], b[1], b[2], int(b[3]),
                  int(b[4]), self.kbase, out)
            self.n0 = self.kbase + out
        kd = _rows_below(C, k - plan.max_off - 1, lo)
        if kd <= 0:
            return 0
        if self.samples or not self.t0_known:
            self.steps.append(self._rows_keys(A, X, C, kd, st, rank, plan.res_of))
        else:
            self.ndrop += kd * st.size + sum(len(s) for s in self.steps)
            self.steps = []
        _tally_rows(A, X, C, kd, self.t0_known, self.t0, self.kbase, self.n0, plan.res_of, self.busy,
                    self.wsum, self.wn, self.ssum, self.sn, self.pn, self.ps, self.qn, self.qs, self.pre)
        self.kbase += kd
        return kd


@njit(cache=True, nogil=True)
def _rows_below(C, k, lo):  # pragma: no cover - compiled
    """The leading rows (of the first ``k``) of a one-lane history whose every completion lies
    below ``lo``: a row's latest completion is nondecreasing in the row (each transition's
    completions are), so the scan stops at the first row that reaches ``lo``."""
    T = C.shape[1]
    for r in range(k):
        for t in range(T):
            if C[r, t, 0] >= lo:
                return r
    return max(k, 0)


@njit(cache=True, nogil=True)
def _tally_rows(A, X, C, kd, known, t0, kbase, n0, res_of, busy, wsum, wn, ssum, sn, pn, ps, qn, qs,
                pre):  # pragma: no cover - compiled
    """The counters of rows ``0..kd-1`` (wholly before the window's end) of a one-lane history:
    as :func:`_tally`, with the marking sums kept as counts and sums of ``max(time, t0)`` (the
    end ``t1`` is not known yet). Before ``t0`` is known every dropped time lies below it: only
    counted (``pre``)."""
    T = C.shape[1]
    if not known:
        for t in range(T):
            pre[t] += kd
        return
    for t in range(T):  # every row counts once per transition (exact: integers in a float)
        pn[t] += kd
        qn[t] += kd
    for k in range(kd):
        for t in range(T):
            c, x = C[k, t, 0], X[k, t, 0]
            ps[t] += c if c > t0 else t0
            qs[t] += x if x > t0 else t0
            r = res_of[t]
            if r < 0:
                continue
            a = A[k, t, 0]
            lo = x if x > t0 else t0
            if c > lo:
                busy[r] += c - lo
            if x >= t0:
                wsum[r] += x - a
                wn[r] += 1
            if k + kbase >= n0[t]:
                ssum[r] += c - a
                sn[r] += 1


@njit(cache=True, nogil=True)
def _upto(A, X, C, l, rank, res_of, cb, xb, ab, rb, kb, kbase, out):  # pragma: no cover - compiled
    """Per transition, its completions in lane ``l`` processed up to and including the one with
    key ``(cb, xb, ab, rb, kb)`` = (completion, start, request, rank, round): completions of one
    instant go in start order, starts of one instant in scan-key order (request, rank). A
    transition's completions are nondecreasing in the round: a binary search, then the ties."""
    K = C.shape[0]
    for t in range(C.shape[1]):
        k = first_not_before(C, t, l, cb)
        while k < K and C[k, t, l] == cb:
            x = X[k, t, l]
            a = A[k, t, l] if res_of[t] >= 0 else x
            if x > xb or (x == xb and (a > ab or (a == ab and (rank[t] > rb or (rank[t] == rb and k + kbase > kb))))):
                break
            k += 1
        out[t] = k


@njit(cache=True, nogil=True)
def _tally(A, X, C, l, t0, t1, n0, n1, kbase, res_of, busy, wsum, wn, ssum, sn, sprod, scons):  # pragma: no cover
    """One lane's counters over the window ``(t0, t1]``: busy time of each resource (every
    firing started before ``t1``, clipped to the window), waits of the starts in ``[t0, t1)``,
    sojourns of the completions counted (rounds ``n0[t]..n1[t]-1``, absolute: row + ``kbase``),
    and per transition the sums that make the marking integrals: ``sprod`` over its processed
    completions, ``scons`` over its starts before ``t1``, of ``t1 - max(time, t0)``."""
    K, T = C.shape[0], C.shape[1]
    for k in range(K):
        ka = k + kbase
        for t in range(T):
            c, x = C[k, t, l], X[k, t, l]
            if ka < n1[t]:
                sprod[t] += t1 - (c if c > t0 else t0)
            if x < t1:
                scons[t] += t1 - (x if x > t0 else t0)
            r = res_of[t]
            if r < 0:
                continue
            a = A[k, t, l]
            if x < t1:
                hi = c if c < t1 else t1
                lo = x if x > t0 else t0
                if hi > lo:
                    busy[r] += hi - lo
                if x >= t0:
                    wsum[r] += x - a
                    wn[r] += 1
            if n0[t] <= ka < n1[t]:
                ssum[r] += c - a
                sn[r] += 1


def replication(cn, plan, A, X, C, l, st, steps, warmup, samples, acc) -> RawReplication:
    """Lane ``l``'s record from the (rounds, T, lanes) histories and the running sums ``acc`` of
    the rounds dropped before them."""
    T = cn.n_transitions
    K = C.shape[0]
    need = warmup + steps
    rank = cn.rank.astype(np.int64)
    keys = acc.step_keys(A, X, C, K, st, rank, plan.res_of, l)
    # only step completions up to the closing one matter: the need-th smallest time and below
    # (acc.ndrop of them were dropped and only counted: every one lies below that end; then
    # there are no samples and the warm-up's end is known, so only the closing key is read)
    last = need - 1 - acc.ndrop
    cut = np.partition(keys[:, 0], last)[last]
    keys = keys[keys[:, 0] <= cut]
    keys = keys[np.lexsort(keys[:, :5].T[::-1])]

    def upto(b) -> np.ndarray:
        out = np.zeros(T, dtype=np.int64)
        _upto(A, X, C, l, rank, plan.res_of, b[0], b[1], b[2], int(b[3]), int(b[4]), acc.kbase, out)
        return acc.kbase + out

    n1 = upto(keys[last])
    t1 = float(keys[last, 0])
    if acc.t0_known:
        n0, t0 = acc.n0, acc.t0
    else:
        n0, t0 = upto(keys[warmup - 1]), float(keys[warmup - 1, 0])
    if samples:
        step_times = keys[warmup:need, 0].copy()
        step_trans = st[keys[warmup:need, 5].astype(np.int64)]
    else:
        step_times, step_trans = np.zeros(0), np.zeros(0, dtype=np.int64)
    busy, wsum, ssum = acc.busy.copy(), acc.wsum.copy(), acc.ssum.copy()
    wn, sn = acc.wn.copy(), acc.sn.copy()
    sprod = acc.pn * t1 - acc.ps + acc.pre * (t1 - t0)
    scons = acc.qn * t1 - acc.qs + acc.pre * (t1 - t0)
    _tally(A, X, C, l, t0, t1, n0, n1, acc.kbase, plan.res_of, busy, wsum, wn, ssum, sn, sprod, scons)
    # marking integrals: producers' completions add, consumers' starts take (at the grant)
    tok = cn.m0.astype(float) * (t1 - t0)
    np.add.at(tok, cn.out_place, cn.out_w * sprod[plan.out_t])
    np.add.at(tok, cn.in_place, -cn.in_w * scons[plan.in_t])
    return RawReplication(
        t0=t0, t1=t1, step_times=step_times, step_trans=step_trans, firings=n1 - n0, busy=busy,
        wait_sum=wsum, wait_n=wn, gate_log=np.zeros((0, 2), dtype=np.int64), events=int(n1.sum()),
        token_time=tok, sojourn_sum=ssum, sojourn_n=sn)
