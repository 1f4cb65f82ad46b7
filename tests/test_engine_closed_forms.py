"""The Numba engine against exact answers.

Deterministic timed event graphs: throughput equals 1 / (maximum cycle mean), computed here by
brute-force enumeration of elementary circuits (networkx.simple_cycles), single-server
transitions contributing their implicit one-token self-loop. Stochastic nets: closed forms
(H_n m for a fork-join of exponentials, the M/M/1 queueing delay, modulated means, every
distribution's mean and law) checked within 4 CI half-widths (Student t across replications,
or the standard error of iid samples) or by KS / chi-square tests at alpha = 1e-3, fixed seeds.
Deterministic traces check the resource disciplines, atomic acquisition, inhibitors,
zero-duration firings and infinite servers exactly (times derived by hand in the comments).
"""

import math

import networkx as nx
import numpy as np
import pytest
from conftest import random_event_graph
from conftest import ring as shared_ring
from scipy import stats

from sgdnet import simulate
from sgdnet.dists import (
    Deterministic,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Normal,
    ShiftedExponential,
    Straggler,
    Uniform,
)
from sgdnet.engine.reference import simulate_reference
from sgdnet.net import Net

ALPHA = 1e-3

# deterministic checks run on both engines: the oracle must pass them too
engines = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])


def half_width(x, level=0.95):
    x = np.asarray(x, float)
    return stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)


def within_ci(samples, exact, k=4.0):
    """``|mean - exact| < k`` half-widths of the 95% Student-t CI of the replication samples."""
    x = np.asarray(samples, float)
    return abs(x.mean() - exact) < k * half_width(x)


# ------------------------------------------------------------ timed event graphs
def max_cycle_mean(net: Net) -> float:
    """lambda = max over elementary circuits of (sum of durations) / (sum of tokens)."""
    g = nx.DiGraph()
    for p in net.places.values():
        (u,) = [t.name for t in net.transitions.values() if p.name in t.outputs]
        (v,) = [t.name for t in net.transitions.values() if p.name in t.inputs]
        tok = min(p.tokens, g.edges[u, v]["tokens"]) if g.has_edge(u, v) else p.tokens
        g.add_edge(u, v, tokens=tok)
    for t in net.transitions.values():
        if t.servers != math.inf:  # at most `servers` concurrent firings: a self-loop with that many tokens
            tok = min(t.servers, g.edges[t.name, t.name]["tokens"]) if g.has_edge(t.name, t.name) else t.servers
            g.add_edge(t.name, t.name, tokens=tok)
    best = 0.0
    for cyc in nx.simple_cycles(g):
        dur = sum(net.transitions[t].duration.mean for t in cyc)
        tok = sum(g.edges[cyc[i], cyc[(i + 1) % len(cyc)]]["tokens"] for i in range(len(cyc)))
        assert tok > 0, f"circuit {cyc} has no token: the test net is not live"
        best = max(best, dur / tok)
    return best


def ring(durations, tokens, servers=1, name="ring"):
    """The shared ring with its last transition as the step."""
    return shared_ring(durations, tokens, servers, name, step=-1)


def coupled():
    """Two circuits sharing t0: t0 -> t1 -> t2 -> t0 (1 token) and t0 -> t3 -> t0 (2 tokens)."""
    net = Net("coupled")
    for name, tok in (("a01", 0), ("a12", 0), ("a20", 1), ("b03", 0), ("b30", 2)):
        net.place(name, tok)
    D = Deterministic
    net.transition("t0", D(1.0), inputs=["a20", "b30"], outputs=["a01", "b03"], tags={"step": True})
    net.transition("t1", D(0.7), inputs=["a01"], outputs=["a12"])
    net.transition("t2", D(0.8), inputs=["a12"], outputs=["a20"])
    net.transition("t3", D(4.1), inputs=["b03"], outputs=["b30"], servers=math.inf)
    return net


