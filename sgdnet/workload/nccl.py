"""NCCL's choice of all-reduce algorithm, protocol and channels, as NCCL's tuning model makes it.

NCCL does not pick its algorithm by fixed size thresholds: at initialisation it searches the
node's topology for rings and trees (``src/graph/search.cc``, ``ncclTopoCompute``: a number of
*channels* at a per-channel bandwidth), turns them into a bandwidth and a latency for every
(algorithm, protocol) pair (``src/graph/tuning.cc``, ``ncclTopoTuneModel``), and for each
collective takes the pair with the least ``latency + bytes / bandwidth``
(``ncclTopoGetAlgoTime``, called by ``getAlgoInfo`` in ``src/enqueue.cc``), then lowers the
channels a small message runs on. This module writes that model again (learned from NCCL
v2.18.3-1, the files above; constants quoted from them), for the two algorithms sgdnet
builds: ``ring`` and ``tree`` (NCCL's double binary tree, sgdnet's ``dbtree``), each with the
protocols ``LL``, ``LL128`` and ``Simple``. CollNet (SHARP) and NVLS (NVSwitch multicast,
sm90 with NCCL >= 2.17) are not modelled.

The topology search (:func:`nccl_topology`) is a closed-form stand-in for NCCL's recursive
one, on the shapes sgdnet describes (``nodes x gpus_per_node`` GPUs, all-to-all NVLink or
PCIe inside a node, ``nics_per_node`` NICs): a ring channel crosses every GPU's intra-node
link once each way and, on several nodes, one NIC each way, so at per-channel speed ``s``
there are ``min(floor(B_intra/s), nics * floor(min(B_nic, B_pci)/s), 16)`` channels; the speed
is NCCL's first entry of its speed table not above the path bandwidth, lowered while that
gives more total bandwidth (down to half, NCCL's ``> .49`` rule), trees then raise their
intra-node speed up to twice the inter-node one; channels of more than 25 GB/s are
duplicated at half the speed (``search.cc``) and the communicator doubles them again
(``ncclTopoPostset`` in ``src/graph/connect.cc``, capped at 32 and by
``NCCL_MAX_NCHANNELS``). Bandwidths are NCCL's GB/s (1e9 bytes/s) as its topology detection
reports them: a NIC at ``speed_mbps / 8000``, PCIe Gen3 x16 at 12, Gen4 x16 at 24, an sm70-sm90
NVLink at 20 per link (so an A100's 12 links are 240).

Examples
--------
One DGX A100 node (8 GPUs, 12 NVLinks each as NCCL rates them): ring for every size,
LL for small messages, LL128 for mid sizes, Simple for large ones:

>>> c = nccl_allreduce_choice(4096, nodes=1, gpus_per_node=8, intra_bw=240e9,
...                           inter_bw=25e9, nics_per_node=8)
>>> c.algorithm, c.protocol
('ring', 'LL')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import ClusterError

__all__ = ["NcclGraph", "NcclTopology", "NcclChoice", "nccl_topology", "nccl_allreduce_choice",
           "nccl_default_channels", "nccl_choice_for_cluster", "nccl_inputs", "nccl_plan",
           "PROTOCOL_EFFICIENCY", "ALGORITHMS", "PROTOCOLS", "VERSIONS", "SGDNET_ALGORITHM"]

#: NCCL versions whose tuning constants this module holds.
VERSIONS = ("2.18",)
#: The algorithms modelled, NCCL's names.
ALGORITHMS = ("tree", "ring")
#: The protocols, NCCL's order (``NCCL_PROTO_LL``, ``LL128``, ``SIMPLE``).
PROTOCOLS = ("LL", "LL128", "Simple")
#: sgdnet's all-reduce algorithm for each NCCL algorithm.
SGDNET_ALGORITHM = {"ring": "ring", "tree": "dbtree"}

#: Fraction of the bytes on the wire that are data: LL sends 8-byte lines of 4 data bytes and a
#: 4-byte flag; LL128 128-byte lines of 120 data bytes and an 8-byte flag; Simple only data
#: (NCCL ``src/include/devcomm.h``: ``ncclLLFifoLine``, ``NCCL_LL128_DATAELEMS`` /
#: ``NCCL_LL128_LINEELEMS``).
PROTOCOL_EFFICIENCY = {"LL": 0.5, "LL128": 120.0 / 128.0, "Simple": 1.0}

# ---------------------------------------------------------------------------- NCCL 2.18 constants
# src/graph/tuning.cc (v2.18.3-1). Latencies in microseconds, bandwidths in GB/s.
_BASE_LAT = {"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4)}
_HW_LAT = {  # hwLat[NVLINK | PCI | NET][algorithm] per protocol
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pcie": {"tree": (1.0, 1.9, 6.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
# [Volta, Ampere, Hopper] x [1 node, 2 nodes, > 2 nodes]; llMaxBws' row on several nodes is
# chosen by CPU vendor (Intel row 0, AMD row 1) instead of GPU.
_LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0))
_RING_LL128_MAX = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7))
_TREE_LL128_MAX = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0))
_TREE_MAX = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0))
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MB
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
     1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
# src/graph/search.cc speed tables (GB/s per channel)
_SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_SPEEDS_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                 3.0, 2.4, 1.2, 0.24, 0.12)
_SM90_SPEEDS_INTRA = (60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)
_SM90_SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                      1.2, 0.24, 0.12)
_MAXCHANNELS = 32           # src/include/devcomm.h
_PCI_BW = 12.0              # src/graph/topo.h, PCIe Gen3 x16
# src/include/comm.h / devcomm.h: per-thread work before adding channels, and threads
_THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
_MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}


def _cc_index(cc: int) -> int:
    return 2 if cc >= 90 else 1 if cc >= 80 else 0


def _log2i(n: int) -> int:
    n, out = int(n), 0
    while n > 1:
        n >>= 1
        out += 1
    return out


@dataclass(frozen=True)
class NcclGraph:
    """One of NCCL's search results (``struct ncclTopoGraph``): ``channels`` channels of
    ``bw_intra`` / ``bw_inter`` GB/s each; ``tree_pattern``: the simple tree of one GPU per node
    (``NCCL_TOPO_PATTERN_TREE``, whose bandwidth NCCL discounts by 15%)."""

    channels: int
    bw_intra: float
    bw_inter: float
    tree_pattern: bool = False


@dataclass(frozen=True)
class NcclTopology:
    """What NCCL's initialisation found for a communicator (:func:`nccl_topology`).

    Attributes
    ----------
    nodes, gpus_per_node : int
    intra : {"nvlink", "pcie"}
    compute_capability : int
    cpu : {"intel", "amd"}
    ring, tree : NcclGraph
        The ring and tree search results the tuning model rates.
    channels : int
        The communicator's channels (``comm->nChannels`` after ``ncclTopoPostset``).
    ll128 : bool
        Whether LL128 is enabled (NCCL 2.18: NVLink inside the node, sm70/80/90).
    """

    nodes: int
    gpus_per_node: int
    intra: str
    compute_capability: int
    cpu: str
    ring: NcclGraph
    tree: NcclGraph
    channels: int
    ll128: bool

    @property
    def ranks(self) -> int:
        """GPUs in the communicator."""
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class NcclChoice:
    """NCCL's pick for one all-reduce.

    Attributes
    ----------
    algorithm : {"ring", "tree"}
    protocol : {"LL", "LL128", "Simple"}
    channels : int
        Channels the message runs on (``getAlgoInfo``: fewer than the communicator's for small
        messages).
    time_s : float
        The model's time of the chosen pair, seconds.
    busbw : float
        nccl-tests' bus bandwidth of that time, bytes/s: ``nbytes / time * 2 (n-1) / n``.
    times : dict
        The model's time of every enabled (algorithm, protocol), seconds.
    """

    algorithm: str
    protocol: str
    channels: int
    time_s: float
    busbw: float
    times: dict = field(default_factory=dict, compare=False)

    @property
    def sgdnet_algorithm(self) -> str:
        """The all-reduce sgdnet builds for it: ``"ring"`` or ``"dbtree"``."""
        return SGDNET_ALGORITHM[self.algorithm]

    @property
    def efficiency(self) -> float:
        """Data bytes per wire byte of the protocol (:data:`PROTOCOL_EFFICIENCY`)."""
        return PROTOCOL_EFFICIENCY[self.protocol]


# ---------------------------------------------------------------------------- checks
def _pos_int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ClusterError(f"{name}={v!r}: must be an integer >= 1")
    return int(v)


def _rate(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
        raise ClusterError(f"{name}={v!r}: must be a bandwidth in bytes/s > 0 (e.g. 25e9 for "
                           "a 200 Gbit/s NIC)")
    return float(v)


def _version(v) -> str:
    if v not in VERSIONS:
        raise ClusterError(f"version={v!r}: NCCL's tuning constants are held for "
                           f"{list(VERSIONS)}; pass one of them")
    return v


# ---------------------------------------------------------------------------- topology search
def _count(speed: float, intra: float, nic: float | None, nics: int, ngpus: int,
           cap: int) -> int:
    """Channels of ``speed`` GB/s the links carry (see the module docstring)."""
    n = cap
    if ngpus > 1:
        n = min(n, int(intra / speed + 1e-9))
    if nic is not None:
        n = min(n, nics * int(nic / speed + 1e-9))
    return n


def _search(ring: bool, ngpus: int, net: bool, intra: float, nic: float, nics: int, cc: int,
            lo: int, hi: int) -> NcclGraph:
    """A closed-form ``ncclTopoCompute`` (module docstring)."""
    if net:
        speeds = _SM90_SPEEDS_INTER if cc >= 90 else _SPEEDS_INTER
    else:
        speeds = _SM90_SPEEDS_INTRA if cc >= 90 else _SPEEDS_INTRA
    nic_path = nic if net else None
    max_bw = nic if net else (intra if ngpus > 1 else 5000.0)  # LOC_BW for one GPU alone
    total = intra
    if not ring and ngpus > 1:
        total *= ngpus / (ngpus - 1)
    i = 0
    while i < len(speeds) - 1 and (speeds[i] > max_bw or speeds[i] * lo > total):
        i += 1
    best: tuple[int, float] | None = None
    while True:
        s = speeds[i]
        n = _count(s, intra, nic_path, nics, ngpus, hi)
        if n >= lo and (best is None or n * s > best[0] * best[1]):
            best = (n, s)
        if best is not None and (best[0] == hi or best[0] * best[1] >= total):
            break
        if i == len(speeds) - 1 or (best is not None and speeds[i + 1] / best[1] <= .49):
            break
        i += 1
    if best is None:  # NCCL's fallback: one channel at 0.1 GB/s
        return NcclGraph(1, 0.1, 0.1, not ring and ngpus == 1)
    n, s = best
    s_intra = s
    if not ring:  # pass 2: trees raise the intra-node speed up to twice the inter-node one
        j = speeds.index(s)
        while j > 0 and s_intra < 2 * s and (ngpus == 1 or int(intra / speeds[j - 1] + 1e-9) >= n):
            j -= 1
            s_intra = speeds[j]
    s_inter = s
    if s_intra >= 25.0 and not (cc > 80 and s_intra < 50.0 and n > 4):
        dup = min(2 * n, hi)
        k = -(-dup // n)
        s_intra, s_inter, n = s_intra / k, s_inter / k, dup
    return NcclGraph(n, s_intra, s_inter, not ring and ngpus == 1)


def nccl_topology(*, nodes: int, gpus_per_node: int, intra_bw: float, inter_bw: float,
                  nics_per_node: int = 1, intra: str = "nvlink", compute_capability: int = 80,
                  cpu: str = "intel", pci_bw: float | None = None, channels: int | None = None,
                  version: str = "2.18") -> NcclTopology:
    """NCCL's rings, trees and channels for ``nodes x gpus_per_node`` GPUs.

    Parameters
    ----------
    nodes, gpus_per_node : int
    intra_bw : float
        Bytes/s of one GPU's intra-node links, each direction, as NCCL rates them (NVLink: 20e9
        per link on sm70-sm90; PCIe: 12e9 Gen3 x16, 24e9 Gen4 x16).
    inter_bw : float
        Bytes/s of one NIC, each direction (200 Gbit/s: 25e9).
    nics_per_node : int
    intra : {"nvlink", "pcie"}
    compute_capability : int
        70 (V100), 80 (A100), 90 (H100)...
    cpu : {"intel", "amd"}
        The host CPU vendor (NCCL's LL bandwidth cap on several nodes depends on it).
    pci_bw : float, optional
        Bytes/s of the GPU-to-NIC PCIe path (default: Gen4 x16 = 24e9 for sm80 and later,
        Gen3 x16 = 12e9 before).
    channels : int, optional
        ``NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = channels``; None: NCCL's defaults
        (no minimum, at most 32).
    version : str
        NCCL version of the constants (:data:`VERSIONS`).

    Raises
    ------
    ClusterError
        A bad count, bandwidth, interconnect, CPU vendor or version.
    """
    _version(version)
    nodes = _pos_int(nodes, "nodes")
    g = _pos_int(gpus_per_node, "gpus_per_node")
    nics = _pos_int(nics_per_node, "nics_per_node")
    if intra not in ("nvlink", "pcie"):
        raise ClusterError(f"intra={intra!r}: use 'nvlink' or 'pcie'")
    if cpu not in ("intel", "amd"):
        raise ClusterError(f"cpu={cpu!r}: use 'intel' or 'amd' (NCCL's LL cap on several "
                           "nodes depends on the CPU vendor)")
    cc = _pos_int(compute_capability, "compute_capability")
    if channels is not None:
        channels = min(_pos_int(channels, "channels"), _MAXCHANNELS)
    bi = _rate(intra_bw, "intra_bw") / 1e9
    pci = (24.0 if cc >= 80 else 12.0) if pci_bw is None else _rate(pci_bw, "pci_bw") / 1e9
    nic = min(_rate(inter_bw, "inter_bw") / 1e9, pci)
    if intra == "pcie":
        bi = min(bi, pci)
    net = nodes > 1
    ring = _search(True, g, net, bi, nic, nics, cc, 1, _MAXCHANNELS // 2)
    tree = _search(False, g, net, bi, nic, nics, cc, ring.channels, ring.channels)
    n = min(ring.channels, tree.channels)
    comm = min(_MAXCHANNELS, 2 * n)  # ncclTopoPostset duplicates the channels
    if channels is not None:
        comm = channels
    ll128 = intra == "nvlink" and cc in (70, 80, 90)
    return NcclTopology(nodes, g, intra, cc, cpu, ring, tree, comm, ll128)


def nccl_default_channels(**topology) -> int:
    """The communicator's channels NCCL sets up (``comm->nChannels``) for the arguments of
    :func:`nccl_topology`: twice the search's (two rings per NIC ring on DGX-like nodes), at most
    32."""
    return nccl_topology(**topology).channels


# ---------------------------------------------------------------------------- tuning model
def _tune(t: NcclTopology, algorithm: str, protocol: str) -> tuple[float, float]:
    """(bandwidth GB/s, latency us) of an all-reduce (``ncclTopoTuneModel``); bandwidth 0 when
    the pair is disabled."""
    nodes, n = t.nodes, t.ranks
    p = PROTOCOLS.index(protocol)
    ci = _cc_index(t.compute_capability)
    i2 = min(nodes, 3) - 1
    i1 = ci if nodes == 1 else (1 if t.cpu == "amd" else 0)
    ll_max = _LL_MAX_BW[i1][i2]
    gr = t.ring if algorithm == "ring" else t.tree
    bw = gr.bw_intra if nodes <= 2 else gr.bw_inter
    bus = gr.channels * bw
    ppn = n / nodes
    if algorithm == "ring":
        if protocol == "LL":
            bus = min(ll_max, bus / 4.0)
        elif protocol == "LL128":
            bus = min(bus * (0.7 if ppn < 2 else 0.92), gr.channels * _RING_LL128_MAX[ci][i2])
    else:
        bus = min(bus * .92, gr.channels * _TREE_MAX[ci][i2])
        if protocol == "LL":
            bus = min(bus / 3.8, ll_max)
        elif protocol == "LL128":
            bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0),
                      gr.channels * _TREE_LL128_MAX[ci][i2])
        if gr.tree_pattern:
            bus *= .85
    steps = 2 * (n - 1)
    ratio = n / steps if algorithm == "ring" else 0.5
    if protocol == "LL128" and not t.ll128:
        bus = 0.0
    lat = _BASE_LAT[algorithm][p]
    intra_hw = "nvlink" if t.intra == "nvlink" and t.gpus_per_node > 1 else "pcie"
    intra_lat = _HW_LAT[intra_hw][algorithm][p]
    inter_lat = _HW_LAT["net"][algorithm][p]  # graph latencyInter is 0 for IB / sockets
    if algorithm == "ring":
        inter_steps = 2 * nodes if nodes > 1 else 0
        if nodes > 1:  # getNetOverhead: 1 us on Intel, 2 us on AMD, x3 for Simple
            over = (2.0 if t.cpu == "amd" else 1.0) * (3 if protocol == "Simple" else 1)
            intra_lat = max(intra_lat, over)
        lat += (steps - inter_steps) * intra_lat + inter_steps * inter_lat
    else:
        lat += 2 * ((n // nodes - 1) * intra_lat + _log2i(nodes) * inter_lat)
    return bus * ratio, lat


def _time_us(t: NcclTopology, nbytes: float, algorithm: str, protocol: str) -> float | None:
    """``ncclTopoGetAlgoTime`` of one all-reduce, microseconds (None: disabled)."""
    bw, lat = _tune(t, algorithm, protocol)
    if bw == 0:
        return None
    if algorithm == "tree":
        k = _log2i(int(nbytes) >> 6)
        if k < 23:
            bw *= _TREE_CORRECTION[PROTOCOLS.index(protocol)][k]
    if (algorithm == "ring" and protocol == "Simple" and t.nodes > 1
            and nbytes / (t.channels * t.ranks) >= 64):
        lat *= 1.4 if t.compute_capability >= 80 else 1.9  # the ring's plateau effect
    return lat + nbytes / (1000.0 * bw)


def _message_channels(t: NcclTopology, nbytes: float, algorithm: str, protocol: str) -> int:
    """``getAlgoInfo``'s channel tuning: drop channels while each thread would get less than
    its threshold of work."""
    nc = t.channels
    if protocol == "Simple" and algorithm == "ring":
        nt = 256 if t.ring.bw_intra * t.ring.channels <= _PCI_BW else _MAX_THREADS["Simple"]
    else:
        nt = _MAX_THREADS[protocol]
    thr = _THREAD_THRESHOLD[protocol] * (t.ranks if algorithm == "ring" and protocol == "LL"
                                         else 1)
    while nbytes < nc * nt * thr:
        if nc >= 2:
            nc -= 1
        elif nt % 128 == 0:
            nt //= 2
        else:
            break
    return nc


def nccl_allreduce_choice(nbytes: float, *, nodes: int, gpus_per_node: int, intra_bw: float,
                          inter_bw: float, nics_per_node: int = 1, channels: int | None = None,
                          version: str = "2.18", intra: str = "nvlink",
                          compute_capability: int = 80, cpu: str = "intel",
                          pci_bw: float | None = None,
                          topology: NcclTopology | None = None) -> NcclChoice:
    """The algorithm, protocol and channels NCCL picks for an all-reduce of ``nbytes``.

    Every enabled (algorithm, protocol) is timed as ``latency + nbytes / bandwidth`` with
    NCCL's tuning model and the fastest is taken (ties: the first in NCCL's order, tree before
    ring, LL before LL128 before Simple), as ``getAlgoInfo`` does for one collective.

    Parameters
    ----------
    nbytes : float
        Bytes of the all-reduced buffer.
    nodes, gpus_per_node, intra_bw, inter_bw, nics_per_node, channels, version, intra,
    compute_capability, cpu, pci_bw
        See :func:`nccl_topology`.
    topology : NcclTopology, optional
        A communicator already searched (the other topology arguments are then ignored).

    Returns
    -------
    NcclChoice

    Raises
    ------
    ClusterError
        Bad sizes or topology arguments.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not (
            math.isfinite(nbytes) and nbytes >= 0):
        raise ClusterError(f"nbytes={nbytes!r}: must be a finite number of bytes >= 0")
    t = topology or nccl_topology(nodes=nodes, gpus_per_node=gpus_per_node, intra_bw=intra_bw,
                                  inter_bw=inter_bw, nics_per_node=nics_per_node, intra=intra,
                                  compute_capability=compute_capability, cpu=cpu,
                                  pci_bw=pci_bw, channels=channels, version=version)
    n = t.ranks
    if n == 1:
        return NcclChoice("ring", "Simple", 1, 0.0, 0.0, {})
    times: dict[tuple[str, str], float] = {}
    for a in ALGORITHMS:
        for p in PROTOCOLS:
            us = _time_us(t, float(nbytes), a, p)
            if us is not None:
                times[a, p] = us * 1e-6
    (a, p), best = min(times.items(), key=lambda kv: kv[1])  # first minimum, NCCL's order
    busbw = nbytes / best * 2 * (n - 1) / n if best > 0 else 0.0
    return NcclChoice(a, p, _message_channels(t, float(nbytes), a, p), best, busbw, times)


