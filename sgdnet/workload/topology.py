"""Cluster topology: nodes of GPUs, the interconnect inside a node, NICs, and the fabric.

A :class:`Topology` turns a flat list of workers into ``nodes x gpus_per_node`` GPUs (worker
``i`` is GPU ``i % gpus_per_node`` of node ``i // gpus_per_node``; the number of nodes is
``Cluster.workers / gpus_per_node``) and names the **links** a message crosses between two
GPUs (:meth:`Topology.path`); the Fabric (``sgdnet.variants.fabric``) creates those links and
sends every transfer as a flow over them, so shared NICs and oversubscribed leaf uplinks
congest by themselves (max-min fair sharing).

Links (each direction its own link, bytes/s)
    * ``intra="nvlink"`` (NVLink through NVSwitch, all-to-all): GPU ``l`` of node ``k`` has
      ``n{k}.g{l}.nvl.up`` and ``.down`` of ``intra_bandwidth``; a message between two GPUs
      of one node crosses the sender's up and the receiver's down.
    * ``intra="pcie"`` (PCIe through the host bridge): each GPU has ``n{k}.g{l}.pcie.up`` and
      ``.down`` of ``intra_bandwidth``; with ``bridge_bandwidth`` a node's GPU-to-GPU traffic
      also crosses the shared ``n{k}.bridge`` link (the root complex / inter-socket link).
      Inter-node messages of a PCIe node also cross the GPU's PCIe link (GPU -> NIC over PCIe);
      with NVLink the GPU reaches its NIC over its own PCIe switch, assumed faster than the NIC.
    * NICs: node ``k`` has ``nics_per_node`` NICs, ``n{k}.nic{j}.up`` / ``.down`` of
      ``nic_bandwidth``; GPU ``l`` uses NIC ``l * nics_per_node // gpus_per_node`` (PCIe
      affinity: with 8 GPUs and 4 NICs, GPUs 0-1 share NIC 0, ...). A NIC's downlink carries
      the cluster's incast curve.
    * ``fabric="switch"``: one non-blocking switch; ``"leaf-spine"``: racks of ``rack_nodes``
      nodes under a leaf switch whose uplink to the spine (``leaf{r}.up`` / ``.down``) carries
      ``rack_nodes * nics_per_node * nic_bandwidth / oversubscription`` (ECMP over the spine
      links taken as ideal, so the spine is one link per leaf and direction). A message between
      racks crosses the sender's leaf up and the receiver's leaf down.

PCIe tree and GPU-to-NIC paths (``pcie_switch_gpus`` set; ``None``, the default, keeps the
paths above)
    GPU ``l`` of node ``k`` sits behind PCIe switch ``l // pcie_switch_gpus`` whose uplink to a
    CPU root port is ``n{k}.sw{j}.up`` (towards the CPU) / ``.down`` (from it) of
    ``pcie_uplink_bandwidth`` (a rate or a PCIe generation: ``"pcie3"``, ``"pcie4"``,
    ``"pcie5"``, the x16 rates of :data:`PCIE_X16`; default: ``intra_bandwidth`` on PCIe nodes,
    where the uplink is an x16 link as the GPU's own). A NIC sits on the switch of the GPUs that
    use it when they all share one switch (``nics_per_node >= switches``: DGX-1, DGX A100,
    p4d), else on a root port of its own.

    * PCIe nodes, GPU to GPU: behind one switch, peer to peer (``g.pcie.up`` ->
      ``g'.pcie.down``); across switches ``g.pcie.up`` -> ``sw{j}.up`` (-> ``bridge``) ->
      ``sw{j'}.down`` -> ``g'.pcie.down``.
    * GPU to NIC, ``gpudirect=True`` (GPUDirect RDMA): peer to peer through the shared switch
      (no uplink); a NIC on a root port is reached over the GPU's switch uplink (and the
      bridge). ``gpudirect=False`` (staged through host memory, as sockets / NCCL without
      GPUDirect do): the GPU writes into host memory over its switch uplink (``sw{j}.up``,
      ``bridge``) and the NIC reads it back down its own switch's uplink (``sw{j'}.down``);
      receiving mirrors it (NIC -> ``sw{j'}.up`` -> ``bridge`` -> ``sw{j}.down`` -> GPU). So
      two GPUs of one switch sending through their NIC share that switch's uplink (each gets
      half of it in a max-min allocation), the contention NVIDIA's and AWS's GPU-pair boards
      show without GPUDirect.

    Vendor facts: PCIe x16 per direction is 15.75 GB/s raw for PCIe 3.0 (8 GT/s, 128b/130b;
    ~12-13 GB/s achievable), 31.5 GB/s for 4.0, 63 GB/s for 5.0 (PCI-SIG, "PCI Express Base
    Specification" revisions 3.0 / 4.0 / 5.0; https://pcisig.com/specifications). NVIDIA DGX-1
    ("NVIDIA DGX-1 System Architecture", white paper WP-08437-001, section 3): eight GPUs in pairs
    behind four PCIe switches, one 100 Gb/s InfiniBand NIC on each switch: ``gpus_per_node=8,
    pcie_switch_gpus=2, nics_per_node=4``. AWS p3.16xlarge (8 V100, 64 vCPUs, 25 Gb/s,
    https://aws.amazon.com/ec2/instance-types/p3/): GPU pairs behind PLX PCIe switches
    (``nvidia-smi topo -m`` shows ``PIX`` within a pair), the one ENA NIC on a root port:
    ``pcie_switch_gpus=2, nics_per_node=1``.

Host CPUs and the input pipeline (``input_s_per_sample > 0``; 0, the default, is synthetic
data: nothing is added)
    The node's ``host_cores`` CPU cores load, decode and augment every batch of its GPUs: per
    node one processor-shared CPU pool, per GPU a "prepare batch" of ``batch *
    input_s_per_sample / host_cores`` pool-seconds with ``prefetch`` batches prepared ahead of
    the one in use (tf.data ``prefetch(2)`` / DataLoader ``prefetch_factor=2``); see
    :mod:`sgdnet.variants.input_pipeline`. When the pipeline is the bottleneck a node delivers
    ``host_cores / input_s_per_sample`` samples/s whatever its number of GPUs.
    :mod:`sgdnet.workload.node` calibrates ``input_s_per_sample`` from one node.

Latency: ``intra_latency`` for a message inside a node, ``Cluster.latency`` between nodes.

Parameter servers: a dedicated PS host hangs off the spine (switch) with its own NIC
(``Cluster.ps_bandwidth``); a GPU's message to it crosses its NIC (and its leaf uplink). A
colocated shard ``k`` runs on node ``k`` (on the host of its first GPU, worker
``k * gpus_per_node``), so it needs ``ps_shards <= nodes``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from .. import units
from .._check import int_arg
from ..errors import ClusterError, UnitError
from . import _quantity as _q

__all__ = ["Topology", "INTERCONNECTS", "FABRICS", "PCIE_X16"]

#: Intra-node interconnects.
INTERCONNECTS = ("nvlink", "pcie")
#: Inter-node fabrics.
FABRICS = ("switch", "leaf-spine")
#: Raw rate of a PCIe x16 link, each direction, bytes/s, by generation (PCI-SIG base
#: specifications 3.0 / 4.0 / 5.0: 8 / 16 / 32 GT/s per lane, 128b/130b encoding, 16 lanes);
#: ``pcie_uplink_bandwidth`` accepts the keys. Achievable DMA rates are ~80% of these
#: (~12-13 GB/s on PCIe 3.0 x16, e.g. CUDA's bandwidthTest on V100 systems).
PCIE_X16 = {"pcie3": 15.75e9, "pcie4": 31.5e9, "pcie5": 63.0e9}


def _rate(value: Any, field: str) -> float:
    try:
        return units.bandwidth(value, what=f"Topology.{field}")
    except UnitError as e:
        raise ClusterError(f"{e} (e.g. {field}='100Gbps' or a number of bytes/s > 0)") from None


def _count(value: Any, field: str, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return int_arg(f"Topology.{field}", value, 1, f" (a number of {what})", error=ClusterError)


@dataclass(frozen=True)
class Topology:
    """Nodes of GPUs, their interconnect and NICs, and the fabric between nodes.

    Parameters
    ----------
    gpus_per_node : int
        GPUs (workers) per node, >= 1; ``Cluster.workers`` must be a multiple of it.
    intra : {"nvlink", "pcie"}
        Interconnect inside a node (see the module docstring).
    intra_bandwidth : float or str
        Per-GPU bandwidth of the intra-node interconnect, each direction (``"150GB/s"``).
    intra_latency : float or str
        One-way latency of a message inside a node, seconds.
    bridge_bandwidth : float or str or None
        PCIe only: the shared host-bridge link of a node (``None``: not a bottleneck).
    nics_per_node : int
        NICs per node, shared by the node's GPUs (<= ``gpus_per_node``).
    nic_bandwidth : float or str
        Rate of one NIC, each direction (``"100Gbps"``).
    fabric : {"switch", "leaf-spine"}
        One non-blocking switch, or leaves of ``rack_nodes`` nodes under a spine.
    rack_nodes : int
        Nodes per rack (leaf-spine only).
    oversubscription : float
        Leaf downlink capacity / leaf uplink capacity, >= 1 (leaf-spine only; 2.0 is 2:1).
    node_nic_bandwidth : sequence of (float or str) or None
        Heterogeneous clusters: the NIC rate of each node (one entry per node, checked against
        ``Cluster.workers``), overriding ``nic_bandwidth`` for that node's NICs; leaf uplinks
        keep ``nic_bandwidth``. ``None``: every node has ``nic_bandwidth``.
    pcie_switch_gpus : int or None
        GPUs behind each PCIe switch (a divisor of ``gpus_per_node``; 2 on DGX-1 and
        p3.16xlarge); ``None``: no PCIe tree (the paths of the module docstring's first part).
    pcie_uplink_bandwidth : float or str or None
        A switch's uplink to its CPU root port, each direction (a rate, or ``"pcie3"`` /
        ``"pcie4"`` / ``"pcie5"``: :data:`PCIE_X16`); ``None``: ``intra_bandwidth`` on
        ``intra="pcie"`` nodes (required on NVLink nodes with switches).
    gpudirect : bool
        With switches: True (GPUDirect RDMA, a GPU reaches its NIC peer to peer) or False
        (staged through host memory over the switch uplinks and the bridge).
    peer_to_peer : bool
        PCIe nodes with switches: True (two GPUs behind one switch copy peer to peer) or False
        (no GPU peer-to-peer, as on consumer GPUs or with ``NCCL_P2P_DISABLE``: every GPU-to-GPU
        copy of the node is staged through host memory, up its switch's uplink, through the
        bridge and down, so the GPUs of a switch share its uplink in both directions).
    host_cores : int or None
        CPU cores of a node serving its input pipeline (required when ``input_s_per_sample >
        0``; e.g. 64 vCPUs on p3.16xlarge, 80 threads on DGX-1).
    input_s_per_sample : float or str
        CPU-seconds to load, decode and augment one sample (0: synthetic data, no pipeline).
    prefetch : int
        Batches a GPU's pipeline prepares ahead of the one in use, >= 0 (2: tf.data
        ``prefetch(2)``, PyTorch ``DataLoader(prefetch_factor=2)``; 0: preparation and compute
        alternate).

    Examples
    --------
    >>> t = Topology(gpus_per_node=8, intra_bandwidth="150GB/s", nics_per_node=4,
    ...              nic_bandwidth="100Gbps")
    >>> t.nodes(16), t.node_of(11), t.nic_of(11)
    (2, 1, 1)
    """

    gpus_per_node: int = 8
    intra: str = "nvlink"
    intra_bandwidth: float | str = "150GB/s"
    intra_latency: float | str = "2us"
    bridge_bandwidth: float | str | None = None
    nics_per_node: int = 1
    nic_bandwidth: float | str = "100Gbps"
    fabric: str = "switch"
    rack_nodes: int = 1
    oversubscription: float = 1.0
    node_nic_bandwidth: tuple | None = None
    pcie_switch_gpus: int | None = None
    pcie_uplink_bandwidth: float | str | None = None
    gpudirect: bool = True
    peer_to_peer: bool = True
    host_cores: int | None = None
    input_s_per_sample: float | str = 0.0
    prefetch: int = 2

    def __post_init__(self) -> None:
        s = object.__setattr__
        g = _count(self.gpus_per_node, "gpus_per_node", "GPUs per node")
        s(self, "gpus_per_node", g)
        if self.intra not in INTERCONNECTS:
            raise ClusterError(f"Topology.intra={self.intra!r}: unknown interconnect; use one of "
                               f"{list(INTERCONNECTS)}")
        s(self, "intra_bandwidth", _rate(self.intra_bandwidth, "intra_bandwidth"))
        try:
            s(self, "intra_latency", _q.seconds(self.intra_latency,
                                                 what="Topology.intra_latency"))
        except UnitError as e:
            raise ClusterError(f"{e} (e.g. intra_latency='2us')") from None
        if self.bridge_bandwidth is not None:
            if self.intra != "pcie":
                raise ClusterError(f"Topology.bridge_bandwidth={self.bridge_bandwidth!r} is the "
                                   "PCIe host bridge; it needs intra='pcie' (or leave it None)")
            s(self, "bridge_bandwidth", _rate(self.bridge_bandwidth, "bridge_bandwidth"))
        k = _count(self.nics_per_node, "nics_per_node", "NICs per node")
        if k > g:
            raise ClusterError(f"Topology.nics_per_node={k} > gpus_per_node={g}: every NIC is "
                               "used by at least one GPU; give at most one NIC per GPU")
        s(self, "nics_per_node", k)
        s(self, "nic_bandwidth", _rate(self.nic_bandwidth, "nic_bandwidth"))
        if self.fabric not in FABRICS:
            raise ClusterError(f"Topology.fabric={self.fabric!r}: unknown fabric; use one of "
                               f"{list(FABRICS)}")
        s(self, "rack_nodes", _count(self.rack_nodes, "rack_nodes", "nodes per rack"))
        o = self.oversubscription
        if isinstance(o, bool) or not isinstance(o, (int, float)) or not (
                math.isfinite(o) and o >= 1):
            raise ClusterError(f"Topology.oversubscription={o!r}: must be a number >= 1 "
                               "(1 = non-blocking, 2.0 = 2:1 between racks)")
        s(self, "oversubscription", float(o))
        nb = self.node_nic_bandwidth
        if nb is not None:
            if isinstance(nb, (str, bytes)) or not hasattr(nb, "__len__"):
                raise ClusterError(f"Topology.node_nic_bandwidth={nb!r}: must be a list with one "
                                   "NIC rate per node (e.g. ['100Gbps', '50Gbps']) or None")
            s(self, "node_nic_bandwidth",
              tuple(_rate(v, f"node_nic_bandwidth[{k}]") for k, v in enumerate(nb)))
        if self.fabric == "switch" and (self.rack_nodes != 1 or o != 1):
            raise ClusterError("Topology: rack_nodes and oversubscription describe a leaf-spine "
                               "fabric; pass fabric='leaf-spine' with them (or drop them)")
        self._check_pcie_tree()
        self._check_host()

    def _check_pcie_tree(self) -> None:
        s, g = object.__setattr__, self.gpus_per_node
        sw = self.pcie_switch_gpus
        if not isinstance(self.gpudirect, bool):
            raise ClusterError(f"Topology.gpudirect={self.gpudirect!r}: must be True (GPUDirect "
                               "RDMA) or False (staged through host memory)")
        if not isinstance(self.peer_to_peer, bool):
            raise ClusterError(f"Topology.peer_to_peer={self.peer_to_peer!r}: must be True (GPU "
                               "peer-to-peer copies) or False (staged through host memory)")
        if not self.peer_to_peer and (sw is None or self.intra != "pcie"):
            raise ClusterError("Topology.peer_to_peer=False stages PCIe copies through host "
                               "memory; it needs intra='pcie' and pcie_switch_gpus (e.g. 2)")
        if sw is None:
            if self.pcie_uplink_bandwidth is not None or not self.gpudirect:
                raise ClusterError("Topology: pcie_uplink_bandwidth and gpudirect=False describe "
                                   "the PCIe tree; give pcie_switch_gpus (GPUs per PCIe switch, "
                                   "e.g. 2) with them (or drop them)")
            return
        sw = _count(sw, "pcie_switch_gpus", "GPUs per PCIe switch")
        if g % sw:
            raise ClusterError(f"Topology.pcie_switch_gpus={sw} does not divide gpus_per_node={g}"
                               f"; give a divisor (e.g. {2 if g % 2 == 0 else 1})")
        s(self, "pcie_switch_gpus", sw)
        up = self.pcie_uplink_bandwidth
        if up is None:
            if self.intra != "pcie":
                raise ClusterError("Topology.pcie_switch_gpus on an NVLink node needs "
                                   "pcie_uplink_bandwidth (the switch's uplink to the CPU, e.g. "
                                   "'pcie3' = 15.75 GB/s per direction)")
            up = self.intra_bandwidth
        elif isinstance(up, str) and up.strip().lower() in PCIE_X16:
            up = PCIE_X16[up.strip().lower()]
        s(self, "pcie_uplink_bandwidth", _rate(up, "pcie_uplink_bandwidth"))

    def _check_host(self) -> None:
        s = object.__setattr__
        try:
            x = _q.seconds(self.input_s_per_sample, what="Topology.input_s_per_sample")
        except UnitError as e:
            raise ClusterError(f"{e} (CPU-seconds per sample, e.g. input_s_per_sample='2ms'; "
                               "0 for synthetic data)") from None
        s(self, "input_s_per_sample", x)
        p = self.prefetch
        if isinstance(p, float) and p.is_integer():
            p = int(p)
        s(self, "prefetch", int_arg("Topology.prefetch", p, 0,
                                    " (batches prepared ahead, e.g. 2)", error=ClusterError))
        if self.host_cores is not None:
            s(self, "host_cores", _count(self.host_cores, "host_cores", "CPU cores"))
        elif x > 0:
            raise ClusterError(f"Topology.input_s_per_sample={x!r} needs host_cores (the node's "
                               "CPU cores serving the input pipeline, e.g. host_cores=64)")

    # ------------------------------------------------------------------ shape
    def nodes(self, workers: int) -> int:
        """Number of nodes for ``workers`` GPUs (a multiple of ``gpus_per_node``)."""
        g = self.gpus_per_node
        if workers % g:
            raise ClusterError(f"Cluster.workers={workers} is not a multiple of "
                               f"Topology.gpus_per_node={g}; use {max(g, workers // g * g)} "
                               f"or {(workers // g + 1) * g} workers")
        nb = self.node_nic_bandwidth
        if nb is not None and len(nb) != workers // g:
            raise ClusterError(f"Topology.node_nic_bandwidth has {len(nb)} entries but the "
                               f"cluster has {workers // g} nodes ({workers} workers / "
                               f"{g} GPUs per node); give one NIC rate per node")
        return workers // g

    def node_of(self, worker: int) -> int:
        """Node of worker (GPU) ``worker``."""
        return worker // self.gpus_per_node

    def local_rank(self, worker: int) -> int:
        """Index of worker ``worker`` inside its node."""
        return worker % self.gpus_per_node

    def nic_of(self, worker: int) -> int:
        """Index of the NIC (within its node) worker ``worker`` sends and receives through."""
        return self.local_rank(worker) * self.nics_per_node // self.gpus_per_node

    def rack_of(self, node: int) -> int:
        """Rack (leaf) of ``node``; 0 on a single switch."""
        return node // self.rack_nodes if self.fabric == "leaf-spine" else 0

    def leaf_bandwidth(self) -> float:
        """Capacity of a leaf's uplink (and downlink) to the spine, bytes/s."""
        return self.rack_nodes * self.nics_per_node * self.nic_bandwidth / self.oversubscription

    # ------------------------------------------------------------------ links and paths
    def _gpu_link(self, w: int, d: str) -> tuple[str, float, str]:
        kind = "nvl" if self.intra == "nvlink" else "pcie"
        return (f"n{self.node_of(w)}.g{self.local_rank(w)}.{kind}.{d}", self.intra_bandwidth,
                f"{kind}_{d}")

    def nic_rate(self, node: int) -> float:
        """NIC rate of ``node``, bytes/s (``node_nic_bandwidth`` or ``nic_bandwidth``)."""
        nb = self.node_nic_bandwidth
        return float(self.nic_bandwidth if nb is None else nb[node])

    def _nic_link(self, w: int, d: str) -> tuple[str, float, str]:
        k = self.node_of(w)
        return (f"n{k}.nic{self.nic_of(w)}.{d}", self.nic_rate(k), f"nic_{d}")

    def _leaf(self, node: int, d: str) -> tuple[str, float, str]:
        return (f"leaf{self.rack_of(node)}.{d}", self.leaf_bandwidth(), f"leaf_{d}")

    def switch_of(self, worker: int) -> int | None:
        """PCIe switch (within its node) of worker ``worker``; None without a PCIe tree."""
        sw = self.pcie_switch_gpus
        return None if sw is None else self.local_rank(worker) // sw

    def nic_switch(self, nic: int) -> int | None:
        """The PCIe switch NIC ``nic`` (within a node) sits on: the switch of the GPUs that use
        it when they share one, else None (on a CPU root port; also without a PCIe tree)."""
        sw, g, k = self.pcie_switch_gpus, self.gpus_per_node, self.nics_per_node
        if sw is None:
            return None
        got = {l // sw for l in range(g) if l * k // g == nic}
        return got.pop() if len(got) == 1 else None

    def _sw(self, node: int, j: int, d: str) -> tuple[str, float, str]:
        return (f"n{node}.sw{j}.{d}", float(self.pcie_uplink_bandwidth), f"pcie_sw_{d}")

    def _bridge(self, node: int) -> list[tuple[str, float, str]]:
        bw = self.bridge_bandwidth
        return [] if bw is None else [(f"n{node}.bridge", float(bw), "bridge")]

    def _to_nic(self, w: int) -> list[tuple[str, float, str]]:
        """The PCIe-tree links from GPU ``w`` (after its own PCIe link) to its NIC."""
        if self.pcie_switch_gpus is None:
            return []
        k, j = self.node_of(w), self.switch_of(w)
        if self.nic_switch(self.nic_of(w)) is None:  # the NIC on a root port
            return [self._sw(k, j, "up"), *self._bridge(k)]
        if self.gpudirect:  # peer to peer through the switch both share
            return []
        return [self._sw(k, j, "up"), *self._bridge(k), self._sw(k, j, "down")]

    def _from_nic(self, w: int) -> list[tuple[str, float, str]]:
        """The PCIe-tree links from GPU ``w``'s NIC to the GPU (before its own PCIe link)."""
        if self.pcie_switch_gpus is None:
            return []
        k, j = self.node_of(w), self.switch_of(w)
        if self.nic_switch(self.nic_of(w)) is None:
            return [*self._bridge(k), self._sw(k, j, "down")]
        if self.gpudirect:
            return []
        return [self._sw(k, j, "up"), *self._bridge(k), self._sw(k, j, "down")]

    def out_path(self, w: int) -> list[tuple[str, float, str]]:
        """Links from GPU ``w`` to the spine (switch): (PCIe up,) (PCIe tree,) NIC up
        (, leaf up)."""
        p = [self._gpu_link(w, "up")] if self.intra == "pcie" else []
        p += self._to_nic(w)
        p.append(self._nic_link(w, "up"))
        if self.fabric == "leaf-spine":
            p.append(self._leaf(self.node_of(w), "up"))
        return p

    def in_path(self, w: int) -> list[tuple[str, float, str]]:
        """Links from the spine (switch) to GPU ``w``: (leaf down,) NIC down (, PCIe tree)
        (, PCIe down)."""
        p = [self._leaf(self.node_of(w), "down")] if self.fabric == "leaf-spine" else []
        p.append(self._nic_link(w, "down"))
        p += self._from_nic(w)
        if self.intra == "pcie":
            p.append(self._gpu_link(w, "down"))
        return p

    def path(self, src: int, dst: int) -> list[tuple[str, float, str]]:
        """The links ``(name, bandwidth, kind)`` a message from GPU ``src`` to GPU ``dst``
        crosses, in order."""
        if src == dst:
            raise ClusterError(f"Topology.path: source and destination are the same GPU {src}")
        ns, nd = self.node_of(src), self.node_of(dst)
        if ns == nd:
            p = [self._gpu_link(src, "up")]
            js, jd = self.switch_of(src), self.switch_of(dst)
            if self.intra == "pcie" and js is not None:
                if js != jd or not self.peer_to_peer:
                    # across switches (or without peer-to-peer): up one uplink, through the
                    # root complex, down
                    p += [self._sw(ns, js, "up"), *self._bridge(ns), self._sw(ns, jd, "down")]
            else:
                p += self._bridge(ns)
            return [*p, self._gpu_link(dst, "down")]
        out, inn = self.out_path(src), self.in_path(dst)
        if self.fabric == "leaf-spine" and self.rack_of(ns) == self.rack_of(nd):
            out, inn = out[:-1], inn[1:]  # the leaf switches the message itself
        return out + inn

    def same_node(self, a: int, b: int) -> bool:
        """True when workers ``a`` and ``b`` are GPUs of one node."""
        return self.node_of(a) == self.node_of(b)

    # ------------------------------------------------------------------ serialisation
    def replace(self, **changes: Any) -> Topology:
        """A copy with some fields changed (validated again)."""
        names = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(changes) - names)
        if bad:
            raise ClusterError(f"Topology has no field(s) {bad}; fields are {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Fields as SI floats (JSON/YAML-ready)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if d["node_nic_bandwidth"] is not None:
            d["node_nic_bandwidth"] = list(d["node_nic_bandwidth"])
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "topology") -> Topology:
        """A topology from a mapping of its fields (units allowed); unknown keys are refused."""
        if isinstance(d, Topology):
            return d
        if not isinstance(d, dict):
            raise ClusterError(f"{where}: expected a mapping of Topology fields, got "
                               f"{type(d).__name__} {d!r}")
        names = [f.name for f in dataclasses.fields(cls)]
        bad = sorted(str(k) for k in d if k not in names)
        if bad:
            raise ClusterError(f"{where}: unknown key(s) {bad}; valid keys are {names}")
        return cls(**d)
