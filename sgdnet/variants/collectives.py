"""Collectives: all-reduce (ring, tree, hierarchical; fine and coarse, side by side) and the
parameter-server exchange (push, update, pull), written once and used by every variant.

All-reduce
    :func:`allreduce` reduces ``nbytes`` among all workers. It starts with a zero-duration
    barrier ``{name}.begin`` that takes every worker's inputs and the token of a *collective
    stream* place (one collective at a time per stream, in the order they became ready, as NCCL
    runs collectives of one communicator on one stream), and ends with a barrier
    ``{name}.end`` that gives the stream token back and produces every worker's outputs.

    * fine (``coarse=False``): ring all-reduce, step by step (``ring_form``: rings of more than
      ``LOOP_ROUNDS`` rounds are streamed, one flow per ring edge, :func:`_ring_pipe`):
      ``2(n-1)`` rounds; in round ``r``
      worker ``i`` sends ``nbytes / n`` to worker ``i+1 mod n`` with :meth:`.Fabric.transfer`
      (uplink of ``i`` and downlink of ``i+1``, then latency); worker ``i``'s round ``r+1`` send
      waits for its round ``r`` send to leave the link and for the chunk of round ``r`` from
      worker ``i-1`` to arrive. Deterministic homogeneous cost ``2(n-1)(alpha + S/(n B))``,
      the closed form of :func:`sgdnet.workload.ring_allreduce_time`.
    * coarse: one transition per worker ``{name}.w{i}`` holding its own uplink and downlink for
      the closed-form ring time (CV ``comm_cv``), all started together by the barrier
      (:meth:`.Fabric.allreduce_share`); the end barrier waits for the slowest.

    * ``algorithm="tree"``: a binary tree over the ranks (parent of ``i`` is ``(i-1)//2``):
      fine nets reduce up the tree (a node sends the whole message to its parent once its own
      input and all its children's messages are there) and broadcast down it (a node forwards
      to its children, left child first, once its parent's message arrived); every hop is a
      :meth:`.Fabric.transfer`, so a parent's downlink (uplink) serialises its two children's
      messages. Coarse nets use :func:`sgdnet.workload.tree_allreduce_time` (store and
      forward, ``chunks=1``). For ``n <= 4`` the fine tree takes exactly ``2 ceil(log2 n)
      (alpha + S/B)``; for larger ``n`` the serialisation at inner nodes makes it slower than
      that optimistic closed form.

    * ``algorithm="dbtree"``: NCCL's double binary tree (:func:`double_binary_tree`): two
      trees, each an inner node of at most one, reduce and broadcast half of the data each at
      the same time; on two ranks ``2 (alpha + S/(2B))``, on four ``4 alpha + 3 S/B``
      (store and forward, tests/test_dbtree.py). On a topology with several GPUs per node it
      is NCCL's multi-node tree (:func:`.trees.node_tree`): the double tree over the nodes, a
      chain of GPUs inside each node, ``channels`` such pairs (channel ``k``'s chains start at
      NIC ``k mod nics``), streamed (one flow per edge and direction, :func:`.trees._tree_pipe`):
      on two nodes every NIC direction carries ``S / nics`` (half a ring's bytes, why NCCL
      picks its tree there), on four ``2 S / nics`` (tests/test_dbtree.py); coarse nets
      build this streamed tree too (``O(GPUs)`` transitions per collective). Otherwise
      coarse nets use the tree closed form, which assumes what the double tree gives (a
      node's two children cost one hop's bandwidth). The heap tree of ``"tree"`` is kept as
      it is.

    * ``algorithm="hierarchical"`` (needs a cluster topology of ``N`` nodes of ``g`` GPUs):
      an intra-node reduce-scatter ring, ``g`` concurrent inter-node ring all-reduces of
      ``S/g`` (one per local rank, each GPU through its own NIC, so GPUs sharing a NIC share
      it), an intra-node all-gather ring; coarse nets run it with pipelined rings (one flow
      per ring edge, :func:`_ring_pipe`), whatever the rounds, each ring ending with one join
      (``barrier=True``). Deterministic,
      alone on the links: ``2 (g-1)(alpha_i + S/(g B_i)) + 2(N-1)(alpha + S/(g N B_share))``
      with ``B_share = B_nic * nics / g``; ``chunks=k`` pipelines the phases in ``k`` pieces.

    * ``algorithm="allgather"`` (top-k compression, :mod:`.compression`): ``nbytes`` is each
      worker's contribution; a ring all-gather, ``n-1`` rounds in which each worker forwards one
      ``nbytes`` piece to its successor, fine and coarse nets alike:
      ``(n-1)(alpha + nbytes/B)``.

    Transfers are tagged ``worker`` (the sender), ``kind="comm"``, ``collective=name``.

Parameter-server exchange
    :class:`PSExchange` adds the push / update / pull stages of one piece;
    :func:`ps_average` composes them into a blocking average of a whole tensor over the shards
    (``local-sgd`` with ``sync="ps"``); :func:`ps_cluster` applies a variant's ``shards`` /
    ``placement`` options to the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster
from .durations import duration
from .fabric import Fabric
from .fabric_bulk import TransferBatch
from .rings import (  # noqa: F401 - ring forms re-exported: allreduce and tests import them from here
    LOOP_ROUNDS,
    RING_FORMS,
    _ring,
    _ring_pipe,
    barrier_ok,
    channel_order,
    multi_gpu_nodes,
    resolve_ring_form,
    ring_is_looped,
)
from .trees import _dbtree, _tree, double_binary_tree, nccl_btree, node_tree  # noqa: F401 - re-exported

#: All-reduce algorithms ("allgather": every worker ends with every worker's ``nbytes``, the
#: exchange of top-k sparse gradients, :mod:`.compression`).
ALGORITHMS = ("ring", "tree", "dbtree", "hierarchical", "allgather")

__all__ = ["ALGORITHMS", "double_binary_tree", "nccl_btree", "LOOP_ROUNDS", "RING_FORMS", "ring_is_looped",
           "resolve_ring_form", "channel_order", "collective_stream", "allreduce", "ps_cluster",
           "PSExchange", "ps_average"]


def collective_stream(net: Net, name: str = "ar.stream") -> str:
    """The collective-stream place ``name`` (one token), created on first use."""
    if name not in net.places:
        net.place(name, 1)
    return name


def allreduce(
    net: Net,
    fabric: Fabric,
    cluster: Cluster,
    name: str,
    nbytes: float,
    *,
    inputs: Mapping[int, Sequence[str]],
    outputs: Mapping[int, Sequence[str]],
    coarse: bool,
    stream: str | None = "ar.stream",
    tags: Mapping[str, Any] | None = None,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    ring_form: str = "auto",
) -> tuple[str, str]:
    """Add an all-reduce of ``nbytes`` among the cluster's workers (see the module docstring).

    Parameters
    ----------
    inputs, outputs : dict worker -> place names
        What the begin barrier consumes from, and the end barrier produces to, for each worker.
    coarse : bool
        One closed-form transfer per worker (True) or the ring step by step (False).
    stream : str or None
        Collective-stream place (created if missing); ``None``: no ordering between collectives.
    tags : dict, optional
        Extra tags of every transition (e.g. ``layer``).
    algorithm : {"ring", "tree", "dbtree", "hierarchical", "nccl"}
        Ring all-reduce (reduce-scatter then all-gather), binary-tree reduce + broadcast,
        NCCL's double binary tree, or
        the hierarchical all-reduce of a cluster topology (:func:`_hierarchical`); ``"nccl"``:
        ring or dbtree as NCCL's tuning model picks it for ``nbytes`` on the cluster, with the
        protocol's wire bytes and base latency (the begin barrier's duration;
        :func:`sgdnet.workload.nccl.nccl_plan`).
    chunks : int
        ``"hierarchical"`` only: pieces the message is pipelined in through its three phases
        (1: no pipelining).
    channels : int
        ``"ring"`` and ``"dbtree"`` only (fine, or coarse on a topology with several GPUs per
        node, where a coarse ring's channels are pipelined rings): concurrent rings (double
        trees) of ``nbytes / channels`` each, as NCCL's channels; on a topology ring ``k``
        enters and leaves every node through NIC ``k mod nics`` (:func:`channel_order`), and
        the chains of double tree ``k`` start at that NIC's first GPU, so
        ``channels = nics_per_node`` uses every NIC.
        ``"auto"`` (or ``algorithm="nccl"``): see :func:`sgdnet.workload.nccl.nccl_plan`.
    ring_form : {"auto", "unrolled", "looped", "pipelined"}
        How the rings of ``"ring"`` (fine), ``"hierarchical"`` and ``"allgather"`` all-reduces
        are built: one transfer per member and round (``m * rounds`` transfers; the net stays
        an event graph), a looped sub-net with a round counter (``O(m)`` transitions, same
        timing, ``O(m * rounds)`` events; :func:`_ring_loop`), or one streamed flow per ring
        edge (``O(m)`` transitions and events; :func:`_ring_pipe`); ``"auto"``: every ring
        of the collective pipelined when its longest ring has more than ``LOOP_ROUNDS``
        rounds (and every ring of a coarse net), else unrolled. For ``"dbtree"`` (fine):
        ``"pipelined"`` streams every tree edge as one flow per direction
        (:func:`.trees._tree_pipe`, as NCCL streams its trees in chunks), any other form stores
        and forwards the whole message at every hop; ``"auto"`` is pipelined on a topology
        with several GPUs per node, else store and forward.

    Returns
    -------
    (str, str)
        Names of the begin and end barriers.
    """
    lat0 = 0.0  # algorithm="nccl": NCCL's choice for this size (sgdnet.workload.nccl.nccl_plan)
    if algorithm == "nccl" or channels == "auto":
        from ..workload.nccl import nccl_plan

        algorithm, nbytes, channels, lat0 = nccl_plan(cluster, nbytes, algorithm, channels, coarse)
    if algorithm not in ALGORITHMS:
        raise VariantError(f"algorithm={algorithm!r}: use one of {list(ALGORITHMS)} or 'nccl'")
    if algorithm == "hierarchical" and cluster.topology is None:
        raise VariantError(
            "algorithm='hierarchical' reduces inside each node first, so it needs nodes: give "
            "the Cluster a topology (Cluster(topology=Topology(gpus_per_node=8, ...))) or use "
            "algorithm='ring'"
        )
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise VariantError(f"chunks={chunks!r}: must be an integer >= 1 (1 = no pipelining)")
    if chunks > 1 and algorithm != "hierarchical":
        raise VariantError(f"chunks={chunks} pipelines the phases of algorithm='hierarchical'; "
                           f"algorithm={algorithm!r} has none: pass chunks=1")
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise VariantError(f"channels={channels!r}: must be an integer >= 1 (1 = one ring)")
    nodes = multi_gpu_nodes(cluster)
    node_tree_net = algorithm == "dbtree" and nodes  # NCCL's multi-node tree, fine or coarse
    # NCCL's channels of a coarse ring on multi-GPU nodes: pipelined rings, one per channel
    channel_rings = algorithm == "ring" and nodes and channels > 1
    if channels > 1 and (algorithm not in ("ring", "dbtree")
                         or (coarse and not (node_tree_net or channel_rings))):
        raise VariantError(f"channels={channels} runs concurrent rings (or double trees) of an "
                           f"algorithm='ring' (or 'dbtree') all-reduce, fine, or coarse on "
                           f"nodes of several GPUs; with algorithm={algorithm!r}"
                           f"{' (coarse)' if coarse else ''} pass channels=1")
    resolve_ring_form(ring_form, 0)  # checks the value
    n = cluster.workers
    if ring_form == "auto" and algorithm != "dbtree":
        # one form for all the collective's rings, set by its longest (trees: see _dbtree)
        g = cluster.topology.gpus_per_node if algorithm == "hierarchical" else n
        longest = (max(g - 1, 2 * (n // g - 1)) if algorithm == "hierarchical"
                   else n - 1 if algorithm == "allgather" else 2 * (n - 1))
        # a coarse net's rings are flows of their closed-form bytes whatever their length
        ring_form = "pipelined" if coarse else resolve_ring_form("auto", longest)
    extra = dict(tags or {})
    begin_in = {p: 1 for i in range(n) for p in inputs.get(i, ())}
    end_out = {p: 1 for i in range(n) for p in outputs.get(i, ())}
    if stream is not None:
        collective_stream(net, stream)
        begin_in[stream] = 1
        end_out[stream] = 1
    if not begin_in:
        raise VariantError(f"all-reduce {name!r} has no inputs; give each worker an input place")
    sync = {"kind": "sync", "step": False, "collective": name, **extra}
    if n == 1 or nbytes == 0:
        net.transition(f"{name}.begin", 0.0, inputs=begin_in, outputs=end_out, tags=sync)
        return f"{name}.begin", f"{name}.begin"
    ready = {i: net.place(f"{name}.w{i}.ready", worker=i).name for i in range(n)}
    net.transition(f"{name}.begin", lat0, inputs=begin_in, outputs={p: 1 for p in ready.values()},
                   tags=sync)
    done = {i: net.place(f"{name}.w{i}.done", worker=i).name for i in range(n)}
    ctag = {"collective": name, "step": False, **extra}
    if (coarse and algorithm not in ("hierarchical", "allgather") and not node_tree_net
            and not channel_rings):
        for i in range(n):
            fabric.allreduce_share(f"{name}.w{i}", nbytes, i, algorithm, inputs=[ready[i]],
                                   outputs=[done[i]], tags={"worker": i, "kind": "comm", **ctag})
    elif algorithm == "tree":
        _tree(net, fabric, name, nbytes, n, ready, done, ctag)
    elif algorithm == "allgather":  # ring all-gather of nbytes per worker, fine and coarse
        _ring(net, fabric, name, list(range(n)), nbytes, n - 1, 0, ready, done, ctag, sync)
    elif algorithm == "dbtree":
        piped = ring_form == "pipelined" or (ring_form == "auto" and nodes) or coarse
        _dbtree(net, fabric, cluster, name, nbytes, ready, done, ctag, channels, piped)
    elif algorithm == "hierarchical":
        _hierarchical(net, fabric, cluster, name, nbytes, ready, done, ctag, sync, chunks,
                      ring_form)
    elif channels == 1:
        _ring(net, fabric, name, list(range(n)), nbytes / n, 2 * (n - 1), n - 1, ready, done,
              ctag, sync, form=ring_form)
    else:
        _channels(net, cluster, fabric, name, nbytes, channels, ready, done, ctag, sync,
                  ring_form)
    net.transition(f"{name}.end", 0.0, inputs={p: 1 for p in done.values()}, outputs=end_out,
                   tags=sync)
    return f"{name}.begin", f"{name}.end"


#: Whether the pipelined phases of a hierarchical all-reduce end as whole rings
#: (``_ring_pipe(barrier=True)``); False builds the per-member form (kept for comparison,
#: tests/test_hierarchical_barrier.py).
HIERARCHICAL_BARRIER = True


def _channels(net: Net, cluster: Cluster, fabric: Fabric, name: str, nbytes: float,
              channels: int, ready: dict, done: dict, ctag: dict, sync: dict,
              form: str = "auto", rounds: int | None = None,
              reducing: int | None = None) -> None:
    """``channels`` concurrent ring all-reduces of ``nbytes / channels`` in the orders of
    :func:`channel_order`, each on its own connections (lane ``k + 1``); a GPU is done when
    all its rings are. ``rounds`` / ``reducing`` (default ``2(n-1)`` / ``n-1``, an
    all-reduce): ``n-1`` / ``n-1`` is a reduce-scatter, ``n-1`` / 0 an all-gather
    (:mod:`.shard_collectives`)."""
    n = cluster.workers
    rounds = 2 * (n - 1) if rounds is None else rounds
    reducing = n - 1 if reducing is None else reducing
    wt = {"kind": "sync", **sync}
    starts = {(i, k): net.place(f"{name}.ch{k}.w{i}.ready", worker=i).name
              for i in range(n) for k in range(channels)}
    ends = {(i, k): net.place(f"{name}.ch{k}.w{i}.done", worker=i).name
            for i in range(n) for k in range(channels)}
    for i in range(n):
        net.transition(f"{name}.w{i}.split", 0.0, inputs={ready[i]: 1},
                       outputs={starts[i, k]: 1 for k in range(channels)},
                       tags={"worker": i, **wt})
    for k in range(channels):
        _ring(net, fabric, f"{name}.ch{k}", channel_order(cluster, k), nbytes / (channels * n),
              rounds, reducing, {i: starts[i, k] for i in range(n)},
              {i: ends[i, k] for i in range(n)}, {**ctag, "channel": k}, sync, lane=k + 1,
              form=form)
    for i in range(n):
        net.transition(f"{name}.w{i}.join", 0.0,
                       inputs={ends[i, k]: 1 for k in range(channels)}, outputs={done[i]: 1},
                       tags={"worker": i, **wt})


def _hierarchical(net: Net, fabric: Fabric, cluster: Cluster, name: str, nbytes: float,
                  ready: dict, done: dict, ctag: dict, sync: dict, chunks: int = 1,
                  form: str = "auto") -> None:
    """Hierarchical all-reduce over a topology of ``N`` nodes of ``g`` GPUs: a reduce-scatter
    ring inside each node (``g-1`` rounds of ``S/g``), then ``g`` concurrent inter-node ring
    all-reduces, one per local rank, of that rank's ``S/g`` (``2(N-1)`` rounds of
    ``S/(gN)``; GPUs sharing a NIC share its links), then an all-gather ring inside each node
    (``g-1`` rounds of ``S/g``). A GPU starts a phase when its own previous phase is done.

    With pipelined rings (:func:`_ring_pipe`) and ``chunks=1`` the phases hand over without
    ``fin`` transitions: a GPU's place between two phases collects two tokens (its own send
    left, its predecessor's data arrived) and the next ring's barrier takes both.

    ``chunks > 1`` pipelines the phases as NCCL does: the message is cut into ``chunks``
    pieces that go through the three phases in order, a GPU starting phase ``p`` of piece
    ``c`` once it finished phase ``p-1`` of piece ``c`` and phase ``p`` of piece ``c-1``; so
    the inter-node phase of one piece overlaps the intra-node phases of its neighbours.
    """
    t = cluster.topology
    g, n = t.gpus_per_node, cluster.workers
    N = n // g
    nodes = [list(range(k * g, (k + 1) * g)) for k in range(N)]
    ranks = [list(range(l, n, g)) for l in range(g)]
    b = nbytes / chunks
    phases = [("rs", nodes, "n", b / g, g - 1, g - 1, "reduce-scatter"),
              ("ar", ranks, "l", b / (g * N), 2 * (N - 1), N - 1, "inter"),
              ("ag", nodes, "n", b / g, g - 1, 0, "all-gather")]
    if chunks == 1:
        rs = {i: net.place(f"{name}.w{i}.rs", worker=i).name for i in range(n)}
        ar = {i: net.place(f"{name}.w{i}.ar", worker=i).name for i in range(n)}
        # three pipelined rings in a row: a phase's two end tokens feed the next one's barrier
        # (or, with barrier rings, each ring's one join feeds the next phase's barrier)
        piped = form == "pipelined" and g > 1 and N > 1
        whole = piped and HIERARCHICAL_BARRIER and barrier_ok(fabric)
        for x, ((ph, groups, key, size, rounds, red, label), src, dst) in enumerate(zip(
                phases, (ready, rs, ar), (rs, ar, done))):
            for k, members in enumerate(groups):
                pre, tg = f"{name}.{ph}.{key}{k}", {**ctag, "phase": label}
                if whole:
                    _ring_pipe(net, fabric, pre, members, size, rounds, red, src, dst, tg,
                               sync, barrier=True)
                elif piped:
                    _ring_pipe(net, fabric, pre, members, size, rounds, red, src, dst, tg,
                               sync, ready_tokens=2 if x else 1, join=x == 2)
                else:
                    _ring(net, fabric, pre, members, size, rounds, red, src, dst, tg, sync,
                          form=form)
        return
    wt = {"kind": "sync", **sync}
    # piece c of GPU i: ready -> go(rs) -> ring -> fork -> go(ar) -> ... -> fork(ag) -> join
    start = {(i, c): net.place(f"{name}.c{c}.w{i}.ready", worker=i).name
             for i in range(n) for c in range(chunks)}
    for i in range(n):
        net.transition(f"{name}.w{i}.split", 0.0, inputs={ready[i]: 1},
                       outputs={start[i, c]: 1 for c in range(chunks)},
                       tags={"worker": i, **wt})
    prev_phase = start  # (i, c) -> place: piece c of GPU i finished the previous phase
    last: dict[int, list[str]] = {i: [] for i in range(n)}
    for ph, groups, key, size, rounds, red, label in phases:
        nxt_phase, nxt_chunk = {}, {}
        for c in range(chunks):
            pre = f"{name}.c{c}.{ph}"
            src = {i: net.place(f"{pre}.w{i}.go", worker=i).name for i in range(n)}
            out = {i: net.place(f"{pre}.w{i}.out", worker=i).name for i in range(n)}
            for i in range(n):
                ins = {prev_phase[i, c]: 1}
                if c > 0:
                    ins[nxt_chunk[i, c - 1]] = 1
                net.transition(f"{pre}.w{i}.gate", 0.0, inputs=ins, outputs={src[i]: 1},
                               tags={"worker": i, **wt})
            for k, members in enumerate(groups):
                _ring(net, fabric, f"{pre}.{key}{k}", members, size, rounds, red, src, out,
                      {**ctag, "phase": label, "chunk": c}, sync, form=form)
            for i in range(n):
                nxt_phase[i, c] = net.place(f"{pre}.w{i}.next", worker=i).name
                nxt_chunk[i, c] = net.place(f"{pre}.w{i}.after", worker=i).name
                net.transition(f"{pre}.w{i}.fork", 0.0, inputs={out[i]: 1},
                               outputs={nxt_phase[i, c]: 1, nxt_chunk[i, c]: 1},
                               tags={"worker": i, **wt})
        for i in range(n):
            last[i].append(nxt_chunk[i, chunks - 1])
        prev_phase = nxt_phase
    for i in range(n):
        net.transition(f"{name}.w{i}.join", 0.0,
                       inputs={**{prev_phase[i, c]: 1 for c in range(chunks)},
                               **{p: 1 for p in last[i]}},
                       outputs={done[i]: 1}, tags={"worker": i, **wt})


def ps_cluster(cluster: Cluster, shards: int | None, placement: str | None) -> Cluster:
    """``cluster`` with the ``shards`` / ``placement`` options applied (``None`` keeps it)."""
    ch = {}
    if shards is not None and shards != cluster.ps_shards:
        ch["ps_shards"] = shards
    if placement is not None and placement != cluster.ps_placement:
        ch["ps_placement"] = placement
    return cluster.replace(**ch) if ch else cluster


class PSExchange:
    """The three stages of a parameter-server exchange of one piece (a chunk of a tensor on one
    shard): the worker's *push* to the shard, the shard's *update* on its CPU, the *pull* back.

    Every PS-style variant (``sync-ps``, ``async-ps``, ``ssp``, ``dssp``, ``backup``, and
    ``local-sgd`` with ``sync="ps"``) composes these; the variant only decides which places
    connect them and when an update fires (every worker's copy, or each on arrival).

    Names: the push of worker ``i`` is ``w{i}.push.{suffix}``, its pull ``w{i}.pull.{suffix}``
    (transfers of :meth:`Fabric.transfer`, tagged ``worker``, the caller's ``tags``,
    ``direction``, ``shard``, ``chunk``); the update is named by the caller and takes
    ``cluster.update_time(nbytes)`` (CV ``cluster.compute_cv``) on ``ps{k}.cpu``.
    A piece whose shard is colocated with the worker (:meth:`local`) needs no transfer.
    When two or more workers exchange with a shard over the network, its pushes and pulls
    are concurrent connections into / out of one host (``share="in"`` / ``"out"`` of
    :meth:`Fabric.transfer`: the cluster's ``share_cv_in`` / ``share_cv_out``).

    ``members``: how many senders exchange with every shard (default ``cluster.workers``; a
    net with per-node aggregation, :mod:`.ps_aggregate`, passes its nodes times the parts a
    node sends of each piece).
    """

    def __init__(self, fabric: Fabric, members: int | None = None):
        self.fabric = fabric
        self.net = fabric.net
        self.cluster = fabric.cluster
        self.members = fabric.cluster.workers if members is None else int(members)
        self._to: Fabric | TransferBatch = fabric  # where transfers go
        self._add: Net | TransferBatch = fabric.net  # where updates go

    @contextmanager
    def bulk(self) -> Iterator[TransferBatch]:
        """Within the block, :meth:`push`, :meth:`pull` and :meth:`update` go to a
        :class:`.fabric_bulk.TransferBatch` (yielded, for the block's places), whose elements
        are added at once at the block's end (the same net, :mod:`.fabric_bulk`). The block
        must add to the net only through the exchange and the batch."""
        b = TransferBatch(self.fabric)
        self._to = self._add = b
        try:
            yield b
        finally:
            self._to, self._add = self.fabric, self.net
        b.flush()

    def local(self, worker: int, shard: int) -> bool:
        """True when shard ``shard`` lives on worker ``worker``'s host."""
        return self.fabric.ps_host(shard) == ("worker", worker)

    def shared(self, shard: int) -> bool:
        """True when two or more workers exchange with shard ``shard`` over the network."""
        n = self.members
        return n - (1 if self.fabric.ps_host(shard)[0] == "worker" else 0) >= 2

    def push(self, worker: int, shard: int, nbytes: float, suffix: str, *, chunk: int,
             inputs: Iterable[str], outputs: Iterable[str],
             tags: Mapping[str, Any] | None = None, priority: int = 0) -> list[str]:
        """Transfer ``w{worker}.push.{suffix}`` of ``nbytes`` from the worker to the shard."""
        fab = self.fabric
        return self._to.transfer(f"w{worker}.push.{suffix}", nbytes, ("worker", worker),
                            fab.ps_host(shard), inputs=inputs, outputs=outputs,
                            priority=priority, reduce=True,
                            share="in" if self.shared(shard) else None,
                            tags={"worker": worker, **(tags or {}), "direction": "push",
                                  "shard": shard, "chunk": chunk})

    def pull(self, worker: int, shard: int, nbytes: float, suffix: str, *, chunk: int,
             inputs: Iterable[str], outputs: Iterable[str],
             tags: Mapping[str, Any] | None = None, priority: int = 0) -> list[str]:
        """Transfer ``w{worker}.pull.{suffix}`` of ``nbytes`` from the shard to the worker."""
        fab = self.fabric
        return self._to.transfer(f"w{worker}.pull.{suffix}", nbytes, fab.ps_host(shard),
                            ("worker", worker), inputs=inputs, outputs=outputs,
                            priority=priority, share="out" if self.shared(shard) else None,
                            tags={"worker": worker, **(tags or {}), "direction": "pull",
                                  "shard": shard, "chunk": chunk})

    def update(self, name: str, shard: int, nbytes: float, *, chunk: int,
               inputs: Iterable[str] | Mapping[str, int],
               outputs: Iterable[str] | Mapping[str, int],
               tags: Mapping[str, Any] | None = None) -> str:
        """The shard's update ``name`` of a piece of ``nbytes`` on its CPU (``kind="update"``);
        ``inputs`` / ``outputs``: place names (weight 1 each) or ``{place: weight}``."""
        cl = self.cluster
        d = duration(cl.update_time(nbytes), cl.compute_cv)
        self._add.transition(name, d, inputs=_weights(inputs), outputs=_weights(outputs),
                            resources=[self.fabric.ps_cpu(shard)],
                            tags={"kind": "update", **(tags or {}), "shard": shard,
                                  "chunk": chunk, "step": False})
        return name


def _weights(arcs: Iterable[str] | Mapping[str, int]) -> dict[str, int]:
    """``{place: weight}`` of arcs given as such or as place names (weight 1 each)."""
    return dict(arcs) if isinstance(arcs, Mapping) else {p: 1 for p in arcs}


def ps_average(net: Net, fab: Fabric, cl: Cluster, nbytes: float, ins: dict, outs: dict,
               name: str = "avg") -> None:
    """Average ``nbytes`` of model over the PS shards: ``ins[i]`` (one place per piece of
    ``cl.shard_tensor(0, nbytes)``) -> push -> shard update once all copies arrived -> pull ->
    ``outs[i]`` (one place). A piece whose shard sits on the worker's host stays local."""
    n = cl.workers
    ex = PSExchange(fab)
    pieces = cl.shard_tensor(0, nbytes)
    got: dict[int, list[str]] = {i: [] for i in range(n)}
    with ex.bulk() as add:  # the places, pushes, updates and pulls added at once
        for c, (k, b) in enumerate(pieces):
            host = fab.ps_host(k)
            recv, back = {}, {}
            for i in range(n):
                back[i] = add.place(f"w{i}.{name}.c{c}.back", worker=i).name
                got[i].append(back[i])
                if ex.local(i, k):
                    recv[i] = ins[i][c]
                    continue
                recv[i] = add.place(f"ps{k}.{name}.c{c}.from{i}", shard=k).name
                ex.push(i, k, b, f"{name}.c{c}", chunk=c, inputs=[ins[i][c]],
                        outputs=[recv[i]])
            to = {i: (back[i] if host == ("worker", i)
                      else add.place(f"ps{k}.{name}.c{c}.to{i}", shard=k).name)
                  for i in range(n)}
            ex.update(f"ps{k}.{name}.c{c}", k, b, chunk=c, inputs=[recv[i] for i in range(n)],
                      outputs=[to[i] for i in range(n)])
            for i in range(n):
                if not ex.local(i, k):
                    ex.pull(i, k, b, f"{name}.c{c}", chunk=c, inputs=[to[i]],
                            outputs=[back[i]])
    for i in range(n):
        net.transition(f"w{i}.{name}.got", 0.0, inputs={p: 1 for p in got[i]},
                       outputs={outs[i]: 1}, tags={"worker": i, "kind": "sync", "step": False})
