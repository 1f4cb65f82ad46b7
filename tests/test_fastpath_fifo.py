"""The sort-then-queue fast path (sgdnet.engine.fastpath_fifo) against the generic kernel.

- random deterministic sync-PS-like nets (N workers, L layers, forward/backward chains, pushes
  on worker uplinks, a shared server downlink, a weight-N barrier per layer on the server CPU,
  broadcasts on a shared server uplink, pulls on worker downlinks; resources shared between
  workers at random, durations from {1, 2, 3} ms so that requests tie at one instant, the
  declaration order shuffled so that the tie rank varies): the *same run* as the generic kernel
  (t0, t1, step times and transitions, firings, events; busy time, waits, sojourns and marking
  integrals up to float summation order);
- random stochastic ones: the same run too (both engines draw firing k of a transition from
  draw k of its stream, sgdnet.engine.rng);
- nets outside the class are refused with a reason and run on the generic engine;
- the speed anchors' model (/work/shared/anchors) qualifies.
"""

import os
import sys

import numpy as np
import pytest

from sgdnet import Exponential, LogNormal, Net, SimulationError, simulate
from sgdnet.dists import Deterministic
from sgdnet.engine.fastpath_fifo import fifo_path_problems
from sgdnet.net.compiled import compile_net

ANCHORS = "/work/shared/anchors"


def ps_net(seed, det=True, share_up=None, share_pu_su=False, zero=False):
    """A random sync-PS-like net in the class (see the module docstring)."""
    rng = np.random.default_rng(seed)
    N, L = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    net = Net(f"ps{seed}{det}{share_pu_su}{zero}")
    shared = bool(rng.integers(0, 2)) if share_up is None else share_up
    for r in (["up"] if shared else [f"up{i}" for i in range(N)]) + [f"dn{i}" for i in range(N)]:
        net.resource(r)
    for r in ("sdown", "scpu") + (() if share_pu_su and shared else ("sup",)):
        net.resource(r)

    def dur():
        if zero and rng.random() < 0.2:
            return 0.0
        if det:
            return Deterministic(float(rng.integers(1, 4)) * 1e-3)
        m = float(rng.uniform(1, 3)) * 1e-3
        return LogNormal(mean=m, cv=0.3) if rng.random() < 0.7 else Exponential(m)

    P = {}
    for i in range(N):
        for l in range(L):
            for kind, tok in (("param", 1), ("ctlf", 1 if l == 0 else 0), ("ctlb", 0), ("grad", 0),
                              ("atsrv", 0), ("sendq", 0), ("infl", 0)):
                P[kind, i, l] = net.place(f"{kind}{i}_{l}", tokens=tok)
    for l in range(L):
        P["arr", l] = net.place(f"arr{l}")
    T = []
    for i in range(N):
        for l in range(L):
            nxt = P["ctlf", i, l + 1] if l + 1 < L else P["ctlb", i, L - 1]
            T.append((f"F{i}_{l}", {P["param", i, l]: 1, P["ctlf", i, l]: 1}, {nxt: 1}, [], False))
            nxt = P["ctlb", i, l - 1] if l > 0 else P["ctlf", i, 0]
            T.append((f"B{i}_{l}", {P["ctlb", i, l]: 1}, {P["grad", i, l]: 1, nxt: 1}, [], l == 0))
            T.append((f"PU{i}_{l}", {P["grad", i, l]: 1}, {P["atsrv", i, l]: 1},
                      ["up" if shared else f"up{i}"], False))
            T.append((f"PD{i}_{l}", {P["atsrv", i, l]: 1}, {P["arr", l]: 1}, ["sdown"], False))
            T.append((f"SU{i}_{l}", {P["sendq", i, l]: 1}, {P["infl", i, l]: 1},
                      ["up" if share_pu_su and shared else "sup"], False))
            T.append((f"WD{i}_{l}", {P["infl", i, l]: 1}, {P["param", i, l]: 1}, [f"dn{i}"], False))
    for l in range(L):
        T.append((f"U{l}", {P["arr", l]: N}, {P["sendq", i, l]: 1 for i in range(N)}, ["scpu"], False))
    for j in rng.permutation(len(T)):  # the declaration order is the tie rank
        name, ins, outs, res, step = T[j]
        net.transition(name, dur(), inputs=ins, outputs=outs, resources=res, tags={"step": step})
    return net


