"""The reverse-queue probe: how long a message takes while its ACKs queue behind other data.

A parameter server's pulls leave its host on the uplink while the next layer's pushes fill its
downlink; a pull's ACKs come back through that downlink, behind the pushes' queued bytes (and a
push's ACKs behind the pulls' in the uplink). :func:`probe_reverse` measures that on its own,
without a PS's pattern: host 0 sends messages of each size to hosts ``1..receivers`` at once
(each acked by one byte by :func:`~.tcp_probe.sink`, which logs its arrival), one round after another with a gap,
while hosts ``receivers+1 .. receivers+reverse`` stream 1 MiB messages into host 0 (its
downlink's queue, which the messages' ACKs cross). With ``reverse=0`` the same messages cross
idle ACK paths. The ratio of the two message times is the reverse queue's cost per message,
measured by a micro-benchmark and not by a training run.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import TestbedError
from .tcp_probe import (
    PORT,
    _check_hosts,
    _connect,
    _msg,
    _on_hosts,
    tcp_info,
)

__all__ = ["messenger", "probe_reverse", "probe_reverse_in", "ack_share", "ack_shares"]


def messenger(spec: dict) -> dict[str, Any]:
    """Host 0's side: connect to ``spec["peers"]``, wait until ``start_at`` plus ``settle_s``,
    then ``rounds`` times: for each of ``sizes``, one message of that size to every peer at
    once (a thread each), ``gap_s`` of idle after each (with ``period_s``: message ``j``
    starts ``j * period_s`` after the first, so that several senders keep step); returns every message's seconds (per
    size, per round, per peer) and the connections' smoothed RTT after each round."""
    port = int(spec.get("port", PORT))
    socks = [_connect(p, port) for p in spec["peers"]]
    sizes = [int(s) for s in spec["sizes"]]
    buf = memoryview(bytearray(max(sizes)))
    wait = float(spec["start_at"]) + float(spec.get("settle_s", 0.5)) - time.perf_counter()
    if wait > 0:
        time.sleep(wait)
    times: dict[str, list[list[float]]] = {str(s): [] for s in sizes}
    rtts: list[float] = []
    sent: list[float] = []  # when each round of each size started
    period = float(spec.get("period_s", 0.0))  # > 0: message j starts at t_first + j period
    t_first = time.perf_counter()
    for _ in range(int(spec.get("rounds", 10))):
        for s in sizes:
            got = [0.0] * len(socks)
            if period > 0:
                wait = t_first + len(sent) * period - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            sent.append(time.perf_counter())

            def one(i: int, s: int = s, got: list[float] = got) -> None:
                got[i] = _msg(socks[i], buf[:s])

            ths = [threading.Thread(target=one, args=(i,)) for i in range(len(socks))]
            for t in ths:
                t.start()
            for t in ths:
                t.join(timeout=60)
            times[str(s)].append(got)
            rtts += [tcp_info(c)["rtt_s"] for c in socks]
            if period <= 0:
                time.sleep(float(spec.get("gap_s", 0.02)))
    for c in socks:
        c.close()
    return {"times": times, "rtt_s": rtts, "sent": sent}


