"""nccl-tests all-reduce bus bandwidth on documented multi-node systems, predicted from link rates.

Two checks, nothing fitted to the measurements (docs/validation.md has the tables):

- **Ring at scale** (``RING_SYSTEMS``): published ring all-reduce bus bandwidths of multi-node
  systems with InfiniBand or RoCE NICs; sgdnet's fine ring with ``channels = nics_per_node``
  (NCCL's channels, ring ``k`` crossing nodes through NIC ``k``).
- **Two nodes, A3 Mega** (``A3_MEGA``): Google Cloud A3 Mega (``a3-megagpu-8g``), 2 nodes x 8
  H100 80GB; NVLink 4 through NVSwitch (450 GB/s each direction) and 8 GPU NICs of 200 Gb/s per
  node (GPUDirect-TCPXO); ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` on 16 ranks, out-of-place
  busbw (github.com/lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result). On 2 nodes NCCL
  runs its tree (``dbtree`` on a topology: the double tree over the nodes, a chain of GPUs in
  each, streamed); the rows also give the ring and the hierarchical all-reduce.

Each prediction times one all-reduce of ``S`` bytes in sgdnet's fine collective net on the
topology (deterministic, flows) and reports NCCL's bus bandwidth ``S/t * 2(n-1)/n``.

    PYTHONPATH=. python scripts/validate_nccl.py            # ~30 s
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from sgdnet import Cluster, Net, Topology, simulate
from sgdnet.variants.collectives import allreduce
from sgdnet.variants.fabric import Fabric
from sgdnet.workload import load_cluster_file

GIB = 2**30
CLUSTERS = Path(__file__).resolve().parents[1] / "examples" / "clusters"


@dataclass(frozen=True)
class RingSystem:
    """A published ring all-reduce bus bandwidth and the link rates of its system."""

    name: str
    source: str
    topology: Topology
    nodes: tuple[int, ...]  # node counts to predict at (the measurement's, or a range if unstated)
    size: int               # bytes
    measured: float         # busbw, GB/s


RING_SYSTEMS = (
    # NVIDIA's NCCL team on a DGX A100 (8 A100 SXM4, NVLink 3 through NVSwitch: 600 GB/s
    # bidirectional per GPU; 8 ConnectX-6 HDR 200 Gb/s InfiniBand NICs for compute): "we measure
    # 192GB/s AllReduce BusBW", answering a ring question (NVIDIA/nccl#812, 2023-03-31). Node
    # count and size unstated: predicted at 8 GiB (nccl-tests' usual -e 8G) on 2, 4 and 16 nodes.
    # The topology is the shipped example cluster file's (nominal rates from the datasheet).
    RingSystem("DGX A100, 8 x HDR 200 Gb/s IB", "NVIDIA/nccl#812",
               load_cluster_file(CLUSTERS / "dgx-a100-8x200g.yaml").topology,
               (2, 4, 16), 8 * GIB, 192.0),
    # A user's 5 nodes of 8 H100 with 4 x 400 Gb/s RoCE NICs, NCCL_ALGO=Ring, all_reduce_perf
    # -b 1M -e 1G on 40 ranks: "ring bandwidth (190GB/s)" (NVIDIA/nccl#1368, 2024-07-18).
    RingSystem("5 x 8 H100, 4 x 400 Gb/s RoCE", "NVIDIA/nccl#1368",
               Topology(gpus_per_node=8, intra="nvlink", intra_bandwidth="450GB/s",
                        intra_latency="3us", nics_per_node=4, nic_bandwidth="400Gbps"),
               (5,), 1 * GIB, 190.0),
)

#: A3 Mega: size (bytes) -> measured out-of-place busbw (GB/s), from the file cited above
MEASURED = {268435456: 213.19, 1073741824: 297.86, 8589934592: 338.82}

A3_MEGA = Topology(gpus_per_node=8, intra="nvlink", intra_bandwidth="450GB/s",
                   intra_latency="3us", nics_per_node=8, nic_bandwidth="200Gbps")


def allreduce_seconds(cl: Cluster, algorithm: str, nbytes: float, chunks: int = 1,
                      channels: int = 1) -> float:
    """Time of one all-reduce of ``nbytes`` on ``cl`` started at 0 (fine net, one run)."""
    net = Net("nccl")
    fab = Fabric(net, cl)
    n = cl.workers
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    _, end = allreduce(net, fab, cl, "ar", nbytes, inputs=ins, outputs=outs, coarse=False,
                       stream=None, algorithm=algorithm, chunks=chunks, channels=channels)
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return next(e["end"] for e in res.trace_events(0) if e["name"] == end)


def busbw(cl: Cluster, algorithm: str, nbytes: float, chunks: int = 1,
          channels: int = 1) -> float:
    """NCCL's bus bandwidth (GB/s) of the predicted all-reduce: ``S/t * 2(n-1)/n``."""
    n = cl.workers
    return nbytes / allreduce_seconds(cl, algorithm, nbytes, chunks, channels) \
        * 2 * (n - 1) / n / 1e9


def ring_busbw(system: RingSystem, nodes: int, latency: str = "10us") -> float:
    """Predicted ring bus bandwidth of ``system`` on ``nodes`` nodes, one channel per NIC."""
    t = system.topology
    cl = Cluster(workers=nodes * t.gpus_per_node, latency=latency, topology=t)
    return busbw(cl, "ring", system.size, channels=t.nics_per_node)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", default="10us", help="inter-node one-way latency")
    args = ap.parse_args()
    print(f"Ring at scale, inter-node latency {args.latency}")
    print("| system | source | nodes | size | measured busbw | predicted busbw | error |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for s in RING_SYSTEMS:
        for nodes in s.nodes:
            bw = ring_busbw(s, nodes, args.latency)
            print(f"| {s.name} | {s.source} | {nodes} | {s.size / GIB:g} GiB | "
                  f"{s.measured:.1f} GB/s | {bw:.1f} GB/s | {100 * (bw / s.measured - 1):+.1f} % |")
    cl = Cluster(workers=16, latency=args.latency, topology=A3_MEGA)
    print(f"\nA3 Mega, 2 x 8 H100, inter-node latency {args.latency}")
    print("| size | measured busbw | algorithm | channels | chunks | predicted busbw | error |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for size, meas in MEASURED.items():
        for alg, channels, chunks in (("ring", 1, 1), ("ring", 8, 1), ("dbtree", 8, 1),
                                      ("hierarchical", 1, 1), ("hierarchical", 1, 4),
                                      ("hierarchical", 1, 16), ("hierarchical", 1, 64)):
            t0 = time.perf_counter()
            bw = busbw(cl, alg, size, chunks, channels)
            print(f"| {size / 2**20:,.0f} MiB | {meas:.1f} GB/s | {alg} | {channels} | {chunks} | "
                  f"{bw:.1f} GB/s | {100 * (bw / meas - 1):+.1f} % |"
                  f"  <!-- {time.perf_counter() - t0:.1f} s -->")


if __name__ == "__main__":
    main()