def same_run(a, b):
    for ra, rb in zip(a._raws, b._raws):
        assert ra.t0 == rb.t0 and ra.t1 == rb.t1
        np.testing.assert_array_equal(ra.step_times, rb.step_times)
        np.testing.assert_array_equal(ra.step_trans, rb.step_trans)
        np.testing.assert_array_equal(ra.firings, rb.firings)
        assert ra.events == rb.events
        np.testing.assert_array_equal(ra.wait_n, rb.wait_n)
        np.testing.assert_array_equal(ra.sojourn_n, rb.sojourn_n)
        # the integrals are sums of at most `events` terms no larger than t1 each, added in a
        # different order by each engine (the marking's: the generic engine integrates it event by
        # event, this path adds producers' and takes consumers' sums), so their rounding differs
        # by up to ~events * t1 * eps: a place whose tokens never wait integrates to ~1e-13 in
        # one and ~2e-12 in the other after 4,272 events (`scripts/oracle_sweep.py --fast`, seed
        # 11838), both zero but for rounding
        atol = 1e-15 * ra.t1 * max(ra.events, 1)
        for f in ("busy", "wait_sum", "sojourn_sum", "token_time"):
            np.testing.assert_allclose(getattr(ra, f), getattr(rb, f), rtol=1e-9, atol=atol, err_msg=f)


@pytest.mark.parametrize("seed", range(30))
def test_deterministic_ps_nets_same_run_as_generic(seed):
    net = ps_net(seed)
    assert fifo_path_problems(compile_net(net)) == []
    warmup = [0, 3, 17][seed % 3]
    kw = dict(steps=40 + seed, warmup=warmup, replications=1, seed=1, parallel=False)
    f = simulate(net, engine="auto", **kw)
    assert f.engine == "fast-fifo"
    same_run(f, simulate(net, engine="generic", periodic=False, **kw))


@pytest.mark.parametrize("seed", range(12))
def test_short_history_same_run(seed, monkeypatch):
    # a history of a few rounds: the leading rounds are tallied and dropped over and over, before
    # and after the warm-up ends; the record must not change
    import sgdnet.engine.fastpath_fifo as ff

    net = ps_net(50 + seed)
    T = compile_net(net).n_transitions
    monkeypatch.setattr(ff, "MAX_HISTORY_BYTES", 8 * T * 3)
    kw = dict(steps=60 + seed, warmup=[0, 5, 40][seed % 3], replications=1, seed=1, parallel=False)
    f = simulate(net, engine="fast", **kw)
    same_run(f, simulate(net, engine="generic", periodic=False, **kw))


@pytest.mark.parametrize("seed", range(6))
def test_without_samples_the_dropped_steps_are_counted_not_kept(seed, monkeypatch):
    # samples=False on a history of a few rounds: once the warm-up's end is known the step
    # completions of the dropped rounds are only counted, so what the record keeps of them does
    # not grow with steps; the record is the samples=True one's without its step times, and the
    # generic engine's
    import sgdnet.engine.fastpath_fifo as ff
    import sgdnet.engine.fifo_record as fr

    net = ps_net(70 + seed, det=seed % 2 == 0)
    T = compile_net(net).n_transitions
    monkeypatch.setattr(ff, "MAX_HISTORY_BYTES", 8 * T * 3)
    kept, real = [], fr.Acc.compact

    def compact(self, *a, **k):
        kd = real(self, *a, **k)
        kept.append((self.samples, sum(len(x) for x in self.steps), self.ndrop))
        return kd

    monkeypatch.setattr(fr.Acc, "compact", compact)
    kw = dict(steps=300 + 7 * seed, warmup=[0, 5, 40][seed % 3], replications=1, seed=3,
              parallel=False)
    bare = simulate(net, engine="fast", samples=False, **kw)
    full = simulate(net, engine="fast", samples=True, **kw)
    generic = simulate(net, engine="generic", periodic=False, samples=False, **kw)
    without = [n for s, n, _ in kept if not s]
    assert without and max(without) <= kw["warmup"] + 8 * 3  # bounded, not ~ steps
    assert max(d for s, _, d in kept if not s) > kw["steps"] // 2  # counted instead
    assert max(n for s, n, _ in kept if s) > kw["steps"] // 2  # with samples: kept
    for a, b in ((bare, full), (bare, generic)):
        ra, rb = a._raws[0], b._raws[0]
        assert (ra.t0, ra.t1, ra.events) == (rb.t0, rb.t1, rb.events)
        np.testing.assert_array_equal(ra.firings, rb.firings)
        for f in ("busy", "wait_sum", "sojourn_sum", "token_time"):
            np.testing.assert_allclose(getattr(ra, f), getattr(rb, f), rtol=1e-9, atol=1e-12,
                                       err_msg=f)
    assert bare._raws[0].step_times.size == 0


