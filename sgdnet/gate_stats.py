"""What a gate did in a simulation: DSSP's controller decisions ``r*`` and the members' leads.

Both are counted from time 0 (warm-up included) in every replication, by the Numba engine and by
the reference engine alike:

- ``r*``: every decision of a ``dynamic_lag`` gate's controller (empty for ``lag`` gates);
- *lead*: at every completion of a member's counter transition (for DSSP, a push arriving at
  the server), that member's count minus the least count of the gate, after the completion.
  The kernel keeps leads in a histogram whose last bin holds that lead *or more*
  (:attr:`GateStats.lead_overflow_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .results import Estimate

__all__ = ["GateStats", "gate_stats"]


@dataclass(frozen=True)
class GateStats:
    """Per-replication counts of one gate's decisions and leads.

    Attributes
    ----------
    gate, kind : str
        The gate's name and kind (``"lag"`` or ``"dynamic_lag"``).
    r_star_counts : numpy.ndarray
        ``(replications, max r* + 1)``: controller decisions by ``r*`` (one zero column for a
        ``lag`` gate).
    lead_counts : numpy.ndarray
        ``(replications, bins)``: counter completions by the member's lead; with a kernel
        histogram the last column counts leads ``>= lead_overflow_at``.
    lead_overflow_at : int
        The lead from which completions share the last column (``bins``, never reached,
        for the reference engine's exact lists).
    """

    gate: str
    kind: str
    r_star_counts: np.ndarray
    lead_counts: np.ndarray
    lead_overflow_at: int

    @property
    def decisions(self) -> int:
        """Controller decisions over all replications."""
        return int(self.r_star_counts.sum())

    def r_star_pmf(self) -> np.ndarray:
        """Share of the decisions (all replications pooled) by ``r* = 0..r_max``."""
        tot = self.r_star_counts.sum()
        return self.r_star_counts.sum(axis=0) / tot if tot else np.zeros(self.r_star_counts.shape[1])

    def lead_pmf(self) -> np.ndarray:
        """Share of the counter completions (pooled) by lead (last entry: that lead or more)."""
        tot = self.lead_counts.sum()
        return self.lead_counts.sum(axis=0) / tot if tot else np.zeros(self.lead_counts.shape[1])

    def mean_r_star(self) -> Estimate:
        """Mean ``r*`` per replication (nan for a replication without decisions)."""
        return Estimate(_row_means(self.r_star_counts), unit="steps", label=f"mean r* of gate {self.gate}")

    def mean_lead(self) -> Estimate:
        """Mean lead at counter completions per replication (overflowed leads count as
        ``lead_overflow_at``, so a lower bound when :meth:`lead_overflowed`)."""
        return Estimate(_row_means(self.lead_counts), unit="steps", label=f"mean lead of gate {self.gate}")

    def lead_overflowed(self) -> bool:
        """True when some lead reached ``lead_overflow_at`` (and so shares the last column)."""
        return self.lead_overflow_at < self.lead_counts.shape[1] and bool(self.lead_counts[:, -1].sum())


def _row_means(counts: np.ndarray) -> np.ndarray:
    v = np.arange(counts.shape[1], dtype=float)
    n = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (counts * v).sum(axis=1) / np.maximum(n, 1), np.nan)


def _lead_rows(raws: list, g: int) -> tuple[np.ndarray, int]:
    rows = []
    for r in raws:
        gl = r.gate_lead
        if isinstance(gl, np.ndarray) and gl.ndim == 2:
            rows.append(np.asarray(gl[g], dtype=np.int64))
        else:
            leads = np.array([x[1] for x in (gl or []) if x[0] == g], dtype=np.int64)
            rows.append(np.bincount(leads, minlength=1))
    bins = max(len(x) for x in rows)
    out = np.zeros((len(rows), bins), dtype=np.int64)
    for k, x in enumerate(rows):
        out[k, :len(x)] = x
    # kernel histograms already fold large leads into their last bin; lists never do
    folded = any(isinstance(r.gate_lead, np.ndarray) for r in raws)
    return out, (bins - 1 if folded else bins)


def gate_stats(result: Any, gate_name: str) -> GateStats:
    """The :class:`GateStats` of gate ``gate_name`` in ``result`` (see ``Result.gate_stats``)."""
    g = result.gate_names.index(gate_name)
    kind = result.gate_kinds[g]
    raws = result._raws
    rs = []
    for r in raws:
        gl = r.gate_log
        if isinstance(gl, np.ndarray) and gl.ndim == 2:
            rs.append(np.asarray(gl[gl[:, 0] == g, 1], dtype=np.int64))
        else:
            rs.append(np.array([x[1] for x in gl if x[0] == g], dtype=np.int64))
    width = max([int(x.max()) + 1 for x in rs if x.size] + [1])
    rc = np.zeros((len(rs), width), dtype=np.int64)
    for k, x in enumerate(rs):
        rc[k] = np.bincount(x, minlength=width)
    lc, over = _lead_rows(raws, g)
    return GateStats(gate_name, kind, rc, lc, over)
