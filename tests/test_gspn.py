"""GSPN features of the Petri-net toolkit (issue #16): random switches (``Transition.weight``),
place and transition statistics, wait and sojourn distributions, and PNML from other tools.

- An open Jackson network with feedback and a probabilistic split (routing by weighted
  zero-duration transitions) against its closed form (product form: every station an M/M/1 at
  the rate of the traffic equations, sojourn per visit Exp(mu - lambda)) and against ``ciw``;
- Little's law on the new place statistics;
- a PNML file written by pm4py (``tests/data/pnml/claims.pnml``, made by
  ``tests/data/pnml/make_claims_pnml.py``) imports with its weights and timing and simulates
  to its renewal-reward throughput; with pm4py installed, a file it writes now does too.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sgdnet import Estimate, Exponential, Net, simulate
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import NetError, SimulationError
from sgdnet.net.pnml import from_pnml, to_pnml

DATA = Path(__file__).resolve().parent / "data" / "pnml"

# ------------------------------------------------------------------ the Jackson network
GAMMA = np.array([1.0, 0.5, 0.0])  # external Poisson arrival rates
ROUTE = np.array([[0.2, 0.5, 0.2],  # station 1 feeds itself back, then splits
                  [0.0, 0.0, 0.6],
                  [0.3, 0.0, 0.0]])
MU = np.array([2.5, 2.0, 1.7])
LAM = np.linalg.solve((np.eye(3) - ROUTE).T, GAMMA)  # traffic equations
RHO = LAM / MU


def jackson_net() -> Net:
    net = Net("jackson")
    for i in range(3):
        net.place(f"q{i}")
        net.place(f"d{i}")
        net.resource(f"s{i}")
        net.transition(f"serve{i}", Exponential(1 / MU[i]), inputs=f"q{i}", outputs=f"d{i}",
                       resources=[f"s{i}"], servers=math.inf)
        for j in range(3):
            if ROUTE[i, j] > 0:
                net.transition(f"route{i}{j}", 0.0, inputs=f"d{i}", outputs=f"q{j}",
                               servers=math.inf, weight=float(ROUTE[i, j]))
        net.transition(f"exit{i}", 0.0, inputs=f"d{i}", servers=math.inf,
                       weight=float(1 - ROUTE[i].sum()))
        if GAMMA[i] > 0:
            net.place(f"src{i}", 1)
            net.transition(f"arrive{i}", Exponential(1 / GAMMA[i]), inputs=f"src{i}",
                           outputs={f"src{i}": 1, f"q{i}": 1}, tags={"step": i == 0})
    return net.validate()


@pytest.fixture(scope="module")
def jackson():
    return simulate(jackson_net(), steps=30_000, warmup=2_000, replications=8, seed=16,
                    histograms=True)


def _close(est, exact, rel=0.0):
    """``exact`` within the 99.9% CI of ``est`` widened by ``rel`` (a histogram's resolution)."""
    assert abs(est.mean - exact) <= est.half_width(0.999) + rel * abs(exact), (est, exact)


def test_jackson_network_against_its_product_form(jackson):
    r = jackson
    assert np.all(RHO < 0.7) and not r.deterministic
    for i in range(3):
        lam, mu, rho = LAM[i], MU[i], RHO[i]
        _close(r.transition_throughput(f"serve{i}"), lam)
        _close(r.utilization(f"s{i}"), rho)
        _close(r.mean_tokens(f"q{i}"), rho ** 2 / (1 - rho))
        _close(r.mean_wait(f"s{i}"), rho / (mu - lam))
        _close(r.mean_sojourn(f"s{i}"), 1 / (mu - lam))
        for q in (0.5, 0.9, 0.99):  # the sojourn per visit is Exp(mu - lambda)
            _close(r.sojourn_quantile(f"s{i}", q), -math.log(1 - q) / (mu - lam), rel=0.011)
        for q in (0.25, 0.9):  # P(wait > x) = rho exp(-(mu - lambda) x)
            exact = max(0.0, -math.log((1 - q) / rho) / (mu - lam))
            _close(r.wait_quantile(f"s{i}", q), exact, rel=0.011)
        # the split: every route fires in proportion to its weight
        for j in range(3):
            if ROUTE[i, j] > 0:
                _close(r.transition_throughput(f"route{i}{j}"), lam * ROUTE[i, j])
        _close(r.transition_throughput(f"exit{i}"), lam * (1 - ROUTE[i].sum()))


def test_littles_law_holds_for_the_place_statistics(jackson):
    r = jackson
    for i in range(3):
        lam = r.transition_throughput(f"serve{i}").samples
        # the queue place: L = lambda W with W the wait at the server
        L = r.mean_tokens(f"q{i}").samples
        lw = lam * r.mean_wait(f"s{i}").samples
        # the station (queue + the customer in service): L = lambda W with W the sojourn
        Ls = L + r.utilization(f"s{i}").samples
        lws = lam * r.mean_sojourn(f"s{i}").samples
        for a, b in ((L, lw), (Ls, lws)):
            d = a - b  # edge effects only (customers present at t0 and t1): O(1 / window)
            e = Estimate(d)
            assert abs(e.mean) <= max(e.half_width(0.999), 0.005 * a.mean()), (i, a.mean(), b.mean())
            assert np.all(np.abs(d) <= 0.03 * a), (i, d / a)
    # routing is instantaneous, and an arrival holds its source token while it runs (tokens are
    # consumed at the start): both places average 0 tokens
    assert r.mean_tokens("d0").mean == 0.0 and r.mean_tokens("src0").mean == 0.0


def test_jackson_network_against_ciw(jackson):
    ciw = pytest.importorskip("ciw")
    from scipy import stats

    reps, horizon, warm = 6, 2_500.0, 250.0
    rows = []
    for k in range(reps):
        N = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=float(g)) if g > 0 else None for g in GAMMA],
            service_distributions=[ciw.dists.Exponential(rate=float(m)) for m in MU],
            routing=ROUTE.tolist(), number_of_servers=[1, 1, 1])
        ciw.seed(100 + k)
        Q = ciw.Simulation(N)
        Q.simulate_until_max_time(horizon)
        recs = [x for x in Q.get_all_records() if x.arrival_date > warm and x.record_type == "service"]
        row = {}
        for i in range(3):
            w = np.array([x.waiting_time for x in recs if x.node == i + 1])
            s = w + np.array([x.service_time for x in recs if x.node == i + 1])
            row[f"mean wait {i}"] = w.mean()
            row[f"mean sojourn {i}"] = s.mean()
            row[f"sojourn q0.9 {i}"] = np.quantile(s, 0.9)
            row[f"wait q0.9 {i}"] = np.quantile(w, 0.9)
            row[f"visits/s {i}"] = len(s) / (horizon - warm)
        rows.append(row)
    ours = {}
    for i in range(3):
        ours[f"mean wait {i}"] = jackson.mean_wait(f"s{i}").samples
        ours[f"mean sojourn {i}"] = jackson.mean_sojourn(f"s{i}").samples
        ours[f"sojourn q0.9 {i}"] = jackson.sojourn_quantile(f"s{i}", 0.9).samples
        ours[f"wait q0.9 {i}"] = jackson.wait_quantile(f"s{i}", 0.9).samples
        ours[f"visits/s {i}"] = jackson.transition_throughput(f"serve{i}").samples
    alpha = 1e-3 / len(ours)
    bad = {}
    for fig, a in ours.items():
        b = np.array([row[fig] for row in rows])
        p = stats.ttest_ind(a, b, equal_var=False).pvalue
        if not p > alpha:
            bad[fig] = (a.mean(), b.mean(), p)
    assert not bad, f"sgdnet vs ciw (sgdnet, ciw, p): {bad}"


