"""Where the rows of a study run: in this process, on local processes, or on a Dask cluster;
one row = one call of the study's runner (injected; :func:`sgdnet.predict` by default).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._interrupts import Interrupts
from ..errors import SgdnetError, StudyError
from .rows import _TAIL_COLUMNS, METRIC_COLUMNS, _build_call, _display, numeric_columns, summarize
from .table import _util_key

__all__ = ["EXECUTORS", "local_pool"]

#: Executor names understood by :meth:`Study.run` (besides Executor / Client objects).
EXECUTORS = ("local", "serial", "dask")


# ---------------------------------------------------------------------------- one row
@dataclasses.dataclass(frozen=True)
class _Task:
    """What a worker needs to compute one row (picklable)."""

    index: int
    row_id: str
    params: dict
    seed: int
    runner: Callable | None
    numba_threads: int | None


def _set_numba_threads(n: int | None) -> None:
    if not n:
        return
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a hard dependency
        return
    try:
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    except Exception:  # pragma: no cover - a threading layer that refuses; run as is
        pass


def _init_worker() -> None:
    """Initializer of the local worker processes: one simulation thread per process.

    Parallelism is across rows (one process per core), so each process runs its replications
    serially: the engine's replication thread pool is sized 1 and Numba's to 1. This touches
    only the dedicated child process. Ctrl-C is left to the parent (the terminal sends SIGINT
    to the whole process group): it cancels the queued rows and the pool finishes the rows in
    progress and exits, instead of every child printing a ``KeyboardInterrupt`` traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (drops a Ctrl-C held back since its start)
    if hasattr(signal, "pthread_sigmask"):  # started with SIGINT blocked (local_pool): unblock
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _set_numba_threads(1)
    _exit_with_parent()
    try:
        from ..engine import driver
    except ImportError:  # pragma: no cover - engine not installed
        return
    driver.set_max_threads(1)


