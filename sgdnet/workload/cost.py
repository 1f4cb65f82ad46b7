"""What a training run costs: price per hour, per million samples (or tokens), time and cost to
train, from a predicted throughput.

Formulas (``P``: the price of one instance-hour in dollars, ``N``: instances, ``r``: samples per
second of the whole job, ``S``: samples to train, ``k``: tokens per sample)::

    cost per hour                  C = P * N                       ($/h)
    cost per million samples       C * 10**6 / (3600 * r)          ($)
    cost per million tokens        C * 10**6 / (3600 * r * k)      ($)
    time to train                  T = S / r                       (s)
    cost to train                  C * T / 3600                    ($)

Each is computed per replication (one ``r`` each) and summarised as an
:class:`~sgdnet.estimate.Estimate`, so its confidence interval is the replications' (Student-t)
as for the throughput itself. Cloud providers bill per second (AWS, GCP and Azure on-demand
Linux, after a first minute), so no rounding up to whole hours is applied.

Nodes: a cluster with a topology runs ``workers / gpus_per_node`` instances; without one, one
worker per host: ``workers`` instances. Dedicated parameter-server hosts are not priced (their
instance type is not known).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import ClusterError

__all__ = ["SECONDS_PER_HOUR", "cluster_nodes", "cost_per_hour", "cost_per_million",
           "time_to_train_s", "training_samples", "tokens_per_sample", "cost_samples",
           "COST_COLUMNS", "PER_REPLICATION", "money", "cost_cells", "cost_note"]

SECONDS_PER_HOUR = 3600.0
#: Language-model architectures whose samples are sequences of ``seq_len`` tokens.
_TOKEN_ARCHITECTURES = ("bert", "gpt2", "gpt")


def _positive(value: Any, what: str, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str):  # YAML 1.1 reads 1.0e8 (no sign) as text
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(float(value)) and value > 0):
        raise ClusterError(f"{what}={value!r} must be a positive finite number")
    return float(value)


def cluster_nodes(cluster: Any) -> int:
    """Instances a cluster runs on: ``workers / gpus_per_node`` with a topology, else
    ``workers`` (one host per worker)."""
    t = getattr(cluster, "topology", None)
    n = int(cluster.workers)
    return n if t is None else t.nodes(n)


def cost_per_hour(price_per_hour: float, nodes: int) -> float:
    """``price_per_hour * nodes``: dollars per hour of the whole job."""
    p = _positive(price_per_hour, "price_per_hour", False)
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
        raise ClusterError(f"nodes={nodes!r} must be an integer >= 1")
    return p * int(nodes)


def cost_per_million(cost_hour: float, rate: Any) -> Any:
    """Dollars per 10**6 samples (or tokens, with a token rate): ``cost_hour * 10**6 /
    (3600 * rate)``; ``rate`` a number or an array (``inf`` where it is 0)."""
    r = np.asarray(rate, dtype=float)
    with np.errstate(divide="ignore"):
        out = cost_hour * 1e6 / (SECONDS_PER_HOUR * r)
    return float(out) if out.ndim == 0 else out


def time_to_train_s(samples: float, rate: Any) -> Any:
    """Seconds to process ``samples`` at ``rate`` samples/s (``inf`` where it is 0)."""
    r = np.asarray(rate, dtype=float)
    with np.errstate(divide="ignore"):
        out = float(samples) / r
    return float(out) if out.ndim == 0 else out


def training_samples(samples: float | None = None, epochs: float | None = None,
                     dataset_size: float | None = None) -> float | None:
    """The training length in samples: ``samples``, or ``epochs * dataset_size``, or None.

    Raises
    ------
    ClusterError
        Both forms given, only one of ``epochs`` / ``dataset_size``, or a non-positive value.
    """
    s = _positive(samples, "samples")
    e = _positive(epochs, "epochs")
    d = _positive(dataset_size, "dataset_size")
    if s is not None and (e is not None or d is not None):
        raise ClusterError("give the training length either as samples or as epochs and "
                           "dataset_size, not both")
    if (e is None) != (d is None):
        raise ClusterError("epochs and dataset_size go together (samples = epochs * "
                           f"dataset_size); got epochs={epochs!r}, dataset_size={dataset_size!r}")
    return s if s is not None else (e * d if e is not None else None)


def tokens_per_sample(profile: Any) -> int | None:
    """Tokens per sample of a language-model profile (its ``meta["seq_len"]``, for the
    architectures built by :mod:`sgdnet.workload.transformers`: BERT, GPT-2), else None."""
    meta = getattr(profile, "meta", None) or {}
    if not isinstance(meta, Mapping) or meta.get("architecture") not in _TOKEN_ARCHITECTURES:
        return None
    s = meta.get("seq_len")
    return int(s) if isinstance(s, (int, np.integer)) and s > 0 else None


#: The figures :func:`cost_samples` gives; those marked by :data:`PER_REPLICATION` are arrays
#: (one value per replication), which :func:`sgdnet.prediction.summarize` writes as ``_mean`` /
#: ``_lo`` / ``_hi`` columns.
COST_COLUMNS = ("nodes", "price_per_hour", "cost_per_hour", "train_samples",
                "cost_per_m_samples", "cost_per_m_tokens", "time_to_train_h", "cost_to_train")
PER_REPLICATION = ("cost_per_m_samples", "cost_per_m_tokens", "time_to_train_h",
                   "cost_to_train")


def cost_samples(samples_per_s: Any, nodes: int, price_per_hour: float | None, *,
                 train_samples: float | None = None,
                 tokens: int | None = None) -> dict[str, Any]:
    """The cost figures of one prediction (``None`` for what is unknown).

    Parameters
    ----------
    samples_per_s : Estimate or array
        Samples per second of the whole job, one value per replication.
    nodes : int
        Instances the job runs on.
    price_per_hour : float or None
        Dollars per instance-hour; None: every cost is None (unknown).
    train_samples : float, optional
        The training length; gives ``time_to_train_h`` and ``cost_to_train``.
    tokens : int, optional
        Tokens per sample; gives ``cost_per_m_tokens``.

    Returns
    -------
    dict
        :data:`COST_COLUMNS`: numbers, or for :data:`PER_REPLICATION` an array per
        replication (or None).
    """
    r = np.asarray(getattr(samples_per_s, "samples", samples_per_s), dtype=float).ravel()
    price = _positive(price_per_hour, "price_per_hour")
    ts = _positive(train_samples, "train_samples")
    ch = None if price is None else cost_per_hour(price, nodes)
    hours = None if ts is None else time_to_train_s(ts, r) / SECONDS_PER_HOUR
    return {"nodes": int(nodes), "price_per_hour": price, "cost_per_hour": ch,
            "train_samples": ts,
            "cost_per_m_samples": None if ch is None else cost_per_million(ch, r),
            "cost_per_m_tokens": None if ch is None or not tokens else
            cost_per_million(ch, r * tokens),
            "time_to_train_h": hours,
            "cost_to_train": None if hours is None or ch is None else ch * hours}


# ---------------------------------------------------------------------------- the table's cells
def money(x: Any) -> str:
    """``$1,234`` / ``$12.34``, or ``unknown``."""
    return "unknown" if x is None else (f"${x:,.0f}" if x >= 100 else f"${x:,.2f}")


def _pm(key: str, fmt: Any) -> Any:
    def cell(r: Mapping[str, Any]) -> str:
        m, lo, hi = r.get(f"{key}_mean"), r.get(f"{key}_lo"), r.get(f"{key}_hi")
        if m is None:
            return "unknown"
        if lo is None or hi is None or hi <= lo:
            return fmt(m)
        return f"{fmt(m)} ± {_hw(m, (hi - lo) / 2, fmt)}"
    return cell


def cost_cells(rows: list[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """The cost columns of a ``sgdnet predict`` table as ``(header, row -> cell)``: $/h, $ per
    million tokens (language models) or samples, and with a training length its time and
    cost (mean ± the 95% CI's half-width)."""
    tokens = any(r.get("cost_per_m_tokens_mean") is not None for r in rows)
    cols: list[tuple[str, Any]] = [("$/h", lambda r: money(r.get("cost_per_hour")))]
    cols.append(("$/M tokens", _pm("cost_per_m_tokens", money)) if tokens else
                ("$/M samples", _pm("cost_per_m_samples", money)))
    if any(r.get("train_samples") for r in rows):
        cols.append(("time to train", _pm("time_to_train_h", lambda h: f"{h:,.3g} h")))
        cols.append(("cost to train", _pm("cost_to_train", money)))
    return cols


def cost_note(inst: Any, price: float | None, train: float | None) -> str:
    """One line: where the price comes from, and the training length."""
    if price is None:
        where = ("no price in the catalog for " + inst.name if inst is not None else
                 "no price") + ": cost unknown; give --price-per-hour USD"
    elif inst is not None and price == inst.price_per_hour:
        pr = inst.price
        where = (f"price ${price:g} per instance-hour ({pr.get('kind', 'on-demand')}, "
                 f"{pr.get('region', '?')}, read {pr.get('read', '?')}: {pr.get('url', '?')})")
    else:
        where = f"price ${price:g} per instance-hour (given)"
    length = f"; training length {train:,.0f} samples" if train else ""
    return f"cost: {where}{length}; billed per second, CIs from the replications"


def _hw(mean: float, half: float, fmt: Callable[[float], str]) -> str:
    """A CI's half-width: in the mean's format, or with 2 significant digits when it is
    below 1% of the mean (where that format would print 0)."""
    return fmt(half) if half >= 0.01 * abs(mean) else f"{half:.2g}"
