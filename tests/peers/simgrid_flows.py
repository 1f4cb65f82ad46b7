"""Completion times of flow sets under SimGrid's pure max-min network model (CM02).

Run as a script with a Python that can import ``simgrid`` (Debian's ``python3-simgrid``): reads a
JSON list of flow sets on stdin and prints, as JSON, each set's flow completion times. A flow set
is ``{"links": {name: bandwidth}, "flows": [{"path": [link, ...], "bytes": int, "start": s,
"cap": rate or null}]}``. Every set gets its own hosts and links inside one platform, so the sets
share nothing and one simulation answers them all. Links have no latency, the TCP window bound
and cross-traffic are off, and the solver precisions are 1e-13, so what SimGrid computes is the
textbook max-min fair sharing.

This file is an independent peer for ``tests/test_flows_simgrid.py``: nothing of sgdnet is
imported here.
"""

from __future__ import annotations

import json
import sys

DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def run(sets: list[dict]) -> list[list[float]]:
    if DIST_PACKAGES not in sys.path:
        sys.path.append(DIST_PACKAGES)
    from simgrid import Actor, Comm, Engine, LinkInRoute, NetZone, this_actor

    e = Engine(["peer", "--cfg=network/model:CM02", "--cfg=maxmin/precision:1e-13",
                "--cfg=surf/precision:1e-13", "--cfg=network/crosstraffic:0",
                "--cfg=network/TCP-gamma:0", "--log=root.thresh:critical"])
    zone = NetZone.create_full_zone("zone")
    out: list[list[float]] = []
    jobs = []
    for k, fs in enumerate(sets):
        links = {n: zone.create_link(f"s{k}.{n}", float(bw)).seal() for n, bw in fs["links"].items()}
        out.append([float("nan")] * len(fs["flows"]))
        for j, f in enumerate(fs["flows"]):
            # one host pair per flow, routed over exactly the flow's path
            a = zone.create_host(f"s{k}.f{j}.src", 1e9)
            b = zone.create_host(f"s{k}.f{j}.dst", 1e9)
            route = [LinkInRoute(links[n]) for n in f["path"]]
            if f.get("cap") is not None:  # a rate cap is a private link of that bandwidth
                route.append(LinkInRoute(zone.create_link(f"s{k}.f{j}.cap", float(f["cap"])).seal()))
            zone.add_route(a.netpoint, b.netpoint, None, None, route, False)
            jobs.append((k, j, a, b, int(f["bytes"]), float(f["start"])))
    zone.seal()

    def flow(k, j, a, b, size, start):
        this_actor.sleep_for(start)
        Comm.sendto(a, b, size)
        out[k][j] = Engine.clock

    for k, j, a, b, size, start in jobs:
        Actor.create(f"s{k}.f{j}", a, flow, k, j, a, b, size, start)
    e.run()
    return out


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