def probe_reverse(cluster: Any, receivers: int, reverse: int,
                  sizes: tuple[int, ...] = (5160, 131584, 525312), rounds: int = 10,
                  gap_s: float = 0.02, timeout_s: float = 120.0,
                  from_receivers: bool = False) -> dict[str, Any]:
    """Messages out of host 0 to ``receivers`` hosts at once while ``reverse`` other hosts
    stream into host 0 (module docstring). Returns, per size, the median over rounds of the
    slowest receiver's message time (``median_s``) and every time (``times``), the median RTT
    the senders' kernel reported, and the streams' records (``reverse``)."""
    if receivers < 1 or reverse < 0:
        raise TestbedError(f"receivers={receivers}, reverse={reverse}: use receivers >= 1 "
                           "and reverse >= 0")
    _check_hosts(cluster, receivers if from_receivers else receivers + reverse,
                 "receivers + reverse")
    start = time.perf_counter() + 3.0
    first = 1 if from_receivers else receivers + 1
    rev = [(first + j, "stream", {"peer": cluster.addr(0), "port": PORT,
                                          "start_at": start, "solo_s": 0.0,
                                          "stream_s": 0.5 + rounds * (0.25 + gap_s) * len(sizes)})
           for j in range(reverse)]
    msg = (0, "messages", {"peers": [cluster.addr(i) for i in range(1, receivers + 1)],
                           "port": PORT, "sizes": list(sizes), "rounds": rounds,
                           "gap_s": gap_s, "start_at": start})
    with tempfile.TemporaryDirectory() as tmp:
        logs = [str(Path(tmp) / f"in{i}.txt") for i in range(1, receivers + 1)]
        sinks = [(0, ["sink", str(PORT)])] + [(i, ["log-sink", str(PORT), logs[i - 1]])
                                              for i in range(1, receivers + 1)]
        recs = _on_hosts(cluster, sinks, [msg, *rev], timeout_s, module=__name__)
        arrived = [[float(ln.split()[0]) for ln in Path(f).read_text().splitlines()]
                   for f in logs]
    return _summary(recs[:1], arrived, recs[1:], sizes, receivers=receivers, reverse=reverse)


