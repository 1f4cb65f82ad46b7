"""Run the fast paths' chunks of replications: serially or on the engine's threads, with Ctrl-C
and progress handled as the generic engine does (:func:`sgdnet.engine.driver.run`).

A fast path's kernel (:mod:`.fastpath`, :mod:`.fastpath_fifo`) makes a bounded amount of work per
call (``POLL_WORK`` completions) and returns to its Python loop, which reads the shared ``halt``
flag and records the chunk's step completions in ``prog`` between calls. Where Ctrl-C can reach
the caller, the chunks never run on the calling thread: the caller waits on the engine's threads,
a Ctrl-C sets ``halt`` at once, and its ``KeyboardInterrupt`` is raised once the chunks have
returned (within one kernel call; :func:`sgdnet.engine.driver.on_threads`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..net.compiled import CompiledNet

__all__ = ["POLL_WORK", "run_chunks", "run_lanes", "cached_analysis"]

#: completions per fast-path kernel call, i.e. how often ``halt`` is read and progress recorded
#: (~5-20 ms of work; a call costs ~20 us of Python, so this adds < 0.5 %)
POLL_WORK = 1 << 19


def run_chunks(n: int, one: Callable[[int, np.ndarray, np.ndarray], Any], *, parallel: bool,
               progress: Callable[[int], None] | None = None) -> list[Any]:
    """``[one(i, halt, prog) for i in range(n)]``, on the engine's threads when ``parallel``.

    ``one`` must read ``halt[0]`` between its kernel calls (non-zero: return at once, any value)
    and keep ``prog[i]`` at chunk ``i``'s step completions so far. ``progress`` is called about
    five times a second with ``prog.sum()`` and once at the end. Results do not depend on the
    threads (each chunk owns its replications and their random streams).
    """
    from .driver import _interruptible, n_threads, on_threads

    halt = np.zeros(1, dtype=np.int64)
    prog = np.zeros(n, dtype=np.int64)
    out: list[Any] = [None] * n
    todo = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:  # takes the next chunk until none is left
        while not halt[0]:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            out[i] = one(i, halt, prog)

    nt = min(n, n_threads()) if parallel else 1
    if nt == 1 and progress is None and not _interruptible():
        worker()  # nobody can set halt or wants progress: no thread hand-off
        return out
    on_threads(worker, nt, halt, prog, progress)
    return out


def run_lanes(chunks: list[list[int]], chunk: Callable[..., list | None], *, parallel: bool,
              progress: Callable[[int], None] | None = None) -> list | None:
    """A fast path's replications: ``chunk(seeds, halt, prog, i)`` for each chunk of seeds
    (:func:`run_chunks`), flattened in seed order; None when any chunk gave None (the run does
    not fit the path: the caller runs the generic engine)."""
    got = run_chunks(len(chunks), lambda i, halt, prog: chunk(chunks[i], halt, prog, i),
                     parallel=parallel, progress=progress)
    if any(g is None for g in got):
        return None
    return [r for g in got for r in g]


def cached_analysis(cn: CompiledNet, attr: str, analyse: Callable) -> tuple:
    """``analyse(cn)``, a ``(plan or None, reasons)`` pair, made once and kept on the compiled
    net under ``attr`` (:func:`sgdnet.net.compiled.compile_net` caches nets by structure);
    both fast paths keep theirs so."""
    got = getattr(cn, attr, None)
    if got is None:
        got = analyse(cn)
        setattr(cn, attr, got)
    return got
