"""Workloads: model profiles, the compute model, transformer builders, clusters and
closed-form network costs."""

from __future__ import annotations

from .cluster import PLACEMENTS, Cluster
from .cluster_file import ClusterFile, Link, load_cluster_file
from .compute import DEVICES, Device, get_device, retime
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
from .ops import Op
from .profile import GRANULARITIES, SCHEMA_VERSION, Layer, Message, ModelProfile, Tensor
from .topology import FABRICS, INTERCONNECTS, Topology

__all__ = [
    "Layer",
    "Tensor",
    "Message",
    "Op",
    "ModelProfile",
    "SCHEMA_VERSION",
    "GRANULARITIES",
    "Device",
    "DEVICES",
    "get_device",
    "retime",
    "Cluster",
    "PLACEMENTS",
    "Topology",
    "INTERCONNECTS",
    "FABRICS",
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
