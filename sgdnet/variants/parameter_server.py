"""The parameter-server net shared by ``sync-ps``, ``async-ps``, ``ssp`` and ``dssp``: per-layer
(or whole-model) pieces pushed, updated and pulled with :class:`.collectives.PSExchange`."""

from __future__ import annotations

import math

from ..dists import Deterministic
from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import PSExchange, ps_cluster
from .compute import compute_chain, worker_profiles
from .durations import duration
from .fabric import Fabric
from .layers import comm_profile, group_layers, shard_merge
from .ps_aggregate import build_node_net, check_aggregation, worker_compute
from .ps_coarse import fine_groups, merged_shards, worker_links
from .ps_members import count_at_server

__all__ = ["build_ps_net"]


def _chunks(pieces: list[tuple[int, float]], partition: float | None) -> list[tuple[int, float]]:
    if partition is None:
        return list(pieces)
    out = []
    for k, b in pieces:
        m = max(1, math.ceil(b / partition))
        out.extend([(k, b / m)] * m)
    return out


def build_ps_net(
    name: str,
    model: ModelProfile,
    cluster: Cluster,
    *,
    synchronous: bool,
    coarse: bool,
    shards: int | None = None,
    placement: str | None = None,
    discipline: str = "flows",
    priority: bool = False,
    partition_bytes: float | None = None,
    shard_policy: str = "round_robin",
    max_layers: int | None = None,
    staleness: int | None = None,
    staleness_impl: str = "gate",
    comm_granularity: str = "layer",
    bucket_bytes: float = 25e6,
    balance: str = "none",
    flow_groups: bool = True,
    merge_small_layers: bool = False,
    aggregation: str = "none",
    local_reduce: str = "device",
) -> Net:
    """The parameter-server net shared by ``sync-ps``, ``async-ps`` and ``ssp``.

    Each layer's gradient is cut into pieces by ``cluster.shard_plan`` (then into chunks of at
    most ``partition_bytes``); worker ``i`` pushes each piece to its shard as soon as the
    layer's backward ends (wait-free backprop), the shard applies it on its CPU
    (``cluster.update_time(piece bytes)``) and sends the new parameters back; the worker's next
    forward of that layer waits for all of the layer's pieces.

    * ``synchronous=True`` (BSP): the shard's update of a piece waits for every worker's copy,
      runs once, and returns the result to every worker.
    * ``synchronous=False`` (ASP): the shard applies each worker's copy on arrival and returns
      it to that worker only.
    * ``staleness=s`` (SSP, with ``synchronous=False``): worker ``i`` may start step ``c + 1``
      only when every worker has completed at least ``c - s`` steps — a ``lag`` gate over the
      workers' step transitions (``staleness_impl="gate"``), or per-pair credit places
      ``ssp.credit.w{i}.w{j}`` holding ``s + 1`` tokens, taken by ``i``'s step start and given
      back by ``j``'s step completion (``staleness_impl="places"``); a step counts when the
      server has every piece of it (the gate's counters, or the credits' return).
    * ``coarse=True``: the whole model is one tensor (pieces ``cluster.shard_tensor(0, M)``,
      no partitioning) and the compute is one phase, so push, update and pull follow the compute
      with no overlap.

    * ``comm_granularity`` (fine nets): a piece is a layer's gradient (``"layer"``), a
      parameter tensor's (``"tensor"``) or a bucket of tensors of ``bucket_bytes``
      (``"bucket"``), see :func:`.layers.comm_profile`.
    * ``balance="batch"`` (``sync-ps``): per-worker batches proportional to speed
      (:func:`.compute.worker_profiles`), in ``net.meta["batch_sizes"]``.

    A push from worker ``k`` to a shard colocated on its own host, and the pull back, stay on
    the host (no transfer).

    * ``merge_small_layers=True`` (fine nets, ``S >= 2`` shards): the layers under
      ``shard_min_bytes`` merged into the next (:func:`.layers.merge_small_layers`), so that
      every group is split over all shards — the memory budget's first fallback, as an option:
      ResNet-50 with 16 shards on 128 GPUs, -0.12 % samples/s for ~13x less CPU.
    * Flow groups (``flow_groups=True``, fine BSP nets): when every layer is cut into one
      piece per shard and the shards are dedicated and alike (:func:`.ps_coarse.fine_groups`),
      a worker's pieces of a layer travel as one flow per direction (:func:`_grouped`).
    * ``aggregation="node"`` (a cluster with a topology): the GPUs of a node reduce each piece
      inside the node (``local_reduce``: onto one GPU, ``"device"`` / ``"root"``, or a
      reduce-scatter ring, ``"scatter"``), the node pushes its sum once and pulls it once, then
      broadcasts it inside the node; a synchronous shard waits for one copy per node, an
      asynchronous one applies each node's sum on arrival (:mod:`.ps_aggregate`).
    """
    cl = ps_cluster(cluster, shards, placement)
    check_aggregation(cl, aggregation, local_reduce)
    n = cl.workers
    net = Net(name)
    fab = Fabric(net, cl, discipline, priority)
    ex = PSExchange(fab)
    if coarse:
        prof = model
        plan = [cl.shard_tensor(0, model.grad_bytes)]
    else:
        prof = comm_profile(model, comm_granularity, bucket_bytes, cl.compute_cv)
        if merge_small_layers:
            prof = shard_merge(prof, cl.ps_shards, cl.shard_min_bytes, cl.compute_cv)
        prof = group_layers(prof, max_layers, cl.compute_cv)
        plan = [_chunks(p, partition_bytes)
                for p in cl.shard_plan([la.grad_bytes for la in prof.layers], shard_policy)]
    L = len(plan)
    if aggregation == "node":
        return _counted(build_node_net(net, fab, cl, prof, plan, coarse=coarse,
                                       synchronous=synchronous, staleness=staleness,
                                       staleness_impl=staleness_impl, balance=balance,
                                       local_reduce=local_reduce), staleness, staleness_impl)
    if (flow_groups and synchronous and not coarse and staleness is None
            and partition_bytes is None and fine_groups(cl, plan, discipline, priority)):
        return _grouped(net, fab, ex, prof, cl, plan, balance)

    local = ex.local

    # places (added at once, Net.add_places): parameters (1 token: step 0 may start),
    # gradients, server-side mailboxes
    keys = [(i, l, c) for i in range(n) for l in range(L) for c in range(len(plan[l]))]
    param = dict(zip(keys, net.add_places((f"w{i}.l{l}.c{c}.param", 1, {"worker": i, "layer": l})
                                          for i, l, c in keys)))
    specs, recv, back = [], {}, {}
    for l in range(L):
        for c, (k, _b) in enumerate(plan[l]):
            for i in range(n):
                recv[i, l, c] = f"ps{k}.l{l}.c{c}.from{i}"
                specs.append((recv[i, l, c], 0, {"layer": l, "shard": k}))
                if local(i, k):
                    back[i, l, c] = param[i, l, c]
                else:
                    back[i, l, c] = f"ps{k}.l{l}.c{c}.to{i}"
                    specs.append((back[i, l, c], 0, {"layer": l, "shard": k}))
    net.add_places(specs)
    grad, specs = {}, []
    for i, l, c in keys:
        if local(i, plan[l][c][0]):
            grad[i, l, c] = recv[i, l, c]
        else:
            grad[i, l, c] = f"w{i}.l{l}.c{c}.grad"
            specs.append((grad[i, l, c], 0, {"worker": i, "layer": l}))
    net.add_places(specs)

    # compute (and SSP's credits or gate)
    param_in = {i: {l: [param[i, l, c] for c in range(len(plan[l]))] for l in range(L)}
                for i in range(n)}
    grad_out = {i: {l: [grad[i, l, c] for c in range(len(plan[l]))] for l in range(L)}
                for i in range(n)}
    bs = worker_compute(net, fab, prof, cl, coarse, param_in, grad_out, staleness,
                        staleness_impl, balance)

    # pushes, in the order gradients become ready (last layer first), updates and pulls,
    # added at once (PSExchange.bulk)
    ltag = (lambda l: {}) if coarse else (lambda l: {"layer": l})
    with ex.bulk():
        _exchange(ex, plan, n, synchronous, grad, recv, back, param, ltag)
    net.meta["ps_plan"] = [[(int(k), float(b)) for k, b in p] for p in plan]
    net.meta["cluster"] = cl
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return _counted(net, staleness, staleness_impl)


