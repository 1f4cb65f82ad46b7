"""The time-to-accuracy columns and table of ``sgdnet predict --target TASK:KEY=VALUE`` (or
``--target-loss/--target-accuracy``)
(kept here so that the CLI only calls them)."""

from __future__ import annotations

from typing import Any

from .._text import fmt, plus_minus, table
from ..errors import VariantError
from .target import Target, parse_target
from .tta import time_to_accuracy

__all__ = ["tta_rows", "tta_table", "target_of", "study_runner"]

#: :func:`sgdnet.predict` keywords a time-to-accuracy row ignores: its simulation starts at
#: time 0 (no warm-up) and keeps the trace it replays.
_PREDICT_ONLY = ("warmup", "trace", "samples", "progress")


def tta_rows(args: Any, rows: list[dict], model: Any, clusters: list,
             options: dict) -> list[dict[str, Any]]:
    """The time-to-accuracy columns of every worker count, also added to ``rows`` (the
    ``sgdnet predict`` rows, one per cluster); ``[]`` without a target.

    ``args``: the ``sgdnet predict`` namespace (``target`` (``TASK:KEY=VALUE``) or
    ``target_loss`` / ``target_accuracy`` with ``task``, ``lr``, ``target_window``,
    ``tta_method``, ``variant``, ``granularity``, ``replications``, ``seed``).
    """
    target = target_of(args)
    if target is None:
        return []
    out = []
    for cluster in clusters:
        r = time_to_accuracy(args.variant, model, cluster, target,
                             granularity=args.granularity, replications=args.replications,
                             seed=args.seed, method=args.tta_method, transport=None, **options)
        out.append(r.summary())
    for row, t in zip(rows, out):
        row.update(t)
    return out


def target_of(args: Any) -> Target | None:
    """The :class:`Target` of ``sgdnet predict``'s options, None without one: ``--target
    TASK:KEY=VALUE`` (``--lr``, ``--target-window``, ``--seed`` fill what it leaves out) or
    ``--target-loss`` / ``--target-accuracy`` with ``--task`` (default ``logreg``).

    Raises
    ------
    VariantError
        ``--task`` naming another task than ``--target``'s.
    """
    spec = getattr(args, "target", None)
    loss, acc = getattr(args, "target_loss", None), getattr(args, "target_accuracy", None)
    task = getattr(args, "task", None)
    kw = {"lr": getattr(args, "lr", None), "seed": getattr(args, "seed", 0),
          "window": getattr(args, "target_window", 1)}
    if spec is not None:
        target = parse_target(spec, **kw)
        if task is not None and task != target.task_name:
            raise VariantError(f"--task {task!r} and --target {spec!r} name different tasks; "
                               "give the task once (in --target)")
        return target
    if loss is None and acc is None:
        return None
    return Target(task or "logreg", loss=loss, accuracy=acc, **kw)


def study_runner(variant: Any, model: Any, cluster: Any, *, seed: int, target: Target,
                 granularity: str = "fine", replications: int = 8,
                 **kwargs: Any) -> dict[str, Any]:
    """The runner of a study row that has a target (``target`` / ``target.<field>`` axes,
    :func:`sgdnet.study.rows.row_target`): :func:`~.tta.time_to_accuracy` with the row's
    parameters (``granularity`` ``"fine"`` as :func:`sgdnet.predict`'s default; ``steps``,
    ``method``, variant options passed on; ``warmup``, ``trace``, ``samples``, ``progress``
    dropped), flattened to the row's columns: :meth:`~.tta.TimeToAccuracy.summary`
    (``target``, ``method``, ``reached``, ``tta_s_mean`` / ``_lo`` / ``_hi`` / ``_p05`` /
    ``_p50`` / ``_p95``, ``updates_mean``, ``staleness_mean``, ``steps_per_s_mean``) and ``n``
    (replications)."""
    for k in _PREDICT_ONLY:
        kwargs.pop(k, None)
    r = time_to_accuracy(variant, model, cluster, target, granularity=granularity,
                         replications=replications, seed=seed, **kwargs)
    return {"n": r.replications, **r.summary()}


def tta_table(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`tta_rows`' columns (rows also holding ``workers``), with the blank
    line that follows it."""
    r0 = rows[0]
    head = (f"time to {r0['target']} ({r0['method']}; simulated seconds from the start of "
            "training, mean ± 95% CI over replications)")
    header = ["workers", "time to target (s)", "p05-p95 (s)", "updates", "mean staleness",
              "reached"]
    cells = [[str(r["workers"]),
              plus_minus(r.get("tta_s_mean"), r.get("tta_s_lo"), r.get("tta_s_hi")),
              f"{fmt(r.get('tta_s_p05'), 3)}-{fmt(r.get('tta_s_p95'), 3)}",
              fmt(r.get("updates_mean"), 4), fmt(r.get("staleness_mean"), 3), r["reached"]]
             for r in rows]
    return head + "\n" + table(header, cells, [True] * len(header)) + "\n\n"
