"""The network of a cluster inside a net: the one place where bytes and bandwidth become a
duration.

Every variant gets its NIC (and compute-for-communication) resources, its point-to-point
transfers and the closed-form time of a coarse all-reduce from a :class:`Fabric`; nothing else
divides bytes by a bandwidth. This is the seam a network model (flows, topologies) replaces.

Transfers (the NIC model)
    :meth:`Fabric.transfer` moves ``b`` bytes from host ``src`` to host ``dst`` in **two
    stages**:

    1. a *link* stage that holds the sender's uplink and the receiver's downlink together for
       ``b / min(up_bw(src), down_bw(dst))`` seconds (cut-through: no store-and-forward at the
       switch, so one transition holds both NIC directions it crosses);
    2. a *latency* stage, a pure delay of ``cluster.latency`` seconds with infinite servers and
       no resources (omitted when the latency is 0).

    Latency therefore does not occupy link capacity: back-to-back messages on a link overlap
    their propagation delays, as pipelined TCP segments do. A chain of ``k`` dependent
    transfers of ``b`` bytes costs ``k (latency + b / B)`` — e.g. ring all-reduce's
    ``2(n-1)(alpha + M/(n B))``. Link discipline is ``"fifo"`` (first come, first served by
    the time the transfer became ready) or ``"ps"`` (processor sharing: concurrent transfers
    on a NIC progress at ``1/n`` each, like fair-shared TCP flows; a transfer holding two
    shared NICs progresses at the slower rate). With ``priority=True`` the NICs use the
    ``priority`` discipline and transfers carry a priority (the layer index for PS variants:
    lower layers first, as P3 / ByteScheduler do).

Names
    Worker ``i``'s resources are ``w{i}.gpu``, ``w{i}.up``, ``w{i}.down`` (host
    ``"worker{i}"``); a dedicated PS shard ``k`` has ``ps{k}.up``, ``ps{k}.down`` (host
    ``"ps{k}"``); every shard has ``ps{k}.cpu`` (kind ``"ps_cpu"``, on the worker's host when
    colocated, where the shard also shares worker ``k``'s NICs).

Coarse collectives
    :meth:`Fabric.allreduce_share` is one worker's share of a coarse all-reduce: a transition
    holding its own NICs for the closed-form ring (or tree) time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..dists import Deterministic
from ..errors import VariantError
from ..net import Net
from ..workload import Cluster, ring_allreduce_time, tree_allreduce_time
from .durations import duration

__all__ = ["Host", "Fabric"]

#: A host: ``("worker", i)`` or ``("ps", k)`` (a dedicated parameter-server host).
Host = tuple[str, int]


class Fabric:
    """The resources of a cluster inside one net, created on first use, and transfers.

    Parameters
    ----------
    net : Net
        The net being built.
    cluster : Cluster
        Speeds, bandwidths, latency, PS placement, CVs.
    discipline : {"fifo", "ps"}
        NIC discipline.
    priority : bool
        Use the ``priority`` discipline on NICs (transfers then pass a ``priority``).
    """

    def __init__(self, net: Net, cluster: Cluster, discipline: str = "fifo",
                 priority: bool = False):
        if discipline not in ("fifo", "ps"):
            raise VariantError(f"discipline={discipline!r}: use 'fifo' or 'ps'")
        if priority and discipline == "ps":
            raise VariantError(
                "priority=True needs discipline='fifo' (a processor-shared NIC serves all flows at "
                "once, so there is nothing to prioritise); use one or the other"
            )
        self.net = net
        self.cluster = cluster
        self.nic_discipline = "priority" if priority else discipline
        self._res: dict[str, str] = {}

    # resources
    def _resource(self, name: str, discipline: str, **tags) -> str:
        if name not in self._res:
            self.net.resource(name, 1, discipline, **tags)
            self._res[name] = name
        return name

    def gpu(self, i: int) -> str:
        """Worker ``i``'s GPU resource."""
        return self._resource(f"w{i}.gpu", "fifo", host=f"worker{i}", kind="gpu", worker=i)

    def ps_host(self, k: int) -> Host:
        """Host of PS shard ``k``: ``("worker", k)`` if colocated, else ``("ps", k)``."""
        h = self.cluster.ps_host(k)
        return ("ps", k) if h is None else ("worker", h)

    def ps_cpu(self, k: int) -> str:
        """PS shard ``k``'s CPU (update) resource."""
        kind, h = self.ps_host(k)
        host = f"worker{h}" if kind == "worker" else f"ps{k}"
        return self._resource(f"ps{k}.cpu", "fifo", host=host, kind="ps_cpu", shard=k)

    def host_compute(self, host: Host) -> str:
        """The compute resource of ``host``: a worker's GPU, or a dedicated PS host's CPU."""
        kind, i = host
        return self.gpu(i) if kind == "worker" else self.ps_cpu(i)

    def link_resources(self, src: Host, dst: Host) -> list[str]:
        """What moving data from ``src`` to ``dst`` holds: ``up(src)``, ``down(dst)`` and, with
        ``cluster.comm_uses_compute``, the receiver's compute (:meth:`host_compute`), which
        copies and reduces the data. The sender's compute stays free, so a ring's simultaneous
        send and receive do not serialise. ``src == dst`` names one host's whole share of a
        collective (both of its NIC directions)."""
        res = [self.up(src), self.down(dst)]
        if self.cluster.comm_uses_compute:
            res.append(self.host_compute(dst))
        return res

    def up(self, host: Host) -> str:
        """Uplink (send direction) resource of ``host``."""
        kind, i = host
        if kind == "worker":
            return self._resource(f"w{i}.up", self.nic_discipline, host=f"worker{i}",
                                  kind="nic_up", worker=i)
        return self._resource(f"ps{i}.up", self.nic_discipline, host=f"ps{i}", kind="nic_up",
                              shard=i)

    def down(self, host: Host) -> str:
        """Downlink (receive direction) resource of ``host``."""
        kind, i = host
        if kind == "worker":
            return self._resource(f"w{i}.down", self.nic_discipline, host=f"worker{i}",
                                  kind="nic_down", worker=i)
        return self._resource(f"ps{i}.down", self.nic_discipline, host=f"ps{i}",
                              kind="nic_down", shard=i)

    def up_bw(self, host: Host) -> float:
        """Send bandwidth of ``host``, bytes/s."""
        kind, i = host
        return self.cluster.up_bw(i) if kind == "worker" else self.cluster.ps_up_bw(i)

    def down_bw(self, host: Host) -> float:
        """Receive bandwidth of ``host``, bytes/s."""
        kind, i = host
        return self.cluster.down_bw(i) if kind == "worker" else self.cluster.ps_down_bw(i)

    def bandwidth(self, src: Host, dst: Host) -> float:
        """Bandwidth of a transfer from ``src`` to ``dst``: ``min(up_bw(src), down_bw(dst))``,
        bytes/s (cut-through: the slower of the two NIC directions it crosses)."""
        return min(self.up_bw(src), self.down_bw(dst))

    # transfers
    def transfer(
        self,
        name: str,
        nbytes: float,
        src: Host,
        dst: Host,
        *,
        inputs: Iterable[str],
        outputs: Iterable[str],
        link_outputs: Iterable[str] = (),
        tags: Mapping[str, Any] | None = None,
        priority: int = 0,
    ) -> list[str]:
        """Add a transfer of ``nbytes`` from ``src`` to ``dst``; returns its transition names.

        The link stage (named ``name``) consumes ``inputs``, holds ``up(src)`` and
        ``down(dst)`` for ``nbytes / min(up_bw(src), down_bw(dst))`` seconds (CV
        ``cluster.comm_cv``) and produces ``link_outputs`` when the link is released; the
        latency stage (``name + ".lat"``, omitted when latency is 0) then produces ``outputs``
        (the data has arrived). The link stage holds :meth:`link_resources`.
        """
        if src == dst:
            raise VariantError(f"transfer {name!r}: source and destination are the same host {src}")
        net, c = self.net, self.cluster
        bw = self.bandwidth(src, dst)
        tg = {"kind": "comm", "step": False, **(tags or {})}
        res = self.link_resources(src, dst)
        link_outputs, outputs = list(link_outputs), list(outputs)
        if c.latency > 0:
            wire = net.place(f"{name}.wire")
            net.transition(name, duration(nbytes / bw, c.comm_cv), inputs={p: 1 for p in inputs},
                           outputs={p: 1 for p in [*link_outputs, wire.name]}, resources=res,
                           priority=priority, tags={**tg, "stage": "link", "bytes": nbytes})
            net.transition(f"{name}.lat", Deterministic(c.latency), inputs={wire: 1},
                           outputs={p: 1 for p in outputs}, servers=math.inf,
                           tags={**tg, "stage": "latency"})
            return [name, f"{name}.lat"]
        net.transition(name, duration(nbytes / bw, c.comm_cv), inputs={p: 1 for p in inputs},
                       outputs={p: 1 for p in [*link_outputs, *outputs]}, resources=res,
                       priority=priority, tags={**tg, "stage": "link", "bytes": nbytes})
        return [name]

    def allreduce_share(
        self,
        name: str,
        nbytes: float,
        worker: int,
        algorithm: str,
        *,
        inputs: Iterable[str],
        outputs: Iterable[str],
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Worker ``worker``'s share of a coarse all-reduce of ``nbytes``: one transition
        ``name`` holding the worker's own uplink and downlink (:meth:`link_resources` of the
        host to itself) for the closed-form collective time (CV ``cluster.comm_cv``).

        The time is :func:`~sgdnet.workload.ring_allreduce_time` (``algorithm="ring"``) or
        :func:`~sgdnet.workload.tree_allreduce_time` (``"tree"``) of ``nbytes`` among
        ``cluster.workers`` at the bandwidth from the worker to its ring successor and the
        cluster latency.
        """
        c = self.cluster
        n = c.workers
        closed = ring_allreduce_time if algorithm == "ring" else tree_allreduce_time
        bw = self.bandwidth(("worker", worker), ("worker", (worker + 1) % n))
        t = closed(nbytes, n, bw, c.latency)
        host = ("worker", worker)
        self.net.transition(name, duration(t, c.comm_cv), inputs={p: 1 for p in inputs},
                            outputs={p: 1 for p in outputs},
                            resources=self.link_resources(host, host), tags=dict(tags or {}))
        return name
