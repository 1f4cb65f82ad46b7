"""The record of a replication of the event-graph fast path (:mod:`sgdnet.engine.fastpath`): the
window, step times and counters read off the max-plus recursion's history ``C`` (rounds x
transitions x lanes; every ``C[:, t, l]`` is nondecreasing), in the generic engine's processing
order.

The window's bounds are the ``warmup``-th and ``(warmup + steps)``-th step completions: their
times by bisection over the sorted per-transition completions (:func:`_kth_step`, no copy of
the history), then their place among the completions tied with them by the generic engine's
order of completions at one instant (``fkey`` in :func:`replication`). The firings up to a bound
are binary searches per transition (:func:`_upto`) plus that order for the ties.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..results import RawReplication

__all__ = ["replication", "first_not_before"]


@njit(cache=True)
def _start(C, t, k, l, ip, iprod, itok, serv):  # pragma: no cover - compiled
    """The start of firing ``k`` of ``t`` in lane ``l`` (the recursion's ``x``, re-read)."""
    x = 0.0
    for a in range(ip[t], ip[t + 1]):
        kk = k - itok[a]
        if kk >= 0 and C[kk, iprod[a], l] > x:
            x = C[kk, iprod[a], l]
    s = serv[t]
    if s > 0 and k - s >= 0 and C[k - s, t, l] > x:
        x = C[k - s, t, l]
    return x


@njit(cache=True)
def first_not_before(C, t, l, B):  # pragma: no cover - compiled
    """The first round whose completion of ``t`` in lane ``l`` is at or after ``B`` (``C[k, t,
    l]`` is nondecreasing in ``k``: a binary search); both fast paths' records use it."""
    lo, hi = 0, C.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if C[mid, t, l] < B:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _kth_step(C, st, l, j, lo, hi):  # pragma: no cover - compiled
    """The ``j``-th smallest (0-based) completion of the transitions ``st`` in lane ``l`` of the
    history ``C`` (every ``C[:, t, l]`` is nondecreasing); ``lo[i]``, ``hi[i]``: the first round
    whose completion of ``st[i]`` is at or after it / after it. By bisection over the bit
    patterns of the times (for doubles >= 0 they order as the values), each step counting the
    completions at or below a value by binary searches: O(64 ns log K), no copy of the history
    (``np.partition`` of a copy took ~20 % of a fast run of the eg-ring toy)."""
    K = C.shape[0]
    f = np.zeros(1)
    bits = f.view(np.int64)
    top = 0.0
    for i in range(st.size):
        if C[K - 1, st[i], l] > top:
            top = C[K - 1, st[i], l]
    f[0] = top
    a, b = np.int64(0), bits[0]
    while a < b:  # the least pattern whose value has more than j completions at or below it
        bits[0] = a + (b - a) // 2
        v = f[0]
        n = 0
        for i in range(st.size):
            n += first_after(C, st[i], l, v)
        if n > j:
            b = bits[0]
        else:
            a = bits[0] + 1
    bits[0] = a
    B = f[0]
    for i in range(st.size):
        lo[i] = first_not_before(C, st[i], l, B)
        hi[i] = first_after(C, st[i], l, B)
    return B


@njit(cache=True)
def first_after(C, t, l, B):  # pragma: no cover - compiled
    """The first round whose completion of ``t`` in lane ``l`` is after ``B`` (binary search)."""
    lo, hi = 0, C.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if C[mid, t, l] <= B:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _upto(C, l, B, lt, eq):  # pragma: no cover - compiled
    """Per transition, the completions in lane ``l`` before ``B`` (``lt``) and at ``B`` (``eq``)."""
    K = C.shape[0]
    for t in range(C.shape[1]):
        lo = first_not_before(C, t, l, B)
        lt[t] = lo
        k = lo
        while k < K and C[k, t, l] == B:
            k += 1
        eq[t] = k - lo


def replication(cn, plan, C, l, st, steps, warmup, samples) -> RawReplication:
    """Lane ``l``'s record: the window between its ``warmup``-th and ``warmup + steps``-th step
    completions in the generic engine's processing order, the step times, the counters."""
    T, R, K = cn.n_transitions, cn.n_resources, C.shape[0]
    need = warmup + steps
    rank = cn.rank

    batch: dict = {}

    def fkey(t: int, k: int) -> tuple:
        """Where firing ``k`` of ``t`` completes in the generic engine's processing order among
        completions at the same instant: (completion batch, start, start batch, rank, k).
        Completions at one instant come in batches — first those of firings started earlier
        (batch 0), then those of zero-duration firings started after batch b (batch b + 1) —
        each in start order: by start, the batch after which the start's scan ran (-1: the
        initial scan), then the scan key, whose request time is the start here (a request held
        back by the servers bound is re-timed when a server frees) and rank. Checked against the
        generic engine on random deterministic event graphs, zero durations included."""
        x = _start(C, t, k, l, plan.ip, plan.iprod, plan.itok, plan.serv)
        bx = start_batch(t, k, x)
        return (0 if C[k, t, l] > x else bx + 1, x, bx, int(rank[t]), k)

    def start_batch(t: int, k: int, x: float) -> int:
        """The batch after which firing ``k`` of ``t`` (start ``x``) started: the latest batch
        among the completions at ``x`` it waited for (recursing only through zero durations)."""
        if (t, k) not in batch:
            bx = -1
            arcs = [(int(plan.iprod[a]), int(plan.itok[a])) for a in range(plan.ip[t], plan.ip[t + 1])]
            if plan.serv[t] > 0:
                arcs.append((t, int(plan.serv[t])))
            for u, m in arcs:
                kk = k - m
                if kk >= 0 and C[kk, u, l] == x:
                    xu = _start(C, u, kk, l, plan.ip, plan.iprod, plan.itok, plan.serv)
                    bx = max(bx, 0 if x > xu else start_batch(u, kk, xu) + 1)
            batch[(t, k)] = bx
        return batch[(t, k)]

    def key(idx: int) -> tuple:
        """:func:`fkey` of step completion ``idx`` (``i * K + k``: firing ``k`` of ``st[i]``);
        only ties need it."""
        return fkey(int(st[idx // K]), idx % K)

    def in_order(idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``idx`` sorted by completion time (``vals``: every step completion, by index), ties by
        :func:`key`."""
        idx = idx[np.argsort(vals[idx], kind="stable")]
        v = vals[idx]
        tied = np.nonzero(v[1:] == v[:-1])[0]
        end = -1
        for j in tied.tolist():
            if j <= end:
                continue  # inside a run already ordered
            end = j + 1
            while end + 1 < v.size and v[end + 1] == v[j]:
                end += 1
            idx[j:end + 1] = sorted(idx[j:end + 1].tolist(), key=key)
        return idx

    def bound(j: int) -> tuple[int, float]:
        """The ``j``-th step completion (0-based) in processing order: (index, time). Its time
        by bisection over the sorted per-transition sequences (:func:`_kth_step`, no copy of
        them), then the generic engine's order among the completions tied with it."""
        lo, hi = np.zeros(st.size, dtype=np.int64), np.zeros(st.size, dtype=np.int64)
        B = float(_kth_step(C, st, l, j, lo, hi))
        tied = [i * K + k for i in range(st.size) for k in range(int(lo[i]), int(hi[i]))]
        return sorted(tied, key=key)[j - int(lo.sum())], B

    def upto(idx: int, B: float) -> np.ndarray:
        """Per transition: completions processed up to and including step completion ``idx``
        (time ``B``)."""
        lt, eq = np.zeros(T, dtype=np.int64), np.zeros(T, dtype=np.int64)
        _upto(C, l, B, lt, eq)
        bkey = key(idx)
        for t in np.nonzero(eq)[0].tolist():
            lt[t] += sum(fkey(t, k) <= bkey for k in range(lt[t], lt[t] + eq[t]))
        return lt

    b1, t1 = bound(need - 1)
    n1 = upto(b1, t1)
    if warmup > 0:
        b0, t0 = bound(warmup - 1)
        n0 = upto(b0, t0)
    else:
        n0, t0 = np.zeros(T, dtype=np.int64), 0.0
    if samples:
        vals = np.ascontiguousarray(C[:, st, l].T).ravel()  # index i * K + k
        idx = in_order(np.nonzero((vals >= t0) & (vals <= t1))[0], vals)
        lo = int(np.nonzero(idx == b0)[0][0]) + 1 if warmup > 0 else 0
        idx = idx[lo:lo + steps]
        step_times, step_trans = vals[idx], st[idx // K]
    else:
        step_times, step_trans = np.zeros(0), np.zeros(0, dtype=np.int64)
    return RawReplication(
        t0=t0, t1=t1, step_times=step_times, step_trans=step_trans,
        firings=n1 - n0, busy=np.zeros(R), wait_sum=np.zeros(R), wait_n=np.zeros(R, dtype=np.int64),
        gate_log=np.zeros((0, 2), dtype=np.int64), events=int(n1.sum()))
