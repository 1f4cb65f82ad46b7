"""Thin wrappers over :mod:`sgdnet.units` used by the workload modules.

``units.seconds`` in this version rejects plain numbers (``seconds(2.5)`` raises "unknown time
unit ''" although its docstring says plain numbers are SI); :func:`seconds` here accepts them
with the same validation and message style, and defers to ``units.seconds`` for strings.
"""

from __future__ import annotations

import math

from .. import units
from ..errors import UnitError
from ..limits import limit_problem


def seconds(value, *, what: str = "duration") -> float:
    """Seconds from a plain number (already SI) or a string with a time unit."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = units.to_float(value, what, UnitError)
        if not math.isfinite(x):
            raise UnitError(f"{what} {value!r} is not finite; give a finite number")
        if x < 0:
            raise UnitError(f"{what} {value!r} must be non-negative")
        return _bounded(x, value, what)
    return _bounded(units.seconds(value, what=what), value, what)


def _bounded(x: float, value, what: str) -> float:
    """``x`` unless beyond the ``max_firing_s`` limit (a time of a workload: a layer, a message,
    a per-byte cost; 1e300 s is a typo, and would stop the simulated clock)."""
    why = limit_problem(x, "max_firing_s")
    if why is not None:
        raise UnitError(f"{what} {value!r} ({x:.3g} s) {why}")
    return x