# ------------------------------------------------------------------ random switches
def split_net(weights, servers=math.inf) -> Net:
    net = Net("split")
    net.place("src", 1)
    net.place("d")
    net.transition("arrive", Exponential(1.0), inputs="src", outputs={"src": 1, "d": 1},
                   tags={"step": True})
    for k, w in enumerate(weights):
        net.transition(f"r{k}", 0.0, inputs="d", servers=servers, weight=w)
    return net


def test_a_lone_weight_draws_nothing_and_unweighted_ties_keep_declaration_order():
    one = simulate(split_net([2.0, None]), steps=500, warmup=0, replications=2, seed=1)
    assert one.firings("r1").tolist() == [0, 0]  # r0 is declared first, never drawn against
    assert one.firings("r0").tolist() == [499, 499]  # (the 500th token ends the run first)
    cn_det = Net("det")
    cn_det.place("a", 1)
    cn_det.transition("t", 1.0, inputs="a", outputs="a", tags={"step": True}, weight=3.0)
    assert simulate(cn_det, steps=10, warmup=0, replications=3).deterministic
    two = split_net([1.0, 3.0])
    res = simulate(two, steps=4000, warmup=0, replications=4, seed=2)
    assert not res.deterministic
    share = res.firings("r1").sum() / 16_000  # binomial: sd 0.0034
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 16_000)


