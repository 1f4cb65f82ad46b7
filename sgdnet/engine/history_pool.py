"""Memory kept between fast-path runs for their histories (fresh pages cost a fault each).

A fast path writes its history (every round's completions, :mod:`.fastpath`; the latest rounds,
:mod:`.fastpath_fifo`) into large float64 arrays, 8 bytes per completion. Memory the process
has not touched yet costs a page fault per 4 KB page at its first write, and numpy gives large
arrays back to the system when they are freed, so every run used to write into fresh pages. On
the 2-vCPU development VM a fault costs up to ~5 us when no transparent huge page is granted:
~17 ns per completion, as much as the event-graph recursion itself, and it came and went
with the allocator's state (bench/README.md, "Kept history memory").

So the fast paths take their history arrays here and hand them back once their record is made
(:func:`held`; a history that grows is replaced by :func:`grow`): the next replication, run or
study row writes into memory already touched. At most :data:`KEEP_BYTES` are kept, the most recently given back first;
:func:`drop` frees them. Results do not depend on it: a run writes every history element it
reads (tests/test_history_pool.py runs the fast paths on histories filled with NaN).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

__all__ = ["KEEP_BYTES", "take", "give_back", "held", "grow", "drop", "kept_bytes"]

#: bytes of history arrays the process keeps for the next runs (larger arrays are not kept)
KEEP_BYTES = 64 << 20

_lock = threading.Lock()
_kept: list[np.ndarray] = []  # oldest first; each owns its memory


def take(n: int) -> np.ndarray:
    """A float64 array of ``n`` elements, contents undefined: a view of the smallest kept array
    that is large enough (no longer kept until given back), else a new array."""
    with _lock:
        best = -1
        for i, b in enumerate(_kept):
            if b.size >= n and (best < 0 or b.size < _kept[best].size):
                best = i
        if best >= 0:
            return _kept.pop(best)[:n]
    return np.empty(n)


def _owner(a: np.ndarray) -> np.ndarray:
    """The array owning ``a``'s memory (``a`` itself, or the base its views were made from)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def give_back(*arrays: np.ndarray) -> None:
    """Keep the memory of ``arrays`` (from :func:`take`, or views of them) for the next
    :func:`take`. Nothing may read or write them afterwards; the oldest kept arrays are freed
    while more than :data:`KEEP_BYTES` are kept."""
    with _lock:
        for a in arrays:
            o = _owner(a)
            if o.base is not None or o.dtype != np.float64 or o.ndim != 1 or o.nbytes > KEEP_BYTES:
                continue  # not ours to keep, or too large
            if any(k is o for k in _kept):
                continue
            _kept.append(o)
        total = sum(k.nbytes for k in _kept)
        while total > KEEP_BYTES:
            total -= _kept.pop(0).nbytes


@contextlib.contextmanager
def held(*sizes: int) -> Iterator[list[np.ndarray]]:
    """A list of arrays from :func:`take` (one of each size), handed back at the end of the
    block: the arrays the list holds then (a history that grew replaced its entry,
    :func:`grow`)."""
    hold = [take(n) for n in sizes]
    try:
        yield hold
    finally:
        give_back(*hold)


def grow(old: np.ndarray, n: int) -> np.ndarray:
    """A flat array of ``n`` elements that starts with the elements of ``old`` (C order); ``old``
    goes back to the pool (nothing may use it afterwards)."""
    new = take(n)
    new[:old.size] = old.reshape(-1)
    give_back(old)
    return new


def drop() -> None:
    """Free every kept array."""
    with _lock:
        _kept.clear()


def kept_bytes() -> int:
    """Bytes kept now."""
    with _lock:
        return sum(k.nbytes for k in _kept)