def pipeline(durations=(1.0, 2.5, 1.5, 0.75), buffers=(1, 2, 1), loop_tokens=3):
    """A pipeline with bounded buffers (credit places) closed by a loop carrying `loop_tokens` jobs."""
    net = Net("pipeline")
    n = len(durations)
    for i in range(n - 1):
        net.place(f"f{i}", 0)  # stage i -> i+1
        net.place(f"c{i}", buffers[i])  # credits for buffer i
    net.place("loop", loop_tokens)
    for i, d in enumerate(durations):
        ins = {"loop" if i == 0 else f"f{i - 1}": 1}
        outs = {"loop" if i == n - 1 else f"f{i}": 1}
        if i < n - 1:
            ins[f"c{i}"] = 1
        if i > 0:
            outs[f"c{i - 1}"] = 1
        net.transition(f"s{i}", Deterministic(d), inputs=ins, outputs=outs, tags={"step": i == n - 1})
    return net


def random_teg(seed, n=7, chords=5):
    """A live strongly connected event graph with durations in multiples of 1/8."""
    return random_event_graph(seed, n, chords,
                              lambda rng: Deterministic(float(rng.integers(1, 40)) / 8))


TEGS = {
    "ring-1-token": lambda: ring([1.0, 2.0, 3.0, 0.5], [1, 0, 0, 0]),
    "ring-3-tokens": lambda: ring([1.0, 2.0, 3.0, 1.5, 2.5], [2, 0, 1, 0, 0]),
    "ring-3-tokens-server-bound": lambda: ring([1.0, 5.0, 1.0], [1, 1, 1]),
    "ring-3-tokens-inf-servers": lambda: ring([1.0, 5.0, 1.0], [1, 1, 1], servers=math.inf),
    "coupled": coupled,
    "pipeline": pipeline,
    **{f"random-{s}": (lambda s=s: random_teg(s)) for s in (1, 2, 3)},
}


@pytest.mark.parametrize("name", sorted(TEGS))
@engines
def test_event_graph_throughput_is_one_over_max_cycle_mean(sim, name):
    net = TEGS[name]()
    assert net.is_event_graph()
    lam = max_cycle_mean(net)
    # steps a multiple of every small cyclicity, warm-up past the transient
    res = sim(net, steps=840, warmup=400, replications=1, seed=0)
    assert res.throughput.mean == pytest.approx(1.0 / lam, rel=1e-9)
    try:  # the max-plus analysis, once present, must agree with the brute force
        from sgdnet.analysis import cycle_time
    except ImportError:
        return
    ct = cycle_time(net)
    assert ct.cycle_time == pytest.approx(lam, rel=1e-9)


def test_brute_force_sanity():
    # hand-computed: max(sum/tokens, largest single-server duration)
    assert max_cycle_mean(ring([1.0, 2.0, 3.0, 0.5], [1, 0, 0, 0])) == 6.5
    assert max_cycle_mean(ring([1.0, 5.0, 1.0], [1, 1, 1])) == 5.0
    assert max_cycle_mean(ring([1.0, 5.0, 1.0], [1, 1, 1], servers=math.inf)) == pytest.approx(7 / 3)
    # coupled: max(2.5/1, (1 + 4.1)/2, 1 (t0 self-loop))
    assert max_cycle_mean(coupled()) == pytest.approx(2.55)


# ------------------------------------------------------------------- fork-join
def fork_join(n, m):
    net = Net(f"forkjoin{n}")
    net.place("start", 1)
    for i in range(n):
        net.place(f"in{i}")
        net.place(f"out{i}")
        net.transition(f"task{i}", Exponential(m), inputs=[f"in{i}"], outputs=[f"out{i}"])
    net.transition("fork", 0.0, inputs=["start"], outputs=[f"in{i}" for i in range(n)])
    net.transition("join", 0.0, inputs=[f"out{i}" for i in range(n)], outputs=["start"], tags={"step": True})
    return net


