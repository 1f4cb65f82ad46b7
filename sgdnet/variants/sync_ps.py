"""``sync-ps``: bulk-synchronous SGD (BSP) on a sharded parameter server.

Fine-grained net (:func:`.parameter_server.build_ps_net` with ``synchronous=True``)
    Each worker runs forward of layers ``0..L-1`` then backward of ``L-1..0`` on its GPU.
    Backward of layer ``l`` releases the push of layer ``l``'s gradient pieces at once
    (wait-free backprop); shard ``k`` applies piece ``(l, c)`` when every worker's copy has
    arrived (one update on the shard's CPU, ``cluster.update_time(bytes)``), then sends the new
    parameters back to every worker; a worker's next forward of layer ``l`` waits for all of
    layer ``l``'s pieces. Tensors are spread over shards by :meth:`Cluster.shard_plan`
    (``shard_policy``) and optionally cut into chunks of at most ``partition_bytes``.

Coarse-grained net
    The model is one tensor: compute phase (forward + backward totals), then push, aggregate
    update and pull, with no overlap, as in the TPDS 2022 paper. On flows with dedicated,
    alike shards a worker's pieces travel as one flow per direction (:mod:`.ps_coarse`,
    ``3 W + S + 2`` transitions instead of ``~4 W S``).

``balance="batch"``: proportional sampling (batch ∝ speed, :func:`.compute.batch_sizes`), so the
barrier waits for nobody; throughput is counted in samples. ``comm_granularity``: a pushed
piece is a layer's, a tensor's or a bucket's gradient (fine nets).

Per-node aggregation (``aggregation="node"``, a cluster with a topology, :mod:`.ps_aggregate`):
the GPUs of a node reduce each piece inside the node (``local_reduce``), the node pushes and
pulls it once and broadcasts it inside the node; the shard's update waits for one copy per
node. TensorFlow's ``distributed_replicated`` and MXNet's ``dist_device_sync`` are
``local_reduce="device"``; BytePS is ``local_reduce="scatter"`` (PCIe machines) or ``"root"``
(NVLink machines) with ``placement="dedicated"``: its CPU summation servers.

Options: ``shards``, ``placement`` (dedicated PS hosts or colocated with workers),
``discipline`` (``flows``: max-min fair flows, the default; ``fifo`` or ``ps`` NICs), ``priority`` (P3 / ByteScheduler
style: lower layers first on the NICs), ``partition_bytes``, ``shard_policy``, ``max_layers``.
"""

from __future__ import annotations

from ..net import Net
from ..workload import Cluster, ModelProfile
from . import ps_coarse
from .options import SYNC_PS_OPTIONS
from .parameter_server import build_ps_net
from .registry import register

__all__ = ["build_fine", "build_coarse", "OPTIONS"]

OPTIONS = SYNC_PS_OPTIONS


def build_coarse(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Coarse-grained BSP: compute phase, then push / aggregate update / pull (on flows with
    alike dedicated shards one flow per worker and direction, :mod:`.ps_coarse`; with
    ``aggregation="node"`` the per-node net of :mod:`.ps_aggregate`)."""
    net = ps_coarse.build("sync-ps-coarse", model, cluster, **opts)
    if net is not None:
        return net
    return build_ps_net("sync-ps-coarse", model, cluster, synchronous=True, coarse=True, **opts)


@register("sync-ps", summary="BSP on a (sharded) parameter server, wait-free per-layer push",
          options=OPTIONS, coarse=build_coarse, lockstep=True)
def build_fine(model: ModelProfile, cluster: Cluster, **opts) -> Net:
    """Fine-grained BSP: per-layer compute, per-piece push / aggregate update / pull."""
    return build_ps_net("sync-ps-fine", model, cluster, synchronous=True, coarse=False, **opts)
