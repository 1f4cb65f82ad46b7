"""Framework profiles: the variant and options each training framework runs by default.

A user knows which framework they train with, rarely its engine's knobs. :data:`FRAMEWORKS`
maps each framework to the sgdnet variant it is and the options its documented defaults imply;
:func:`framework_options` resolves one for a cluster, and ``sgdnet.predict(...,
framework="ddp")`` / ``sgdnet predict --framework ddp`` use it (explicit options win).

Defaults and their sources
    ``ddp`` (PyTorch ``DistributedDataParallel``): ``bucket_cap_mb=25`` (25 MiB), the first
    bucket closed at ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB, parameters
    bucketed in reverse registration order (the order gradients become ready) and each bucket
    all-reduced as soon as it is full, overlapping the backward pass (``torch/nn/parallel/
    distributed.py``, ``torch/csrc/distributed/c10d/reducer.cpp``
    ``compute_bucket_assignment_by_size``); NCCL picks the algorithm, protocol and channels.
    ``horovod``: ``HOROVOD_FUSION_THRESHOLD`` 128 MiB and ``HOROVOD_CYCLE_TIME`` 1 ms since
    v0.21.0 (64 MiB and 5 ms before: horovod CHANGELOG v0.21.0, #2468; pass
    ``bucket_bytes="64MiB", cycle_time="5ms"`` for older runs); every cycle the ready tensors
    are fused up to the threshold (``docs/tensor-fusion.rst``); NCCL all-reduce.
    ``tf-ps``: tf_cnn_benchmarks ``--variable_update=parameter_server`` (its default): "each
    tower gets a copy of the variables from the parameter server, and sends its gradients to
    the param server", no aggregation inside the node; variables placed whole, round-robin over
    the PS tasks (``tf.train.replica_device_setter``); gRPC (``--server_protocol=grpc``) over
    TCP (tensorflow/benchmarks ``scripts/tf_cnn_benchmarks/benchmark_cnn.py``).
    ``tf-replicated``: ``--variable_update=distributed_replicated``: the node's towers'
    gradients summed on the node's devices, then pushed to the parameter servers; gRPC.
    ``byteps``: tensors partitioned into ``BYTEPS_PARTITION_BYTES`` = 4,096,000-byte pieces
    (``byteps/common/global.cc``), reduced inside the node onto the root GPU, pushed to the CPU
    servers, one server per machine as its best-practice guide recommends, over ps-lite's
    TCP (ZeroMQ) unless ``DMLC_ENABLE_RDMA=1``.
    ``mxnet-kvstore``: ``kvstore='dist_device_sync'``: gradients aggregated on the node's GPUs,
    then pushed to the servers (MXNet's ``tools/launch.py`` starts as many servers as workers);
    arrays above ``MXNET_KVSTORE_BIGARRAY_BOUND`` = 1,000,000 elements (4 MB of fp32) split
    over all servers, smaller ones whole on one; ps-lite over TCP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import UnknownNameError, VariantError

__all__ = ["Framework", "FRAMEWORKS", "get_framework", "framework_options"]


@dataclass(frozen=True)
class Framework:
    """One framework's defaults.

    Attributes
    ----------
    name : str
    variant : str
        The sgdnet variant it runs (``"allreduce"`` or ``"sync-ps"``).
    options : mapping
        The variant options its defaults imply.
    cluster : mapping
        Cluster fields its defaults set (e.g. the PS's ``shard_min_bytes``).
    transport : str or None
        The transport it always uses (``"tcp"`` for gRPC / ps-lite), or None (NCCL: whatever
        the cluster's NICs are; give ``transport=`` to :func:`sgdnet.predict`).
    servers_per_node : bool
        One parameter-server shard per node, beside its GPUs (BytePS, MXNet), when the
        cluster has a topology and no shard count is given.
    source : str
        Where the defaults come from (see the module docstring).
    """

    name: str
    variant: str
    options: Mapping[str, Any] = field(default_factory=dict)
    cluster: Mapping[str, Any] = field(default_factory=dict)
    transport: str | None = None
    servers_per_node: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "cluster", MappingProxyType(dict(self.cluster)))


_MIB = 1024 * 1024
_NCCL = {"algorithm": "nccl", "channels": "auto"}

#: The framework profiles by name.
FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("ddp", "allreduce",
              {"comm_granularity": "bucket", "bucket_bytes": 25 * _MIB, "fusion": "ddp",
               "first_bucket_bytes": 1 * _MIB, "overlap": True, **_NCCL},
              source="PyTorch DistributedDataParallel: bucket_cap_mb=25, "
                     "_DEFAULT_FIRST_BUCKET_BYTES=1MiB, reverse parameter order, NCCL"),
    Framework("horovod", "allreduce",
              {"comm_granularity": "bucket", "bucket_bytes": 128 * _MIB, "fusion": "horovod",
               "cycle_time": 1e-3, "overlap": True, **_NCCL},
              source="Horovod >= 0.21: HOROVOD_FUSION_THRESHOLD=128MiB, HOROVOD_CYCLE_TIME=1ms "
                     "(64MiB / 5ms before, CHANGELOG #2468), NCCL"),
    Framework("tf-ps", "sync-ps",
              {"comm_granularity": "tensor", "aggregation": "none",
               "shard_policy": "least_loaded"},
              cluster={"shard_min_bytes": math.inf}, transport="tcp",
              source="tf_cnn_benchmarks --variable_update=parameter_server (default), "
                     "variables placed whole on the least-loaded PS task by bytes "
                     "(tf_cnn_benchmarks variable_mgr.py: replica_device_setter with "
                     "GreedyLoadBalancingStrategy(num_ps, byte_size_load_fn)), gRPC"),
    Framework("tf-replicated", "sync-ps",
              {"comm_granularity": "tensor", "aggregation": "node", "local_reduce": "device",
               "shard_policy": "round_robin"},
              cluster={"shard_min_bytes": math.inf}, transport="tcp",
              source="tf_cnn_benchmarks --variable_update=distributed_replicated: the PS "
                     "shadow variables placed by replica_device_setter's default round-robin "
                     "(benchmark_cnn.py param_server_device), gRPC"),
    Framework("byteps", "sync-ps",
              {"comm_granularity": "tensor", "aggregation": "node", "local_reduce": "root",
               "partition_bytes": 4096000.0, "placement": "colocated"},
              cluster={"shard_min_bytes": math.inf}, transport="tcp", servers_per_node=True,
              source="BytePS: BYTEPS_PARTITION_BYTES=4096000 (byteps/common/global.cc), "
                     "servers = machines, ps-lite TCP"),
    Framework("mxnet-kvstore", "sync-ps",
              {"comm_granularity": "tensor", "aggregation": "node", "local_reduce": "device",
               "placement": "colocated"},
              cluster={"shard_min_bytes": 4e6}, transport="tcp", servers_per_node=True,
              source="MXNet kvstore dist_device_sync, MXNET_KVSTORE_BIGARRAY_BOUND=1e6 "
                     "elements, servers = workers (tools/launch.py), ps-lite TCP"),
)}


def get_framework(name: str | Framework) -> Framework:
    """The framework ``name`` (a :class:`Framework` is returned as is).

    Raises
    ------
    UnknownNameError
        An unknown name.
    """
    if isinstance(name, Framework):
        return name
    if name not in FRAMEWORKS:
        raise UnknownNameError(f"framework={name!r}: unknown framework; use one of "
                               f"{sorted(FRAMEWORKS)}")
    return FRAMEWORKS[name]


def framework_options(framework: str | Framework, variant: str | None = None,
                      cluster: Any = None) -> tuple[str, dict[str, Any]]:
    """The variant and options of ``framework``.

    Parameters
    ----------
    framework : str or Framework
        A name of :data:`FRAMEWORKS`.
    variant : str, optional
        The variant asked for; it must be the framework's (None: the framework's).
    cluster : Cluster, optional
        With a topology, frameworks that run one server per machine get
        ``shards = nodes`` (BytePS, MXNet).

    Returns
    -------
    (str, dict)
        The variant and its options (the caller's explicit options should be laid over them).

    Raises
    ------
    UnknownNameError
        An unknown framework.
    VariantError
        ``variant`` is not the framework's.
    """
    fw = get_framework(framework)
    if variant is not None and variant != fw.variant:
        raise VariantError(f"framework={fw.name!r} runs variant {fw.variant!r}, not "
                           f"{variant!r}; pass variant={fw.variant!r} (or None), or drop "
                           "framework= and give the options yourself")
    opts = dict(fw.options)
    t = getattr(cluster, "topology", None)
    if fw.servers_per_node and t is not None:
        opts["shards"] = t.nodes(cluster.workers)
    return fw.variant, opts
