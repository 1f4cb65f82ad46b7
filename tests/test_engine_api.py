"""API-level tests of sgdnet.simulate: argument validation, reproducibility, replay, traces,
deadlock and budget reports, the compile cache, O(1) memory with samples=False, Result figures.

Expected numbers come from closed forms of tiny deterministic nets, never from the engine.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import sgdnet
from sgdnet import Deterministic, Estimate, Exponential, Net, Result, compile_net, simulate
from sgdnet.engine import abi, driver
from sgdnet.engine.api import default_max_events
from sgdnet.errors import DeadlockError, NetError, SimulationError, UnknownNameError


def _loop(name="loop", work=None, sync=0.002):
    """One token circulating: `work` (on a gpu) then a step-tagged `sync`."""
    work = Exponential(0.01) if work is None else work
    net = Net(name)
    a = net.place("a", tokens=1)
    b = net.place("b")
    gpu = net.resource("gpu", kind="gpu")
    net.transition("work", work, inputs={a: 1}, outputs={b: 1}, resources=[gpu], tags={"worker": 0, "kind": "compute"})
    net.transition("sync", sync, inputs={b: 1}, outputs={a: 1}, tags={"worker": 0, "step": True, "kind": "sync"})
    return net


def _two_workers():
    """Two independent deterministic loops, cycle 0.3 s (worker 0) and 0.5 s (worker 1)."""
    net = Net("two")
    for w, (c, s) in enumerate(((0.2, 0.1), (0.4, 0.1))):
        a = net.place(f"a{w}", tokens=1)
        b = net.place(f"b{w}")
        r = net.resource(f"gpu{w}", host=f"worker{w}")
        net.transition(f"c{w}", c, inputs={a: 1}, outputs={b: 1}, resources=[r], tags={"worker": w})
        net.transition(f"s{w}", s, inputs={b: 1}, outputs={a: 1}, tags={"worker": w, "step": True})
    return net


@pytest.fixture(scope="module")
def loop():
    return compile_net(_loop())


@pytest.fixture(scope="module")
def two():
    return compile_net(_two_workers())


# --------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kw, word",
    [
        ({"steps": 0}, "steps"),
        ({"steps": 2.5}, "steps"),
        ({"steps": True}, "steps"),
        ({"warmup": -1}, "warmup"),
        ({"replications": 0}, "replications"),
        ({"trace_limit": -5}, "trace_limit"),
        ({"trace": "yes"}, "trace"),
        ({"samples": 1}, "samples"),
        ({"parallel": None}, "parallel"),
        ({"max_events": 0}, "max_events"),
        ({"seed": "abc"}, "seed"),
        ({"seed": -3}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seeds": []}, "seeds"),
        ({"seeds": [1, -2]}, "seed"),
        ({"seeds": 7}, "seeds"),
    ],
)
def test_bad_arguments_name_the_value(loop, kw, word):
    with pytest.raises(SimulationError) as e:
        simulate(loop, **{"steps": 5, "warmup": 0, **kw})
    assert word in str(e.value)


def test_not_a_net():
    with pytest.raises(SimulationError, match="Net"):
        simulate("mm1")


def test_invalid_net_raises_net_error():
    net = Net("bad")
    net.transition("t", 1.0, inputs={"nowhere": 1}, tags={"step": True})
    with pytest.raises(NetError, match="nowhere"):
        simulate(net, steps=3)


def test_net_without_step_transition():
    net = Net("nostep")
    a = net.place("a", 1)
    net.transition("t", 1.0, inputs={a: 1}, outputs={a: 1})
    with pytest.raises(SimulationError, match="step"):
        simulate(net, steps=3)


def test_no_input_infinite_servers_refused():
    net = Net("src")
    a = net.place("a")
    net.transition("gen", 1.0, outputs={a: 1}, inhibitors={a: 5}, servers=math.inf)
    net.transition("eat", 0.5, inputs={a: 1}, tags={"step": True})
    with pytest.raises(SimulationError, match="servers=inf"):
        simulate(net, steps=3)


# --------------------------------------------------------- reproducibility
def test_same_seed_same_result_and_parallel_equals_serial(loop):
    r1 = simulate(loop, steps=200, warmup=10, replications=4, seed=42, parallel=True)
    r2 = simulate(loop, steps=200, warmup=10, replications=4, seed=42, parallel=False)
    assert r1.seeds == r2.seeds
    np.testing.assert_array_equal(r1.throughput.samples, r2.throughput.samples)
    np.testing.assert_array_equal(r1.step_times(), r2.step_times())
    r3 = simulate(loop, steps=200, warmup=10, replications=4, seed=43)
    assert not np.array_equal(r1.throughput.samples, r3.throughput.samples)


def test_seed_generator_and_none(loop):
    a = simulate(loop, steps=50, warmup=0, replications=2, seed=np.random.default_rng(5))
    b = simulate(loop, steps=50, warmup=0, replications=2, seed=np.random.default_rng(5))
    assert a.seeds == b.seeds
    c = simulate(loop, steps=50, warmup=0, replications=2)
    assert len(c.seeds) == 2 and all(isinstance(s, int) for s in c.seeds)


def test_replay_one_replication_by_its_seed(loop):
    res = simulate(loop, steps=300, warmup=20, replications=3, seed=7)
    again = simulate(loop, steps=300, warmup=20, seeds=[res.seeds[1]])
    assert again.replications == 1
    assert again.throughput.samples[0] == res.throughput.samples[1]
    t_res, tr_res = res.step_completion_times(1)
    t_again, tr_again = again.step_completion_times(0)
    np.testing.assert_array_equal(t_res, t_again)
    np.testing.assert_array_equal(tr_res, tr_again)


# ------------------------------------------------------ closed-form figures
def test_deterministic_figures(two):
    # worker 0 cycles every 0.3 s, worker 1 every 0.5 s: 1/0.3 + 1/0.5 steps/s in the long run
    res = simulate(two, steps=3000, warmup=50, replications=2, seed=1)
    exact = 1 / 0.3 + 1 / 0.5
    # in a window of length D each worker completes D/cycle steps up to one at the edges
    for thr, D in zip(res.throughput.samples, res.sim_time):
        assert abs(thr - exact) <= 2 / D
    by = res.throughput_by("worker")
    assert set(by) == {0, 1}
    assert by[0].mean == pytest.approx(1 / 0.3, rel=2e-3)
    assert by[1].mean == pytest.approx(1 / 0.5, rel=2e-3)
    assert res.utilization("gpu0").mean == pytest.approx(0.2 / 0.3, rel=2e-3)
    assert res.utilization("gpu1").mean == pytest.approx(0.4 / 0.5, rel=2e-3)
    assert res.mean_wait("gpu0").mean == 0.0
    assert set(res.utilizations()) == {"gpu0", "gpu1"}
    firings = res.firings("s0") + res.firings("s1")
    np.testing.assert_array_equal(firings, [3000, 3000])
    assert res.step_times(worker=1) == pytest.approx(np.full(res.step_times(worker=1).size, 0.5))
    # intervals of all steps (from t0) add up to the window
    assert res.step_times().sum() == pytest.approx(res.sim_time.sum())


def test_result_lookups_and_to_dict(two):
    res = simulate(two, steps=20, warmup=0, replications=2, seed=3)
    with pytest.raises(UnknownNameError, match="gpu0"):
        res.utilization("gpu9")
    with pytest.raises(UnknownNameError):
        res.firings("nope")
    with pytest.raises(UnknownNameError):
        res.step_times(worker=7)
    with pytest.raises(UnknownNameError):
        res.gate_log("g")
    d = res.to_dict()
    json.dumps(d)
    assert d["steps"] == 20 and d["replications"] == 2
    assert res.transition_names == ["c0", "s0", "c1", "s1"]
    assert res.transition_resources[0] == ("gpu0",)
    assert res.resource_tags[1] == {"host": "worker1"}
    assert res.trace is None
    assert "steps/s" in repr(res.throughput)
    assert isinstance(res, Result)


# ----------------------------------------------------------------- traces
def test_trace_is_bounded_and_named(two):
    res = simulate(two, steps=100, warmup=0, replications=2, seed=1, trace=True, trace_limit=7)
    assert res.trace.dtype.names == ("rep", "transition", "start", "end")
    for k in range(2):
        assert (res.trace["rep"] == k).sum() == 7
    ev = res.trace_events(0)
    assert len(ev) == 7
    assert all(e["end"] >= e["start"] for e in ev)
    # first completion: c0 at t=0.2, started at 0 on gpu0
    assert ev[0]["name"] == "c0" and ev[0]["start"] == 0.0 and ev[0]["end"] == pytest.approx(0.2)
    assert ev[0]["resources"] == ("gpu0",) and ev[0]["tags"]["worker"] == 0
    with pytest.raises(SimulationError):
        res.trace_events(5)


# -------------------------------------------------------- failure reports
def test_deadlock_reported_with_marking_and_stuck():
    net = Net("dl")
    a = net.place("a", tokens=2)
    b = net.place("b")
    never = net.place("never")
    net.transition("t1", 1.0, inputs={a: 1}, outputs={b: 1}, tags={"step": True})
    net.transition("t2", 1.0, inputs={b: 1, never: 1}, outputs={a: 1})
    with pytest.raises(DeadlockError) as e:
        simulate(net, steps=10, warmup=0, replications=2, seed=0)
    err = e.value
    assert err.marking == {"a": 0, "b": 2, "never": 0}
    assert err.stuck == ["t2"]
    assert err.time == pytest.approx(2.0)
    assert "t2" in str(err) and "'b': 2" in str(err)


def test_gated_transition_is_reported_stuck():
    net = Net("gdl")
    a0, a1 = net.place("a0", 1), net.place("a1", 0)
    done = net.place("done")
    t0 = net.transition("w0", 1.0, inputs={a0: 1}, outputs={done: 1, a0: 1}, gate=("g", 0), tags={"step": True})
    t1 = net.transition("w1", 1.0, inputs={a1: 1}, outputs={a1: 1}, gate=("g", 1))
    net.gate("g", "lag", counters=[t0, t1], s=2)
    with pytest.raises(DeadlockError) as e:
        simulate(net, steps=10, warmup=0, replications=1)
    assert e.value.stuck == ["w0"]
    assert e.value.marking["done"] == 3


def test_zero_duration_loop_hits_the_event_budget():
    net = Net("zeno")
    a = net.place("a", 1)
    b = net.place("b")
    c = net.place("c")
    net.transition("x", 0.0, inputs={a: 1}, outputs={b: 1})
    net.transition("y", 0.0, inputs={b: 1}, outputs={a: 1})
    net.transition("never", 1.0, inputs={c: 1}, tags={"step": True})
    with pytest.raises(SimulationError, match="budget"):
        simulate(net, steps=5, warmup=0, replications=1, max_events=10_000)
    # with the default budget the time-does-not-advance guard stops it first
    with pytest.raises(SimulationError, match="zero-duration") as e:
        simulate(net, steps=1000, warmup=0, replications=1)
    assert not isinstance(e.value, DeadlockError)
    assert default_max_events(5, 0, 3) == 15_000


# ------------------------------------------------------------ compile cache
def test_compile_cache():
    net = _loop("cache")
    c1 = compile_net(net)
    assert compile_net(net) is c1
    assert compile_net(c1) is c1
    assert compile_net(net.copy()) is c1  # same structure, same compiled arrays
    net.transition("extra", 1.0, inputs={"b": 1}, outputs={"a": 1})
    c2 = compile_net(net)
    assert c2 is not c1 and c2.n_transitions == c1.n_transitions + 1
    with pytest.raises(NetError):
        compile_net(42)


# ----------------------------------------------------- memory with samples
def test_samples_false_memory_does_not_grow_with_steps(loop):
    def sizes(steps):
        out = driver.run(loop, [1, 2], steps=steps, warmup=0, max_events=10**9, zeno_limit=10**6,
                         samples=False, trace_limit=0, parallel=False)
        return {k: v.size for k, v in vars(out).items() if isinstance(v, np.ndarray)}

    small, big = sizes(10), sizes(5000)
    assert small == big
    res = simulate(loop, steps=5000, warmup=0, replications=2, seed=1, samples=False)
    np.testing.assert_array_equal(res.firings("sync"), [5000, 5000])
    with pytest.raises(SimulationError, match="samples=True"):
        res.step_times()


def test_many_concurrent_firings_grow_capacity():
    # 600 tokens start at once on an infinite-server delay: more slots/requests than first sized
    net = Net("burst")
    a = net.place("a", tokens=600)
    b = net.place("b")
    net.transition("d", Deterministic(1.0), inputs={a: 1}, outputs={b: 1}, servers=math.inf)
    net.transition("s", 0.0, inputs={b: 1}, outputs={a: 1}, tags={"step": True})
    res = simulate(net, steps=1200, warmup=0, replications=2, seed=0)
    # 600 steps complete at t = 1, 2, ...: the 1200th at t = 2
    np.testing.assert_array_equal(res.sim_time, [2.0, 2.0])


# --------------------------------------------------------------- Estimate
def test_estimate():
    e = Estimate([1.0, 2.0, 3.0], unit="s", label="x")
    assert e.n == 3 and e.mean == 2.0 and e.std == 1.0
    lo, hi = e.ci(0.95)
    # t_{0.975, 2} = 4.302652729911275
    assert hi - 2.0 == pytest.approx(4.302652729911275 / math.sqrt(3), rel=1e-6)
    assert lo == pytest.approx(4.0 - hi)
    assert e.half_width() == pytest.approx(hi - 2.0)
    assert e.quantile(0.5) == 2.0
    assert repr(e).startswith("2 ± 2.5 s (95% CI, n=3)")
    one = Estimate([5.0])
    assert math.isnan(one.ci()[0]) and "n=1" in repr(one)
    bm = Estimate.from_batch_means(np.arange(103.0), n_batches=10)
    assert bm.n == 10 and bm.mean == pytest.approx(np.arange(3.0, 103.0).mean())
    json.dumps(e.to_dict())


def test_public_names():
    for n in ("simulate", "Result", "Estimate", "Net", "compile_net", "Deterministic", "Exponential",
              "Uniform", "Normal", "LogNormal", "Gamma", "ShiftedExponential", "Empirical", "Straggler"):
        assert n in sgdnet.__all__ and hasattr(sgdnet, n)


# ------------------------------------------------------------ thread cap
def test_set_max_threads_runs_replications_on_the_calling_thread(loop, monkeypatch):
    import threading

    from sgdnet.engine import kernel

    seen = []
    real = kernel.run_replication

    def spy(*args):
        seen.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(kernel, "run_replication", spy)
    try:
        driver.set_max_threads(1)
        assert driver.n_threads() == 1
        capped = simulate(loop, steps=50, warmup=0, replications=4, seed=5, parallel=True,
                          engine="generic")  # the kernel itself (this net is in the FIFO fast path's class)
        assert seen == [threading.get_ident()] * 4
        driver.set_max_threads(None)
        seen.clear()
        free = simulate(loop, steps=50, warmup=0, replications=4, seed=5, parallel=True, engine="generic")
        assert len(seen) == 4
        if driver.n_threads() > 1:
            assert threading.get_ident() not in seen
    finally:
        driver.set_max_threads(None)
    np.testing.assert_array_equal(capped.throughput.samples, free.throughput.samples)
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(SimulationError, match="max threads"):
            driver.set_max_threads(bad)


# ------------------------------------------------------------------ Ctrl-C
@pytest.mark.parametrize("parallel", [False, True])
def test_ctrl_c_halts_the_running_kernels(loop, monkeypatch, parallel):
    # a run of ~1e9 completions (minutes) is interrupted 0.3 s in: KeyboardInterrupt is raised and
    # every kernel call has returned with ST_HALTED, i.e. stopped early instead of running to its
    # end (were the flag ignored, the event budget would end it with a SimulationError instead)
    import signal
    import threading

    from sgdnet.engine import kernel

    statuses, started = [], []
    real = kernel.run_replication

    def spy(*args):
        started.append(1)
        status = real(*args)
        statuses.append(status)
        return status

    monkeypatch.setattr(kernel, "run_replication", spy)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            simulate(loop, steps=2 * 10**8, warmup=0, replications=2, seed=1, parallel=parallel,
                     max_events=10**9, engine="generic")  # the kernel (loop is in the FIFO fast path's class)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    assert statuses and len(statuses) == len(started)  # nothing left running
    assert set(statuses) == {abi.ST_HALTED}
    # the engine stays usable: the next run completes normally
    monkeypatch.undo()
    assert simulate(loop, steps=20, warmup=0, replications=2, seed=1).firings("sync").tolist() == [20, 20]


def _simulate_in_child(net, q):
    q.put(simulate(net, steps=50, warmup=0, replications=4, seed=3, parallel=True).throughput.samples.tolist())


def test_a_forked_child_gets_its_own_engine_threads(loop):
    # the parent's engine threads (kept between calls) do not exist in a forked child: it must
    # start its own instead of queueing work for threads that will never run it
    import multiprocessing

    here = simulate(loop, steps=50, warmup=0, replications=4, seed=3, parallel=True)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_simulate_in_child, args=(loop, q))
    p.start()
    p.join(timeout=120)
    if p.is_alive():
        p.kill()
        pytest.fail("the forked child hung on the parent's engine threads")
    assert p.exitcode == 0
    assert q.get(timeout=5) == here.throughput.samples.tolist()


# ---------------------------------------------------------------- progress
def test_progress_reports_step_completions_up_to_the_total(loop):
    calls = []
    kw = dict(steps=200_000, warmup=1000, max_events=10**9, zeno_limit=10**6, samples=False,
              trace_limit=0)
    seeds = driver.derive_seeds(4, 3)
    for parallel in (False, True):
        calls.clear()
        out = driver.run(loop, seeds, parallel=parallel, progress=calls.append, **kw)
        assert calls and calls[-1] == 3 * 201_000  # every replication's steps, warm-up included
        assert calls == sorted(calls)
        plain = driver.run(loop, seeds, parallel=parallel, **kw)
        np.testing.assert_array_equal(out.f, plain.f)
        np.testing.assert_array_equal(out.i, plain.i)
    # a run too short to notice reports nothing (and shows no bar)
    calls.clear()
    driver.run(loop, seeds, parallel=False, progress=calls.append, **{**kw, "steps": 100})
    assert calls == []


def test_simulate_progress_bar_on_stderr(loop, capsys):
    # the generic kernel's reports (loop would take the FIFO fast path: tests/test_fastpath_halt.py)
    with_bar = simulate(loop, steps=100_000, warmup=10, replications=2, seed=9, progress=True,
                        engine="generic")
    assert "simulate loop" in capsys.readouterr().err
    without = simulate(loop, steps=100_000, warmup=10, replications=2, seed=9, engine="generic")
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(with_bar.throughput.samples, without.throughput.samples)
    with pytest.raises(SimulationError, match="progress"):
        simulate(loop, steps=10, progress="yes")


def test_expensive_completions_bring_the_halt_poll_closer(monkeypatch):
    # A runaway ps net: a job every 1 ms joins a shared link on which each needs 10 ms alone, so
    # holders pile up and every completion re-rates all of them. The halt flag, already set,
    # must be read well before HALT_POLL completions (at the first poll whose budget the re-rating
    # work used up), so that Ctrl-C is seen in bounded time however slow completions get.
    import math

    from sgdnet.engine import kernel
    from sgdnet.errors import SgdnetError

    net = Net("runaway")
    net.resource("link", 1, "ps")
    src, q = net.place("src", tokens=1), net.place("q")
    net.transition("arrive", 1e-3, inputs={src: 1}, outputs={src: 1, q: 1})
    net.transition("serve", 1e-2, inputs={q: 1}, resources=["link"], servers=math.inf,
                   tags={"step": True})
    events = []
    real = kernel.run_replication

    import inspect

    names = list(inspect.signature(real.py_func).parameters)
    i_halt, i_oi = names.index("halt"), names.index("o_i")

    def preset_halt(*args):
        args[i_halt][0] = 1  # the shared halt flag
        status = real(*args)
        events.append((status, int(args[i_oi][abi.OI_EVENTS])))
        return status

    monkeypatch.setattr(kernel, "run_replication", preset_halt)
    with pytest.raises((KeyboardInterrupt, SgdnetError)):
        simulate(net, steps=10**6, warmup=20_000, replications=1, seed=0, parallel=False)
    status, n = events[-1]  # earlier calls stopped to grow their tables (replayed, same seed)
    assert status == abi.ST_HALTED and {s for s, _ in events[:-1]} <= {abi.ST_GROW}
    assert n < kernel.HALT_POLL // 2  # a cheap net reads the flag after HALT_POLL completions


def test_ensure_kernel_compiles_only_without_a_usable_cache(monkeypatch):
    # what a local study's parent calls before it starts its worker processes
    import sgdnet.engine.api as api
    import sgdnet.engine.jitcache as jc

    runs = []
    real = api.simulate

    def spy(net, **kw):
        runs.append((len(net.transitions), kw["engine"]))
        return real(net, **kw)

    monkeypatch.setattr(api, "simulate", spy)
    monkeypatch.setattr(jc, "check_cache", lambda: False)  # a usable cache: nothing to do
    assert api.ensure_kernel() is False and runs == []
    monkeypatch.setattr(jc, "check_cache", lambda: True)  # none: one tiny generic run
    assert api.ensure_kernel() is True and runs == [(1, "generic")]
