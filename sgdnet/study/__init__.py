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

from .executors import EXECUTORS
from .grid import Study
from .rows import METRIC_COLUMNS, row_id, row_seed, summarize
from .table import StudyResult, read_table

__all__ = ["Study", "StudyResult", "read_table", "summarize", "row_seed", "row_id",
           "EXECUTORS", "METRIC_COLUMNS"]