def _counted(net: Net, staleness: int | None, staleness_impl: str) -> Net:
    """With ``staleness``, a worker's step counts for the SSP bound when the server has every
    piece of its gradient (:func:`.ps_members.count_at_server`, as Ho et al.'s server and the testbed
    count it), not at the end of its backward."""
    if staleness is not None:
        count_at_server(net, staleness_impl)
    return net


def _exchange(ex: PSExchange, plan: list[list[tuple[int, float]]], n: int, synchronous: bool,
              grad: dict, recv: dict, back: dict, param: dict, ltag) -> None:
    """The pushes (last layer first), the updates and the pulls of :func:`build_ps_net`."""
    local = ex.local
    L = len(plan)
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            for i in range(n):
                if local(i, k):
                    continue
                ex.push(i, k, b, f"l{l}.c{c}", chunk=c, inputs=[grad[i, l, c]],
                        outputs=[recv[i, l, c]], tags=ltag(l), priority=l)
    # updates
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            if synchronous:
                ex.update(f"ps{k}.update.l{l}.c{c}", k, b, chunk=c,
                          inputs=[recv[i, l, c] for i in range(n)],
                          outputs=[back[i, l, c] for i in range(n)], tags=ltag(l))
            else:
                for i in range(n):
                    ex.update(f"ps{k}.update.w{i}.l{l}.c{c}", k, b, chunk=c,
                              inputs=[recv[i, l, c]], outputs=[back[i, l, c]],
                              tags={"worker": i, **ltag(l)})
    # pulls
    for l in range(L - 1, -1, -1):
        for c, (k, b) in enumerate(plan[l]):
            for i in range(n):
                if local(i, k):
                    continue
                ex.pull(i, k, b, f"l{l}.c{c}", chunk=c, inputs=[back[i, l, c]],
                        outputs=[param[i, l, c]], tags=ltag(l), priority=l)


