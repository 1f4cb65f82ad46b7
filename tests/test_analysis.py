"""Exact analysis: max-plus cycle time of timed event graphs, and the statistics helpers.

Cycle times are checked against closed forms derived by hand (in the comments) and against a
brute force that enumerates every elementary circuit with networkx.simple_cycles; Howard and
Karp are also checked against each other. The Student-t quantile is checked against
scipy.stats.t.ppf; confidence intervals by their coverage over many seeded experiments, with
tolerances from the binomial law of the number of covering intervals.
"""

import math

import networkx as nx
import numpy as np
import pytest
from conftest import ring
from scipy import stats

from sgdnet.analysis import batch_means, cycle_time, max_cycle_ratio, mean_ci, norm_ppf, t_ppf
from sgdnet.dists import Deterministic, Exponential, Gamma
from sgdnet.errors import AnalysisError, NetError, NotEventGraphError
from sgdnet.net import Net

METHODS = ["howard", "karp"]


# ------------------------------------------------------------------------- helpers
def random_teg(seed, n, extra):
    """A strongly connected event graph: a Hamiltonian ring plus `extra` random places.

    Tokens follow a random node order: arcs going "down" the order get >= 1 token, so no
    circuit is token-free; multi-token places are common; servers are 1, 2 or inf.
    """
    rng = np.random.default_rng(seed)
    net = Net(f"teg{seed}")
    perm = rng.permutation(n)
    arcs = [(int(perm[i]), int(perm[(i + 1) % n])) for i in range(n)]
    arcs += [tuple(int(v) for v in rng.integers(0, n, 2)) for _ in range(extra)]
    rank = rng.permutation(n)
    ins = {i: [] for i in range(n)}
    outs = {i: [] for i in range(n)}
    for k, (a, b) in enumerate(arcs):
        tok = int(rng.integers(0, 2)) if rank[a] < rank[b] else int(rng.integers(1, 4))
        net.place(f"p{k}", tok)
        outs[a].append(f"p{k}")
        ins[b].append(f"p{k}")
    for i in range(n):
        servers = (1, 1, 2, math.inf)[int(rng.integers(0, 4))]
        net.transition(f"t{i}", Deterministic(float(rng.integers(0, 60)) / 7), inputs=ins[i],
                       outputs=outs[i], servers=servers, tags={"step": i == 0})
    return net


def brute_force(net):
    """lambda = max over elementary circuits of durations / tokens (networkx.simple_cycles)."""
    g = nx.DiGraph()
    prod = {p: t.name for t in net.transitions.values() for p in t.outputs}

    def add(u, v, tok):
        if g.has_edge(u, v):
            tok = min(tok, g.edges[u, v]["tok"])
        g.add_edge(u, v, tok=tok)

    for t in net.transitions.values():
        for p in t.inputs:
            add(prod[p], t.name, net.places[p].tokens)
        if t.servers != math.inf:
            add(t.name, t.name, t.servers)
    best = 0.0
    for cyc in nx.simple_cycles(g):
        tok = sum(g.edges[cyc[i], cyc[(i + 1) % len(cyc)]]["tok"] for i in range(len(cyc)))
        dur = sum(net.transitions[c].duration.mean for c in cyc)
        assert tok > 0
        best = max(best, dur / tok)
    return best


def circuit_ratio(net, ct):
    """Duration / tokens of the reported critical circuit, after checking it is a circuit."""
    c = ct.critical_circuit
    assert len(set(c)) == len(c)
    tokens = 0
    for i, (u, v) in enumerate(zip(c, c[1:] + c[:1])):
        place = ct.critical_places[i]
        if place is None:  # the servers self-loop
            assert u == v and net.transitions[u].servers != math.inf
            tokens += net.transitions[u].servers
        else:
            assert place in net.transitions[u].outputs and place in net.transitions[v].inputs
            tokens += net.places[place].tokens
    assert tokens == ct.critical_tokens
    return sum(net.transitions[t].duration.mean for t in c) / tokens


