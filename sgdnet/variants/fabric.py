"""The network of a cluster inside a net: the one place where bytes and bandwidth become a
duration.

Every variant gets its NIC (and compute-for-communication) resources, its point-to-point
transfers and the closed-form time of a coarse all-reduce from a :class:`Fabric`; nothing else
divides bytes by a bandwidth. This is the seam a network model (flows, topologies) replaces.

Transfers (the network model, option ``discipline``)
    ``"flows"`` (the default): every host has an uplink and a downlink (:meth:`Net.link`
    resources of the host's bandwidth; a downlink's efficiency is ``cluster.incast``). A
    transfer of ``b`` bytes from ``src`` to ``dst`` is a flow over ``[up(src), down(dst)]``
    (:meth:`Net.transfer`) on the connection ``src->dst`` (one TCP connection per pair, as
    gloo and NCCL keep: messages of one pair go one at a time, in order; different pairs
    share). The active flows' rates are the max-min fair allocation over all links, so a
    parameter server's downlink is shared fairly by the workers pushing into it and a
    worker's own messages do not overtake each other. Per-message noise (``comm_cv``)
    multiplies the bytes. With ``cluster.cpu_overlap`` the CPU's per-byte work overlaps the
    flow: the sender's ``send_s_per_byte`` and the receiver's ``recv_s_per_byte`` are
    two more links of the flow's path (:meth:`Fabric.cpu_link`, bandwidth ``1 / s_per_byte``),
    so the work runs while the bytes move and only its excess over the link time delays the
    message (one message alone: ``b * max(1/B, send_s_per_byte, recv_s_per_byte)``), and a
    host's concurrent messages share its CPU max-min fairly (gloo's TCP pairs read into the
    destination buffer as segments arrive). With ``cpu_overlap=False`` (the default) the
    sender's compute pays ``send_s_per_byte * b`` before the flow and the receiver's
    ``recv_s_per_byte * b`` after it, held for that work only. A reducing receiver's
    ``reduce_s_per_byte * b`` (adding the data to its own, which needs the whole message) is a
    stage on its compute after the flow in both. The data arrives ``cluster.latency`` after
    its last byte left (a pure delay stage, ``name + ".lat"``).

    ``"fifo"`` and ``"ps"`` (the earlier NIC models, kept for comparisons and closed forms): a
    *link* stage holds the sender's uplink and the receiver's downlink (FIFO resources, or
    processor-shared ones where concurrent transfers progress at ``1/n``) for
    ``b / min(up_bw(src), down_bw(dst))`` seconds, then the latency stage. With
    ``cluster.comm_uses_compute`` the link stage also holds the receiver's compute for the
    whole link time. With ``priority=True`` the NICs use the ``priority`` discipline and
    transfers carry a priority (the layer index for PS variants: lower layers first, as P3 /
    ByteScheduler do); it needs ``discipline="fifo"``.

    With a cluster topology (``cluster.topology``, flows only) a transfer's path is the
    topology's (:meth:`Fabric.path`: GPU -> NVLink/PCIe (-> PCIe switch uplink, root complex)
    -> NIC up -> leaf up -> leaf down -> NIC down -> GPU, see :mod:`sgdnet.workload.topology`;
    every element a ``(name, bandwidth, kind)`` link, so the PCIe tree needs nothing here),
    its latency the intra-node one
    inside a node and ``cluster.latency`` between nodes (:meth:`Fabric.latency`); the links
    are created on first use, so a net holds only the links its transfers cross.

    In every model latency does not occupy link capacity: back-to-back messages overlap their
    propagation delays, as pipelined TCP segments do. A chain of ``k`` dependent transfers of
    ``b`` bytes alone on their links costs ``k (latency + b / B)`` — e.g. ring all-reduce's
    ``2(n-1)(alpha + M/(n B))``.

Names
    Worker ``i``'s resources are ``w{i}.gpu``, ``w{i}.up``, ``w{i}.down`` (host
    ``"worker{i}"``); a dedicated PS shard ``k`` has ``ps{k}.up``, ``ps{k}.down`` (host
    ``"ps{k}"``); every shard has ``ps{k}.cpu`` (kind ``"ps_cpu"``, on the worker's host when
    colocated, where the shard also shares worker ``k``'s NICs).

Coarse collectives
    :meth:`Fabric.allreduce_share` is one worker's share of a coarse all-reduce: with flows a
    transfer of the bytes the closed form moves at the link bandwidth, to its ring successor,
    then the closed form's latency term as a delay; with ``fifo``/``ps`` a transition holding
    its own NICs for the closed-form ring (or tree) time.
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
from .tcp_ramp import pacing_cap, ramp_delay

__all__ = ["Host", "Fabric", "DISCIPLINES", "SEND_PRIORITY"]

#: The network models (option ``discipline``), the default first.
DISCIPLINES = ("flows", "fifo", "ps")

#: The priority of a transfer's send stage on the sender's compute: below every compute
#: transition's (0), so a message whose data is ready is handed to the network before the
#: compute that became ready at the same instant (the next layer's backward after a gradient
#: hook's push: the hook issues the send before the backward goes on, wait-free backprop).
SEND_PRIORITY = -1

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
    discipline : {"flows", "fifo", "ps"}
        The network model (see the module docstring).
    priority : bool
        Use the ``priority`` discipline on NICs (transfers then pass a ``priority``); needs
        ``discipline="fifo"``.
    """

    def __init__(self, net: Net, cluster: Cluster, discipline: str = "flows",
                 priority: bool = False):
        if discipline not in DISCIPLINES:
            raise VariantError(f"discipline={discipline!r}: use one of {list(DISCIPLINES)}")
        if priority and discipline != "fifo":
            raise VariantError(
                f"priority=True needs discipline='fifo' (got {discipline!r}: shared links serve "
                "all their flows at once, so there is no queue to reorder); pass "
                "discipline='fifo' with priority=True"
            )
        if discipline == "flows" and cluster.comm_uses_compute:
            raise VariantError(
                "comm_uses_compute=True holds the receiver's compute for a transfer's whole link "
                "time, a model of the 'fifo'/'ps' disciplines; with flows give the CPU's per-byte "
                "costs instead (Cluster send_s_per_byte, recv_s_per_byte, reduce_s_per_byte; "
                "'sgdnet calibrate' measures them) or pass discipline='fifo'"
            )
        if cluster.topology is not None and discipline != "flows":
            raise VariantError(
                f"discipline={discipline!r} is a one-NIC-per-worker model; a Cluster with a "
                "topology sends its transfers as flows over the topology's links: pass "
                "discipline='flows' (the default) or drop the topology"
            )
        self.net = net
        self.cluster = cluster
        self.topo = cluster.topology
        self.flows = discipline == "flows"
        self.nic_discipline = "priority" if priority else discipline
        self._res: dict[str, str] = {}
        self._paths: dict[tuple, list[str]] = {}  # (src, dst[, "cpu"]) -> links
        self._ps_hosts: dict[int, Host] = {}  # a frozen cluster's shard hosts, asked per piece
        # what a transfer's link stage needs per (src, dst, lane), for every TransferBatch on
        # this fabric (the resources exist once made; see TransferBatch._pair)
        self._bulk_pairs: dict[tuple[Host, Host, int], tuple | None] = {}

    # resources
    def _resource(self, name: str, discipline: str, **tags) -> str:
        if name not in self._res:
            self.net.resource(name, 1, discipline, **tags)
            self._res[name] = name
        return name

    def _efficiency(self, name: str, downlink: bool) -> tuple[float, ...] | None:
        """The efficiency curve of link ``name``: a downlink's is ``cluster.incast``, a
        dedicated PS host's downlink (``ps{k}.down``) ``cluster.ps_link_efficiency`` when
        given; None for none."""
        if not downlink:
            return None
        c = self.cluster
        if c.ps_link_efficiency and name.startswith("ps") and name.endswith(".down"):
            return c.ps_link_efficiency
        return c.incast or None

    def _nic(self, name: str, bandwidth: float, incast: bool, **tags) -> str:
        """A NIC direction: a link (flows; with the cluster's token bucket, if any) or a resource
        of the NIC discipline."""
        if not self.flows:
            return self._resource(name, self.nic_discipline, **tags)
        if name not in self._res:
            c = self.cluster
            eff = self._efficiency(name, incast)
            self.net.link(name, bandwidth, efficiency=eff, burst=c.burst, peak=c.burst_peak, **tags)
            self._res[name] = name
        return name

    @staticmethod
    def host_name(host: Host) -> str:
        """``"worker3"`` or ``"ps0"``: the host tag of ``host``'s resources."""
        kind, i = host
        return f"worker{i}" if kind == "worker" else f"ps{i}"

    def gpu(self, i: int) -> str:
        """Worker ``i``'s GPU resource."""
        return self._resource(f"w{i}.gpu", "fifo", host=f"worker{i}", kind="gpu", worker=i)

    def ps_host(self, k: int) -> Host:
        """Host of PS shard ``k``: ``("worker", k)`` if colocated, else ``("ps", k)``."""
        got = self._ps_hosts.get(k) if type(k) is int else None
        if got is None:
            h = self.cluster.ps_host(k)  # checks k
            got = ("ps", k) if h is None else ("worker", h)
            if type(k) is int:
                self._ps_hosts[k] = got
        return got

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
        ``cluster.comm_uses_compute`` (``fifo``/``ps`` only), the receiver's compute
        (:meth:`host_compute`), which copies and reduces the data. The sender's compute stays
        free, so a ring's simultaneous send and receive do not serialise. ``src == dst`` names
        one host's whole share of a collective (both of its NIC directions)."""
        res = [self.up(src), self.down(dst)]
        if self.cluster.comm_uses_compute and not self.flows:
            res.append(self.host_compute(dst))
        return res

    def up(self, host: Host) -> str:
        """Uplink (send direction) of ``host``: a link with flows, else a NIC resource."""
        kind, i = host
        if kind == "worker":
            return self._nic(f"w{i}.up", self.up_bw(host), False, host=f"worker{i}",
                             kind="nic_up", worker=i)
        return self._nic(f"ps{i}.up", self.up_bw(host), False, host=f"ps{i}", kind="nic_up",
                         shard=i)

    def down(self, host: Host) -> str:
        """Downlink (receive direction) of ``host``; with flows its efficiency is the
        cluster's incast curve."""
        kind, i = host
        if kind == "worker":
            return self._nic(f"w{i}.down", self.down_bw(host), True, host=f"worker{i}",
                             kind="nic_down", worker=i)
        return self._nic(f"ps{i}.down", self.down_bw(host), True, host=f"ps{i}",
                         kind="nic_down", shard=i)

    # paths over a topology
    def _topo_link(self, spec: tuple[str, float, str]) -> str:
        """The link of a topology path element ``(name, bandwidth, kind)``, created once."""
        name, bw, kind = spec
        if name not in self._res:
            eff = self._efficiency(name, kind == "nic_down")
            stem = name.split(".", 1)[0]
            host = f"node{stem[1:]}" if stem.startswith("n") else stem
            self.net.link(name, bw, efficiency=eff, host=host, kind=kind)
            self._res[name] = name
        return name

    def _topo_path(self, src: Host, dst: Host) -> list[tuple[str, float, str]]:
        t = self.topo
        (sk, si), (dk, di) = src, dst
        if sk == "worker" and dk == "worker":
            return t.path(si, di)
        if sk == "ps" and dk == "ps":
            raise VariantError(f"no path between two parameter-server hosts {src} and {dst}")
        if sk == "worker":
            return [*t.out_path(si), (f"ps{di}.down", self.down_bw(dst), "nic_down")]
        return [(f"ps{si}.up", self.up_bw(src), "nic_up"), *t.in_path(di)]

    def path(self, src: Host, dst: Host) -> list[str]:
        """The links a flow from ``src`` to ``dst`` crosses: ``[up(src), down(dst)]``, or with
        a cluster topology the links of :meth:`Topology.path
        <sgdnet.workload.topology.Topology.path>` (a dedicated PS host hangs off the spine
        with its own NIC, ``ps{k}.up`` / ``ps{k}.down``)."""
        got = self._paths.get((src, dst))
        if got is None:  # a pair's path is fixed: compute (and create its links) once
            if self.topo is None:
                got = [self.up(src), self.down(dst)]
            else:
                got = [self._topo_link(s) for s in self._topo_path(src, dst)]
            self._paths[src, dst] = got
        return list(got)

    def cpu_link(self, host: Host, direction: str) -> str | None:
        """The link standing for ``host``'s per-byte CPU work on the messages it sends
        (``direction="tx"``, bandwidth ``1 / cluster.send_s_per_byte``) or receives (``"rx"``,
        ``1 / cluster.recv_s_per_byte``), created on first use (``w{i}.txcpu`` /
        ``w{i}.rxcpu``, ``ps{k}.txcpu`` / ``ps{k}.rxcpu``; kind ``"tx_cpu"`` / ``"rx_cpu"``);
        None when that cost is 0 or ``cluster.cpu_overlap`` is off (the cost is then a
        transition before / after the flow)."""
        c = self.cluster
        spb = c.send_s_per_byte if direction == "tx" else c.recv_s_per_byte
        if not (self.flows and c.cpu_overlap and spb > 0):
            return None
        kind, i = host
        stem = f"w{i}" if kind == "worker" else f"ps{i}"
        name = f"{stem}.{direction}cpu"
        if name not in self._res:
            self.net.link(name, 1.0 / spb, host=self.host_name(host), kind=f"{direction}_cpu")
            self._res[name] = name
        return name

    def flow_path(self, src: Host, dst: Host) -> list[str]:
        """:meth:`path` with the sender's and the receiver's CPU links (:meth:`cpu_link`) at its
        ends: a message's per-byte CPU work runs while its bytes move, at the max-min rate of
        the whole path, so one message alone takes ``b * max(1/B, send_s_per_byte,
        recv_s_per_byte)`` and a host's CPU is shared by its concurrent messages."""
        got = self._paths.get((src, dst, "cpu"))
        if got is None:
            tx, rx = self.cpu_link(src, "tx"), self.cpu_link(dst, "rx")
            got = [*([tx] if tx else []), *self.path(src, dst), *([rx] if rx else [])]
            self._paths[src, dst, "cpu"] = got
        return list(got)

    def latency(self, src: Host, dst: Host) -> float:
        """One-way latency from ``src`` to ``dst``: the topology's ``intra_latency`` between
        two GPUs of one node, else ``cluster.latency``."""
        t = self.topo
        if t is not None and src[0] == dst[0] == "worker" and t.same_node(src[1], dst[1]):
            return float(t.intra_latency)
        return float(self.cluster.latency)

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
        bytes/s (cut-through: the slower of the two NIC directions it crosses); with a topology
        the slowest link of its path."""
        if self.topo is not None:
            return min(bw for _, bw, _ in self._topo_path(src, dst))
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
        reduce: bool | float = False,
        lane: int = 0,
        share: str | None = None,
        latency: float | None = None,
        messages: int = 1,
    ) -> list[str]:
        """Add a transfer of ``nbytes`` from ``src`` to ``dst``; returns its transition names.

        The link stage (named ``name``) consumes ``inputs`` and produces ``link_outputs`` when
        its bytes are through; ``outputs`` are produced when the data has arrived (after the
        latency stage ``name + ".lat"``, omitted when latency is 0, and with flows after the
        receiver's CPU work ``name + ".recv"`` when there is any left after the flow: the
        reduction, and with ``cluster.cpu_overlap=False`` the receive copy). With flows the link
        stage is a flow over :meth:`flow_path` ``(src, dst)`` (:meth:`up` ``(src)``,
        :meth:`down` ``(dst)`` and with ``cpu_overlap`` the hosts' CPU links) on the connection
        ``src->dst``, preceded by the sender's CPU work ``name + ".send"`` when
        ``cluster.send_s_per_byte > 0`` and ``cpu_overlap`` is off (priority
        :data:`SEND_PRIORITY` on the sender's compute, whatever ``priority`` is: it goes
        before compute that became ready at the same instant); with
        ``fifo``/``ps`` it holds :meth:`link_resources` for ``nbytes / bandwidth(src, dst)``
        seconds. ``reduce``: the receiver also adds the data to its own (a reduction step), at
        ``cluster.reduce_s_per_byte`` (flows only). ``comm_cv`` is the noise of the bytes.
        ``lane > 0``: the flow goes on its own connection ``src->dst#lane`` (an NCCL channel's
        connection), so it does not queue behind the pair's lane-0 messages.
        ``share="in"`` / ``"out"`` (flows only): the flow is one of several concurrent
        connections into / out of one host, whose uneven TCP sharing adds
        ``cluster.share_cv_in`` / ``share_cv_out`` to the noise of its bytes
        (:meth:`flow_cv`).
        ``latency``: the seconds from the last byte leaving to the data's arrival, instead of
        :meth:`latency` ``(src, dst)`` (a pipelined ring's one flow per edge stands for
        ``R`` chunks streamed back to back and pays the ring's ``R`` latencies); ``reduce``
        may be the fraction of the bytes the receiver reduces, and ``messages``: the number
        of independent messages the transfer stands for (their noise adds up: the CV of the
        bytes and of the CPU work is divided by ``sqrt(messages)``).

        Its bulk twin is :meth:`.fabric_bulk.TransferBatch.transfer` (the same elements, added
        at once; tests/test_bulk_ps.py ties them): change both together.
        """
        if src == dst:
            raise VariantError(f"transfer {name!r}: source and destination are the same host {src}")
        net, c = self.net, self.cluster
        ccv = c.comm_cv if messages == 1 else c.comm_cv / math.sqrt(messages)
        tg = {"kind": "comm", "step": False, **(tags or {})}
        link_outputs, outputs = list(link_outputs), list(outputs)
        names: list[str] = []
        ins = list(inputs)
        send_s, recv_s = self.cpu_stages(nbytes, reduce)
        if send_s is not None:
            sent = net.place(f"{name}:sent")
            net.transition(f"{name}.send", duration(send_s, ccv),
                           inputs={p: 1 for p in ins}, outputs={sent: 1},
                           resources=[self.host_compute(src)], priority=SEND_PRIORITY,
                           tags={**tg, "stage": "send"})
            names.append(f"{name}.send")
            ins = [sent.name]
        self.ack_path(share, src, dst)
        backlog = self.share_backlog(share, src, dst)
        if backlog is not None:
            joined = net.place(f"{name}:joined")
            net.transition(f"{name}.join", 0.0, inputs={p: 1 for p in ins}, outputs={joined: 1},
                           servers=math.inf, tags={**tg, "stage": "join"}, backlog=backlog)
            names.append(f"{name}.join")
            ins = [joined.name]
        arrived = outputs
        if recv_s is not None:
            arrived = [net.place(f"{name}:arrived").name]
        ltags = {**tg, "stage": "link", "bytes": nbytes}
        lat = self.latency(src, dst) if latency is None else float(latency)
        lat += self.tcp_ramp(nbytes, src, dst) + self.share_queue(share, src, dst)
        cv = self.flow_cv(share) if messages == 1 else self.flow_cv(share) / math.sqrt(messages)
        cap = self.flow_cap(share, src, dst)
        if lat > 0:
            wire = net.place(f"{name}.wire")
            self._link_stage(name, nbytes, src, dst, ins, [*link_outputs, wire.name], ltags,
                             priority, lane, cv, cpu=True, cap=cap)
            net.transition(f"{name}.lat", Deterministic(lat), inputs={wire: 1},
                           outputs={p: 1 for p in arrived}, servers=math.inf,
                           tags={**tg, "stage": "latency"})
            names += [name, f"{name}.lat"]
        else:
            self._link_stage(name, nbytes, src, dst, ins, [*link_outputs, *arrived], ltags,
                             priority, lane, cv, cpu=True, cap=cap)
            names.append(name)
        if arrived is not outputs:
            net.transition(f"{name}.recv", duration(recv_s, ccv),
                           inputs={p: 1 for p in arrived}, outputs={p: 1 for p in outputs},
                           resources=[self.host_compute(dst)], priority=priority,
                           tags={**tg, "stage": "recv"})
            names.append(f"{name}.recv")
        return names

    def flow_cv(self, share: str | None) -> float:
        """The CV of a transfer's bytes: ``cluster.comm_cv``, with flows and ``share`` given
        (``"in"``: one of several connections into one host, ``"out"``: out of one host)
        combined in quadrature with ``cluster.share_cv_in`` / ``share_cv_out`` (unchanged when
        that is 0)."""
        c = self.cluster
        if share not in (None, "in", "out"):
            raise VariantError(f"share={share!r}: use 'in', 'out' or None")
        extra = 0.0 if share is None or not self.flows else getattr(c, f"share_cv_{share}")
        return math.hypot(c.comm_cv, extra) if extra > 0 else c.comm_cv

    def cpu_stages(self, nbytes: float, reduce: float = 0.0) -> tuple[float | None, float | None]:
        """Seconds of a transfer's CPU stages on the hosts' compute, ``(send, receive)``, None
        for a stage the transfer does not have: with flows, the sender's ``send_s_per_byte *
        b`` before the flow unless ``cpu_overlap`` (then it is a link of the path), and after
        it the receiver's ``recv_s_per_byte * b`` (the same exception) plus ``reduce_s_per_byte
        * b * reduce`` when that is more than 0. :meth:`transfer` and its bulk twin both ask
        here."""
        c = self.cluster
        if not self.flows:
            return None, None
        send = nbytes * c.send_s_per_byte if c.send_s_per_byte > 0 and not c.cpu_overlap \
            else None
        recv = ((0.0 if c.cpu_overlap else c.recv_s_per_byte)
                + c.reduce_s_per_byte * float(reduce)) * nbytes
        return send, (recv if recv > 0 else None)

    def flow_cap(self, share: str | None, src: Host, dst: Host) -> float:
        """The rate cap of a flow that is one of several connections into (``share="in"``,
        ``dst``'s downlink) or out of (``"out"``, ``src``'s uplink) one host: BBR's pace while
        sharing, :func:`~.tcp_ramp.pacing_cap` of that link among the workers exchanging with
        the host (``cluster.workers``, less one for a colocated shard's own worker) with factor
        ``cluster.tcp_pacing``; ``math.inf`` without flows, ``share`` or ``tcp_pacing``."""
        c = self.cluster
        if not self.flows or share is None or c.tcp_pacing <= 0:
            return math.inf
        return pacing_cap(self._shared_bw(share, src, dst),
                          max(1, self._connections(share, src, dst)), c.tcp_pacing)

    def _shared_bw(self, share: str, src: Host, dst: Host) -> float:
        """The bandwidth of the host link a ``share`` transfer shares: ``dst``'s downlink
        (``"in"``) or ``src``'s uplink (``"out"``)."""
        return self.down_bw(dst) if share == "in" else self.up_bw(src)

    def _connections(self, share: str, src: Host, dst: Host) -> int:
        """How many connections share the host link a ``share`` transfer uses: the workers
        exchanging with that host (``cluster.workers``, less one for a colocated shard's own
        worker)."""
        host = dst if share == "in" else src
        return self.cluster.workers - (1 if host[0] == "worker" else 0)

    def share_queue(self, share: str | None, src: Host, dst: Host) -> float:
        """Seconds a message of one of ``k >= 2`` connections into (``share="in"``) or out of
        (``"out"``) one host waits in that link's standing queue: ``cluster.tcp_queue``; 0
        without flows, ``share``, ``tcp_queue`` or a second connection (``k`` as
        :meth:`_connections`)."""
        c = self.cluster
        if not self.flows or share is None or c.tcp_queue <= 0 or c.tcp_queue_model != "static":
            return 0.0
        return c.tcp_queue if self._connections(share, src, dst) >= 2 else 0.0

    def ack_path(self, share: str | None, src: Host, dst: Host) -> None:
        """With ``cluster.tcp_ack_share``, a ``share="in"`` message of ``k >= 2`` connections
        makes ``dst``'s downlink acknowledged through its uplink (:meth:`Net.ack_path
        <sgdnet.net.Net.ack_path>`, once per host): its flows are capped at
        ``tcp_ack_share[n - 1]`` times the downlink's bandwidth while the uplink carries
        ``n`` flows (ratios >= 1: no cap)."""
        c = self.cluster
        if (not self.flows or share != "in" or not c.tcp_ack_share
                or self._connections(share, src, dst) < 2):
            return
        down = self.down(dst)
        if self.net.resources[down].ack_path is None:
            bw = self.down_bw(dst)
            self.net.ack_path(down, self.up(dst),
                              [e * bw if e < 1 else math.inf for e in c.tcp_ack_share])

    def share_backlog(self, share: str | None, src: Host, dst: Host) -> tuple[str, float] | None:
        """The join stage of a message of one of ``k >= 2`` connections into (``share="in"``,
        ``dst``'s downlink) or out of (``"out"``, ``src``'s uplink) one host with
        ``cluster.tcp_queue_model="join"``: ``(that link, q)`` for ``Transition.backlog``,
        each other connection keeping at most ``q = tcp_queue * bandwidth / (k - 1)`` bytes
        queued there; None without flows, ``share``, ``tcp_queue``, that model or a second
        connection."""
        c = self.cluster
        if not self.flows or share is None or c.tcp_queue <= 0 or c.tcp_queue_model != "join":
            return None
        k = self._connections(share, src, dst)
        if k < 2:
            return None
        link = self.down(dst) if share == "in" else self.up(src)
        return link, c.tcp_queue * self._shared_bw(share, src, dst) / (k - 1)

    def tcp_ramp(self, nbytes: float, src: Host, dst: Host) -> float:
        """Seconds a message's slow-start restart adds (:func:`~.tcp_ramp.ramp_delay` at
        :meth:`bandwidth` ``(src, dst)``, ``cluster.tcp_rtt`` and ``tcp_init_window``); 0
        without flows or with ``tcp_rtt`` 0."""
        c = self.cluster
        if not self.flows or c.tcp_rtt <= 0:
            return 0.0
        return ramp_delay(nbytes, self.bandwidth(src, dst), c.tcp_rtt, c.tcp_init_window)

    def reduces_cost(self) -> bool:
        """Whether a reducing transfer takes longer than a plain one (:meth:`transfer`'s
        ``reduce``: flows with ``cluster.reduce_s_per_byte > 0``)."""
        return self.flows and self.cluster.reduce_s_per_byte > 0

    def _link_stage(self, name: str, nbytes: float, src: Host, dst: Host, inputs: list,
                    outputs: list, tags: dict, priority: int, lane: int = 0,
                    cv: float | None = None, cpu: bool = False,
                    cap: float = math.inf) -> None:
        """The stage that occupies the network: a flow, or a NIC-holding transition (bytes or
        time with CV ``cv``, default ``cluster.comm_cv``). ``cpu``: the flow also crosses the
        hosts' CPU links (:meth:`flow_path`); ``cap``: its rate cap (:meth:`flow_cap`)."""
        net, c = self.net, self.cluster
        cv = c.comm_cv if cv is None else cv
        if self.flows:
            key = f"{self.host_name(src)}->{self.host_name(dst)}" + (f"#{lane}" if lane else "")
            path = self.flow_path(src, dst) if cpu else self.path(src, dst)
            net.transfer(name, duration(nbytes, cv), path,
                         inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
                         connection=key,
                         connection_tags={"host": self.host_name(src)},
                         cap=None if cap == math.inf else cap, priority=priority, tags=tags)
            return
        net.transition(name, duration(nbytes / self.bandwidth(src, dst), cv),
                       inputs={p: 1 for p in inputs}, outputs={p: 1 for p in outputs},
                       resources=self.link_resources(src, dst), priority=priority, tags=tags)

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
        """Worker ``worker``'s share of a coarse all-reduce of ``nbytes``, taking the
        closed-form collective time: with flows, a flow of the bytes the closed form moves to
        the ring successor (:meth:`_link_stage`) then its latency term as a delay; otherwise one
        transition ``name`` holding the worker's own uplink and downlink (:meth:`link_resources`
        of the host to itself) for that time (CV ``cluster.comm_cv``).

        The time is :func:`~sgdnet.workload.ring_allreduce_time` (``algorithm="ring"``) or
        :func:`~sgdnet.workload.tree_allreduce_time` (``"tree"``) of ``nbytes`` among
        ``cluster.workers`` at the bandwidth from the worker to its ring successor and the
        cluster latency.
        """
        c = self.cluster
        n = c.workers
        closed = ring_allreduce_time if algorithm == "ring" else tree_allreduce_time
        host, succ = ("worker", worker), ("worker", (worker + 1) % n)
        bw, lat0 = self.bandwidth(host, succ), self.latency(host, succ)
        if self.topo is not None and n > 1:
            # the ring's slowest hop (its NIC crossings) sets every worker's pace
            hops = [(("worker", i), ("worker", (i + 1) % n)) for i in range(n)]
            bw = min(self.bandwidth(a, b) for a, b in hops)
            lat0 = max(self.latency(a, b) for a, b in hops)
        t = closed(nbytes, n, bw, lat0)
        if self.flows and n > 1:
            # the bytes the closed form moves at the link bandwidth, as a flow to the ring
            # successor, then the closed form's latency term as a delay
            moved = closed(nbytes, n, bw, 0.0) * bw
            lat = t - moved / bw
            tg = dict(tags or {})
            outs = [self.net.place(f"{name}.moved").name] if lat > 0 else list(outputs)
            self._link_stage(name, moved, host, succ, list(inputs), outs,
                             {**tg, "stage": "link", "bytes": moved}, 0)
            if lat > 0:
                self.net.transition(f"{name}.lat", Deterministic(lat), inputs={outs[0]: 1},
                                    outputs={p: 1 for p in outputs}, servers=math.inf,
                                    tags={**tg, "stage": "latency"})
            return name
        res = self.link_resources(host, host) if not self.flows else []
        self.net.transition(name, duration(t, c.comm_cv), inputs={p: 1 for p in inputs},
                            outputs={p: 1 for p in outputs}, resources=res, tags=dict(tags or {}))
        return name
