"""Workloads: model profiles, clusters and closed-form network costs."""

from __future__ import annotations

from .cluster import PLACEMENTS, Cluster
from .cluster_file import ClusterFile, Link, load_cluster_file
from .network import (
    allgather_time,
    allreduce_time,
    broadcast_time,
    ps_step_lower_bound,
    reduce_scatter_time,
    reduce_time,
    ring_allreduce_time,
    transfer_time,
    tree_allreduce_time,
)
from .profile import SCHEMA_VERSION, Layer, ModelProfile

__all__ = [
    "Layer",
    "ModelProfile",
    "SCHEMA_VERSION",
    "Cluster",
    "PLACEMENTS",
    "ClusterFile",
    "Link",
    "load_cluster_file",
    "transfer_time",
    "ring_allreduce_time",
    "tree_allreduce_time",
    "allreduce_time",
    "reduce_scatter_time",
    "allgather_time",
    "broadcast_time",
    "reduce_time",
    "ps_step_lower_bound",
]
