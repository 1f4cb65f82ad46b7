"""The max-plus fast path (sgdnet.engine.fastpath) against the generic kernel, its oracle.

- deterministic event graphs (random, strongly connected or not, servers 1 / 2 / inf, warm-up or
  none, one or two step transitions): the *same run* as the generic kernel — t0, t1, every step
  completion time and transition, per-transition firings and the event count — which pins the
  recursion and the tie order at one instant;
- deterministic event graphs against the max-plus cycle time (sgdnet.analysis.maxplus);
- stochastic event graphs: the same run too (both engines draw firing k of a transition from
  draw k of its stream, sgdnet.engine.rng);
- refusal and fallback: nets or requests it cannot serve run on the generic engine
  (``result.engine``), or raise with ``engine="fast"``.
"""

import math

import numpy as np
import pytest

from sgdnet import Net, SimulationError, simulate
from sgdnet.analysis import cycle_time
from sgdnet.dists import Deterministic, Exponential, Gamma, LogNormal, Uniform
from sgdnet.engine.fastpath import fast_path_problems
from sgdnet.net.compiled import compile_net


def random_eg(seed, det=True, strongly=True, servers_var=False, zero=False):
    """A live event graph: a ring (or a chain fed by a self-looped source) plus chords; arcs
    against the ring order carry >= 1 token, so no circuit is token-free."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    net = Net(f"eg{seed}{det}{strongly}{servers_var}{zero}")
    if strongly:
        arcs = [(i, (i + 1) % n, 1 if i == n - 1 else int(rng.integers(0, 2) * rng.integers(0, 3)))
                for i in range(n)]
    else:
        arcs = [(0, 0, 1)] + [(i, i + 1, int(rng.integers(0, 3))) for i in range(n - 1)]
    for _ in range(n):
        u, t = sorted(int(v) for v in rng.choice(n, 2, replace=False))
        arcs.append((u, t, int(rng.integers(0, 3))) if rng.random() < 0.5 else (t, u, int(rng.integers(1, 4))))
    ins: dict = {i: {} for i in range(n)}
    outs: dict = {i: {} for i in range(n)}
    for j, (u, t, m) in enumerate(arcs):
        p = net.place(f"p{j}", tokens=m)
        outs[u][p] = 1
        ins[t][p] = 1
    steps = set(rng.choice(n, int(rng.integers(1, 3)), replace=False).tolist())
    for i in range(n):
        if det:
            d = Deterministic(float(rng.integers(0 if zero else 1, 4)) * 1e-3)
        else:
            m = float(rng.uniform(1, 3)) * 1e-3
            d = (LogNormal(mean=m, cv=0.4), Exponential(m), Uniform(0.5 * m, 1.5 * m), Gamma(mean=m, cv=0.5))[i % 4]
        servers = [1, 2, math.inf][int(rng.integers(0, 3))] if servers_var and det else 1
        net.transition(f"t{i}", d, inputs=ins[i], outputs=outs[i], servers=servers, tags={"step": i in steps})
    return net


def same_run(a, b):
    for ra, rb in zip(a._raws, b._raws):
        assert ra.t0 == rb.t0 and ra.t1 == rb.t1
        np.testing.assert_array_equal(ra.step_times, rb.step_times)
        np.testing.assert_array_equal(ra.step_trans, rb.step_trans)
        np.testing.assert_array_equal(ra.firings, rb.firings)
        assert ra.events == rb.events


@pytest.mark.parametrize("seed", range(24))
def test_deterministic_event_graphs_same_run_as_generic(seed):
    # a third with zero durations: ties at one instant in batches (the generic engine's order)
    net = random_eg(seed, strongly=seed % 4 != 3, servers_var=seed % 2 == 1, zero=seed % 3 == 2)
    why = fast_path_problems(compile_net(net))
    if why:  # only a circuit of zero durations may refuse these nets (conservatively: its
        # firings may still be paced by other inputs); the generic engine runs them
        assert seed % 3 == 2 and all("zero time" in w for w in why)
        try:
            assert simulate(net, steps=10, replications=1, seed=1).engine == "generic"
        except SimulationError as e:
            assert "time stopped advancing" in str(e)
        return
    warmup = int(np.random.default_rng(seed).integers(0, 20))
    g = simulate(net, steps=97, warmup=warmup, replications=2, seed=1, engine="generic", periodic=False)
    f = simulate(net, steps=97, warmup=warmup, replications=2, seed=1)
    assert (g.engine, f.engine) == ("generic", "fast")
    assert f.deterministic
    same_run(g, f)
    np.testing.assert_array_equal(g.throughput.samples, f.throughput.samples)


@pytest.mark.parametrize("seed", range(6))
def test_deterministic_throughput_is_the_maxplus_cycle_time(seed):
    net = random_eg(100 + seed)
    exact = cycle_time(net).steps_per_s
    steps = 4000
    r = simulate(net, steps=steps, warmup=400, replications=1, seed=0, engine="fast")
    # the periodic regime is reached within the warm-up; the estimate steps / (t1 - t0) then
    # errs by less than one period's worth of step completions over the window
    period_steps = 2 * sum(t.is_step for t in net.transitions.values()) * 8
    assert r.throughput.mean == pytest.approx(exact, rel=period_steps / steps)


@pytest.mark.parametrize("seed", range(4))
def test_stochastic_event_graphs_same_run_as_generic(seed):
    # firing k of a transition lasts draw k of its own stream in both engines (sgdnet.engine.rng)
    net = random_eg(200 + seed, det=False)
    kw = dict(steps=1000, warmup=100, replications=3, seed=seed)
    g = simulate(net, engine="generic", **kw)
    f = simulate(net, **kw)
    assert f.engine == "fast" and not f.deterministic
    same_run(g, f)
    np.testing.assert_array_equal(g.throughput.samples, f.throughput.samples)


def test_fast_path_streams_reproducible_and_samples_flag_free():
    net = random_eg(300, det=False)
    a = simulate(net, steps=500, warmup=50, replications=3, seed=5)
    b = simulate(net, steps=500, warmup=50, replications=3, seed=5, samples=False)
    c = simulate(net, steps=500, warmup=50, replications=3, seed=6)
    np.testing.assert_array_equal(a.t1, b.t1)
    for ra, rb in zip(a._raws, b._raws):
        np.testing.assert_array_equal(ra.firings, rb.firings)
    assert not np.array_equal(a.t1, c.t1)  # another seed, other draws
    assert len(set(a.t1.tolist())) == 3  # each replication its own streams
    assert len(a.step_times()) == 3 * 500


def fifo_net():
    net = Net("fifo")
    net.resource("cpu", capacity=2)  # two servers: outside the FIFO-round class too
    a = net.place("a", tokens=2)
    b = net.place("b")
    net.transition("work", Exponential(1.0), inputs={a: 1}, outputs={b: 1}, resources=["cpu"])
    net.transition("done", Exponential(0.5), inputs={b: 1}, outputs={a: 1}, tags={"step": True})
    return net


def test_refusals_fall_back_to_generic():
    net = fifo_net()
    assert any("resources" in w for w in fast_path_problems(compile_net(net)))
    assert simulate(net, steps=20, warmup=0, replications=1, seed=1).engine == "generic"
    with pytest.raises(SimulationError, match="engine='fast' cannot run.*resources"):
        simulate(net, steps=20, replications=1, seed=1, engine="fast")
    eg = random_eg(1)
    r = simulate(eg, steps=20, warmup=0, replications=1, seed=1, trace=True)
    assert r.engine == "generic" and len(r.trace_events()) > 0
    with pytest.raises(SimulationError, match="trace"):
        simulate(eg, steps=20, replications=1, seed=1, trace=True, engine="fast")
    with pytest.raises(SimulationError, match="engine='warp' is unknown"):
        simulate(eg, steps=20, replications=1, engine="warp")


def test_statistics_the_fast_path_does_not_record_say_how_to_get_them():
    eg = random_eg(2)
    p = compile_net(eg).place_names[0]
    fast = simulate(eg, steps=20, warmup=0, replications=1, seed=1)
    assert fast.engine == "fast"
    with pytest.raises(SimulationError, match="engine='generic'"):
        fast.mean_tokens(p)
    generic = simulate(eg, steps=20, warmup=0, replications=1, seed=1, engine="generic")
    assert generic.mean_tokens(p).mean >= 0
    # histograms are recorded by the generic engine only
    assert simulate(eg, steps=20, replications=1, seed=1, histograms=True).engine == "generic"
    with pytest.raises(SimulationError, match="histograms"):
        simulate(eg, steps=20, replications=1, seed=1, histograms=True, engine="fast")


def test_refusal_reasons():
    def loop(dur, servers=1, tokens=1):
        net = Net("loop")
        a = net.place("a", tokens=tokens)
        b = net.place("b")
        net.transition("x", dur, inputs={a: 1}, outputs={b: 1}, servers=servers)
        net.transition("y", Deterministic(1.0), inputs={b: 1}, outputs={a: 1}, tags={"step": True})
        return net

    assert fast_path_problems(compile_net(loop(Exponential(1.0)))) == []
    assert fast_path_problems(compile_net(loop(Deterministic(1.0), servers=math.inf))) == []
    why = fast_path_problems(compile_net(loop(Exponential(1.0), servers=2)))
    assert any("overtake" in w for w in why)
    why = fast_path_problems(compile_net(loop(Exponential(1.0), tokens=0)))
    assert any("no token" in w for w in why)
    # a place with two consumers (a conflict) is no event graph
    net = loop(Exponential(1.0))
    net.transition("z", 1.0, inputs={"a": 1}, outputs={"b": 1})
    assert any("consumers" in w for w in fast_path_problems(compile_net(net)))


def test_zero_time_circuit_goes_to_generic_which_reports_it():
    net = Net("zeno")
    a = net.place("a", tokens=1)
    b = net.place("b")
    net.transition("x", 0.0, inputs={a: 1}, outputs={b: 1})
    net.transition("y", 0.0, inputs={b: 1}, outputs={a: 1}, tags={"step": True})
    assert any("zero time" in w for w in fast_path_problems(compile_net(net)))
    with pytest.raises(SimulationError):
        simulate(net, steps=10, replications=1, seed=1)


def test_event_budget_exhausted_is_reported_like_the_generic_engine():
    net = random_eg(2)
    with pytest.raises(SimulationError) as generic:
        simulate(net, steps=1000, replications=1, seed=1, max_events=50, engine="generic")
    with pytest.raises(SimulationError) as auto:
        simulate(net, steps=1000, replications=1, seed=1, max_events=50)
    assert type(generic.value) is type(auto.value)


def _rounds_of(net, steps, warmup=100):
    """The rounds of the event-graph path's first history for ``steps`` (one lane)."""
    import sgdnet.engine.fastpath as fp

    cn = compile_net(net)
    return fp.first_rounds(steps + warmup, len(cn.step_transitions), fp.fast_plan(cn).max_tokens)


