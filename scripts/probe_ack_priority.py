"""Do the PS-traffic probe's losses come from ACKs queueing behind data? Give them priority.

Root, iproute2. Runs :func:`sgdnet.testbed.tcp_probe.probe_ps` (sync and async, ``--workers``,
``--rate``) with every link shaped by HTB at the rate, one queue, then with a class of higher
priority for the packets of under 64 IP bytes (a TCP ACK without payload is 52 with
timestamps): ACKs then pass the data queued in the same link instead of waiting behind it. If a message's rate is held back by ACKs that wait in the
opposite direction's queue (a pull while the PS's downlink is full of pushes, and the other
way round), the probe runs faster with the priority. The tbf's rate and burst are unchanged.

    python scripts/probe_ack_priority.py --rate 250Mbit/s --workers 4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def shape_htb(cl, rate: float, acks_first: bool) -> None:
    """Every link shaped by HTB at ``rate`` (burst 64,000 B): one class for data and, with
    ``acks_first``, a class of higher priority for the packets under 64 IP bytes (ACKs), both
    borrowing up to the link's rate. (This kernel has no ``prio`` qdisc, so tbf cannot take a
    priority child; HTB shapes both variants, so the comparison is like with like.)"""
    import subprocess

    r = f"{rate * 8:.0f}bit"
    for i in range(cl.hosts):
        for ns, dev in ((cl.ns(i), "eth0"), (cl.switch, f"p{i}")):
            def tc(*args: str, ns: str = ns) -> None:
                subprocess.run(["tc", "-n", ns, *args], check=True, capture_output=True)

            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"],
                           capture_output=True)
            tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
            tc("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", r,
               "ceil", r, "burst", "64000b", "cburst", "64000b")
            tc("class", "add", "dev", dev, "parent", "1:1", "classid", "1:10", "htb", "rate",
               "1mbit", "ceil", r, "prio", "0")
            tc("class", "add", "dev", dev, "parent", "1:1", "classid", "1:20", "htb", "rate",
               f"{rate * 8 - 1e6:.0f}bit", "ceil", r, "prio", "1")
            if acks_first:
                tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
                   "u32", "match", "u16", "0x0000", "0xffc0", "at", "2", "flowid", "1:10")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args(argv)

    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.tcp_probe import probe_ps

    rate = units.bandwidth(a.rate, what="rate")
    with EmulatedCluster(a.workers + 1, rate=rate) as cl:
        for _ in range(a.repeats):
            for acks_first in (False, True):
                shape_htb(cl, rate, acks_first)
                for sync in (True, False):
                    r = probe_ps(cl, a.workers, sync)
                    print(f"htb, {'ACKs first' if acks_first else 'one queue '} "
                          f"{'sync ' if sync else 'async'} n={a.workers} at "
                          f"{rate * 8e-6:.0f} Mbit/s: {r['steps_per_s']:.2f} steps/s "
                          f"({r['of_bound']:.3f} of the bound)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
