"""Run training campaigns on the emulated cluster and keep the results as JSON.

:func:`launch` starts one :mod:`sgdnet.testbed.worker` process per host (inside the host's
namespace, with this ``sgdnet`` first on ``PYTHONPATH``), waits for all of them (a rank that
fails or a launch that overruns its time limit stops the others and raises
:class:`~sgdnet.errors.TestbedError` with the rank's traceback), and returns every rank's record.

:func:`run_campaign` runs the grid *schemes x workers x link rates x repeats*: one launch per
(repeat, rate, workers) with every scheme inside it, the order of rates, worker counts and
schemes rotated from repeat to repeat (interleaving: a slow phase of the shared machine hits all
configurations alike). :func:`summarize_job` turns a train job's step-end timestamps into
per-worker step rates (warm-up excluded) and the quiet gate's verdict.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import TestbedError
from . import quiet
from .netns import EmulatedCluster

__all__ = ["launch", "run_campaign", "summarize_job", "summarize_runs", "SCHEMES",
           "DEFAULT_SCHEMES", "rotate"]

#: Training schemes of the testbed (see :mod:`sgdnet.testbed.worker`); ``ssp`` is ``async-ps``
#: with the stale-synchronous bound ``staleness`` (the model's ``ssp`` variant).
SCHEMES = ("sync-ps", "async-ps", "ssp", "ring", "ddp")
#: The schemes a campaign runs unless told (the grid of the issue #13 validation).
DEFAULT_SCHEMES = ("sync-ps", "async-ps", "ring", "ddp")
#: Shortest job the quiet gate judges (``/proc/stat`` ticks are 10 ms), seconds.
MIN_GATE_WALL_S = 0.25
_PKG_ROOT = str(Path(__file__).resolve().parents[2])


def rotate(seq: Sequence[Any], k: int) -> list[Any]:
    """``seq`` rotated left by ``k`` (the interleaving of repeats)."""
    seq = list(seq)
    if not seq:
        return seq
    k %= len(seq)
    return seq[k:] + seq[:k]


def launch(cluster: EmulatedCluster, world: int, jobs: list[dict], *, timeout_s: float = 300.0,
           threads: int = 1, port: int = 29500) -> dict[str, Any]:
    """Run ``jobs`` on hosts ``0..world-1`` of ``cluster``; every rank's record.

    Returns
    -------
    dict
        ``{"ranks": [record of rank 0, ...], "wall_s", "top_others", "loadavg"}``.

    Raises
    ------
    TestbedError
        A rank failed (its traceback is in the message) or the launch overran ``timeout_s``.
    """
    if not 1 <= world <= cluster.hosts:
        raise TestbedError(f"world={world}: the cluster has {cluster.hosts} hosts")
    tmp = Path(tempfile.mkdtemp(prefix="sgdtb-run-"))
    spec = {"world": world, "master": cluster.addr(0), "port": port, "ifname": "eth0",
            "threads": threads, "jobs": jobs, "out_dir": str(tmp),
            "timeout_s": max(30.0, timeout_s)}
    (tmp / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_PKG_ROOT] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env["OMP_NUM_THREADS"] = str(threads)
    before = quiet.process_cpu_snapshot()
    load0 = quiet.loadavg()
    t0 = time.monotonic()
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for r in range(world):
            lf = open(tmp / f"rank{r}.log", "w")
            logs.append(lf)
            procs.append(subprocess.Popen(
                cluster.exec_args(r, [sys.executable, "-m", "sgdnet.testbed.worker",
                                      str(tmp / "spec.json"), str(r)]),
                env=env, stdout=lf, stderr=subprocess.STDOUT, cwd=str(tmp)))
        pids = [p.pid for p in procs]
        while True:
            codes = [p.poll() for p in procs]
            errs = sorted(tmp.glob("rank*.error"))
            if errs:
                raise TestbedError(f"testbed rank {errs[0].stem[4:]} failed:\n"
                                   f"{errs[0].read_text()}")
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                r, c = bad[0]
                tail = (tmp / f"rank{r}.log").read_text()[-2000:]
                raise TestbedError(f"testbed rank {r} exited with status {c}:\n{tail}")
            if all(c == 0 for c in codes):
                break
            if time.monotonic() - t0 > timeout_s:
                raise TestbedError(f"testbed launch of {world} hosts overran {timeout_s:.0f} s "
                                   f"(ranks still running: "
                                   f"{[r for r, c in enumerate(codes) if c is None]})")
            time.sleep(0.1)
        wall = time.monotonic() - t0
        after = quiet.process_cpu_snapshot()
        ours = quiet.descendants(pids + [os.getpid()])
        ranks = [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(world)]
        ours |= {int(rk["pid"]) for rk in ranks}
        return {"ranks": ranks, "wall_s": wall, "loadavg": [load0, quiet.loadavg()],
                "top_others": quiet.top_others(before, after, wall, exclude=ours)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        for lf in logs:
            lf.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


def summarize_job(ranks: list[dict], index: int, warmup: int = 1, threshold_cores: float =
                  quiet.DEFAULT_THRESHOLD_CORES) -> dict[str, Any]:
    """Per-worker step rates and the quiet gate of job ``index`` of one launch.

    A worker's rate is ``steps / (t[warmup+steps-1] - t[warmup-1])`` from its step-end
    timestamps (the first ``warmup`` steps excluded); ``steps_per_s`` is their sum (every
    worker's steps, as sgdnet's ``steps_per_s``). ``other_cores`` is the CPU everything but
    our processes used during the job; ``noisy`` when above ``threshold_cores`` (``None`` for
    a job shorter than :data:`MIN_GATE_WALL_S`, which ``/proc/stat``'s ticks cannot judge).
    """
    jobs = [r["jobs"][index] for r in ranks]
    j0 = jobs[0]
    out: dict[str, Any] = {"id": j0.get("id"), "kind": j0["kind"]}
    rates, stamps = [], []
    for j in jobs:
        st = j.get("stamps")
        if st:
            rates.append(_rate(st, warmup))
            stamps.append([round(t - j0["t0"], 6) for t in st])
    if j0["kind"] == "train":
        out["worker_steps_per_s"] = rates
        out["steps_per_s"] = float(sum(rates))
        out["worker_stamps_s"] = stamps  # step ends, seconds after the job's start barrier
    wall = j0["t1"] - j0["t0"]
    own = sum(j["cpu1"] - j["cpu0"] for j in jobs)
    oc = quiet.other_cores(j0["stat0"][0], j0["stat1"][0], own, wall)
    irq = (j0["stat1"][2] - j0["stat0"][2]) / wall if len(j0["stat0"]) > 2 else None
    # /proc/stat counts in clock ticks (10 ms): a shorter window cannot be judged
    out.update({"wall_s": wall, "own_cores": own / wall, "other_cores": oc, "irq_cores": irq,
                "noisy": (oc > threshold_cores) if wall >= MIN_GATE_WALL_S else None,
                "loadavg": [j0.get("loadavg0"), j0.get("loadavg1")]})
    return out


def _rate(stamps: Sequence[float], w: int) -> float:
    if w < 1 or len(stamps) - w < 1:
        raise TestbedError(f"need >= 1 warm-up and >= 1 measured step, got {len(stamps)} stamps "
                           f"with warm-up {w}")
    return (len(stamps) - w) / (stamps[-1] - stamps[w - 1])


def run_campaign(*, model: str = "tb-mlp", batch: int = 32, workers: Sequence[int] = (1, 2, 3, 4),
                 rates: Sequence[str | float] = ("100Mbit/s", "200Mbit/s"),
                 schemes: Sequence[str] = DEFAULT_SCHEMES, repeats: int = 3, steps: int = 12,
                 warmup: int = 3, bucket_cap_mb: float = 0.5, burst: str | float = "64KB",
                 delay: str | float = 0.0, threshold_cores: float = quiet.DEFAULT_THRESHOLD_CORES,
                 timeout_s: float = 300.0, log: Callable[[str], None] = print,
                 staleness: int = 3) -> dict[str, Any]:
    """Run the grid and return the results (see the module docstring); ``staleness`` is
    the ``ssp`` scheme's bound ``s`` (default 3, the model's ``ssp`` default).

    Returns
    -------
    dict
        ``{"meta": {...}, "runs": [one row per (repeat, rate, workers, scheme)],
        "launches": [per-launch wall time, load average, heaviest other processes]}``.
    """
    from .models import MODELS

    if model not in MODELS:
        raise TestbedError(f"unknown testbed model {model!r}; use one of {sorted(MODELS)}")
    for s in schemes:
        if s not in SCHEMES:
            raise TestbedError(f"unknown scheme {s!r}; use some of {list(SCHEMES)}")
    if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
        raise TestbedError(f"staleness={staleness!r}: the ssp bound must be an int >= 0")
    if repeats < 1 or steps < 2 or warmup < 1:
        raise TestbedError(f"repeats={repeats}, steps={steps}, warmup={warmup}: need repeats >= 1, "
                           "steps >= 2, warmup >= 1")
    from .. import units

    bps = [units.bandwidth(r, what="testbed rate") for r in rates]
    hosts = max(workers) + 1
    meta = {"model": model, "batch": batch, "workers": list(workers), "rates_Bps": bps,
            "schemes": list(schemes), "staleness": staleness, "repeats": repeats, "steps": steps, "warmup": warmup,
            "bucket_cap_mb": bucket_cap_mb, "burst_B": units.nbytes(burst), "delay_s": delay,
            "threshold_cores": threshold_cores, "cpus": os.cpu_count(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    runs: list[dict] = []
    launches: list[dict] = []
    t_all = time.monotonic()
    with EmulatedCluster(hosts, rate=bps[0], burst=burst, delay=delay) as cl:
        meta["netem"] = cl.netem
        for rep in range(repeats):
            for rate in rotate(bps, rep):
                cl.shape(rate)
                for n in rotate(list(workers), rep):
                    order = rotate(list(schemes), rep + n)
                    jobs = [{"kind": "train", "id": s, "scheme": s, "steps": steps,
                             "warmup": warmup, "model": model, "batch": batch,
                             "bucket_cap_mb": bucket_cap_mb, "staleness": staleness}
                            for s in order]
                    res = launch(cl, n + 1, jobs, timeout_s=timeout_s)
                    launches.append({"repeat": rep, "rate_Bps": rate, "workers": n,
                                     "wall_s": res["wall_s"], "loadavg": res["loadavg"],
                                     "top_others": res["top_others"]})
                    for idx, s in enumerate(order):
                        row = summarize_job(res["ranks"], idx, warmup, threshold_cores)
                        row.update({"scheme": s, "workers": n, "rate_Bps": rate, "repeat": rep,
                                    "position": idx})
                        if s == "ddp":
                            row["ddp_buckets"] = res["ranks"][1]["jobs"][idx].get("buckets")
                        runs.append(row)
                        log(f"rep {rep} {rate * 8 / 1e6:.0f} Mbit/s n={n} {s:8s} "
                            f"{row['steps_per_s']:8.2f} steps/s  other CPU "
                            f"{row['other_cores']:.2f} cores{'  NOISY' if row['noisy'] else ''}")
    meta["elapsed_s"] = time.monotonic() - t_all
    return {"meta": meta, "runs": runs, "launches": launches}


def summarize_runs(runs: list[dict], include_noisy: bool = True) -> list[dict]:
    """One row per (scheme, workers, rate): median, min and max of ``steps_per_s`` over the
    repeats (noisy repeats dropped when ``include_noisy`` is False, but counted)."""
    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        cells.setdefault((r["scheme"], r["workers"], r["rate_Bps"]), []).append(r)
    out = []
    for (s, n, bps), rows in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        use = [r for r in rows if include_noisy or r["noisy"] is not True] or rows
        v = [r["steps_per_s"] for r in use]
        out.append({"scheme": s, "workers": n, "rate_Bps": bps,
                    "median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v),
                    "noisy": sum(bool(r["noisy"]) for r in rows),
                    "other_cores_max": max(r["other_cores"] for r in rows)})
    return out
