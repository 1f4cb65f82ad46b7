"""The coarse BSP parameter-server net on flows in ``O(workers + shards)`` transitions (#15).

The coarse ``sync-ps`` net of :func:`.parameter_server.build_ps_net` moves the model as one
tensor cut into ``S`` equal pieces, one per shard: every worker pushes a piece to every shard
and pulls one back, ``2 W S`` flows (each with its latency stage and its connection) for ``W``
workers, 66,576 transitions for ResNet-50 on 1,024 GPUs and 16 shards. When the shards are
alike, the ``S`` flows of one worker are alike too, and this module carries them as one:

Flow groups
    Worker ``i``'s ``S`` pushes start together (at the end of its compute phase), have the
    same bytes ``b`` and cross the same worker-side links, then shard ``k``'s downlink, of the
    same bandwidth ``B`` for every ``k``, where every worker has one flow. Their max-min fair
    rates are then equal (the allocation is unique, and symmetric in the shards), so they end
    together. One flow ``w{i}.push`` of ``S b`` bytes over the worker-side links and one link
    ``ps.down`` of ``S B`` (the shards' downlinks side by side) has ``S`` times their rate
    under the same constraints (a worker-side link carries ``S`` flows per worker, the merged
    link the sum of ``S`` links' rates, and ``ps.down`` sees one flow per worker as each shard
    link does), so it ends at the same instant. Likewise the pulls (``ps.up``, ``w{i}.pull``).

Latencies as two joins
    Shard ``k``'s update waits for every worker's piece, each ``latency`` after its flow
    ended, so it starts at ``max_i(end_i) + latency``: one join ``ps.arrive`` (a delay of the
    latency after the last push) feeds the ``S`` updates ``ps{k}.update`` (each on
    ``ps{k}.cpu``). The pulls start when the updates are done; their latency is paid before
    them by the join ``ps.release``: pulls only share links with pulls (links are directional,
    pushes take the other direction), so starting them all ``latency`` later moves the whole
    pull phase by the latency, and each worker gets its parameters when it would.

So ``3 W + S + 2`` transitions (3,090 instead of 66,576 at 1,024 GPUs and 16 shards), no
connection resources (one message per connection and step orders with nothing). Same
throughput as the per-piece net, to rounding, without noise on the pushes and pulls; with
``comm_cv`` (or ``share_cv_in`` / ``share_cv_out``) a worker's ``S`` pieces share one draw of
noise of CV ``cv / sqrt(S)`` (their mean) and, with ``compute_cv``, the pulls wait for the
slowest update: an approximation, as the coarse model is.

:func:`build` returns ``None`` (the caller builds the per-piece net) unless: flows, dedicated
PS hosts, pieces of equal bytes on distinct shards of equal bandwidths, no incast curve (a
worker's downlink would see one flow instead of ``S``), and no CPU cost per byte of a transfer.
"""

from __future__ import annotations

import math

from ..dists import Deterministic
from ..net import Net
from ..workload import Cluster, ModelProfile
from .collectives import PSExchange, ps_cluster
from .compute import compute_phase, worker_profiles
from .durations import duration
from .fabric import Fabric

__all__ = ["build", "applies", "worker_links", "merged_shards", "fine_groups"]


def applies(cluster: Cluster, discipline: str, priority: bool) -> bool:
    """Whether :func:`build` takes ``cluster`` (see the module docstring); ``cluster`` has the
    variant's shard and placement options applied."""
    c = cluster
    if discipline != "flows" or priority or c.ps_placement == "colocated":
        return False
    if (c.incast or c.ps_link_efficiency or c.send_s_per_byte or c.recv_s_per_byte
            or c.reduce_s_per_byte):
        return False
    S = c.ps_shards
    ups = {c.ps_up_bw(k) for k in range(S)}
    downs = {c.ps_down_bw(k) for k in range(S)}
    return len(ups) == 1 and len(downs) == 1