@pytest.mark.parametrize("n", [1, 4, 16])
def test_fork_join_of_exponentials_takes_harmonic_number_times_mean(n):
    m = 0.01
    res = simulate(fork_join(n, m), steps=4000, warmup=10, replications=4, seed=100 + n)
    h_n = sum(1.0 / k for k in range(1, n + 1))
    # step times are iid (the net regenerates at each join): CI from their standard error
    x = res.step_times()
    assert x.size == 4 * 4000
    var = sum(1.0 / k**2 for k in range(1, n + 1)) * m**2  # Var(max of n iid Exp) = m^2 sum 1/k^2
    assert abs(x.mean() - h_n * m) < 4 * math.sqrt(var / x.size)
    assert within_ci(res.sim_time / res.steps, h_n * m)


# ------------------------------------------------------------------------ M/M/1
@pytest.fixture(scope="module")
def mm1():
    lam, mu = 0.6, 1.0
    net = Net("mm1")
    net.place("src", 1)
    net.place("queue")
    net.place("served")
    net.resource("server", 1, "fifo")
    net.transition("arrive", Exponential(1 / lam), inputs=["src"], outputs=["src", "queue"])
    net.transition("serve", Exponential(1 / mu), inputs=["queue"], outputs=["served"], resources=["server"],
                   servers=math.inf, tags={"step": True})
    net.transition("leave", 0.0, inputs=["served"], servers=math.inf)
    return lam, mu, simulate(net, steps=40_000, warmup=2000, replications=8, seed=7)


def test_mm1_queueing_delay(mm1):
    lam, mu, res = mm1
    rho = lam / mu
    assert within_ci(res.mean_wait("server").samples, rho / (mu - lam))  # Wq
    assert within_ci(res.utilization("server").samples, rho)
    assert within_ci(res.throughput.samples, lam)


# ----------------------------------------------------------------- ps resource
def jobs_net(works, ps_caps, holds, name="ps"):
    """One single-shot job per entry of `works`, job i holding resources holds[i]."""
    net = Net(name)
    for r, cap in ps_caps.items():
        net.resource(r, cap, "ps")
    for i, w in enumerate(works):
        net.place(f"j{i}", 1)
        net.place(f"d{i}")
        net.transition(f"job{i}", Deterministic(w), inputs=[f"j{i}"], outputs=[f"d{i}"], resources=holds[i],
                       tags={"step": True})
    return net


def ends(res):
    return {e["name"]: e["end"] for e in res.trace_events(0)}


@engines
def test_ps_two_equal_jobs_take_twice_the_solo_time(sim):
    res = sim(jobs_net([1.5, 1.5], {"link": 1}, [["link"], ["link"]]), steps=2, warmup=0,
                   replications=1, seed=0, trace=True)
    assert ends(res) == {"job0": 3.0, "job1": 3.0}
    assert res.utilization("link").mean == 1.0  # min(2 holders, capacity 1) over [0, 3]


@engines
def test_ps_rates_are_recomputed_when_holders_leave(sim):
    # both at rate 1/2 until job0 (work 1) ends at 2; job1 then has 1 left at rate 1 -> 3
    res = sim(jobs_net([1.0, 2.0], {"link": 1}, [["link"], ["link"]]), steps=2, warmup=0,
                   replications=1, seed=0, trace=True)
    assert ends(res) == pytest.approx({"job0": 2.0, "job1": 3.0}, rel=1e-12)
    # capacity 2, three jobs of work 1: rate 2/3 each -> all end at 1.5
    res = sim(jobs_net([1.0] * 3, {"link": 2}, [["link"]] * 3), steps=3, warmup=0, replications=1,
                   seed=0, trace=True)
    assert ends(res) == pytest.approx({"job0": 1.5, "job1": 1.5, "job2": 1.5}, rel=1e-12)