def test_simultaneous_tokens_are_routed_independently():
    # two tokens at one instant: with servers=inf each is drawn separately (4 outcomes), with one
    # server the second is forced to the transition that is not busy
    net = Net("pair")
    net.place("src", 1)
    net.place("d")
    net.transition("arrive", 1.0, inputs="src", outputs={"src": 1, "d": 2}, tags={"step": True})
    net.transition("a", 0.5, inputs="d", servers=math.inf, weight=1.0)
    net.transition("b", 0.5, inputs="d", servers=math.inf, weight=1.0)
    res = simulate(net, steps=4000, warmup=0, replications=2, seed=3, trace=True, trace_limit=10**5)
    tr = res.trace[res.trace["rep"] == 0]
    per_arrival = np.unique(tr["end"][tr["transition"] == res._t("a")], return_counts=True)[1]
    both_a = np.sum(per_arrival == 2) / 4000  # arrivals whose two tokens both went to a
    assert abs(both_a - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 4000)  # P = 1/4


def test_bad_weights_are_refused():
    for bad in (0, -1.0, math.inf, math.nan, True, "2"):
        net = split_net([1.0, bad])
        with pytest.raises(NetError, match="weight="):
            net.validate()


def test_the_reference_draws_the_same_split():
    r = simulate_reference(split_net([1.0, 2.0, 5.0]), steps=4000, warmup=0, replications=2, seed=4)
    n = np.array([r.firings(f"r{k}").sum() for k in range(3)]) / 8000
    np.testing.assert_allclose(n, [1 / 8, 2 / 8, 5 / 8], atol=4 * math.sqrt(0.25 / 8000))


# ------------------------------------------------------------------ statistics
def test_statistics_errors_and_bounded_memory():
    net = split_net([1.0, 1.0])
    res = simulate(net, steps=50, warmup=0, replications=2, seed=1)
    with pytest.raises(SimulationError, match="histograms=True"):
        res.wait_quantile("x", 0.5)
    with pytest.raises(Exception, match="place 'nope'"):
        res.mean_tokens("nope")
    with pytest.raises(SimulationError, match="histogram kind"):
        res.histogram("x", "both")
    mm1 = jackson_net()
    h = simulate(mm1, steps=200, warmup=0, replications=1, seed=1, histograms=True)
    big = simulate(mm1, steps=2000, warmup=0, replications=1, seed=1, histograms=True)
    assert h._raws[0].wait_hist.shape == big._raws[0].wait_hist.shape  # not growing with steps
    edges, counts = big.histogram("s0", "sojourn")
    assert edges.size == counts.size + 1 and counts.sum() == big._raws[0].sojourn_n[0]
    with pytest.raises(SimulationError, match="q must be"):
        big.sojourn_quantile("s0", 1.5)


def test_kernel_and_reference_agree_on_the_new_statistics():
    # deterministic durations, no weights: the same run, so the same integrals and sojourns
    net = Net("tandem")
    net.place("src", 1)
    net.place("q")
    net.place("q2")
    net.resource("a")
    net.resource("b", 1, "ps")
    net.transition("arrive", 0.75, inputs="src", outputs={"src": 1, "q": 1}, tags={"step": True})
    net.transition("s1", 1.0, inputs="q", outputs="q2", resources=["a"], servers=math.inf)
    net.transition("s2", 0.5, inputs="q2", resources=["b"], servers=2)
    kw = dict(steps=300, warmup=20, replications=1, seed=0, histograms=True)
    k, r = simulate(net, **kw), simulate_reference(net, **kw)
    kr, rr = k._raws[0], r._raws[0]
    np.testing.assert_allclose(kr.token_time, rr.token_time, rtol=1e-9)
    np.testing.assert_allclose(kr.sojourn_sum, rr.sojourn_sum, rtol=1e-9)
    assert kr.sojourn_n.tolist() == rr.sojourn_n.tolist()
    assert np.abs(kr.wait_hist - rr.wait_hist).sum() <= 2  # log() may differ by an ulp at an edge
    assert np.abs(kr.sojourn_hist - rr.sojourn_hist).sum() <= 2
    # arrivals every 0.75 s at a 1 s server: the queue grows by one every 3 s
    assert k.mean_tokens("q").mean > 10


# ------------------------------------------------------------------ PNML
def test_weights_round_trip_through_pnml():
    net = jackson_net()
    back = from_pnml(to_pnml(net))
    assert {t.name: t.weight for t in back.transitions.values()} == {
        t.name: t.weight for t in net.transitions.values()}