def _exit_with_parent(interval: float = 0.5) -> None:
    """End this worker process when its parent is gone (killed with SIGKILL, it cannot shut the
    pool down): a daemon thread checks the parent's pid every ``interval`` seconds, so an
    orphaned worker stops within a second instead of finishing its rows for nobody (and the
    resource tracker, whose last users are gone, exits after it)."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="sgdnet-parent-watch", daemon=True).start()


def local_pool(n: int, ctx: Any) -> cf.ProcessPoolExecutor:
    """A pool of ``n`` local worker processes (start method ``ctx``), started now.

    The workers start with SIGINT blocked (they inherit the calling thread's signal mask), so a
    Ctrl-C that reaches one while it is still starting (importing numba: seconds on a loaded
    machine) stays pending there until :func:`_init_worker` ignores it, instead of printing a
    ``KeyboardInterrupt`` traceback beside the parent's one line. A Ctrl-C that reaches this
    process meanwhile is recorded, not acted on inside the pool's ``submit`` (see
    :mod:`sgdnet._interrupts`), and acted on once the workers are started: the pool is then
    shut down and the ``KeyboardInterrupt`` propagates. (It used to be ignored here for that
    moment, and lost.) Where signals cannot be blocked (Windows), the workers start as they
    would.
    """
    pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker)
    try:
        with Interrupts().held(), _sigint_blocked():
            for _ in range(n):  # a submit with no idle worker starts one (up to n): all n now
                pool.submit(int)
        return pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in the calling thread for the block (where the platform has signal masks):
    a SIGINT sent meanwhile is delivered when the block ends (here, to the recording handler of
    :func:`local_pool`), and processes started inside inherit the mask."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _default_runner(tta: bool = False) -> Callable[..., Any]:
    """:func:`sgdnet.predict`, the runner of a study that names none, in the form that re-rates
    the net of an earlier row of this process when only the bandwidth differs (same results;
    :mod:`.rerate`); for a row with a target (``tta``), the time to accuracy
    (:func:`sgdnet.accuracy.report.study_runner`). Imported when a row runs, so importing the
    study layer does not import the engine."""
    if tta:
        from ..accuracy.report import study_runner

        return study_runner
    from .rerate import predict

    return predict


def _run_task(task: _Task) -> tuple[int, dict[str, Any], bool]:
    """Compute one row in whatever process runs it. Returns ``(index, row, failed)``.

    A :class:`SgdnetError` from the runner becomes an ``error`` column; anything else
    propagates (a bug must not be recorded as a result).
    """
    _set_numba_threads(task.numba_threads)
    failed = False
    try:
        variant, model, cluster, kwargs = _build_call(task.params)
        runner = (task.runner if task.runner is not None
                  else _default_runner("target" in kwargs))
        prediction = runner(variant, model, cluster, seed=task.seed, **kwargs)
        metrics = summarize(prediction)
    except SgdnetError as e:
        failed = True
        metrics = {"error": f"{type(e).__name__}: {' '.join(str(e).split())}"}
    row: dict[str, Any] = {"row_id": task.row_id}
    for k, v in task.params.items():
        row[k] = _display(v)
        row.update(numeric_columns({k: v}))  # "10Gbps" keeps a numeric column beside it
    metrics = {(f"out_{k}" if k in row else k): v for k, v in metrics.items()}
    metrics["seed"] = task.seed
    metrics.setdefault("speed_up", None)
    metrics.setdefault("efficiency", None)
    order = [c for c in METRIC_COLUMNS if c in metrics]
    order += sorted((k for k in metrics if k.startswith("util_")), key=_util_key)
    order += [k for k in metrics if k not in order and k not in _TAIL_COLUMNS]
    order += [k for k in _TAIL_COLUMNS if k in metrics]
    row.update((k, metrics[k]) for k in order)
    return task.index, row, failed


#: How often a wait on the executor looks at a held Ctrl-C (seconds).
_POLL_S = 0.1


def _wait(pending: set[cf.Future], interrupts: Interrupts
          ) -> tuple[set[cf.Future], set[cf.Future]]:
    while True:
        finished, still = cf.wait(pending, timeout=_POLL_S, return_when=cf.FIRST_COMPLETED)
        interrupts.check()
        if finished:
            return finished, still


def _execute(pool: Any, tasks: Iterator[_Task], max_pending: int, interrupts: Interrupts
             ) -> Iterator[tuple[int, dict[str, Any], bool]]:
    """Rows as they finish, in this process (``pool`` None) or on ``pool``; a Ctrl-C held by
    ``interrupts`` is raised between submissions and waits, never inside them."""
    if pool is None:
        for t in tasks:
            with interrupts.live():
                done = _run_task(t)
            yield done
        return
    pending: set[cf.Future] = set()
    try:
        for t in tasks:
            interrupts.check()
            pending.add(pool.submit(_run_task, t))
            if len(pending) >= max_pending:
                finished, pending = _wait(pending, interrupts)
                for f in finished:
                    yield f.result()
        while pending:
            finished, pending = _wait(pending, interrupts)
            for f in finished:
                yield f.result()
    finally:
        for f in pending:
            f.cancel()


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(progress: bool | None, total: int, initial: int, desc: str) -> Any:
    if progress is False:
        return _NoBar()
    if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="cfg", file=sys.stderr,
                dynamic_ncols=True)


def _is_dask_client(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith("distributed") and hasattr(obj, "get_executor")


def _dask_parallelism(client: Any) -> int:
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # pragma: no cover - scheduler unreachable: the submit will say so
        return 1


def _dask_executor(scheduler: str | None, n_jobs: int | None,
                   before_local: Callable[[int], None] | None = None
                   ) -> tuple[Any, Callable[[], None] | None, int]:
    """A Dask executor: on ``scheduler``, on the current client, or on a new ``LocalCluster`` of
    ``n_jobs`` worker processes (all cores by default), ``before_local(n)`` called before it
    starts them."""
    try:
        import distributed
    except ImportError:
        raise StudyError("executor='dask' needs dask.distributed; pip install 'sgdnet[dask]'") \
            from None
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout="10s")
        except Exception as e:
            raise StudyError(f"cannot reach the Dask scheduler {scheduler!r}: "
                             f"{' '.join(str(e).split())}; start one with `dask scheduler` "
                             "or omit --scheduler for a local cluster") from None
        return client.get_executor(pure=False), client.close, _dask_parallelism(client)
    try:
        client = distributed.get_client()
        return client.get_executor(pure=False), None, _dask_parallelism(client)
    except ValueError:
        pass
    n = n_jobs or os.cpu_count() or 1
    if before_local is not None:
        before_local(n)
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)

    def close() -> None:
        client.close()
        cluster.close()

    return client.get_executor(pure=False), close, _dask_parallelism(client)
