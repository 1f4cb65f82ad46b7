"""TCP on the cluster, measured by micro-benchmarks (issue #37): the parameters of
:mod:`sgdnet.variants.tcp_ramp`, never from training runs.

Plain TCP sockets between two or more hosts (``python -m sgdnet.testbed.tcp_probe sink PORT``
on the receivers, ``... send SPEC`` on the sender), read with ``getsockopt(TCP_INFO)``
(``struct tcp_info`` of ``include/uapi/linux/tcp.h``: ``tcpi_rto`` at byte 8, ``snd_mss`` 16,
``rtt`` 68, ``snd_cwnd`` 80, ``pacing_rate`` 104, ``bytes_acked`` 120, ``min_rtt`` 148;
what ``ss -ti`` prints):

- **idle path**: round-trip time of 1-byte ping-pongs (min and median), MSS, the congestion
  window of a fresh connection (the initial window, 10 segments by RFC 6928), the RTO, the
  congestion control and ``net.ipv4.tcp_slow_start_after_idle`` of the sender's namespace;
- **after idle**: the time of one message sent after an idle gap longer than the RTO against
  the same message sent right after another (the slow-start restart, if any, is the
  difference), and the window the connection restarted from;
- **incast** (:func:`probe_incast`, its own run): ``k`` hosts stream 1 MiB messages into one
  host at once (a PS's pushes); their RTT while sharing less the idle RTT is the standing
  queue of the receiving host's link (``standing_queue_s``), their bytes in flight each
  connection's share of it. The queue sits in that link's buffer, which no sender's qdisc
  (TCP small queues) bounds: connections into one host keep about twice the bytes in flight
  that connections out of one host do;
- **sharing** (``share_repeats`` times): ``k`` connections out of one host send 1 MiB
  messages (each acked, as a PS's pulls) at once for ``stream_s`` seconds, all idle ``gap_s``
  (below the RTO), then the first sends one message alone; its time against the same
  message sent after being alone is ``rho``. BBR paces a flow at its bandwidth estimate, the
  maximum delivery rate of its last round trips (Cardwell et al., ACM Queue 14(5), 2016),
  which after sharing is about ``B / k``; a window-based control takes the free link at
  once. ``tcp_pacing = k rho`` (>= 1; 0, no cap, when ``rho >= 0.97``) is the factor of
  :func:`sgdnet.variants.tcp_ramp.pacing_cap` that makes a lone flow after sharing run at
  ``rho B``. The connections' pacing rates while they share are kept too
  (``pace_over_fair``).

:func:`probe_cluster` runs them on an :class:`~sgdnet.testbed.netns.EmulatedCluster`;
:func:`summarize` turns the raw record into the figures and the Cluster fields
(``{"tcp_pacing": ...}``); the after-idle excess is reported, not turned into
``Cluster.tcp_rtt`` (on the emulated testbed it is 0: the initial window covers the pipe).
:func:`with_probe` writes the result into a cluster file (``sgdnet calibrate`` calls both).
"""

from __future__ import annotations

import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import TestbedError
from .tcp_info import tcp_info, tcp_state

__all__ = ["tcp_info", "probe_cluster", "probe_duplex", "probe_incast", "probe_ps", "summarize",
           "summarize_incast",
           "with_probe", "sender", "sink", "streamer"]

PORT = 29650
_HDR = struct.Struct("!Q")


def _recv_exact(c: socket.socket, n: int) -> None:
    view = memoryview(bytearray(min(n, 1 << 20)))
    while n > 0:
        got = c.recv_into(view, min(n, len(view)))
        if got == 0:
            raise ConnectionError("peer closed")
        n -= got


def sink(port: int = PORT, log: str | None = None) -> None:
    """Accept connections; each sends messages ``[8-byte length][payload]``; the sink answers
    one byte when a payload is in (length 0 ends the connection). Runs until killed. With
    ``log``, it first appends ``time bytes sender`` there (``time.perf_counter``, one clock for
    every namespace): the message's arrival, which does not wait for the answer's trip back."""
    note = _line_log(log)

    def serve(c: socket.socket) -> None:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = c.getpeername()[0]
        try:
            while True:
                hdr = bytearray(8)
                _recv_exact_into(c, hdr)
                (n,) = _HDR.unpack(hdr)
                if n == 0:
                    return
                _recv_exact(c, n)
                if note is not None:
                    note(f"{time.perf_counter()} {n} {peer}")
                c.sendall(b"k")
        except (ConnectionError, OSError):
            return
        finally:
            c.close()

    _serve_forever(port, serve)


