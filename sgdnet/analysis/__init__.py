"""Exact answers: statistics for simulation output (``stats``) and the max-plus cycle time of
timed event graphs (``maxplus``)."""

from . import stats
from .stats import batch_means, mean_ci, norm_ppf, t_ppf

__all__ = ["stats", "t_ppf", "norm_ppf", "mean_ci", "batch_means"]