# --------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("method", METHODS)
def test_ring_with_one_token_cycles_in_the_sum_of_durations(method):
    ct = cycle_time(ring([1.0, 2.0, 3.0, 0.5], [1, 0, 0, 0]), method=method)
    assert ct.cycle_time == pytest.approx(6.5, rel=1e-12)
    assert ct.throughput == pytest.approx(1 / 6.5, rel=1e-12)
    assert ct.critical_circuit == ["t0", "t1", "t2", "t3"]
    assert ct.critical_places == ["p1", "p2", "p3", "p0"]
    assert ct.critical_tokens == 1 and ct.method == method and not ct.approximate
    assert set(ct.rates) == {"t0", "t1", "t2", "t3"}
    assert all(r == pytest.approx(1 / 6.5) for r in ct.rates.values())
    assert ct.steps_per_s == pytest.approx(1 / 6.5)  # one step transition


@pytest.mark.parametrize("method", METHODS)
def test_ring_with_several_tokens_is_bounded_by_its_slowest_single_server(method):
    # 3 tokens on a ring of 1 + 5 + 1 seconds: circuit mean 7/3, but t1 alone needs 5 s a firing
    net = ring([1.0, 5.0, 1.0], [1, 1, 1])
    ct = cycle_time(net, method=method)
    assert ct.cycle_time == pytest.approx(5.0)
    assert ct.critical_circuit == ["t1"] and ct.critical_places == [None]
    # with infinite servers the ring mean is the bound
    ct = cycle_time(ring([1.0, 5.0, 1.0], [1, 1, 1], servers=math.inf), method=method)
    assert ct.cycle_time == pytest.approx(7 / 3)
    assert ct.critical_tokens == 3


@pytest.mark.parametrize("method", METHODS)
def test_k_servers_let_k_firings_overlap(method):
    # one transition looping on a place with 5 tokens: with s servers, lambda = d / min(s, 5)
    for servers, want in ((1, 2.0), (2, 1.0), (4, 0.5), (8, 0.4), (math.inf, 0.4)):
        net = Net("self")
        net.place("p", 5)
        net.transition("t", 2.0, inputs=["p"], outputs=["p"], servers=servers)
        assert cycle_time(net, method=method).cycle_time == pytest.approx(want), servers


@pytest.mark.parametrize("method", METHODS)
def test_two_coupled_loops_cycle_at_the_larger_loop_mean(method):
    # t0 -> t1 -> t2 -> t0 with 1 token (mean 1 + 0.7 + 0.8 = 2.5) and t0 -> t3 -> t0 with
    # 2 tokens, t3 infinite-server (mean (1 + d3) / 2); t0's self-loop gives 1.
    for d3, want, crit in ((4.1, 2.55, ["t0", "t3"]), (3.0, 2.5, ["t0", "t1", "t2"])):
        net = Net("coupled")
        for name, tok in (("a01", 0), ("a12", 0), ("a20", 1), ("b03", 0), ("b30", 2)):
            net.place(name, tok)
        net.transition("t0", 1.0, inputs=["a20", "b30"], outputs=["a01", "b03"])
        net.transition("t1", 0.7, inputs=["a01"], outputs=["a12"])
        net.transition("t2", 0.8, inputs=["a12"], outputs=["a20"])
        net.transition("t3", d3, inputs=["b03"], outputs=["b30"], servers=math.inf)
        ct = cycle_time(net, method=method)
        assert ct.cycle_time == pytest.approx(want, rel=1e-12)
        assert ct.critical_circuit == crit


def pipeline(durations, buffers, loop_tokens):
    """Stages s0..s(n-1): forward places f_i (no token), credit places c_i with buffers[i]
    tokens from s(i+1) back to s(i), and a loop place s(n-1) -> s0 with loop_tokens."""
    net = Net("pipeline")
    n = len(durations)
    for i in range(n - 1):
        net.place(f"f{i}", 0)
        net.place(f"c{i}", buffers[i])
    net.place("loop", loop_tokens)
    for i, d in enumerate(durations):
        ins = ["loop" if i == 0 else f"f{i - 1}"] + ([f"c{i}"] if i < n - 1 else [])
        outs = ["loop" if i == n - 1 else f"f{i}"] + ([f"c{i - 1}"] if i > 0 else [])
        net.transition(f"s{i}", d, inputs=ins, outputs=outs)
    return net


