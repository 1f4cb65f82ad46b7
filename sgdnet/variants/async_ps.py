"""``async-ps``: asynchronous SGD (ASP / Hogwild-style) on a sharded parameter server.

Same net as ``sync-ps`` (:func:`.parameter_server.build_ps_net`) except on the server: shard ``k``
applies each worker's gradient piece as soon as it arrives (one update per worker and piece,
serialised on the shard's CPU) and returns the updated parameters to that worker only. Workers
therefore never wait for each other; they contend only for the PS NICs and CPUs, so total
throughput grows with the number of workers until a PS NIC (or CPU) saturates.

With ``aggregation="node"`` (:mod:`.ps_aggregate`) the node acts as one worker, as in MXNet's
``dist_device_async``: its GPUs' gradients are summed inside the node every step, the shard
applies each node's sum on arrival and returns it to that node, which broadcasts it to its GPUs;
nodes run at their own pace, the GPUs of a node in step with each other.
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from .options import PS_OPTIONS
from .parameter_server import build_ps_net
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS"]

OPTIONS = PS_OPTIONS


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained ASP: compute phase, then push / per-worker update / pull."""
    return build_ps_net("async-ps-coarse", model, cluster, synchronous=False, coarse=True,
                        **opts)


@register("async-ps", summary="ASP on a (sharded) parameter server: each push applied and "
          "returned on arrival", options=OPTIONS, coarse=build_coarse, lockstep=False)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained ASP: per-layer compute, per-piece push / per-worker update / pull."""
    return build_ps_net("async-ps-fine", model, cluster, synchronous=False, coarse=False,
                        **opts)
