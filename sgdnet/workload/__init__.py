"""Workloads: model profiles, the compute model, transformer and CNN builders, clusters, the
node model, frameworks, NCCL's tuning model, transports and closed-form network costs."""

from __future__ import annotations

from .cluster import PLACEMENTS, Cluster
from .cluster_file import ClusterFile, Link, load_cluster_file
from .compute import DEVICE_ALIASES, DEVICES, GRAD_DTYPES, Device, get_device, load_device, retime
from .frameworks import FRAMEWORKS, Framework, framework_options, get_framework
from .nccl import NcclChoice, nccl_allreduce_choice, nccl_default_channels
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
from .node import NodeCalibration, calibrate_input_pipeline, write_node_calibration
from .ops import Op
from .profile import GRANULARITIES, SCHEMA_VERSION, Layer, Message, ModelProfile, Tensor
from .topology import FABRICS, INTERCONNECTS, PCIE_X16, Topology
from .transports import TRANSPORTS, Transport, apply_transport, get_transport

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
    "load_device",
    "DEVICE_ALIASES",
    "GRAD_DTYPES",
    "retime",
    "Framework",
    "FRAMEWORKS",
    "get_framework",
    "framework_options",
    "Transport",
    "TRANSPORTS",
    "get_transport",
    "apply_transport",
    "NcclChoice",
    "nccl_allreduce_choice",
    "nccl_default_channels",
    "NodeCalibration",
    "calibrate_input_pipeline",
    "write_node_calibration",
    "PCIE_X16",
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
