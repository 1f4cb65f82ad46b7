"""Transports: what TCP sockets and RDMA deliver of a NIC's line rate, their latency and CPU cost.

A NIC's line rate is not what a collective gets. :data:`TRANSPORTS` holds, per transport, the
goodput as a fraction of the line rate measured by published iperf / nccl-tests runs (or the
protocol's header overhead where that is the documented limit), a one-way latency, and the CPU
time per byte of a kernel socket (zero for RDMA, whose NIC moves the bytes).
:func:`apply_transport` returns a :class:`~sgdnet.workload.Cluster` with them applied.

Sources
    * ``tcp``: TCP/IPv4 over Ethernet with a 1500-byte MTU carries 1448 payload bytes (20 IP,
      20 TCP and 12 timestamp-option bytes of header) per 1538 bytes on the wire (preamble,
      Ethernet header, FCS and inter-frame gap: 38), 94.1%; iperf reports 9.41 Gbit/s on
      10GbE. CPU: the receiver's copy from kernel to user buffers bounds one core at about
      42 Gbit/s on a 100 Gbit/s link with TSO/GRO and jumbo frames (Cai et al., *Understanding
      Host Network Stack Overheads*, SIGCOMM 2021, single long flow), 0.19 ns per byte; the
      sender's cost is taken equal (an upper bound: the paper finds the receiver the
      bottleneck). Latency: 15 us one way through two kernel stacks and a switch, the order of
      netperf ``TCP_RR`` round trips (20-40 us) on 10-100GbE (an estimate; calibrate with
      ``sgdnet calibrate`` for a real cluster).
    * ``rdma`` (InfiniBand verbs, GPUDirect RDMA): NVIDIA measures 192 GB/s all-reduce bus
      bandwidth across DGX A100 nodes with 8 x 200 Gbit/s HDR NICs, 96% of the 200 GB/s line rate
      (github.com/NVIDIA/nccl/issues/812, 2023-03-31), and ~24 GB/s over one HDR NIC
      (github.com/NVIDIA/nccl/issues/412, 2023-04-24); 0.96. Latency 2.7 us: the per-step
      network latency NCCL's own model charges an inter-node LL ring step (NCCL 2.18
      ``src/graph/tuning.cc``, ``hwLat[NET][RING][LL]``).
    * ``roce`` (RDMA over Converged Ethernet, v2): ConnectX-7 NICs at 400 Gbit/s "should achieve
      up to 48-49 GB/s per NIC" over RoCE (github.com/NVIDIA/nccl-tests/issues/267,
      2025-01-23), 0.97 of 50 GB/s; latency as ``rdma``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ClusterError

__all__ = ["Transport", "TRANSPORTS", "apply_transport", "get_transport"]


@dataclass(frozen=True)
class Transport:
    """What one transport delivers (see the module docstring for the sources).

    Attributes
    ----------
    name : str
    goodput : float
        Fraction of the NIC's line rate a long transfer achieves, in (0, 1].
    latency : float
        One-way latency between two nodes, seconds.
    send_s_per_byte, recv_s_per_byte : float
        CPU seconds per byte sent / received (kernel sockets; 0 for RDMA).
    source : str
        Where the figures come from.
    """

    name: str
    goodput: float
    latency: float
    send_s_per_byte: float
    recv_s_per_byte: float
    source: str


_TCP_CPU = 8.0 / 42e9  # s/byte: one core copies ~42 Gbit/s (Cai et al., SIGCOMM 2021)

#: The transports by name.
TRANSPORTS: dict[str, Transport] = {
    "tcp": Transport("tcp", 1448.0 / 1538.0, 15e-6, _TCP_CPU, _TCP_CPU,
                     "TCP/IPv4, MTU 1500: 1448 payload bytes per 1538 wire bytes (iperf 9.41 "
                     "Gbit/s on 10GbE); CPU ~42 Gbit/s per core (Cai et al., SIGCOMM 2021); "
                     "latency: netperf TCP_RR order of magnitude"),
    "rdma": Transport("rdma", 0.96, 2.7e-6, 0.0, 0.0,
                      "InfiniBand: 192 GB/s all-reduce busbw on 8x200 Gbit/s HDR "
                      "(NVIDIA/nccl#812); latency NCCL 2.18 tuning.cc hwLat[NET][RING][LL]"),
    "roce": Transport("roce", 0.97, 2.7e-6, 0.0, 0.0,
                      "RoCEv2 ConnectX-7 400 Gbit/s: 48-49 GB/s per NIC (NVIDIA/nccl-tests#267); "
                      "latency as rdma"),
}


def get_transport(name: str | Transport) -> Transport:
    """The transport ``name`` (a :class:`Transport` is returned as is).

    Raises
    ------
    ClusterError
        An unknown name.
    """
    if isinstance(name, Transport):
        return name
    if name not in TRANSPORTS:
        raise ClusterError(f"transport={name!r}: unknown transport; use one of "
                           f"{sorted(TRANSPORTS)}")
    return TRANSPORTS[name]


def apply_transport(cluster, transport: str | Transport, *, cpu_costs: bool = False):
    """``cluster`` with ``transport`` applied: a new :class:`~sgdnet.workload.Cluster`.

    Its NIC rates (``bandwidth``, ``uplink``, ``downlink``, ``ps_bandwidth``, and a topology's
    ``nic_bandwidth`` / ``node_nic_bandwidth``) are multiplied by the goodput and its
    inter-node ``latency`` set to the transport's. Intra-node links (NVLink, PCIe) are left
    as they are.

    Parameters
    ----------
    cluster : Cluster
    transport : str or Transport
        ``"tcp"``, ``"rdma"``, ``"roce"`` (:data:`TRANSPORTS`) or a :class:`Transport`.
    cpu_costs : bool
        Also set ``send_s_per_byte`` / ``recv_s_per_byte`` (added to the cluster's). The
        Fabric charges them on the worker's compute resource, which is right for CPU workers
        (gloo) but on a GPU cluster would hold the GPU for the host's socket copies (NCCL's
        proxy thread runs beside the GPU), so it is off by default.

    Raises
    ------
    ClusterError
        An unknown transport, or ``cluster`` is not a Cluster.
    """
    from .cluster import Cluster

    tr = get_transport(transport)
    if not isinstance(cluster, Cluster):
        raise ClusterError(f"apply_transport needs a Cluster, got {type(cluster).__name__}")
    g = tr.goodput
    ch: dict = {"bandwidth": cluster.bandwidth * g, "latency": tr.latency}
    for f in ("uplink", "downlink", "ps_bandwidth"):
        v = getattr(cluster, f)
        if v is not None:
            ch[f] = v * g
    if cpu_costs:
        ch["send_s_per_byte"] = cluster.send_s_per_byte + tr.send_s_per_byte
        ch["recv_s_per_byte"] = cluster.recv_s_per_byte + tr.recv_s_per_byte
    t = cluster.topology
    if t is not None:
        tc: dict = {"nic_bandwidth": t.nic_bandwidth * g}
        if t.node_nic_bandwidth is not None:
            tc["node_nic_bandwidth"] = tuple(b * g for b in t.node_nic_bandwidth)
        ch["topology"] = t.replace(**tc)
    return cluster.replace(**ch)