@pytest.mark.parametrize("seed", range(4))
def test_stochastic_ps_nets_same_run_as_generic(seed):
    # firing k of a transition lasts draw k of its own stream in both engines (sgdnet.engine.rng),
    # so random durations give the very same run too
    net = ps_net(100 + seed, det=False)
    kw = dict(steps=300, warmup=30, replications=3, parallel=False)
    f = simulate(net, engine="fast", seed=seed, **kw)
    g = simulate(net, engine="generic", periodic=False, seed=seed, **kw)
    assert f.engine == "fast-fifo" and not f.deterministic
    same_run(f, g)
    np.testing.assert_array_equal(f.throughput.samples, g.throughput.samples)


def test_fast_fifo_streams_reproducible_and_per_replication():
    net = ps_net(7, det=False)
    a = simulate(net, steps=50, replications=3, seed=5, engine="fast")
    b = simulate(net, steps=50, replications=3, seed=5, engine="fast")
    for ra, rb in zip(a._raws, b._raws):
        np.testing.assert_array_equal(ra.step_times, rb.step_times)
    assert len(set(a.throughput.samples.tolist())) == 3  # each replication its own streams


def test_refusals_fall_back_to_generic():
    cases = [
        (ps_net(3, share_up=True, share_pu_su=True), "could queue requests of two rounds"),
        (ps_net(4, zero=True), "zero time"),
    ]
    n = Net("ps-res")
    a, b = n.place("a", tokens=1), n.place("b")
    n.resource("r", discipline="ps")
    n.transition("x", 1.0, inputs={a: 1}, outputs={b: 1}, resources=["r"])
    n.transition("y", 1.0, inputs={b: 1}, outputs={a: 1}, tags={"step": True})
    cases.append((n, "ps or flow"))
    n2 = Net("two-rounds")  # a circuit carrying two rounds: firings may overtake
    a, b = n2.place("a", tokens=2), n2.place("b")
    n2.resource("r")
    n2.transition("x", 1.0, inputs={a: 1}, outputs={b: 1}, resources=["r"], servers=2)
    n2.transition("y", 1.0, inputs={b: 1}, outputs={a: 1}, servers=2, tags={"step": True})
    cases.append((n2, "exactly one round"))
    n3 = Net("gpu")  # one resource serving forward and backward: a stage depends on itself
    a, b = n3.place("a", tokens=1), n3.place("b")
    n3.resource("gpu")
    n3.transition("F", 1.0, inputs={a: 1}, outputs={b: 1}, resources=["gpu"])
    n3.transition("B", 2.0, inputs={b: 1}, outputs={a: 1}, resources=["gpu"], tags={"step": True})
    cases.append((n3, "depend on one another within a round"))
    for net, why in cases:
        got = fifo_path_problems(compile_net(net))
        assert got and why in got[0], (net.name, got)
        assert simulate(net, steps=10, replications=1, seed=1).engine == "generic"
        with pytest.raises(SimulationError, match="FIFO-round class"):
            simulate(net, steps=10, replications=1, seed=1, engine="fast")


def test_builtin_variants_stay_on_the_generic_engine():
    # tests/test_golden.py runs with trace=True (always the generic engine): this pins that the
    # variants' untraced runs do not move to a fast path either (their random stream would change)
    from sgdnet import Cluster, Layer, ModelProfile, variants

    prof = ModelProfile("toy", [Layer("a", 0.01, 0.02, 4e6), Layer("b", 0.005, 0.015, 8e6)], batch_size=32)
    for name in variants.names():
        for g in ("fine", "coarse"):
            opts = {"discipline": "fifo"} if "discipline" in variants.get(name).option_names() else {}
            net = variants.build(name, prof, Cluster(workers=2), granularity=g, **opts)
            assert simulate(net, steps=5, warmup=1, replications=1, seed=1).engine == "generic", (name, g)


@pytest.mark.skipif(not os.path.isdir(ANCHORS), reason="no speed anchors on this machine")
def test_anchor_model_qualifies():
    sys.path.insert(0, ANCHORS)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    from anchor_runner import to_sgdnet
    from model import Params, build_ps_net

    net = to_sgdnet(build_ps_net(Params(N=4), deterministic=True), "anchor-det")
    assert fifo_path_problems(compile_net(net)) == []
    kw = dict(steps=60, warmup=8, replications=1, seed=1, parallel=False)
    same_run(simulate(net, **kw), simulate(net, engine="generic", periodic=False, **kw))