@engines
def test_ps_holder_of_two_resources_goes_at_the_slower_rate(sim):
    # X: job0, job1 (rate 1/2); Y: job0, job2, job3 (rate 1/3); job0 at min = 1/3.
    # job1 ends at 2; job0, job2, job3 keep rate 1/3 (Y still has 3 holders) and end at 3.
    res = sim(jobs_net([1.0] * 4, {"X": 1, "Y": 1}, [["X", "Y"], ["X"], ["Y"], ["Y"]]), steps=4,
                   warmup=0, replications=1, seed=0, trace=True)
    assert ends(res) == pytest.approx({"job0": 3.0, "job1": 2.0, "job2": 3.0, "job3": 3.0}, rel=1e-12)


# ----------------------------------------------------------- priority / fifo
def contention_net(discipline):
    """A blocker holds R on [0, 1]; jobs of priority 2, 0, 1 request R at 0.1, 0.2, 0.3."""
    net = Net(f"contention-{discipline}")
    net.resource("R", 1, discipline)
    net.place("b", 1)
    net.transition("blocker", 1.0, inputs=["b"], resources=["R"])
    for prio, delay in ((2, 0.1), (0, 0.2), (1, 0.3)):
        net.place(f"s{prio}", 1)
        net.place(f"q{prio}")
        net.transition(f"delay{prio}", delay, inputs=[f"s{prio}"], outputs=[f"q{prio}"])
        net.transition(f"job{prio}", 1.0, inputs=[f"q{prio}"], resources=["R"], priority=prio,
                       tags={"step": True})
    return net


def starts(res):
    return {e["name"]: e["start"] for e in res.trace_events(0)}


@engines
def test_priority_discipline_serves_lower_values_first(sim):
    res = sim(contention_net("priority"), steps=3, warmup=0, replications=1, seed=0, trace=True)
    s = starts(res)
    assert (s["blocker"], s["job0"], s["job1"], s["job2"]) == (0.0, 1.0, 2.0, 3.0)


@engines
def test_fifo_discipline_serves_by_request_time(sim):
    res = sim(contention_net("fifo"), steps=3, warmup=0, replications=1, seed=0, trace=True)
    s = starts(res)
    assert (s["blocker"], s["job2"], s["job0"], s["job1"]) == (0.0, 1.0, 2.0, 3.0)
    # waits: job2 0.9, job0 1.8, job1 2.7 (the blocker's 0 is counted too)
    assert res.mean_wait("R").mean == pytest.approx((0.9 + 1.8 + 2.7) / 4, rel=1e-12)


@engines
def test_atomic_multi_resource_acquisition_has_no_hold_and_wait(sim):
    # holdB takes B on [0, 2]; needAB asks for A and B at 0.5 (B busy: it must not take A);
    # needA asks for A at 1.0, finds it free and runs on [1, 4]; needAB gets both at 4.
    net = Net("atomic")
    net.resource("A")
    net.resource("B")
    for p in ("x", "y", "z"):
        net.place(p, 1)
    net.place("y1")
    net.place("z1")
    net.transition("holdB", 2.0, inputs=["x"], resources=["B"])
    net.transition("delayAB", 0.5, inputs=["y"], outputs=["y1"])
    net.transition("needAB", 1.0, inputs=["y1"], resources=["A", "B"], tags={"step": True})
    net.transition("delayA", 1.0, inputs=["z"], outputs=["z1"])
    net.transition("needA", 3.0, inputs=["z1"], resources=["A"])
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    s = starts(res)
    assert s["holdB"] == 0.0 and s["needA"] == 1.0 and s["needAB"] == 4.0
    assert res.mean_wait("B").mean == pytest.approx((0.0 + 3.5) / 2)


