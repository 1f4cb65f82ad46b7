"""How TCP shares one host's link among concurrent connections, on the emulated testbed.

Root, Linux, torch. Builds a PS host + 4 workers (``sgdnet.testbed.netns.EmulatedCluster``)
and times every flow (one waiting thread per message; all processes read the same
CLOCK_MONOTONIC) in four experiments, ``--reps`` times each:

* ``out``: the PS sends one message of ``S`` bytes to each worker at once;
* ``in``: every worker sends ``S`` bytes to the PS at once;
* ``out-seq2``: the PS sends two messages to each worker, layer-major (as sync PS does);
* ``in-stagger``: worker ``p`` starts a 1.19 MB push ``(p - 1) * 25`` ms after the first.

Max-min sharing would finish the concurrent flows together; FIFO one after the other::

    PYTHONPATH=. python scripts/sharing_probe.py --rate 100Mbit/s --out probe.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

S = 526336          # the tb-mlp's largest layer
M = 1188392         # the tb-mlp's gradients
EXPS = ("out", "in", "out-seq2", "in-stagger")


def _ends(works: list) -> list[float]:
    ends = [0.0] * len(works)

    def wait(j: int) -> None:
        works[j].wait()
        ends[j] = time.perf_counter()

    ts = [threading.Thread(target=wait, args=(j,)) for j in range(len(works))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ends


def rank_main(rank: int, world: int, master: str, out: str, reps: int) -> None:
    """One host's part; writes ``out/rank{rank}.json``."""
    import torch
    import torch.distributed as dist

    os.environ["GLOO_SOCKET_IFNAME"] = "eth0"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:29611", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    rec = []
    peers = list(range(1, world))
    for rep in range(reps):
        for exp in EXPS:
            time.sleep(0.15)
            dist.barrier()
            t0 = time.perf_counter()
            r = {"exp": exp, "rep": rep, "t0": t0}
            if exp == "out":
                if rank == 0:
                    for w in [dist.isend(torch.ones(S // 4), p, tag=1) for p in peers]:
                        w.wait()
                else:
                    r["ends"] = _ends([dist.irecv(torch.empty(S // 4), 0, tag=1)])
            elif exp == "out-seq2":
                if rank == 0:
                    ws = [dist.isend(torch.ones(S // 4), p, tag=tg) for tg in (1, 2) for p in peers]
                    for w in ws:
                        w.wait()
                else:
                    r["ends"] = _ends([dist.irecv(torch.empty(S // 4), 0, tag=tg)
                                       for tg in (1, 2)])
            elif exp == "in":
                if rank == 0:
                    r["ends"] = _ends([dist.irecv(torch.empty(S // 4), p, tag=1) for p in peers])
                else:
                    dist.isend(torch.ones(S // 4), 0, tag=1).wait()
            else:
                if rank == 0:
                    r["ends"] = _ends([dist.irecv(torch.empty(M // 4), p, tag=1) for p in peers])
                else:
                    time.sleep((rank - 1) * 0.025)
                    r["start"] = time.perf_counter()
                    dist.isend(torch.ones(M // 4), 0, tag=1).wait()
            rec.append(r)
    dist.barrier()
    Path(out, f"rank{rank}.json").write_text(json.dumps(rec))
    dist.destroy_process_group()


def summary(ranks: list[list[dict]], bandwidth: float) -> list[str]:
    """Per experiment and repeat, completion times in units of one message's ``S / B``
    (``in-stagger``: start and end in ms, worker order)."""
    lines = []
    world = len(ranks)
    for exp in EXPS:
        for rep in sorted({r["rep"] for r in ranks[0]}):
            get = [next(x for x in rk if x["exp"] == exp and x["rep"] == rep) for rk in ranks]
            t0 = get[0]["t0"]
            if exp == "in-stagger":
                cells = [f"w{p}: {1e3 * (get[p]['start'] - t0):.0f}->"
                         f"{1e3 * (get[0]['ends'][p - 1] - t0):.0f} ms" for p in range(1, world)]
            elif exp == "in":
                cells = [f"{(e - t0) * bandwidth / S:.2f}" for e in get[0]["ends"]]
            else:
                cells = ["/".join(f"{(e - t0) * bandwidth / S:.2f}" for e in get[p]["ends"])
                         for p in range(1, world)]
            lines.append(f"{exp:10s} {rep}: " + "  ".join(cells))
    return lines + stagger_summary(ranks, bandwidth)


def stagger_summary(ranks: list[list[dict]], bandwidth: float) -> list[str]:
    """``in-stagger`` against the fluid models of the same starts
    (:mod:`sgdnet.testbed.sharing`): the median end of each push, max-min's and FIFO's, each
    push's fairness index (0 FIFO, 1 max-min) and the fitted age weight ``beta``."""
    import statistics

    from sgdnet.testbed.sharing import fairness_index, fit_beta, fluid_ends

    runs = []
    for rep in sorted({r["rep"] for r in ranks[0]}):
        get = [next(x for x in rk if x["exp"] == "in-stagger" and x["rep"] == rep) for rk in ranks]
        t0 = get[0]["t0"]
        runs.append(([get[p]["start"] - t0 for p in range(1, len(ranks))],
                     [get[0]["ends"][p - 1] - t0 for p in range(1, len(ranks))]))
    med = [statistics.median(col) for col in zip(*(e for _, e in runs))]
    fair = [statistics.median(col) for col in zip(*(fluid_ends(s, M, bandwidth, 1.0)
                                                    for s, _ in runs))]
    fifo = [statistics.median(col) for col in zip(*(fluid_ends(s, M, bandwidth, 0.0)
                                                    for s, _ in runs))]
    idx = [statistics.median(col) for col in zip(*(fairness_index(s, e, M, bandwidth)
                                                   for s, e in runs))]
    beta, rms = fit_beta(runs, M, bandwidth)
    ms = lambda v: " / ".join(f"{1e3 * x:.1f}" for x in v)  # noqa: E731
    return [f"in-stagger ends, median (ms): measured {ms(med)}; max-min {ms(fair)}; FIFO {ms(fifo)}",
            "in-stagger fairness index (0 FIFO, 1 max-min): "
            + " / ".join(f"{x:.2f}" for x in idx if x == x)
            + f"; age weight beta {beta:.2f} (rms {1e3 * rms:.1f} ms)"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="100Mbit/s")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--cc", help="every host's TCP congestion control (default: inherited)")
    ap.add_argument("--out", type=Path, help="write the raw records and the summary (JSON)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    world = 5
    if a.rank is not None:
        rank_main(a.rank, world, "10.213.0.1", a.dir, a.reps)
        return 0
    from sgdnet.testbed.netns import EmulatedCluster

    tmp = tempfile.mkdtemp(prefix="sharing-probe-")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    with EmulatedCluster(world, rate=a.rate) as c:
        if a.cc:
            c.congestion_control(a.cc)
        ps = [subprocess.Popen(c.exec_args(r, [sys.executable, __file__, "--rank", str(r),
                                                "--dir", tmp, "--reps", str(a.reps)]), env=env)
              for r in range(world)]
        for p in ps:
            p.wait(timeout=300)
        rate = c.rate
    ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
    goodput = rate * 1448 / 1514  # TCP/IP payload per frame (the calibration measures 0.956)
    lines = summary(ranks, goodput)
    print("\n".join(lines))
    if a.out is not None:
        a.out.write_text(json.dumps({"rate_Bps": rate, "cc": a.cc or "inherited",
                                     "message_bytes": S, "push_bytes": M,
                                     "summary": lines, "ranks": ranks}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
