"""The completion heap: the firings in flight, by completion time.

Invariant: ``eh[0:n]`` is a binary min-heap of firing slots keyed by (completion time ``ekt``,
start sequence ``eks``), the keys stored in heap order next to the slot ids so comparisons read
adjacent memory, and ``pos[slot]`` is the slot's index in it (key updates: ps re-rates, flows).
Keys are unique (start sequences are), so the pop order is a total order whatever the heap's
shape. Pops are bottom-up (:func:`drop_top`). The event loop may leave the last completion of a
batch at the root (a *hole*, already applied) for the next start to replace with one sift-down
(:func:`start`) instead of a pop and a push; the order is unchanged.
"""

from __future__ import annotations

import numpy as np

from .jit import I0, IM1, inner, phase

#: the files whose code (inlined helpers) or constants this module's machine code embeds: numba
#: keys the cache by this file only (sgdnet.engine.jitcache recompiles when one of them changed)
JIT_DEPENDS = ('jit.py',)


@inner
def key_less(ta, qa, tb, qb):
    return (ta < tb) | ((ta == tb) & (qa < qb))


@inner
def place(eh, ekt, eks, pos, i, n, s, t, q):
    """Put (s, t, q) into hole i and restore heap order (moving up or down)."""
    p = (i - 1) >> 1
    if i > 0 and key_less(t, q, ekt[p], eks[p]):  # smaller than its parent: up, else down
        sift_up(eh, ekt, eks, pos, i, s, t, q)
    else:
        sift_down(eh, ekt, eks, pos, i, n, s, t, q)


@phase
def sift_up(eh, ekt, eks, pos, i, s, t, q):
    """Put slot ``s`` with key ``(t, q)`` into the heap's hole ``i``, moving it up past its
    larger parents. Inlined into :func:`push`, :func:`drop_top`, :func:`start` and
    :func:`place`."""
    while i > 0:
        p = (i - 1) >> 1
        pt = ekt[p]
        if t < pt or (t == pt and q < eks[p]):
            y = eh[p]
            eh[i] = y
            ekt[i] = pt
            eks[i] = eks[p]
            pos[y] = i
            i = p
        else:
            break
    eh[i] = s
    ekt[i] = t
    eks[i] = q
    pos[s] = i


@phase
def smaller_child(ekt, eks, i, n):
    """The smaller child of node ``i`` in a heap of ``n`` keys, the smaller of two chosen
    branch-free; ``>= n`` when ``i`` has none. The descent of :func:`sift_down` and
    :func:`drop_top`."""
    c = 2 * i + 1
    if c + 1 < n:
        ta = ekt[c + 1]
        tb = ekt[c]
        c += np.int64((ta < tb) | ((ta == tb) & (eks[c + 1] < eks[c])))
    return c


@phase
def sift_down(eh, ekt, eks, pos, i, n, s, t, q):
    """Put slot ``s`` with key ``(t, q)`` into hole ``i`` of a heap of ``n`` keys, moving it down
    past its smaller children. Inlined into :func:`place` and :func:`start`."""
    while True:
        c = smaller_child(ekt, eks, i, n)
        if c >= n:
            break
        pt = ekt[c]
        if pt < t or (pt == t and eks[c] < q):
            y = eh[c]
            eh[i] = y
            ekt[i] = pt
            eks[i] = eks[c]
            pos[y] = i
            i = c
        else:
            break
    eh[i] = s
    ekt[i] = t
    eks[i] = q
    pos[s] = i


@inner
def push(eh, ekt, eks, pos, n, s, t, q):
    """Push slot ``s`` with key ``(t, q)`` on a heap of ``n`` keys; return the new size."""
    sift_up(eh, ekt, eks, pos, n, s, t, q)
    return n + 1


@inner
def pop(eh, ekt, eks, pos, n):
    """Remove the top (:func:`drop_top`); return the new size."""
    if n == 1:
        return 0
    return drop_top(eh, ekt, eks, pos, n)


@phase
def drop_top(eh, ekt, eks, pos, n):
    """Remove the top of a heap of ``n`` >= 2 keys, bottom-up: the hole descends along the
    smaller children (:func:`smaller_child`), then the last element is placed in it and moved up;
    return the new size. Inlined into :func:`pop` and into the kernel's completion batch."""
    n -= 1
    i = I0  # not a literal 0: sift_up compiles once
    while True:
        c = smaller_child(ekt, eks, i, n)
        if c >= n:
            break
        y = eh[c]
        eh[i] = y
        ekt[i] = ekt[c]
        eks[i] = eks[c]
        pos[y] = i
        i = c
    sift_up(eh, ekt, eks, pos, i, eh[n], ekt[n], eks[n])
    return n


@inner
def remove(eh, ekt, eks, pos, n, s):
    """Take slot ``s`` out of the completion heap; return the new size."""
    place(eh, ekt, eks, pos, pos[s], n, s, -np.inf, IM1)
    return pop(eh, ekt, eks, pos, n)


@phase
def start(eh, ekt, eks, pos, n, hole, s, tc, qs):
    """Start: slot ``s`` into the completion heap with key ``(tc, qs)``; return the heap's size.
    With a ``hole`` (the batch's last completion, applied, left at the root) the new key replaces
    it and sifts down; else it is pushed and sifts up."""
    if hole:
        sift_down(eh, ekt, eks, pos, I0, n, s, tc, qs)
        return n
    sift_up(eh, ekt, eks, pos, n, s, tc, qs)
    return n + 1