@pytest.mark.parametrize("method", METHODS)
def test_pipeline_with_bounded_buffers(method):
    # Circuits: self-loops (max d = 3); s_i ->...-> s_j forward and back by credits, mean
    # (d_i..d_{j-1} + d_{i+1}..d_j) / (b_i + .. + b_{j-1}); the loop, sum(d) / L.
    # d = (1, 3, 2, 1), b = (1, 1, 1), L = 10: pairs 4, 5, 3; triples 9/2, 8/2; all 12/3;
    # loop 0.7  ->  lambda = 5 on s1 <-> s2.
    ct = cycle_time(pipeline((1.0, 3.0, 2.0, 1.0), (1, 1, 1), 10), method=method)
    assert ct.cycle_time == pytest.approx(5.0)
    assert ct.critical_circuit == ["s1", "s2"] and ct.critical_places == ["f1", "c1"]
    # a second slot in that buffer: pairs 4, 5/2, 3; triples 9/3, 8/3; all 12/4 -> 4 on s0 <-> s1
    ct = cycle_time(pipeline((1.0, 3.0, 2.0, 1.0), (1, 2, 1), 10), method=method)
    assert ct.cycle_time == pytest.approx(4.0)
    assert ct.critical_circuit == ["s0", "s1"]
    # one job in flight: the loop binds, 7 / 1 (two jobs: 7 / 2 < 4, the buffers still bind)
    ct = cycle_time(pipeline((1.0, 3.0, 2.0, 1.0), (1, 2, 1), 1), method=method)
    assert ct.cycle_time == pytest.approx(7.0)
    assert ct.critical_circuit == ["s0", "s1", "s2", "s3"] and ct.critical_tokens == 1
    assert cycle_time(pipeline((1.0, 3.0, 2.0, 1.0), (1, 2, 1), 2)).cycle_time == pytest.approx(4.0)


@pytest.mark.parametrize("method", METHODS)
def test_rates_are_limited_by_upstream_components_only(method):
    # ring A (period 2) feeds ring B (period 5) through a place; B cannot slow A down
    net = Net("two")
    for name, tok in (("a0", 1), ("a1", 0), ("b0", 1), ("b1", 0), ("ab", 0)):
        net.place(name, tok)
    net.transition("A0", 1.0, inputs=["a0"], outputs=["a1", "ab"], tags={"step": True})
    net.transition("A1", 1.0, inputs=["a1"], outputs=["a0"])
    net.transition("B0", 2.0, inputs=["b0", "ab"], outputs=["b1"], tags={"step": True})
    net.transition("B1", 3.0, inputs=["b1"], outputs=["b0"])
    ct = cycle_time(net, method=method)
    assert ct.cycle_time == pytest.approx(5.0)
    assert ct.critical_circuit == ["B0", "B1"]
    assert ct.rates == pytest.approx({"A0": 0.5, "A1": 0.5, "B0": 0.2, "B1": 0.2})
    assert ct.steps_per_s == pytest.approx(0.7)
    # the other way round: the slow ring upstream throttles the fast one
    net.transitions["A0"].duration = Deterministic(4.0)
    net.transitions["B1"].duration = Deterministic(0.5)
    ct = cycle_time(net, method=method)
    assert ct.cycle_time == pytest.approx(5.0)
    assert ct.rates == pytest.approx({"A0": 0.2, "A1": 0.2, "B0": 0.2, "B1": 0.2})


def test_parallel_places_count_the_fewest_tokens():
    net = Net("par")
    net.place("x", 3)
    net.place("y", 1)
    net.place("back", 0)
    net.transition("a", 2.0, inputs=["x", "y"], outputs=["back"], servers=math.inf)
    net.transition("b", 1.0, inputs=["back"], outputs=["x", "y"], servers=math.inf)
    ct = cycle_time(net)
    assert ct.cycle_time == pytest.approx(3.0)  # via y: (2 + 1) / 1
    assert "y" in ct.critical_places


