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
      the same time (store and forward, no pipelining of chunks); on two ranks
      ``2 (alpha + S/(2B))``, on four ``4 alpha + 3 S/B`` (tests/test_dbtree.py). Coarse nets
      use the tree closed form, which assumes what the double tree gives (a node's two
      children cost one hop's bandwidth). The heap tree of ``"tree"`` is kept as it is.

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

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster
from .durations import duration
from .fabric import Fabric

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
    algorithm : {"ring", "tree", "dbtree", "hierarchical"}
        Ring all-reduce (reduce-scatter then all-gather), binary-tree reduce + broadcast,
        NCCL's double binary tree, or
        the hierarchical all-reduce of a cluster topology (:func:`_hierarchical`).
    chunks : int
        ``"hierarchical"`` only: pieces the message is pipelined in through its three phases
        (1: no pipelining).
    channels : int
        ``"ring"`` only: concurrent rings of ``nbytes / channels`` each, as NCCL's channels;
        on a topology ring ``k`` enters and leaves every node through NIC ``k mod nics``
        (:func:`channel_order`), so ``channels = nics_per_node`` uses every NIC.
    ring_form : {"auto", "unrolled", "looped", "pipelined"}
        How the rings of ``"ring"`` (fine), ``"hierarchical"`` and ``"allgather"`` all-reduces
        are built: one transfer per member and round (``m * rounds`` transfers; the net stays
        an event graph), a looped sub-net with a round counter (``O(m)`` transitions, same
        timing, ``O(m * rounds)`` events; :func:`_ring_loop`), or one streamed flow per ring
        edge (``O(m)`` transitions and events; :func:`_ring_pipe`); ``"auto"``: every ring
        of the collective pipelined when its longest ring has more than ``LOOP_ROUNDS``
        rounds (and every ring of a coarse net), else unrolled.

    Returns
    -------
    (str, str)
        Names of the begin and end barriers.
    """
    if algorithm not in ALGORITHMS:
        raise VariantError(f"algorithm={algorithm!r}: use one of {list(ALGORITHMS)}")
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
    if channels > 1 and (algorithm != "ring" or coarse):
        raise VariantError(f"channels={channels} runs concurrent rings of a fine "
                           f"algorithm='ring' all-reduce; with algorithm={algorithm!r}"
                           f"{' (coarse)' if coarse else ''} pass channels=1")
    resolve_ring_form(ring_form, 0)  # checks the value
    n = cluster.workers
    if ring_form == "auto":  # one form for all the collective's rings, set by its longest
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
    net.transition(f"{name}.begin", 0.0, inputs=begin_in, outputs={p: 1 for p in ready.values()},
                   tags=sync)
    done = {i: net.place(f"{name}.w{i}.done", worker=i).name for i in range(n)}
    ctag = {"collective": name, "step": False, **extra}
    if coarse and algorithm not in ("hierarchical", "allgather"):
        for i in range(n):
            fabric.allreduce_share(f"{name}.w{i}", nbytes, i, algorithm, inputs=[ready[i]],
                                   outputs=[done[i]], tags={"worker": i, "kind": "comm", **ctag})
    elif algorithm == "tree":
        _tree(net, fabric, name, nbytes, n, ready, done, ctag)
    elif algorithm == "allgather":  # ring all-gather of nbytes per worker, fine and coarse
        _ring(net, fabric, name, list(range(n)), nbytes, n - 1, 0, ready, done, ctag, sync)
    elif algorithm == "dbtree":
        _dbtree(net, fabric, name, nbytes, n, ready, done, ctag)
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


#: Rings with more rounds than this are built looped by ``ring_form="auto"`` (see :func:`_ring`).
LOOP_ROUNDS = 16

#: How a ring's rounds are built: unrolled stages, a looped sub-net, one pipelined flow per
#: ring edge, or chosen by size.
RING_FORMS = ("auto", "unrolled", "looped", "pipelined")


def resolve_ring_form(form: str, rounds: int) -> str:
    """How a ring of ``rounds`` rounds is built under ``form`` (see :func:`_ring`):
    ``"auto"`` is ``"unrolled"`` up to ``LOOP_ROUNDS`` rounds, ``"pipelined"`` above."""
    if form not in RING_FORMS:
        raise VariantError(f"ring_form={form!r}: use one of {list(RING_FORMS)}")
    if form != "auto":
        return form
    return "unrolled" if rounds <= LOOP_ROUNDS else "pipelined"


def ring_is_looped(form: str, rounds: int) -> bool:
    """Whether a ring of ``rounds`` rounds is built looped under ``form`` (see :func:`_ring`)."""
    return resolve_ring_form(form, rounds) == "looped"


def _ring(net: Net, fabric: Fabric, prefix: str, members: list[int], chunk: float,
          rounds: int, reducing: int, ready: dict, done: dict, ctag: dict, sync: dict,
          lane: int = 0, form: str = "auto") -> None:
    """A ring over ``members`` (in ring order): ``rounds`` dependent rounds in which each member
    sends ``chunk`` bytes to its successor; the first ``reducing`` rounds reduce at the receiver.
    Member ``i`` starts from ``ready[i]`` and ends in ``done[i]``: ``2(m-1)`` rounds with
    ``m-1`` reducing is an all-reduce, ``m-1`` rounds with ``m-1`` (0) reducing a
    reduce-scatter (an all-gather). Member ``i``'s round ``r+1`` send waits for its round ``r``
    send to leave the link and for the chunk of round ``r`` from its predecessor to arrive.

    ``form="unrolled"``: one transfer per member and round, ``{prefix}.w{i}.r{r}`` (tagged
    ``round=r``), finish ``{prefix}.w{i}.fin``; ``m * rounds`` transfers, and the net stays a
    timed event graph (what :func:`sgdnet.analysis.cycle_time` needs). ``form="looped"``:
    :func:`_ring_loop`, ``O(m)`` transitions whatever the rounds, ``O(m * rounds)`` events.
    ``form="pipelined"``: :func:`_ring_pipe`, one flow per member, ``O(m)`` transitions and
    events. ``"auto"``: unrolled up to ``LOOP_ROUNDS`` rounds, pipelined above.
    """
    m = len(members)
    if rounds == 0 or m == 1:
        for i in members:
            net.transition(f"{prefix}.w{i}.fin", 0.0, inputs={ready[i]: 1},
                           outputs={done[i]: 1}, tags={"worker": i, **sync})
        return
    form = resolve_ring_form(form, rounds)
    if form == "pipelined":
        _ring_pipe(net, fabric, prefix, members, chunk, rounds, reducing, ready, done, ctag,
                   sync, lane)
        return
    if form == "looped":
        _ring_loop(net, fabric, prefix, members, chunk, rounds, reducing, ready, done, ctag,
                   sync, lane)
        return
    # arrived[i, r]: member i holds the chunk sent to it in round r
    arrived = {(i, r): net.place(f"{prefix}.w{i}.r{r}.in", worker=i).name
               for i in members for r in range(rounds)}
    sent = {(i, r): net.place(f"{prefix}.w{i}.r{r}.sent", worker=i).name
            for i in members for r in range(rounds)}
    for r in range(rounds):
        for x, i in enumerate(members):
            j = members[(x + 1) % m]
            ins = [ready[i]] if r == 0 else [sent[i, r - 1], arrived[i, r - 1]]
            fabric.transfer(f"{prefix}.w{i}.r{r}", chunk, ("worker", i), ("worker", j),
                            inputs=ins, outputs=[arrived[j, r]], link_outputs=[sent[i, r]],
                            tags={"worker": i, **ctag, "round": r}, reduce=r < reducing,
                            lane=lane)
    for i in members:
        net.transition(f"{prefix}.w{i}.fin", 0.0,
                       inputs={sent[i, rounds - 1]: 1, arrived[i, rounds - 1]: 1},
                       outputs={done[i]: 1}, tags={"worker": i, **sync})


def _ring_loop(net: Net, fabric: Fabric, prefix: str, members: list[int], chunk: float,
               rounds: int, reducing: int, ready: dict, done: dict, ctag: dict, sync: dict,
               lane: int = 0) -> None:
    """The ring of :func:`_ring` as a looped sub-net: per member and phase a start, one
    transfer that fires once per round, a ``next`` and a ``fin`` transition.

    Member ``i``'s phase (``R`` rounds) starts with ``{p}.start``, which puts one token in
    ``{p}.go`` and ``R - 1`` in the round counter ``{p}.left``; the transfer ``{p}.send``
    (to the successor, tagged ``rounds=R``) consumes ``go``, gives ``{p}.sent`` when its bytes
    left the link and a token in the successor's ``{p}.in`` when they arrived;
    ``{p}.next`` takes ``sent``, one ``in`` token and one ``left`` token and gives ``go`` back
    (the next round); ``{p}.fin``, inhibited while ``left`` holds a token, takes the last
    ``sent`` and ``in``. Counting the predecessor's arrivals in ``in`` is exact because a
    member's sends arrive in round order (each waits for the previous one to leave the link,
    and the latency and the receiver's CPU queue keep the order). The reducing rounds and the
    others are two phases when the receiver's reduction costs time
    (:meth:`.Fabric.reduces_cost`), else one phase of ``rounds`` rounds. Same timing as the
    unrolled ring; ``O(m)`` transitions, but with weighted and inhibitor arcs, so no longer an
    event graph.
    """
    m = len(members)
    if fabric.reduces_cost() and 0 < reducing < rounds:
        phases = [(reducing, True), (rounds - reducing, False)]
    else:
        phases = [(rounds, reducing > 0)]
    src = ready
    for k, (R, red) in enumerate(phases):
        last = k == len(phases) - 1
        pre = f"{prefix}.loop{k}" if len(phases) > 1 else f"{prefix}.loop"
        dst = done if last else {i: net.place(f"{pre}.w{i}.out", worker=i).name
                                 for i in members}
        arr = {i: net.place(f"{pre}.w{i}.in", worker=i).name for i in members}
        for x, i in enumerate(members):
            j = members[(x + 1) % m]
            p = f"{pre}.w{i}"
            go = net.place(f"{p}.go", worker=i).name
            sent = net.place(f"{p}.sent", worker=i).name
            start_out = {go: 1}
            if R > 1:
                left = net.place(f"{p}.left", worker=i).name
                start_out[left] = R - 1
            net.transition(f"{p}.start", 0.0, inputs={src[i]: 1}, outputs=start_out,
                           tags={"worker": i, **sync})
            fabric.transfer(f"{p}.send", chunk, ("worker", i), ("worker", j), inputs=[go],
                            outputs=[arr[j]], link_outputs=[sent],
                            tags={"worker": i, **ctag, "rounds": R}, reduce=red, lane=lane)
            if R > 1:
                net.transition(f"{p}.next", 0.0, inputs={sent: 1, arr[i]: 1, left: 1},
                               outputs={go: 1}, tags={"worker": i, **sync})
            net.transition(f"{p}.fin", 0.0, inputs={sent: 1, arr[i]: 1},
                           inhibitors={left: 1} if R > 1 else None,
                           outputs={dst[i]: 1}, tags={"worker": i, **sync})
        src = dst


def _ring_pipe(net: Net, fabric: Fabric, prefix: str, members: list[int], chunk: float,
               rounds: int, reducing: int, ready: dict, done: dict, ctag: dict, sync: dict,
               lane: int = 0, ready_tokens: int = 1, join: bool = True,
               barrier: bool = False) -> None:
    """The ring of :func:`_ring` at flow level, as NCCL streams it: every ring edge carries
    its ``rounds`` chunks back to back, so it is one flow of ``rounds * chunk`` bytes per
    member (``2(m-1)/m * S`` for an all-reduce of ``S``) followed by the ring's latency term
    ``rounds * mean(alpha_e)`` (:meth:`.Fabric.transfer` with ``latency=``): a chunk's
    chain of dependencies walks the ring edge after edge, so it pays every edge's latency in
    turn (``2(m-1) alpha`` on a ring of equal edges, NCCL's latency term).

    ``{prefix}.go`` (zero time) waits for every member's ``ready`` (a ring makes progress at
    its slowest member's pace), then member ``i``'s ``{prefix}.w{i}.send`` (tagged
    ``rounds=R``, ``form="pipelined"``) flows to its successor; ``{prefix}.w{i}.fin`` takes
    its own send's ``sent`` and its predecessor's arrival; with ``join=False`` there is no
    ``fin``: both tokens go to ``done[i]`` (a following pipelined ring then takes
    ``ready_tokens=2`` of them). With ``barrier=True`` the ring ends as a whole: the sends'
    flows put their tokens in one place ``{prefix}.end`` and one transition
    ``{prefix}.join`` (a pure delay of the ring's latency term, after the last flow) gives every
    member its ``done`` token: ``m + 2`` transitions instead of ``3m + 1``, and a member is done
    when the whole ring is, at ``max_j(end of flow j) + latency``. That is when the old form's
    member is done whenever the ring's flows end together (a ring started by one barrier whose
    edges are alike and share their links evenly, without byte noise: same bits, as
    ``fl(t + lat)`` is monotone in ``t``); otherwise a member waits for the slowest edge of its
    ring, which is what a streamed ring does (every chunk crosses every edge). Only for
    fabrics without send / receive CPU stages (:func:`barrier_ok`). Alone on its links, deterministic
    and homogeneous, the ring takes ``R (alpha + chunk / B)``, the stepwise ring's time to
    the last rounding; flows sharing a NIC or a spine share it max-min fairly as the
    stepwise rounds do, but for the whole phase at once (a member's rounds no longer wait
    for the slowest edge of each round). On a ring of unequal edges (NVLink inside a node, a
    NIC between nodes) the stepwise ring lets the fast edges hide the slow edge's latency
    (it never idles), the pipelined one charges the mean latency per round. ``O(m)`` transitions and ``O(m)`` events per ring,
    whatever the rounds; the net stays an event graph.
    """
    m = len(members)
    succ = {i: members[(x + 1) % m] for x, i in enumerate(members)}
    lat = rounds * sum(fabric.latency(("worker", i), ("worker", succ[i])) for i in members) / m
    go = {i: net.place(f"{prefix}.w{i}.go", worker=i).name for i in members}
    if barrier:
        end = net.place(f"{prefix}.end").name
        net.transition(f"{prefix}.go", 0.0, inputs={ready[i]: ready_tokens for i in members},
                       outputs={go[i]: 1 for i in members}, tags=dict(sync))
        for i in members:
            fabric.transfer(f"{prefix}.w{i}.send", rounds * chunk, ("worker", i),
                            ("worker", succ[i]), inputs=[go[i]], outputs=[end],
                            tags={"worker": i, **ctag, "rounds": rounds, "form": "pipelined"},
                            reduce=reducing / rounds, lane=lane, latency=0.0, messages=rounds)
        net.transition(f"{prefix}.join", Deterministic(lat) if lat > 0 else 0.0,
                       inputs={end: m}, outputs={done[i]: 1 for i in members},
                       servers=math.inf, tags=dict(sync))
        return
    if join:
        arr = {i: net.place(f"{prefix}.w{i}.in", worker=i).name for i in members}
        sent = {i: net.place(f"{prefix}.w{i}.sent", worker=i).name for i in members}
    else:  # done[i] collects both tokens: its own send left, its predecessor's data arrived
        arr = sent = done
    net.transition(f"{prefix}.go", 0.0, inputs={ready[i]: ready_tokens for i in members},
                   outputs={go[i]: 1 for i in members}, tags=dict(sync))
    for i in members:
        j = succ[i]
        fabric.transfer(f"{prefix}.w{i}.send", rounds * chunk, ("worker", i), ("worker", j),
                        inputs=[go[i]], outputs=[arr[j]], link_outputs=[sent[i]],
                        tags={"worker": i, **ctag, "rounds": rounds, "form": "pipelined"},
                        reduce=reducing / rounds, lane=lane, latency=lat, messages=rounds)
    if join:
        for i in members:
            net.transition(f"{prefix}.w{i}.fin", 0.0, inputs={sent[i]: 1, arr[i]: 1},
                           outputs={done[i]: 1}, tags={"worker": i, **sync})


#: Whether the pipelined phases of a hierarchical all-reduce end as whole rings
#: (``_ring_pipe(barrier=True)``); False builds the per-member form (kept for comparison,
#: tests/test_hierarchical_barrier.py).
HIERARCHICAL_BARRIER = True


def barrier_ok(fabric: Fabric) -> bool:
    """Whether a ring on ``fabric`` may end as a whole (``_ring_pipe(barrier=True)``): its
    transfers have no CPU send or receive stage, only the link stage and the latency."""
    c = fabric.cluster
    return not fabric.flows or (c.send_s_per_byte == 0 and c.recv_s_per_byte == 0
                                and c.reduce_s_per_byte == 0)


def channel_order(cluster: Cluster, k: int) -> list[int]:
    """Ring order of channel ``k``: node by node; inside a node the ring enters at the first
    GPU of NIC ``j = k mod nics`` and leaves at the last GPU of that NIC (or, with one GPU
    per NIC, at the GPU of NIC ``j+1``), the other GPUs in between. Without a topology: the
    workers in order."""
    t, n = cluster.topology, cluster.workers
    if t is None:
        return list(range(n))
    g, nics = t.gpus_per_node, t.nics_per_node
    by_nic = [[lo for lo in range(g) if lo * nics // g == j] for j in range(nics)]
    j = k % nics
    entry = by_nic[j][0]
    leave = by_nic[j][-1] if len(by_nic[j]) > 1 else by_nic[(j + 1) % nics][0]
    local = [entry] + [lo for lo in range(g) if lo not in (entry, leave)]
    if leave != entry:
        local.append(leave)
    return [node * g + lo for node in range(n // g) for lo in local]


def _channels(net: Net, cluster: Cluster, fabric: Fabric, name: str, nbytes: float,
              channels: int, ready: dict, done: dict, ctag: dict, sync: dict,
              form: str = "auto") -> None:
    """``channels`` concurrent ring all-reduces of ``nbytes / channels`` in the orders of
    :func:`channel_order`, each on its own connections (lane ``k + 1``); a GPU is done when
    all its rings are."""
    n = cluster.workers
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
              2 * (n - 1), n - 1, {i: starts[i, k] for i in range(n)},
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


def nccl_btree(n: int, rank: int) -> tuple[int, list[int]]:
    """Parent (-1 at the root) and children of ``rank`` in NCCL's binary tree over ``n`` ranks
    (``ncclGetBtree``: rank 0 is the root with one child; a rank's lowest set bit gives its
    level, odd ranks are leaves)."""
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    low = bit >> 1
    kids = []
    if low:
        kids.append(rank - low)
        down1 = rank + low
        while down1 >= n and low:
            low >>= 1
            down1 = rank + low if low else -1
        if down1 > 0:
            kids.append(down1)
    return up, kids


def double_binary_tree(n: int) -> list[dict[int, int]]:
    """NCCL's double binary tree (``ncclGetDtree``) over ``n`` ranks: two parent maps (rank ->
    parent, -1 at the root). Tree 1 is tree 0 mirrored (``n-1-r``) for even ``n`` and shifted
    by one rank for odd ``n``, so a rank that is an inner node of one tree is a leaf of the
    other (tree 0's leaves are the odd ranks)."""
    t0 = {r: nccl_btree(n, r)[0] for r in range(n)}
    if n % 2 == 0:
        def f(r):
            return n - 1 - r
    else:
        def f(r):
            return (r - 1) % n
    g = {f(r): r for r in range(n)}  # inverse of f
    t1 = {}
    for r in range(n):
        p = nccl_btree(n, f(r))[0]
        t1[r] = -1 if p < 0 else g[p]
    return [t0, t1]


def _tree(net: Net, fabric: Fabric, name: str, nbytes: float, n: int, ready: dict,
          done: dict, ctag: dict, parent: dict[int, int] | None = None, lane: int = 0) -> None:
    """Binary-tree reduce then broadcast of ``nbytes`` (see :func:`allreduce`) over the tree
    ``parent`` (rank -> parent, -1 at the root; default the heap tree, parent ``(i-1)//2``)."""
    if parent is None:
        parent = {i: (i - 1) // 2 if i else -1 for i in range(n)}
    root = next(i for i in range(n) if parent[i] < 0)
    children = {i: sorted(c for c in range(n) if parent[c] == i) for i in range(n)}
    # reduce: up[c] = child c's partial sum arrived at its parent
    up = {c: net.place(f"{name}.w{c}.up.in", worker=parent[c]).name
          for c in range(n) if c != root}
    for i in range(n - 1, -1, -1):
        if i == root:
            continue
        fabric.transfer(f"{name}.w{i}.reduce", nbytes, ("worker", i), ("worker", parent[i]),
                        inputs=[ready[i], *(up[c] for c in children[i])], outputs=[up[i]],
                        tags={"worker": i, **ctag, "phase": "reduce"}, reduce=True, lane=lane)
    # broadcast: have[i] = node i holds the reduced message
    have = {i: net.place(f"{name}.w{i}.have", worker=i).name for i in range(n)}
    net.transition(f"{name}.w{root}.reduced", 0.0,
                   inputs={ready[root]: 1, **{up[c]: 1 for c in children[root]}},
                   outputs={have[root]: 1}, tags={"worker": root, "kind": "sync", **ctag})
    for i in range(n):
        kids = children[i]
        if not kids:
            net.transition(f"{name}.w{i}.fin", 0.0, inputs={have[i]: 1}, outputs={done[i]: 1},
                           tags={"worker": i, "kind": "sync", **ctag})
            continue
        # sends to the children, left first; the node is done when its last send left the link
        fan = [net.place(f"{name}.w{i}.to{c}", worker=i).name for c in kids]
        sent = [net.place(f"{name}.w{i}.sent{c}", worker=i).name for c in kids]
        net.transition(f"{name}.w{i}.fan", 0.0, inputs={have[i]: 1},
                       outputs={p: 1 for p in fan}, tags={"worker": i, "kind": "sync", **ctag})
        for c, f, s in zip(kids, fan, sent):
            fabric.transfer(f"{name}.w{i}.bcast{c}", nbytes, ("worker", i), ("worker", c),
                            inputs=[f], outputs=[have[c]], link_outputs=[s],
                            tags={"worker": i, **ctag, "phase": "broadcast"}, lane=lane)
        net.transition(f"{name}.w{i}.fin", 0.0, inputs={p: 1 for p in sent},
                       outputs={done[i]: 1}, tags={"worker": i, "kind": "sync", **ctag})


def _dbtree(net: Net, fabric: Fabric, name: str, nbytes: float, n: int, ready: dict,
            done: dict, ctag: dict) -> None:
    """NCCL's double binary tree: the two trees of :func:`double_binary_tree` each reduce and
    broadcast half of the data, at the same time, each on its own connections (lanes 1, 2)."""
    wt = {"kind": "sync", **ctag}
    trees = double_binary_tree(n)
    starts = {(i, k): net.place(f"{name}.t{k}.w{i}.ready", worker=i).name
              for i in range(n) for k in range(2)}
    ends = {(i, k): net.place(f"{name}.t{k}.w{i}.done", worker=i).name
            for i in range(n) for k in range(2)}
    for i in range(n):
        net.transition(f"{name}.w{i}.split", 0.0, inputs={ready[i]: 1},
                       outputs={starts[i, k]: 1 for k in range(2)}, tags={"worker": i, **wt})
    for k, parent in enumerate(trees):
        _tree(net, fabric, f"{name}.t{k}", nbytes / 2, n, {i: starts[i, k] for i in range(n)},
              {i: ends[i, k] for i in range(n)}, {**ctag, "tree": k}, parent, lane=k + 1)
    for i in range(n):
        net.transition(f"{name}.w{i}.join", 0.0, inputs={ends[i, k]: 1 for k in range(2)},
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
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.net = fabric.net
        self.cluster = fabric.cluster

    def local(self, worker: int, shard: int) -> bool:
        """True when shard ``shard`` lives on worker ``worker``'s host."""
        return self.fabric.ps_host(shard) == ("worker", worker)

    def shared(self, shard: int) -> bool:
        """True when two or more workers exchange with shard ``shard`` over the network."""
        n = self.cluster.workers
        return n - (1 if self.fabric.ps_host(shard)[0] == "worker" else 0) >= 2

    def push(self, worker: int, shard: int, nbytes: float, suffix: str, *, chunk: int,
             inputs: Iterable[str], outputs: Iterable[str],
             tags: Mapping[str, Any] | None = None, priority: int = 0) -> list[str]:
        """Transfer ``w{worker}.push.{suffix}`` of ``nbytes`` from the worker to the shard."""
        fab = self.fabric
        return fab.transfer(f"w{worker}.push.{suffix}", nbytes, ("worker", worker),
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
        return fab.transfer(f"w{worker}.pull.{suffix}", nbytes, fab.ps_host(shard),
                            ("worker", worker), inputs=inputs, outputs=outputs,
                            priority=priority, share="out" if self.shared(shard) else None,
                            tags={"worker": worker, **(tags or {}), "direction": "pull",
                                  "shard": shard, "chunk": chunk})

    def update(self, name: str, shard: int, nbytes: float, *, chunk: int,
               inputs: Iterable[str], outputs: Iterable[str],
               tags: Mapping[str, Any] | None = None) -> str:
        """The shard's update ``name`` of a piece of ``nbytes`` on its CPU (``kind="update"``)."""
        cl = self.cluster
        d = duration(cl.update_time(nbytes), cl.compute_cv)
        self.net.transition(name, d, inputs={p: 1 for p in inputs},
                            outputs={p: 1 for p in outputs},
                            resources=[self.fabric.ps_cpu(shard)],
                            tags={"kind": "update", **(tags or {}), "shard": shard,
                                  "chunk": chunk, "step": False})
        return name


def ps_average(net: Net, fab: Fabric, cl: Cluster, nbytes: float, ins: dict, outs: dict,
               name: str = "avg") -> None:
    """Average ``nbytes`` of model over the PS shards: ``ins[i]`` (one place per piece of
    ``cl.shard_tensor(0, nbytes)``) -> push -> shard update once all copies arrived -> pull ->
    ``outs[i]`` (one place). A piece whose shard sits on the worker's host stays local."""
    n = cl.workers
    ex = PSExchange(fab)
    pieces = cl.shard_tensor(0, nbytes)
    got: dict[int, list[str]] = {i: [] for i in range(n)}
    for c, (k, b) in enumerate(pieces):
        host = fab.ps_host(k)
        recv, back = {}, {}
        for i in range(n):
            back[i] = net.place(f"w{i}.{name}.c{c}.back", worker=i).name
            got[i].append(back[i])
            if ex.local(i, k):
                recv[i] = ins[i][c]
                continue
            recv[i] = net.place(f"ps{k}.{name}.c{c}.from{i}", shard=k).name
            ex.push(i, k, b, f"{name}.c{c}", chunk=c, inputs=[ins[i][c]], outputs=[recv[i]])
        to = {i: (back[i] if host == ("worker", i)
                  else net.place(f"ps{k}.{name}.c{c}.to{i}", shard=k).name) for i in range(n)}
        ex.update(f"ps{k}.{name}.c{c}", k, b, chunk=c, inputs=[recv[i] for i in range(n)],
                  outputs=[to[i] for i in range(n)])
        for i in range(n):
            if not ex.local(i, k):
                ex.pull(i, k, b, f"{name}.c{c}", chunk=c, inputs=[to[i]], outputs=[back[i]])
    for i in range(n):
        net.transition(f"w{i}.{name}.got", 0.0, inputs={p: 1 for p in got[i]},
                       outputs={outs[i]: 1}, tags={"worker": i, "kind": "sync", "step": False})
