"""Trees: NCCL's binary tree and double binary tree over ranks, and the all-reduces built on
them (``algorithm="tree"``: a heap tree reduced and broadcast hop by hop; ``"dbtree"``: two
trees, half the data each). :mod:`.collectives` dispatches to them."""

from __future__ import annotations

from ..net import Net
from .fabric import Fabric

__all__ = ["nccl_btree", "double_binary_tree"]


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
