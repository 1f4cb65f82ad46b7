"""Building blocks of the Variants II builders that :mod:`.common` does not (yet) have.

To be merged into :mod:`.common` later; everything here is built on :class:`.common.Fabric`,
:func:`.common.compute_chain`, :func:`.common.compute_phase` and :func:`.common.duration`.

All-reduce
    :func:`allreduce` reduces ``nbytes`` among all workers. It starts with a zero-duration
    barrier ``{name}.begin`` that takes every worker's inputs and the token of a *collective
    stream* place (one collective at a time per stream, in the order they became ready, as NCCL
    runs collectives of one communicator on one stream), and ends with a barrier
    ``{name}.end`` that gives the stream token back and produces every worker's outputs.

    * fine (``coarse=False``): ring all-reduce, step by step: ``2(n-1)`` rounds; in round ``r``
      worker ``i`` sends ``nbytes / n`` to worker ``i+1 mod n`` with :meth:`Fabric.transfer`
      (uplink of ``i`` and downlink of ``i+1``, then latency); worker ``i``'s round ``r+1`` send
      waits for its round ``r`` send to leave the link and for the chunk of round ``r`` from
      worker ``i-1`` to arrive. Deterministic homogeneous cost ``2(n-1)(alpha + S/(n B))``,
      the closed form of :func:`sgdnet.workload.ring_allreduce_time`.
    * coarse: one transition per worker ``{name}.w{i}`` holding its own uplink and downlink for
      the closed-form ring time (CV ``comm_cv``), all started together by the barrier; the end
      barrier waits for the slowest.

    * ``algorithm="tree"``: a binary tree over the ranks (parent of ``i`` is ``(i-1)//2``):
      fine nets reduce up the tree (a node sends the whole message to its parent once its own
      input and all its children's messages are there) and broadcast down it (a node forwards
      to its children, left child first, once its parent's message arrived); every hop is a
      :meth:`Fabric.transfer`, so a parent's downlink (uplink) serialises its two children's
      messages. Coarse nets use :func:`sgdnet.workload.tree_allreduce_time` (store and
      forward, ``chunks=1``). For ``n <= 4`` the fine tree takes exactly ``2 ceil(log2 n)
      (alpha + S/B)``; for larger ``n`` the serialisation at inner nodes makes it slower than
      that optimistic closed form.

    Transfers are tagged ``worker`` (the sender), ``kind="comm"``, ``collective=name``.

Local-step loops
    :func:`local_loop` makes worker ``i`` run ``k`` SGD steps, then stop: a ``w{i}.budget``
    place holding ``k`` tokens is an extra input of the step's first compute operation, and every
    step's last compute operation puts a token in ``w{i}.acc``. A synchronisation transition
    takes ``k`` tokens of ``acc`` and, when done, gives ``k`` budget tokens back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile, ring_allreduce_time, tree_allreduce_time
from .common import Fabric, compute_chain, compute_phase, duration

__all__ = ["allreduce", "collective_stream", "local_loop", "LocalLoop", "first_compute"]


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
    algorithm : {"ring", "tree"}
        Ring all-reduce (reduce-scatter then all-gather) or binary-tree reduce + broadcast.

    Returns
    -------
    (str, str)
        Names of the begin and end barriers.
    """
    if algorithm not in ("ring", "tree"):
        raise VariantError(f"algorithm={algorithm!r}: use 'ring' or 'tree'")
    n = cluster.workers
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
    if coarse:
        closed = ring_allreduce_time if algorithm == "ring" else tree_allreduce_time
        for i in range(n):
            bw = min(cluster.up_bw(i), cluster.down_bw((i + 1) % n))
            t = closed(nbytes, n, bw, cluster.latency)
            host = ("worker", i)
            net.transition(f"{name}.w{i}", duration(t, cluster.comm_cv), inputs={ready[i]: 1},
                           outputs={done[i]: 1}, resources=fabric.link_resources(host, host),
                           tags={"worker": i, "kind": "comm", **ctag})
    elif algorithm == "tree":
        _tree(net, fabric, name, nbytes, n, ready, done, ctag)
    else:
        rounds = 2 * (n - 1)
        chunk = nbytes / n
        # arrived[i, r]: worker i holds the chunk sent to it in round r
        arrived = {(i, r): net.place(f"{name}.w{i}.r{r}.in", worker=i).name
                   for i in range(n) for r in range(rounds)}
        sent = {(i, r): net.place(f"{name}.w{i}.r{r}.sent", worker=i).name
                for i in range(n) for r in range(rounds)}
        for r in range(rounds):
            for i in range(n):
                j = (i + 1) % n
                ins = [ready[i]] if r == 0 else [sent[i, r - 1], arrived[i, r - 1]]
                fabric.transfer(f"{name}.w{i}.r{r}", chunk, ("worker", i), ("worker", j),
                                inputs=ins, outputs=[arrived[j, r]], link_outputs=[sent[i, r]],
                                tags={"worker": i, **ctag, "round": r})
        for i in range(n):
            net.transition(f"{name}.w{i}.fin", 0.0,
                           inputs={sent[i, rounds - 1]: 1, arrived[i, rounds - 1]: 1},
                           outputs={done[i]: 1}, tags={"worker": i, **sync})
    net.transition(f"{name}.end", 0.0, inputs={p: 1 for p in done.values()}, outputs=end_out,
                   tags=sync)
    return f"{name}.begin", f"{name}.end"


