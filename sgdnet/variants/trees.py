"""Trees: NCCL's binary tree and double binary tree over ranks, and the all-reduces built on
them (``algorithm="tree"``: a heap tree reduced and broadcast hop by hop; ``"dbtree"``: two
trees, half the data each; on a cluster topology NCCL's multi-node tree, a double binary
tree over the nodes with a chain of GPUs inside each). :mod:`.collectives` dispatches to
them."""

from __future__ import annotations

from ..dists import Deterministic
from ..net import Net
from ..workload import Cluster
from .fabric import Fabric
from .fabric_bulk import TransferBatch
from .rings import barrier_ok, channel_order

__all__ = ["nccl_btree", "double_binary_tree", "node_tree", "depth_latency"]


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


def node_tree(cluster: Cluster, tree: int, channel: int = 0) -> dict[int, int]:
    """Parent map (GPU -> parent, -1 at the root) of NCCL's tree ``tree`` (0 or 1) of channel
    ``channel`` on the cluster's topology: tree ``tree`` of :func:`double_binary_tree` over
    the nodes, and inside each node a chain of its GPUs whose head is the first GPU of NIC
    ``channel mod nics`` (the order of :func:`.rings.channel_order`): a GPU's parent is
    its predecessor in the chain, a head's parent is the head of its node's parent node. The
    reduce climbs each chain to its head and the node tree to the root; the broadcast comes
    back down. Without a topology (or one GPU per node): the double binary tree over the
    workers."""
    n, t = cluster.workers, cluster.topology
    g = 1 if t is None else t.gpus_per_node
    nodes = double_binary_tree(n // g)[tree]
    local = channel_order(cluster, channel)[:g] if g > 1 else [0]
    parent = {}
    for node in range(n // g):
        chain = [node * g + lo for lo in local]
        up = nodes[node]
        parent[chain[0]] = -1 if up < 0 else up * g + local[0]
        for a, b in zip(chain, chain[1:]):
            parent[b] = a
    return parent


def depth_latency(fabric: Fabric, parent: dict[int, int]) -> float:
    """The largest sum of one-way latencies from a rank up to the root of ``parent``. Latencies
    are >= 0, so a leaf's path is the longest below it: only the leaves' paths are summed
    (each from the leaf up, as for any rank)."""
    inner = set(parent.values())
    best = 0.0
    for r in parent:
        if r in inner:
            continue
        lat, x = 0.0, r
        while parent[x] >= 0:
            lat += fabric.latency(("worker", x), ("worker", parent[x]))
            x = parent[x]
        best = max(best, lat)
    return best


def _tree_pipe(net: Net, fabric: Fabric, name: str, nbytes: float, parent: dict[int, int],
               ready: dict, done: dict, ctag: dict, lane: int) -> None:
    """The all-reduce of ``parent``'s tree at flow level, as NCCL streams it in chunks: every
    edge carries ``nbytes`` up (reduce) and ``nbytes`` down (broadcast), each one flow, all
    started together once every rank is ready; one join gives every rank its ``done`` token
    after the last flow plus the tree's latency term (a chunk climbs the deepest path and
    comes back down: twice its latencies). Alone on fast links the tree takes that latency
    plus ``nbytes / B`` of its slowest edge; edges sharing a NIC share it max-min fairly.
    ``2 (n - 1) + 2`` transitions per tree (the stepwise tree of :func:`_tree` stores and
    forwards the whole message at every hop)."""
    ranks = list(parent)
    zero = Deterministic(0.0)
    wt = {"kind": "sync", **ctag}
    with TransferBatch(fabric) as b:  # Net.place / Fabric.transfer's elements, added at once
        go = {(i, d): b.place(f"{name}.w{i}.go.{d}", worker=i).name
              for i in ranks if parent[i] >= 0 for d in ("up", "down")}
        end = b.place(f"{name}.end").name
        b.transition(f"{name}.go", zero, inputs={ready[i]: 1 for i in ranks},
                     outputs={p: 1 for p in go.values()}, tags=dict(wt))
        for i in ranks:
            p = parent[i]
            if p < 0:
                continue
            b.transfer(f"{name}.w{i}.reduce", nbytes, ("worker", i), ("worker", p),
                       inputs=[go[i, "up"]], outputs=[end], lane=lane, latency=0.0,
                       tags={"worker": i, **ctag, "phase": "reduce", "form": "pipelined"},
                       reduce=True)
            b.transfer(f"{name}.w{p}.bcast{i}", nbytes, ("worker", p), ("worker", i),
                       inputs=[go[i, "down"]], outputs=[end], lane=lane, latency=0.0,
                       tags={"worker": p, **ctag, "phase": "broadcast", "form": "pipelined"})
        lat = 2 * depth_latency(fabric, parent)
        b.transition(f"{name}.join", Deterministic(lat) if lat > 0 else zero,
                     inputs={end: 2 * (len(ranks) - 1)}, outputs={done[i]: 1 for i in ranks},
                     tags=dict(wt))


def _tree(net: Net, fabric: Fabric, name: str, nbytes: float, n: int, ready: dict,
          done: dict, ctag: dict, parent: dict[int, int] | None = None, lane: int = 0) -> None:
    """Binary-tree reduce then broadcast of ``nbytes`` (see :func:`allreduce`) over the tree
    ``parent`` (rank -> parent, -1 at the root; default the heap tree, parent ``(i-1)//2``)."""
    if parent is None:
        parent = {i: (i - 1) // 2 if i else -1 for i in range(n)}
    root = next(i for i in range(n) if parent[i] < 0)
    children: dict[int, list[int]] = {i: [] for i in range(n)}
    for c in range(n):  # in rank order, so each list is sorted
        if parent[c] >= 0:
            children[parent[c]].append(c)
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


def _dbtree(net: Net, fabric: Fabric, cluster: Cluster, name: str, nbytes: float,
            ready: dict, done: dict, ctag: dict, channels: int = 1,
            pipelined: bool = False) -> None:
    """NCCL's double binary tree: ``channels`` pairs of trees (:func:`node_tree`; on a
    topology channel ``k``'s chains start at NIC ``k mod nics``), each tree reducing and
    broadcasting ``nbytes / (2 channels)`` at the same time on its own connections (lanes
    ``2k + 1``, ``2k + 2``); stepwise (:func:`_tree`: store and forward at every hop) or
    ``pipelined`` (:func:`_tree_pipe`: streamed, one flow per edge and direction; only where
    :func:`.rings.barrier_ok`, else stepwise)."""
    n = cluster.workers
    pipelined = pipelined and barrier_ok(fabric)
    wt = {"kind": "sync", **ctag}
    parts = [(k, t) for k in range(channels) for t in range(2)]
    pre = {(k, t): f"{name}.t{t}" if channels == 1 else f"{name}.c{k}.t{t}" for k, t in parts}
    starts = {(i, kt): net.place(f"{pre[kt]}.w{i}.ready", worker=i).name
              for i in range(n) for kt in parts}
    ends = {(i, kt): net.place(f"{pre[kt]}.w{i}.done", worker=i).name
            for i in range(n) for kt in parts}
    for i in range(n):
        net.transition(f"{name}.w{i}.split", 0.0, inputs={ready[i]: 1},
                       outputs={starts[i, kt]: 1 for kt in parts}, tags={"worker": i, **wt})
    for k, t in parts:
        parent = node_tree(cluster, t, k)
        tags = {**ctag, "tree": t} if channels == 1 else {**ctag, "tree": t, "channel": k}
        ins = {i: starts[i, (k, t)] for i in range(n)}
        outs = {i: ends[i, (k, t)] for i in range(n)}
        if pipelined:
            _tree_pipe(net, fabric, pre[k, t], nbytes / len(parts), parent, ins, outs, tags,
                       lane=2 * k + t + 1)
        else:
            _tree(net, fabric, pre[k, t], nbytes / len(parts), n, ins, outs, tags, parent,
                  lane=2 * k + t + 1)
    for i in range(n):
        net.transition(f"{name}.w{i}.join", 0.0, inputs={ends[i, kt]: 1 for kt in parts},
                       outputs={done[i]: 1}, tags={"worker": i, **wt})
