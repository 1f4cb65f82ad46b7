"""Where the queue is: every shaped link's tbf backlog, sampled during training.

Root, iproute2 (``tc``, ``stdbuf``), torch. For each worker count: one warm-up launch, then one
``train`` job while a thread runs ``tc -s qdisc show`` for every shaped device in turn (one
process per sample, ~2-9 ms each: a device is sampled every ~20-60 ms; the sampler takes
CPU from the training, so read where the queue is, not the step rate). Prints, over the measured
steps, each link's mean backlog and the fraction of samples above one frame (bytes, and the
milliseconds they take at the link rate): the PS host's downlink (``h0.down``, the pushes'
shared link), its uplink (``h0.up``, the pulls'), the workers' uplinks (their own pushes only)
and downlinks. A TCP connection keeps its window's excess in the *first* full queue on its
path, so with links of one rate a lone push queues in its own uplink and the PS's downlink
queue builds only while two or more pushes share it (issue #37's join queue).

    python scripts/testbed_qdisc_backlog.py --rate 250Mbit/s --workers 2,4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BACKLOG = re.compile(r"backlog (\d+)b")


class Sampler:
    """A thread that runs ``tc -n NS -s qdisc show dev DEV`` for every ``(ns, dev, name)`` in
    turn, one process per sample (~2-9 ms each here; a long-running ``tc -batch`` stopped
    answering once the training started), until closed."""

    def __init__(self, devs: list[tuple[str, str, str]]):
        import threading

        self.devs = devs
        self.got: dict[str, list[tuple[float, int]]] = {name: [] for _, _, name in devs}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop.is_set():
            for ns, dev, name in self.devs:
                t = time.perf_counter()
                p = subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev],
                                   capture_output=True, text=True, timeout=5, check=False)
                m = BACKLOG.search(p.stdout)
                if m:
                    self.got[name].append((t, int(m.group(1))))

    def close(self) -> None:
        self.stop.set()
        self.t.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", default="2,4")
    ap.add_argument("--scheme", default="sync-ps")
    ap.add_argument("--model", default="tb-mlp")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    from sgdnet import units
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch

    rate = units.bandwidth(a.rate, what="rate")
    warm = 5
    out: dict = {"rate_Bps": rate, "scheme": a.scheme, "model": a.model, "by_workers": {}}
    for n in [int(x) for x in a.workers.split(",")]:
        job = {"kind": "train", "id": "run", "scheme": a.scheme, "model": a.model, "batch": 32,
               "warmup": warm}
        with EmulatedCluster(n + 1, rate=rate) as cl:
            launch(cl, n + 1, [{**job, "steps": 5, "warmup": 1}])
            samplers = [Sampler([(cl.switch, f"p{i}", f"h{i}.down") for i in range(n + 1)]
                                + [(cl.ns(i), "eth0", f"h{i}.up") for i in range(n + 1)])]
            try:
                got = launch(cl, n + 1, [{**job, "steps": a.steps}])
            finally:
                for s in samplers:
                    s.close()
        ref = got["ranks"][1]["jobs"][0]["stamps"]
        t0, t1 = ref[warm + 1], ref[-2]
        for s in samplers:
            for name, v in s.got.items():
                if v and not any(t0 <= t <= t1 for t, _ in v):
                    raise SystemExit(f"{name}: samples at {v[0][0]:.3f}..{v[-1][0]:.3f}, the "
                                     f"steps at {t0:.3f}..{t1:.3f}: not one clock")
        rows = {}
        for s in samplers:
            for name, v in s.got.items():
                b = [x for t, x in v if t0 <= t <= t1]
                if not b:
                    continue
                gaps = [v[i + 1][0] - v[i][0] for i in range(len(v) - 1)]
                rows[name] = {"samples": len(b), "mean_B": statistics.mean(b),
                              "p90_B": sorted(b)[(9 * len(b)) // 10],
                              "busy_frac": sum(x > 1514 for x in b) / len(b),
                              "sample_gap_s": statistics.median(gaps) if gaps else None}
        print(f"{a.scheme} {a.model} n={n} at {rate * 8e-6:g} Mbit/s, "
              f"{sum(1 for x in ref if t0 < x <= t1)} steps:")
        for name in sorted(rows, key=lambda x: (x.split(".")[1], int(x[1:].split(".")[0]))):
            r = rows[name]
            print(f"  {name:8s} backlog mean {r['mean_B'] / 1e3:6.1f} kB "
                  f"({r['mean_B'] / rate * 1e3:5.2f} ms), p90 {r['p90_B'] / 1e3:6.1f} kB, "
                  f"queued in {r['busy_frac']:.0%} of {r['samples']} samples "
                  f"(every {r['sample_gap_s'] * 1e3:.2f} ms)", flush=True)
        out["by_workers"][str(n)] = {"rows": rows, "series": {
            name: [(t - t0, x) for t, x in v if t0 <= t <= t1]
            for s in samplers for name, v in s.got.items()}}
    if a.json:
        a.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