# ------------------------------------------------------------------ random graphs
CASES = [(seed, 2 + seed % 8, seed % 9) for seed in range(60)]


@pytest.mark.parametrize("seed, n, extra", CASES)
def test_howard_and_karp_match_brute_force_on_random_event_graphs(seed, n, extra):
    net = random_teg(seed, n, extra)
    want = brute_force(net)
    for method in METHODS:
        ct = cycle_time(net, method=method)
        assert ct.cycle_time == pytest.approx(want, rel=1e-10), method
        assert circuit_ratio(net, ct) == pytest.approx(want, rel=1e-10), method
        # strongly connected: every transition fires at 1 / lambda
        assert all(r == pytest.approx(1 / want, rel=1e-10) for r in ct.rates.values())


def test_howard_matches_karp_on_a_larger_graph():
    net = random_teg(1234, 150, 300)
    h, k = cycle_time(net), cycle_time(net, method="karp")
    assert h.cycle_time == pytest.approx(k.cycle_time, rel=1e-10)
    assert circuit_ratio(net, h) == pytest.approx(h.cycle_time, rel=1e-10)
    assert circuit_ratio(net, k) == pytest.approx(h.cycle_time, rel=1e-10)


def test_howard_on_ten_thousand_transitions():
    # a ring of 10^4 single-server transitions with a token on every 100th place: circuits are
    # the ring (100 tokens) and the self-loops, so lambda = max(sum(d) / 100, max(d) = 1.6)
    n = 10_000
    durations = [1.0 + (i % 7) / 10 for i in range(n)]
    tokens = [1 if i % 100 == 0 else 0 for i in range(n)]
    ct = cycle_time(ring(durations, tokens))
    assert ct.cycle_time == pytest.approx(sum(durations) / 100, rel=1e-12)
    assert ct.critical_tokens == 100 and len(ct.critical_circuit) == n


def test_max_cycle_ratio_on_a_plain_graph():
    arcs = [("a", "b", 2.0, 0), ("b", "a", 4.0, 2), ("b", "c", 1.0, 1), ("c", "b", 9.0, 1),
            ("c", "c", 1.0, 1)]
    eta, circ, labels, tokens = max_cycle_ratio(["a", "b", "c"], arcs)
    assert eta == pytest.approx({"a": 5.0, "b": 5.0, "c": 5.0})  # b -> c -> b: 10 / 2
    assert circ == ["b", "c"] and tokens == 2


# ------------------------------------------------------------------------- errors
def test_not_an_event_graph_names_the_place():
    net = ring([1.0, 1.0], [1, 0])
    net.transition("t2", 1.0, inputs=["p0"], outputs=["p1"])  # p0 now has two consumers
    with pytest.raises(NotEventGraphError, match="place 'p0'"):
        cycle_time(net)


def test_not_an_event_graph_names_the_resource():
    net = ring([1.0, 1.0], [1, 0])
    net.resource("gpu0")
    net.transitions["t1"].resources = ("gpu0",)
    with pytest.raises(NotEventGraphError, match="gpu0") as e:
        cycle_time(net)
    assert "'t1'" in str(e.value) and "simulate" in str(e.value)


def test_weighted_arc_is_not_an_event_graph():
    net = ring([1.0, 1.0], [2, 0])
    net.transitions["t0"].inputs["p0"] = 2
    with pytest.raises(NotEventGraphError, match="weight 2"):
        cycle_time(net)


def test_invalid_net_raises_net_error():
    net = ring([1.0, 1.0], [1, 0])
    net.places["p1"].tokens = -1
    with pytest.raises(NetError, match="tokens=-1"):
        cycle_time(net)


@pytest.mark.parametrize("method", METHODS)
def test_token_free_circuit_is_a_deadlock(method):
    net = ring([1.0, 2.0, 3.0], [0, 0, 0])
    with pytest.raises(AnalysisError, match="t0 -> t1 -> t2 -> t0.*deadlock"):
        cycle_time(net, method=method)