def probe_reverse_in(cluster: Any, reverse: int,
                     sizes: tuple[int, ...] = (5160, 131584, 525312), rounds: int = 10,
                     gap_s: float = 0.02, timeout_s: float = 120.0,
                     senders: int = 1, period_s: float = 0.0) -> dict[str, Any]:
    """The other direction: hosts ``1..senders`` send messages into host 0 (an early worker's
    push; several: pushes that share the PS's downlink) while host 0 streams to ``reverse``
    other hosts (the pulls of the workers still in the last round), so the messages' ACKs
    leave host 0 behind the streams' data in its own uplink's queue. Returns what
    :func:`probe_reverse` does, the slowest sender's message per round (``arrival_s``, from the
    first sender's start); several senders keep step with ``period_s`` (message ``j`` of each
    starts ``j * period_s`` after their common first; default: ``0.25 * senders`` s)."""
    if reverse < 0 or senders < 1:
        raise TestbedError(f"reverse={reverse}, senders={senders}: use reverse >= 0 and "
                           "senders >= 1")
    _check_hosts(cluster, senders + reverse, "senders + reverse")
    start = time.perf_counter() + 3.0
    period = period_s or (0.25 * senders if senders > 1 else 0.0)
    rev = [(0, "stream", {"peer": cluster.addr(1 + senders + j), "port": PORT,
                          "start_at": start, "solo_s": 0.0,
                          "stream_s": 0.5 + rounds * (max(period, 0.25) + gap_s) * len(sizes)})
           for j in range(reverse)]
    msgs = [(i, "messages", {"peers": [cluster.addr(0)], "port": PORT, "sizes": list(sizes),
                             "rounds": rounds, "gap_s": gap_s, "start_at": start,
                             "period_s": period})
            for i in range(1, senders + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "in0.txt")
        sinks = [(0, ["log-sink", str(PORT), log])] + [(1 + senders + j, ["sink", str(PORT)])
                                                       for j in range(reverse)]
        recs = _on_hosts(cluster, sinks, [*msgs, *rev], timeout_s, module=__name__)
        rows = [ln.split() for ln in Path(log).read_text().splitlines()]
    arrived = [[float(r[0]) for r in rows if r[2] == cluster.addr(i)]
               for i in range(1, senders + 1)]
    return _summary(recs[:senders], arrived, recs[senders:], sizes, receivers=1,
                    senders=senders, reverse=reverse)


def _summary(sent: list[dict], arrived: list[list[float]], streams: list[dict],
             sizes: tuple[int, ...], **cell: int) -> dict[str, Any]:
    """The probes' result from the messengers' records ``sent`` (the first one's answers and
    RTTs), every sender-receiver pair's arrival times ``arrived`` and the streams' records. A
    pair's k-th arrival is the k-th message (sizes in turn, round by round); message k's time
    runs from the first messenger's start of it to its last arrival."""
    arrival: dict[str, list[float]] = {str(s): [] for s in sizes}
    for k in range(min(len(m["sent"]) for m in sent)):
        t0 = min(m["sent"][k] for m in sent)
        arrival[str(sizes[k % len(sizes)])].append(max(a[k] for a in arrived) - t0)
    m = sent[0]
    return {**cell, "sizes": list(sizes),
            "median_s": {s: statistics.median(max(r) for r in rows)
                         for s, rows in m["times"].items()},
            "median_in_s": {s: statistics.median(v) for s, v in arrival.items()},
            "arrival_s": arrival, "times": m["times"], "rtt_s": statistics.median(m["rtt_s"]),
            "reverse_records": [{"stream_end_s": r["stream_end_s"]} for r in streams]}


def ack_share(cells: dict[int, list[float]], nbytes: float, rate_Bps: float,
              payload_ratio: float = 1448 / 1514, slack: float = 0.05) -> tuple[float, ...]:
    """``Cluster.tcp_ack_share`` from :func:`probe_reverse_in` cells: ``cells[n]`` the arrival
    times (seconds) of ``nbytes``-byte messages into the host while it streams to ``n`` others
    (``cells[0]``: to none). A message no more than ``slack`` slower than with no stream is not
    capped (1.0); a slower one moved at ``nbytes / median time`` (a capped flow gains nothing
    from the token bucket's burst), over the link's payload rate. Counts between two measured
    ones take the linear interpolation of their ratios; the table ends at the largest ``n``."""
    if 0 not in cells or len(cells) < 2:
        raise TestbedError(f"ack_share: cells for n = 0 and at least one n >= 1 are needed "
                           f"(got n = {sorted(cells)})")
    alone = statistics.median(cells[0])
    got = {}
    for n, ts in cells.items():
        if n >= 1:
            t = statistics.median(ts)
            got[n] = 1.0 if t <= (1 + slack) * alone else min(
                1.0, nbytes / t / (payload_ratio * rate_Bps))
    ns = sorted(got)
    out = []
    for n in range(1, ns[-1] + 1):
        lo = max([m for m in ns if m <= n], default=None)
        hi = min(m for m in ns if m >= n)
        if lo is None:
            out.append(got[hi])
        elif lo == hi:
            out.append(got[lo])
        else:
            out.append(got[lo] + (got[hi] - got[lo]) * (n - lo) / (hi - lo))
    return tuple(out)


def ack_shares(records: list[dict], nbytes: int = 525312) -> dict[float, tuple[float, ...]]:
    """Per link rate (Mbit/s): :func:`ack_share` of a reverse-queue probe file's records
    (``scripts/probe_reverse_queue.py --out F``), its ``direction="in"`` tbf cells with
    ``nbytes``-byte messages."""
    cells: dict[float, dict[int, list[float]]] = {}
    for r in records:
        if r.get("direction") == "in" and r.get("shaper", "tbf") == "tbf":
            cells.setdefault(r["rate_Mbit"], {}).setdefault(r["reverse"], []).extend(
                r["arrival_s"][str(nbytes)])
    return {m: ack_share(c, nbytes, m * 1e6 / 8) for m, c in cells.items()}


def main(argv: list[str] | None = None) -> int:
    """The probes' processes on the hosts: ``sink PORT``, ``log-sink PORT LOG``, ``stream
    SPEC_JSON`` (:func:`~.tcp_probe.streamer`) or ``messages SPEC_JSON`` (prints the record
    as JSON)."""
    from .tcp_probe import sink, streamer

    a = sys.argv[1:] if argv is None else argv
    if len(a) == 2 and a[0] == "sink":
        sink(int(a[1]))
        return 0
    if len(a) == 3 and a[0] == "log-sink":
        sink(int(a[1]), a[2])
        return 0
    if len(a) == 2 and a[0] in ("stream", "messages"):
        print(json.dumps((streamer if a[0] == "stream" else messenger)(json.loads(a[1]))))
        return 0
    print("usage: python -m sgdnet.testbed.tcp_reverse sink PORT | log-sink PORT LOG | "
          "stream SPEC_JSON | messages SPEC_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
