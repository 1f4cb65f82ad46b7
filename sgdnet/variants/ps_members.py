"""The members of a parameter-server net's SSP / DSSP bound and where their pushes arrive.

Shared by :mod:`.parameter_server` (which counts an SSP step at the server,
:func:`count_at_server`), :mod:`.ssp` and :mod:`.dssp` (whose controller reads the same
arrivals, :func:`members`). Imports no builder, so the builders import it without a cycle.
"""

from __future__ import annotations

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net

__all__ = ["members", "count_at_server"]


def members(net: Net, n: int):
    """Per member of the gate: its name prefix, tags and pieces ``(label, mailbox, read,
    local)``: the shard mailbox a piece of its push arrives in, the place the worker's reader
    of the new parameters takes (its pull, or with the shard on its host its forward op), and
    whether it is that forward's parameter place. The members are the workers, or with
    per-node aggregation the nodes (``net.meta["ps_members"]``, :mod:`.ps_aggregate`)."""
    nodes = net.meta.get("ps_members")
    if nodes is not None:
        for m, pieces in enumerate(nodes):
            yield f"dssp.n{m}", {"node": m}, [(lab, r, b, False) for lab, r, b in pieces]
        return
    plan = net.meta["ps_plan"]
    for i in range(n):
        pieces = []
        for l, row in enumerate(plan):
            for c, (k, _b) in enumerate(row):
                # the place names of build_ps_net: the shard's mailbox, then what the worker reads
                recv = f"ps{k}.l{l}.c{c}.from{i}"
                back = f"ps{k}.l{l}.c{c}.to{i}"
                local = back not in net.places
                if local:
                    back = f"w{i}.l{l}.c{c}.param"
                pieces.append((f"l{l}.c{c}", recv, back, local))
        yield f"dssp.w{i}", {"worker": i}, pieces


def count_at_server(net: Net, impl: str) -> None:
    """Count worker ``i``'s step when the server has every piece of its gradient (with
    per-node aggregation: every piece its node pushes): a join ``ssp.w{i}.push`` of per-piece
    receipts becomes the gate's counter of ``i`` (``impl="gate"``) or gives back the credits
    ``ssp.credit.w{j}.w{i}`` (``"places"``) in place of ``i``'s step transition."""
    cl = net.meta["cluster"]
    n = cl.workers
    g = cl.topology.gpus_per_node if net.meta.get("ps_members") is not None else 1
    producers: dict[str, list] = {}
    for t in net.transitions.values():
        for p in t.outputs:
            producers.setdefault(p, []).append(t)
    arrived: dict[int, list[str]] = {i: [] for i in range(n)}
    for m, (_pre, _tag, pieces) in enumerate(members(net, n if g == 1 else n // g)):
        for lab, recv, _back, _local in pieces:
            made = producers.get(recv, [])
            if len(made) != 1:
                raise VariantError(f"ssp: the parameter-server net {net.name!r} has no single "
                                   f"arrival of piece {lab} of member {m}")
            for i in range(m * g, (m + 1) * g):
                a = net.place(f"ssp.w{i}.{lab}.arrived", worker=i).name
                made[0].outputs[a] = 1
                arrived[i].append(a)
    joins = []
    for i in range(n):
        credits = []
        if impl == "places":  # the credits others take from i, given back by i's step so far
            mine = {f"ssp.credit.w{j}.w{i}" for j in range(n) if j != i}
            for t in [t for t in net.transitions.values() if mine.intersection(t.outputs)]:
                for p in mine.intersection(t.outputs):
                    del t.outputs[p]
            credits = sorted(mine, key=lambda p: int(p.split(".w")[1]))
        joins.append(net.transition(f"ssp.w{i}.push", Deterministic(0.0), inputs=arrived[i],
                                    outputs=credits, tags={"worker": i, "kind": "sync"}).name)
    if impl == "gate":
        net.gates["ssp"].counters = tuple(joins)
