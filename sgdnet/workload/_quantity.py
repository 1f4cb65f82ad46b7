"""Thin wrappers over :mod:`sgdnet.units` used by the workload modules.

``units.seconds`` in this version rejects plain numbers (``seconds(2.5)`` raises "unknown time
unit ''" although its docstring says plain numbers are SI); :func:`seconds` here accepts them
with the same validation and message style, and defers to ``units.seconds`` for strings.
"""

from __future__ import annotations

import math

from .. import units
from ..errors import UnitError


def seconds(value, *, what: str = "duration") -> float:
    """Seconds from a plain number (already SI) or a string with a time unit."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = float(value)
        if not math.isfinite(x):
            raise UnitError(f"{what} {value!r} is not finite; give a finite number")
        if x < 0:
            raise UnitError(f"{what} {value!r} must be non-negative")
        return x
    return units.seconds(value, what=what)
