"""Why a round's first push is slow: each push connection's TCP state in the PS-traffic probe.

Root, iproute2. Runs :func:`sgdnet.testbed.tcp_probe.probe_ps` (sync, ``--workers``, ``--rate``)
with every worker's connection state recorded before each round (``tcp_state``: cwnd, smoothed
RTT, pacing rate, last delivery-rate sample, BBR's bandwidth estimate and pacing gain) and, for
the rounds in the middle 70 % of the run, groups the workers by the order in which they start
the round (1st = the first to finish its pulls, alone on the PS's downlink while the others
still take theirs). Prints, per position, the median time from the round's start to its
first two pushes (``--layers-in``) being in at the PS and the state the push starts from. With
``--cc reno`` every host runs Reno instead of the namespaces' BBR (a control: a window-based
sender has no pace to remember). ``--trace`` also records the kernel's ``tcp:tcp_probe`` event
(every ACK a socket takes in: bytes sent and acked, cwnd, the peer's window, srtt) and prints,
for the first starter of ``--trace-rounds`` rounds, its push connection's progress millisecond
by millisecond. ``--json`` keeps the summary.

    python scripts/probe_ps_tcpstate.py --rate 250Mbit/s --workers 4 --cc bbr,reno
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIELDS = ("cwnd", "srtt_ms", "pacing_MBps", "delivery_MBps", "bbr_bw_MBps", "pacing_gain")


def by_position(r: dict, run_s: float, layers_in: int) -> dict[int, dict[str, list[float]]]:
    """Per start position in a round (0 = first): time to the worker's first ``layers_in``
    pushes in at the PS (ms) and its connection's state at the round's start."""
    from sgdnet.testbed.tcp_probe import PS_LAYERS

    L = len(PS_LAYERS)
    got = {(w, k): t for t, w, k in r["ps_in"]}
    n = len(r["rounds"])
    out: dict[int, dict[str, list[float]]] = {}
    for k, starts in enumerate(round_starts(r)):
        if not 0.2 * run_s <= min(starts) <= 0.9 * run_s:
            continue
        for pos, w in enumerate(sorted(range(n), key=starts.__getitem__)):
            t_in = got.get((w + 1, k * L + layers_in - 1))
            if t_in is None:
                continue
            st = r["states"][w][k][0]
            d = out.setdefault(pos, {f: [] for f in ("push_ms", "lead_ms", *FIELDS)})
            d["push_ms"].append((t_in - starts[w]) * 1e3)
            d["lead_ms"].append((sorted(starts)[min(pos + 1, n - 1)] - starts[w]) * 1e3)
            vals = (st[0], st[1] * 1e3, st[2] / 1e6, st[3] / 1e6, st[4] / 1e6, st[5])
            for f, v in zip(FIELDS, vals):
                d[f].append(v)
    return out


EVENT = re.compile(r"\s(\d+\.\d+): tcp_probe: .*?src=([\d.]+):\d+ dest=([\d.]+):\d+ .*?"
                   r"data_len=(\d+) snd_nxt=0x([0-9a-f]+) snd_una=0x([0-9a-f]+) snd_cwnd=(\d+) "
                   r"ssthresh=\d+ snd_wnd=(\d+) srtt=(\d+)")


def _events(lines: list[str], src: str, dst: str) -> list[tuple[float, ...]]:
    """``(time, data_len, snd_nxt, snd_una, cwnd, peer window, srtt us)`` of every event of the
    socket ``src`` -> ``dst`` (``tcp:tcp_probe``'s print format)."""
    out = []
    for ln in lines:
        m = EVENT.search(ln)
        if m and m.group(2) == src and m.group(3) == dst:
            out.append((float(m.group(1)), int(m.group(4)), int(m.group(5), 16),
                        int(m.group(6), 16), int(m.group(7)), int(m.group(8)),
                        int(m.group(9))))
    return out


def traced(lines: list[str], src: str, dst: str) -> list[tuple[float, int, int, int, int, int]]:
    """``(time, snd_nxt, snd_una, cwnd, peer window, srtt us)`` of connection src -> dst, one
    per ACK it took in (sequence numbers unwrapped from the first event's ``snd_una``)."""
    ev = _events(lines, src, dst)
    base = ev[0][3] if ev else 0
    return [(t, (nxt - base) % (1 << 32), (una - base) % (1 << 32), cwnd, wnd, srtt)
            for t, _, nxt, una, cwnd, wnd, srtt in ev]


def kernel_in(lines: list[str], ps: str, peer: str) -> tuple[list[float], list[int]]:
    """When the PS host's kernel took in the data of ``peer``'s connection: the time of each
    segment carrying data and the bytes in by then (the event fires for every segment an
    established socket receives)."""
    ts, got, tot = [], [], 0
    for t, n, *_ in _events(lines, ps, peer):
        if n > 0:
            tot += n
            ts.append(t)
            got.append(tot)
    return ts, got


def round_starts(r: dict) -> list[list[float]]:
    """Per round every worker's start of it (seconds after ``start_at``; sync: round k is
    every worker's k-th)."""
    n = len(r["rounds"])
    return [[r["t0"][w] + r["rounds"][w][k][0] for w in range(n)]
            for k in range(min(len(x) for x in r["rounds"]))]


def kernel_layers(r: dict, cl, lines: list[str], run_s: float) -> list[list[float]]:
    """Per round and worker, from its round start (ms): the kernel's arrival of each of its
    pushes at the PS, and the application's (``ps_in``), in push order."""
    import bisect

    from sgdnet.testbed.tcp_probe import PS_LAYERS

    L = len(PS_LAYERS)
    ends = [sum(16 + b for b in PS_LAYERS[:j + 1]) for j in range(L)]
    per = ends[-1]
    app = {(w, k): t for t, w, k in r["ps_in"]}
    n = len(r["rounds"])
    kin = {}  # (worker, round) -> the kernel's arrival of each push, on start_at's clock
    for w in range(n):
        ts, got = kernel_in(lines, cl.addr(0), cl.addr(w + 1))
        for k in range(len(r["rounds"][w])):
            ix = [bisect.bisect_left(got, k * per + ends[j]) for j in range(L)]
            kin[w, k] = [ts[i] - r["start_at"] if i < len(ts) else float("nan") for i in ix]
    own, every = [], []
    for k, sts in enumerate(round_starts(r)):
        for w, st in enumerate(sts):
            if 0.2 * run_s <= st <= 0.9 * run_s:
                own.append([(t - st) * 1e3 for t in kin[w, k]]
                           + [(app.get((w + 1, k * L + j), float("nan")) - st) * 1e3
                              for j in range(L)])
                # every worker's push j of this round in, from this worker's start
                every.append([(max(kin[v, k][j] for v in range(n)) - st) * 1e3
                              for j in range(L)])
    return own, every


def show_trace(r: dict, cl, lines: list[str], run_s: float, rounds: int) -> None:
    """Print the first starter's push progress in ``rounds`` rounds of the middle of the run."""
    n = len(r["rounds"])
    conns: dict[int, list] = {}  # each worker's connection, parsed once
    shown = 0
    for k, starts in enumerate(round_starts(r)):
        if not 0.4 * run_s <= min(starts) <= 0.9 * run_s or shown >= rounds:
            continue
        shown += 1
        w = min(range(n), key=starts.__getitem__)
        t0 = r["start_at"] + starts[w]
        if w not in conns:
            conns[w] = traced(lines, cl.addr(w + 1), cl.addr(0))
        tr = [x for x in conns[w] if t0 - 1e-3 <= x[0]]
        if not tr:
            continue
        nxt0, una0 = tr[0][1], tr[0][2]
        print(f"  round {k}, first starter worker {w + 1}, others start +"
              + " / ".join(f"{(s - starts[w]) * 1e3:.1f}" for s in sorted(starts)[1:]) + " ms")
        last = -1.0
        for t, nxt, una, cwnd, wnd, srtt in tr:
            ms = (t - t0) * 1e3
            if ms > 40:
                break
            if ms - last >= 1.0:
                last = ms
                print(f"    +{ms:5.1f} ms sent {(nxt - nxt0) / 1e3:6.1f} kB acked "
                      f"{(una - una0) / 1e3:6.1f} kB in flight {(nxt - una) / 1e3:6.1f} kB "
                      f"cwnd {cwnd} wnd {wnd / 1e3:.0f} kB srtt {srtt / 1e3:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--run-s", type=float, default=8.0)
    ap.add_argument("--cc", default="bbr", help="comma-separated: bbr, reno")
    ap.add_argument("--layers-in", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--cluster", type=Path, default=None,
                    help="a cluster file: also the model's push times (needs --trace to compare)")
    ap.add_argument("--trace-rounds", type=int, default=3)
    ap.add_argument("--tracefs", type=Path, default=Path("/tmp/tracefs"))
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from testbed_tcp_trace import tcp_probe_events

    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.tcp_probe import probe_ps

    rate = units.bandwidth(a.rate, what="rate")
    keep = []
    for rep in range(a.repeats):
        for cc in a.cc.split(","):
            with EmulatedCluster(a.workers + 1, rate=rate) as cl:
                cl.congestion_control(cc)
                with (tcp_probe_events(a.tracefs) if a.trace
                      else contextlib.nullcontext([])) as lines:
                    r = probe_ps(cl, a.workers, True, run_s=a.run_s, tcp_state=True)
            pos = by_position(r, a.run_s, a.layers_in)
            print(f"{cc} n={a.workers} at {a.rate} (repeat {rep}): "
                  f"{r['steps_per_s']:.2f} rounds/s, {r['of_bound']:.3f} of the bound")
            for p, d in sorted(pos.items()):
                med = {f: statistics.median(v) for f, v in d.items()}
                print(f"  start #{p + 1}: {len(d['push_ms'])} rounds, first {a.layers_in} "
                      f"pushes in {med['push_ms']:.1f} ms (next start +{med['lead_ms']:.1f}); "
                      + ", ".join(f"{f} {med[f]:.2f}" for f in FIELDS), flush=True)
                keep.append({"cc": cc, "repeat": rep, "rate_Mbit": rate * 8 / 1e6,
                             "workers": a.workers, "position": p + 1,
                             "steps_per_s": r["steps_per_s"], "of_bound": r["of_bound"],
                             **{f"median_{f}": med[f] for f in med}, "rounds": len(d["push_ms"])})
            if a.trace:
                show_trace(r, cl, lines, a.run_s, a.trace_rounds)
                own, every = kernel_layers(r, cl, lines, a.run_s)
                med_own = [statistics.median(x[j] for x in own) for j in range(len(own[0]))]
                h = len(med_own) // 2
                med_every = [statistics.median(x[j] for x in every) for j in range(h)]
                print(f"  a worker's pushes in at the PS, from its round start (median of "
                      f"{len(own)}): kernel " + " / ".join(f"{x:.1f}" for x in med_own[:h])
                      + " ms, application " + " / ".join(f"{x:.1f}" for x in med_own[h:])
                      + " ms")
                print("  every worker's push in (kernel): "
                      + " / ".join(f"{x:.1f}" for x in med_every) + " ms")
                keep.append({"cc": cc, "repeat": rep, "rate_Mbit": rate * 8 / 1e6,
                             "workers": a.workers, "what": "kernel vs application",
                             "own_kernel_ms": med_own[:h], "own_application_ms": med_own[h:],
                             "every_kernel_ms": med_every})
    if a.cluster:
        from probe_ps_timeline import modelled, modelled_own

        m_own = modelled_own(a.cluster, rate, a.workers, True)
        m_all = modelled(a.cluster, rate, a.workers, True)
        h = len(m_own[0])
        mo = [statistics.median(x[j] * 1e3 for x in m_own) for j in range(h)]
        ma = [statistics.median(x[j] * 1e3 for x in m_all) for j in range(h)]
        print("model: a worker's pushes in " + " / ".join(f"{x:.1f}" for x in mo)
              + " ms; every worker's " + " / ".join(f"{x:.1f}" for x in ma) + " ms")
        keep.append({"what": "model", "own_ms": mo, "every_ms": ma, "workers": a.workers,
                     "rate_Mbit": rate * 8 / 1e6})
    if a.json:
        a.json.write_text(json.dumps(keep, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
