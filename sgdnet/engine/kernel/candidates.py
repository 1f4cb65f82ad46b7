"""The candidates: the instant queue and the resources' waiting queues.

Invariant: a transition with a pending request is in exactly one structure, the *instant queue*
(candidates to examine now, ``TD_WHERE == IN_IH``) or the waiting queue of one busy resource
(``TD_WHERE`` = that resource), and ``TD_CPOS`` holds its physical position there. Every
structure is ordered by the scan key ``(prio_class, oldest request time, rank)`` (:func:`key_less`),
rank being the static ``(priority, declaration index)`` order, so keys are unique; a key does not
change while its transition is queued. Popping the minimum of the instant queue repeatedly
therefore reproduces the normative scan "start the first candidate in key order that can start,
re-evaluate, repeat": nothing frees a resource during a scan, so a blocked candidate stays
blocked until the next completion batch promotes its queue's head back (:func:`queue_take`).

- Binary heaps on ``h[base : base + n]`` (:func:`heap_push`, :func:`heap_pop`,
  :func:`heap_remove`): a priority resource's queue, and the instant queue when it is long and
  out of order.
- Sorted rings (:func:`ring_insert`, :func:`ring_remove`): a fifo resource's queue in
  ``qh[base : base + cap]``. A newcomer usually has the latest request time and is placed after
  one comparison, and the head leaves in O(1), where a heap of the ~50-280 waiting transfers at
  a PS link costs ~2 log n scattered key comparisons per promotion.
- The instant queue ``ih[0 : cap]``: a sorted ring (head = minimum), since candidates mostly
  arrive in key order (dirty transitions are re-evaluated in arc order, usually rank order, and
  new requests carry the current time): a newcomer goes to the back (or the front) after one
  comparison (:func:`instant_append`, inlined), the head leaves in O(1). An out-of-order newcomer
  is moved into place while the queue is short; a long queue (``IQ_RING`` or more entries) that
  receives one becomes a binary heap until it holds at most one entry again
  (:func:`instant_push`). Ring and heap give the same pop order.
"""

from __future__ import annotations

from numba import njit

from ...net.compiled import DISC_FIFO
from ..layout import (
    F_QRES,
    F_S1,
    IN_IH,
    NONE,
    TD_CPOS,
    TD_FROM,
    TD_RQHEAD,
    TD_RQOFF,
    TD_WHERE,
    TF_KTIME,
    TS_PCLS,
    TS_Q0,
    TS_RANK,
)
from .jit import I0, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py', '../../net/compiled.py', '../layout.py')


@inner
def key_less(a, b, TS, TF):
    pa = TS[a, TS_PCLS]
    pb = TS[b, TS_PCLS]
    if pa != pb:
        return pa < pb
    ta = TF[a, TF_KTIME]
    tb = TF[b, TF_KTIME]
    if ta != tb:
        return ta < tb
    return TS[a, TS_RANK] < TS[b, TS_RANK]


@inner
def heap_up(h, base, i, TD, TS, TF):
    x = h[base + i]
    while i > 0:
        par = (i - 1) >> 1
        y = h[base + par]
        if key_less(x, y, TS, TF):
            h[base + i] = y
            TD[y, TD_CPOS] = i
            i = par
        else:
            break
    h[base + i] = x
    TD[x, TD_CPOS] = i


