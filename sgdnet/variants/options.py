"""Variant options: the :class:`Option` declaration, value checks, and the options several
variants share (``max_layers``, ``discipline``, the parameter-server options).

An option check is ``check(value) -> normalised value`` raising ``ValueError`` with a short
reason; :meth:`VariantSpec.resolve <sgdnet.variants.registry.VariantSpec.resolve>` wraps it in a
:class:`~sgdnet.VariantError` naming the variant, option, value and the option's doc.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import units
from .._check import bool_problem, int_problem

__all__ = ["Option", "check_choice", "check_bool", "check_int", "check_bytes", "MAX_LAYERS",
           "DISCIPLINE", "PS_OPTIONS"]


@dataclass(frozen=True)
class Option:
    """One option of a variant.

    Parameters
    ----------
    name : str
        Keyword name.
    default : object
        Value used when the option is not given.
    doc : str
        One line: what it means and which values are valid (quoted in error messages).
    check : callable, optional
        ``check(value) -> normalised value``; raises ``ValueError`` (or any
        :class:`~sgdnet.SgdnetError`) with a short reason when the value is bad. ``None`` accepts
        anything.
    """

    name: str
    default: Any
    doc: str
    check: Callable[[Any], Any] | None = None


def check_choice(*values: Any):
    """Option check accepting exactly ``values``."""

    def check(v):
        if v not in values:
            raise ValueError(f"must be one of {list(values)}")
        return v

    return check


def check_bool(v: Any) -> bool:
    """Option check: a bool."""
    why = bool_problem(v)
    if why is not None:
        raise ValueError(why)
    return bool(v)


def check_int(lo: int = 0, allow_none: bool = False):
    """Option check: an integer ``>= lo`` (or ``None`` if allowed)."""

    def check(v):
        why = int_problem(v, lo, allow_none)
        if why is not None:
            raise ValueError(why)
        return None if v is None else int(v)

    return check


def check_bytes(allow_none: bool = False, positive: bool = False, allow_inf: bool = False):
    """Option check: a byte size (``"25MB"`` or a number), optionally ``None`` / ``inf``."""

    def check(v):
        if v is None and allow_none:
            return None
        if allow_inf and isinstance(v, (float, int)) and not isinstance(v, bool) and v == math.inf:
            return math.inf
        b = units.nbytes(v, what="size")
        if positive and not b > 0:
            raise ValueError("must be > 0 bytes")
        return b

    return check


MAX_LAYERS = Option(
    "max_layers", None,
    "None (every layer) or an int >= 1: merge consecutive layers into at most that many groups",
    check_int(1, allow_none=True),
)
DISCIPLINE = Option(
    "discipline", "flows",
    "the network model: 'flows' (max-min fair flows over uplink -> downlink, one connection per "
    "host pair, per-byte CPU costs from the cluster), 'fifo' (first come, first served per NIC) "
    "or 'ps' (each NIC processor-shared by its transfers)",
    check_choice("flows", "fifo", "ps"),
)


PS_OPTIONS: tuple[Option, ...] = (
    Option("shards", None, "None (cluster.ps_shards) or an int >= 1: number of PS shards",
           check_int(1, allow_none=True)),
    Option("placement", None,
           "None (cluster.ps_placement), 'dedicated' (own hosts and NICs) or 'colocated' "
           "(shard k shares worker k's host and NIC)",
           check_choice(None, "dedicated", "colocated")),
    DISCIPLINE,
    Option("priority", False,
           "True/False: P3/ByteScheduler priority scheduling of pushes and pulls by layer (layer 0 "
           "first) on the NICs; needs discipline='fifo'", check_bool),
    Option("partition_bytes", None,
           "None or a size > 0 (e.g. '4MB'): split tensor pieces larger than this into equal "
           "chunks of at most this size, each sent and applied separately",
           check_bytes(allow_none=True, positive=True)),
    Option("shard_policy", "round_robin",
           "'round_robin' (small tensor l on shard l % k) or 'least_loaded' (greedy by bytes)",
           check_choice("round_robin", "least_loaded")),
    MAX_LAYERS,
)
