"""The quiet gate: how much CPU did everything else use while a measurement ran?

On a shared machine a run is only worth comparing with a prediction when the other tenants left
its processes the CPU they needed. For each job the workers record their own process CPU time at
the job's two barriers and rank 0 reads ``/proc/stat`` there; the difference is the CPU the rest
of the machine used, in cores::

    other_cores = (busy CPU of the machine - CPU of our processes) / wall time

A job is flagged *noisy* when ``other_cores`` exceeds the gate's threshold. The runner also
snapshots every process's CPU time around a launch to name the heaviest other processes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["cpu_jiffies", "loadavg", "other_cores", "process_cpu_snapshot", "top_others",
           "DEFAULT_THRESHOLD_CORES", "advice", "sample_other_cores"]

#: Other tenants' CPU (in cores) above which a job is flagged noisy.
DEFAULT_THRESHOLD_CORES = 0.5

_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_jiffies(stat_text: str | None = None) -> tuple[float, float, float]:
    """``(busy_s, total_s, irq_s)`` of all CPUs since boot, from ``/proc/stat``'s first line.

    ``busy_s`` is process time (user, nice, system, steal) -- what other tenants' programs use;
    ``irq_s`` is hard and soft interrupt time, kept apart because the kernel's packet processing
    for our own traffic (veth, bridge, tbf) is accounted there and not to our processes.
    """
    text = stat_text if stat_text is not None else Path("/proc/stat").read_text()
    first = text.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError(f"/proc/stat does not start with the 'cpu' line: {first[:3]}")
    v = [float(x) for x in first[1:]] + [0.0] * 8
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return ((user + nice + system + steal) / _TCK,
            (user + nice + system + idle + iowait + irq + softirq + steal) / _TCK,
            (irq + softirq) / _TCK)


def loadavg() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages."""
    a, b, c = Path("/proc/loadavg").read_text().split()[:3]
    return float(a), float(b), float(c)


def other_cores(busy0: float, busy1: float, own_cpu_s: float, wall_s: float) -> float:
    """Cores used by everything else over a window (clamped at 0).

    Parameters
    ----------
    busy0, busy1 : float
        Machine busy CPU seconds (``cpu_jiffies()[0]``) at the window's start and end.
    own_cpu_s : float
        CPU seconds our own processes used in the window.
    wall_s : float
        The window's length, seconds (> 0).
    """
    if not wall_s > 0:
        raise ValueError(f"wall_s={wall_s!r} must be > 0")
    return max(0.0, (busy1 - busy0 - own_cpu_s) / wall_s)


def sample_other_cores(seconds: float = 1.0) -> float:
    """Cores the rest of the machine uses over ``seconds`` while this process sleeps (the
    check ``sgdnet calibrate`` makes before it starts)."""
    import time

    b0 = cpu_jiffies()[0]
    c0 = time.process_time()
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return other_cores(b0, cpu_jiffies()[0], time.process_time() - c0, wall)


def advice(cores: float, threshold: float, *, jobs: Sequence[str] = (), when: str = "",
           top: Sequence[Mapping] = ()) -> str:
    """The quiet gate's message when other processes used ``cores`` (> ``threshold``): what
    happened, what it does to the figures and what to do about it."""
    where = f" during {len(jobs)} job(s) ({', '.join(map(str, jobs[:6]))}" \
            f"{', ...' if len(jobs) > 6 else ''})" if jobs else (f" {when}" if when else "")
    heavy = ", ".join(f"{r['name']} (pid {r['pid']}, {float(r['cores']):.2f} cores)"
                      for r in list(top)[:3])
    return (f"quiet gate: other processes used {cores:.2f} cores{where}, above the threshold "
            f"{threshold:g}{'; heaviest: ' + heavy if heavy else ''}. The timings (CPU costs "
            "per byte, share_cv, latency) are then inflated and spread out. What to do: stop "
            "other jobs on this machine and calibrate again; or keep them off the calibration's "
            "cores (e.g. 'taskset -c 1 sgdnet calibrate ...' with the others on core 0; the gate "
            "still counts them, so add --quiet-threshold); or "
            "raise --repeats (e.g. 5) so the intervals in the file's calibration block show "
            "the spread; or, if this load is the normal condition of the cluster you predict, "
            "accept it with --quiet-threshold CORES. Going on: the file records the gate's "
            "verdict and the command exits with status 3 (calibrated, low quality).")


def process_cpu_snapshot() -> dict[int, tuple[str, float]]:
    """``pid -> (command name, CPU seconds so far)`` for every readable process."""
    out: dict[int, tuple[str, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        r = text.rfind(")")
        name = text[text.find("(") + 1:r]
        f = text[r + 2:].split()
        try:
            out[int(d)] = (name, (float(f[11]) + float(f[12])) / _TCK)
        except (IndexError, ValueError):
            continue
    return out


def top_others(before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]],
               wall_s: float, exclude: Iterable[int] = (), k: int = 5
               ) -> list[dict[str, float | str | int]]:
    """The ``k`` other processes that used most CPU between two snapshots, in cores.

    A process that started in between counts with all its CPU time; one that ended in between
    is not seen.
    """
    ex = set(exclude)
    rows = []
    for pid, (name, c1) in after.items():
        if pid in ex:
            continue
        d = c1 - before[pid][1] if pid in before else c1
        if d > 0:
            rows.append({"pid": pid, "name": name, "cores": d / wall_s})
    rows.sort(key=lambda r: -float(r["cores"]))
    return rows[:k]


def descendants(pids: Sequence[int], snapshot_parents: Mapping[int, int] | None = None
                ) -> set[int]:
    """``pids`` and all their descendants (from ``/proc/*/stat`` parent links)."""
    parents = snapshot_parents if snapshot_parents is not None else _parents()
    out = set(pids)
    grew = True
    while grew:
        grew = False
        for c, p in parents.items():
            if p in out and c not in out:
                out.add(c)
                grew = True
    return out


def _parents() -> dict[int, int]:
    res = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                text = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            f = text[text.rfind(")") + 2:].split()
            res[int(d)] = int(f[1])
    return res