@inner
def heap_down(h, base, n, i, TD, TS, TF):
    x = h[base + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key_less(h[base + c + 1], h[base + c], TS, TF):
            c += 1
        y = h[base + c]
        if key_less(y, x, TS, TF):
            h[base + i] = y
            TD[y, TD_CPOS] = i
            i = c
        else:
            break
    h[base + i] = x
    TD[x, TD_CPOS] = i


@inner
def heap_push(h, base, n, t, TD, TS, TF):
    h[base + n] = t
    heap_up(h, base, n, TD, TS, TF)
    return n + 1


@inner
def heap_pop(h, base, n, TD, TS, TF):
    """Remove the top; the caller reads ``h[base]`` before and passes the old size."""
    n -= 1
    if n > 0:
        h[base] = h[base + n]
        heap_down(h, base, n, I0, TD, TS, TF)
    return n


@inner
def heap_remove(h, base, n, t, TD, TS, TF):
    i = TD[t, TD_CPOS]
    n -= 1
    if i != n:
        last = h[base + n]
        h[base + i] = last
        TD[last, TD_CPOS] = i
        if i > 0 and key_less(last, h[base + ((i - 1) >> 1)], TS, TF):
            heap_up(h, base, i, TD, TS, TF)
        else:
            heap_down(h, base, n, i, TD, TS, TF)
    return n


@inner
def ring_insert(h, base, cap, head, n, t, TD, TS, TF):
    p = head + n
    if p >= cap:
        p -= cap
    k = n
    while k > 0:
        pr = p - 1
        if pr < 0:
            pr += cap
        y = h[base + pr]
        if key_less(t, y, TS, TF):
            h[base + p] = y
            TD[y, TD_CPOS] = p
            p = pr
            k -= 1
        else:
            break
    h[base + p] = t
    TD[t, TD_CPOS] = p
    return n + 1


@inner
def ring_remove(h, base, cap, head, n, t, TD):
    """Remove t (anywhere in the ring): the elements after it move one place forward."""
    p = TD[t, TD_CPOS]
    li = p - head
    if li < 0:
        li += cap
    for _j in range(li, n - 1):
        nx = p + 1
        if nx == cap:
            nx = 0
        y = h[base + nx]
        h[base + p] = y
        TD[y, TD_CPOS] = p
        p = nx
    return n - 1


#: a long instant queue (this many entries or more) that receives an out-of-order newcomer becomes
#: a binary heap
IQ_RING = 32


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def instant_push(ih, ihs, hd, n, heap, t, TD, TS, TF):
    """Put candidate ``t`` into the instant queue; return ``(n, hd, heap)``."""
    if heap:
        return heap_push(ih, I0, n, t, TD, TS, TF), hd, heap
    cap = ih.size
    p = hd + n
    if p >= cap:
        p -= cap
    if n == 0:
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    pr = p - 1
    if pr < 0:
        pr += cap
    if not key_less(t, ih[pr], TS, TF):  # the common case: after the last one
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    if key_less(t, ih[hd], TS, TF):  # before the first one
        hd -= 1
        if hd < 0:
            hd += cap
        ih[hd] = t
        TD[t, TD_CPOS] = hd
        return n + 1, hd, heap
    if n < IQ_RING:
        # move the larger entries one place back
        k = n
        while k > 0:
            pr = p - 1
            if pr < 0:
                pr += cap
            y = ih[pr]
            if key_less(t, y, TS, TF):
                ih[p] = y
                TD[y, TD_CPOS] = p
                p = pr
                k -= 1
            else:
                break
        ih[p] = t
        TD[t, TD_CPOS] = p
        return n + 1, hd, heap
    # long and out of order: the sorted entries, moved to ih[0:n], are a valid heap
    p = hd
    for i in range(n):
        ihs[i] = ih[p]
        p += 1
        if p == cap:
            p = 0
    for i in range(n):
        y = ihs[i]
        ih[i] = y
        TD[y, TD_CPOS] = i
    return heap_push(ih, I0, n, t, TD, TS, TF), I0, True


@phase
def instant_append(ih, hd, n, heap, t, TD, TS, TF):
    """Candidate ``t`` (its key set) after the last entry of the instant queue when the queue is
    an empty ring or a sorted ring whose last key is smaller (the common case: one comparison);
    return the new size, unchanged when ``t`` must go through :func:`instant_push` instead. The
    caller then calls :func:`instant_push` itself (a call in the kernel, not inlined at every site)
    and marks ``t`` ``IN_IH``."""
    cap = ih.size
    p = hd + n
    if p >= cap:
        p -= cap
    ok = n == 0
    if not ok and not heap:
        y = ih[p - 1] if p > 0 else ih[cap - 1]
        a = TS[t, TS_PCLS]
        b = TS[y, TS_PCLS]
        if a != b:
            ok = a > b
        elif TF[t, TF_KTIME] != TF[y, TF_KTIME]:
            ok = TF[t, TF_KTIME] > TF[y, TF_KTIME]
        else:
            ok = TS[t, TS_RANK] > TS[y, TS_RANK]
    if ok:
        ih[p] = t
        TD[t, TD_CPOS] = p
        n += 1
    return n


@phase
def queue_take(r, qh, qn, qhd, rq_base, r_disc, TD, TS, TF):
    """Take the head of resource ``r``'s (non-empty) waiting queue out of it and return it: the
    front of a fifo resource's sorted ring, the root of a priority resource's heap. Inlined like
    :func:`instant_append`."""
    qb = rq_base[r]
    if r_disc[r] == DISC_FIFO:
        qd = qhd[r]
        u = qh[qb + qd]
        qd += 1
        if qd == rq_base[r + 1] - qb:
            qd = 0
        qhd[r] = qd
        qn[r] -= 1
    else:
        u = qh[qb]
        qn[r] = heap_pop(qh, qb, qn[r], TD, TS, TF)
    return u


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def instant_pop(ih, hd, n, heap, TD, TS, TF):
    """Take the first candidate out of the (non-empty) instant queue; return ``(t, n, hd, heap)``."""
    if heap:
        t = ih[0]
        n = heap_pop(ih, I0, n, TD, TS, TF)
        if n <= 1:
            return t, n, I0, False
        return t, n, hd, heap
    t = ih[hd]
    hd += 1
    if hd == ih.size:
        hd = 0
    return t, n - 1, hd, heap


@njit(cache=True, _nrt=False, error_model="numpy", forceinline=False)
def instant_remove(ih, hd, n, heap, t, TD, TS, TF):
    """Take candidate ``t`` out of the instant queue (anywhere in it); return ``(n, hd, heap)``."""
    if heap:
        n = heap_remove(ih, I0, n, t, TD, TS, TF)
        if n <= 1:  # ih[0] (if any) is also a ring of one entry at head 0
            return n, I0, False
        return n, hd, heap
    cap = ih.size
    p = TD[t, TD_CPOS]
    li = p - hd
    if li < 0:
        li += cap
    if 2 * li < n:
        # the entries before it move one place back, the head too
        for _j in range(li):
            pr = p - 1
            if pr < 0:
                pr += cap
            y = ih[pr]
            ih[p] = y
            TD[y, TD_CPOS] = p
            p = pr
        hd += 1
        if hd == cap:
            hd = 0
    else:
        # the entries after it move one place forward
        for _j in range(li, n - 1):
            nx = p + 1
            if nx == cap:
                nx = 0
            y = ih[nx]
            ih[p] = y
            TD[y, TD_CPOS] = p
            p = nx
    return n - 1, hd, heap


# ------------------------------------------------------------ the loop's candidate phases
@phase
def enqueue(ih, ihs, hd, n, heap, t, TD, TS, TF):
    """Candidate ``t`` (its key set) into the instant queue: after the last entry in one
    comparison (:func:`instant_append`, inlined) or through :func:`instant_push` (a call); marks
    it ``IN_IH``. Returns ``(n, hd, heap)``."""
    m = instant_append(ih, hd, n, heap, t, TD, TS, TF)
    if m == n:
        m, hd, heap = instant_push(ih, ihs, hd, n, heap, t, TD, TS, TF)
    TD[t, TD_WHERE] = IN_IH
    return m, hd, heap


@phase
def promote(r, qh, qn, qhd, rq_base, r_disc, used, r_cap, ih, ihs, hd, n, heap, TD, TS, TF):
    """When resource ``r`` has a free server and a waiting queue, its head goes back to the instant
    queue, remembering ``r`` (``TD_FROM``: if it leaves the instant queue without starting, the
    next head is promoted in its place). Returns ``(n, hd, heap)``."""
    if used[r] < r_cap[r] and qn[r] > 0:
        u = queue_take(r, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
        n, hd, heap = enqueue(ih, ihs, hd, n, heap, u, TD, TS, TF)
        TD[u, TD_FROM] = r
    return n, hd, heap


@phase
def wait(r, t, qh, qn, qhd, rq_base, r_disc, TD, TS, TF):
    """Candidate ``t`` into the waiting queue of resource ``r`` (full): the sorted ring of a fifo
    resource, the heap of a priority one."""
    if r_disc[r] == DISC_FIFO:
        qn[r] = ring_insert(qh, rq_base[r], rq_base[r + 1] - rq_base[r], qhd[r], qn[r], t, TD, TS, TF)
    else:
        qn[r] = heap_push(qh, rq_base[r], qn[r], t, TD, TS, TF)
    TD[t, TD_WHERE] = r


@phase
def unwait(r, t, qh, qn, qhd, rq_base, r_disc, TD, TS, TF):
    """Take ``t`` out of the waiting queue of resource ``r`` (anywhere in it)."""
    if r_disc[r] == DISC_FIFO:
        qn[r] = ring_remove(qh, rq_base[r], rq_base[r + 1] - rq_base[r], qhd[r], qn[r], t, TD)
    else:
        qn[r] = heap_remove(qh, rq_base[r], qn[r], t, TD, TS, TF)


@phase
def pop_first(ih, hd, n, heap, TD, TS, TF):
    """The first candidate taken out of the (non-empty) instant queue: the ring's head (the
    common case of :func:`instant_pop`, written out), or the heap's root. Returns
    ``(t, n, hd, heap)``."""
    if heap:
        return instant_pop(ih, hd, n, heap, TD, TS, TF)
    t = ih[hd]
    hd += 1
    if hd == ih.size:
        hd = 0
    return t, n - 1, hd, heap


@phase
def update(t, f, d, TD, TS, TF, rq_pool, qres_idx, used, r_cap, qh, qn, qhd, rq_base, r_disc, ih,
           ihs, hd, n, heap):
    """After ``t`` (flags ``f``) was re-evaluated to degree ``d``: a transition that became a
    candidate goes into the instant queue, or straight into its first resource's queue when that
    resource is full (it would be found blocked on it when popped: nothing frees a resource
    before the next completion batch, and an earlier resource cannot become the blocking one); a
    candidate whose degree fell to 0 leaves its queue (and if it had been promoted from a
    resource's queue, that queue's next head is promoted). Returns ``(n, hd, heap)``."""
    if d > 0:
        if TD[t, TD_WHERE] == NONE:
            if not f & F_S1:
                TF[t, TF_KTIME] = rq_pool[TD[t, TD_RQOFF] + TD[t, TD_RQHEAD]]
            r = -1
            if f & F_QRES:
                r = qres_idx[TS[t, TS_Q0]]
                if used[r] < r_cap[r]:
                    r = -1
            if r >= 0:
                wait(r, t, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
            else:
                n, hd, heap = enqueue(ih, ihs, hd, n, heap, t, TD, TS, TF)
    elif TD[t, TD_WHERE] != NONE:
        wt = TD[t, TD_WHERE]
        TD[t, TD_WHERE] = NONE
        if wt == IN_IH:
            n, hd, heap = instant_remove(ih, hd, n, heap, t, TD, TS, TF)
            src = TD[t, TD_FROM]
            if src >= 0:
                TD[t, TD_FROM] = NONE
                n, hd, heap = promote(src, qh, qn, qhd, rq_base, r_disc, used, r_cap, ih, ihs, hd, n,
                                      heap, TD, TS, TF)
        else:
            unwait(wt, t, qh, qn, qhd, rq_base, r_disc, TD, TS, TF)
    return n, hd, heap
