"""Layer grouping: merge consecutive layers of a profile to trade fidelity for speed on deep
models, keeping the compute mean and variance.

:func:`group_layers` merges consecutive layers into at most ``max_layers`` groups (sums of
times and bytes, and a CV that keeps the variance of the group's compute time). Groups are
contiguous and balanced by layer count. :func:`compute_cv` is the CV of a whole step's compute.
"""

from __future__ import annotations

import math

import numpy as np

from ..workload import Layer, ModelProfile

__all__ = ["compute_cv", "group_layers"]


def _layer_var(model: ModelProfile, i: int, default_cv: float) -> float:
    la = model.layers[i]
    c = model.layer_cv(i, default_cv)
    return c * c * (la.forward_s**2 + la.backward_s**2)


def compute_cv(model: ModelProfile, default_cv: float) -> float:
    """CV of a whole step's compute time, forward and backward of every layer drawn
    independently with their effective CVs (``default_cv`` where the profile has none)."""
    tot = model.compute_s
    if tot <= 0:
        return 0.0
    var = math.fsum(_layer_var(model, i, default_cv) for i in range(model.n_layers))
    return math.sqrt(var) / tot


def group_layers(model: ModelProfile, max_layers: int | None, default_cv: float = 0.0
                 ) -> ModelProfile:
    """Merge consecutive layers into at most ``max_layers`` groups.

    Groups are contiguous and balanced by layer count (``numpy.array_split``). A group's
    forward/backward times and gradient bytes are sums; its CV is chosen so that its forward
    plus backward variance equals the sum of its layers' (effective CVs, ``default_cv`` where the
    profile has none). ``None`` or ``max_layers >= n_layers`` returns ``model`` itself.
    """
    if max_layers is None or max_layers >= model.n_layers:
        return model
    groups = np.array_split(np.arange(model.n_layers), max_layers)
    lays = []
    for g in groups:
        idx = [int(x) for x in g]
        f = math.fsum(model.layers[i].forward_s for i in idx)
        b = math.fsum(model.layers[i].backward_s for i in idx)
        m = math.fsum(model.layers[i].grad_bytes for i in idx)
        var = math.fsum(_layer_var(model, i, default_cv) for i in idx)
        den = f * f + b * b
        cv = math.sqrt(var / den) if den > 0 else 0.0
        name = model.layers[idx[0]].name if len(idx) == 1 else (
            f"{model.layers[idx[0]].name}..{model.layers[idx[-1]].name}")
        lays.append(Layer(name, f, b, m, cv))
    return ModelProfile(model.name, lays, model.batch_size, model.device,
                        model.source + f"; grouped into {len(lays)} layer groups", model.cv,
                        model.meta)
