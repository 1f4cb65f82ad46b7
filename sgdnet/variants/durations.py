"""Mean and coefficient of variation -> the duration distribution of an operation.

``Deterministic(mean)`` when ``cv == 0`` (or the mean is 0), else ``Gamma(mean, cv)``. Compute
operations use the layer's own CV from the profile, else the model's, else
``cluster.compute_cv``; transfers use ``cluster.comm_cv`` (:mod:`.fabric`); server updates
``cluster.compute_cv``; latencies are deterministic.
"""

from __future__ import annotations

import math

from ..dists import Deterministic, Distribution, Gamma
from ..errors import VariantError

__all__ = ["duration"]


def duration(mean: float, cv: float = 0.0) -> Distribution:
    """``Deterministic(mean)`` if ``cv == 0`` or ``mean == 0``, else ``Gamma(mean, cv)``.

    Parameters
    ----------
    mean : float
        Mean duration, seconds (>= 0).
    cv : float
        Coefficient of variation (>= 0).
    """
    mean = float(mean)
    cv = 0.0 if cv is None else float(cv)
    key = (mean, cv)
    got = _MEMO.get(key)
    if got is not None:
        return got
    if not (math.isfinite(mean) and mean >= 0):
        raise VariantError(f"duration mean {mean!r} must be a finite number of seconds >= 0")
    got = Deterministic(mean) if cv == 0 or mean == 0 else Gamma(mean, cv)
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[key] = got
    return got


#: Distributions are immutable, so equal (mean, cv) pairs share one object (a net has many
#: transfers of equal sizes: building and hashing it then makes one object per size).
_MEMO: dict[tuple[float, float], Distribution] = {}
_MEMO_SIZE = 1 << 16
