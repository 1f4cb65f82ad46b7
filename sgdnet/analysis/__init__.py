"""Exact answers: the max-plus cycle time of timed event graphs (``maxplus``) and statistics
for simulation output (``stats``)."""

from . import maxplus, stats
from .maxplus import CycleTime, cycle_time, max_cycle_ratio
from .stats import batch_means, mean_ci, norm_ppf, t_ppf

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
