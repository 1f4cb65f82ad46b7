"""Layer grouping: merge consecutive layers of a profile to trade fidelity for speed on deep
models, keeping the compute mean and variance.

:func:`group_layers` merges consecutive layers into at most ``max_layers`` groups (sums of
times and bytes, and a CV that keeps the variance of the group's compute time). Groups are
contiguous and balanced by layer count. :func:`merge_small_layers` merges each layer of fewer
gradient bytes than a bound into the layers after it, so that every group reaches it (the
memory budget's first fallback for sharded parameter servers). :func:`compute_cv` is the CV of
a whole step's compute.
:func:`comm_profile` makes each layer one gradient message of :meth:`ModelProfile.messages`
(option ``comm_granularity``).
"""

from __future__ import annotations

import math

import numpy as np

from ..workload import Layer, ModelProfile, Tensor

__all__ = ["compute_cv", "group_layers", "merge_groups", "merge_small_layers", "shard_merge",
           "comm_profile", "message_profile"]


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
    groups = [[int(x) for x in g] for g in np.array_split(np.arange(model.n_layers), max_layers)]
    return merge_groups(model, groups, default_cv, f"grouped into {len(groups)} layer groups")


def merge_small_layers(model: ModelProfile, min_bytes: float, default_cv: float = 0.0
                       ) -> ModelProfile:
    """Merge consecutive layers so that every group has at least ``min_bytes`` of gradients.

    Layers are taken in forward order; a group closes as soon as its bytes reach ``min_bytes``,
    and a short last group joins the one before. With a parameter server's ``shard_min_bytes``
    as the bound, every group is then split over all shards (no tensor goes whole to one
    shard), which lets the fine ``sync-ps`` net carry each group's pieces as one flow group
    (:func:`.ps_coarse.fine_groups`). Returns ``model`` itself when no layer is merged (every
    layer is large enough, or the whole model is below the bound).
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    acc = 0.0
    for i, la in enumerate(model.layers):
        cur.append(i)
        acc += la.grad_bytes
        if acc >= min_bytes:
            groups.append(cur)
            cur, acc = [], 0.0
    if cur and groups:
        groups[-1] += cur
    elif cur:
        groups.append(cur)
    if len(groups) == model.n_layers:
        return model
    return merge_groups(model, groups, default_cv,
                        f"layers under {min_bytes:g} gradient bytes merged: {len(groups)} groups")


def shard_merge(model: ModelProfile, shards: int, shard_min_bytes: float,
                default_cv: float = 0.0) -> ModelProfile:
    """:func:`merge_small_layers` at a parameter server's ``shard_min_bytes``, where it makes
    every group split over the shards; ``model`` itself where it cannot: one shard, or a bound
    of 0 (every layer is split already) or infinity (every layer goes whole to one shard)."""
    if shards < 2 or not 0 < shard_min_bytes < math.inf:
        return model
    return merge_small_layers(model, shard_min_bytes, default_cv)


def merge_groups(model: ModelProfile, groups: list[list[int]], default_cv: float, note: str
                 ) -> ModelProfile:
    """Merge each group of consecutive layers (forward order) into one layer, keeping times,
    bytes and the variance of the compute time (see :func:`group_layers`)."""
    lays = []
    for g in groups:
        idx = sorted(int(x) for x in g)
        f = math.fsum(model.layers[i].forward_s for i in idx)
        b = math.fsum(model.layers[i].backward_s for i in idx)
        m = math.fsum(model.layers[i].grad_bytes for i in idx)
        var = math.fsum(_layer_var(model, i, default_cv) for i in idx)
        den = f * f + b * b
        cv = math.sqrt(var / den) if den > 0 else 0.0
        name = model.layers[idx[0]].name if len(idx) == 1 else (
            f"{model.layers[idx[0]].name}..{model.layers[idx[-1]].name}")
        tensors = None
        if all(model.layers[i].tensors is not None for i in idx):
            tensors = tuple(t if len(idx) == 1 else Tensor(f"{model.layers[i].name}.{t.name}",
                                                           t.nbytes, t.update_s)
                            for i in idx for t in model.layers[i].tensors)
        lays.append(Layer(name, f, b, m, cv, tensors))
    return ModelProfile(model.name, lays, model.batch_size, model.device,
                        model.source + f"; {note}", model.cv, model.meta)


def comm_profile(model: ModelProfile, granularity: str, bucket_bytes: float | None = None,
                 default_cv: float = 0.0) -> ModelProfile:
    """A profile whose layers are the gradient messages of ``granularity``.

    ``"layer"``: ``model``. ``"tensor"``: :meth:`ModelProfile.split_tensors` (one layer per
    parameter tensor, in the order and sizes of ``messages("tensor")``). ``"bucket"``: the
    tensors fused into buckets of ``bucket_bytes`` (``messages("bucket", bucket_bytes)``, DDP's
    rule), each bucket merged into one layer (:func:`merge_groups`): a bucket is ready when its
    last backward ends and the next forward of its first layer needs it back, so on a chain of
    layers the merged profile times its messages exactly. Profiles without tensor lists split
    nothing (their buckets are :meth:`ModelProfile.buckets` of the layers).
    """
    if granularity == "layer":
        return model
    split = model.split_tensors()
    if granularity == "tensor":
        return split
    groups = split.buckets(bucket_bytes)
    if all(len(g) == 1 for g in groups):
        return split
    return merge_groups(split, sorted(groups, key=min), default_cv,
                        f"one layer per {_mb(bucket_bytes)} bucket")


def _mb(nbytes: float | None) -> str:
    """``25 MB``-style text of a bucket size."""
    if nbytes is None or math.isinf(nbytes):
        return "whole-model"
    return f"{nbytes / 1e6:g} MB"


def message_profile(model: ModelProfile, comm_granularity: str, bucket_bytes
                    ) -> tuple[ModelProfile, float]:
    """The profile whose layers a fine all-reduce net fuses into buckets, and the fusion
    threshold, for ``comm_granularity`` (:meth:`ModelProfile.messages`): ``"layer"``: layers fused into
    ``bucket_bytes`` buckets (0: one all-reduce per layer); ``"tensor"``: one all-reduce per
    parameter tensor (``bucket_bytes`` unused); ``"bucket"``: tensors fused into
    ``bucket_bytes`` buckets, PyTorch DDP's rule (= ``messages("bucket", bucket_bytes)``)."""
    thr = math.inf if bucket_bytes == math.inf else bucket_bytes
    if comm_granularity == "layer":
        return model, thr
    return model.split_tensors(), (0.0 if comm_granularity == "tensor" else thr)

