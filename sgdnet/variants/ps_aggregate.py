"""Per-node aggregation of the parameter-server nets (``aggregation="node"``, issue #36).

Without it (``aggregation="none"``, the default) every GPU pushes its own copy of every
gradient piece to the piece's shard and pulls the new parameters back, so a node of ``g`` GPUs
sends ``g`` copies of the model through its NICs per step. The frameworks that run parameter
servers on multi-GPU nodes sum inside the node first and talk to the servers once per node:

* TensorFlow's ``variable_update=distributed_replicated`` (tf_cnn_benchmarks,
  ``VariableMgrDistributedReplicated`` in ``scripts/tf_cnn_benchmarks/variable_mgr.py`` of
  github.com/tensorflow/benchmarks): the towers' gradients of variable ``i`` are summed by copy
  on device ``i % num_gpus`` of the worker (``aggregate_gradients_using_copy_with_device_
  selection``, with ``local_parameter_device=gpu``), the sum is applied on the parameter
  server, and the updated value is read once per worker and assigned to every GPU's copy;
* MXNet's ``dist_device_sync`` kvstore: the ``device`` comm (``CommDevice``) reduces each key
  on one GPU of the machine (a merge buffer per key, spread over the GPUs), then one push and
  one pull per machine;
* BytePS (Jiang et al., "A Unified Architecture for Accelerating Distributed DNN Training in
  Heterogeneous GPU/CPU Clusters", OSDI 2020, section 4.2; github.com/bytedance/byteps): on
  PCIe-only machines the GPUs reduce-scatter each partition and copy their share to the host;
  on NVLink machines the partitions are reduced onto the GPU next to the NIC and copied from
  there; the sums go to *summation servers* on CPU machines (``placement="dedicated"``,
  ``shards`` = the CPU machines; ``update_s_per_byte`` then stands for the servers' summation
  cost, the optimizer running on the GPUs) and come back once per machine.

The net (:func:`build_node_net`, called by :func:`.parameter_server.build_ps_net` for every
PS variant, fine and coarse), on a cluster with a :class:`~sgdnet.workload.topology.Topology`
of ``N`` nodes of ``g`` GPUs; for every gradient piece ``(l, c)`` of ``b`` bytes on shard
``k`` (the plan of ``build_ps_net``):

Local reduce (``local_reduce``), over the topology's intra-node links (NVLink or PCIe flows
through :meth:`.Fabric.transfer`, so they congest like every other flow)
    * ``"device"`` (TensorFlow, MXNet): the piece is reduced onto one GPU of the node, the
      *leader*, the pieces taken round-robin over the node's GPUs (piece ``q`` of the plan, in
      layer order, onto local rank ``q mod g``; with several NICs per node the leaders, and so
      the pushes, are spread over all NICs): each other GPU sends its ``b`` to the leader
      (``w{j}.lred.*``, a reducing transfer), the leader pushes the node's sum. A coarse net's
      one tensor stands for the model's many variables, whose round-robin spreads the bytes
      evenly over the GPUs: it is cut into ``g`` slices of ``b/g``, slice ``j`` reduced onto
      local rank ``j``.
    * ``"root"`` (BytePS on NVLink machines): every piece onto local rank 0 (the GPU of NIC
      0), which pushes it whole.
    * ``"scatter"`` (BytePS on PCIe machines): a reduce-scatter ring inside the node (NCCL's,
      streamed: one flow of ``(g-1) b / g`` per GPU to its successor, :func:`.rings._ring_pipe`),
      then every GPU pushes its ``b / g`` of the node's sum through its own NIC.

One push and one pull per node
    The leader (each GPU, with ``"scatter"``) pushes its part of the node's sum to the shard
    (:meth:`.collectives.PSExchange.push`); a synchronous shard updates the piece once it has
    one copy of every part from every node (``N`` copies per part, instead of ``N g``), on its
    CPU as before (``cluster.update_time(b)``); the pull returns each part once per node, to
    the GPU that pushed it, which broadcasts it inside the node (``"device"`` / ``"root"``:
    ``w{j}.bcast.*`` transfers of ``b`` to every other GPU; ``"scatter"``: an all-gather ring,
    the reverse of the reduce-scatter). A shard on the leader's own GPU host (colocated shard
    ``k`` runs on the first GPU of node ``k``) takes the sum without a transfer; one on another
    GPU of the leader's node is reached over the intra-node link.

Bytes per step, for a model of ``M`` bytes (no partition): every node sends ``M`` up and
receives ``M`` down through its NICs (``"scatter"``: ``M / nics`` through each NIC, as every
NIC serves ``g / nics`` GPUs), instead of ``g M``; inside the node ``"device"``/``"scatter"``
move ``(g-1) M / g`` out of and into every GPU per direction of the exchange (reduce and
broadcast), ``"root"`` ``(g-1) M`` into (out of) the root and ``M`` out of (into) every other GPU.

Asynchronous variants (``async-ps``, ``ssp``, ``dssp``)
    As in MXNet's ``dist_device_async``: the node acts as one worker. Its GPUs' gradients of a
    piece are summed inside the node every step (so the node's GPUs run in step with each
    other, waiting for the node's reduce and broadcast), and the shard applies every node's sum
    on arrival and returns it to that node only; nodes run at their own pace. SSP's gate
    still counts every GPU's steps (the GPUs of a node are in step); DSSP's server counts
    pushes per node (the gate's members are the nodes, ``net.meta["ps_members"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import PSExchange
from .compute import compute_chain, compute_phase, worker_profiles
from .fabric import Fabric
from .rings import _ring_pipe, barrier_ok

__all__ = ["AGGREGATIONS", "LOCAL_REDUCES", "check_aggregation", "node_parts",
           "worker_compute", "build_node_net"]

#: Values of the option ``aggregation``, the default first.
AGGREGATIONS = ("none", "node")
#: Values of the option ``local_reduce``, the default first.
LOCAL_REDUCES = ("device", "root", "scatter")

_ZERO = Deterministic(0.0)


def check_aggregation(cluster: Cluster, aggregation: str, local_reduce: str) -> None:
    """Refuse an ``aggregation`` / ``local_reduce`` pair the cluster cannot take.

    Raises
    ------
    VariantError
        An unknown value, ``local_reduce`` other than the default without
        ``aggregation="node"``, or ``aggregation="node"`` on a cluster without a topology.
    """
    if aggregation not in AGGREGATIONS:
        raise VariantError(f"aggregation={aggregation!r}: use one of {list(AGGREGATIONS)} "
                           "('node': the GPUs of a node sum each piece before one push per node)")
    if local_reduce not in LOCAL_REDUCES:
        raise VariantError(f"local_reduce={local_reduce!r}: use one of {list(LOCAL_REDUCES)}")
    if aggregation == "none":
        if local_reduce != LOCAL_REDUCES[0]:
            raise VariantError(f"local_reduce={local_reduce!r} is how aggregation='node' sums "
                               "inside a node; with aggregation='none' every GPU pushes its "
                               "own copy: pass aggregation='node' or drop local_reduce")
        return
    if cluster.topology is None:
        raise VariantError("aggregation='node' sums each piece inside a node first, so it needs "
                           "nodes: give the Cluster a topology (Cluster(topology=Topology("
                           "gpus_per_node=8, ...))) or pass aggregation='none'")


def node_parts(plan: Sequence[Sequence[tuple[int, float]]], gpus_per_node: int,
               local_reduce: str, coarse: bool) -> list[list[list[tuple[int, float]]]]:
    """The parts a node pushes of every piece: ``parts[l][c]`` is a list of ``(local rank of
    the GPU that pushes it, bytes)`` for piece ``c`` of layer ``l`` of ``plan``.

    ``"device"``: the piece whole, onto local rank ``q mod g`` for the ``q``-th piece of the
    plan in layer order (coarse nets: ``g`` slices of ``b/g``, slice ``j`` on rank ``j``);
    ``"root"``: the piece whole on rank 0; ``"scatter"``: ``g`` slices, slice ``j`` on rank ``j``.
    """
    g = gpus_per_node
    out: list[list[list[tuple[int, float]]]] = []
    q = 0
    for pieces in plan:
        row = []
        for _k, b in pieces:
            if local_reduce == "scatter" or (local_reduce == "device" and coarse):
                row.append([(j, b / g) for j in range(g)])
            elif local_reduce == "root":
                row.append([(0, b)])
            else:
                row.append([(q % g, b)])
            q += 1
        out.append(row)
    return out


def worker_compute(net: Net, fab: Fabric, prof: ModelProfile, cl: Cluster, coarse: bool,
                   param_in: Mapping[int, Mapping[int, Sequence[str]]],
                   grad_out: Mapping[int, Mapping[int, Sequence[str]]],
                   staleness: int | None, staleness_impl: str, balance: str) -> list[int]:
    """Every worker's compute of a PS net, its SSP credits or gate; returns the batch sizes.

    ``param_in[i][l]``: the places worker ``i``'s forward of layer ``l`` reads (coarse: the
    compute phase reads those of every layer), ``grad_out[i][l]`` the places its backward of
    layer ``l`` fills. ``staleness`` (SSP): a ``lag`` gate over the workers' steps
    (``staleness_impl="gate"``) or pairwise credit places (``"places"``), see
    :func:`.parameter_server.build_ps_net`.
    """
    n = cl.workers
    credit: dict[tuple[int, int], str] = {}
    if staleness is not None and staleness_impl == "places":
        for i in range(n):
            for j in range(n):
                if i != j:
                    credit[i, j] = net.place(f"ssp.credit.w{i}.w{j}", staleness + 1,
                                             worker=i).name
    profs, bs = worker_profiles(prof, cl, balance)
    starts, steps = [], []
    for i in range(n):
        cin = [credit[i, j] for j in range(n) if j != i] if credit else []
        cout = [credit[j, i] for j in range(n) if j != i] if credit else []
        if coarse:
            ins = [p for l in range(len(param_in[i])) for p in param_in[i][l]] + cin
            outs = [p for l in range(len(grad_out[i])) for p in grad_out[i][l]] + cout
            t = compute_phase(net, fab, profs[i], cl, i, inputs=ins, outputs=outs)
            starts.append(t)
            steps.append(t)
        else:
            fin = {l: list(ps) for l, ps in param_in[i].items()}
            fin[0] = fin[0] + cin
            bout = {l: list(ps) for l, ps in grad_out[i].items()}
            bout[0] = bout[0] + cout
            ch = compute_chain(net, fab, profs[i], cl, i, fwd_inputs=fin, bwd_outputs=bout)
            starts.append(ch.fwd[0])
            steps.append(ch.step)
    if staleness is not None and staleness_impl == "gate":
        net.gate("ssp", "lag", steps, s=staleness)
        for i, t in enumerate(starts):
            net.transitions[t].gate = ("ssp", i)
    return bs


def build_node_net(net: Net, fab: Fabric, cl: Cluster, prof: ModelProfile,
                   plan: list[list[tuple[int, float]]], *, coarse: bool, synchronous: bool,
                   staleness: int | None, staleness_impl: str, balance: str,
                   local_reduce: str) -> Net:
    """The PS net with per-node aggregation (see the module docstring) into ``net``.

    ``plan`` is :func:`.parameter_server.build_ps_net`'s (pieces ``(shard, bytes)`` per layer,
    chunks included), ``prof`` the profile its layers come from, ``cl`` the cluster with the
    shard options applied (it has a topology: :func:`check_aggregation`).
    """
    t = cl.topology
    g, n = t.gpus_per_node, cl.workers
    N = n // g
    parts = node_parts(plan, g, local_reduce, coarse)
    P = max(len(x) for row in parts for x in row)
    ex = PSExchange(fab, members=N * P)
    scatter = local_reduce == "scatter"
    L = len(plan)
    lc = [(l, c) for l in range(L) for c in range(len(plan[l]))]

    # the GPUs' places: a parameter (1 token: step 0 may start) and a gradient per piece
    # ("scatter": the node's rings take the whole piece) or per part
    gk = ([(i, l, c, 0) for i in range(n) for l, c in lc] if scatter else
          [(i, l, c, x) for i in range(n) for l, c in lc for x in range(len(parts[l][c]))])
    sfx = ((lambda l, c, x: f"l{l}.c{c}") if scatter
           else (lambda l, c, x: f"l{l}.c{c}.p{x}"))
    param = dict(zip(gk, net.add_places((f"w{i}.{sfx(l, c, x)}.param", 1,
                                         {"worker": i, "layer": l}) for i, l, c, x in gk)))
    grad = dict(zip(gk, net.add_places((f"w{i}.{sfx(l, c, x)}.grad", 0,
                                        {"worker": i, "layer": l}) for i, l, c, x in gk)))
    param_in = {i: {l: [] for l in range(L)} for i in range(n)}
    grad_out = {i: {l: [] for l in range(L)} for i in range(n)}
    for key in gk:
        param_in[key[0]][key[1]].append(param[key])
        grad_out[key[0]][key[1]].append(grad[key])
    bs = worker_compute(net, fab, prof, cl, coarse, param_in, grad_out, staleness,
                        staleness_impl, balance)

    ltag = (lambda l: {}) if coarse else (lambda l: {"layer": l})

    def nsfx(l: int, c: int, x: int) -> str:  # a part's name on the node side
        return f"l{l}.c{c}.p{x}"

    # node side, per (node, piece, part): the places the push takes (src) and the pull fills
    # (dst); "scatter": the node's reduce-scatter and all-gather rings around them
    src: dict[tuple, list[str]] = {}
    dst: dict[tuple, list[str]] = {}
    nk = [(m, l, c, x) for m in range(N) for l, c in lc for x in range(len(parts[l][c]))]
    if scatter:
        ring_tags = {"step": False, "aggregation": "node"}
        whole = barrier_ok(fab)
        for m in range(N):
            members = list(range(m * g, (m + 1) * g))
            for l, c in lc:
                b = plan[l][c][1]
                if g == 1:
                    src[m, l, c, 0] = [grad[m, l, c, 0]]
                    dst[m, l, c, 0] = [param[m, l, c, 0]]
                    continue
                rs = {i: net.place(f"w{i}.l{l}.c{c}.rs", worker=i).name for i in members}
                ag = {i: net.place(f"w{i}.l{l}.c{c}.ag", worker=i).name for i in members}
                for x, i in enumerate(members):
                    src[m, l, c, x] = [rs[i]]
                    dst[m, l, c, x] = [ag[i]]
                for ph, red, ins, outs, label in (
                        ("rs", g - 1, {i: grad[i, l, c, 0] for i in members}, rs,
                         "reduce-scatter"),
                        ("ag", 0, ag, {i: param[i, l, c, 0] for i in members}, "all-gather")):
                    pre = f"n{m}.{ph}.l{l}.c{c}"
                    tg = {**ring_tags, **ltag(l), "node": m, "collective": pre, "phase": label}
                    _ring_pipe(net, fab, pre, members, b / g, g - 1, red, ins, outs, tg,
                               {"kind": "sync", **tg}, barrier=whole)
    with ex.bulk() as add:
        sync = {"kind": "sync", "step": False}
        recv, back = {}, {}
        for m, l, c, x in nk:
            k = plan[l][c][0]
            recv[m, l, c, x] = add.place(f"ps{k}.n{m}.{nsfx(l, c, x)}.in", shard=k, node=m).name
            back[m, l, c, x] = add.place(f"ps{k}.n{m}.{nsfx(l, c, x)}.out", shard=k,
                                         node=m).name
        if not scatter:
            for m, l, c, x in nk:
                j, b = parts[l][c][x]
                lead = m * g + j
                others = [i for i in range(m * g, (m + 1) * g) if i != lead]
                red = {i: add.place(f"n{m}.{nsfx(l, c, x)}.red{i}", node=m).name for i in others}
                bc = {i: add.place(f"n{m}.{nsfx(l, c, x)}.bc{i}", node=m).name for i in others}
                src[m, l, c, x] = [grad[lead, l, c, x], *red.values()]
                dst[m, l, c, x] = [param[lead, l, c, x], *bc.values()]
                for i in others:  # the node's reduce onto the leader
                    add.transfer(f"w{i}.lred.{nsfx(l, c, x)}", b, ("worker", i), ("worker", lead),
                                inputs=[grad[i, l, c, x]], outputs=[red[i]], reduce=True,
                                priority=l, tags={"worker": i, **ltag(l), "node": m,
                                                  "direction": "reduce", "chunk": c})
                for i in others:  # and the broadcast of the new parameters
                    add.transfer(f"w{i}.bcast.{nsfx(l, c, x)}", b, ("worker", lead), ("worker", i),
                                inputs=[bc[i]], outputs=[param[i, l, c, x]], priority=l,
                                tags={"worker": i, **ltag(l), "node": m,
                                      "direction": "broadcast", "chunk": c})
        def each_part():
            """(key, leader, suffix, tags, shard, layer, chunk, bytes) of every part a node
            sends, last layer first: the order of the pushes and of the pulls."""
            for l in range(L - 1, -1, -1):
                for c in range(len(plan[l])):
                    k = plan[l][c][0]
                    for m in range(N):
                        for x, (j, b) in enumerate(parts[l][c]):
                            yield ((m, l, c, x), m * g + j, nsfx(l, c, x),
                                   {**ltag(l), "node": m}, k, l, c, b)

        # pushes (last layer first), updates, pulls
        for key, lead, s, tg, k, l, c, b in each_part():
            if ex.local(lead, k):
                add.transition(f"n{key[0]}.sum.{s}", _ZERO, inputs={p: 1 for p in src[key]},
                               outputs={recv[key]: 1}, tags={**sync, **tg})
            else:
                ex.push(lead, k, b, s, chunk=c, inputs=src[key], outputs=[recv[key]],
                        tags=tg, priority=l)
        for l in range(L - 1, -1, -1):
            for c, (k, b) in enumerate(plan[l]):
                xs = range(len(parts[l][c]))
                if synchronous:
                    ex.update(f"ps{k}.update.l{l}.c{c}", k, b, chunk=c,
                              inputs=[recv[m, l, c, x] for m in range(N) for x in xs],
                              outputs=[back[m, l, c, x] for m in range(N) for x in xs],
                              tags=ltag(l))
                else:  # the node acts as one worker: its sum applied on arrival
                    for m in range(N):
                        ex.update(f"ps{k}.update.n{m}.l{l}.c{c}", k, b, chunk=c,
                                  inputs=[recv[m, l, c, x] for x in xs],
                                  outputs=[back[m, l, c, x] for x in xs],
                                  tags={"node": m, **ltag(l)})
        for key, lead, s, tg, k, l, c, b in each_part():
            if ex.local(lead, k):
                add.transition(f"n{key[0]}.got.{s}", _ZERO, inputs={back[key]: 1},
                               outputs={p: 1 for p in dst[key]}, tags={**sync, **tg})
            else:
                ex.pull(lead, k, b, s, chunk=c, inputs=[back[key]], outputs=dst[key], tags=tg,
                        priority=l)
    net.meta["ps_plan"] = [[(int(k), float(b)) for k, b in p] for p in plan]
    net.meta["cluster"] = cl
    net.meta["ps_form"] = "node-aggregation"
    net.meta["ps_aggregation"] = {"local_reduce": local_reduce,
                                  "parts": [[list(x) for x in row] for row in parts]}
    # DSSP's members: per node, the shard mailbox of every part it pushes (one producer: the
    # push or the local sum) and the place its pull reads (one reader: the pull or the local get)
    net.meta["ps_members"] = [[(f"{nsfx(l, c, x)}", recv[m, l, c, x], back[m, l, c, x])
                               for l, c in lc for x in range(len(parts[l][c]))]
                              for m in range(N)]
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net
