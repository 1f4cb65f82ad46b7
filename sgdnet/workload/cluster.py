"""Cluster descriptions: workers, their speeds, NICs, parameter servers and noise.

All quantities are stored as SI floats (seconds, bytes, bytes/second) after construction;
strings with units are accepted everywhere a quantity is (``"10Gbps"``, ``"50us"``, ``"1MB"``).

Parameter-server sharding follows MXNet's kvstore rule: a tensor smaller than
``shard_min_bytes`` goes whole to one shard, a larger one is split evenly over all shards.
MXNet picks the shard of a small tensor by a hash of its key; here it is round-robin by layer
index (``layer_index % ps_shards``) in :meth:`Cluster.shard_tensor`, or greedy least-loaded in
:meth:`Cluster.shard_plan`. ``shard_min_bytes=0`` splits everything, ``float('inf')`` keeps
every tensor whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import units
from .._check import int_arg
from ..errors import ClusterError, UnitError
from ..limits import check_limit
from . import _quantity as _q

__all__ = ["Cluster", "PLACEMENTS"]

#: Where parameter-server shards run.
PLACEMENTS = ("dedicated", "colocated")


def _rate(value: Any, field: str) -> float:
    try:
        return units.bandwidth(value, what=f"Cluster.{field}")
    except UnitError as e:
        raise UnitError(f"{e} (e.g. {field}='10Gbps' or a number of bytes/s > 0)") from None


def _time(value: Any, field: str) -> float:
    try:
        return _q.seconds(value, what=f"Cluster.{field}")
    except UnitError as e:
        raise UnitError(f"{e} (e.g. {field}='50us' or a number of seconds >= 0)") from None


def _size(value: Any, field: str) -> float:
    if isinstance(value, float) and value == math.inf:
        return math.inf
    try:
        return units.nbytes(value, what=f"Cluster.{field}")
    except UnitError as e:
        raise UnitError(f"{e} (e.g. {field}='1MB', 0, or float('inf'))") from None


def _count(value: Any, field: str, what: str) -> int:
    """A count >= 1; an integral float (``4.0``, e.g. from YAML) is accepted."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return int_arg(f"Cluster.{field}", value, 1, f" (a number of {what})", error=ClusterError)


