"""Run replications of the kernel, serially or on a pool of threads.

The kernel is compiled ``nogil=True``, so replications run truly in parallel on Python threads
(one kernel call per replication; a single compiled kernel serves both modes, which halves the
JIT time of a numba ``prange`` driver). Each replication owns its RNG state, seeded from its own
integer seed, so results do not depend on the number of threads or on scheduling.

Where Ctrl-C can reach the caller (the main thread, a SIGINT handler written in Python), the
kernel never runs on the calling thread, even serially (``parallel=False``: one of the engine's
worker threads plays the replications in turn): the caller waits on the workers, a Ctrl-C sets
the kernels' shared ``halt`` flag at once (they read it every 4096 completions), and its
``KeyboardInterrupt`` is raised as soon as they have returned, instead of after the last
replication ends (:func:`on_threads`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from .._check import derive_seeds  # noqa: F401  (re-exported)
from .._interrupts import Interrupts
from ..net.compiled import CompiledNet
from . import abi
from .abi import RunOutput, gate_log_capacity, lead_bins  # noqa: F401  (re-exported)

__all__ = ["derive_seeds", "RunOutput", "run", "n_threads", "set_max_threads"]



def run(cn: CompiledNet, seeds: list[int], *, steps: int, warmup: int, max_events: int,
        zeno_limit: int, samples: bool, trace_limit: int, parallel: bool,
        progress: Callable[[int], None] | None = None, histograms: bool = False,
        period: int = 0) -> RunOutput:
    """Run one kernel call per seed and return the raw arrays.

    ``progress``, if given, is called from this thread about five times a second with the step
    completions so far over all replications (warm-up included), and once at the end; a run
    expected to take less than ~20 ms does not call it. ``histograms``: keep the wait and sojourn
    histograms of every resource (``HIST_BINS`` counters each). ``period`` > 0 (a net without
    randomness, no trace): look for a periodic regime every ``period`` step completions and skip
    the periods it repeats (:mod:`sgdnet.engine.periodic`); 0: play every event.
    """
    from . import kernel  # numba is imported on first use only

    R = len(seeds)
    out = abi.allocate(cn, seeds, steps=steps, warmup=warmup, samples=samples, trace_limit=trace_limit,
                       histograms=histograms)
    caps = _initial_caps(cn)
    halt = np.zeros(1, dtype=np.int64)
    prog = np.zeros(R, dtype=np.int64)
    fixed = {**abi.net_args(cn), "halt": halt}
    run_replication = kernel.run_replication
    if run_replication is kernel.loop.run_replication:  # (not a test's or a bench's stand-in)
        # the event loop compiled for the features this net uses (sgdnet.engine.kernel.specialise)
        run_replication = kernel.specialise.choose(run_replication, fixed)
        if run_replication is not kernel.run_replication and not run_replication.overloads:
            from .jitcache import preload

            preload(run_replication)  # a cache hit without numba's registry refresh (~0.3 s)
    run_kw = dict(steps=steps, warmup=warmup, max_events=max_events, zeno_limit=zeno_limit, samples=samples,
                  trace_limit=trace_limit, period=period)

    def one(k: int) -> None:
        rows = out.rows(k)
        arrays = list(rows.values())
        o_i = rows["o_i"]
        c = dict(caps)
        while True:
            _check_state_room(cn, c, nthreads)
            fixed_k = {**fixed, **abi.run_args(seed=seeds[k] & (2**64 - 1), cap_slots=c["slots"],
                                               cap_requests=c["requests"], cap_holders=c["holders"], **run_kw)}
            run_replication(*abi.call_args(fixed_k, {**rows, "prog": prog[k:k + 1]}))
            if o_i[abi.OI_STATUS] == abi.ST_HALTED:
                return
            if o_i[abi.OI_STATUS] != abi.ST_GROW:
                break
            g = int(o_i[abi.OI_GROW])
            for bit, key in ((abi.GROW_SLOTS, "slots"), (abi.GROW_REQUESTS, "requests"),
                             (abi.GROW_HOLDERS, "holders")):
                if g & bit:
                    c[key] *= 4
            for a in arrays:
                a[...] = 0
        _learn_caps(cn, c)

    nthreads = min(R, n_threads()) if parallel else 1
    todo = iter(range(R))
    todo_lock = threading.Lock()

    def worker() -> None:  # takes the next replication until none is left
        while not halt[0]:
            with todo_lock:
                k = next(todo, None)
            if k is None:
                return
            one(k)

    quick = _quick(cn, R, steps, warmup)
    if nthreads == 1 and (quick or (progress is None and not _interruptible())):
        worker()  # a thread hand-off costs ~0.1-0.3 ms a call and would gain nothing
        return out
    on_threads(worker, nthreads, halt, prog, None if quick else progress)
    return out


def on_threads(worker: Callable[[], None], n: int, halt: np.ndarray, prog: np.ndarray,
               progress: Callable[[int], None] | None) -> None:
    """Run ``worker`` on ``n`` of the engine's threads and wait for them, calling ``progress``
    about five times a second with ``prog.sum()``.

    Ctrl-C is held off :mod:`concurrent.futures` (:class:`sgdnet._interrupts.Interrupts`): it
    sets ``halt`` at once (the kernels read it every 4096 completions, a fast path's loop at
    every kernel return), and its ``KeyboardInterrupt`` is raised here once every worker has
    returned. An exception of a worker is raised here too, after ``halt`` stops the others.
    """
    stop = Interrupts(on_hold=lambda: halt.__setitem__(0, 1))
    with stop.held():
        futures = [_pool().submit(worker) for _ in range(n)]
        try:
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=0.2)
                stop.check()
                if progress is not None:
                    progress(int(prog.sum()))
            for f in futures:
                f.result()  # a worker's exception
        except BaseException:
            halt[0] = 1
            wait(futures)
            raise


def _quick(cn: CompiledNet, replications: int, steps: int, warmup: int) -> bool:
    """Whether a run is expected to take at most ~20 ms (about 1e5 completions, each transition
    of a cyclic net firing about once per firing of a step transition), so that Ctrl-C waiting
    for its end goes unnoticed."""
    per_step = cn.n_transitions / max(1, int(np.count_nonzero(cn.is_step)))
    return replications * (steps + warmup) * per_step <= 100_000


def _interruptible() -> bool:
    """Whether Ctrl-C would interrupt this thread: the main thread with a SIGINT handler written
    in Python (Python's own, or one holding Ctrl-C back, :mod:`sgdnet._interrupts`), not a worker
    thread, nor a process that ignores SIGINT (a study's worker processes)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    return callable(signal.getsignal(signal.SIGINT))


_engine_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:  # the child has none of the parent's threads
    global _engine_pool, _pool_lock
    _engine_pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool() -> ThreadPoolExecutor:
    """The engine's worker threads, one per CPU, started on first use and kept (starting threads
    costs ~0.2 ms a call here, more than a small simulation); a forked child makes its own."""
    global _engine_pool
    with _pool_lock:
        if _engine_pool is None:
            _engine_pool = ThreadPoolExecutor(max_workers=n_threads_uncapped(),
                                              thread_name_prefix="sgdnet-engine")
        return _engine_pool


_caps_lock = threading.Lock()


def _initial_caps(cn: CompiledNet) -> dict:
    hint = getattr(cn, "_engine_caps", None)
    if hint is not None:
        return dict(hint)
    multi = cn.servers[cn.servers > 1]  # single-server transitions own a reserved slot
    slots = 16 + int(np.minimum(multi, 4).sum())
    return {"slots": slots, "requests": max(64, 2 * int(np.minimum(cn.servers, 4).sum())), "holders": 16}


def state_bytes(cn: CompiledNet, caps: dict) -> int:
    """Bytes of the engine state one replication allocates that grow with ``caps``' holders:
    the processor-sharing and flow holder tables, one row of ``caps["holders"]`` int64 per
    shared link (processor-sharing resources and flow links), two tables."""
    return 2 * 8 * _shared_links(cn) * int(caps["holders"])


def _shared_links(cn: CompiledNet) -> int:
    """Rows of the holder tables: the net's processor-sharing resources and flow links (the
    kernel's ``nps``, at least 1)."""
    return max(int(np.count_nonzero(cn.r_ps >= 0)), 1)


def _check_state_room(cn: CompiledNet, caps: dict, threads: int = 1) -> None:
    """Refuse a kernel call whose holder tables (``threads`` replications at once) would not
    fit in memory (limit ``max_state_bytes``), instead of letting the process be killed after
    minutes (issue #43)."""
    from ..errors import SimulationError
    from ..limits import limit

    threads = max(int(threads), 1)
    need, lim = state_bytes(cn, caps) * threads, limit("max_state_bytes")
    if need <= lim:
        return
    raise SimulationError(
        f"net {cn.name!r}: {_shared_links(cn):,} shared links holding up to "
        f"{int(caps['holders']):,} flows each need {need / 2**30:,.1f} GiB of engine state "
        f"({threads} "
        f"replication(s) at once), beyond the limit "
        f"{lim / 2**30:,.1f} GiB (max_state_bytes, 3/4 of this machine's memory): fewer "
        "workers per parameter server (ps_hosts), coarse granularity, or raise it with "
        "SGDNET_MAX_STATE_BYTES=N if the memory is there")


def _learn_caps(cn: CompiledNet, caps: dict) -> None:
    """Remember capacities a replication needed so later runs of this net start with them."""
    with _caps_lock:
        old = getattr(cn, "_engine_caps", None) or _initial_caps(cn)
        cn._engine_caps = {k: max(old[k], caps[k]) for k in caps}


_max_threads: int | None = None


def set_max_threads(n: int | None) -> None:
    """Cap the threads of parallel replications in this process (``None``: no cap).

    For callers that already parallelise across processes (a study's worker processes run their
    replications serially with ``set_max_threads(1)``); results do not depend on it.
    """
    global _max_threads
    from .._check import int_arg as _int_arg

    _max_threads = None if n is None else _int_arg("max threads", n, 1, ", or None for one per CPU")


def n_threads_uncapped() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def n_threads() -> int:
    """Threads used for parallel replications: the CPUs this process may run on, at most the cap
    of :func:`set_max_threads`."""
    n = n_threads_uncapped()
    return n if _max_threads is None else min(n, _max_threads)