def test_a_long_run_goes_to_the_fifo_path_when_the_net_is_in_both_classes(monkeypatch):
    import sgdnet.engine.fastpath as fp
    from sgdnet.engine.fastpath_fifo import fifo_path_problems

    net = random_eg(3, det=False)
    assert fifo_path_problems(compile_net(net)) == []
    kw = dict(steps=500, replications=2, seed=1)
    want = simulate(net, **kw)
    assert want.engine == "fast"
    T = compile_net(net).n_transitions
    monkeypatch.setattr(fp, "MAX_HISTORY_BYTES", 8 * T * (_rounds_of(net, 500) - 1))
    got = simulate(net, **kw)  # one lane's history would not fit: not started here
    assert got.engine == "fast-fifo"
    same_run(got, want)


def test_a_long_run_of_a_net_only_in_the_event_graph_class_goes_to_the_generic_engine(monkeypatch):
    import sgdnet.engine.fastpath as fp
    from sgdnet.engine.fastpath_fifo import fifo_path_problems

    net = random_eg(5, det=True, servers_var=True, zero=True)  # zero durations, several servers
    cn = compile_net(net)
    assert fast_path_problems(cn) == [] and fifo_path_problems(cn) != []
    monkeypatch.setattr(fp, "MAX_HISTORY_BYTES", 8 * cn.n_transitions * (_rounds_of(net, 500) - 1))
    assert simulate(net, steps=500, replications=2, seed=1).engine == "generic"
    with pytest.raises(SimulationError, match="more history than the event-graph path keeps"):
        simulate(net, steps=500, replications=2, seed=1, engine="fast")


