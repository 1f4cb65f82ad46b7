"""Does a queue in the opposite direction slow a message? The reverse-queue probe, tbf links.

Root, iproute2. :func:`sgdnet.testbed.tcp_reverse.probe_reverse` at each ``--rates``: host 0
sends 5 kB / 131 kB / 525 kB messages (tb-mlp's layers) to 1, 2 and 4 hosts at once, with no
stream into host 0, with as many streams from other hosts, and with the receivers themselves
streaming into host 0 (a PS's pulls while its workers push); ``--repeats`` of each. Prints, per
cell, the median time to each message's arrival at its receivers (``in``) and to its sender
getting the one-byte answer (``answered``, which crosses host 0's downlink queue), and writes
every record to ``--out``. Then the other direction
(:func:`~sgdnet.testbed.tcp_reverse.probe_reverse_in`): host 1 sends the messages into host 0
while host 0 streams out to 0-3 other hosts and to as many as the most ``--receivers`` (an
early worker's push while the PS sends the others' pulls: the push's ACKs wait in the PS's own
uplink queue).
``--shaper htb`` / ``htb-acks-first`` shape every link as ``scripts/probe_ack_priority.py``
does (HTB, one queue / ACKs in a class of their own).

    python scripts/probe_reverse_queue.py --rates 75,150,250 --out docs/data/testbed37_reverse_queue.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="75,150,250", help="Mbit/s, comma-separated")
    ap.add_argument("--receivers", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--shaper", choices=("tbf", "htb", "htb-acks-first"), default="tbf")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.tcp_reverse import probe_reverse, probe_reverse_in

    recv = [int(x) for x in a.receivers.split(",")]
    ins = sorted({0, 1, 2, 3, max(recv)})  # streams out of host 0 for the messages into it
    out = []

    def record(what: str, r: dict, **fields) -> None:
        """Print one cell's medians and keep its record (without the streams')."""
        cells = "  ".join(f"{int(s) / 1e3:.0f} kB in {r['median_in_s'][s] * 1e3:.1f}"
                          f" answered {r['median_s'][s] * 1e3:.1f} ms" for s in r["median_s"])
        print(f"{a.shaper} {fields['rate_Mbit']:.0f} Mbit/s, {what} (repeat "
              f"{fields['repeat']}): {cells}", flush=True)
        out.append({"shaper": a.shaper, **fields,
                    **{k: v for k, v in r.items() if k != "reverse_records"}})

    if a.shaper != "tbf":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from probe_ack_priority import shape_htb
    for mbit in (float(x) for x in a.rates.split(",")):
        rate = mbit * 1e6 / 8
        with EmulatedCluster(1 + max(2 * max(recv), 1 + max(ins)), rate=rate) as cl:
            if a.shaper != "tbf":
                shape_htb(cl, rate, a.shaper == "htb-acks-first")
            for rep in range(a.repeats):
                for n in recv:
                    for rev, own in ((0, False), (n, False), (n, True)):
                        r = probe_reverse(cl, n, rev, rounds=a.rounds, from_receivers=own)
                        what = "none" if rev == 0 else ("receivers" if own else "others")
                        record(f"{n} receivers, streams into host 0 from {what:9s}", r,
                               rate_Mbit=mbit, repeat=rep, streams_from=what)
                for rev in ins:
                    r = probe_reverse_in(cl, rev, rounds=a.rounds)
                    record(f"host 1 into host 0 while host 0 streams to {rev} hosts", r,
                           rate_Mbit=mbit, repeat=rep, streams_from="host 0 out",
                           direction="in")
    if a.out:
        a.out.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