def _cvf(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ClusterError(f"Cluster.{field}={value!r}: must be a number (coefficient of "
                           "variation, e.g. 0.05)")
    x = units.to_float(value, f"Cluster.{field}", ClusterError)
    if not math.isfinite(x) or x < 0:
        raise ClusterError(f"Cluster.{field}={value!r}: a CV must be finite and >= 0 "
                           "(0 = deterministic, 0.05 = 5% noise)")
    return x


def _topology(value: Any, workers: int, shards: int, placement: str) -> Any:
    """The checked topology of a cluster of ``workers`` GPUs (see :mod:`.topology`)."""
    from .topology import Topology

    t = Topology.from_dict(value, "Cluster.topology")
    nodes = t.nodes(workers)
    if placement == "colocated" and shards > nodes:
        raise ClusterError(f"Cluster: ps_shards={shards} colocated shards run one per node, but "
                           f"the topology has {nodes} nodes; use at most {nodes} shards or "
                           "ps_placement='dedicated'")
    return t


def _efficiencies(v: Any, name: str) -> tuple[float, ...]:
    """``Cluster.incast`` / ``ps_link_efficiency`` checked: efficiencies in (0, 1], one per
    number of concurrent flows, as a tuple."""
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise ClusterError(f"Cluster.{name}={v!r}: must be a sequence of efficiencies in "
                           "(0, 1], one per number of concurrent flows (1, 2, ...), or ()")
    effs = []
    for i, e in enumerate(v):
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not 0 < e <= 1:
            raise ClusterError(f"Cluster.{name}[{i}]={e!r}: an efficiency must be a number in "
                               f"(0, 1] (goodput with {i + 1} concurrent flows / bandwidth)")
        effs.append(float(e))
    return tuple(effs)


@dataclass(frozen=True)
class Cluster:
    """A homogeneous-network cluster of data-parallel workers and optional parameter servers.

    Parameters
    ----------
    workers : int
        Number of workers (one per host), >= 1.
    speeds : sequence of float or None
        Per-worker speed factor; worker ``i``'s compute time is the profile time / ``speeds[i]``.
        ``None`` means all 1.0. Length must equal ``workers``.
    bandwidth : float or str
        Per-host NIC bandwidth in each direction (bytes/s or ``"10Gbps"``).
    uplink, downlink : float or str or None
        Override the send (host -> network) / receive direction; default ``bandwidth``. Unset
        overrides stay ``None`` (so :meth:`replace` of ``bandwidth`` carries them along); read
        the effective figures with :meth:`up_bw` / :meth:`down_bw` / :meth:`ps_up_bw`.
    latency : float or str
        One-way latency of a message, seconds (``"50us"``).
    ps_shards : int
        Number of parameter-server shards (ignored by PS-free variants).
    ps_placement : {"dedicated", "colocated"}
        ``"dedicated"``: each shard on its own host with NIC ``ps_bandwidth``; ``"colocated"``:
        shard ``k`` runs on worker ``k``'s host and shares its NIC (needs ``ps_shards <= workers``).
    ps_bandwidth : float or str or None
        NIC of a dedicated PS host, each direction; default ``bandwidth``.
    update_s_per_byte : float or str
        Server (or optimizer) update cost per gradient byte, seconds/byte.
    update_s_per_layer : float or str
        Fixed server update cost per tensor (or tensor piece) applied, seconds.
    compute_cv, comm_cv : float
        Coefficient of variation of compute and of transfer durations (0 = deterministic).
    shard_min_bytes : float or str
        MXNet-style sharding bound: smaller tensors go whole to one shard, larger ones are split
        evenly over all shards.
    straggler : object or None
        Straggler model (see ``sgdnet.workload.stragglers``); stored as given.
    comm_uses_compute : bool
        For the ``fifo`` and ``ps`` NIC disciplines only: ``True`` makes a transfer also hold
        the compute resource of the host that receives it for its whole link time.
        ``False`` (default): transfers only hold NICs. With flows (the default discipline) the
        CPU's share of communication is the per-byte costs below instead, held only for that
        work; ``True`` is refused there.
    send_s_per_byte, recv_s_per_byte, reduce_s_per_byte : float
        CPU (or GPU) time per byte the sending host spends handing a message to the network
        (copy), the receiving host spends taking it in (copy), and a reducing receiver (a ring
        all-reduce step, a PS aggregating) spends adding it, seconds/byte; held on that host's
        compute resource for that work only, before (send) or after (recv, reduce) the flow,
        or with ``cpu_overlap`` send and receive worked while the bytes move.
        0 (default) for GPUs with copy engines (NCCL); gloo/CPU clusters measure them with
        ``sgdnet calibrate``. Used by the ``flows`` discipline.
    incast : sequence of float
        Goodput efficiency of a host's downlink by the number of concurrent flows into it
        (``incast[n-1]`` with ``n`` flows, the last value beyond; empty: 1.0), as measured by
        ``sgdnet calibrate`` (k-to-1 sends). Used by the ``flows`` discipline.
    ps_link_efficiency : sequence of float
        Goodput efficiency of a dedicated parameter-server host's downlink by the number of
        concurrent flows into it (``ps_link_efficiency[n-1]`` with ``n`` flows, the last value
        beyond), in place of ``incast`` on that link: what the PS's own traffic (pushes of
        several layers from each worker, pulls back, idle between) gets out of the link, where
        ``incast`` is measured with simultaneous bulk sends. Measured, not derived: on the
        emulated testbed with BBR such pushes leave the link idle 10-20 % of the time where
        max-min sharing fills it (issue #37; ``scripts/fit_ps_efficiency.py`` fits it to the
        PS-traffic probe, :func:`sgdnet.testbed.tcp_probe.probe_ps`, at the calibration's rate,
        docs/validation.md). Empty (default): ``incast``. Used by the ``flows`` discipline.
    share_cv_in, share_cv_out : float
        How unevenly concurrent TCP connections share one host's link: the coefficient of
        variation of a message's bytes that makes max-min sharing reproduce the spread of the
        completion times of ``k`` flows started together into one host (``in``) or out of one
        host (``out``), as measured by ``sgdnet calibrate``. Max-min finishes them together;
        TCP over a FIFO queue lets one get ahead, which keeps asynchronous workers out of
        phase. The parameter-server nets add it (in quadrature to ``comm_cv``) to the pushes
        into, and the pulls out of, a PS host that serves two or more workers. 0 (default):
        max-min exactly.
    cpu_overlap : bool
        ``True``: with flows, ``send_s_per_byte`` and ``recv_s_per_byte`` are worked while the
        bytes move (CPU links in the flow's path, :meth:`Fabric.cpu_link
        <sgdnet.variants.fabric.Fabric.cpu_link>`): one message alone takes
        ``max(link time, CPU time)``, as gloo's TCP transport reads into the destination
        buffer as segments arrive (issue #37). ``False`` (default; the emulated testbed's
        hosts share two cores, where the costs before / after the flow predict its rings
        better, docs/validation.md): the costs held on the host's compute before (send) and
        after (receive) the flow.
    tcp_pacing : float
        BBR's pace while sharing (:func:`sgdnet.variants.tcp_ramp.pacing_cap`): a flow that is
        one of ``k`` connections into / out of a PS host is capped at ``tcp_pacing * B / k``;
        0 (default): no cap.
    tcp_rtt, tcp_init_window : float
        Round-trip time of an idle path (seconds) and the initial window (bytes, 10 x 1448):
        with ``tcp_rtt > 0`` every message pays the slow-start restart of
        :func:`sgdnet.variants.tcp_ramp.ramp_delay` (a connection idle beyond its RTO with
        ``tcp_slow_start_after_idle=1``); 0 (default): none.
    tcp_queue : float or str
        The standing queue (seconds) that the ``k`` TCP connections into / out of a PS host
        keep in that link's buffer while they share it (``sgdnet.testbed.tcp_probe``'s
        ``standing_queue_s``: their RTT while sharing less the idle RTT, measured with ``k`` =
        ``workers`` flows): a message of such a connection waits behind the others' bytes
        (FIFO) as ``tcp_queue_model`` says, when ``k >= 2``; 0 (default): none (fluid max-min
        sharing has no queue). Issue #37: the late worker's first push with 4 workers waits
        12.3 ms on the testbed against 0.9 ms without it.
    tcp_queue_model : str
        How a message waits ``tcp_queue``: ``"join"`` (default) before its bytes, behind what
        the other connections keep queued in that link when it joins: a join stage
        (``Transition.backlog``) where each of them keeps what it has fallen behind its pace
        (the rate it would have alone) while sharing, at most ``q = tcp_queue * bandwidth / (k
        - 1)`` (so ``tcp_queue`` behind ``k - 1`` backlogged others; nothing on an idle link,
        behind a flow alone or behind flows that have just started), the link busy meanwhile;
        ``"static"``: after its bytes, every such message, added to its latency: right where
        the link stays backlogged (3-4 workers of a bandwidth-bound model), too much where it
        does not (2 workers, small messages).
    tcp_ack_share : sequence of float
        A push's ACKs leave a PS host through its uplink, behind the pulls' data queued there:
        while that uplink carries ``n >= 1`` flows, a flow into the host (a ``share="in"``
        message of ``k >= 2`` connections) moves at most ``tcp_ack_share[n - 1]`` times the
        downlink's bandwidth (the last value beyond; ``Net.ack_path``). Measured by
        :func:`sgdnet.testbed.tcp_reverse.probe_reverse_in` (a message's rate into a host
        streaming to ``n`` others, over the link's payload rate); values >= 1: no cap; empty
        (default): none.
    burst, burst_peak : float or str
        Token bucket of every host's NIC link, both directions (a shaper such as Linux's
        ``tbf``, a cloud instance's burst credit): ``burst`` bytes (``"64KiB"``; 0, the default:
        none) pass at ``burst_peak`` bytes/s (None: 1000 x the link's bandwidth, i.e. at once)
        after an idle period, then the link runs at its bandwidth; the bucket refills at the
        bandwidth while the link carries less (:meth:`Net.link <sgdnet.net.Net.link>`).
        ``Cluster.from_file(f, burst="file")`` takes a calibrated file's ``link.burst`` (not by
        default). Used by the ``flows`` discipline.
    topology : Topology or dict or None
        Nodes of ``gpus_per_node`` GPUs, their interconnect, NICs and fabric
        (:class:`~sgdnet.workload.topology.Topology`; a dict of its fields is converted).
        ``workers`` counts GPUs and must be a multiple of ``gpus_per_node``; the Fabric then
        sends every transfer over the topology's links and ``bandwidth``/``uplink``/
        ``downlink`` are unused (``ps_bandwidth`` is a dedicated PS host's NIC). ``None``
        (default): one worker per host with its own NIC, as before.

    Raises
    ------
    ClusterError
        Bad counts, speeds, placement or CVs.
    UnitError
        A quantity does not parse or is out of range (e.g. zero bandwidth, unknown unit).

    Examples
    --------
    >>> c = Cluster(workers=4, bandwidth="10Gbps", latency="50us", ps_shards=2)
    >>> c.up_bw(0), c.latency
    (1250000000.0, 5e-05)
    """

    workers: int = 1
    speeds: tuple[float, ...] | None = None
    bandwidth: float | str = "10Gbps"
    uplink: float | str | None = None
    downlink: float | str | None = None
    latency: float | str = "50us"
    ps_shards: int = 1
    ps_placement: str = "dedicated"
    ps_bandwidth: float | str | None = None
    update_s_per_byte: float | str = 0.0
    update_s_per_layer: float | str = 0.0
    compute_cv: float = 0.0
    comm_cv: float = 0.0
    shard_min_bytes: float | str = "1MB"
    straggler: object | None = None
    comm_uses_compute: bool = False
    send_s_per_byte: float | str = 0.0
    recv_s_per_byte: float | str = 0.0
    reduce_s_per_byte: float | str = 0.0
    incast: tuple[float, ...] = ()
    topology: Any = None
    share_cv_in: float = 0.0
    share_cv_out: float = 0.0
    cpu_overlap: bool = False
    tcp_pacing: float = 0.0
    tcp_rtt: float | str = 0.0
    tcp_init_window: float | str = 14480.0
    tcp_queue: float | str = 0.0
    tcp_queue_model: str = "join"
    tcp_ack_share: tuple[float, ...] = ()
    ps_link_efficiency: tuple[float, ...] = ()
    burst: float | str = 0.0
    burst_peak: float | str | None = None

    def __post_init__(self) -> None:
        s = object.__setattr__
        n = _count(self.workers, "workers", "workers")
        check_limit("Cluster.workers", n, "max_workers", error=ClusterError)
        s(self, "workers", n)
        if self.speeds is not None:
            sp = self.speeds
            if isinstance(sp, (str, bytes)) or not isinstance(sp, Sequence):
                raise ClusterError(f"Cluster.speeds={sp!r}: must be a sequence of {n} positive "
                                   "speed factors, or None for all 1.0")
            if len(sp) != n:
                raise ClusterError(f"Cluster.speeds has {len(sp)} entries but workers={n}; give "
                                   "one speed factor per worker (or None for all 1.0)")
            vals = []
            for i, v in enumerate(sp):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                        math.isfinite(units.to_float(v, f"Cluster.speeds[{i}]", ClusterError))
                        and v > 0):
                    raise ClusterError(f"Cluster.speeds[{i}]={v!r}: a speed factor must be a "
                                       "finite number > 0 (1.0 = reference, 0.5 = twice slower)")
                vals.append(float(v))
            s(self, "speeds", tuple(vals))
        bw = _rate(self.bandwidth, "bandwidth")
        s(self, "bandwidth", bw)
        # Overrides stay None when not given, so replace(bandwidth=...) moves them too.
        for f in ("uplink", "downlink", "ps_bandwidth"):
            v = getattr(self, f)
            s(self, f, None if v is None else _rate(v, f))
        s(self, "latency", _time(self.latency, "latency"))
        k = _count(self.ps_shards, "ps_shards", "parameter-server shards")
        check_limit("Cluster.ps_shards", k, "max_count", error=ClusterError)
        s(self, "ps_shards", k)
        if self.ps_placement not in PLACEMENTS:
            raise ClusterError(f"Cluster.ps_placement={self.ps_placement!r}: unknown placement; "
                               f"use one of {list(PLACEMENTS)}")
        if self.ps_placement == "colocated" and k > n:
            raise ClusterError(f"Cluster: ps_shards={k} colocated shards need at least {k} "
                               f"workers to sit beside, got workers={n}; use fewer shards or "
                               "ps_placement='dedicated'")
        s(self, "update_s_per_byte", _time(self.update_s_per_byte, "update_s_per_byte"))
        s(self, "update_s_per_layer", _time(self.update_s_per_layer, "update_s_per_layer"))
        s(self, "compute_cv", _cvf(self.compute_cv, "compute_cv"))
        s(self, "comm_cv", _cvf(self.comm_cv, "comm_cv"))
        for f in ("share_cv_in", "share_cv_out"):
            s(self, f, _cvf(getattr(self, f), f))
        s(self, "shard_min_bytes", _size(self.shard_min_bytes, "shard_min_bytes"))
        tp = self.tcp_pacing
        if isinstance(tp, bool) or not isinstance(tp, (int, float)) or not (
                math.isfinite(tp) and tp >= 0):
            raise ClusterError(f"Cluster.tcp_pacing={tp!r}: a pace / fair-share ratio >= 0 "
                               "(0: no pacing model; 'sgdnet.testbed.tcp_probe' measures it)")
        s(self, "tcp_pacing", float(tp))
        s(self, "tcp_rtt", _time(self.tcp_rtt, "tcp_rtt"))
        s(self, "tcp_init_window", _size(self.tcp_init_window, "tcp_init_window"))
        s(self, "tcp_queue", _time(self.tcp_queue, "tcp_queue"))
        if self.tcp_queue == math.inf:
            raise ClusterError("Cluster.tcp_queue=inf: a standing queue is a finite number of "
                               "seconds (0: none; tcp_probe's standing_queue_s measures it)")
        if self.tcp_queue_model not in ("static", "join"):
            raise ClusterError(f"Cluster.tcp_queue_model={self.tcp_queue_model!r}: use 'static' "
                               "(the queue after every message) or 'join' (before it, behind "
                               "the other connections' backlog)")
        s(self, "burst", _size(self.burst, "burst"))
        if self.burst == math.inf:
            raise ClusterError("Cluster.burst=inf: a token bucket's depth is a finite number of "
                               "bytes (0: none)")
        if self.burst_peak is not None:
            s(self, "burst_peak", _rate(self.burst_peak, "burst_peak"))
        if not isinstance(self.cpu_overlap, bool):
            raise ClusterError(f"Cluster.cpu_overlap={self.cpu_overlap!r}: must be True (per-byte "
                               "send/receive CPU work runs while the bytes move) or False (before "
                               "/ after the flow)")
        if not isinstance(self.comm_uses_compute, bool):
            raise ClusterError(f"Cluster.comm_uses_compute={self.comm_uses_compute!r}: must be "
                               "True (transfers also hold the receiving host's compute) or False")
        for f in ("send_s_per_byte", "recv_s_per_byte", "reduce_s_per_byte"):
            s(self, f, _time(getattr(self, f), f))
        for f in ("incast", "ps_link_efficiency"):
            s(self, f, _efficiencies(getattr(self, f), f))
        ack = self.tcp_ack_share
        if (isinstance(ack, (str, bytes)) or not isinstance(ack, Sequence)
                or any(isinstance(e, bool) or not isinstance(e, (int, float)) or not e > 0
                       for e in ack)):
            raise ClusterError(f"Cluster.tcp_ack_share={ack!r}: a sequence of rate / bandwidth "
                               "ratios > 0, one per number of flows out of the PS host (1, 2, "
                               "...), or () for none; tcp_reverse.probe_reverse_in measures it")
        s(self, "tcp_ack_share", tuple(float(e) for e in ack))
        if self.topology is not None:
            s(self, "topology", _topology(self.topology, n, k, self.ps_placement))
        check = getattr(self.straggler, "check", None)
        if callable(check):  # a straggler aimed at worker 99 of 2 would silently be no straggler
            check(n)

    # ------------------------------------------------------------------ per-host figures
    def _worker(self, i: int) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.workers:
            raise ClusterError(f"worker index {i!r} out of range; valid: 0..{self.workers - 1}")
        return i

    def _shard(self, k: int) -> int:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.ps_shards:
            raise ClusterError(f"PS shard index {k!r} out of range; valid: 0..{self.ps_shards - 1}")
        return k

    def speed(self, i: int) -> float:
        """Speed factor of worker ``i`` (compute time is divided by it)."""
        self._worker(i)
        return 1.0 if self.speeds is None else self.speeds[i]

    def up_bw(self, i: int) -> float:
        """Send bandwidth of worker ``i``'s host NIC, bytes/s."""
        self._worker(i)
        return float(self.bandwidth if self.uplink is None else self.uplink)

    def down_bw(self, i: int) -> float:
        """Receive bandwidth of worker ``i``'s host NIC, bytes/s."""
        self._worker(i)
        return float(self.bandwidth if self.downlink is None else self.downlink)

    def ps_host(self, k: int) -> int | None:
        """Worker whose host runs PS shard ``k`` (colocated), or ``None`` (dedicated host)."""
        self._shard(k)
        if self.ps_placement != "colocated":
            return None
        return k if self.topology is None else k * self.topology.gpus_per_node

    def ps_up_bw(self, k: int) -> float:
        """Send bandwidth of the NIC PS shard ``k`` uses (its host's NIC if colocated)."""
        h = self.ps_host(k)
        if h is not None:
            return self.up_bw(h)
        return float(self.bandwidth if self.ps_bandwidth is None else self.ps_bandwidth)

    def ps_down_bw(self, k: int) -> float:
        """Receive bandwidth of the NIC PS shard ``k`` uses (its host's NIC if colocated)."""
        h = self.ps_host(k)
        if h is not None:
            return self.down_bw(h)
        return float(self.bandwidth if self.ps_bandwidth is None else self.ps_bandwidth)

    # ------------------------------------------------------------------ sharding and updates
    def shard_tensor(self, layer_index: int, nbytes: float | str) -> list[tuple[int, float]]:
        """Pieces ``(shard, bytes)`` a tensor of ``nbytes`` is sent as (deterministic).

        A tensor with ``nbytes < shard_min_bytes`` goes whole to shard
        ``layer_index % ps_shards``; otherwise it is split into ``ps_shards`` equal pieces, one
        per shard, in shard order. A zero-byte tensor yields one empty piece.
        """
        if isinstance(layer_index, bool) or not isinstance(layer_index, int) or layer_index < 0:
            raise ClusterError(f"layer_index {layer_index!r} must be an integer >= 0")
        b = units.nbytes(nbytes, what="tensor size")
        k = self.ps_shards
        if k == 1 or b < self.shard_min_bytes or b == 0:
            return [(layer_index % k, b)]
        return [(j, b / k) for j in range(k)]

    def shard_plan(self, sizes: Sequence[float], policy: str = "round_robin"
                   ) -> list[list[tuple[int, float]]]:
        """Shard pieces for every tensor of a model, ``sizes[i]`` bytes for layer ``i``.

        ``policy="round_robin"`` is :meth:`shard_tensor` applied to each layer;
        ``policy="least_loaded"`` sends each small tensor (in layer order) whole to the shard
        with the fewest bytes so far (ties: lowest shard index), large tensors split evenly.
        """
        if policy not in ("round_robin", "least_loaded"):
            raise ClusterError(f"unknown shard policy {policy!r}; use 'round_robin' or "
                               "'least_loaded'")
        if policy == "round_robin":
            return [self.shard_tensor(i, b) for i, b in enumerate(sizes)]
        load = [0.0] * self.ps_shards
        plan = []
        for i, raw in enumerate(sizes):
            pieces = self.shard_tensor(i, raw)
            if len(pieces) == 1:
                j = min(range(self.ps_shards), key=lambda s: (load[s], s))
                pieces = [(j, pieces[0][1])]
            for j, b in pieces:
                load[j] += b
            plan.append(pieces)
        return plan

    def update_time(self, nbytes: float | str) -> float:
        """Server time to apply one tensor (piece) of ``nbytes``:
        ``update_s_per_layer + update_s_per_byte * nbytes`` seconds."""
        b = units.nbytes(nbytes, what="update size")
        return float(self.update_s_per_layer) + float(self.update_s_per_byte) * b

    # ------------------------------------------------------------------ misc
    def replace(self, **changes: Any) -> Cluster:
        """A copy with some fields changed (validated again)."""
        names = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(changes) - names)
        if bad:
            raise ClusterError(f"Cluster has no field(s) {bad}; fields are {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Fields as SI floats (JSON-ready; a straggler with ``to_dict`` is serialised by it,
        otherwise by ``repr``)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["speeds"] = None if self.speeds is None else list(self.speeds)
        st = self.straggler
        if st is not None:
            d["straggler"] = st.to_dict() if hasattr(st, "to_dict") else repr(st)
        if self.topology is not None:
            d["topology"] = self.topology.to_dict()
        if d["shard_min_bytes"] == math.inf:
            d["shard_min_bytes"] = "inf"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Cluster:
        """Inverse of :meth:`to_dict` (a serialised straggler is passed through as is)."""
        if not isinstance(d, dict):
            raise ClusterError(f"Cluster.from_dict expects a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise ClusterError(f"unknown Cluster field(s) {bad}; fields are {sorted(names)}")
        d = dict(d)
        if d.get("shard_min_bytes") == "inf":
            d["shard_min_bytes"] = math.inf
        if d.get("speeds") is not None:
            d["speeds"] = tuple(d["speeds"])
        return cls(**d)

    @classmethod
    def from_file(cls, path: Any, workers: int | None = None, **overrides: Any) -> Cluster:
        """A cluster from a cluster file (YAML, written by ``sgdnet calibrate``); see
        :mod:`sgdnet.workload.cluster_file` for the format and what is mapped.

        ``workers`` overrides the file's; ``overrides`` are Cluster fields applied last.
        """
        from .cluster_file import load_cluster_file

        return cls(**load_cluster_file(path).cluster_kwargs(workers, **overrides))



# ---------------------------------------------------------------------------- unknown fields
def _checked_init(init: Any) -> Any:
    """Wrap the dataclass ``__init__`` so an unknown or surplus argument is a ClusterError (the
    generated ``__init__`` raises a bare TypeError)."""
    names = [f.name for f in dataclasses.fields(Cluster)]

    def __init__(self: Cluster, *args: Any, **kwargs: Any) -> None:
        bad = sorted(set(kwargs) - set(names))
        if bad:
            raise ClusterError(f"unknown Cluster field(s) {bad}; fields are {sorted(names)}")
        if len(args) > len(names):
            raise ClusterError(f"Cluster takes at most {len(names)} positional arguments "
                               f"({', '.join(names)}), got {len(args)}; pass fields by name")
        dup = sorted(set(names[:len(args)]) & set(kwargs))
        if dup:
            raise ClusterError(f"Cluster field(s) {dup} given both by position and by name")
        init(self, *args, **kwargs)

    __init__.__doc__ = init.__doc__
    __init__.__signature__ = __import__("inspect").signature(init)  # type: ignore[attr-defined]
    return __init__


Cluster.__init__ = _checked_init(Cluster.__init__)  # type: ignore[method-assign]