def test_random_durations_need_use_means():
    net = ring([1.0, 2.0], [1, 0])
    net.transitions["t1"].duration = Exponential(2.0)
    with pytest.raises(AnalysisError, match=r"'t1'.*Exponential.*use_means=True"):
        cycle_time(net)
    ct = cycle_time(net, use_means=True)
    assert ct.approximate and ct.cycle_time == pytest.approx(3.0)
    # a degenerate random law (Gamma with cv = 0) is deterministic
    net.transitions["t1"].duration = Gamma(2.0, 0.0)
    ct = cycle_time(net)
    assert not ct.approximate and ct.cycle_time == pytest.approx(3.0)


def test_zero_durations_everywhere_is_unbounded():
    with pytest.raises(AnalysisError, match="unbounded"):
        cycle_time(ring([0.0, 0.0], [1, 0]))


def test_unknown_method():
    with pytest.raises(AnalysisError, match="'bellman'.*howard"):
        cycle_time(ring([1.0], [1]), method="bellman")


# -------------------------------------------------------------------------- stats
PS = [1e-6, 1e-5, 1e-3, 0.01, 0.025, 0.05, 0.1, 0.2, 0.25, 0.3, 0.45, 0.4999, 0.5, 0.6,
      0.75, 0.9, 0.975, 0.995, 1 - 1e-5, 1 - 1e-6]
DFS = [1, 2, 3, 4, 5, 7, 10, 19, 30, 60, 120, 1000, 10_000, 100_000, 1_000_000, 0.5, 2.5]


@pytest.mark.parametrize("df", DFS)
def test_t_ppf_matches_scipy(df):
    for p in PS:
        want = stats.t.ppf(p, df)
        assert abs(t_ppf(p, df) - want) <= 1e-8 * max(1.0, abs(want)), (p, df)


def test_t_ppf_arrays_symmetry_and_limits():
    p = np.array([0.025, 0.5, 0.975])
    got = t_ppf(p, 9)
    assert isinstance(got, np.ndarray) and got.shape == (3,)
    assert got[0] == pytest.approx(-got[2], rel=1e-14) and got[1] == 0.0
    assert t_ppf(0.975, math.inf) == pytest.approx(stats.norm.ppf(0.975), rel=1e-14)
    assert t_ppf([0.9, 0.9], [1, 2]) == pytest.approx(stats.t.ppf(0.9, [1, 2]), rel=1e-12)
    for bad in ((0.0, 3), (1.0, 3), (0.5, 0), (float("nan"), 3), ("x", 3), (0.5, -1)):
        with pytest.raises(AnalysisError):
            t_ppf(*bad)


def test_norm_ppf_matches_scipy():
    for p in PS + [1e-12, 1 - 1e-12]:
        want = stats.norm.ppf(p)
        assert abs(norm_ppf(p) - want) <= 1e-12 * max(1.0, abs(want)), p


def test_mean_ci_is_the_student_interval():
    x = np.array([3.1, 2.7, 3.9, 3.3, 2.8, 3.5])
    m, lo, hi = mean_ci(x, level=0.9)
    h = stats.t.ppf(0.95, 5) * x.std(ddof=1) / math.sqrt(6)
    assert m == pytest.approx(x.mean()) and (lo, hi) == pytest.approx((m - h, m + h), rel=1e-12)
    m, lo, hi = mean_ci([4.2])
    assert m == 4.2 and math.isnan(lo) and math.isnan(hi)
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(AnalysisError):
            mean_ci(bad)
    with pytest.raises(AnalysisError, match="level"):
        mean_ci([1.0, 2.0], level=95)


def binomial_bounds(n, p, k=4.0):
    sd = math.sqrt(n * p * (1 - p))
    return n * p - k * sd, n * p + k * sd


def test_mean_ci_covers_the_true_mean_at_its_level():
    rng = np.random.default_rng(20240601)
    n_exp, mu = 2000, 1.5
    x = rng.normal(mu, 2.0, size=(n_exp, 5))
    covered = 0
    for row in x:
        _, lo, hi = mean_ci(row)
        covered += lo <= mu <= hi
    lo_b, hi_b = binomial_bounds(n_exp, 0.95)
    assert lo_b < covered < hi_b


