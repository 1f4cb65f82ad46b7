"""Reduce-scatter and all-gather on flows, the collectives of sharded data parallelism (ZeRO,
FSDP), built of the rings of :mod:`.rings` on the links of :class:`.Fabric` as the
all-reduces of :mod:`.collectives` are.

A ring all-reduce is a reduce-scatter followed by an all-gather: ``2(m-1)`` rounds of
``S/m``, the first ``m-1`` reducing. :func:`shard_collective` builds either half alone, or the
whole all-reduce over a sub-group of the workers (HYBRID_SHARD's all-reduce of a shard among
the GPUs of one local rank), with :func:`.rings._ring` (``m-1`` rounds, ``m-1`` or 0 of them
reducing); NCCL's reduce-scatter and all-gather run its ring algorithm only (NCCL 2.18
``src/enqueue.cc``: ``ncclFuncReduceScatter`` / ``ncclFuncAllGather`` have no tree), so
there is no tree form here. Closed forms alone on their links, ``m`` members, per-edge
latency ``alpha`` and bandwidth ``B``: ``(m-1)(alpha + S/(m B))`` each
(:func:`sgdnet.workload.reduce_scatter_time`, :func:`sgdnet.workload.allgather_time`).

Forms
    * ``algorithm="ring"``: one ring over the members in :func:`.rings.channel_order` (node
      by node on a topology); ``channels=k`` (the whole cluster only): ``k`` concurrent rings
      of ``S/k``, ring ``k`` through NIC ``k mod nics`` (:func:`.collectives._channels`).
    * ``algorithm="hierarchical"`` (a topology of ``N`` nodes of ``g`` GPUs, the whole
      cluster): reduce-scatter = a reduce-scatter ring inside each node (``g-1`` rounds of
      ``S/g``) then ``g`` concurrent inter-node reduce-scatter rings, one per local rank
      (``N-1`` rounds of ``S/(gN)``); all-gather = the same two phases in reverse order.

    Rings of more than ``LOOP_ROUNDS`` rounds are streamed (one flow per ring edge,
    :func:`.rings._ring_pipe`); a single streamed ring on a fabric without per-byte CPU stages
    is its own begin and end barrier (its ``go`` takes every member's inputs, its ``join``
    gives every member's outputs: ``m + 2`` transitions and ``m + 1`` places), so the net of a
    collective grows as ``O(m)``.

The begin barrier takes every member's ``inputs`` and the ``before`` places (a collective
stream's sequence token), the end barrier gives every member's ``outputs`` and the ``after``
places. Transfers are tagged ``worker`` (the sender), ``kind="comm"``, ``collective=name``
and ``op`` (``"reduce_scatter"``, ``"all_gather"``, ``"all_reduce"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster
from .collectives import _channels
from .fabric import Fabric
from .fabric_bulk import TransferBatch
from .rings import _ring, _ring_pipe, barrier_ok, channel_order, multi_gpu_nodes, resolve_ring_form

__all__ = ["SHARD_OPS", "SHARD_ALGORITHMS", "shard_collective", "ring_phase", "ring_rounds",
           "node_groups", "rank_groups"]

#: The collectives of sharded data parallelism: (rounds, reducing rounds) of a ring of m.
SHARD_OPS = ("reduce_scatter", "all_gather", "all_reduce")
#: Algorithms of :func:`shard_collective` (NCCL runs reduce-scatter and all-gather as rings).
SHARD_ALGORITHMS = ("ring", "hierarchical")


def ring_rounds(op: str, m: int) -> tuple[int, int]:
    """``(rounds, reducing)`` of the ring of ``op`` over ``m`` members: ``(m-1, m-1)``
    reduce-scatter, ``(m-1, 0)`` all-gather, ``(2(m-1), m-1)`` all-reduce."""
    if op not in SHARD_OPS:
        raise VariantError(f"collective op {op!r}: use one of {list(SHARD_OPS)}")
    if op == "all_reduce":
        return 2 * (m - 1), m - 1
    return m - 1, (m - 1 if op == "reduce_scatter" else 0)


def node_groups(cluster: Cluster) -> list[list[int]]:
    """The GPUs of each node of ``cluster``'s topology (one group of all without one)."""
    t, n = cluster.topology, cluster.workers
    if t is None:
        return [list(range(n))]
    g = t.gpus_per_node
    return [list(range(k * g, (k + 1) * g)) for k in range(n // g)]


def rank_groups(cluster: Cluster) -> list[list[int]]:
    """The GPUs of each local rank across the nodes (GPU ``l`` of every node)."""
    t, n = cluster.topology, cluster.workers
    g = 1 if t is None else t.gpus_per_node
    return [list(range(lo, n, g)) for lo in range(g)]


def shard_collective(
    net: Net,
    fabric: Fabric,
    cluster: Cluster,
    name: str,
    op: str,
    nbytes: float,
    *,
    inputs: Mapping[int, Sequence[str]],
    outputs: Mapping[int, Sequence[str]],
    members: Sequence[int] | None = None,
    before: Mapping[str, int] | Sequence[str] = (),
    after: Sequence[str] = (),
    tags: Mapping[str, Any] | None = None,
    algorithm: str = "ring",
    channels: int = 1,
    ring_form: str = "auto",
) -> tuple[str, str]:
    """Add a reduce-scatter, all-gather or all-reduce of an ``nbytes`` buffer over ``members``.

    Parameters
    ----------
    op : {"reduce_scatter", "all_gather", "all_reduce"}
        What the ring does (:func:`ring_rounds`); ``nbytes`` is the whole buffer (each member
        holds or ends with ``nbytes / m`` of it for a reduce-scatter or all-gather).
    inputs, outputs : dict member -> place names
        What the begin barrier takes from, and the end barrier gives to, each member.
    members : list of int, optional
        The group, in ring order (default: every worker, in :func:`.rings.channel_order`).
    before : list of str or dict place -> weight
        Places the begin barrier also takes a token from (or ``weight`` tokens: a place into
        which every member puts one is a barrier of one arc, checked at once, where ``m``
        places are ``m`` arcs checked at each of ``m`` arrivals).
    after : list of str
        Places the end barrier also gives one token to.
    algorithm : {"ring", "hierarchical"}
        See the module docstring; ``"hierarchical"`` needs the whole cluster on a topology of
        several nodes of several GPUs.
    channels : int
        Concurrent rings of ``nbytes / channels`` (whole cluster, ``"ring"`` only).
    ring_form : {"auto", "unrolled", "looped", "pipelined"}
        How the rings are built (:func:`.rings.resolve_ring_form`).

    Returns
    -------
    (str, str)
        Names of the begin and end barriers (one name when they are one transition).
    """
    n = cluster.workers
    whole = members is None
    ring = channel_order(cluster, 0) if whole else [int(i) for i in members]
    m = len(ring)
    if algorithm not in SHARD_ALGORITHMS:
        raise VariantError(f"algorithm={algorithm!r}: sharded collectives run as "
                           f"{list(SHARD_ALGORITHMS)} (NCCL's reduce-scatter and all-gather "
                           "are rings); pass algorithm='ring'")
    hier = algorithm == "hierarchical"
    if hier and not (whole and multi_gpu_nodes(cluster) and n // cluster.topology.gpus_per_node > 1):
        raise VariantError("algorithm='hierarchical' reduces inside each node first, so it needs "
                           "the whole cluster on a topology of several nodes of several GPUs; "
                           "pass algorithm='ring'")
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise VariantError(f"channels={channels!r}: must be an integer >= 1 (1 = one ring)")
    if channels > 1 and (hier or not whole):
        raise VariantError(f"channels={channels} runs concurrent rings over the whole cluster; "
                           "a hierarchical or sub-group collective runs one: pass channels=1")
    rounds, red = ring_rounds(op, m)
    resolve_ring_form(ring_form, 0)  # checks the value
    form = ring_form if ring_form != "auto" else resolve_ring_form(
        "auto", max(rounds, 1) if not hier else _hier_longest(cluster, op))
    extra = {"op": op, **(tags or {})}
    sync = {"kind": "sync", "step": False, "collective": name, **extra}
    ctag = {"collective": name, "step": False, **extra}
    begin_in = {p: 1 for i in ring for p in inputs.get(i, ())}
    begin_in.update(before if isinstance(before, Mapping) else {p: 1 for p in before})
    end_out = {p: 1 for i in ring for p in outputs.get(i, ())}
    end_out.update({p: 1 for p in after})
    if not begin_in:
        raise VariantError(f"collective {name!r} has no inputs; give each member an input place")
    if m == 1 or nbytes == 0:
        net.transition(f"{name}.begin", 0.0, inputs=begin_in, outputs=end_out, tags=sync)
        return f"{name}.begin", f"{name}.begin"
    if not hier and channels == 1:
        return ring_phase(net, fabric, name, ring, nbytes / m, rounds, red, begin_in, end_out,
                          ctag, sync, form)
    ready = {i: net.place(f"{name}.w{i}.ready", worker=i).name for i in ring}
    done = {i: net.place(f"{name}.w{i}.done", worker=i).name for i in ring}
    net.transition(f"{name}.begin", 0.0, inputs=begin_in, outputs={p: 1 for p in ready.values()},
                   tags=sync)
    if hier:
        _hierarchical(net, fabric, cluster, name, op, nbytes, ready, done, ctag, sync, form)
    elif channels > 1:
        _channels(net, cluster, fabric, name, nbytes, channels, ready, done, ctag, sync, form,
                  rounds=rounds, reducing=red)
    else:
        _ring(net, fabric, name, ring, nbytes / m, rounds, red, ready, done, ctag, sync,
              form=form)
    net.transition(f"{name}.end", 0.0, inputs={p: 1 for p in done.values()}, outputs=end_out,
                   tags=sync)
    return f"{name}.begin", f"{name}.end"


class _Batch(TransferBatch):
    """A :class:`.fabric_bulk.TransferBatch` that answers :meth:`.Fabric.latency` too, so a
    streamed ring (:func:`.rings._ring_pipe`) is built through it as through the net and the
    fabric (``m`` transfers made directly instead of through the checked builder)."""

    def latency(self, src, dst) -> float:
        """:meth:`.Fabric.latency` of the batch's fabric."""
        return self.fabric.latency(src, dst)


def ring_phase(net: Net, fabric: Fabric, name: str, ring: Sequence[int], chunk: float,
               rounds: int, reducing: int, begin_in: Mapping[str, int],
               end_out: Mapping[str, int], ctag: Mapping[str, Any], sync: Mapping[str, Any],
               form: str = "auto") -> tuple[str, str]:
    """One ring of ``rounds`` rounds of ``chunk`` over ``ring`` between a begin barrier taking
    ``begin_in`` and an end barrier giving ``end_out``; a streamed ring on a fabric without
    CPU stages is its own barrier (``{name}.go``, ``{name}.join``: ``m + 2`` transitions).
    The coarse sharded nets run a whole phase of collectives as one such ring
    (:mod:`.sharded_coarse`)."""
    ctag, sync = dict(ctag), dict(sync)
    form = resolve_ring_form(form, rounds)
    if form == "pipelined" and barrier_ok(fabric) and len(ring) > 1:
        with _Batch(fabric) as b:  # the same elements, added at once (.fabric_bulk)
            _ring_pipe(b, b, name, list(ring), chunk, rounds, reducing, {}, {}, ctag, sync,
                       barrier=True, go_inputs=dict(begin_in), join_outputs=dict(end_out))
        return f"{name}.go", f"{name}.join"
    ready = {i: net.place(f"{name}.w{i}.ready", worker=i).name for i in ring}
    done = {i: net.place(f"{name}.w{i}.done", worker=i).name for i in ring}
    net.transition(f"{name}.begin", 0.0, inputs=dict(begin_in),
                   outputs={p: 1 for p in ready.values()}, tags=sync)
    _ring(net, fabric, name, list(ring), chunk, rounds, reducing, ready, done, ctag, sync,
          form=form)
    net.transition(f"{name}.end", 0.0, inputs={p: 1 for p in done.values()},
                   outputs=dict(end_out), tags=sync)
    return f"{name}.begin", f"{name}.end"


def _hier_longest(cluster: Cluster, op: str) -> int:
    """Rounds of the longest ring of a hierarchical ``op`` (what ``ring_form="auto"`` reads)."""
    g = cluster.topology.gpus_per_node
    return max(ring_rounds(op, g)[0], ring_rounds(op, cluster.workers // g)[0])


def _hierarchical(net: Net, fabric: Fabric, cluster: Cluster, name: str, op: str,
                  nbytes: float, ready: dict, done: dict, ctag: dict, sync: dict,
                  form: str) -> None:
    """Two ring phases: inside each node over ``S/g`` chunks, across the nodes per local rank
    over ``S/(gN)`` chunks (reduce-scatter: node phase first; all-gather: node phase last;
    all-reduce: node reduce-scatter, rank all-reduce, node all-gather). A GPU starts a phase
    when its own previous phase is done."""
    g = cluster.topology.gpus_per_node
    N = cluster.workers // g
    nodes, ranks = node_groups(cluster), rank_groups(cluster)
    intra = ("n", nodes, nbytes / g, g)
    inter = ("l", ranks, nbytes / (g * N), N)
    if op == "reduce_scatter":
        phases = [(*intra, "reduce_scatter"), (*inter, "reduce_scatter")]
    elif op == "all_gather":
        phases = [(*inter, "all_gather"), (*intra, "all_gather")]
    else:
        phases = [(*intra, "reduce_scatter"), (*inter, "all_reduce"), (*intra, "all_gather")]
    src = ready
    for x, (key, groups, chunk, m, phase_op) in enumerate(phases):
        last = x == len(phases) - 1
        dst = done if last else {i: net.place(f"{name}.p{x}.w{i}", worker=i).name for i in ready}
        rounds, red = ring_rounds(phase_op, m)
        for k, members in enumerate(groups):
            _ring(net, fabric, f"{name}.p{x}.{key}{k}", members, chunk, rounds, red, src, dst,
                  {**ctag, "phase": phase_op}, sync, form=form)
        src = dst
