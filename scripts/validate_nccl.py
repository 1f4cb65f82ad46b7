"""nccl-tests all-reduce bus bandwidth on a documented 2-node system, predicted from link rates.

System: Google Cloud A3 Mega (``a3-megagpu-8g``), 2 nodes x 8 H100 80GB; NVLink 4 through
NVSwitch (900 GB/s bidirectional per GPU = 450 GB/s each direction) and 8 GPU NICs of 200 Gb/s
per node (GPUDirect-TCPXO). Measured: ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` on 16 ranks,
out-of-place busbw (github.com/lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result).

The prediction times one all-reduce of ``S`` bytes in sgdnet's fine collective net on the
topology (deterministic, flows) and reports NCCL's bus bandwidth ``S/t * 2(n-1)/n``; nothing
is fitted to the measurement.

    PYTHONPATH=. python scripts/validate_nccl.py            # ~1-2 minutes
"""

from __future__ import annotations

import argparse
import time

from sgdnet import Cluster, Net, Topology, simulate
from sgdnet.variants.collectives import allreduce
from sgdnet.variants.fabric import Fabric

#: size (bytes) -> measured out-of-place busbw (GB/s), from the file cited above
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", default="10us", help="inter-node one-way latency")
    args = ap.parse_args()
    cl = Cluster(workers=16, latency=args.latency, topology=A3_MEGA)
    n = cl.workers
    print(f"A3 Mega, 2 x 8 H100, inter-node latency {args.latency}")
    print("| size | measured busbw | algorithm | channels | chunks | predicted busbw | error |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for size, meas in MEASURED.items():
        for alg, channels, chunks in (("ring", 1, 1), ("ring", 8, 1), ("hierarchical", 1, 1),
                                      ("hierarchical", 1, 4), ("hierarchical", 1, 16),
                                      ("hierarchical", 1, 64)):
            t0 = time.perf_counter()
            t = allreduce_seconds(cl, alg, size, chunks, channels)
            busbw = size / t * 2 * (n - 1) / n / 1e9
            print(f"| {size / 2**20:,.0f} MiB | {meas:.1f} GB/s | {alg} | {channels} | {chunks} | "
                  f"{busbw:.1f} GB/s | {100 * (busbw / meas - 1):+.1f} % |"
                  f"  <!-- {time.perf_counter() - t0:.1f} s -->")


if __name__ == "__main__":
    main()