def ar1(rng, n_series, length, phi, mu):
    e = rng.normal(0.0, 1.0, size=(length, n_series))
    x = np.empty_like(e)
    x[0] = e[0] / math.sqrt(1 - phi * phi)  # stationary start
    for i in range(1, length):
        x[i] = phi * x[i - 1] + e[i]
    return (x + mu).T


def test_batch_means_covers_the_mean_of_an_autocorrelated_series():
    # AR(1) with phi = 0.9: correlation time ~ 19 steps; 20 batches of 500 are nearly
    # independent, while the naive iid interval is ~sqrt(19) times too narrow
    rng = np.random.default_rng(7)
    n_runs, mu = 300, 3.0
    runs = ar1(rng, n_runs, 10_000, 0.9, mu)
    bm = sum(lo <= mu <= hi for _, lo, hi in (batch_means(r, 20) for r in runs))
    naive = sum(lo <= mu <= hi for _, lo, hi in (mean_ci(r) for r in runs))
    lo_b, hi_b = binomial_bounds(n_runs, 0.95)
    # batch means of length 500 keep a small positive correlation (lag-1 ~ 0.017): allow 0.93
    assert binomial_bounds(n_runs, 0.93)[0] < bm < hi_b and lo_b > 0
    assert naive < 0.6 * n_runs


def test_batch_means_drops_the_oldest_remainder_and_validates():
    x = [100.0] + [1.0] * 40  # 41 values, 20 batches of 2: the first value is dropped
    assert batch_means(x, 20) == (1.0, 1.0, 1.0)
    with pytest.raises(AnalysisError, match="n_batches=1"):
        batch_means(x, 1)
    with pytest.raises(AnalysisError, match="at least n_batches=20"):
        batch_means([1.0] * 10, 20)
    with pytest.raises(AnalysisError, match="non-finite"):
        batch_means([1.0] * 39 + [math.inf], 20)


def chained_components(seed):
    """Three random strongly connected event graphs joined by one-way places (a DAG of SCCs)."""
    rng = np.random.default_rng(seed)
    net = Net(f"chain{seed}")
    parts = [random_teg(seed * 10 + k, int(rng.integers(2, 6)), int(rng.integers(0, 5)))
             for k in range(3)]
    for k, part in enumerate(parts):
        for p in part.places.values():
            net.place(f"c{k}{p.name}", p.tokens)
        for t in part.transitions.values():
            net.transition(f"c{k}{t.name}", t.duration, servers=t.servers, tags=t.tags,
                           inputs=[f"c{k}{p}" for p in t.inputs],
                           outputs=[f"c{k}{p}" for p in t.outputs])
    for j, (a, b) in enumerate(((0, 1), (0, 2), (1, 2))[: int(rng.integers(1, 4))]):
        src = f"c{a}t{int(rng.integers(0, len(parts[a].transitions)))}"
        dst = f"c{b}t{int(rng.integers(0, len(parts[b].transitions)))}"
        net.place(f"link{j}", int(rng.integers(0, 3)))
        net.transitions[src].outputs[f"link{j}"] = 1
        net.transitions[dst].inputs[f"link{j}"] = 1
    return net, [brute_force(p) for p in parts]


@pytest.mark.parametrize("seed", range(12))
def test_rates_follow_the_slowest_upstream_component(seed):
    net, lams = chained_components(seed)
    g = nx.DiGraph()
    prod = {p: t.name for t in net.transitions.values() for p in t.outputs}
    g.add_edges_from((prod[p], t.name) for t in net.transitions.values() for p in t.inputs)
    comp = {name: int(name[1]) for name in net.transitions}
    for method in METHODS:
        ct = cycle_time(net, method=method)
        assert ct.cycle_time == pytest.approx(max(lams), rel=1e-10)
        for name, rate in ct.rates.items():
            up = {comp[u] for u in nx.ancestors(g, name) | {name}}
            assert rate == pytest.approx(1 / max(lams[c] for c in up), rel=1e-10), (method, name)
