"""Rings: the building block of ring, channel and hierarchical all-reduces. A ring of ``m``
members and ``rounds`` rounds is built in one of three forms (``ring_form``): unrolled (one
transfer per member and round), looped (a sub-net with a round counter: ``O(m)`` transitions,
``O(m * rounds)`` events) or pipelined (one streamed flow per ring edge, then the ring's latency
term, as NCCL streams a ring). :mod:`.collectives` composes them."""

from __future__ import annotations

import math

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster
from .fabric import Fabric

__all__ = ["LOOP_ROUNDS", "RING_FORMS", "resolve_ring_form", "ring_is_looped", "barrier_ok",
           "channel_order", "multi_gpu_nodes"]


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
               barrier: bool = False, go_inputs: dict | None = None,
               join_outputs: dict | None = None) -> None:
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

    ``go_inputs`` / ``join_outputs`` (``barrier=True`` only): the whole input arcs of
    ``{prefix}.go`` and output arcs of ``{prefix}.join`` (``{place: weight}``) instead of the
    members' ``ready`` / ``done`` places, so that the ring itself is a collective's begin
    and end barrier (:mod:`.shard_collectives`).
    """
    m = len(members)
    succ = {i: members[(x + 1) % m] for x, i in enumerate(members)}
    lat = rounds * sum(fabric.latency(("worker", i), ("worker", succ[i])) for i in members) / m
    go = {i: net.place(f"{prefix}.w{i}.go", worker=i).name for i in members}
    if barrier:
        end = net.place(f"{prefix}.end").name
        net.transition(f"{prefix}.go", 0.0,
                       inputs=go_inputs or {ready[i]: ready_tokens for i in members},
                       outputs={go[i]: 1 for i in members}, tags=dict(sync))
        for i in members:
            fabric.transfer(f"{prefix}.w{i}.send", rounds * chunk, ("worker", i),
                            ("worker", succ[i]), inputs=[go[i]], outputs=[end],
                            tags={"worker": i, **ctag, "rounds": rounds, "form": "pipelined"},
                            reduce=reducing / rounds, lane=lane, latency=0.0, messages=rounds)
        net.transition(f"{prefix}.join", Deterministic(lat) if lat > 0 else 0.0,
                       inputs={end: m},
                       outputs=join_outputs if join_outputs is not None
                       else {done[i]: 1 for i in members},
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


def barrier_ok(fabric: Fabric) -> bool:
    """Whether a ring on ``fabric`` may end as a whole (``_ring_pipe(barrier=True)``): its
    transfers have no CPU send or receive stage, only the link stage and the latency."""
    c = fabric.cluster
    return not fabric.flows or (c.send_s_per_byte == 0 and c.recv_s_per_byte == 0
                                and c.reduce_s_per_byte == 0)


def multi_gpu_nodes(cluster: Cluster) -> bool:
    """Whether ``cluster`` has a topology of nodes with several GPUs: where a collective's
    channels cross the nodes through different NICs (:func:`channel_order`) and
    ``"dbtree"`` is NCCL's multi-node tree, fine or coarse."""
    return cluster.topology is not None and cluster.topology.gpus_per_node > 1


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
