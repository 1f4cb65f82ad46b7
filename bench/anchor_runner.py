"""sgdnet as an ``--extra`` runner of the speed anchors (``/work/shared/anchors/bench.py``).

The anchors' ``model.build_ps_net(params)`` returns a flat-array Petri net (CSR input and output
arcs, one FIFO resource per transition, log-normal ``exp(mu + sigma Z)`` durations, marker
transitions closing worker steps). :func:`to_sgdnet` translates that *data* into a
:class:`sgdnet.Net` arc by arc, so sgdnet simulates the very net the C and numba anchors run
(same places, arcs, resources, means and CVs; its own random streams, so trajectories differ). :func:`run` is the
``fn(params, t_end, seed) -> dict(events, wall_s, now)`` hook the anchors' harness times:

```bash
cp -r /work/shared/anchors /tmp/anchors && cd /tmp/anchors    # the C library is built there
PYTHONPATH=/path/to/worktree:/path/to/worktree/bench python bench.py --what table \
    --modes sync --N 4,16,64 --reps 5 --min-s 2 --out /tmp/anchors_bench.json \
    --extra anchor_runner:run,anchor_runner:run_generic
```

``events`` is the number of transition completions sgdnet made (``Result.events``: the same unit
as the anchors' op completions) and ``wall_s`` the wall time of ``simulate()`` on one core
(``parallel=False``, one replication), validation and Result building included, as the other
implementations are timed by wall clock too.
"""

from __future__ import annotations

import math
import time

import sgdnet as sg

_NETS: dict = {}


def to_sgdnet(anet, name: str = "anchor") -> sg.Net:
    """The anchors' flat-array net ``anet`` (``model.Net``) as a :class:`sgdnet.Net`."""
    net = sg.Net(name)
    for r in range(anet.n_r):
        net.resource(f"r{r}", capacity=int(anet.cap[r]))
    for p in range(anet.n_p):
        net.place(f"p{p}", tokens=int(anet.m0[p]))
    for t in range(anet.n_t):
        a, b = int(anet.in_ptr[t]), int(anet.in_ptr[t + 1])
        ins = {f"p{int(anet.in_place[k])}": int(anet.in_w[k]) for k in range(a, b)}
        a, b = int(anet.out_ptr[t]), int(anet.out_ptr[t + 1])
        outs = {f"p{int(anet.out_place[k])}": int(anet.out_w[k]) for k in range(a, b)}
        mu, sigma = float(anet.mu[t]), float(anet.sigma[t])
        dur = sg.LogNormal(mean=math.exp(mu + 0.5 * sigma * sigma),
                           cv=math.sqrt(math.expm1(sigma * sigma)))
        res = [f"r{int(anet.res[t])}"] if anet.res[t] >= 0 else []
        if res and int(anet.res_w[t]) != 1:
            raise ValueError("the translation handles resource weight 1 only")
        net.transition(f"t{t}", dur, inputs=ins, outputs=outs, resources=res,
                       tags={"step": bool(anet.marker[t])})
    return net


def run_generic(p, t_end: float, seed: int = 1) -> dict:
    """:func:`run` on the generic engine (``engine="generic"``), to report both engines."""
    return run(p, t_end, seed, engine="generic")


def run(p, t_end: float, seed: int = 1, engine: str = "auto") -> dict:
    """Simulate about ``t_end`` seconds of the anchor model ``p`` (``model.Params``) once
    (``engine="auto"``: the FIFO fast path, which this model qualifies for)."""
    from model import build_ps_net  # the anchors' module (on sys.path when bench.py runs)

    key = (p.N, p.mode)
    if key not in _NETS:
        _NETS[key] = to_sgdnet(build_ps_net(p), f"anchor-{p.mode}-{p.N}")
        for e in ("auto", "generic"):
            sg.simulate(_NETS[key], steps=10 * p.N, warmup=0, replications=1, seed=0,
                        parallel=False, engine=e)
    net = _NETS[key]
    bound = p.throughput_bound()[0]  # per-worker steps/s, an upper bound
    steps = max(10, int(t_end * bound * p.N))
    t0 = time.perf_counter()
    r = sg.simulate(net, steps=steps, warmup=0, replications=1, seed=seed, parallel=False,
                    samples=False, engine=engine)
    wall = time.perf_counter() - t0
    return dict(events=int(r.events[0]), wall_s=wall, now=float(r.t1[0]),
                per_worker_steps_per_s=float(r.throughput.mean) / p.N)
