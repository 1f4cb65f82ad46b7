"""Plain-text rendering of figures for the terminal: significant digits, ``mean ± CI``,
percentages, aligned tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["fmt", "plus_minus", "pct", "table", "short_repr"]


def fmt(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` significant digits (no exponent); ``-`` for None or non-finite."""
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def plus_minus(mean: float | None, lo: float | None, hi: float | None) -> str:
    """``mean ± half-width`` of the CI ``[lo, hi]``, to the half-width's two significant digits."""
    if mean is None:
        return "-"
    if lo is None or hi is None:
        return fmt(mean)
    half = (hi - lo) / 2
    if half <= 0:
        return f"{fmt(mean)} ± 0"
    # as many decimals as the half-width's 2 significant digits need
    dec = max(0, 1 - math.floor(math.log10(half)))
    return f"{mean:.{dec}f} ± {half:.{dec}f}"


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal; ``-`` for None or non-finite."""
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """A plain-text table: header, dashes, rows; column ``i`` right-aligned if ``right[i]``."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def short_repr(value: Any, width: int = 60) -> str:
    """``repr(value)`` for a message: an integer too long to read as its number of digits and
    magnitude (``10**400`` is "an integer of 401 digits (~1e400)"), anything else cut to
    ``width`` characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        digits = len(str(abs(value)))
        return f"{'-' if value < 0 else ''}<an integer of {digits} digits (~1e{digits - 1})>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
