"""Argument checks: the one home of the integer / bool / seed validators of public entry points.

Each check returns the normalised value or raises the caller's :class:`~sgdnet.SgdnetError`
subclass (``error=``) with a message naming the bad value and what is valid. The ``*_problem``
predicates return that reason without a name, for callers that wrap it in their own message
(variant option checks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import SgdnetError, SimulationError

__all__ = ["is_int", "int_problem", "int_arg", "bool_problem", "bool_arg", "seed_arg",
           "seeds_arg", "finite_or_none", "number_or_none", "derive_seeds", "MAX_SEED"]

#: Explicit per-replication seeds are 64-bit unsigned integers.
MAX_SEED = 2**64


def is_int(value: Any) -> bool:
    """True for a Python or numpy integer that is not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def int_problem(value: Any, lo: int, allow_none: bool = False) -> str | None:
    """Why ``value`` is not an integer ``>= lo`` (or ``None`` when allowed); ``None`` if it is."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value < lo:
        return f"must be an integer >= {lo}" + (" or None" if allow_none else "")
    return None


def int_arg(name: str, value: Any, lo: int, hint: str = "", *,
            error: type[SgdnetError] = SimulationError) -> int:
    """``int(value)`` if it is an integer ``>= lo``.

    Raises
    ------
    SgdnetError
        ``error("{name}={value!r} must be an integer >= {lo}{hint}")`` otherwise.
    """
    why = int_problem(value, lo)
    if why is not None:
        raise error(f"{name}={value!r} {why}{hint}")
    return int(value)


def bool_problem(value: Any) -> str | None:
    """Why ``value`` is not a bool (Python or numpy); ``None`` if it is."""
    return None if isinstance(value, (bool, np.bool_)) else "must be True or False"


def bool_arg(name: str, value: Any, *, error: type[SgdnetError] = SimulationError) -> bool:
    """``bool(value)`` if it is a bool, else ``error("{name}={value!r} must be True or False")``."""
    why = bool_problem(value)
    if why is not None:
        raise error(f"{name}={value!r} {why}")
    return bool(value)


def seed_arg(seed: Any, *, error: type[SgdnetError] = SimulationError) -> Any:
    """``seed`` if it is ``None``, a non-negative integer or a :class:`numpy.random.Generator`."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if not is_int(seed) or seed < 0:
        raise error(f"seed={seed!r} must be None, a non-negative integer or a "
                    "numpy.random.Generator")
    return seed


def seeds_arg(seeds: Iterable[Any], *, error: type[SgdnetError] = SimulationError) -> list[int]:
    """Explicit per-replication seeds: a non-empty list of integers in ``[0, 2**64)``."""
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise error(f"seeds={seeds!r} must be a list of integers, e.g. seeds=[result.seeds[0]]")
    seeds = list(seeds)
    if not seeds:
        raise error("seeds=[] is empty; give at least one seed or use seed=")
    for s in seeds:
        if not is_int(s) or not 0 <= int(s) < MAX_SEED:
            raise error(f"seed {s!r} in seeds must be an integer in [0, 2**64)")
    return [int(s) for s in seeds]


def finite_or_none(x: Any) -> float | None:
    """``float(x)`` when it is a finite number, else ``None`` (for table cells: JSON has no NaN)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def number_or_none(x: Any) -> float | None:
    """:func:`finite_or_none`, with bools (a flag, not a quantity) ``None`` too: what a plot or
    a Pareto front can place on an axis."""
    return None if isinstance(x, bool) else finite_or_none(x)


def derive_seeds(seed: Any, n: int) -> list[int]:
    """``n`` independent 64-bit integer seeds from ``seed`` (None, int or numpy Generator),
    via :class:`numpy.random.SeedSequence` (one spawned child per replication); the Numba engine
    and the reference oracle derive a run's seeds the same way, so they play the same streams."""
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(0, 2**63 - 1))
    ss = np.random.SeedSequence(seed)
    return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in ss.spawn(n)]
