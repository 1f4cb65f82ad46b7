"""How TCP connections share one link, read from staggered messages (issue #37).

``scripts/sharing_probe.py``'s ``in-stagger`` experiment starts equal messages into one host
at known instants; where their ends fall between two fluid models of the same starts says how
the congestion control shares the link (measured: BBR about max-min, Reno about 0.4 of the way
from FIFO, ``docs/validation.md``):

- :func:`fluid_ends`: the ends of messages of ``size`` bytes started at ``starts`` on one link
  of ``rate`` bytes/s, each flow weighted ``beta ** j`` with ``j`` the flows still moving that
  started before it (``beta = 1``: max-min, every active flow at ``rate / k``; ``beta = 0``:
  FIFO, the oldest alone; flows that start at the same instant weigh the same);
- :func:`fairness_index`: per message, ``(end - FIFO end) / (max-min end - FIFO end)``;
- :func:`fit_beta`: the ``beta`` whose ends are nearest the measured ones (least squares over
  a grid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import TestbedError

__all__ = ["fluid_ends", "fairness_index", "fit_beta"]


def fluid_ends(starts: Sequence[float], size: float, rate: float, beta: float = 1.0) -> list[float]:
    """The end of each message (same order as ``starts``): ``size`` bytes each, one link of
    ``rate`` bytes/s shared by the messages moving at each instant in proportion to their
    weights ``beta ** j`` (``j``: how many moving messages started strictly before it).

    Raises
    ------
    TestbedError
        ``size`` or ``rate`` not > 0, ``beta`` outside ``[0, 1]``, or no starts.
    """
    if not starts:
        raise TestbedError("fluid_ends: no message starts; give at least one")
    if not (size > 0 and rate > 0 and math.isfinite(size) and math.isfinite(rate)):
        raise TestbedError(f"fluid_ends: size={size!r}, rate={rate!r} must be finite and > 0")
    if not 0.0 <= beta <= 1.0:
        raise TestbedError(f"fluid_ends: beta={beta!r} must be in [0, 1] (0 FIFO, 1 max-min)")
    n = len(starts)
    left = [float(size)] * n
    ends: list[float | None] = [None] * n
    order = sorted(range(n), key=lambda i: starts[i])
    pending = list(order)
    active: list[int] = []
    t = float(starts[order[0]])
    while pending or active:
        while pending and starts[pending[0]] <= t:
            active.append(pending.pop(0))
        if not active:
            t = float(starts[pending[0]])
            continue
        w = [beta ** sum(1 for j in active if starts[j] < starts[i]) for i in active]
        total = sum(w)
        rates = [rate * x / total for x in w]
        dt = min(left[i] / r for i, r in zip(active, rates) if r > 0)
        if pending:
            dt = min(dt, starts[pending[0]] - t)
        t += dt
        for i, r in zip(active, rates):
            left[i] -= r * dt
        for i in [i for i in active if left[i] <= size * 1e-12]:
            ends[i] = t
            active.remove(i)
    return [float(e) for e in ends]  # type: ignore[arg-type]


def fairness_index(starts: Sequence[float], ends: Sequence[float], size: float,
                   rate: float) -> list[float]:
    """Per message, where its measured end lies between the FIFO model's (0) and max-min's (1)
    ends of the same starts (NaN where the two models agree, e.g. the last message)."""
    fifo = fluid_ends(starts, size, rate, 0.0)
    fair = fluid_ends(starts, size, rate, 1.0)
    return [(e - a) / (b - a) if abs(b - a) > 1e-9 * max(abs(b), 1.0) else math.nan
            for e, a, b in zip(ends, fifo, fair)]


def fit_beta(runs: Sequence[tuple[Sequence[float], Sequence[float]]], size: float, rate: float,
             steps: int = 100) -> tuple[float, float]:
    """The ``beta`` in ``[0, 1]`` (grid of ``steps + 1`` values) whose :func:`fluid_ends`
    are nearest, in least squares, to the measured ends of ``runs`` (each ``(starts, ends)``);
    returns ``(beta, rms error in seconds)``."""
    if not runs:
        raise TestbedError("fit_beta: no runs; give (starts, ends) pairs")
    best = (math.inf, 1.0)
    for k in range(steps + 1):
        b = k / steps
        sq = [(p - e) ** 2 for st, en in runs for p, e in zip(fluid_ends(st, size, rate, b), en)]
        err = math.sqrt(sum(sq) / len(sq))
        if err < best[0]:
            best = (err, b)
    return best[1], best[0]