def _line_log(path: str | None) -> Any:
    """A function that appends one line to the file ``path`` (line-buffered, one thread at a
    time: the sinks' connections log from threads of their own), or None without a path."""
    if not path:
        return None
    out = open(path, "a", buffering=1)
    lock = threading.Lock()

    def note(line: str) -> None:
        with lock:
            out.write(line + "\n")

    return note


def _serve_forever(port: int, serve: Any) -> None:
    """Listen on ``port``, print ``ready``, and serve every connection in a thread of its
    own (``serve(conn)``) until killed."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    print("ready", flush=True)
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def _recv_exact_into(c: socket.socket, buf: bytearray) -> None:
    view, got = memoryview(buf), 0
    while got < len(buf):
        k = c.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("peer closed")
        got += k


def _msg(c: socket.socket, payload: memoryview) -> float:
    """Send one message and wait for its one-byte answer; seconds."""
    t = time.perf_counter()
    c.sendall(_HDR.pack(len(payload)))
    c.sendall(payload)
    if c.recv(1) != b"k":
        raise ConnectionError("bad answer")
    return time.perf_counter() - t


def _connect(addr: str, port: int, sndbuf: int | None = None) -> socket.socket:
    for _ in range(100):
        try:
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if sndbuf:  # bounded, so a stopped stream's queue drains in tens of ms
                c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            c.settimeout(30)
            c.connect((addr, port))
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return c
        except OSError:
            c.close()
            time.sleep(0.05)
    raise TestbedError(f"tcp_probe: cannot connect to {addr}:{port}")


def sender(spec: dict) -> dict[str, Any]:
    """The sender's side (see the module docstring); ``spec``: ``peers`` (addresses, the
    first one for the idle-path and after-idle tests), ``port``, ``sizes``, ``idle_s``,
    ``repeats``, ``stream_s``."""
    port = int(spec.get("port", PORT))
    peers = list(spec["peers"])
    rec: dict[str, Any] = {}
    for k in ("tcp_slow_start_after_idle", "tcp_congestion_control"):
        rec[k] = Path(f"/proc/sys/net/ipv4/{k}").read_text().strip()
    c = _connect(peers[0], port)
    rec["fresh"] = tcp_info(c)
    one = memoryview(b"x")
    rtts = [_msg(c, one) for _ in range(int(spec.get("pings", 30)))]
    rec["ping_s"] = rtts
    buf = memoryview(bytearray(max(spec["sizes"])))
    after: list[dict] = []
    for size in spec["sizes"]:
        for _ in range(int(spec.get("repeats", 3))):
            _msg(c, buf[:size])
            warm = _msg(c, buf[:size])  # right after another: the window is open
            time.sleep(float(spec.get("idle_s", 0.6)))
            before = tcp_info(c)
            idle = _msg(c, buf[:size])
            after.append({"bytes": size, "warm_s": warm, "idle_s": idle,
                          "cwnd_before": before["cwnd"], "rto_s": before["rto_s"]})
    rec["after_idle"] = after
    c.sendall(_HDR.pack(0))
    c.close()
    # k connections out of this host streaming at once (never application-limited), then all
    # but the first stop: how fast the survivor takes the freed link (BBR: at its old pace)
    rec["sharing"] = [_share(peers, port, float(spec.get("stream_s", 1.5)),
                             float(spec.get("gap_s", 0.1)))
                      for _ in range(int(spec.get("share_repeats", 5)))]
    return rec


def _share(peers: list[str], port: int, stream_s: float, gap_s: float,
           size: int = 1 << 20) -> dict[str, Any]:
    """One sharing run: ``len(peers)`` connections send ``size``-byte messages (each acked, as
    a PS's pulls are) at once for ``stream_s``, all idle ``gap_s`` (below the RTO: no
    slow-start restart), then the first sends one message alone (``after_share_s``); then,
    after it sent one more alone and idled ``gap_s`` again, the same message
    (``after_alone_s``). TCP_INFO of every connection every 10 ms while they share."""
    socks = [_connect(p, port) for p in peers]
    stop = threading.Event()
    buf = memoryview(bytearray(size))

    def stream(s: socket.socket) -> None:
        while not stop.is_set():
            _msg(s, buf)

    ths = [threading.Thread(target=stream, args=(s,), daemon=True) for s in socks]
    t0 = time.perf_counter()
    for t in ths:
        t.start()
    samples = []
    while time.perf_counter() - t0 < stream_s:
        time.sleep(0.01)
        samples.append([time.perf_counter() - t0, [tcp_info(s) for s in socks]])
    stop.set()
    for t in ths:
        t.join(timeout=30)
    time.sleep(gap_s)
    after_share = _msg(socks[0], buf)
    _msg(socks[0], buf)
    time.sleep(gap_s)
    after_alone = _msg(socks[0], buf)
    for s in socks:
        s.sendall(_HDR.pack(0))
        s.close()
    return {"flows": len(socks), "bytes": size, "gap_s": gap_s, "after_share_s": after_share,
            "after_alone_s": after_alone, "samples": samples}


def streamer(spec: dict) -> dict[str, Any]:
    """One of the ``k`` hosts of the incast probe: connect to ``spec["peer"]``, 20 one-byte
    ping-pongs (the idle RTT), wait until ``spec["start_at"]`` (``time.perf_counter``, one
    clock for every namespace), then send 1 MiB messages (each acked, as a worker's pushes
    are) for ``stream_s`` seconds, TCP_INFO every 10 ms."""
    c = _connect(spec["peer"], int(spec.get("port", PORT)))
    one = memoryview(b"x")
    pings = [_msg(c, one) for _ in range(20)]
    buf = memoryview(bytearray(1 << 20))
    stop = threading.Event()

    def stream() -> None:
        while not stop.is_set():
            _msg(c, buf)

    wait = float(spec["start_at"]) - time.perf_counter()
    if wait > 0:
        time.sleep(wait)
    th = threading.Thread(target=stream, daemon=True)
    t0 = time.perf_counter()
    th.start()
    samples = []
    # the survivor (``solo_s`` > 0) goes on alone after the others stop at ``stream_s``
    until = float(spec.get("stream_s", 3.0)) + float(spec.get("solo_s", 0.0))
    while time.perf_counter() - t0 < until:
        time.sleep(0.005)
        samples.append([time.perf_counter() - t0, tcp_info(c)])
    stop.set()
    th.join(timeout=30)
    done = time.perf_counter() - t0  # its last message acknowledged
    c.sendall(_HDR.pack(0))
    c.close()
    return {"ping_s": pings, "samples": samples, "stream_end_s": done}


def _check_hosts(cluster: Any, n: int, what: str) -> None:
    """``n`` hosts besides host 0 (the sink, the PS, or the sender) must fit the cluster."""
    if not 1 <= n < cluster.hosts:
        raise TestbedError(f"{what}={n}: the cluster has {cluster.hosts} hosts, one of them "
                           f"host 0; use 1..{cluster.hosts - 1}")


def _on_hosts(cluster: Any, sinks: list[tuple[int, list[str]]],
              clients: list[tuple[int, str, dict]], timeout_s: float,
              module: str = "sgdnet.testbed.tcp_probe") -> list[dict]:
    """Start ``sinks`` (host, this module's arguments) and wait for each to say ``ready``,
    then run ``clients`` (host, command, spec) at once and return their JSON records in
    order; the sinks are stopped whatever happens. ``module``: whose command line runs them
    (``python -m module ...``)."""
    exe = [sys.executable, "-m", module]
    ps = [subprocess.Popen(cluster.exec_args(h, [*exe, *argv]), stdout=subprocess.PIPE,
                           text=True) for h, argv in sinks]
    try:
        for p in ps:
            if p.stdout.readline().strip() != "ready":
                raise TestbedError("tcp_probe: a sink did not start")
        procs = [subprocess.Popen(cluster.exec_args(h, [*exe, cmd, json.dumps(spec)]),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for h, cmd, spec in clients]
        recs = []
        for p, (_, cmd, _) in zip(procs, clients):
            out, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise TestbedError(f"tcp_probe {cmd} failed:\n{err[-2000:]}")
            recs.append(json.loads(out))
        return recs
    finally:
        for p in ps:
            p.terminate()
            p.wait(timeout=5)


def probe_incast(cluster: Any, flows: int, stream_s: float = 3.0, timeout_s: float = 120.0,
                 rate_Bps: float | None = None, solo_s: float = 0.5) -> dict[str, Any]:
    """The incast probe on an emulated cluster: a sink on host 0, ``flows`` hosts ``1..flows``
    streaming into it at once (a PS's pushes: connections from different hosts into one
    host's link, whose queue no sender's own qdisc limits), host 1 then alone for ``solo_s``
    seconds (how fast a push takes the link its peers left); :func:`summarize_incast` of
    their records."""
    _check_hosts(cluster, flows, "flows")
    spec = {"peer": cluster.addr(0), "port": PORT, "stream_s": stream_s,
            "start_at": time.perf_counter() + 3.0}
    recs = _on_hosts(cluster, [(0, ["sink", str(PORT)])],
                     [(i, "stream", {**spec, "solo_s": solo_s if i == 1 and flows > 1 else 0.0})
                      for i in range(1, flows + 1)], timeout_s)
    return summarize_incast(recs, cluster.rate if rate_Bps is None else rate_Bps)


def probe_duplex(cluster: Any, flows: int, stream_s: float = 3.0, timeout_s: float = 120.0,
                 rate_Bps: float | None = None) -> dict[str, Any]:
    """Pushes and pulls at once: hosts ``1..flows`` stream into host 0 (its downlink) while
    host 0 streams to each of them (its uplink), every connection TCP_INFO-sampled. A
    connection's ACKs travel the opposite direction, so a push's ACKs queue behind the pulls'
    data in host 0's uplink (and a pull's behind the pushes' in the switch). Returns each
    direction's goodput over the samples after the first 0.5 s as a fraction of the link's
    payload rate (``push_fraction``, ``pull_fraction``; 1: the link is never idle), their
    median RTTs, and the same for the pushes alone (``alone``: :func:`probe_incast`)."""
    _check_hosts(cluster, flows, "flows")
    rate = cluster.rate if rate_Bps is None else rate_Bps
    spec = {"port": PORT, "stream_s": stream_s, "start_at": time.perf_counter() + 3.0}
    recs = _on_hosts(cluster, [(i, ["sink", str(PORT)]) for i in range(flows + 1)],
                     [(i, "stream", {**spec, "peer": cluster.addr(0)}) for i in range(1, flows + 1)]
                     + [(0, "stream", {**spec, "peer": cluster.addr(i)})
                        for i in range(1, flows + 1)], timeout_s)
    beff = 1448 / 1514 * rate

    def goodput(rs: list[dict]) -> tuple[float, float]:
        got, rtts = 0.0, []
        for r in rs:
            v = [(t, i) for t, i in r["samples"] if t >= 0.5]
            got += (v[-1][1]["bytes_acked"] - v[0][1]["bytes_acked"]) / (v[-1][0] - v[0][0])
            rtts += [i["rtt_s"] for _, i in v]
        return got / beff, statistics.median(rtts)

    push, push_rtt = goodput(recs[:flows])
    pull, pull_rtt = goodput(recs[flows:])
    alone = probe_incast(cluster, flows, stream_s=stream_s, rate_Bps=rate, solo_s=0.0)
    return {"flows": flows, "push_fraction": push, "pull_fraction": pull,
            "push_rtt_s": push_rtt, "pull_rtt_s": pull_rtt,
            "alone": {"rtt_loaded_s": alone["rtt_loaded_s"],
                      "standing_queue_s": alone["standing_queue_s"]}}


_HDR2 = struct.Struct("!QQ")
#: tb-mlp's layers' gradient bytes, pushed in backward order (5 kB first)
PS_LAYERS = (5160, 131584, 525312, 526336)


def ps_sink(port: int, hosts: int, sync: bool, layers: int = len(PS_LAYERS),
            log: str | None = None) -> None:
    """A parameter server without a model: each of ``hosts`` connections sends messages
    ``[in bytes][back bytes][payload]``; the sink answers each with ``back`` bytes once it is
    in, with ``sync`` only when every connection's message of that index in the round is in
    (a barrier per message index: a sync PS's per-layer pulls). Runs until killed."""
    bars = [threading.Barrier(hosts) for _ in range(layers)]
    back = memoryview(bytearray(1 << 21))
    note = _line_log(log)  # "time peer index" per push in, "time peer index out" per pull

    def serve(c: socket.socket) -> None:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = c.getpeername()[0]
        try:
            k = 0
            while True:
                hdr = bytearray(16)
                _recv_exact_into(c, hdr)
                n_in, n_back = _HDR2.unpack(hdr)
                if n_in == 0:
                    return
                _recv_exact(c, n_in)
                if note is not None:
                    note(f"{time.perf_counter()} {peer} {k}")
                if sync:  # a peer that ended its run breaks the barrier: this one ends too
                    bars[k % len(bars)].wait(timeout=3.0)
                if note is not None:  # its pull leaves
                    note(f"{time.perf_counter()} {peer} {k} out")
                k += 1
                while n_back > 0:
                    c.sendall(back[:min(n_back, len(back))])
                    n_back -= min(n_back, len(back))
        except (ConnectionError, OSError, threading.BrokenBarrierError):
            return
        finally:
            c.close()

    _serve_forever(port, serve)


def ps_worker(spec: dict) -> dict[str, Any]:
    """One worker of :func:`probe_ps`: from ``start_at`` for ``run_s`` seconds, push the
    layers (:data:`PS_LAYERS`, back to back), read the pulls (each the size of its push),
    compute for ``compute_s`` (a sleep), again; returns the times its rounds ended."""
    c = _connect(spec["peer"], int(spec.get("port", PORT)))
    c.settimeout(5.0)
    state = bool(spec.get("tcp_state", False))  # the connection's state per round
    states = []
    sizes = spec.get("layers", PS_LAYERS)
    bufs = [memoryview(bytearray(n)) for n in sizes]
    got = memoryview(bytearray(max(sizes)))
    wait = float(spec["start_at"]) - time.perf_counter()
    if wait > 0:
        time.sleep(wait)
    t0 = time.perf_counter()
    ends = []
    rounds = []  # per round: its start, then when each layer's pull was in (push order)
    run_s = float(spec["run_s"])
    while time.perf_counter() - t0 < run_s:
        row = [time.perf_counter() - t0]
        if state:  # before the round's first push, and after each pull
            states.append([tcp_state(c)])
        try:
            for b in bufs:
                c.sendall(_HDR2.pack(len(b), len(b)))
                c.sendall(b)
            for b in bufs:
                view, left = got[:len(b)], len(b)
                while left:
                    k = c.recv_into(view[len(b) - left:], left)
                    if k == 0:
                        raise ConnectionError("peer closed")
                    left -= k
                row.append(time.perf_counter() - t0)
                if state:
                    states[-1].append(tcp_state(c))
        except (ConnectionError, TimeoutError, OSError):
            # sync: a peer ended its run first and the PS's barrier broke; this round is lost
            if time.perf_counter() - t0 >= run_s - 1.0:
                break
            raise
        rounds.append(row)
        time.sleep(float(spec.get("compute_s", 0.0)))
        ends.append(time.perf_counter() - t0)
    info = tcp_info(c)  # the whole run's busy and window-limited times
    try:
        c.sendall(_HDR2.pack(0, 0))
    except OSError:
        pass
    c.close()
    return {"ends": ends, "rounds": rounds, "t0": t0, "info": info,
            **({"states": states} if state else {})}


def rounds_per_s(ends: list[float], lo: float, hi: float) -> float:
    """A worker's rounds per second from its round end times: those in ``[lo, hi]``, end to
    end (0 with fewer than two)."""
    v = [t for t in ends if lo <= t <= hi]
    return (len(v) - 1) / (v[-1] - v[0]) if len(v) >= 2 else 0.0


def probe_ps(cluster: Any, workers: int, sync: bool, run_s: float = 6.0,
             compute_s: float = 0.002, timeout_s: float = 120.0,
             rate_Bps: float | None = None, layers: tuple[int, ...] = PS_LAYERS,
             tcp_state: bool = False) -> dict[str, Any]:
    """A PS's traffic without its processes: ``workers`` hosts push tb-mlp's layers into host
    0 and take the same bytes back per layer (with ``sync`` once every worker's layer is in),
    then sleep ``compute_s``, for ``run_s`` seconds. Returns the rounds per second (each
    worker's over its rounds ending in the middle 70 % of the run, end to end, summed), their
    fraction of the PS link's bound (payload rate over one round's bytes: the most a PS
    host's link carries whatever the worker count), and every worker's round end times. With
    ``tcp_state``, each worker's connection state (:func:`tcp_state`) before every round and
    after each of its pulls (``states``), and each worker's clock origin (``t0``, the same
    clock as ``ps_in``'s before ``start_at`` is taken off)."""
    _check_hosts(cluster, workers, "workers")
    rate = cluster.rate if rate_Bps is None else rate_Bps
    spec = {"peer": cluster.addr(0), "port": PORT, "run_s": run_s, "compute_s": compute_s,
            "start_at": time.perf_counter() + 3.0, "layers": list(layers),
            "tcp_state": tcp_state}
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "ps_in.txt")
        recs = _on_hosts(cluster, [(0, ["ps-sink", str(PORT), str(workers),
                                        "sync" if sync else "async", str(len(layers)), log])],
                         [(i, "ps-worker", spec) for i in range(1, workers + 1)], timeout_s)
        # each push's arrival at the PS: (seconds after start_at, worker 1..n, message index)
        hosts = {cluster.addr(i): i for i in range(1, workers + 1)}
        rows = [ln.split() for ln in Path(log).read_text().splitlines()]
        ps_in = [(float(r[0]) - spec["start_at"], hosts.get(r[1], 0), int(r[2]))
                 for r in rows if len(r) == 3]
        ps_out = [(float(r[0]) - spec["start_at"], hosts.get(r[1], 0), int(r[2]))
                  for r in rows if len(r) == 4]
    ends = [r["ends"] for r in recs]
    rounds = [r["rounds"] for r in recs]
    per = [rounds_per_s(e, 0.2 * run_s, 0.9 * run_s) for e in ends]
    steps = sum(per)
    bound = 1448 / 1514 * rate / sum(layers)
    return {"workers": workers, "sync": sync, "compute_s": compute_s, "steps_per_s": steps,
            "of_bound": steps / bound, "per_worker": per, "ends": ends, "rounds": rounds,
            "ps_in": ps_in, "ps_out": ps_out,
            "start_at": spec["start_at"], "t0": [r["t0"] - spec["start_at"] for r in recs],
            "info": [r["info"] for r in recs],
            **({"states": [r["states"] for r in recs]} if tcp_state else {})}


def summarize_incast(recs: list[dict], rate_Bps: float | None = None,
                     payload_ratio: float = 1448 / 1514) -> dict[str, Any]:
    """Figures of the incast probe's records (one per sending host): the idle RTT (min of the
    pings), the RTT while the k flows share (``rtt_loaded_s``: median of TCP_INFO's RTT over
    the samples after the first 0.5 s, every flow), the standing queue it implies
    (``standing_queue_s`` = that - the idle RTT, ``standing_queue_B`` at the link's payload
    rate) and each connection's bytes in flight (``inflight_B``: unacked segments x MSS,
    median)."""
    idle = min(x for r in recs for x in r["ping_s"])
    loaded, inflight = [], []
    for r in recs:
        for t, i in r["samples"]:
            if t >= 0.5:
                loaded.append(i["rtt_s"])
                inflight.append(i["unacked"] * i["mss"])
    out: dict[str, Any] = {"flows": len(recs), "rtt_min_s": idle}
    out["rtt_loaded_s"] = statistics.median(loaded) if loaded else None
    out["standing_queue_s"] = max(0.0, out["rtt_loaded_s"] - idle) if loaded else None
    beff = None if rate_Bps is None else payload_ratio * rate_Bps
    out["standing_queue_B"] = (out["standing_queue_s"] * beff
                               if loaded and beff is not None else None)
    out["inflight_B"] = statistics.median(inflight) if inflight else None
    # the survivor alone after its peers stopped: its goodput over the first 50 / 100 / 200 /
    # 400 ms, as a fraction of the link's payload rate (BBR keeps pacing at its estimate of
    # its share for a while; a window-based control takes the free link at once)
    s0 = recs[0]["samples"]
    end = max(t for t, _ in s0)
    t_stop = max(r["stream_end_s"] for r in recs[1:]) if len(recs) > 1 else end
    if beff is not None and len(recs) > 1 and end - t_stop > 0.05:
        def acked_at(x: float) -> float:
            return next(i["bytes_acked"] for t, i in s0 if t >= x)

        out["solo_fraction"] = {
            f"{w * 1e3:.0f}ms": (acked_at(t_stop + w) - acked_at(t_stop)) / (w * beff)
            for w in (0.05, 0.1, 0.2, 0.4) if t_stop + w <= end}
    return out


def summarize(rec: dict, rate_Bps: float | None = None, payload_ratio: float = 1448 / 1514
              ) -> dict[str, Any]:
    """Figures of one :func:`sender` record: RTT, MSS, initial window, RTO, slow start after
    idle, the after-idle excess per size, the sharing pace ``tcp_pacing`` (pacing rate over
    ``payload_ratio * rate / k``, median over the samples after the first second, when every
    flow has bytes acked), the RTT while the k flows share (``rtt_loaded_s``, same samples)
    and the standing queue it implies (``standing_queue_s`` = that - the idle RTT;
    ``standing_queue_B`` in bytes at the link's payload rate), and ``cluster``: the Cluster
    fields to use."""
    fresh = rec["fresh"]
    ping = sorted(rec["ping_s"])
    out: dict[str, Any] = {
        "rtt_min_s": ping[0], "rtt_median_s": statistics.median(ping),
        "mss": fresh["mss"], "init_cwnd": fresh["cwnd"], "init_window_B": fresh["cwnd"] *
        fresh["mss"], "rto_s": fresh["rto_s"],
        "slow_start_after_idle": int(rec["tcp_slow_start_after_idle"]),
        "congestion_control": rec["tcp_congestion_control"]}
    by: dict[int, list[dict]] = {}
    for a in rec["after_idle"]:
        by.setdefault(a["bytes"], []).append(a)
    out["after_idle"] = {str(b): {"warm_s": statistics.median(x["warm_s"] for x in v),
                                  "idle_s": statistics.median(x["idle_s"] for x in v),
                                  "excess_s": statistics.median(x["idle_s"] - x["warm_s"]
                                                                for x in v),
                                  "cwnd_before": [x["cwnd_before"] for x in v]}
                         for b, v in by.items()}
    runs = rec["sharing"]
    k = runs[0]["flows"]
    out["sharing_flows"] = k
    beff = None if rate_Bps is None else payload_ratio * rate_Bps
    pace, alone, loaded = [], [], []
    for sh in runs:
        for t, infos in sh["samples"]:
            if t >= 0.5:
                pace += [i["pacing_Bps"] for i in infos]
                loaded += [i["rtt_s"] for i in infos]
        # a message alone right after sharing, against the same message after being alone
        alone.append(sh["after_alone_s"] / sh["after_share_s"])
    out["pacing_median_Bps"] = statistics.median(pace) if pace else None
    out["pace_over_fair"] = (out["pacing_median_Bps"] * k / beff) if (pace and beff) else None
    # the model's cap: a flow whose k - 1 peers are idle runs at rho B = factor B / k:
    # factor = k rho (>= 1); none when it is as fast as after being alone
    # the standing queue k flows keep in the shared link's buffer: a message joining the
    # link waits that long behind their bytes (FIFO) before it shares the link
    out["rtt_loaded_s"] = statistics.median(loaded) if loaded else None
    out["standing_queue_s"] = (max(0.0, out["rtt_loaded_s"] - out["rtt_min_s"])
                               if loaded else None)
    out["standing_queue_B"] = (out["standing_queue_s"] * beff
                               if loaded and beff is not None else None)
    out["alone_fraction"] = statistics.median(alone) if alone else None
    out["alone_fractions"] = alone
    rho = out["alone_fraction"]
    out["tcp_pacing"] = 0.0 if rho is None or rho >= 0.97 else max(1.0, k * rho)
    out["cluster"] = {"tcp_pacing": round(out["tcp_pacing"], 3)}
    out["summary"] = (f"rtt {out['rtt_min_s'] * 1e6:.0f} us (median "
                      f"{out['rtt_median_s'] * 1e6:.0f}), mss {out['mss']}, IW {out['init_cwnd']}, "
                      f"rto {out['rto_s'] * 1e3:.0f} ms, {out['congestion_control']}, "
                      f"slow start after idle {out['slow_start_after_idle']}, {k} flows: pace "
                      f"{out['pace_over_fair'] or 0:.2f} x fair share, a message alone after "
                      f"sharing at {rho or 0:.2f} of its speed after being alone -> tcp_pacing "
                      f"{out['tcp_pacing']:.2f}; RTT while sharing "
                      f"{(out['rtt_loaded_s'] or 0) * 1e3:.2f} ms (standing queue "
                      f"{(out['standing_queue_s'] or 0) * 1e3:.2f} ms)")
    return out


def with_probe(cf: Any, probe: dict[str, Any]) -> Any:
    """``cf`` (a :class:`~sgdnet.workload.cluster_file.ClusterFile`) with ``link.tcp_pacing``
    from a :func:`probe_cluster` result and its figures (without the raw record) in
    ``measurements.tcp``."""
    import dataclasses

    meas = dict(cf.measurements)
    meas["tcp"] = {k: v for k, v in probe.items() if k != "raw"}
    link = dataclasses.replace(cf.link, tcp_pacing=float(probe["tcp_pacing"]))
    return cf.replace(link=link, measurements=meas)


def probe_cluster(cluster: Any, flows: int = 4, sizes: tuple[int, ...] = (16384, 262144, 1 << 20),
                  idle_s: float = 0.6, stream_s: float = 3.0, timeout_s: float = 120.0
                  ) -> dict[str, Any]:
    """Run the probe on an emulated cluster: sinks on hosts ``1..flows``, the sender on host 0
    (a PS host's pulls: ``flows`` connections out of one host); the record and its
    :func:`summarize`."""
    _check_hosts(cluster, flows, "flows")
    exe = [sys.executable, "-m", "sgdnet.testbed.tcp_probe"]
    sinks = [subprocess.Popen(cluster.exec_args(i, [*exe, "sink", str(PORT)]),
                              stdout=subprocess.PIPE, text=True) for i in range(1, flows + 1)]
    try:
        for p in sinks:
            if p.stdout.readline().strip() != "ready":
                raise TestbedError("tcp_probe: a sink did not start")
        spec = {"peers": [cluster.addr(i) for i in range(1, flows + 1)], "port": PORT,
                "sizes": list(sizes), "idle_s": idle_s, "stream_s": stream_s}
        p = subprocess.run(cluster.exec_args(0, [*exe, "send", json.dumps(spec)]),
                           capture_output=True, text=True, timeout=timeout_s)
        if p.returncode != 0:
            raise TestbedError(f"tcp_probe sender failed:\n{p.stderr[-2000:]}")
        rec = json.loads(p.stdout)
    finally:
        for s in sinks:
            s.terminate()
            s.wait(timeout=5)
    out = summarize(rec, cluster.rate)
    out["raw"] = {k: v for k, v in rec.items() if k != "sharing"}
    return out


def main(argv: list[str] | None = None) -> int:
    """``sink [PORT]`` or ``send SPEC_JSON`` (prints the record as JSON)."""
    a = sys.argv[1:] if argv is None else argv
    if a and a[0] == "sink":
        sink(int(a[1]) if len(a) > 1 else PORT)
        return 0
    if len(a) == 2 and a[0] == "send":
        print(json.dumps(sender(json.loads(a[1]))))
        return 0
    if len(a) == 2 and a[0] == "stream":
        print(json.dumps(streamer(json.loads(a[1]))))
        return 0
    if len(a) in (5, 6) and a[0] == "ps-sink":
        ps_sink(int(a[1]), int(a[2]), a[3] == "sync", int(a[4]), a[5] if len(a) == 6 else None)
        return 0
    if len(a) == 2 and a[0] == "ps-worker":
        print(json.dumps(ps_worker(json.loads(a[1]))))
        return 0
    print("usage: python -m sgdnet.testbed.tcp_probe sink [PORT] | send SPEC_JSON | "
          "stream SPEC_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
