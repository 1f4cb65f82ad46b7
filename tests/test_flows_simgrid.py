"""Flows against an independent peer: SimGrid's pure max-min network model (CM02).

A few hundred random flow sets on star topologies (host uplink -> host downlink) and two-level
ones (host uplink -> rack uplink -> rack downlink -> host downlink, racks oversubscribed), with
staggered starts and some per-flow rate caps, are played by SimGrid (``tests/peers/
simgrid_flows.py``, run in a subprocess under a Python that has Debian's ``python3-simgrid``) and
by sgdnet's kernel; every completion time must agree to 1e-9 relative. CI installs SimGrid
(``.ci/run``), so there the test never skips.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sgdnet import Net, simulate

PEER = Path(__file__).parent / "peers" / "simgrid_flows.py"


def _simgrid_python() -> str | None:
    probe = "import sys; sys.path.append('/usr/lib/python3/dist-packages'); import simgrid"
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
            return py
    return None


SG_PY = _simgrid_python()
if SG_PY is None:
    if os.environ.get("CI"):
        pytest.fail("SimGrid (Debian's python3-simgrid) is missing on CI; .ci/run installs it",
                    pytrace=False)
    pytestmark = pytest.mark.skip(reason="SimGrid is not installed (apt-get install python3-simgrid)")


def _bw(rng) -> float:
    return float(10 ** rng.uniform(6, 9))


def random_sets(rng, n: int, topology: str) -> list[dict]:
    sets = []
    for _ in range(n):
        links: dict[str, float] = {}
        if topology == "star":
            hosts = [(0, h) for h in range(int(rng.integers(3, 9)))]
        else:
            racks = int(rng.integers(2, 4))
            hosts = [(r, h) for r in range(racks) for h in range(int(rng.integers(2, 5)))]
            for r in range(racks):
                links[f"rup{r}"] = _bw(rng) / 4
                links[f"rdn{r}"] = _bw(rng) / 4
        for r, h in hosts:
            links[f"up{r}.{h}"] = _bw(rng)
            links[f"dn{r}.{h}"] = _bw(rng)
        flows = []
        for _ in range(int(rng.integers(2, 13))):
            i, j = rng.choice(len(hosts), size=2, replace=False)
            (ra, a), (rb, b) = hosts[i], hosts[j]
            path = [f"up{ra}.{a}", f"dn{rb}.{b}"]
            if ra != rb:
                path[1:1] = [f"rup{ra}", f"rdn{rb}"]
            flows.append({
                "path": path,
                "bytes": int(rng.integers(10_000, 10_000_000)),
                "start": 0.0 if rng.random() < 0.5 else float(rng.uniform(0, 0.05)),
                "cap": float(10 ** rng.uniform(5.5, 8)) if rng.random() < 0.2 else None,
            })
        sets.append({"links": links, "flows": flows})
    return sets


def sgdnet_times(sets: list[dict]) -> list[list[float]]:
    """All sets in one net (they share nothing, so each is its own max-min component)."""
    net = Net("flowsets")
    for k, fs in enumerate(sets):
        for name, bw in fs["links"].items():
            net.link(f"s{k}.{name}", bw)
        for j, f in enumerate(fs["flows"]):
            go = net.place(f"s{k}.f{j}.go", tokens=1)
            ready = net.place(f"s{k}.f{j}.ready")
            net.transition(f"s{k}.f{j}.wait", f["start"], inputs={go: 1}, outputs={ready: 1})
            net.transfer(f"s{k}.f{j}", float(f["bytes"]), [f"s{k}.{n}" for n in f["path"]],
                         inputs={ready: 1}, cap=f["cap"])
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e9, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True, parallel=False)
    end = {e["name"]: e["end"] for e in res.trace_events(0)}
    return [[end[f"s{k}.f{j}"] for j in range(len(fs["flows"]))] for k, fs in enumerate(sets)]


@pytest.mark.parametrize("topology,seed", [("star", 1), ("two-level", 2)])
def test_completion_times_agree_with_simgrid_max_min(topology, seed):
    sets = random_sets(np.random.default_rng(seed), 150, topology)
    proc = subprocess.run([SG_PY, str(PEER)], input=json.dumps(sets), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peer = json.loads(proc.stdout)
    ours = sgdnet_times(sets)
    worst = 0.0
    n = 0
    for k, (a, b) in enumerate(zip(ours, peer)):
        for j, (x, y) in enumerate(zip(a, b)):
            assert math.isfinite(y), (k, j)
            worst = max(worst, abs(x - y) / y)
            n += 1
            assert x == pytest.approx(y, rel=1e-9), (topology, k, j, sets[k])
    assert n > 600


@pytest.mark.parametrize("algorithm, n_flows", [("dbtree", 2 * 2 * 2 * 31), ("ring", 2 * 32)])
def test_nccl_tree_flows_on_a_topology_agree_with_simgrid(algorithm, n_flows):
    """The streamed multi-node tree (``algorithm="dbtree"`` on a topology, issue #15) and the
    pipelined rings of NCCL's channels are sets of flows started together over the topology's
    links (NVLink, NIC up and down, an oversubscribed spine): every one of them ends when
    SimGrid's max-min says, to 1e-9."""
    from sgdnet import Cluster, Topology
    from sgdnet.variants.collectives import allreduce
    from sgdnet.variants.fabric import Fabric

    topo = Topology(gpus_per_node=4, intra_bandwidth="40GB/s", intra_latency=0.0,
                    nics_per_node=2, nic_bandwidth="10GB/s", fabric="leaf-spine", rack_nodes=2,
                    oversubscription=2.0,  # and nodes of unequal NICs, so that flows differ
                    node_nic_bandwidth=["10GB/s", "7GB/s", "10GB/s", "4GB/s", "10GB/s",
                                        "10GB/s", "6GB/s", "9GB/s"])
    cl = Cluster(workers=32, latency=0, topology=topo)  # 8 nodes, 4 racks
    net = Net("tree")
    n = cl.workers
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    allreduce(net, Fabric(net, cl), cl, "ar", 96e6, inputs=ins, outputs=outs, coarse=False,
              stream=None, algorithm=algorithm, channels=2, ring_form="pipelined")
    flows = [t for t in net.transitions.values() if t.tags.get("form") == "pipelined"]
    links = {r for t in flows for r in t.resources if net.resources[r].discipline == "flow"}
    assert all(net.resources[r].latency == 0 and not net.resources[r].efficiency for r in links)
    fset = {"links": {r: net.resources[r].bandwidth for r in sorted(links)},
            "flows": [{"path": [r for r in t.resources if r in links],
                       "bytes": float(t.duration.mean), "start": 0.0, "cap": None}
                      for t in flows]}
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e9, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True, parallel=False)
    end = {e["name"]: e["end"] for e in res.trace_events(0)}
    proc = subprocess.run([SG_PY, str(PEER)], input=json.dumps([fset]), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (peer,) = json.loads(proc.stdout)
    assert len(flows) == n_flows  # channels x trees x (up, down) x edges; channels x members
    for t, y in zip(flows, peer):
        assert end[t.name] == pytest.approx(y, rel=1e-9), t.name
    assert len({round(y, 9) for y in peer}) >= 3  # not one uniform share