def test_fewer_lanes_per_chunk_when_eight_would_not_fit(monkeypatch):
    import sgdnet.engine.fastpath as fp

    net = random_eg(11, det=False)
    kw = dict(steps=400, warmup=20, replications=8, seed=4, parallel=False)
    want = simulate(net, **kw)
    T = compile_net(net).n_transitions
    monkeypatch.setattr(fp, "MAX_HISTORY_BYTES", 8 * T * 3 * _rounds_of(net, 400, 20))  # 3 lanes
    sizes = []
    real = fp._chunk
    monkeypatch.setattr(fp, "_chunk", lambda cn, plan, ch, *a: sizes.append(len(ch)) or real(cn, plan, ch, *a))
    got = simulate(net, **kw)
    assert got.engine == "fast" and sizes == [3, 3, 2]
    same_run(got, want)


def test_a_run_that_outgrows_the_history_bound_falls_back(monkeypatch):
    import sgdnet.engine.fastpath as fp

    net = random_eg(3, det=False)
    T = compile_net(net).n_transitions
    # the first history is two rounds; the bound, 64 rounds, is reached by growing it
    monkeypatch.setattr(fp, "first_rounds", lambda need, per_round, extra: 2)
    monkeypatch.setattr(fp, "MAX_HISTORY_BYTES", 8 * T * 64)
    with pytest.raises(SimulationError, match="memory"):
        simulate(net, steps=500, replications=2, seed=1, engine="fast")
    assert simulate(net, steps=500, replications=2, seed=1).engine == "generic"