def build(name: str, model: ModelProfile, cluster: Cluster, *, shards: int | None = None,
          placement: str | None = None, discipline: str = "flows", priority: bool = False,
          balance: str = "none", aggregation: str = "none", **_ignored) -> Net | None:
    """The coarse BSP parameter-server net with one flow per worker and direction (see the
    module docstring), or ``None`` when the cluster does not allow it.

    Parameters
    ----------
    name : str
        The net's name.
    model : ModelProfile
        The profile (its layer times and gradient bytes).
    cluster : Cluster
        The cluster (``shards`` / ``placement`` applied here, as :func:`.ps_cluster` does).
    shards, placement, discipline, priority, balance
        The ``sync-ps`` options; the others (``partition_bytes``, ``max_layers``, ...) do not
        apply to a coarse net.
    aggregation : str
        ``"node"``: ``None`` (the per-node aggregation net is built by
        :func:`.parameter_server.build_ps_net`, :mod:`.ps_aggregate`).

    Returns
    -------
    Net or None
    """
    if aggregation != "none":
        return None
    cl = ps_cluster(cluster, shards, placement)
    if not applies(cl, discipline, priority):
        return None
    pieces = cl.shard_tensor(0, model.grad_bytes)
    used = [k for k, _ in pieces]
    sizes = {b for _, b in pieces}
    if len(set(used)) != len(used) or len(sizes) != 1 or not sizes.pop() > 0:
        return None
    n, S = cl.workers, len(pieces)
    b = pieces[0][1]
    net = Net(name)
    fab = Fabric(net, cl, discipline, priority)
    ex = PSExchange(fab)
    lat_in = max(fab.latency(("worker", i), ("ps", k)) for i in (0, n - 1) for k in used)
    lat_out = max(fab.latency(("ps", k), ("worker", i)) for i in (0, n - 1) for k in used)
    ps_down, ps_up, cv_in, cv_out = merged_shards(net, fab, ex, used[0], S)
    profs, bs = worker_profiles(model, cl, balance)
    recv = net.place("ps.recv").name
    go = {i: net.place(f"w{i}.pull.go", worker=i).name for i in range(n)}
    for i in range(n):
        param = net.place(f"w{i}.param", 1, worker=i).name
        grad = net.place(f"w{i}.grad", worker=i).name
        compute_phase(net, fab, profs[i], cl, i, inputs=[param], outputs=[grad])
        tg = {"worker": i, "kind": "comm", "step": False, "shards": S, "bytes": S * b}
        net.transfer(f"w{i}.push", duration(S * b, cv_in), [*worker_links(fab, i, "out"), ps_down],
                     inputs={grad: 1}, outputs={recv: 1},
                     tags={**tg, "direction": "push"})
        net.transfer(f"w{i}.pull", duration(S * b, cv_out), [ps_up, *worker_links(fab, i, "in")],
                     inputs={go[i]: 1}, outputs={param: 1},
                     tags={**tg, "direction": "pull"})
    sync = {"kind": "sync", "step": False}
    upd_in = {k: net.place(f"ps{k}.in", shard=k).name for k in used}
    upd_out = {k: net.place(f"ps{k}.out", shard=k).name for k in used}
    net.transition("ps.arrive", Deterministic(lat_in) if lat_in > 0 else 0.0,
                   inputs={recv: n}, outputs={p: 1 for p in upd_in.values()},
                   servers=math.inf, tags={**sync, "stage": "latency"})
    for k in used:
        ex.update(f"ps{k}.update", k, b, chunk=0, inputs=[upd_in[k]], outputs=[upd_out[k]])
    net.transition("ps.release", Deterministic(lat_out) if lat_out > 0 else 0.0,
                   inputs={p: 1 for p in upd_out.values()}, outputs={p: 1 for p in go.values()},
                   servers=math.inf, tags={**sync, "stage": "latency"})
    net.meta["ps_plan"] = [[(int(k), float(x)) for k, x in pieces]]
    net.meta["cluster"] = cl
    net.meta["ps_form"] = "flow-groups"
    if balance != "none":
        net.meta["batch_sizes"] = bs
    return net


def merged_shards(net: Net, fab: Fabric, ex: PSExchange, k: int, S: int
                  ) -> tuple[str, str, float, float]:
    """The ``S`` alike shards' downlinks and uplinks side by side, as the links ``ps.down`` and
    ``ps.up`` of ``S`` times shard ``k``'s bandwidths, and the CVs of a group's bytes into and
    out of them (a group of ``S`` pieces: their mean's noise, ``cv / sqrt(S)``); returns
    ``(ps_down, ps_up, cv_in, cv_out)``."""
    host = ("ps", k)  # every shard alike: one stands for all
    ps_down = net.link("ps.down", S * fab.down_bw(host), host="ps", kind="nic_down",
                       shards=S).name
    ps_up = net.link("ps.up", S * fab.up_bw(host), host="ps", kind="nic_up", shards=S).name
    cv_in = fab.flow_cv("in" if ex.shared(k) else None) / math.sqrt(S)
    cv_out = fab.flow_cv("out" if ex.shared(k) else None) / math.sqrt(S)
    return ps_down, ps_up, cv_in, cv_out


def worker_links(fab: Fabric, i: int, direction: str) -> list[str]:
    """The worker-side links of worker ``i``'s flows to (``"out"``) or from (``"in"``) a
    dedicated PS host: its NIC link, or its topology path out of / into its node."""
    topo = fab.cluster.topology
    if direction == "out":
        return [fab.up(("worker", i))] if topo is None else [
            fab._topo_link(s) for s in topo.out_path(i)]
    return [fab.down(("worker", i))] if topo is None else [
        fab._topo_link(s) for s in topo.in_path(i)]


def fine_groups(cluster: Cluster, plan: list[list[tuple[int, float]]], discipline: str,
                priority: bool) -> bool:
    """Whether the fine ``sync-ps`` net may carry each layer's pieces as one flow group per
    worker and direction (:func:`.parameter_server.build_ps_net`): :func:`applies`, and every
    layer of ``plan`` cut into one piece of equal bytes > 0 on each of the ``S >= 2`` shards
    (then every connection, shard link and shard CPU sees the same traffic at every instant,
    so the pieces of a worker's layer start, flow and end together)."""
    S = cluster.ps_shards
    if S < 2 or not applies(cluster, discipline, priority):
        return False
    for pieces in plan:
        if [k for k, _ in pieces] != list(range(S)) or len({b for _, b in pieces}) != 1:
            return False
        if not pieces[0][1] > 0:
            return False
    return True
