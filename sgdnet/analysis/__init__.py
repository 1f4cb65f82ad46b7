"""Exact answers: the max-plus cycle time of timed event graphs (``maxplus``) and statistics
for simulation output (``stats``).

Each public name is imported from its module on first use (PEP 562): :mod:`sgdnet.prediction`
reads its statistics from ``stats`` without importing ``maxplus`` (the net formalism).
"""

from __future__ import annotations

from .._lazy import attach as _attach

#: the module of each public name ("" for a module itself)
_LAZY: dict[str, str] = {
    "maxplus": "",
    "stats": "",
    "CycleTime": "maxplus",
    "cycle_time": "maxplus",
    "max_cycle_ratio": "maxplus",
    "batch_means": "stats",
    "mean_ci": "stats",
    "norm_ppf": "stats",
    "t_ppf": "stats",
}


__getattr__, __dir__ = _attach(__name__, _LAZY)

__all__ = [
    "maxplus",
    "stats",
    "cycle_time",
    "CycleTime",
    "max_cycle_ratio",
    "t_ppf",
    "norm_ppf",
    "mean_ci",
    "batch_means",
]