def _claims(net: Net) -> Net:
    """A foreign process model made cyclic: a new case starts when one ends."""
    net.transition("restart", 0.0, inputs="sink", outputs="source")
    return net


#: the renewal-reward cycle of claims.pnml: register 1, check 2 per round (4/3 rounds: decide
#: has weight 3 against recheck's 1), recheck 1 per extra round, decide 0.5, pay 1 (weight 3 of 4)
#: or reject 0 (IMMEDIATE)
CLAIMS_CYCLE = 1 + 4 / 3 * 2 + 1 / 3 * 1 + 0.5 + 3 / 4 * 1


def test_a_pm4py_written_pnml_file_imports_and_simulates():
    text = (DATA / "claims.pnml").read_text()
    assert "<pnml>" in text and "pnmlcoremodel" in text  # as pm4py writes it: no namespace
    net = from_pnml(DATA / "claims.pnml")
    t = net.transitions
    assert set(t) == {"register", "check", "recheck", "decide", "pay", "reject"}
    assert (t["decide"].weight, t["recheck"].weight) == (3.0, 1.0)
    assert t["check"].duration.mean == 2.0 and t["reject"].duration.mean == 0.0
    assert not net.step_transitions()
    with pytest.raises(SimulationError, match="no step transition"):
        simulate(_claims(net), steps=10)
    res = simulate(net, step="restart", steps=5000, warmup=10, replications=8, seed=7)
    _close(res.throughput, 1 / CLAIMS_CYCLE)
    assert not net.step_transitions()  # step= did not change the net
    ref = simulate_reference(net, step=["restart"], steps=1000, warmup=10, replications=4, seed=7)
    _close(ref.throughput, 1 / CLAIMS_CYCLE)


def test_pm4py_writes_a_net_we_read(tmp_path):
    pm4py = pytest.importorskip("pm4py")
    from pm4py.objects.petri_net.obj import Marking, PetriNet
    from pm4py.objects.petri_net.utils import petri_utils

    pn = PetriNet("pm4py-loop")
    a, b = PetriNet.Place("a"), PetriNet.Place("b")
    go, tau = PetriNet.Transition("go", "go"), PetriNet.Transition("skip", None)  # tau: silent
    back = PetriNet.Transition("back", "back")
    for x in (a, b):
        pn.places.add(x)
    for x in (go, tau, back):
        pn.transitions.add(x)
    petri_utils.add_arc_from_to(a, go, pn)
    petri_utils.add_arc_from_to(a, tau, pn)
    petri_utils.add_arc_from_to(go, b, pn, weight=2)
    petri_utils.add_arc_from_to(tau, b, pn, weight=2)
    petri_utils.add_arc_from_to(b, back, pn, weight=2)
    petri_utils.add_arc_from_to(back, a, pn)
    path = tmp_path / "loop.pnml"
    pm4py.write_pnml(pn, Marking({a: 1}), Marking(), str(path))
    net = from_pnml(path, default_duration=0.25)
    assert set(net.transitions) == {"go", "skip", "back"}
    assert net.transitions["back"].inputs == {"b": 2}
    res = simulate(net, step="back", steps=100, warmup=0, replications=1)
    assert res.throughput.mean == pytest.approx(2.0)  # 0.25 s to b, 0.25 s back


def test_namespace_less_and_core_model_documents_and_duplicate_names():
    doc = """<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/pnmlcoremodel">
      <page id="pg"><place id="p"><initialMarking><text>1</text></initialMarking></place>
      <transition id="t1"><name><text>tau</text></name></transition>
      <transition id="t2"><name><text>tau</text></name></transition>
      <arc id="a1" source="p" target="t1"/><arc id="a2" source="t1" target="p"/>
      <arc id="a3" source="p" target="t2"/><arc id="a4" source="t2" target="p"/></page></net></pnml>"""
    net = from_pnml(doc)
    assert list(net.transitions) == ["tau", "tau [t2]"]
    res = simulate(net, step=["tau", "tau [t2]"], steps=10, warmup=0, replications=1)
    assert res.throughput.mean == pytest.approx(1.0)


@pytest.mark.parametrize("step, needle", [("nope", "not a transition"), ([], "non-empty"),
                                          (3, "non-empty"), (["a", 1], "non-empty")])
def test_step_names_are_checked(step, needle):
    net = split_net([1.0, 1.0])
    with pytest.raises(SimulationError, match=needle):
        simulate(net, step=step, steps=5)
