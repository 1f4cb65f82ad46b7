"""Parse quantities with units into SI floats.

Times become seconds, sizes bytes, rates bytes per second::

    >>> seconds("3ms"), nbytes("25MB"), bandwidth("10Gbps")
    (0.003, 25000000.0, 1250000000.0)

Bits are lowercase ``b`` (``Gbps``, ``Gbit/s``, ``Mb``), bytes uppercase ``B`` (``GB/s``, ``MiB``).
Decimal prefixes are powers of 1000, binary ones (``Ki``, ``Mi``, ``Gi``) powers of 1024.
Plain numbers are taken as already in SI units.
"""

from __future__ import annotations

import math
import re

from ._text import short_repr
from .errors import SgdnetError, UnitError

__all__ = ["seconds", "nbytes", "bandwidth", "parse_quantity", "format_seconds", "format_bytes",
           "to_float"]

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_RE = re.compile(r"^\s*" + _NUM + r"\s*([A-Za-z/µ]*)\s*$")

_PREFIX = {
    "": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
}
_TIME = {
    "": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "µs": 1e-6, "usec": 1e-6, "ns": 1e-9,
    "min": 60.0, "h": 3600.0,
}


def to_float(value, what: str, error: type[SgdnetError] = UnitError) -> float:
    """``float(value)`` of a number; a Python integer beyond the float range (about 1.8e308,
    where ``float()`` raises OverflowError) is ``error`` naming ``what`` and the value.

    Parameters
    ----------
    value : int or float (or anything ``float()`` takes)
    what : str
        The argument's name in the message (``"Cluster.bandwidth"``).
    error : SgdnetError subclass
    """
    try:
        return float(value)
    except OverflowError:
        raise error(f"{what}={short_repr(value)} is beyond the range of a float (about 1.8e308); "
                    "give a realistic, finite value") from None


def _split(value, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise UnitError(f"{what} {value!r} is a boolean; give a number or a string such as '10Gbps'")
    if isinstance(value, (int, float)):
        return to_float(value, what, UnitError), ""
    if not isinstance(value, str):
        raise UnitError(f"{what} {value!r} is a {type(value).__name__}; give a number or a string with a unit")
    m = _RE.match(value)
    if not m:
        raise UnitError(f"cannot parse {what} {value!r}; expected a number followed by a unit, e.g. '25MB', '3ms', '10Gbps'")
    return float(m.group(1)), m.group(2)


def _check(x: float, value, what: str, allow_zero: bool) -> float:
    if math.isnan(x) or math.isinf(x):
        raise UnitError(f"{what} {value!r} is not finite; give a finite number")
    if x < 0 or (x == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise UnitError(f"{what} {value!r} must be {bound}")
    return x


def seconds(value, *, allow_zero: bool = True, what: str = "duration") -> float:
    """Parse a time (``"3ms"``, ``"50us"``, ``2.5``) into seconds."""
    x, unit = _split(value, what)
    if unit not in _TIME:
        raise UnitError(f"unknown time unit {unit!r} in {what} {value!r}; use one of s, ms, us, ns, min, h")
    return _check(x * _TIME[unit], value, what, allow_zero)


def _prefixed(unit: str) -> tuple[float, str] | None:
    for p in sorted(_PREFIX, key=len, reverse=True):
        if p and unit.startswith(p):
            return _PREFIX[p], unit[len(p):]
    return 1.0, unit


def nbytes(value, *, allow_zero: bool = True, what: str = "size") -> float:
    """Parse a size (``"25MB"``, ``"1.5GiB"``, ``"800Mb"``, ``1e6``) into bytes."""
    x, unit = _split(value, what)
    if unit == "":
        return _check(x, value, what, allow_zero)
    scale, base = _prefixed(unit)
    if base in ("B", "byte", "bytes"):
        f = 1.0
    elif base in ("b", "bit", "bits"):
        f = 1.0 / 8.0
    else:
        raise UnitError(f"unknown size unit {unit!r} in {what} {value!r}; use e.g. B, KB, MB, GB, KiB, MiB, Gb")
    return _check(x * scale * f, value, what, allow_zero)


def bandwidth(value, *, what: str = "bandwidth") -> float:
    """Parse a rate (``"10Gbps"``, ``"10Gbit/s"``, ``"1.25GB/s"``, ``1.25e9``) into bytes per second.

    Zero bandwidth is rejected: a link that carries nothing would make every transfer infinite.
    """
    x, unit = _split(value, what)
    if unit == "":
        return _check(x, value, what, allow_zero=False)
    u = unit
    for suffix in ("ps", "/s"):
        if u.endswith(suffix):
            u = u[: -len(suffix)]
            break
    else:
        raise UnitError(f"unknown rate unit {unit!r} in {what} {value!r}; use e.g. Gbps, Gbit/s, GB/s, MB/s")
    scale, base = _prefixed(u)
    if base in ("b", "bit"):
        f = 1.0 / 8.0
    elif base in ("B", "byte"):
        f = 1.0
    else:
        raise UnitError(f"unknown rate unit {unit!r} in {what} {value!r}; use e.g. Gbps, Gbit/s, GB/s, MB/s")
    return _check(x * scale * f, value, what, allow_zero=False)


def parse_quantity(value, kind: str, **kw) -> float:
    """Dispatch on ``kind`` in ``{"time", "bytes", "rate"}``."""
    if kind == "time":
        return seconds(value, **kw)
    if kind == "bytes":
        return nbytes(value, **kw)
    if kind == "rate":
        return bandwidth(value, **kw)
    raise UnitError(f"unknown quantity kind {kind!r}; use 'time', 'bytes' or 'rate'")


def format_seconds(x: float) -> str:
    """Human-readable time: ``0.0031 -> '3.1 ms'``."""
    ax = abs(x)
    for lim, unit, f in ((1.0, "s", 1.0), (1e-3, "ms", 1e3), (1e-6, "us", 1e6)):
        if ax >= lim:
            return f"{x * f:.3g} {unit}"
    return f"{x * 1e9:.3g} ns"


def format_bytes(x: float) -> str:
    """Human-readable size in decimal units: ``25e6 -> '25 MB'``."""
    for lim, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(x) >= lim:
            return f"{x / lim:.3g} {unit}"
    return f"{x:.0f} B"
