"""Per-connection timelines of the PS host's sends, from the kernel's ``tcp:tcp_probe`` tracepoint.

Root, tracefs (mounted here at ``--tracefs``, default ``/tmp/tracefs``, if it is not already),
iproute2, torch. One warm-up launch, then one ``train`` job (sync PS of ``tb-mlp`` unless told)
with ``tcp_probe`` on (``trace_clock`` ``mono``, the clock of the workers' step stamps): every
ACK the PS host's sockets receive records the socket's ``snd_una``, so the bytes each worker
has acknowledged are known to the microsecond. Prints, in ``--bin`` bins over the measured
steps, how much of the time 0, 1, 2, ... connections were being acknowledged and the out-link
rate then (as a multiple of the tbf rate). Bins of 1 ms show ACKs arriving in bursts above the
link rate (ACK compression: delayed ACKs, GRO, softirq batches), so read rates over >= 5 ms.

    python scripts/testbed_tcp_trace.py --rate 250Mbit/s --workers 4 --bin 0.005
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LINE = re.compile(r"\s(\d+\.\d+): tcp_probe: .*?src=([\d.]+):\d+ dest=([\d.]+):\d+ .*?"
                  r"snd_una=0x([0-9a-f]+) .*?sock_cookie=([0-9a-f]+)")


def acked(lines: list[str], src: str) -> dict[str, list[tuple[float, int]]]:
    """``{peer: [(time, bytes newly acknowledged), ...]}`` of the sockets of host ``src``."""
    last: dict[str, int] = {}
    out: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    for ln in lines:
        m = LINE.search(ln)
        if not m or m.group(2) != src:
            continue
        t, dst, una, ck = float(m.group(1)), m.group(3), int(m.group(4), 16), m.group(5)
        if ck in last:
            d = (una - last[ck]) % (1 << 32)
            if 0 < d < (1 << 30):
                out[dst].append((t, d))
        last[ck] = una
    return out


def tracefs(T: Path) -> Callable[[str, str], None]:
    """Mount tracefs at ``T`` unless the ``tcp:tcp_probe`` event is already there; returns
    ``put(file, value)``, a write to one of its files."""
    if not (T / "events" / "tcp" / "tcp_probe").exists():
        T.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(T)], check=True)

    def put(f: str, v: str) -> None:
        (T / f).write_text(v)

    return put


@contextlib.contextmanager
def tcp_probe_events(T: Path, buffer_kb: int = 262144) -> Iterator[list[str]]:
    """The ``tcp:tcp_probe`` event on (``trace_clock`` ``mono``, an emptied buffer of
    ``buffer_kb`` per CPU) while the block runs, off after it whatever happens; yields a list
    that holds the trace's lines once the block has ended without an error (the buffer is
    emptied again after they are read)."""
    put = tracefs(T)
    put("trace_clock", "mono")
    put("buffer_size_kb", str(buffer_kb))
    put("trace", "")
    put("events/tcp/tcp_probe/enable", "1")
    lines: list[str] = []
    try:
        yield lines
    finally:
        put("events/tcp/tcp_probe/enable", "0")
    lines += (T / "trace").read_text().splitlines()
    put("trace", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--scheme", default="sync-ps")
    ap.add_argument("--model", default="tb-mlp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bin", type=float, default=0.005, help="seconds")
    ap.add_argument("--tracefs", type=Path, default=Path("/tmp/tracefs"))
    a = ap.parse_args(argv)
    import numpy as np

    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch

    rate = units.bandwidth(a.rate, what="rate")
    warm = 5
    job = {"kind": "train", "id": "run", "scheme": a.scheme, "model": a.model, "batch": 32,
           "warmup": warm}
    with EmulatedCluster(a.workers + 1, rate=rate) as cl:
        launch(cl, a.workers + 1, [{**job, "steps": 5, "warmup": 1}])
        with tcp_probe_events(a.tracefs, 131072) as lines:
            got = launch(cl, a.workers + 1, [{**job, "steps": a.steps}])
        ps = cl.addr(0)
    ev = acked(lines, ps)
    ref = got["ranks"][1]["jobs"][0]["stamps"]
    t0, t1 = ref[warm + 1], ref[-2]
    steps = sum(1 for x in ref if t0 < x <= t1)
    edges = np.arange(t0, t1, a.bin)
    peers = sorted(ev)
    acks = np.zeros((len(peers), len(edges) - 1))
    for i, p in enumerate(peers):
        x = np.array(ev[p])
        acks[i] = np.histogram(x[:, 0], bins=edges, weights=x[:, 1])[0]
    util = acks / a.bin / rate
    active = (util > 0.02).sum(0)
    print(f"{a.scheme} {a.model} n={a.workers} at {rate * 8e-6:g} Mbit/s, {steps} steps; "
          f"bytes acknowledged per step per worker: "
          + ", ".join(f"{p} {b:.0f}" for p, b in zip(peers, acks.sum(1) / steps)))
    for k in range(len(peers) + 1):
        sel = active == k
        if sel.any():
            print(f"  {k} connections acknowledged: {sel.mean():.1%} of the time "
                  f"({sel.sum() * a.bin / steps * 1e3:.1f} ms a step), the PS's sends at "
                  f"{util.sum(0)[sel].mean():.2f} x the tbf rate")
    print(f"  overall {util.sum(0).mean():.3f} x the tbf rate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