@engines
def test_withdrawn_requests_are_the_newest(sim):
    # R is held on [0, 5]. q gets tokens at 1 and 2, so T (servers=inf, needs R) has requests
    # stamped 1 and 2; U requests R at 1.5. At 3 a thief takes one token of q: T's degree drops
    # to 1 and its newest request (2) is withdrawn, so T keeps stamp 1 and beats U at 5.
    net = Net("withdraw")
    net.resource("R")
    for p, k in (("b", 1), ("s1", 1), ("s2", 1), ("su", 1), ("st", 1), ("q", 0), ("u", 0), ("th", 0)):
        net.place(p, k)
    net.transition("blocker", 5.0, inputs=["b"], resources=["R"])
    net.transition("d1", 1.0, inputs=["s1"], outputs=["q"])
    net.transition("d2", 2.0, inputs=["s2"], outputs=["q"])
    net.transition("du", 1.5, inputs=["su"], outputs=["u"])
    net.transition("dt", 3.0, inputs=["st"], outputs=["th"])
    net.transition("thief", 0.0, inputs=["q", "th"])
    net.transition("T", 1.0, inputs=["q"], resources=["R"], servers=math.inf, tags={"step": True})
    net.transition("U", 1.0, inputs=["u"], resources=["R"], tags={"step": True})
    res = sim(net, steps=2, warmup=0, replications=1, seed=0, trace=True)
    s = starts(res)
    assert (s["thief"], s["T"], s["U"]) == (3.0, 5.0, 6.0)
    assert res.mean_wait("R").mean == pytest.approx((0.0 + 4.0 + 4.5) / 3, rel=1e-12)


# ------------------------------------------------------------------ inhibitors
@engines
def test_inhibitor_arc_bounds_the_buffer(sim):
    # producer (1 s) may start only while buf < 2; consumer takes 3 s.
    # t=0 P; 1: P done (buf 1), C starts (buf 0), P; 2: P done (1), P; 3: P done (2): inhibited;
    # 4: C done, C starts (1), P; 5: P done (2); 7: C, P; ... so P starts at 0, 1, 2, 4, 7, 10, ...
    net = Net("inhibitor")
    net.place("buf")
    net.place("gone")
    net.transition("produce", 1.0, outputs=["buf"], inhibitors={"buf": 2})
    net.transition("consume", 3.0, inputs=["buf"], outputs=["gone"], tags={"step": True})
    net.transition("sink", 0.0, inputs=["gone"], servers=math.inf)
    res = sim(net, steps=20, warmup=2, replications=1, seed=0, trace=True)
    p_starts = sorted(e["start"] for e in res.trace_events(0) if e["name"] == "produce")
    assert p_starts[:8] == [0.0, 1.0, 2.0, 4.0, 7.0, 10.0, 13.0, 16.0]
    c_starts = sorted(e["start"] for e in res.trace_events(0) if e["name"] == "consume")
    assert c_starts[:4] == [1.0, 4.0, 7.0, 10.0]
    assert res.throughput.mean == pytest.approx(1 / 3, rel=1e-12)
    # in the counted window P completes as often as C, up to the buffer's change (at most 2)
    assert abs(int(res.firings("produce")[0]) - int(res.firings("consume")[0])) <= 2


# --------------------------------------------------------- zero-duration firings
@engines
def test_zero_duration_chain_completes_before_time_advances(sim):
    net = Net("zero")
    for p, k in (("a", 1), ("b", 0), ("c", 0), ("d", 0)):
        net.place(p, k)
    net.transition("work", 1.25, inputs=["a"], outputs=["b"])
    net.transition("z1", 0.0, inputs=["b"], outputs=["c"])
    net.transition("z2", 0.0, inputs=["c"], outputs=["d"])
    net.transition("z3", 0.0, inputs=["d"], outputs=["a"], tags={"step": True})
    res = sim(net, steps=50, warmup=5, replications=1, seed=0, trace=True)
    assert res.throughput.mean == pytest.approx(0.8, rel=1e-12)
    ev = res.trace_events(0)
    names = [e["name"] for e in ev]
    assert names[:8] == ["work", "z1", "z2", "z3"] * 2  # completion order within each instant
    for e in ev:
        k = math.floor(e["end"] / 1.25 + 0.5)
        if e["name"] != "work":
            assert e["start"] == e["end"] == pytest.approx(1.25 * k, rel=1e-12)
    times, _ = res.step_completion_times(0)
    np.testing.assert_allclose(np.diff(times), 1.25, rtol=1e-12)


