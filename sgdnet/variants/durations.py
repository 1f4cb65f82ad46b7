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
    if not (math.isfinite(mean) and mean >= 0):
        raise VariantError(f"duration mean {mean!r} must be a finite number of seconds >= 0")
    if cv is None or cv == 0 or mean == 0:
        return Deterministic(mean)
    return Gamma(mean, float(cv))