def _tree(net: Net, fabric: Fabric, name: str, nbytes: float, n: int, ready: dict,
          done: dict, ctag: dict) -> None:
    """Binary-tree reduce then broadcast of ``nbytes`` (see :func:`allreduce`)."""
    children = {i: [c for c in (2 * i + 1, 2 * i + 2) if c < n] for i in range(n)}
    # reduce: up[c] = child c's partial sum arrived at its parent
    up = {c: net.place(f"{name}.w{c}.up.in", worker=(c - 1) // 2).name for c in range(1, n)}
    for i in range(n - 1, 0, -1):
        fabric.transfer(f"{name}.w{i}.reduce", nbytes, ("worker", i), ("worker", (i - 1) // 2),
                        inputs=[ready[i], *(up[c] for c in children[i])], outputs=[up[i]],
                        tags={"worker": i, **ctag, "phase": "reduce"})
    # broadcast: have[i] = node i holds the reduced message
    have = {i: net.place(f"{name}.w{i}.have", worker=i).name for i in range(n)}
    net.transition(f"{name}.w0.reduced", 0.0, inputs={ready[0]: 1, **{up[c]: 1 for c in children[0]}},
                   outputs={have[0]: 1}, tags={"worker": 0, "kind": "sync", **ctag})
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
                            tags={"worker": i, **ctag, "phase": "broadcast"})
        net.transition(f"{name}.w{i}.fin", 0.0, inputs={p: 1 for p in sent},
                       outputs={done[i]: 1}, tags={"worker": i, "kind": "sync", **ctag})


@dataclass
class LocalLoop:
    """One worker's local-step loop: ``budget`` / ``acc`` places, first and step transitions."""

    worker: int
    budget: str
    acc: str
    first: str
    step: str
    compute: list[str]


def first_compute(net: Net, worker: int) -> str:
    """Name of the first compute operation of ``worker``'s step in a net built by
    :func:`.common.compute_chain` (``w{i}.fwd0``) or :func:`.common.compute_phase`
    (``w{i}.compute``)."""
    for name in (f"w{worker}.fwd0", f"w{worker}.compute"):
        if name in net.transitions:
            return name
    raise VariantError(f"net {net.name!r} has no compute chain for worker {worker}")


def local_loop(net: Net, fabric: Fabric, model: ModelProfile, cluster: Cluster, worker: int,
               k: int, *, coarse: bool, budget_tokens: int | None = None) -> LocalLoop:
    """Worker ``worker`` runs up to ``k`` local SGD steps, then waits for budget.

    ``budget_tokens`` (default ``k``) is the initial budget. The straggler hook is applied by
    the common compute builders.
    """
    i = worker
    budget = net.place(f"w{i}.budget", k if budget_tokens is None else budget_tokens,
                       worker=i).name
    acc = net.place(f"w{i}.acc", worker=i).name
    if coarse:
        start = net.place(f"w{i}.start", 1, worker=i).name
        t = compute_phase(net, fabric, model, cluster, i, inputs=[start, budget],
                          outputs=[start, acc])
        return LocalLoop(i, budget, acc, t, t, [t])
    ch = compute_chain(net, fabric, model, cluster, i, fwd_inputs={0: [budget]},
                       bwd_outputs={0: [acc]})
    return LocalLoop(i, budget, acc, ch.fwd[0], ch.step, ch.all)
