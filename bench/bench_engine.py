"""Engine benchmark (issue #2): sgdnet's Numba engine against an idiomatic SimPy program.

The bench model is synchronous data-parallel SGD on a parameter server with per-layer
operations. Each of ``N`` workers runs, per step, the forward pass of layers ``0..L-1`` then the
backward pass of layers ``L-1..0`` on its GPU (a FIFO resource). The gradient of layer ``l`` is
pushed as soon as its backward pass ends: over the worker's uplink, then over the PS downlink
(both FIFO). When all ``N`` gradients of layer ``l`` arrived, the PS updates it (on the PS CPU),
and every worker pulls it back: over the PS uplink, then over its own downlink. The forward pass
of layer ``l`` of the next step waits for that pull. A step is counted at each completion of the
update of layer 0 (the last one of a step), so throughput is in steps per second.

The same model is written twice, once as an sgdnet :class:`~sgdnet.net.Net`
(:func:`build_bench_net`) and once as a SimPy program (:func:`simpy_run`), from the same
parameter table (:func:`bench_params`). The script prints, for N = 4, 16, 64 (``--quick``: 2, 4,
8), the mean throughput of both (they must agree within their CIs) and, as the headline since
the target of issue #2 is per core, the transition completions per CPU-second of each on ONE core
(sgdnet with ``parallel=False``, both timed with this process's CPU time, median of 5 timed
runs) and their ratio; then the JIT compile time (first call in a fresh process with an empty
Numba cache vs a warm cache), the peak memory one replication adds at 1,000 and 100,000 steps
with and without ``samples`` (it must not grow with the steps without them), and the speed-up of
the replications from one core (``parallel=False``) to the engine's thread pool (2 cores here). Run
``python bench/bench_engine.py --help``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))

# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class BenchParams:
    """Per-layer means (seconds) and the shape of the duration laws, shared by both models."""

    n_workers: int
    n_layers: int
    fwd: tuple[float, ...]
    bwd: tuple[float, ...]
    push_up: tuple[float, ...]  # worker uplink time of layer l's gradient
    push_down: tuple[float, ...]  # PS downlink time
    update: tuple[float, ...]
    pull_up: tuple[float, ...]  # PS uplink time
    pull_down: tuple[float, ...]  # worker downlink time
    dist: str = "lognormal"  # or "exp"
    cv: float = 0.3  # for lognormal


WORKER_BW, PS_BW = 1.25e9, 5.0e9  # bytes/s: 10 Gbps workers, 40 Gbps PS


def bench_params(n_workers: int, n_layers: int = 20, seed: int = 0, dist: str = "lognormal",
                 cv: float = 0.3) -> BenchParams:
    """Draw the layer table of the bench model (deterministic in ``seed``)."""
    if dist not in ("lognormal", "exp"):
        raise ValueError(f"dist={dist!r}: use 'lognormal' or 'exp'")
    rng = np.random.default_rng(seed)
    fwd = rng.uniform(0.5e-3, 2.0e-3, n_layers)  # seconds
    bwd = 2.0 * fwd
    grad = rng.uniform(0.1e6, 4.0e6, n_layers)  # bytes
    t_w, t_ps = grad / WORKER_BW, grad / PS_BW
    update = 2e-10 * grad + 20e-6  # 0.2 ms per MB + 20 us per layer
    f = lambda a: tuple(float(x) for x in a)  # noqa: E731
    return BenchParams(n_workers, n_layers, f(fwd), f(bwd), f(t_w), f(t_ps), f(update), f(t_ps),
                       f(t_w), dist, cv)


def _dist(p: BenchParams, mean: float):
    from sgdnet.dists import Exponential, LogNormal

    return Exponential(mean) if p.dist == "exp" else LogNormal(mean, p.cv)


# --------------------------------------------------------------------------- sgdnet model


def build_bench_net(n_workers: int, n_layers: int = 20, seed: int = 0, dist: str = "lognormal",
                    cv: float = 0.3, network: str = "fifo"):
    """The bench model as an sgdnet Net, with ``6 N L + L`` transitions (``4 N L + L`` on flows).

    Parameters
    ----------
    n_workers, n_layers : int
        Workers ``N`` and layers ``L``.
    seed : int
        Seed of the layer table (:func:`bench_params`), not of the simulation.
    dist, cv : str, float
        ``"lognormal"`` (coefficient of variation ``cv``) or ``"exp"`` durations.
    network : {"fifo", "flows"}
        ``"fifo"``: every link a FIFO resource, a push (pull) two stages, one per link (the model
        SimPy plays). ``"flows"``: links are made by :meth:`~sgdnet.net.Net.link` and a push (pull) is
        one transfer over both links, on the worker's connection to (from) the PS, its bytes
        with the same law; the max-min sharing of the PS links replaces the FIFO queues.
    """
    from sgdnet.net import Net

    if network not in ("fifo", "flows"):
        raise ValueError(f"network={network!r}: use 'fifo' or 'flows'")
    p = bench_params(n_workers, n_layers, seed, dist, cv)
    N, L = n_workers, n_layers
    net = Net(f"bench-ps-{N}x{L}" + ("-flows" if network == "flows" else ""))
    net.meta["bench_params"] = p
    link = net.link if network == "flows" else (lambda name, bw, **tags: net.resource(name, **tags))
    link("ps_down", PS_BW, kind="nic_down", host="ps")
    link("ps_up", PS_BW, kind="nic_up", host="ps")
    net.resource("ps_cpu", kind="ps_cpu", host="ps")
    for w in range(N):
        net.resource(f"gpu{w}", kind="gpu", host=f"worker{w}")
        link(f"up{w}", WORKER_BW, kind="nic_up", host=f"worker{w}")
        link(f"down{w}", WORKER_BW, kind="nic_down", host=f"worker{w}")
        net.place(f"w{w}.ready", 1, worker=w)  # backward of the previous step is over
        for ly in range(L):
            net.place(f"w{w}.params{ly}", 1, worker=w)  # layer l's parameters are current
            net.place(f"w{w}.fdone{ly}", 0, worker=w)
            net.place(f"w{w}.bdone{ly}", 0, worker=w)
            net.place(f"w{w}.grad{ly}", 0, worker=w)
            net.place(f"w{w}.sent{ly}", 0, worker=w)
            net.place(f"w{w}.arrived{ly}", 0, worker=w)
            net.place(f"w{w}.updated{ly}", 0, worker=w)
            net.place(f"w{w}.inflight{ly}", 0, worker=w)
    for w in range(N):
        gpu = f"gpu{w}"
        for ly in range(L):
            tag = {"worker": w, "layer": ly}
            ins = {f"w{w}.params{ly}": 1, (f"w{w}.fdone{ly - 1}" if ly else f"w{w}.ready"): 1}
            net.transition(f"w{w}.fwd{ly}", _dist(p, p.fwd[ly]), inputs=ins,
                           outputs={f"w{w}.fdone{ly}": 1}, resources=[gpu],
                           tags={**tag, "kind": "compute"})
        for ly in reversed(range(L)):
            tag = {"worker": w, "layer": ly}
            src = f"w{w}.fdone{ly}" if ly == L - 1 else f"w{w}.bdone{ly + 1}"
            nxt = f"w{w}.bdone{ly}" if ly else f"w{w}.ready"
            net.transition(f"w{w}.bwd{ly}", _dist(p, p.bwd[ly]), inputs={src: 1},
                           outputs={nxt: 1, f"w{w}.grad{ly}": 1}, resources=[gpu],
                           tags={**tag, "kind": "compute"})
            if network == "flows":
                net.transfer(f"w{w}.push{ly}", _dist(p, p.push_up[ly] * WORKER_BW),
                             [f"up{w}", "ps_down"], inputs={f"w{w}.grad{ly}": 1},
                             outputs={f"w{w}.arrived{ly}": 1}, connection=f"w{w}->ps",
                             tags={**tag, "kind": "comm"})
                continue
            net.transition(f"w{w}.push_up{ly}", _dist(p, p.push_up[ly]), inputs={f"w{w}.grad{ly}": 1},
                           outputs={f"w{w}.sent{ly}": 1}, resources=[f"up{w}"], servers=math.inf,
                           tags={**tag, "kind": "comm"})
            net.transition(f"w{w}.push_down{ly}", _dist(p, p.push_down[ly]),
                           inputs={f"w{w}.sent{ly}": 1}, outputs={f"w{w}.arrived{ly}": 1},
                           resources=["ps_down"], servers=math.inf, tags={**tag, "kind": "comm"})
    for ly in reversed(range(L)):
        net.transition(f"update{ly}", _dist(p, p.update[ly]),
                       inputs={f"w{w}.arrived{ly}": 1 for w in range(N)},
                       outputs={f"w{w}.updated{ly}": 1 for w in range(N)}, resources=["ps_cpu"],
                       tags={"layer": ly, "kind": "update", "step": ly == 0})
    for w in range(N):
        for ly in reversed(range(L)):
            tag = {"worker": w, "layer": ly, "kind": "comm"}
            if network == "flows":
                net.transfer(f"w{w}.pull{ly}", _dist(p, p.pull_up[ly] * PS_BW), ["ps_up", f"down{w}"],
                             inputs={f"w{w}.updated{ly}": 1}, outputs={f"w{w}.params{ly}": 1},
                             connection=f"ps->w{w}", tags=tag)
                continue
            net.transition(f"w{w}.pull_up{ly}", _dist(p, p.pull_up[ly]),
                           inputs={f"w{w}.updated{ly}": 1}, outputs={f"w{w}.inflight{ly}": 1},
                           resources=["ps_up"], servers=math.inf, tags=tag)
            net.transition(f"w{w}.pull_down{ly}", _dist(p, p.pull_down[ly]),
                           inputs={f"w{w}.inflight{ly}": 1}, outputs={f"w{w}.params{ly}": 1},
                           resources=[f"down{w}"], servers=math.inf, tags=tag)
    return net


# --------------------------------------------------------------------------- SimPy model


def simpy_run(p: BenchParams, steps: int, warmup: int, seed: int) -> dict:
    """One replication of the bench model in SimPy.

    Returns a dict with ``throughput`` (steps/s over the counted window) and ``completions``
    (operations completed over the whole run).
    """
    import simpy

    rng = np.random.default_rng(seed)
    if p.dist == "exp":
        def draw(mean):
            return rng.exponential(mean)
    else:
        s2 = math.log1p(p.cv**2)
        sig = math.sqrt(s2)

        def draw(mean):
            return rng.lognormal(math.log(mean) - 0.5 * s2, sig)

    env = simpy.Environment()
    N, L = p.n_workers, p.n_layers
    gpu = [simpy.Resource(env, 1) for _ in range(N)]
    up = [simpy.Resource(env, 1) for _ in range(N)]
    down = [simpy.Resource(env, 1) for _ in range(N)]
    ps_down, ps_up, ps_cpu = (simpy.Resource(env, 1) for _ in range(3))
    params = [[simpy.Store(env) for _ in range(L)] for _ in range(N)]  # a token = layer is current
    for w in range(N):
        for ly in range(L):
            params[w][ly].put(True)
    arrived = [simpy.Store(env) for _ in range(L)]  # one item per pushed gradient
    state = {"completions": 0, "steps": 0, "t0": 0.0, "t1": math.nan}
    done = env.event()

    def op(res, mean):
        with res.request() as req:
            yield req
            yield env.timeout(draw(mean))
        state["completions"] += 1

    def push(w, ly):
        yield from op(up[w], p.push_up[ly])
        yield from op(ps_down, p.push_down[ly])
        yield arrived[ly].put(w)

    def pull(w, ly):
        yield from op(ps_up, p.pull_up[ly])
        yield from op(down[w], p.pull_down[ly])
        yield params[w][ly].put(True)

    def server(ly):
        while True:
            for _ in range(N):
                yield arrived[ly].get()
            yield from op(ps_cpu, p.update[ly])
            if ly == 0:
                state["steps"] += 1
                if state["steps"] == warmup:
                    state["t0"] = env.now
                if state["steps"] == warmup + steps:
                    state["t1"] = env.now
                    done.succeed()
            for w in range(N):
                env.process(pull(w, ly))

    def worker(w):
        while True:
            for ly in range(L):
                yield params[w][ly].get()
                yield from op(gpu[w], p.fwd[ly])
            for ly in reversed(range(L)):
                yield from op(gpu[w], p.bwd[ly])
                env.process(push(w, ly))

    for ly in range(L):
        env.process(server(ly))
    for w in range(N):
        env.process(worker(w))
    env.run(until=done)
    return {"throughput": steps / (state["t1"] - state["t0"]), "completions": state["completions"]}


def simpy_replications(p: BenchParams, steps: int, warmup: int, replications: int, seed: int):
    """Per-replication throughputs (steps/s) and total completions of the SimPy model."""
    seeds = np.random.SeedSequence(seed).generate_state(replications)
    runs = [simpy_run(p, steps, warmup, int(s)) for s in seeds]
    return np.array([r["throughput"] for r in runs]), sum(r["completions"] for r in runs)


def mean_ci(x, level=0.95):
    """Mean and Student-t half-width of the replication samples ``x``."""
    from scipy import stats

    x = np.asarray(x, float)
    hw = stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(hw)


# --------------------------------------------------------------------------- measurements


def _completions(result) -> int:
    """Transition completions of a Result over all replications (warm-up included)."""
    events = getattr(result, "events", None)
    if events is not None:
        return int(np.sum(events))
    counted = sum(int(np.sum(result.firings(t))) for t in result.transition_names)
    return int(round(counted * (result.warmup + result.steps) / result.steps))


def time_sgdnet(net, steps, warmup, replications, seed, runs=5, parallel=False):
    """Median time of ``runs`` calls of ``simulate`` (each with ``replications``), the last
    Result and its completions. With ``parallel=False`` (the default: one core) the replications
    run one after the other on one thread (the engine's worker thread, so that Ctrl-C reaches the
    caller) and the time is this process's CPU time (``time.process_time``: that one thread plus
    the caller waiting for it, not what other processes take from the core); with
    ``parallel=True`` it is wall time."""
    import sgdnet

    clock = time.perf_counter if parallel else time.process_time
    cn = sgdnet.compile_net(net)
    sgdnet.simulate(cn, steps=10, warmup=0, replications=1, seed=0, parallel=parallel)  # JIT
    times, res = [], None
    for k in range(runs):
        t = clock()
        res = sgdnet.simulate(cn, steps=steps, warmup=warmup, replications=replications,
                              seed=seed + k, parallel=parallel)
        times.append(clock() - t)
    return res, statistics.median(times), _completions(res)


def time_simpy(p, steps, warmup, replications, seed, runs=5):
    """Like :func:`time_sgdnet` for the SimPy program (one core, this process's CPU time)."""
    times, thr, comp = [], None, 0
    for k in range(runs):
        t = time.process_time()
        thr, comp = simpy_replications(p, steps, warmup, replications, seed + k)
        times.append(time.process_time() - t)
    return thr, statistics.median(times), comp


_JIT_SNIPPET = r"""
import json, sys, time
sys.path.insert(0, {bench!r})
from bench_engine import build_bench_net
net = build_bench_net(2, 4)
t = time.perf_counter()
import sgdnet
sgdnet.simulate(net, steps=20, warmup=0, replications=1, seed=0, parallel={parallel})
print(json.dumps(time.perf_counter() - t))
"""


def jit_times(parallel=True) -> tuple[float, float]:
    """First-call time in a fresh process with an empty Numba cache, then with the warm cache."""
    code = _JIT_SNIPPET.format(bench=_BENCH_DIR, parallel=parallel)
    with tempfile.TemporaryDirectory() as cache:
        return _run_snippet(code, NUMBA_CACHE_DIR=cache), _run_snippet(code, NUMBA_CACHE_DIR=cache)


def _run_snippet(code: str, **env_extra: str):
    """Run ``code`` in a fresh Python process that imports this checkout's sgdnet; return the
    JSON value printed on its last line."""
    env = {**os.environ, **env_extra}
    env["PYTHONPATH"] = os.path.dirname(_BENCH_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


_MEM_SNIPPET = r"""
import json, os, sys, threading
sys.path.insert(0, {bench!r})
from bench_engine import build_bench_net
import sgdnet
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
net = sgdnet.compile_net(build_bench_net({n}, {layers}, dist={dist!r}))
sgdnet.simulate(net, steps=20, warmup=0, replications=1, seed=0, samples={samples}, parallel=False)
before = rss()
peak = [before]
done = threading.Event()
def watch():
    while not done.wait(0.0005):
        peak[0] = max(peak[0], rss())
w = threading.Thread(target=watch)
w.start()
res = sgdnet.simulate(net, steps={steps}, warmup=0, replications=1, seed=1, samples={samples},
                      parallel=False)
done.set()
w.join()
print(json.dumps(max(peak[0], rss()) - before))
"""


def memory_growth(n: int, layers: int, dist: str, steps_list, samples: bool) -> list[tuple[int, float]]:
    """Resident memory added by one ``simulate`` call of ``steps`` steps (bytes; the peak while
    it runs, read from ``/proc/self/statm`` by a watcher thread every 0.5 ms since the kernel
    releases the GIL, with the Result still held), in a fresh process per size after a short
    warm-up call (JIT, imports and the compiled net already resident), so that what grows with
    the number of steps shows and nothing else does. Linux only."""
    return [(steps, float(_run_snippet(_MEM_SNIPPET.format(bench=_BENCH_DIR, n=n, layers=layers, dist=dist,
                                                           steps=steps, samples=samples))))
            for steps in steps_list]


def thread_speedup(net, steps, warmup, replications, seed, runs=5) -> tuple[float, float, int]:
    """Median wall time of ``replications`` on one core (``parallel=False``) and on the engine's
    thread pool (``parallel=True``, one thread per available CPU), and that thread count."""
    import sgdnet
    from sgdnet.engine.driver import n_threads

    cn = sgdnet.compile_net(net)
    out = []
    for parallel in (False, True):
        sgdnet.simulate(cn, steps=10, warmup=0, replications=2, seed=0, parallel=parallel)
        walls = []
        for k in range(runs):
            t = time.perf_counter()
            sgdnet.simulate(cn, steps=steps, warmup=warmup, replications=replications, seed=seed + k,
                            parallel=parallel)
            walls.append(time.perf_counter() - t)
        out.append(statistics.median(walls))
    return out[0], out[1], min(replications, n_threads())


def parallel_control(n: int = 100_000_000) -> float:
    """Speed-up of a trivial nogil Numba loop run twice on 2 threads vs twice serially: what
    this machine's cores can give at best (1 when the two CPUs share one physical core)."""
    from concurrent.futures import ThreadPoolExecutor

    import numba

    @numba.njit(nogil=True)
    def spin(m):
        s = 0.0
        for i in range(m):
            s += (i % 7) * 0.5
        return s

    spin(10)
    t = time.perf_counter()
    spin(n)
    spin(n)
    serial = time.perf_counter() - t
    t = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(spin, [n, n]))
    return serial / (time.perf_counter() - t)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and short runs (a smoke run)")
    ap.add_argument("--workers", type=str, default=None, help="comma list of N (default 4,16,64)")
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--steps", type=int, default=None,
                    help="counted steps per replication (default max(20, 800 // N); --quick max(10, 160 // N))")
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="timed runs (the median is reported)")
    ap.add_argument("--dist", choices=("lognormal", "exp"), default="lognormal")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-jit", action="store_true", help="skip the compile-time measurement")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the peak-memory-versus-steps measurement")
    a = ap.parse_args(argv)
    workers = [int(x) for x in a.workers.split(",")] if a.workers else ([2, 4, 8] if a.quick else [4, 16, 64])
    runs = 2 if a.quick else a.runs

    def steps_for(n):  # about the same number of completions per size
        return a.steps or (max(10, 160 // n) if a.quick else max(20, 800 // n))

    print(f"bench model: N workers x {a.layers} layers, {a.dist} durations; {a.replications} "
          f"replications, warm-up = steps/10, median of {runs} timed runs; completions per "
          f"CPU-second on ONE core (sgdnet parallel=False; issue #2 target: >= 1e7 at N = 16 "
          f"and >= 100x SimPy)")
    hdr = (f"{'N':>4} {'transitions':>11} {'steps':>5} {'sgdnet steps/s':>22} {'SimPy steps/s':>22} "
           f"{'sgdnet compl/s 1 core':>21} {'SimPy compl/s':>14} {'ratio':>7}")
    print(hdr)
    for n in workers:
        steps = steps_for(n)
        warmup = max(steps // 10, 2)
        net = build_bench_net(n, a.layers, seed=0, dist=a.dist)
        p = net.meta["bench_params"]
        res, cpu_s, comp_s = time_sgdnet(net, steps, warmup, a.replications, a.seed, runs)
        thr_p, cpu_p, comp_p = time_simpy(p, steps, warmup, a.replications, a.seed, runs)
        ms, hs = mean_ci(res.throughput.samples)
        mp, hp = mean_ci(thr_p)
        rs, rp = comp_s / cpu_s, comp_p / cpu_p
        print(f"{n:>4} {len(net.transitions):>11} {steps:>5} {ms:>12.3f} ± {hs:<7.3f} {mp:>12.3f} ± "
              f"{hp:<7.3f} {rs:>21.3g} {rp:>14.3g} {rs / rp:>7.1f}", flush=True)
    if not a.no_jit:
        cold, warm = jit_times()
        print(f"JIT: first call, empty cache {cold:.2f} s; first call, warm cache {warm:.2f} s")
    if not a.no_memory:
        n_mem = workers[0]
        sizes = [1_000, 20_000] if a.quick else [1_000, 100_000]
        for samples in (False, True):
            grow = memory_growth(n_mem, a.layers, a.dist, sizes, samples)
            cells = ", ".join(f"{s:,} steps +{b / 2**20:.2f} MiB" for s, b in grow)
            print(f"peak memory added by one replication (N={n_mem}, samples={samples}): {cells}")
    n_mid = workers[min(1, len(workers) - 1)]
    net = build_bench_net(n_mid, a.layers, seed=0, dist=a.dist)
    reps, steps = 8, 5 * steps_for(n_mid)
    t1, t2, nth = thread_speedup(net, steps, max(steps // 10, 2), reps, a.seed, runs)
    print(f"{reps} replications of {steps} steps (N={n_mid}): 1 core {t1:.3f} s, {nth} threads "
          f"{t2:.3f} s, speed-up {t1 / t2:.2f} (control: a trivial nogil loop on 2 threads "
          f"speeds up {parallel_control():.2f}x on this machine)")


if __name__ == "__main__":
    main()