# ------------------------------------------------------------- infinite servers
@pytest.mark.parametrize("servers, expected", [(math.inf, 1.0), (1, 0.1), (3, 0.3)])
@engines
def test_servers_bound_concurrency_and_inf_is_a_pure_delay(sim, servers, expected):
    net = Net("delay")
    net.place("src", 1)
    net.place("q")
    net.transition("emit", 1.0, inputs=["src"], outputs=["src", "q"])
    net.transition("delay", 10.0, inputs=["q"], servers=servers, tags={"step": True})
    res = sim(net, steps=300, warmup=100, replications=1, seed=0)
    assert res.throughput.mean == pytest.approx(expected, rel=1e-9)


# ------------------------------------------------------------------- modulators
def straggler_step_net(base):
    """Three sequential ops of a step share one multiplier, redrawn when op0 starts."""
    net = Net("modulated-step")
    net.modulator("slow", Straggler(1.0, p=0.2, factor=5.0), resample_on=["op0"])
    for i in range(3):
        net.place(f"p{i}", 1 if i == 0 else 0)
    for i, d in enumerate(base):
        net.transition(f"op{i}", d, inputs=[f"p{i}"], outputs=[f"p{(i + 1) % 3}"], modulator="slow",
                       tags={"step": i == 2})
    return net


@engines
def test_iid_modulator_scales_a_whole_step(sim):
    res = sim(straggler_step_net([1.0, 2.0, 3.0]), steps=3000, warmup=10, replications=2, seed=3)
    x = res.step_times()
    # the multiplier is shared by the three ops: a step lasts 6 or 30, never a mix
    np.testing.assert_allclose(np.unique(np.round(x, 9)), [6.0, 30.0])
    frac = np.mean(np.isclose(x, 30.0))
    assert abs(frac - 0.2) < 4 * math.sqrt(0.2 * 0.8 / x.size)
    assert abs(x.mean() - 6.0 * 1.8) < 4 * x.std() / math.sqrt(x.size)


def test_iid_modulator_mean_is_base_times_mean_multiplier():
    res = simulate(straggler_step_net([Exponential(1.0)] * 3), steps=3000, warmup=10, replications=6, seed=4)
    assert within_ci(res.sim_time / res.steps, 3.0 * 1.8)


@pytest.mark.parametrize("sim, steps", [(simulate, 20_000), (simulate_reference, 4000)], ids=["kernel", "reference"])
def test_markov_modulator_long_run_mix(sim, steps):
    # Poisson arrivals see the chain's stationary law (PASTA): a firing is slow with
    # probability mean_slow / (mean_fast + mean_slow) = 1/3, so E[duration] = 0.01 (2/3 + 4/3).
    net = Net("markov")
    net.markov_modulator("mode", slow_factor=4.0, mean_fast="1s", mean_slow="500ms")
    net.place("src", 1)
    net.place("q")
    net.transition("arrive", Exponential(0.1), inputs=["src"], outputs=["src", "q"])
    net.transition("work", 0.01, inputs=["q"], servers=math.inf, modulator="mode", tags={"step": True})
    res = sim(net, steps=steps, warmup=100, replications=6, seed=5, trace=True)
    per_rep = []
    for k in range(res.replications):
        tr = res.trace[(res.trace["rep"] == k) & (res.trace["transition"] == res.transition_names.index("work"))]
        d = tr["end"] - tr["start"]
        np.testing.assert_allclose(np.unique(np.round(d, 12)), [0.01, 0.04])
        per_rep.append(d.mean())
    assert within_ci(per_rep, 0.02)


