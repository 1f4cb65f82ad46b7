"""The :class:`Study`: a grid and/or configurations expanded into rows, run by an executor into
a table (see :mod:`sgdnet.study`).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from .._interrupts import Interrupts
from ..errors import StudyError
from ..limits import check_limit
from .executors import (
    EXECUTORS,
    _dask_executor,
    _dask_parallelism,
    _execute,
    _is_dask_client,
    _progress,
    _Task,
    local_pool,
)
from .rows import _CONFIG_KEYS, _check_keys, _flatten, _speedup, row_id, row_seed, row_target
from .table import StudyResult, TableLock, _TableWriter, resumed_rows, table_path

__all__ = ["Study"]

# ---------------------------------------------------------------------------- the study
def _axis_values(key: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise StudyError(f"grid axis {key!r}: {values!r} must be a list of values; put a single "
                         f"value in fixed= instead")
    vals = list(values)
    if not vals:
        raise StudyError(f"grid axis {key!r} is empty; give at least one value")
    return vals


def _refuse_in_spawned_worker() -> None:
    """A spawned worker runs the parent's script as ``__mp_main__`` before it works: a script
    that runs a local study without a main guard reaches ``Study.run`` there."""
    mp_main = sys.modules.get("__mp_main__")
    if mp_main is not None and mp_main is not sys.modules.get("__main__"):
        raise StudyError(
            f"Study.run(executor='local') was reached while a worker process "
            f"imported the main script {getattr(mp_main, '__file__', '?')!r}: put the "
            "code that runs the study under `if __name__ == '__main__':` (each worker "
            "process of the 'spawn' start method imports the script), or use "
            "executor='serial'")


def _check_expanded_size(data: Any, where: str) -> None:
    """Refuse a config whose nodes, counted with YAML aliases expanded, exceed the
    ``max_config_nodes`` limit (an alias bomb), or that nests deeper than ``max_depth``: the
    check every YAML sgdnet reads gets (:func:`sgdnet._files.check_expanded_size`)."""
    from .._files import check_expanded_size

    check_expanded_size(data, f"study config {where!r}", StudyError)


def _size_key(params: Mapping[str, Any]) -> str:
    """The column a row's speed-up is against: ``nodes`` on an ``instance`` axis (issue #42;
    the 1-node row is the baseline), else ``cluster.workers``."""
    return "nodes" if "instance" in params else "cluster.workers"


def _size(params: Mapping[str, Any]) -> Any:
    return params.get(_size_key(params), 1)


class Study:
    """A batch of predictions: grid (and/or explicit configurations) x replications.

    Parameters
    ----------
    grid : mapping of str to list, optional
        Axes of a full factorial grid: parameter name -> values, expanded in the order given
        (the last axis varies fastest). Names: any :func:`sgdnet.predict` keyword, a Cluster
        field as ``"cluster.<field>"`` (a ``"cluster"`` mapping of axes is flattened),
        ``"model.batch_size"`` / ``"model.speed"`` / ``"model.cv"``, or a time-to-accuracy
        target: ``"target"`` (``"logreg:loss=0.4"``, a mapping of Target fields) and
        ``"target.<field>"`` (``target.loss``, ``target.accuracy``, ``target.lr``...): such a
        row reports the time to it (:func:`sgdnet.accuracy.report.study_runner`; a custom
        runner gets ``target=`` a :class:`sgdnet.accuracy.Target`).
    configs : sequence of mapping, optional
        Explicit configurations; combined with ``grid`` as configs x grid.
    fixed : mapping, optional
        Parameters shared by every row (``{"model": "resnet50", "granularity": "coarse"}``; a
        ``"cluster"`` dict or Cluster is flattened to ``cluster.<field>`` columns).
    replications : int, optional
        Replications per row (passed to predict unless the grid or fixed sets it).
    seed : int
        Study seed (>= 0); row seeds derive from it and the row's parameters.
    common_random_numbers : bool
        Give every row the same seed, so that rows draw the same random numbers for the
        transitions their nets share by name (the same variant on two bandwidths, with and
        without a straggler model): the difference between two rows then carries much less noise
        than with independent seeds (README, "Studies"). Rows with other variants or models
        share fewer names and gain less. Default False: independent rows.
    out : str or path-like, optional
        Default output table for :meth:`run`.
    name : str, optional
        Label of the progress bar.
    runner : callable, optional
        ``runner(variant, model, cluster, *, seed, **kwargs)`` computing one row; default
        :func:`sgdnet.predict`. It must be picklable (a module-level function) for process and
        Dask executors; it may return a Prediction or a flat dict of metrics.
    on_error : {"record", "raise"}
        What to do when a row raises an :class:`~sgdnet.SgdnetError`: record it in the
        ``error`` column (default) or stop the study with a :class:`~sgdnet.StudyError`.

    Raises
    ------
    StudyError
        Unknown parameter names, empty axes, a ``seed`` in the grid, duplicate configurations,
        unknown variants or models (default runner), a bad ``on_error``.

    Examples
    --------
    >>> s = Study(grid={"cluster.workers": [1, 2]}, fixed={"variant": "sync-ps",
    ...           "model": "resnet50"}, seed=3)
    >>> [c["cluster.workers"] for c in s.configs()]
    [1, 2]
    """

    def __init__(self, grid: Mapping[str, Sequence[Any]] | None = None, *,
                 configs: Sequence[Mapping[str, Any]] | None = None,
                 fixed: Mapping[str, Any] | None = None, replications: int | None = None,
                 seed: int = 0, out: str | os.PathLike | None = None, name: str | None = None,
                 runner: Callable[..., Any] | None = None, on_error: str = "record",
                 common_random_numbers: bool = False):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise StudyError(f"Study seed={seed!r} must be an integer >= 0 (row seeds derive from "
                             "it, so a study is reproducible and resumable)")
        if replications is not None and (isinstance(replications, bool)
                                         or not isinstance(replications, int) or replications < 1):
            raise StudyError(f"Study replications={replications!r} must be an integer >= 1")
        if on_error not in ("record", "raise"):
            raise StudyError(f"Study on_error={on_error!r}: use 'record' (an error column) or "
                             "'raise' (stop the study)")
        if runner is not None and not callable(runner):
            raise StudyError(f"Study runner={runner!r} is not callable; give a function "
                             "runner(variant, model, cluster, *, seed, **kwargs)")
        if not isinstance(common_random_numbers, bool):
            raise StudyError(f"Study common_random_numbers={common_random_numbers!r} must be "
                             "True or False")
        self.seed = seed
        self.common = common_random_numbers
        self.replications = replications
        if out is not None and not isinstance(out, (str, os.PathLike)):
            raise StudyError(f"Study out={out!r:.80} must be a file path (str or Path) or None")
        self.out = None if out is None else Path(out)
        self.name = name or "study"
        self.runner = runner
        self.on_error = on_error
        for what, value in (("grid", grid), ("fixed", fixed)):
            if value is not None and not isinstance(value, Mapping):
                raise StudyError(f"Study {what}={value!r:.80} must be a mapping of parameter name "
                                 "-> values, e.g. {'cluster.workers': [1, 2, 4]}")
        if configs is not None and (isinstance(configs, (str, bytes, Mapping))
                                    or not isinstance(configs, Sequence)):
            raise StudyError(f"Study configs={configs!r:.80} must be a list of mappings")
        self.fixed = _flatten(dict(fixed or {}), "fixed")
        grid_in = dict(grid or {})
        if "cluster" in grid_in and isinstance(grid_in["cluster"], Mapping):
            sub = grid_in.pop("cluster")
            grid_in.update({f"cluster.{k}": v for k, v in sub.items()})
        self.grid = {k: _axis_values(k, v) for k, v in grid_in.items()}
        for i, c in enumerate(configs or []):
            if not isinstance(c, Mapping):
                raise StudyError(f"Study configs[{i}]={c!r:.80} must be a mapping of parameter "
                                 "name -> value, e.g. {'variant': 'sync-ps'}")
        self.explicit = [_flatten(dict(c), f"configs[{i}]") for i, c in enumerate(configs or [])]
        if configs is not None and not self.explicit:
            raise StudyError("Study configs=[] has no configuration; give at least one or omit it")
        _check_keys(self.fixed, "fixed")
        _check_keys({k: None for k in self.grid}, "grid")
        for i, c in enumerate(self.explicit):
            _check_keys(c, f"configs[{i}]")
        n_rows = len(self.explicit or [{}])
        for v in self.grid.values():
            n_rows *= len(v)
        check_limit("Study rows (configs x the grid's axes)", n_rows, "max_study_rows",
                    error=StudyError)  # before a million dicts are built
        self._configs = self._expand()
        self._ids = [row_id(c, seed, self.common) for c in self._configs]
        dup = len(set(self._ids)) != len(self._ids)
        if dup:
            seen: dict[str, int] = {}
            for i, rid in enumerate(self._ids):
                if rid in seen:
                    raise StudyError(f"Study configurations {seen[rid]} and {i} are identical "
                                     f"({self._configs[i]}); remove the duplicate")
                seen[rid] = i
        if runner is None:
            self._check_names()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> Study:
        """A study from a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file.

        Keys: ``grid`` (axes), ``configs`` (list), ``fixed``, ``replications``, ``seed``,
        ``out`` (relative to the file's directory), ``name``, ``on_error``,
        ``common_random_numbers``. Example::

            seed: 1
            replications: 4
            out: results.csv
            fixed: {model: resnet50, granularity: coarse, steps: 300}
            grid:
              variant: [sync-ps, allreduce]
              cluster.workers: [1, 2, 4, 8]
              cluster.bandwidth: [1Gbps, 10Gbps]

        Parameters
        ----------
        path : str or path-like
        **overrides
            Keyword arguments of :class:`Study` that win over the file (e.g. ``runner``).

        Raises
        ------
        StudyError
            Missing file, a syntax error (with the parser's message), unknown keys, bad values.
        """
        p = Path(path)
        if not p.is_file():
            raise StudyError(f"study config {str(p)!r} does not exist")
        suffix = p.suffix.lower()
        size = p.stat().st_size
        check_limit(f"study config {str(p)!r}: size", size, "max_file_bytes", error=StudyError)
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise StudyError(f"study config {str(p)!r} is not UTF-8 text ({e.reason} at byte "
                             f"{e.start}); save it as UTF-8") from None
        try:
            if suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            elif suffix == ".toml":
                import tomllib

                data = tomllib.loads(text)
            else:
                raise StudyError(f"study config {str(p)!r}: unknown format {suffix!r}; use .yaml, "
                                 ".yml or .toml")
        except StudyError:
            raise
        except Exception as e:  # yaml.YAMLError, tomllib.TOMLDecodeError
            msg = " ".join(str(e).split())
            raise StudyError(f"study config {str(p)!r} does not parse: {msg}") from None
        _check_expanded_size(data, str(p))
        if not isinstance(data, Mapping):
            raise StudyError(f"study config {str(p)!r} must be a mapping with 'grid' and/or "
                             "'configs' (and optionally fixed, replications, seed, out)")
        bad = sorted(set(data) - _CONFIG_KEYS)
        if bad:
            raise StudyError(f"study config {str(p)!r}: unknown key(s) {bad}; valid keys are "
                             f"{sorted(_CONFIG_KEYS)}")
        if "grid" not in data and "configs" not in data:
            raise StudyError(f"study config {str(p)!r} has neither 'grid' nor 'configs'; give at "
                             "least one")
        kw: dict[str, Any] = {k: data[k] for k in ("grid", "configs", "fixed", "replications",
                                                    "name", "on_error", "common_random_numbers")
                              if k in data}
        if "seed" in data:
            kw["seed"] = data["seed"]
        if data.get("out") is not None:
            out = Path(str(data["out"]))
            kw["out"] = out if out.is_absolute() else p.parent / out
        for k in ("grid", "fixed"):
            if k in kw and kw[k] is not None and not isinstance(kw[k], Mapping):
                raise StudyError(f"study config {str(p)!r}: '{k}' must be a mapping, got "
                                 f"{kw[k]!r}")
        if "configs" in kw and (isinstance(kw["configs"], (str, Mapping))
                                or not isinstance(kw["configs"], list)):
            raise StudyError(f"study config {str(p)!r}: 'configs' must be a list of mappings")
        kw.update(overrides)
        return cls(**kw)

    def _expand(self) -> list[dict[str, Any]]:
        keys = list(self.grid)
        product = [dict(zip(keys, vals)) for vals in itertools.product(*self.grid.values())]
        bases = self.explicit or [{}]
        out = []
        for base in bases:
            for point in product:
                cfg = dict(self.fixed)
                cfg.update(base)
                cfg.update(point)
                if self.replications is not None:
                    cfg.setdefault("replications", self.replications)
                out.append(cfg)
        return out

    def _check_names(self) -> None:
        """Unknown variants and models fail before anything runs (default runner only)."""
        from .. import models

        for c in self._configs:  # a list or dict where a name belongs
            for key in ("variant", "model"):
                v = c.get(key)
                if not (v is None or isinstance(v, str) or (key == "model"
                                                             and hasattr(v, "layers"))):
                    raise StudyError(f"Study {key}={v!r:.80} must be a name (str)"
                                     + (" or a ModelProfile" if key == "model" else ""))
        for c in self._configs:  # a target that does not parse fails here, not row by row
            row_target(c)
        variants_seen = {c.get("variant") for c in self._configs}
        models_seen = {c.get("model") for c in self._configs}
        try:
            from .. import variants

            known = variants.names()
        except (ImportError, AttributeError):  # no registry: the rows will say what is wrong
            known = None
        if known is not None:
            for v in variants_seen:
                if isinstance(v, str) and v not in known:
                    raise StudyError(f"unknown variant {v!r} in the study; known variants are "
                                     f"{', '.join(known)}")
        known_models = models.names()
        for m in models_seen:
            if isinstance(m, str) and m.strip().lower() not in known_models and not (
                    m.endswith(".json") and Path(m).is_file()):
                raise StudyError(f"unknown model {m!r} in the study; built-in models are "
                                 f"{', '.join(known_models)} (or give a profile .json path)")

    # ------------------------------------------------------------------ views
    def configs(self) -> list[dict[str, Any]]:
        """The flat parameters of every row, in grid order (copies)."""
        return [dict(c) for c in self._configs]

    @property
    def param_names(self) -> list[str]:
        """The parameter columns, in first-seen order over the configurations."""
        return list(dict.fromkeys(k for c in self._configs for k in c))

    def row_ids(self) -> list[str]:
        """The ``row_id`` of every row, in grid order."""
        return list(self._ids)

    def seeds(self) -> list[int]:
        """The seed of every row, in grid order."""
        return [row_seed(c, self.seed, self.common) for c in self._configs]

    def __len__(self) -> int:
        return len(self._configs)

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}x{len(v)}" for k, v in self.grid.items()) or "no grid"
        crn = ", common random numbers" if self.common else ""
        return f"Study({len(self)} rows: {axes}; seed={self.seed}{crn})"

    # ------------------------------------------------------------------ running
    def run(self, executor: Any = "local", *, out: str | os.PathLike | None = None,
            n_jobs: int | None = None, scheduler: str | None = None,
            progress: bool | None = None, resume: bool = True, retry_errors: bool = False,
            max_pending: int | None = None, mp_context: str = "spawn") -> StudyResult:
        """Run the rows not already in ``out`` and return the whole table.

        Parameters
        ----------
        executor : {"local", "serial", "dask"} or concurrent.futures.Executor or dask Client
            Where rows run (see the module docstring). An Executor or Client passed in is used
            as is and not shut down.
        out : str or path-like, optional
            Table file (``.csv`` or ``.jsonl``); default the study's ``out``. ``None``: rows are
            only kept in memory.
        n_jobs : int, optional
            Processes of the ``"local"`` executor (default: all cores) or workers of a new Dask
            ``LocalCluster``.
        scheduler : str, optional
            Dask scheduler address (``"tcp://host:8786"``) for ``executor="dask"``.
        progress : bool, optional
            Show a tqdm progress bar on stderr (default: only when stderr is a terminal).
        resume : bool
            Keep the rows already in ``out`` (by ``row_id``) and run only the missing ones;
            ``False`` starts the file afresh.
        retry_errors : bool
            Also rerun rows recorded with an error.
        max_pending : int, optional
            Rows submitted ahead of completion (default ``4 x`` parallelism).
        mp_context : str
            Start method of the local processes (``"spawn"``, ``"forkserver"`` or ``"fork"``).

        Returns
        -------
        StudyResult

        Raises
        ------
        StudyError
            Bad executor or output path, or a failing row with ``on_error="raise"``.
        """
        t_start = time.perf_counter()
        out_file = table_path(out, self.out)
        lock = None
        if out_file is not None:
            if executor == "local":
                _refuse_in_spawned_worker()  # before the lock, which the parent holds
            lock = TableLock(out_file).acquire()  # held until the table is closed, below
        try:
            return self._run_locked(executor, out_file, n_jobs, scheduler, progress, resume,
                                    retry_errors, max_pending, mp_context, t_start)
        finally:
            if lock is not None:
                lock.release()

    def pending(self, out: str | os.PathLike | None = None, *, resume: bool = True,
                retry_errors: bool = False) -> int:
        """How many rows :meth:`run` with the same ``out``, ``resume`` and ``retry_errors`` would
        compute (the others are already in the table), e.g. to skip a compile when none is left.

        Parameters
        ----------
        out : str or path-like, optional
            Table file; default the study's ``out`` (``None``: every row is pending).
        resume, retry_errors : bool
            As in :meth:`run`.

        Returns
        -------
        int
        """
        done, _ = resumed_rows(table_path(out, self.out), self._ids, resume, retry_errors)
        return len(self._ids) - len(done)

    def _run_locked(self, executor: Any, out_path: Path | None, n_jobs: int | None,
                    scheduler: str | None, progress: bool | None, resume: bool,
                    retry_errors: bool, max_pending: int | None, mp_context: str,
                    t_start: float) -> StudyResult:
        """:meth:`run` once the output table is locked."""
        ids = self._ids
        done, kept = resumed_rows(out_path, ids, resume, retry_errors)
        writer = None
        # rows kept from an interrupted run while their 1-worker baseline is still to run get
        # their speed-up when it arrives (and are written again then, so not written now)
        waiting: dict[str, list[dict[str, Any]]] = {}
        for rid, r in done.items():
            base_id = self._baseline_key(self._configs[self._index[rid]])
            if base_id is not None and base_id in self._index and base_id not in done:
                waiting.setdefault(base_id, []).append(r)
        parked = {r["row_id"] for rs in waiting.values() for r in rs}
        if out_path is not None:
            writer = _TableWriter(out_path, [*kept, *(r for rid, r in done.items() if rid not in parked)],
                                  self.param_names)
        todo = [i for i, rid in enumerate(ids) if rid not in done]
        # speed-up baselines (one worker) first, so dependants rarely wait for theirs
        todo.sort(key=lambda i: (_size(self._configs[i]) != 1, i))
        rows: dict[str, dict[str, Any]] = dict(done)
        ran = 0
        failures: list[str] = []
        try:
            bar = _progress(progress, len(ids), len(done), self.name)
            pool, owned, parallel = self._executor(executor, n_jobs, scheduler, mp_context,
                                                   bool(todo))
            try:
                threads = None if pool is None else 1
                tasks = (_Task(i, ids[i], self._configs[i],
                               row_seed(self._configs[i], self.seed, self.common), self.runner,
                               threads) for i in todo)
                # Ctrl-C acts between rows (or inside a row computed here), never inside the
                # executor's machinery, which it could leave unable to shut down
                with Interrupts().held() as interrupts:
                    for _, row, failed in _execute(pool, tasks, max_pending or 4 * parallel,
                                                   interrupts):
                        ran += 1
                        if failed:
                            failures.append(row["error"])
                            if self.on_error == "raise":
                                params = {k: row[k] for k in self._configs[0] if k in row}
                                raise StudyError(f"study row {row['row_id']} {params}: "
                                                 f"{row['error']}")
                        for ready in self._release(row, rows, waiting):
                            if writer is not None:
                                writer.append(ready)
                        bar.update(1)
            except BrokenProcessPool as e:
                n_kept = len(set(rows) | {r["row_id"] for v in waiting.values() for r in v})
                kept = f"the {n_kept} finished rows are in {str(out_path)!r} and a rerun " \
                    "resumes" if out_path is not None else "pass out= to keep finished rows"
                raise StudyError(
                    f"a worker process of the local executor died ({' '.join(str(e).split())}): "
                    "it was killed (out of memory?) or could not start - a script that runs a "
                    "study must do so under `if __name__ == '__main__':`, because each worker "
                    f"process imports the script; {kept}") from None
            finally:
                bar.close()
                if owned is not None:
                    owned()
        finally:
            # rows still waiting for a baseline that failed, is absent, or was not reached
            # because the run stopped (Ctrl-C, a dead worker, on_error="raise"): keep them
            # without a speed-up; a resumed run fills it in when the baseline finishes
            for pending in waiting.values():
                for r in pending:
                    rows[r["row_id"]] = r
                    if writer is not None:
                        writer.append(r)
            if writer is not None:
                writer.close()
        ordered = [rows[rid] for rid in ids if rid in rows]
        return StudyResult(ordered, ran, len(done), out_path, time.perf_counter() - t_start,
                           self.param_names)

    def _baseline_key(self, params: Mapping[str, Any]) -> str | None:
        key = _size_key(params)  # cluster.workers, or nodes of an instance
        if _size(params) == 1 and "cluster.speeds" not in params:
            return None
        rest = {k: v for k, v in params.items() if k not in (key, "cluster.speeds")}
        return row_id({**rest, key: 1}, self.seed, self.common)

    def _release(self, row: dict[str, Any], rows: dict[str, dict[str, Any]],
                 waiting: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Fill speed-up/efficiency of ``row`` (and of rows waiting for it); return rows ready."""
        ready = []
        params = self._configs[self._index[row["row_id"]]]
        base_id = self._baseline_key(params)
        if base_id is None:  # one worker: its own baseline
            _speedup(row, row, 1)
            rows[row["row_id"]] = row
            ready.append(row)
            for dep in waiting.pop(row["row_id"], []):
                _speedup(dep, row, dep.get(_size_key(dep), 1))
                rows[dep["row_id"]] = dep
                ready.append(dep)
        elif base_id in rows or base_id not in self._index:
            _speedup(row, rows.get(base_id), _size(params))
            rows[row["row_id"]] = row
            ready.append(row)
        else:
            waiting.setdefault(base_id, []).append(row)
        return ready

    @property
    def _index(self) -> dict[str, int]:
        idx = getattr(self, "_index_cache", None)
        if idx is None:
            idx = {rid: i for i, rid in enumerate(self._ids)}
            self._index_cache = idx
        return idx

    def _kernel_once(self, n: int, todo: bool) -> None:
        """Before ``n`` local worker processes start: with the default runner (it simulates),
        two or more processes and rows to compute, have the kernel in numba's cache, compiled here
        once on a cold cache instead of once in every worker at its first row."""
        if n > 1 and self.runner is None and todo:
            from ..engine.api import ensure_kernel

            ensure_kernel()

    def _executor(self, executor: Any, n_jobs: int | None, scheduler: str | None,
                  mp_context: str, todo: bool = True) -> tuple[Any, Callable[[], None] | None, int]:
        """``(executor or None for serial, shutdown callable or None, parallelism)``; ``todo``:
        rows are left to compute."""
        if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int)
                                   or n_jobs < 1):
            raise StudyError(f"n_jobs={n_jobs!r} must be an integer >= 1 (processes)")
        cores = os.cpu_count() or 1
        if isinstance(executor, str):
            if executor == "serial":
                return None, None, 1
            if executor == "local":
                import multiprocessing

                _refuse_in_spawned_worker()
                try:
                    ctx = multiprocessing.get_context(mp_context)
                except ValueError:
                    raise StudyError(f"mp_context={mp_context!r} is not a start method; use "
                                     "'spawn', 'forkserver' or 'fork'") from None
                n = n_jobs or cores
                self._kernel_once(n, todo)
                pool = local_pool(n, ctx)
                return pool, lambda: pool.shutdown(wait=True, cancel_futures=True), n
            if executor == "dask":
                return _dask_executor(scheduler, n_jobs, lambda n: self._kernel_once(n, todo))
            raise StudyError(f"unknown executor {executor!r}; use one of {list(EXECUTORS)}, a "
                             "concurrent.futures.Executor or a dask.distributed Client")
        if _is_dask_client(executor):
            return executor.get_executor(pure=False), None, _dask_parallelism(executor)
        if isinstance(executor, cf.Executor):
            n = getattr(executor, "_max_workers", None) or n_jobs or cores
            return executor, None, int(n)
        raise StudyError(f"executor {executor!r} is not supported; use one of {list(EXECUTORS)}, "
                         "a concurrent.futures.Executor or a dask.distributed Client")
