"""The time-to-accuracy columns and table of ``sgdnet predict --target-loss/--target-accuracy``
(kept here so that the CLI only calls them)."""

from __future__ import annotations

from typing import Any

from .._text import fmt, plus_minus, table
from .target import Target
from .tta import time_to_accuracy

__all__ = ["tta_rows", "tta_table"]


def tta_rows(args: Any, rows: list[dict], model: Any, clusters: list,
             options: dict) -> list[dict[str, Any]]:
    """The time-to-accuracy columns of every worker count, also added to ``rows`` (the
    ``sgdnet predict`` rows, one per cluster); ``[]`` without a target.

    ``args``: the ``sgdnet predict`` namespace (``target_loss``, ``target_accuracy``, ``task``,
    ``lr``, ``target_window``, ``tta_method``, ``variant``, ``granularity``, ``replications``,
    ``seed``).
    """
    loss, acc = getattr(args, "target_loss", None), getattr(args, "target_accuracy", None)
    if loss is None and acc is None:
        return []
    target = Target(args.task, loss=loss, accuracy=acc, lr=args.lr, seed=args.seed,
                    window=getattr(args, "target_window", 1))
    out = []
    for cluster in clusters:
        r = time_to_accuracy(args.variant, model, cluster, target,
                             granularity=args.granularity, replications=args.replications,
                             seed=args.seed, method=args.tta_method, transport=None, **options)
        out.append(r.summary())
    for row, t in zip(rows, out):
        row.update(t)
    return out


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
