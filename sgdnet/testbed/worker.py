"""The per-host program of the testbed: one process per host, ``torch.distributed`` with gloo.

Run by the runner inside a host's network namespace (or by hand on any cluster, one process per
host)::

    python -m sgdnet.testbed.worker SPEC.json RANK

``SPEC.json`` holds the group (``world``, ``master`` address, ``port``, ``ifname``) and a list of
jobs that every rank runs in order, each between two barriers of the whole group; rank ``r``
writes ``{out_dir}/rank{r}.json``. Rank 0 is the parameter-server host; ranks ``1..world-1`` are
the workers. Jobs:

``train``
    ``scheme`` is one of

    * ``sync-ps``: each layer's gradient is sent to the PS from its gradient hook (wait-free
      backprop); the PS averages a layer once every worker's copy arrived, applies it and sends
      the layer back to every worker; a worker's forward of a layer waits for that layer.
    * ``async-ps``: the PS applies each worker's layer on arrival (one thread per worker) and
      returns it to that worker only.
    * ``ring``: an asynchronous ``all_reduce`` (gloo's ring) per layer, started from the layer's
      gradient hook; the optimizer step waits for all of them.
    * ``ddp``: ``DistributedDataParallel(bucket_cap_mb=...)``.

    * ``ssp``: ``async-ps`` plus the stale-synchronous bound of ``staleness`` ``s`` (Ho et
      al. 2013): after worker ``w``'s ``c``-th step has fully arrived, the PS sends ``w`` a
      small "go" message once every worker's ``c - s``-th step has arrived; ``w`` waits for it
      before its next forward (the parameters themselves are returned at once).

    ``ps_log`` (``sync-ps``): the PS records, per step and layer, when it had every worker's
    push (waited in worker order), when it posted the pulls, and each worker's push time;
    every worker when it posted each push and when each pull was waited for
    (``scripts/testbed_ps_timeline.py``).

    ``gloo_threads`` (``ring``): the all-reduces run on a gloo group of the workers with that
    many work threads instead of ``torch.distributed``'s own group (2 threads: two collectives
    in flight); 1 measures one collective at a time, as ``allreduce(inflight=1)`` models it.

    Every worker records the ``perf_counter`` time at the end of each step (step-end
    timestamps; CLOCK_MONOTONIC, common to all processes of the machine).

    Optional (PS schemes, :mod:`.tasklog`): ``task`` (a built-in task of
    :mod:`sgdnet.accuracy.tasks`, e.g. ``"logreg"``), ``task_lr``, ``task_seed`` -- every worker
    also computes that task's gradient on its own batch stream on the task parameters it last
    pulled and sends it (with their version) beside its layers; the PS applies it as it applies
    the layers and rank 0 records, per update, the time, the worker(s), the version each
    gradient was computed on and the held-out loss. ``slow`` = ``{"rank", "fwd_s", "bwd_s"}``:
    that worker sleeps ``fwd_s[i]`` after layer ``i``'s forward wait and ``bwd_s[i]`` before
    layer ``i``'s push (a slower worker, per layer, as ``Cluster.speeds`` models it).
``p2p``, ``incast``, ``costs``, ``profile``
    Calibration measurements (see :mod:`sgdnet.testbed.bench`).

Every job also records each rank's process CPU time (all threads) at its two barriers, and rank 0
reads ``/proc/stat`` there, for the quiet gate.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
import time
import traceback
from collections import deque
from functools import partial
from pathlib import Path
from typing import Any

from .ops import ps_apply
from .tasklog import TAG_GO, TaskClient, TaskServer

__all__ = ["main", "TAG_PULL"]

#: Tag offset of parameter pulls (pushes use the layer index as tag).
TAG_PULL = 1000


def _flat_params(layer: Any) -> Any:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in layer.parameters(recurse=False)])


def _load_flat(layer: Any, flat: Any) -> None:
    import torch

    off = 0
    with torch.no_grad():
        for p in layer.parameters(recurse=False):
            n = p.numel()
            p.copy_(flat[off:off + n].view_as(p))
            off += n


# --------------------------------------------------------------------------- PS schemes
class _PSClient:
    """Worker side of sync/async PS: push a layer from its gradient hook, pull before forward."""

    def __init__(self, model: Any, ps: int, task: TaskClient | None = None,
                 slow: dict | None = None, ssp: bool = False, log: bool = False):
        from .models import param_layers

        self.ps = ps
        self.task = task
        self.slow = slow
        self.ssp = ssp
        self.go: Any = None
        self.layers = param_layers(model)
        self.params = [list(m.parameters(recurse=False)) for m in self.layers]
        self.left = [len(p) for p in self.params]
        self.pulls: list[Any] = [None] * len(self.layers)
        self.sends: list[Any] = [None] * len(self.layers)
        self.handles = []
        self.log = log  # ``ps_log``: record the two below
        self.pull_log: list[tuple[int, float]] = []  # (layer, its pull waited for)
        self.push_log: list[tuple[int, float]] = []  # (layer, its push posted)
        for i, (m, ps_) in enumerate(zip(self.layers, self.params)):
            for p in ps_:
                self.handles.append(p.register_post_accumulate_grad_hook(partial(self._ready, i)))
            self.handles.append(m.register_forward_pre_hook(partial(self._before, i)))

    def _ready(self, i: int, _p: Any) -> None:
        import torch
        import torch.distributed as dist

        self.left[i] -= 1
        if self.left[i]:
            return
        self.left[i] = len(self.params[i])
        if self.slow is not None:
            time.sleep(self.slow["bwd_s"][i])
        if self.task is not None and i == len(self.layers) - 1:  # the first layer pushed
            self.task.push()
        if self.ssp and i == 0:  # the last layer pushed: the step is complete
            gb = torch.zeros(1)
            self.go = (dist.irecv(gb, self.ps, tag=TAG_GO), gb)
        flat = torch.cat([q.grad.reshape(-1) for q in self.params[i]])
        if self.sends[i] is not None:
            self.sends[i][0].wait()
        if self.log:
            self.push_log.append((i, time.perf_counter()))
        self.sends[i] = (dist.isend(flat, self.ps, tag=i), flat)
        buf = torch.empty_like(flat)
        self.pulls[i] = (dist.irecv(buf, self.ps, tag=TAG_PULL + i), buf)

    def _before(self, i: int, _m: Any, _inp: Any) -> None:
        if i == 0 and self.go is not None:
            self.go[0].wait()
            self.go = None
        if i == 0 and self.task is not None:
            self.task.pull()
        pp = self.pulls[i]
        if pp is not None:
            pp[0].wait()
            if self.log:
                self.pull_log.append((i, time.perf_counter()))
            _load_flat(self.layers[i], pp[1])
            self.pulls[i] = None
        if self.slow is not None and _m is not None:
            time.sleep(self.slow["fwd_s"][i])

    def finish(self) -> None:
        for i in range(len(self.layers)):
            self._before(i, None, None)
            if self.sends[i] is not None:
                self.sends[i][0].wait()
                self.sends[i] = None
        for h in self.handles:
            h.remove()


def _ps_server(model: Any, workers: list[int], steps: int, lr: float, sync: bool,
               task: TaskServer | None = None, staleness: int | None = None,
               log: list | None = None) -> None:
    import torch
    import torch.distributed as dist

    from .models import param_layers

    flats = [_flat_params(m).clone() for m in param_layers(model)]
    L = len(flats)

    def post(w: int, i: int) -> tuple[Any, Any]:
        buf = torch.empty_like(flats[i])
        return dist.irecv(buf, w, tag=i), buf

    if sync:
        pend = {(w, i): deque([post(w, i)]) for w in workers for i in range(L)}
        sends: list[list[Any]] = [[] for _ in range(L)]
        got_at = dict.fromkeys(workers, 0.0)  # when the PS had worker w's push (waited in order)
        for step in range(steps):
            if task is not None:
                task.sync_round(workers)
            for i in reversed(range(L)):
                acc = None
                for w in workers:
                    work, buf = pend[(w, i)].popleft()
                    work.wait()
                    if log is not None:
                        got_at[w] = time.perf_counter()
                    if step + 1 < steps:
                        pend[(w, i)].append(post(w, i))
                    acc = buf if acc is None else acc.add_(buf)
                t_in = time.perf_counter() if log is not None else 0.0
                for s in sends[i]:  # the previous round's pulls of this layer are through
                    s.wait()
                ps_apply(flats[i], acc, len(workers), lr)
                sends[i] = [dist.isend(flats[i], w, tag=TAG_PULL + i) for w in workers]
                if log is not None:  # (step, layer, every push in, pulls posted, each push in)
                    log.append((step, i, t_in, time.perf_counter(), [got_at[w] for w in workers]))
        for ss in sends:
            for s in ss:
                s.wait()
        return

    lock = threading.Lock()
    errors: list[str] = []
    cond = threading.Condition()
    done = dict.fromkeys(workers, 0)
    gos: dict[int, Any] = {}

    def serve(w: int) -> None:
        try:
            nxt = {i: post(w, i) for i in range(L)}
            out: list[Any] = [None] * L
            for step in range(steps):
                if task is not None:
                    task.async_update(w, lock)
                for i in reversed(range(L)):
                    work, buf = nxt[i]
                    work.wait()
                    if step + 1 < steps:
                        nxt[i] = post(w, i)
                    with lock:
                        ps_apply(flats[i], buf, 1, lr)
                        snap = flats[i].clone()
                    if out[i] is not None:
                        out[i][0].wait()
                    out[i] = (dist.isend(snap, w, tag=TAG_PULL + i), snap)
                if staleness is not None:
                    with cond:
                        done[w] = step + 1
                        cond.notify_all()
                        while step + 1 < steps and min(done.values()) < step + 1 - staleness:
                            cond.wait()
                    if w in gos:
                        gos[w][0].wait()
                    g = torch.ones(1)
                    gos[w] = (dist.isend(g, w, tag=TAG_GO), g)
            if w in gos:
                gos[w][0].wait()
            for o in out:
                if o is not None:
                    o[0].wait()
        except BaseException:  # noqa: BLE001 - re-raised by the main thread
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("async PS thread failed:\n" + errors[0])


# --------------------------------------------------------------------------- train job
def _train(job: dict, rank: int, world: int, groups: dict) -> dict:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from .models import build, param_layers

    scheme = job["scheme"]
    steps, warmup = int(job["steps"]), int(job["warmup"])
    total = steps + warmup
    lr = float(job.get("lr", 0.01))
    model, x, y = build(job["model"], int(job["batch"]), seed=int(job.get("seed", 0)))
    workers = list(range(1, world))
    out: dict[str, Any] = {"scheme": scheme}
    if scheme in ("sync-ps", "async-ps", "ssp"):
        tname = job.get("task")
        ssp = scheme == "ssp"
        if rank == 0:
            ts = None if not tname else TaskServer(tname, float(job["task_lr"]))
            log = [] if job.get("ps_log") else None
            _ps_server(model, workers, total, lr, sync=scheme == "sync-ps", task=ts,
                       staleness=int(job["staleness"]) if ssp else None, log=log)
            if log is not None:
                out["ps_log"] = log
            if ts is not None:
                out["task_log"] = ts.log()
            return out
        tc = None if not tname else TaskClient(tname, rank, 0, int(job["batch"]),
                                               int(job.get("task_seed", 0)))
        slow = job.get("slow")
        slow = slow if slow is not None and int(slow["rank"]) == rank else None
        client = _PSClient(model, 0, tc, slow, ssp, log=bool(job.get("ps_log")))
        stamps = []
        out["t_start"] = time.perf_counter()
        for _ in range(total):
            for p in model.parameters():
                p.grad = None
            F.cross_entropy(model(x), y).backward()
            stamps.append(time.perf_counter())
        client.finish()
        out["stamps"] = stamps
        if client.log:
            out["pull_log"] = client.pull_log
            out["push_log"] = client.push_log
        return out
    if rank == 0:
        return out  # the PS host idles during all-reduce schemes
    wg = groups["workers"]
    n = len(workers)
    if scheme == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, process_group=wg, bucket_cap_mb=float(job["bucket_cap_mb"]))
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        stamps = []
        for _ in range(total):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(x), y).backward()
            opt.step()
            stamps.append(time.perf_counter())
        out["stamps"] = stamps
        out["buckets"] = _ddp_buckets(net)
        return out
    if scheme != "ring":
        raise ValueError(f"unknown scheme {scheme!r}; use sync-ps, async-ps, ssp, ring or ddp")
    layers = param_layers(model)
    params = [list(m.parameters(recurse=False)) for m in layers]
    left = [len(p) for p in params]
    inflight: list[tuple[int, Any, Any]] = []
    own = None  # with gloo_threads: a group of its own with that many threads
    if job.get("gloo_threads") is not None:
        own = _gloo_group(rank, world, int(job["gloo_threads"]), job.get("id") or "ring")

    def ready(i: int, _p: Any) -> None:
        left[i] -= 1
        if left[i]:
            return
        left[i] = len(params[i])
        flat = torch.cat([q.grad.reshape(-1) for q in params[i]])
        work = (own.allreduce([flat]) if own is not None
                else dist.all_reduce(flat, group=wg, async_op=True))
        inflight.append((i, work, flat))

    hooks = [p.register_post_accumulate_grad_hook(partial(ready, i))
             for i, ps_ in enumerate(params) for p in ps_]
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    stamps = []
    for _ in range(total):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        for i, work, flat in inflight:
            work.wait()
            off = 0
            for q in params[i]:
                k = q.numel()
                q.grad.copy_(flat[off:off + k].view_as(q)).div_(n)
                off += k
        inflight.clear()
        opt.step()
        stamps.append(time.perf_counter())
    for h in hooks:
        h.remove()
    out["stamps"] = stamps
    return out


def _gloo_group(rank: int, world: int, threads: int, tag: str) -> Any:
    """The workers' (ranks ``1..world-1``) gloo process group with ``threads`` work threads
    (``torch.distributed``'s own groups have ``ProcessGroupGloo._Options()._threads`` == 2: two
    collectives in flight at once), on this host's ``eth0``."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    opts = dist.ProcessGroupGloo._Options()
    opts._threads = threads
    opts._devices = [dist.ProcessGroupGloo.create_device(interface="eth0")]
    opts._timeout = datetime.timedelta(seconds=120)
    store = dist.PrefixStore(f"gloo{threads}/{tag}", c10d._get_default_store())
    return dist.ProcessGroupGloo(store, rank - 1, world - 1, opts)


