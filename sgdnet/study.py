"""Batch studies: a parameter grid x replications, run anywhere, streamed into one tidy table.

A :class:`Study` expands a grid (and/or an explicit list of configurations) over any
:func:`sgdnet.predict` keyword (``variant``, ``model``, ``granularity``, ``steps``,
``replications``, variant options such as ``staleness``...), any :class:`~sgdnet.Cluster` field
as ``cluster.<field>`` (``cluster.workers``, ``cluster.bandwidth``, ``cluster.straggler`` given
as a straggler spec dict or string) and the model fields ``model.batch_size``, ``model.speed``
and ``model.cv``. Every configuration becomes one row of a tidy table::

    >>> from sgdnet import Study
    >>> study = Study(grid={"variant": ["sync-ps", "allreduce"],
    ...                     "cluster.workers": [1, 2, 4, 8]},
    ...               fixed={"model": "resnet50", "granularity": "coarse"},
    ...               replications=4, seed=1)
    >>> len(study)
    8
    >>> result = study.run(out="scaling.csv")            # doctest: +SKIP
    >>> result.frame()                                   # doctest: +SKIP

Determinism
    Each row's seed is derived from the study ``seed`` and the row's parameters (a SHA-256 of
    their canonical JSON fed to :class:`numpy.random.SeedSequence`), never from its position or
    from which process ran it. So the serial, local-process and Dask executors produce
    identical rows, adding an axis value does not change the other rows, and a row can be
    replayed alone with ``sgdnet.predict(..., seed=row["seed"])``.

Streaming and resume
    Rows are appended to ``out`` (CSV, or JSON Lines for ``.jsonl``/``.ndjson``/``.json``) and
    flushed as they arrive, in completion order. Every row carries a ``row_id`` (a hash of the
    parameters and the study seed); rerunning a study on an existing file skips the rows already
    there (a torn last line from a killed run is dropped) and runs only the missing ones. A row
    that finished before its 1-worker baseline is written when the baseline arrives, or, if the
    run stops first, without its speed-up, which the resumed run fills in. Rows
    whose simulation raised an :class:`~sgdnet.SgdnetError` are recorded with an ``error``
    column (``on_error="record"``, the default) and count as done; ``retry_errors=True`` reruns
    them.

Executors
    ``"local"`` (default): a :class:`~concurrent.futures.ProcessPoolExecutor` over all cores,
    each process running its simulations on one Numba thread (parallelism is across rows).
    ``"serial"``: in this process. ``"dask"``: a ``dask.distributed`` cluster (the ``[dask]``
    extra), given by ``scheduler="tcp://host:8786"``, or the current default client, or else a
    new ``LocalCluster``. A :class:`concurrent.futures.Executor` or a
    ``dask.distributed.Client`` may also be passed in directly. Dask and pandas are imported
    only when used.

Row columns
    The parameters (grid keys as column names, non-scalar values as compact JSON), then
    ``seed`` (the row seed), ``n`` (replications), ``steps_per_s_mean``, ``steps_per_s_lo`` /
    ``steps_per_s_hi`` (95% CI across replications), ``steps_per_s_std``,
    ``steps_per_s_p05`` / ``_p50`` / ``_p95`` (quantiles of the per-replication throughputs),
    ``samples_per_s_mean`` / ``_lo`` / ``_hi``, ``speed_up`` and ``efficiency`` (against the
    row of the same study that differs only by ``cluster.workers == 1``; empty when the study has
    no such row), ``util_<kind>_mean`` / ``util_<kind>_max`` (mean utilisation of the resources
    of each kind — ``gpu``, ``nic_up``, ``nic_down``, ``ps_cpu``... — averaged and maximised
    over resources), ``seeds`` (JSON list of per-replication seeds) and ``error``.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from .errors import SgdnetError, StudyError

__all__ = ["Study", "StudyResult", "read_table", "summarize", "row_seed", "row_id",
           "EXECUTORS", "METRIC_COLUMNS"]

#: Executor names understood by :meth:`Study.run` (besides Executor / Client objects).
EXECUTORS = ("local", "serial", "dask")

#: Fixed metric columns of a row, in table order (``util_*`` columns follow ``efficiency``).
METRIC_COLUMNS = (
    "seed", "n",
    "steps_per_s_mean", "steps_per_s_lo", "steps_per_s_hi", "steps_per_s_std",
    "steps_per_s_p05", "steps_per_s_p50", "steps_per_s_p95",
    "samples_per_s_mean", "samples_per_s_lo", "samples_per_s_hi",
    "speed_up", "efficiency",
)
_TAIL_COLUMNS = ("seeds", "error")
_METRIC_SET = set(METRIC_COLUMNS)
_RESERVED = {"row_id", "seed", "runner", *METRIC_COLUMNS, *_TAIL_COLUMNS}
_TOP_KEYS = {"variant", "model", "cluster"}
_MODEL_FIELDS = ("batch_size", "speed", "cv")
_CONFIG_KEYS = {"grid", "configs", "fixed", "replications", "seed", "out", "name", "on_error"}
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


# ---------------------------------------------------------------------------- parameters
def _cluster_fields() -> list[str]:
    from .workload.cluster import Cluster

    return [f.name for f in dataclasses.fields(Cluster)]


def _canon(value: Any, where: str) -> Any:
    """JSON-able canonical form of a parameter value (used for row keys and seeds)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return float(value)
    if hasattr(value, "item") and callable(value.item) and not hasattr(value, "__len__"):
        return _canon(value.item(), where)  # numpy scalars
    if isinstance(value, Mapping):
        return {str(k): _canon(v, where) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canon(v, where) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _canon(to_dict(), where)
    raise StudyError(f"{where}: value {value!r} of type {type(value).__name__} cannot be part of a "
                     "study; give numbers, strings, lists or dicts (or objects with to_dict())")


def _display(value: Any) -> Any:
    """A scalar for the tidy table: scalars as they are, named objects by name, rest as JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "layers"):
        return name  # a ModelProfile
    return json.dumps(_canon(value, "value"), sort_keys=True, separators=(",", ":"))


def _flatten(params: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Normalise a configuration: ``cluster`` dicts/objects become ``cluster.<field>`` keys."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise StudyError(f"{where}: parameter name {key!r} must be a string")
        if key == "cluster" and value is not None:
            if isinstance(value, Mapping):
                items = dict(value)
            elif hasattr(value, "to_dict") and dataclasses.is_dataclass(value):
                from .workload.cluster import Cluster

                default = Cluster().to_dict()
                items = {k: getattr(value, k) for k, v in value.to_dict().items()
                         if v != default.get(k)}
            else:
                raise StudyError(f"{where}: cluster={value!r} must be a dict of Cluster fields or a "
                                 "Cluster; or vary single fields as 'cluster.<field>'")
            for k, v in items.items():
                out[f"cluster.{k}"] = v
        else:
            out[key] = value
    return out


def _check_keys(params: Mapping[str, Any], where: str) -> None:
    fields = None
    for key in params:
        if not _KEY_RE.match(key):
            raise StudyError(f"{where}: {key!r} is not a parameter name; use a predict keyword "
                             "('variant', 'steps', ...), 'cluster.<field>' or 'model.<field>'")
        if key in _RESERVED:
            hint = ("the study derives each row's seed from Study(seed=...)" if key == "seed"
                    else "it is a column the study computes")
            raise StudyError(f"{where}: {key!r} cannot be a study parameter ({hint})")
        head, _, field = key.partition(".")
        if not field:
            continue
        if head == "cluster":
            fields = fields or _cluster_fields()
            if field not in fields:
                raise StudyError(f"{where}: 'cluster.{field}' is not a Cluster field; fields are "
                                 f"{', '.join(fields)}")
        elif head == "model":
            if field not in _MODEL_FIELDS:
                raise StudyError(f"{where}: 'model.{field}' cannot be varied; model fields are "
                                 f"{', '.join('model.' + f for f in _MODEL_FIELDS)}")
        else:
            raise StudyError(f"{where}: {key!r}: dotted names must start with 'cluster.' or "
                             "'model.'")


def _canon_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def row_id(params: Mapping[str, Any], study_seed: int) -> str:
    """The key of a row: 16 hex digits of SHA-256 over its canonical parameters and study seed.

    Parameters
    ----------
    params : mapping
        Flat parameters of the row (as in :meth:`Study.configs`).
    study_seed : int
        The study seed.

    Returns
    -------
    str
    """
    text = _canon_json({"params": _canon(dict(params), "row"), "study_seed": int(study_seed)})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def row_seed(params: Mapping[str, Any], study_seed: int) -> int:
    """Seed of a row, a deterministic function of its parameters and the study seed.

    ``SeedSequence([study_seed, *sha256(canonical JSON of params) as 8 uint32 words])`` gives a
    63-bit integer; the position of the row in the grid and the executor play no part.

    Parameters
    ----------
    params : mapping
        Flat parameters of the row.
    study_seed : int
        The study seed (>= 0).

    Returns
    -------
    int
        In ``[0, 2**63)``.
    """
    import numpy as np

    digest = hashlib.sha256(_canon_json(_canon(dict(params), "row")).encode()).digest()
    words = [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4)]
    ss = np.random.SeedSequence([int(study_seed), *words])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


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
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_numba_threads(1)
    try:
        from .engine import driver
    except ImportError:  # pragma: no cover - engine not installed
        return
    driver.set_max_threads(1)


def _build_call(params: Mapping[str, Any]) -> tuple[Any, Any, Any, dict]:
    """``(variant, model, cluster, kwargs)`` for the runner from flat parameters."""
    kwargs: dict[str, Any] = {}
    cluster_kw: dict[str, Any] = {}
    model_kw: dict[str, Any] = {}
    for key, value in params.items():
        head, _, field = key.partition(".")
        if head == "cluster" and field:
            cluster_kw[field] = value
        elif head == "model" and field:
            model_kw[field] = value
        elif key not in _TOP_KEYS:
            kwargs[key] = value
    variant = params.get("variant")
    model = params.get("model")
    if variant is None:
        raise StudyError("study row has no 'variant'; put it in the grid or in fixed "
                         "(e.g. fixed={'variant': 'sync-ps'})")
    if model is None:
        raise StudyError("study row has no 'model'; put it in the grid or in fixed "
                         "(e.g. fixed={'model': 'resnet50'})")
    if model_kw:
        model = _modified_model(model, model_kw)
    from .workload.cluster import Cluster

    if "straggler" in cluster_kw and cluster_kw["straggler"] is not None:
        from .workload.stragglers import from_spec

        cluster_kw["straggler"] = from_spec(cluster_kw["straggler"])
    if "speeds" in cluster_kw and isinstance(cluster_kw["speeds"], list):
        cluster_kw["speeds"] = tuple(cluster_kw["speeds"])
    cluster = Cluster(**cluster_kw)
    return variant, model, cluster, kwargs


def _modified_model(model: Any, fields: Mapping[str, Any]) -> Any:
    from .workload.profile import ModelProfile

    if not isinstance(model, ModelProfile):
        from . import models

        model = models.load(model)
    if "batch_size" in fields or "speed" in fields:
        model = model.scaled(batch_size=fields.get("batch_size"), speed=fields.get("speed", 1.0))
    if "cv" in fields:
        model = ModelProfile(model.name, model.layers, model.batch_size, model.device,
                             model.source, fields["cv"], model.meta)
    return model


def _default_runner() -> Callable[..., Any]:
    """:func:`sgdnet.predict`, the runner of a study that names none (imported when a row runs,
    so importing the study layer does not import the engine)."""
    from .prediction import predict

    return predict


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def summarize(prediction: Any, *, level: float = 0.95,
              quantiles: Sequence[float] = (0.05, 0.5, 0.95)) -> dict[str, Any]:
    """Flatten what a runner returned into the metric columns of a study row.

    A mapping is taken as already-flat metric columns (for custom runners; lists and dicts
    become canonical JSON text); anything else is a :class:`~sgdnet.Prediction` flattened by
    :func:`sgdnet.prediction.summarize` (``level``: confidence level of the ``_lo`` / ``_hi``
    columns; ``quantiles`` of the per-replication steps/s, ``steps_per_s_pNN``).
    """
    if isinstance(prediction, Mapping):
        out = {}
        for k, v in prediction.items():
            if isinstance(v, (list, tuple, dict)):
                v = json.dumps(_canon(v, k), separators=(",", ":"))
            elif v is not None and not isinstance(v, (bool, int, float, str)):
                v = _finite(v)
            out[str(k)] = v
        return out
    from .prediction import summarize as flatten

    return flatten(prediction, level=level, quantiles=quantiles)


def _run_task(task: _Task) -> tuple[int, dict[str, Any], bool]:
    """Compute one row in whatever process runs it. Returns ``(index, row, failed)``.

    A :class:`SgdnetError` from the runner becomes an ``error`` column; anything else
    propagates (a bug must not be recorded as a result).
    """
    _set_numba_threads(task.numba_threads)
    failed = False
    try:
        variant, model, cluster, kwargs = _build_call(task.params)
        runner = task.runner if task.runner is not None else _default_runner()
        prediction = runner(variant, model, cluster, seed=task.seed, **kwargs)
        metrics = summarize(prediction)
    except SgdnetError as e:
        failed = True
        metrics = {"error": f"{type(e).__name__}: {' '.join(str(e).split())}"}
    row: dict[str, Any] = {"row_id": task.row_id}
    for k, v in task.params.items():
        row[k] = _display(v)
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


# ---------------------------------------------------------------------------- files
def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    raise StudyError(f"study output {str(path)!r}: unknown format {suffix or '(no suffix)'!r}; "
                     "use a .csv file or JSON Lines (.jsonl, .ndjson, .json)")


_INT_RE = re.compile(r"^[-+]?\d+$")
_TEXT_COLUMNS = {"row_id", "seeds", "error"}


def _from_csv(key: str, text: str) -> Any:
    if key in _TEXT_COLUMNS:
        return text if text != "" else None
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if _INT_RE.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a study table written by :meth:`Study.run` (CSV or JSON Lines).

    A torn last line (a run killed while writing) is skipped; CSV cells are converted back to
    ``int`` / ``float`` / ``bool`` / ``None`` where they look like one.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of dict

    Raises
    ------
    StudyError
        Unknown file format, or a file that is not a study table (no ``row_id`` column).
    """
    p = Path(path)
    fmt = _format_of(p)
    if not p.exists():
        raise StudyError(f"study table {str(p)!r} does not exist")
    rows: list[dict[str, Any]] = []
    text = p.read_text(encoding="utf-8")
    if not text.strip():
        return rows
    if fmt == "jsonl":
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1 and not text.endswith("\n"):
                    break  # torn last line
                raise StudyError(f"study table {str(p)!r}: line {i + 1} is not JSON; fix or "
                                 "delete it (or start a new table)") from None
            if not isinstance(row, dict) or "row_id" not in row:
                raise StudyError(f"study table {str(p)!r}: line {i + 1} is not a study row "
                                 "(no 'row_id'); pass another out= path")
            rows.append(row)
        return rows
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader)
    except StopIteration:
        return rows
    if "row_id" not in header:
        raise StudyError(f"study table {str(p)!r} has no 'row_id' column, so it was not written by "
                         "a Study; pass another out= path")
    records = list(reader)
    for i, rec in enumerate(records):
        if len(rec) != len(header):
            if i == len(records) - 1:
                break  # torn last line
            raise StudyError(f"study table {str(p)!r}: row {i + 2} has {len(rec)} cells, header "
                             f"has {len(header)}; fix or delete it")
        rows.append({k: _from_csv(k, v) for k, v in zip(header, rec)})
    if rows and not text.endswith("\n"):
        # the last record parsed but may be cut inside its last cell: trust only complete lines
        rows.pop()
    return rows