@engines
def test_markov_modulator_starts_from_the_stationary_law(sim):
    # the first firing of each replication is slow with probability 0.5 / (1 + 0.5) = 1/3
    net = Net("markov-start")
    net.markov_modulator("mode", slow_factor=4.0, mean_fast="1s", mean_slow="500ms")
    net.place("go", 1)
    net.transition("work", 0.01, inputs=["go"], modulator="mode", tags={"step": True})
    res = sim(net, steps=1, warmup=0, replications=3000, seed=6)
    slow = np.isclose(res.sim_time, 0.04)
    assert np.all(slow | np.isclose(res.sim_time, 0.01))
    assert abs(slow.mean() - 1 / 3) < 4 * math.sqrt(2 / 9 / slow.size)


# ------------------------------------------------------- every distribution law
DISTS = {
    "det": (Deterministic(0.8), None),
    "exp": (Exponential(1.0), stats.expon(scale=1.0).cdf),
    "unif": (Uniform(0.5, 1.5), stats.uniform(0.5, 1.0).cdf),
    "norm": (Normal(1.0, 0.5), stats.truncnorm(-2.0, np.inf, loc=1.0, scale=0.5).cdf),
    "logn": (LogNormal(1.0, 0.6), stats.lognorm(s=math.sqrt(math.log(1.36)), scale=1 / math.sqrt(1.36)).cdf),
    "gamma": (Gamma(1.0, 0.5), stats.gamma(4.0, scale=0.25).cdf),
    "gamma0": (Gamma(0.9, 0.0), None),
    "shexp": (ShiftedExponential(0.4, 1.0), stats.expon(loc=0.4, scale=0.6).cdf),
    "emp": (Empirical([0.5, 1.0, 1.0, 2.5]), None),
    "strag": (Straggler(Exponential(0.5), 0.25, 4.0),
              lambda x: 0.75 * stats.expon.cdf(x, scale=0.5) + 0.25 * stats.expon.cdf(x, scale=2.0)),
    "strag-emp": (Straggler(Empirical([0.5, 1.5]), 0.5, 2.0), None),
}


@pytest.fixture(scope="module")
def dist_trace():
    net = Net("dists")
    net.place("clk", 1)
    net.transition("clock", 1.0, inputs=["clk"], outputs=["clk"], tags={"step": True})
    for name, (d, _) in DISTS.items():
        net.place(name, 1)
        net.transition(name, d, inputs=[name], outputs=[name])
    res = simulate(net, steps=4000, warmup=0, replications=2, seed=11, trace=True)
    out = {}
    for name in DISTS:
        tr = res.trace[res.trace["transition"] == res.transition_names.index(name)]
        out[name] = tr["end"] - tr["start"]
    return out


@pytest.mark.parametrize("name", sorted(DISTS))
def test_kernel_samples_each_distribution_with_its_mean(dist_trace, name):
    d, cdf = DISTS[name]
    x = dist_trace[name]
    assert x.size > 2000
    if d.var == 0:
        np.testing.assert_allclose(x, d.mean, rtol=1e-12)
        return
    assert abs(x.mean() - d.mean) < 4 * math.sqrt(d.var / x.size)
    if cdf is not None:
        assert stats.kstest(x, cdf).pvalue > ALPHA


def test_kernel_empirical_frequencies(dist_trace):
    x = dist_trace["emp"]
    vals, counts = np.unique(np.round(x, 12), return_counts=True)
    assert list(vals) == [0.5, 1.0, 2.5]
    assert stats.chisquare(counts, np.array([0.25, 0.5, 0.25]) * x.size).pvalue > ALPHA
    y = np.round(dist_trace["strag-emp"], 12)
    vals, counts = np.unique(y, return_counts=True)
    assert list(vals) == [0.5, 1.0, 1.5, 3.0]  # base in {0.5, 1.5}, times 2 with p = 1/2
    assert stats.chisquare(counts, np.full(4, y.size / 4)).pvalue > ALPHA
