"""Memory budget of fine nets: estimate a net's size before building it and, when it would not
fit, fall back to coarser layer groups (:func:`.layers.group_layers`), saying so.

A built and compiled net takes about :data:`BYTES_PER_ELEMENT` bytes per place and transition
(measured: 1.6-1.75 KB for fine sync-ps and allreduce nets of ResNet-50, RSS growth over build
and compile). A fine net grows linearly in the layers of its profile, so two small probe builds
on the real cluster — with ``k`` and ``2k`` of the profile's layers, evenly spaced, so their
sizes (hence their pieces and buckets) are representative — give the elements per layer and
the fixed part; the estimate is their line at the profile's layer count. Probes run only when
``workers x layers >= PROBE_FROM`` (below that a net is far under any sensible budget).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from ..limits import limit
from ..units import format_bytes
from ..workload import ModelProfile
from .layers import group_layers

__all__ = ["BYTES_PER_ELEMENT", "MARGIN", "PROBE_FROM", "announce", "estimate_elements",
           "fit_layer_groups"]

#: Resident bytes of one place or transition of a built and compiled net (measured, rounded up).
BYTES_PER_ELEMENT = 1800

#: Probe only when ``workers * layers`` is at least this.
PROBE_FROM = 8192

#: Fraction of the budget a fallback aims at (the estimate's error is up to ~+-35 %).
MARGIN = 0.75

#: Layers of the smaller probe (the larger one has twice as many).
_PROBE_LAYERS = 6


def _sample(model: ModelProfile, k: int) -> ModelProfile:
    """``k`` of the profile's layers, evenly spaced (first and last included)."""
    L = model.n_layers
    idx = sorted({round(j * (L - 1) / (k - 1)) for j in range(k)}) if k > 1 else [0]
    return ModelProfile(model.name, [model.layers[i] for i in idx], model.batch_size,
                        model.device, model.source, model.cv, model.meta)


def _probe(build: Callable[[ModelProfile], Any], model: ModelProfile, k: int) -> tuple[int, int]:
    """``(layers, places + transitions)`` of the probe build with ``k`` of the model's layers."""
    sub = _sample(model, k)
    net = build(sub)
    return sub.n_layers, len(net.places) + len(net.transitions)


def _line(model: ModelProfile, probes: tuple[tuple[int, int], tuple[int, int]]) -> int:
    """The probes' line at the model's layer count (never below the larger probe)."""
    (k1, e1), (k2, e2) = probes
    per_layer = (e2 - e1) / (k2 - k1)
    return max(e2, round(e1 + per_layer * (model.n_layers - k1)))


def estimate_elements(build: Callable[[ModelProfile], Any], model: ModelProfile,
                      reuse: tuple[tuple[int, int], tuple[int, int]] | None = None,
                      probes_out: list | None = None) -> int:
    """Places + transitions of ``build(model)``, extrapolated from two probe builds with
    :data:`_PROBE_LAYERS` and twice as many of the model's layers (exact count when the model
    is that small).

    Parameters
    ----------
    build : callable
        Builds the net of a profile.
    model : ModelProfile
        The profile whose net is estimated.
    reuse : pair of (layers, elements) or None
        The probes of an earlier estimate on a profile of the same kind (the same model with
        its layers grouped differently). When the smaller probe of ``model`` lands exactly on
        the smaller of ``reuse`` (same layers, same elements) and ``reuse``'s elements are
        proportional to its layers (no part shared between layers, such as all-reduce
        buckets), the larger probe is assumed to land on the larger one too and is not built:
        the estimate is ``reuse``'s line at ``model``'s layer count. This assumes that what changes between the two profiles
        (layer sizes and times) changes the elements per layer of every probe alike or not at
        all, as for nets whose pieces, buckets and transfers per layer do not depend on the
        layers' sizes.
    probes_out : list or None
        When given, the probes used are appended to it (nothing for an exact count).

    Returns
    -------
    int
        The estimated number of places and transitions.
    """
    if model.n_layers <= 2 * _PROBE_LAYERS:
        net = build(model)
        return len(net.places) + len(net.transitions)
    first = _probe(build, model, _PROBE_LAYERS)
    if reuse is not None and first == reuse[0] and reuse[1][1] * first[0] == first[1] * reuse[1][0]:
        probes = (first, reuse[1])
    else:
        probes = (first, _probe(build, model, 2 * _PROBE_LAYERS))
    if probes_out is not None:
        probes_out.extend(probes)
    return _line(model, probes)


def fit_layer_groups(build: Callable[[ModelProfile], Any], model: ModelProfile, workers: int,
                     default_cv: float) -> tuple[int | None, dict | None]:
    """The ``max_layers`` a fine net must use to fit the budget ``limit("max_net_bytes")``.

    Returns ``(None, None)`` when the net at full depth fits (or is too small to probe), else
    ``(groups, note)``: the largest number of layer groups (from the estimate's ratio with a
    :data:`MARGIN`, then halving) whose estimated size fits, and a dict describing the
    fallback for :func:`announce`. The estimate is within about +-20 % for PS and
    layer-wise nets (tests/test_budget.py) and can miss more where buckets, not layers,
    set the size (a 107-layer all-reduce in 4 buckets: -34 %), hence the margin.
    """
    L = model.n_layers
    if workers * L < PROBE_FROM:
        return None, None
    budget = limit("max_net_bytes")
    probes: list = []
    est = estimate_elements(build, model, probes_out=probes) * BYTES_PER_ELEMENT
    if est <= budget:
        return None, None
    groups = max(1, min(L - 1, math.floor(L * budget / est * MARGIN)))
    while True:
        g_est = estimate_elements(build, group_layers(model, groups, default_cv),
                                  reuse=(probes[0], probes[1]) if probes else None)
        if g_est * BYTES_PER_ELEMENT <= budget * MARGIN or groups == 1:
            break
        groups = max(1, groups // 2)
    return groups, {"layers": L, "layer_groups": groups, "estimated_bytes": est,
                    "estimated_bytes_grouped": g_est * BYTES_PER_ELEMENT,
                    "budget_bytes": budget}


def announce(note: dict, elements: int, what: str) -> None:
    """Record the built net's size in ``note`` (``built_bytes``: its places and transitions at
    :data:`BYTES_PER_ELEMENT`) and warn that ``what`` fell back to coarser layer groups."""
    note["built_bytes"] = elements * BYTES_PER_ELEMENT
    warnings.warn(
        f"{what}: the fine net of all {note['layers']} layers would take "
        f"~{format_bytes(note['estimated_bytes'])}, over the memory budget of "
        f"{format_bytes(note['budget_bytes'])} (max_net_bytes), so it was built with its layers "
        f"merged into {note['layer_groups']} groups (~{format_bytes(note['built_bytes'])}); "
        "pass max_layers=N to choose the groups, granularity='coarse', or raise the budget "
        "with SGDNET_MAX_NET_BYTES=N",
        stacklevel=4,
    )