def _util_key(col: str) -> tuple[str, int, str]:
    base, _, stat = col.rpartition("_")
    return (base, {"mean": 0, "max": 1}.get(stat, 2), stat)


def _order_columns(columns: Iterable[str], params: Sequence[str]) -> list[str]:
    """Table order: row_id, parameters, fixed metrics, utilisations, other metrics, seeds, error."""
    cols = list(dict.fromkeys(columns))
    present = set(cols)
    pset = set(params)
    head = [c for c in ("row_id",) if c in present]
    par = [c for c in params if c in present]
    par += [c for c in cols if c not in pset and c not in _METRIC_SET and c != "row_id"
            and not c.startswith("util_") and c not in _TAIL_COLUMNS and "." in c]
    metrics = [c for c in METRIC_COLUMNS if c in present]
    utils = sorted((c for c in cols if c.startswith("util_")), key=_util_key)
    placed = set(head) | set(par) | set(metrics) | set(utils) | set(_TAIL_COLUMNS)
    extra = [c for c in cols if c not in placed]
    tail = [c for c in _TAIL_COLUMNS if c in present]
    return head + par + metrics + utils + extra + tail


class _TableWriter:
    """Append rows to a CSV / JSON Lines file, flushing each; extends the CSV header on need."""

    def __init__(self, path: Path, rows: list[dict[str, Any]], params: Sequence[str]):
        self.path = path
        self.params = list(params)
        self.format = _format_of(path)
        self.columns: list[str] = []
        self._fh = None
        self.rewrite(rows)

    def _merge_columns(self, row: Mapping[str, Any]) -> bool:
        new = [k for k in row if k not in self.columns]
        if not new:
            return False
        self.columns = _order_columns([*self.columns, *new], self.params)
        return True

    def rewrite(self, rows: Iterable[dict[str, Any]]) -> None:
        """Write ``rows`` to the file from scratch (atomically) and reopen it for appending."""
        rows = list(rows)
        for r in rows:
            self._merge_columns(r)
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            if self.format == "csv":
                if self.columns:
                    w = csv.DictWriter(fh, fieldnames=self.columns, lineterminator="\n")
                    w.writeheader()
                    for r in rows:
                        w.writerow(r)
            else:
                for r in rows:
                    fh.write(json.dumps(r, allow_nan=False) + "\n")
        os.replace(tmp, self.path)
        self._rows = rows
        self._fh = open(self.path, "a", encoding="utf-8", newline="")

    def append(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to the operating system."""
        if self.format == "csv" and self._merge_columns(row):
            self.rewrite([*self._rows, row])
            return
        self._rows.append(row)
        if self.format == "csv":
            csv.DictWriter(self._fh, fieldnames=self.columns, lineterminator="\n").writerow(row)
        else:
            self._fh.write(json.dumps(row, allow_nan=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# ---------------------------------------------------------------------------- results
class StudyResult:
    """The table of a finished (or interrupted-and-resumed) study.

    Attributes
    ----------
    rows : list of dict
        One flat row per configuration, in grid order.
    ran : int
        Rows computed by this call of :meth:`Study.run`.
    resumed : int
        Rows taken from an existing output file instead.
    out : pathlib.Path or None
        The table file.
    elapsed_s : float
        Wall-clock seconds of the run.
    params : list of str
        The parameter columns.
    """

    def __init__(self, rows: list[dict[str, Any]], ran: int, resumed: int, out: Path | None,
                 elapsed_s: float, params: Sequence[str] = ()):
        self.rows = rows
        self.params = list(params)
        self.ran = ran
        self.resumed = resumed
        self.out = out
        self.elapsed_s = elapsed_s

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Rows whose simulation raised an :class:`~sgdnet.SgdnetError` (``error`` is set)."""
        return [r for r in self.rows if r.get("error")]

    @property
    def columns(self) -> list[str]:
        """All column names, in table order."""
        seen: dict[str, None] = {}
        for r in self.rows:
            for k in r:
                seen.setdefault(k, None)
        return _order_columns(seen, self.params)

    def frame(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas: ``pip install sgdnet[pandas]``).

        Raises
        ------
        StudyError
            pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise StudyError("StudyResult.frame() needs pandas; pip install 'sgdnet[pandas]' or "
                             "use StudyResult.rows (a list of dicts)") from None
        return pd.DataFrame(self.rows, columns=self.columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]

    def __repr__(self) -> str:
        where = f", out={str(self.out)!r}" if self.out else ""
        return (f"StudyResult({len(self.rows)} rows: ran={self.ran}, resumed={self.resumed}, "
                f"failed={len(self.failed)}{where})")


# ---------------------------------------------------------------------------- the study
def _axis_values(key: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise StudyError(f"grid axis {key!r}: {values!r} must be a list of values; put a single "
                         f"value in fixed= instead")
    vals = list(values)
    if not vals:
        raise StudyError(f"grid axis {key!r} is empty; give at least one value")
    return vals


class Study:
    """A batch of predictions: grid (and/or explicit configurations) x replications.

    Parameters
    ----------
    grid : mapping of str to list, optional
        Axes of a full factorial grid: parameter name -> values, expanded in the order given
        (the last axis varies fastest). Names: any :func:`sgdnet.predict` keyword, a Cluster
        field as ``"cluster.<field>"`` (a ``"cluster"`` mapping of axes is flattened), or
        ``"model.batch_size"`` / ``"model.speed"`` / ``"model.cv"``.
    configs : sequence of mapping, optional
        Explicit configurations; combined with ``grid`` as configs x grid.
    fixed : mapping, optional
        Parameters shared by every row (``{"model": "resnet50", "granularity": "coarse"}``; a
        ``"cluster"`` dict or Cluster is flattened to ``cluster.<field>`` columns).
    replications : int, optional
        Replications per row (passed to predict unless the grid or fixed sets it).
    seed : int
        Study seed (>= 0); row seeds derive from it and the row's parameters.
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
                 runner: Callable[..., Any] | None = None, on_error: str = "record"):
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
        self.seed = seed
        self.replications = replications
        self.out = None if out is None else Path(out)
        self.name = name or "study"
        self.runner = runner
        self.on_error = on_error
        self.fixed = _flatten(dict(fixed or {}), "fixed")
        grid_in = dict(grid or {})
        if "cluster" in grid_in and isinstance(grid_in["cluster"], Mapping):
            sub = grid_in.pop("cluster")
            grid_in.update({f"cluster.{k}": v for k, v in sub.items()})
        self.grid = {k: _axis_values(k, v) for k, v in grid_in.items()}
        self.explicit = [_flatten(dict(c), f"configs[{i}]") for i, c in enumerate(configs or [])]
        if configs is not None and not self.explicit:
            raise StudyError("Study configs=[] has no configuration; give at least one or omit it")
        _check_keys(self.fixed, "fixed")
        _check_keys({k: None for k in self.grid}, "grid")
        for i, c in enumerate(self.explicit):
            _check_keys(c, f"configs[{i}]")
        self._configs = self._expand()
        self._ids = [row_id(c, seed) for c in self._configs]
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
        ``out`` (relative to the file's directory), ``name``, ``on_error``. Example::

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
        text = p.read_text(encoding="utf-8")
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
                                                    "name", "on_error") if k in data}
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
        from . import models

        variants_seen = {c.get("variant") for c in self._configs}
        models_seen = {c.get("model") for c in self._configs}
        try:
            from . import variants

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
        return [row_seed(c, self.seed) for c in self._configs]

    def __len__(self) -> int:
        return len(self._configs)

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}x{len(v)}" for k, v in self.grid.items()) or "no grid"
        return f"Study({len(self)} rows: {axes}; seed={self.seed})"

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
        out_path = Path(out) if out is not None else self.out
        ids = self._ids
        done: dict[str, dict[str, Any]] = {}
        writer = None
        kept: list[dict[str, Any]] = []
        if out_path is not None:
            _format_of(out_path)
            if resume and out_path.exists():
                previous = read_table(out_path)
                wanted = set(ids)
                for r in previous:
                    rid = str(r.get("row_id"))
                    if rid in wanted and not (retry_errors and r.get("error")):
                        done[rid] = r
                    elif rid not in wanted:
                        kept.append(r)  # rows of other studies sharing the file stay
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
        todo.sort(key=lambda i: (self._configs[i].get("cluster.workers", 1) != 1, i))
        rows: dict[str, dict[str, Any]] = dict(done)
        ran = 0
        failures: list[str] = []
        try:
            bar = _progress(progress, len(ids), len(done), self.name)
            pool, owned, parallel = self._executor(executor, n_jobs, scheduler, mp_context)
            try:
                threads = None if pool is None else 1
                tasks = (_Task(i, ids[i], self._configs[i], row_seed(self._configs[i], self.seed),
                               self.runner, threads) for i in todo)
                for _, row, failed in _execute(pool, tasks, max_pending or 4 * parallel):
                    ran += 1
                    if failed:
                        failures.append(row["error"])
                        if self.on_error == "raise":
                            params = {k: row[k] for k in self._configs[0] if k in row}
                            raise StudyError(f"study row {row['row_id']} {params}: {row['error']}")
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
        if params.get("cluster.workers", 1) == 1 and "cluster.speeds" not in params:
            return None
        rest = {k: v for k, v in params.items() if k not in ("cluster.workers", "cluster.speeds")}
        return row_id({**rest, "cluster.workers": 1}, self.seed)

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
                _speedup(dep, row, dep.get("cluster.workers", 1))
                rows[dep["row_id"]] = dep
                ready.append(dep)
        elif base_id in rows or base_id not in self._index:
            _speedup(row, rows.get(base_id), params.get("cluster.workers", 1))
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

    def _executor(self, executor: Any, n_jobs: int | None, scheduler: str | None,
                  mp_context: str) -> tuple[Any, Callable[[], None] | None, int]:
        """``(executor or None for serial, shutdown callable or None, parallelism)``."""
        if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int)
                                   or n_jobs < 1):
            raise StudyError(f"n_jobs={n_jobs!r} must be an integer >= 1 (processes)")
        cores = os.cpu_count() or 1
        if isinstance(executor, str):
            if executor == "serial":
                return None, None, 1
            if executor == "local":
                import multiprocessing

                # a spawned worker runs the parent's script as __mp_main__ before it works
                mp_main = sys.modules.get("__mp_main__")
                if mp_main is not None and mp_main is not sys.modules.get("__main__"):
                    raise StudyError(
                        f"Study.run(executor='local') was reached while a worker process "
                        f"imported the main script {getattr(mp_main, '__file__', '?')!r}: put the "
                        "code that runs the study under `if __name__ == '__main__':` (each worker "
                        "process of the 'spawn' start method imports the script), or use "
                        "executor='serial'")
                try:
                    ctx = multiprocessing.get_context(mp_context)
                except ValueError:
                    raise StudyError(f"mp_context={mp_context!r} is not a start method; use "
                                     "'spawn', 'forkserver' or 'fork'") from None
                n = n_jobs or cores
                pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx,
                                              initializer=_init_worker)
                return pool, lambda: pool.shutdown(wait=True, cancel_futures=True), n
            if executor == "dask":
                return _dask_executor(scheduler, n_jobs)
            raise StudyError(f"unknown executor {executor!r}; use one of {list(EXECUTORS)}, a "
                             "concurrent.futures.Executor or a dask.distributed Client")
        if _is_dask_client(executor):
            return executor.get_executor(pure=False), None, _dask_parallelism(executor)
        if isinstance(executor, cf.Executor):
            n = getattr(executor, "_max_workers", None) or n_jobs or cores
            return executor, None, int(n)
        raise StudyError(f"executor {executor!r} is not supported; use one of {list(EXECUTORS)}, "
                         "a concurrent.futures.Executor or a dask.distributed Client")


def _speedup(row: dict[str, Any], base: Mapping[str, Any] | None, workers: Any) -> None:
    if base is None or row.get("error") or base.get("error"):
        return
    x, b = _finite(row.get("samples_per_s_mean")), _finite(base.get("samples_per_s_mean"))
    if x is None or not b:
        return
    su = x / b
    row["speed_up"] = su
    row["efficiency"] = su / workers if isinstance(workers, int) and workers > 0 else None


def _execute(pool: Any, tasks: Iterator[_Task], max_pending: int
             ) -> Iterator[tuple[int, dict[str, Any], bool]]:
    if pool is None:
        for t in tasks:
            yield _run_task(t)
        return
    pending: set[cf.Future] = set()
    try:
        for t in tasks:
            pending.add(pool.submit(_run_task, t))
            if len(pending) >= max_pending:
                finished, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                for f in finished:
                    yield f.result()
        while pending:
            finished, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
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


def _dask_executor(scheduler: str | None, n_jobs: int | None
                   ) -> tuple[Any, Callable[[], None] | None, int]:
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
    cluster = distributed.LocalCluster(n_workers=n_jobs or os.cpu_count() or 1,
                                       threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)

    def close() -> None:
        client.close()
        cluster.close()

    return client.get_executor(pure=False), close, _dask_parallelism(client)