def nccl_inputs(cluster) -> dict:
    """The :func:`nccl_topology` arguments of a :class:`~sgdnet.workload.Cluster`: its
    topology's nodes, GPUs, NVLink/PCIe and NIC rates (without a topology: one GPU per node,
    the slower NIC direction of worker 0, PCIe)."""
    t = cluster.topology
    if t is None:
        bw = min(cluster.up_bw(0), cluster.down_bw(0))
        return dict(nodes=cluster.workers, gpus_per_node=1, intra_bw=max(bw, 12e9),
                    inter_bw=bw, nics_per_node=1, intra="pcie")
    nodes = t.nodes(cluster.workers)
    nic = min(t.nic_rate(k) for k in range(nodes))
    return dict(nodes=nodes, gpus_per_node=t.gpus_per_node, intra_bw=float(t.intra_bandwidth),
                inter_bw=nic, nics_per_node=t.nics_per_node, intra=t.intra)


def nccl_choice_for_cluster(cluster, nbytes: float, *, channels: int | None = None,
                            **kw) -> NcclChoice:
    """:func:`nccl_allreduce_choice` of ``nbytes`` on ``cluster`` (:func:`nccl_inputs`);
    ``kw``: ``compute_capability``, ``cpu``, ``pci_bw``, ``version``."""
    return nccl_allreduce_choice(nbytes, channels=channels, **{**nccl_inputs(cluster), **kw})