def _ddp_buckets(net: Any) -> list[int] | None:
    """Bytes of DDP's buckets after its rebuild (the first iterations use a 1 MiB first
    bucket), from its logging data (None if this torch does not say)."""
    try:
        data = net._get_ddp_logging_data()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes")
        if isinstance(sizes, str):
            return [int(s) for s in sizes.split(",") if s.strip()]
        return list(sizes) if sizes else None
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


# --------------------------------------------------------------------------- main
def _stat_busy() -> tuple[float, float]:
    from .quiet import cpu_jiffies

    return cpu_jiffies()


def run(spec: dict, rank: int) -> dict:
    """Join the group described by ``spec``, run its jobs in order, return this rank's record."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(spec.get("threads", 1)))
    torch.set_num_interop_threads(1)
    world = int(spec["world"])
    dist.init_process_group(
        "gloo", init_method=f"tcp://{spec['master']}:{int(spec['port'])}", rank=rank,
        world_size=world, timeout=datetime.timedelta(seconds=float(spec.get("timeout_s", 120))))
    rec: dict[str, Any] = {"rank": rank, "world": world, "pid": os.getpid(), "jobs": []}
    # the first optimizer a process builds imports torch._dynamo (1-2 s of CPU, py-spy): done
    # here, before the first job's barrier, it is charged to no job's CPU time or quiet gate
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    try:
        groups = {"workers": dist.new_group(list(range(1, world)))}
        for job in spec["jobs"]:
            dist.barrier()
            jr: dict[str, Any] = {"id": job.get("id"), "kind": job["kind"]}
            jr["cpu0"] = time.process_time()
            jr["t0"] = time.perf_counter()
            if rank == 0:
                jr["stat0"] = _stat_busy()
                jr["loadavg0"] = open("/proc/loadavg").read().split()[:3]
            if job["kind"] == "train":
                jr.update(_train(job, rank, world, groups))
            else:
                from . import bench

                jr.update(bench.run_job(job, rank, world, groups))
            dist.barrier()
            jr["t1"] = time.perf_counter()
            jr["cpu1"] = time.process_time()
            if rank == 0:
                jr["stat1"] = _stat_busy()
                jr["loadavg1"] = open("/proc/loadavg").read().split()[:3]
            rec["jobs"].append(jr)
    finally:
        dist.destroy_process_group()
    return rec


def main(argv: list[str] | None = None) -> int:
    """``python -m sgdnet.testbed.worker SPEC.json RANK``; writes ``out_dir/rank{RANK}.json``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m sgdnet.testbed.worker SPEC.json RANK", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    rank = int(argv[1])
    out = Path(spec["out_dir"]) / f"rank{rank}.json"
    if spec.get("ifname"):
        os.environ["GLOO_SOCKET_IFNAME"] = spec["ifname"]
    try:
        rec = run(spec, rank)
    except BaseException:  # noqa: BLE001 - the runner reads the error file
        (Path(spec["out_dir"]) / f"rank{rank}.error").write_text(traceback.format_exc())
        return 1
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec))
    tmp.rename(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
