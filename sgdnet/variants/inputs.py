"""What a variant is built from: a model profile and a cluster, given by name, path or dict."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import ClusterError, VariantError
from ..workload import Cluster, ModelProfile

__all__ = ["resolve_model", "resolve_cluster"]


def resolve_model(model: str | os.PathLike | ModelProfile) -> ModelProfile:
    """A :class:`ModelProfile` from a built-in name, a JSON path, or a profile.

    Raises
    ------
    UnknownNameError
        Unknown built-in name (the message lists them).
    VariantError
        ``model`` is neither a name/path nor a profile.
    """
    if isinstance(model, ModelProfile):
        return model
    if isinstance(model, (str, os.PathLike)):
        from .. import models

        return models.load(model)
    raise VariantError(
        f"model={model!r} ({type(model).__name__}) is not a model; give a built-in model name "
        "(sgdnet.models.names()), a profile JSON path, or a sgdnet.ModelProfile"
    )


def resolve_cluster(cluster: Cluster | Mapping[str, Any]) -> Cluster:
    """A :class:`Cluster` from a Cluster or a dict of its fields.

    Raises
    ------
    ClusterError
        Not a Cluster or dict, or a bad field.
    """
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, Mapping):
        return Cluster.from_dict(dict(cluster))
    raise ClusterError(
        f"cluster={cluster!r} ({type(cluster).__name__}) is not a cluster; give a sgdnet.Cluster "
        "or a dict of its fields, e.g. {'workers': 4, 'bandwidth': '10Gbps'}"
    )
