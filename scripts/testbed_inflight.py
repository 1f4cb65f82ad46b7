"""Bytes in flight per TCP connection during training, from the kernel's ``tcp:tcp_probe``.

Root, tracefs (mounted at ``--tracefs``, default ``/tmp/tracefs``, if it is not already),
iproute2, torch. For each worker count: one warm-up launch, then one ``train`` job with
``tcp_probe`` on. Every ACK a socket receives records its ``snd_nxt - snd_una`` (the bytes it has
in the network: the link's queue holds all of them but a BDP of ~2 kB here) and ``srtt``. Prints,
for the workers' push connections (worker -> PS) and the PS's pull connections (PS -> worker),
the bytes in flight while a connection is sending (median, p90) and its smoothed RTT.

    python scripts/testbed_inflight.py --rate 250Mbit/s --workers 2,3,4 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LINE = re.compile(r"\s(\d+\.\d+): tcp_probe: .*?src=([\d.]+):\d+ dest=([\d.]+):\d+ .*?"
                  r"snd_nxt=0x([0-9a-f]+) snd_una=0x([0-9a-f]+) .*?srtt=(\d+).*?"
                  r"sock_cookie=([0-9a-f]+)")


def samples(lines: list[str]) -> dict[tuple[str, str], list[tuple[float, int, int, int]]]:
    """``{(src, dst): [(time, bytes in flight, srtt us, bytes newly acked), ...]}``."""
    out: dict[tuple[str, str], list] = collections.defaultdict(list)
    last: dict[str, int] = {}
    for ln in lines:
        m = LINE.search(ln)
        if not m:
            continue
        t, src, dst = float(m.group(1)), m.group(2), m.group(3)
        nxt, una, srtt, ck = int(m.group(4), 16), int(m.group(5), 16), int(m.group(6)), m.group(7)
        d = (una - last[ck]) % (1 << 32) if ck in last else 0
        last[ck] = una
        out[(src, dst)].append((t, (nxt - una) % (1 << 32), srtt, d if d < (1 << 30) else 0))
    return out


def analyse(conns: dict, ps: str, t0: float, t1: float) -> dict:
    push = {k: [x for x in v if t0 <= x[0] <= t1] for k, v in conns.items() if k[1] == ps}
    pull = {k: [x for x in v if t0 <= x[0] <= t1] for k, v in conns.items() if k[0] == ps}
    res: dict = {}
    for label, group in (("push", push), ("pull", pull)):
        fl = [x[1] for v in group.values() for x in v if x[1] > 0]
        rt = [x[2] for v in group.values() for x in v if x[1] > 0]
        if fl:
            fl.sort()
            rt.sort()
            res[label] = {"inflight_median_B": statistics.median(fl),
                          "inflight_p90_B": fl[(9 * len(fl)) // 10],
                          "srtt_median_us": statistics.median(rt), "acks": len(fl)}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", default="2,3,4")
    ap.add_argument("--scheme", default="sync-ps")
    ap.add_argument("--model", default="tb-mlp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tracefs", type=Path, default=Path("/tmp/tracefs"))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    from testbed_tcp_trace import tcp_probe_events

    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch

    rate = units.bandwidth(a.rate, what="rate")
    warm = 5
    out = {"rate_Bps": rate, "scheme": a.scheme, "model": a.model, "by_workers": {}}
    for n in [int(x) for x in a.workers.split(",")]:
        job = {"kind": "train", "id": "run", "scheme": a.scheme, "model": a.model, "batch": 32,
               "warmup": warm}
        with EmulatedCluster(n + 1, rate=rate) as cl:
            launch(cl, n + 1, [{**job, "steps": 5, "warmup": 1}])
            with tcp_probe_events(a.tracefs) as lines:
                got = launch(cl, n + 1, [{**job, "steps": a.steps}])
            ps = cl.addr(0)
        conns = samples(lines)
        ref = got["ranks"][1]["jobs"][0]["stamps"]
        r = analyse(conns, ps, ref[warm + 1], ref[-2])
        print(f"{a.scheme} {a.model} n={n} at {rate * 8e-6:g} Mbit/s: "
              + "; ".join(f"{lab} in flight median {r[lab]['inflight_median_B'] / 1e3:.1f} kB "
                          f"(p90 {r[lab]['inflight_p90_B'] / 1e3:.1f}), srtt "
                          f"{r[lab]['srtt_median_us'] / 1e3:.2f} ms"
                          for lab in ("push", "pull") if lab in r), flush=True)
        out["by_workers"][str(n)] = r
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
