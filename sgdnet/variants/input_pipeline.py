"""The input pipeline on a node's host CPUs: batches prepared ahead of each GPU's steps.

A node's GPUs share its CPU cores for loading, decoding and augmenting their batches (a
tf.data pipeline or PyTorch ``DataLoader`` workers per training process, all on the same
cores). With a cluster topology whose ``input_s_per_sample > 0``
(:class:`~sgdnet.workload.topology.Topology`) every worker gets, through :func:`feed` (called by
:func:`.compute.compute_chain` and :func:`.compute.compute_phase`, so every variant has it):

* per node ``k`` one CPU pool ``n{k}.cpu``: a processor-sharing resource of capacity 1 (tags
  ``host="node{k}"``, ``kind="cpu"``) standing for the node's ``host_cores`` cores; ``m``
  batch preparations in progress each get ``1/m`` of it;
* per worker ``i`` a ``w{i}.prep`` transition ("prepare batch", tags ``kind="input"``) of
  ``b * input_s_per_sample / host_cores`` pool-seconds (``b``: the worker's batch, the
  profile's), i.e. the batch's CPU work divided among the cores it gets; it takes a credit
  from ``w{i}.prefetch`` (``prefetch + 1`` initially: the batch in use and ``prefetch`` ready
  ahead of it) and puts the batch in ``w{i}.batch``;
* the step's first compute operation (forward of layer 0, or the coarse compute phase) also
  takes a batch from ``w{i}.batch``, and the step's last one gives the credit back.

So one preparation alone takes ``b s / C`` seconds and the node's pool never does more than
``C / s`` samples per second (``C`` cores, ``s`` CPU-seconds per sample): when the pipeline is
the bottleneck a node's throughput is ``C / s`` samples/s whatever its number of GPUs, and when
it is not, its ``prefetch`` batches hide it and the throughput is the compute's
(tests/test_node_model.py). With ``prefetch = 0`` preparation and compute alternate. The
durations are deterministic (a pipeline's per-batch noise averages over many samples and
worker processes); a worker's straggler modulator does not apply to its CPU work.

Without a topology, or with ``input_s_per_sample = 0`` (synthetic data, the default) nothing is
added and nets are unchanged to the bit (tests/test_golden.py). Compute transitions made
outside :mod:`.compute` (``backup``'s ``late="abort"``, the ``coarse+`` nets) have no input
pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dists import Deterministic
from ..net import Net
from ..workload import Cluster, ModelProfile

__all__ = ["Feed", "feed", "prepare_s"]


@dataclass(frozen=True)
class Feed:
    """A worker's input pipeline: the place its batches arrive in and its credit place."""

    worker: int
    batch: str
    credit: str


def prepare_s(cluster: Cluster, batch: int) -> float:
    """Pool-seconds to prepare a batch of ``batch`` samples on one node:
    ``batch * input_s_per_sample / host_cores`` (0 without a topology or input cost)."""
    t = cluster.topology
    if t is None or not t.input_s_per_sample:
        return 0.0
    return batch * float(t.input_s_per_sample) / int(t.host_cores)


def feed(net: Net, model: ModelProfile, cluster: Cluster, worker: int) -> Feed | None:
    """Worker ``worker``'s input pipeline, made on the first call (later calls, e.g. from the
    lanes of ``backup``, return the same places); None when the cluster has none.

    The first compute operation of each step must take one token of ``Feed.batch`` and the
    step's last one put one token in ``Feed.credit``.
    """
    work = prepare_s(cluster, model.batch_size)
    if work <= 0:
        return None
    t = cluster.topology
    i = worker
    batch, credit, prep = f"w{i}.batch", f"w{i}.prefetch", f"w{i}.prep"
    if prep in net.transitions:
        return Feed(i, batch, credit)
    k = t.node_of(i)
    pool = f"n{k}.cpu"
    if pool not in net.resources:
        net.resource(pool, 1, "ps", host=f"node{k}", kind="cpu")
    net.place(batch, 0, worker=i)
    net.place(credit, int(t.prefetch) + 1, worker=i)
    net.transition(prep, Deterministic(work), inputs={credit: 1}, outputs={batch: 1},
                   resources=[pool], tags={"worker": i, "kind": "input", "step": False})
    return Feed(i, batch, credit)
