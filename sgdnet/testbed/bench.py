"""Calibration micro-benchmarks, run inside a ``torch.distributed`` group (one process per host).

Used by :mod:`sgdnet.testbed.worker` (jobs ``p2p``, ``incast``, ``costs``, ``profile``, ``allreduce``); they only
use send/recv and a barrier, so they run on the testbed or on any gloo cluster. Every timing is
taken on one process's clock (round trips, or a receiver timing its own arrivals after a
barrier), so hosts need no common clock. The fitting is in :mod:`sgdnet.testbed.fit`; the
turning of these raw records into a cluster file in :mod:`sgdnet.testbed.calibrate`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["run_job", "TAG_DATA", "TAG_ACK"]

TAG_DATA = 2000
TAG_ACK = 2001


def _p2p(job: dict, rank: int) -> dict:
    """Point-to-point sweep and streams for each ``(src, dst)`` pair (src, dst ranks only).

    Sweep: for each size, ``reps`` single messages ``src -> dst``, each after ``gap_s`` of
    idle time (a token bucket refills), each answered by a 4-byte ack; ``src`` records the
    round trip. Stream: ``stream_msgs`` back-to-back messages of ``stream_msg_bytes`` then an
    ack; both sides record wall and process CPU time.
    """
    import torch
    import torch.distributed as dist

    out: dict[str, Any] = {}
    gap = float(job.get("gap_s", 0.02))
    for a, b in job["pairs"]:
        if rank not in (a, b):
            continue
        key = f"{a}->{b}"
        rec: dict[str, Any] = {"sweep": {}, "stream": []}
        ack = torch.zeros(1)
        for size in job["sizes"]:
            buf = torch.ones(max(1, int(size) // 4))
            rtts = []
            r = dist.irecv(buf, a, tag=TAG_DATA) if rank == b else None
            for rep in range(int(job["reps"])):
                if rank == a:
                    ra = dist.irecv(ack, b, tag=TAG_ACK)
                    time.sleep(gap)
                    t0 = time.perf_counter()
                    w = dist.isend(buf, b, tag=TAG_DATA)
                    ra.wait()
                    rtts.append(time.perf_counter() - t0)
                    w.wait()
                else:
                    r.wait()
                    dist.isend(ack, a, tag=TAG_ACK).wait()
                    if rep + 1 < int(job["reps"]):
                        r = dist.irecv(buf, a, tag=TAG_DATA)
            if rank == a:
                rec["sweep"][str(buf.numel() * 4)] = rtts
        m = int(job.get("stream_msgs", 8))
        mb = int(job.get("stream_msg_bytes", 1 << 20))
        for _ in range(int(job.get("stream_reps", 3))):
            bufs = [torch.ones(mb // 4) for _ in range(m)]
            c0 = time.process_time()
            if rank == b:
                rs = [dist.irecv(x, a, tag=TAG_DATA) for x in bufs]
                for x in rs:
                    x.wait()
                dist.isend(ack, a, tag=TAG_ACK).wait()
                rec["stream"].append({"bytes": m * mb, "cpu_s": time.process_time() - c0})
            else:
                ra = dist.irecv(ack, b, tag=TAG_ACK)
                time.sleep(gap)
                c0 = time.process_time()
                t0 = time.perf_counter()
                ws = [dist.isend(x, b, tag=TAG_DATA) for x in bufs]
                for w in ws:
                    w.wait()
                c1 = time.process_time()
                ra.wait()
                rec["stream"].append({"bytes": m * mb, "rtt_s": time.perf_counter() - t0,
                                      "cpu_s": c1 - c0})
        out[key] = rec
    return {"p2p": out}


def _ends(works: list[Any], t0: float) -> list[float]:
    """Seconds from ``t0`` at which each of ``works`` completed (one waiting thread each, so
    a late first work does not hide an early second one)."""
    import threading

    ends = [0.0] * len(works)

    def wait(j: int) -> None:
        works[j].wait()
        ends[j] = time.perf_counter() - t0

    threads = [threading.Thread(target=wait, args=(j,), daemon=True) for j in range(len(works))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ends


def _incast(job: dict, rank: int, world: int) -> dict:
    """``k``-to-1 (``direction="in"``: senders ``1..k`` -> rank 0) or 1-to-``k``
    (``"out"``: rank 0 -> ``1..k``) concurrent transfers of ``nbytes`` each, for ``k`` in
    ``ks``; after a barrier and ``gap_s`` idle. ``in``: rank 0 times each of its receptions from
    the barrier. ``out``: every receiver acks, rank 0 times each ack (minus nothing: the
    calibration subtracts one latency). Each run records every flow's completion (``ends``,
    the spread that :func:`.fit.fit_share_cv` reads) and the last (``seconds``)."""
    import torch
    import torch.distributed as dist

    s = int(job["nbytes"])
    gap = float(job.get("gap_s", 0.05))
    direction = job.get("direction", "in")
    ks = [int(k) for k in job.get("ks", range(1, world))]
    res: list[dict] = []
    ack = torch.zeros(1)
    for k in ks:
        peers = list(range(1, k + 1))
        for _ in range(int(job["reps"])):
            bufs = {p: torch.ones(s // 4) for p in peers} if rank == 0 else None
            mine = torch.ones(s // 4) if rank in peers else None
            pre = []
            if direction == "in" and rank == 0:
                pre = [(p, dist.irecv(bufs[p], p, tag=TAG_DATA)) for p in peers]
            if direction == "out" and rank in peers:
                pre = [(0, dist.irecv(mine, 0, tag=TAG_DATA))]
            if direction == "out" and rank == 0:
                acks = [dist.irecv(torch.zeros(1), p, tag=TAG_ACK) for p in peers]
            time.sleep(gap)
            dist.barrier()
            t0 = time.perf_counter()
            if direction == "in":
                if rank == 0:
                    ends = _ends([w for _p, w in pre], t0)
                    res.append({"k": k, "bytes": k * s, "seconds": max(ends), "ends": ends})
                elif mine is not None:
                    dist.isend(mine, 0, tag=TAG_DATA).wait()
            else:
                if rank == 0:
                    ws = [dist.isend(bufs[p], p, tag=TAG_DATA) for p in peers]
                    ends = _ends(acks, t0)
                    res.append({"k": k, "bytes": k * s, "seconds": max(ends), "ends": ends})
                    for w in ws:
                        w.wait()
                elif pre:
                    pre[0][1].wait()
                    dist.isend(ack, 0, tag=TAG_ACK).wait()
    return {"incast": {"direction": direction, "nbytes": s, "runs": res}} if rank == 0 else {}


def _median_time(fn: Any, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(statistics.median(ts))


def _costs(job: dict, rank: int) -> dict:
    """On rank ``job['rank']`` (default 0): reduce cost (``acc += buf``), the PS update
    (:func:`sgdnet.testbed.ops.ps_apply`) by tensor size, and the local SGD step of the
    model (forward, backward, ``SGD.step``), medians of ``reps`` calls each."""
    if rank != int(job.get("rank", 0)):
        return {}
    import torch
    import torch.nn.functional as F

    from .models import build, param_layers
    from .ops import ps_apply

    reps = int(job.get("reps", 30))
    sizes = [int(s) for s in job.get("sizes", (4096, 65536, 262144, 1 << 20, 4 << 20))]
    model, x, y = build(job["model"], int(job["batch"]))
    layer_sizes = [sum(p.numel() * 4 for p in m.parameters(recurse=False))
                   for m in param_layers(model)]
    reduce, update = {}, {}
    for s in sorted(set(sizes + layer_sizes)):
        acc, buf = torch.ones(s // 4), torch.ones(s // 4)
        for _ in range(3):
            acc.add_(buf)
        reduce[str(s)] = _median_time(lambda acc=acc, buf=buf: acc.add_(buf), reps)
        update[str(s)] = _median_time(lambda acc=acc, buf=buf: ps_apply(acc, buf, 2, 1e-6), reps)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    return {"costs": {"reduce_s": reduce, "update_s": update,
                      "local_step_s": _median_time(step, reps), "model": job["model"],
                      "layer_bytes": layer_sizes}}


def _profile(job: dict, rank: int) -> dict:
    """On rank ``job['rank']`` (default 1): :func:`sgdnet.profiling.profile_module` of the
    model (one thread, like the training processes) and the plain single-process loop's
    step time, ``rounds`` times interleaved; the profile with the median compute time."""
    if rank != int(job.get("rank", 1)):
        return {}
    import torch
    import torch.nn.functional as F

    from ..profiling import profile_module
    from .models import build

    model, x, y = build(job["model"], int(job["batch"]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    profs, loop = [], []
    for _ in range(int(job.get("rounds", 5))):
        profs.append(profile_module(model, (x,), repeats=int(job.get("repeats", 30)), warmup=5,
                                    loss_fn=lambda out: F.cross_entropy(out, y),
                                    name=job["model"], batch_size=int(job["batch"])))

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        loop.append(_median_time(step, int(job.get("repeats", 30))))
    profs.sort(key=lambda p: p.compute_s)
    return {"profile": profs[len(profs) // 2].to_dict(),
            "profile_compute_s": [p.compute_s for p in profs], "loop_step_s": loop}


def _allreduce(job: dict, rank: int, groups: dict) -> dict:
    """The workers' (ranks ``1..world-1``) ``all_reduce`` of each size in ``sizes``, ``reps``
    times, each after a barrier of the workers and ``gap_s`` idle; every worker records its
    own times (gloo's ring: ``2 (n - 1)`` rounds, so a tiny size measures the ring's round
    latency with every host taking part, which a two-host ping-pong does not)."""
    import torch
    import torch.distributed as dist

    if rank == 0:
        return {"allreduce": {}}
    wg = groups["workers"]
    gap = float(job.get("gap_s", 0.005))
    out: dict[str, list[float]] = {}
    for size in job["sizes"]:
        buf = torch.ones(max(1, int(size) // 4))
        ts = []
        for _ in range(int(job["reps"])):
            dist.barrier(group=wg)
            time.sleep(gap)
            t0 = time.perf_counter()
            dist.all_reduce(buf, group=wg)
            ts.append(time.perf_counter() - t0)
        out[str(buf.numel() * 4)] = ts
    return {"allreduce": out}


def run_job(job: dict, rank: int, world: int, groups: dict) -> dict:
    """Dispatch one calibration job; returns what this rank measured."""
    kind = job["kind"]
    if kind == "p2p":
        return _p2p(job, rank)
    if kind == "incast":
        return _incast(job, rank, world)
    if kind == "costs":
        return _costs(job, rank)
    if kind == "profile":
        return _profile(job, rank)
    if kind == "allreduce":
        return _allreduce(job, rank, groups)
    raise ValueError(f"unknown job kind {kind!r}; use train, p2p, incast, costs, profile or "
                     "allreduce")