def test_parallel_lanes_give_the_same_results():
    net = random_eg(301, det=False)
    kw = dict(steps=300, warmup=30, replications=11, seed=9)
    a = simulate(net, parallel=False, **kw)
    b = simulate(net, parallel=True, **kw)
    assert a.engine == b.engine == "fast"
    np.testing.assert_array_equal(a.throughput.samples, b.throughput.samples)
    for ra, rb in zip(a._raws, b._raws):
        np.testing.assert_array_equal(ra.step_times, rb.step_times)
        np.testing.assert_array_equal(ra.firings, rb.firings)


@pytest.mark.parametrize("seed", range(4))
def test_kth_step_completion_is_numpys_partition_without_a_copy(seed):
    # the window's bounds are found by bisection over the per-transition sorted completions;
    # numpy's partition of the flattened values is the reference, ties and zeros included
    from sgdnet.engine.eg_record import _kth_step

    rng = np.random.default_rng(seed)
    K, T, L = 60, 7, 3
    inc = rng.choice([0.0, 0.0, 0.25, 0.5, 1.0, rng.random()], size=(K, T, L))
    C = np.cumsum(inc, axis=0)  # nondecreasing per transition and lane, many ties, zeros first
    st = np.array([0, 2, 3, 6])
    for l in range(L):
        vals = C[:, st, l].ravel()
        for j in (0, 1, 17, vals.size // 2, vals.size - 1):
            lo, hi = np.zeros(st.size, dtype=np.int64), np.zeros(st.size, dtype=np.int64)
            B = _kth_step(C, st, l, j, lo, hi)
            assert B == np.partition(vals, j)[j]
            assert lo.tolist() == [int(np.sum(C[:, t, l] < B)) for t in st]
            assert hi.tolist() == [int(np.sum(C[:, t, l] <= B)) for t in st]