def nccl_plan(cluster, nbytes: float, algorithm: str, channels, coarse: bool = False
              ) -> tuple[str, float, int, float]:
    """How sgdnet builds one all-reduce of ``nbytes`` with ``algorithm="nccl"`` and/or
    ``channels="auto"``: ``(algorithm, wire_bytes, channels, latency_s)``.

    ``algorithm="nccl"``: NCCL's choice (:func:`nccl_choice_for_cluster`) as sgdnet's
    ``"ring"`` or ``"dbtree"``, the bytes divided by the protocol's
    :data:`PROTOCOL_EFFICIENCY` (LL moves twice the data) and NCCL's base latency of the pair
    (``baseLat``, the launch and synchronisation cost of one collective; the per-hop latencies
    are the fabric's). Any other algorithm is kept with its bytes and no extra latency.
    ``channels="auto"``: the channels NCCL runs the message on, limited to the NICs of a node
    on multi-node topologies of several GPUs per node (more rings over the same NICs and
    NVLinks change no rate in sgdnet's flow model, only the net's size), else 1; an int is
    kept.
    """
    n = cluster.workers
    auto = channels == "auto"
    if n == 1 or nbytes <= 0:
        return ("ring" if algorithm == "nccl" else algorithm, nbytes, 1 if auto else channels,
                0.0)
    choice = nccl_choice_for_cluster(cluster, float(nbytes))
    lat = 0.0
    if algorithm == "nccl":
        algorithm = choice.sgdnet_algorithm
        nbytes = nbytes / choice.efficiency
        lat = _BASE_LAT[choice.algorithm][PROTOCOLS.index(choice.protocol)] * 1e-6
    if auto:
        t = cluster.topology
        multi = t is not None and t.gpus_per_node > 1 and cluster.workers > t.gpus_per_node
        channels = (min(choice.channels, t.nics_per_node)
                    if multi and algorithm in ("ring", "dbtree") else 1)
    return algorithm, nbytes, channels, lat