def _grouped(net: Net, fab: Fabric, ex: PSExchange, prof: ModelProfile, cl: Cluster,
             plan: list[list[tuple[int, float]]], balance: str) -> Net:
    """The fine BSP net with each layer's ``S`` pieces carried as one flow group per worker
    and direction (#15), as :mod:`.ps_coarse` does for the whole model.

    Every layer is one piece of ``b`` bytes on each shard ``0..S-1`` (shards dedicated, of
    equal bandwidths; no incast curve, no per-byte CPU costs): worker ``i``'s ``S`` pushes of
    layer ``l`` start together (at the end of the layer's backward), on ``S`` connections
    whose histories are alike, over the same worker-side links and one shard downlink each,
    where every shard sees the same flows. So their max-min rates are equal at every instant
    and they end together, and one flow ``w{i}.push.l{l}`` of ``S b`` bytes over the
    worker-side links and a link ``ps.down`` of the shards' summed bandwidth (on one
    connection ``worker{i}->ps``) has ``S`` times their rate under the same constraints and
    ends when they do (:mod:`.ps_coarse`'s argument, flow by flow). Its latency stage gives
    one token to each shard's mailbox ``ps{k}.l{l}.recv``, whose update takes the ``n``
    workers' tokens; each update gives one token to every worker's ``w{i}.l{l}.back``, whose
    pull (``ps.up``, ``S b`` bytes) takes all ``S`` (the pieces of a step: a worker's next
    push of the layer waits for this pull, so no token of another step is there). Without
    noise every time is the per-piece net's; with ``comm_cv`` (or the share CVs) a group's
    bytes have the CV of the sum of ``S`` independent pieces (``cv / sqrt(S)``) and, with
    ``compute_cv``, a pull waits for the slowest of the layer's ``S`` updates: an
    approximation. ``4 W L + 2 W L + S L`` transitions instead of ``4 W L S + 2 W L + S L``.
    """
    n, L, S = cl.workers, len(plan), cl.ps_shards
    host = ("ps", 0)
    ps_down, ps_up, cv_in, cv_out = merged_shards(net, fab, ex, 0, S)
    keys = [(i, l) for i in range(n) for l in range(L)]
    param = dict(zip(keys, net.add_places((f"w{i}.l{l}.param", 1, {"worker": i, "layer": l})
                                          for i, l in keys)))
    grad = dict(zip(keys, net.add_places((f"w{i}.l{l}.grad", 0, {"worker": i, "layer": l})
                                         for i, l in keys)))
    back = dict(zip(keys, net.add_places((f"w{i}.l{l}.back", 0, {"worker": i, "layer": l})
                                         for i, l in keys)))
    rkeys = [(l, k) for l in range(L) for k in range(S)]
    recv = dict(zip(rkeys, net.add_places((f"ps{k}.l{l}.recv", 0, {"layer": l, "shard": k})
                                          for l, k in rkeys)))
    profs, bs = worker_profiles(prof, cl, balance)
    for i in range(n):
        compute_chain(net, fab, profs[i], cl, i,
                      fwd_inputs={l: [param[i, l]] for l in range(L)},
                      bwd_outputs={l: [grad[i, l]] for l in range(L)})
    out = {i: worker_links(fab, i, "out") for i in range(n)}
    inn = {i: worker_links(fab, i, "in") for i in range(n)}
    hn = {i: fab.host_name(("worker", i)) for i in range(n)}
    lat_in = [fab.latency(("worker", i), host) for i in range(n)]
    lat_out = [fab.latency(host, ("worker", i)) for i in range(n)]

    def group(name: str, i: int, l: int, nbytes: float, cv: float, path: list[str], ins: dict,
              outs: dict, key: str, lat: float, direction: str) -> None:
        tags = {"kind": "comm", "step": False, "worker": i, "layer": l, "direction": direction,
                "shards": S}
        arrive = outs
        if lat > 0:
            arrive = {net.place(f"{name}.wire").name: 1}
        net.transfer(name, duration(nbytes, cv), path, inputs=ins, outputs=arrive,
                     connection=key, connection_tags={"host": key.split("->", 1)[0]},
                     priority=l, tags={**tags, "stage": "link", "bytes": nbytes})
        if lat > 0:
            net.transition(f"{name}.lat", Deterministic(lat), inputs=arrive, outputs=outs,
                           servers=math.inf, tags={**tags, "stage": "latency"})

    for l in range(L - 1, -1, -1):
        b = plan[l][0][1]
        for i in range(n):
            group(f"w{i}.push.l{l}", i, l, S * b, cv_in, [*out[i], ps_down], {grad[i, l]: 1},
                  {recv[l, k]: 1 for k in range(S)}, f"{hn[i]}->ps", lat_in[i], "push")
    for l in range(L - 1, -1, -1):
        b = plan[l][0][1]
        for k in range(S):
            ex.update(f"ps{k}.update.l{l}", k, b, chunk=0, inputs={recv[l, k]: n},
                      outputs={back[i, l]: 1 for i in range(n)}, tags={"layer": l})
    for l in range(L - 1, -1, -1):
        b = plan[l][0][1]
        for i in range(n):
            group(f"w{i}.pull.l{l}", i, l, S * b, cv_out, [ps_up, *inn[i]], {back[i, l]: S},
                  {param[i, l]: 1}, f"ps->{hn[i]}", lat_out[i], "pull")
    net.meta["ps_plan"] = [[(int(k), float(x)) for k, x in p] for p in plan]
    net.meta["cluster"] = cl
    net.meta["ps_form"] = "flow-groups"
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net
