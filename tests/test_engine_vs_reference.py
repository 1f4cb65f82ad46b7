"""The Numba engine against the pure-Python reference simulator (engine/reference.py).

Randomised small nets from fixed generator seeds: stochastic event graphs, job cycles sharing
fifo / priority / ps resources (with iid and Markov modulators, infinite servers, priorities),
bounded buffers and cross inhibitor arcs, and workers guarded by ``lag`` and ``dynamic_lag``
gates. Two kinds of checks:

- deterministic durations: both engines must produce the *same* run (throughput to 1e-9, the
  same firings and wait counts, busy and wait sums, step completion times, gate decisions and
  trace), which pins down every tie-breaking rule of the contract;
Flow nets (hosts whose links carry transfers over connections, with latencies, incast
efficiencies and rate caps): the two engines round max-min shares differently (the kernel keeps
a virtual clock per bottleneck, the oracle advances every flow), so completions that tie in exact
arithmetic may come a rounding apart, in either order; their "same run" compares completions
ordered by (time to 1e-9, transition).

- stochastic durations, modulators and random switches: the same run too, replication by
  replication, because both engines draw from the same counter-based streams
  (sgdnet.engine.rng: firing k of a transition lasts draw k of its stream, whatever order the
  engine processes events in); the samplers are checked against their laws in test_rng.py, and
  the switches' choices against their weights here.
"""

import math

import numpy as np
import pytest
from conftest import random_event_graph
from scipy import stats

from sgdnet import simulate
from sgdnet.dists import Deterministic, Exponential, Gamma, LogNormal, Straggler, Uniform
from sgdnet.engine.reference import simulate_reference
from sgdnet.net import Net

DISCIPLINES = ("fifo", "priority", "ps", "flow")


def duration(rng, mean, det):
    if det:
        return Deterministic(max(round(mean * 8), 1) / 8)  # multiples of 1/8: exact float sums
    k = int(rng.integers(4))
    return (Exponential(mean), LogNormal(mean, 0.5), Uniform(0.5 * mean, 1.5 * mean), Gamma(mean, 0.7))[k]


# ------------------------------------------------------------------ generators
def teg_net(seed, det=False, n=6, chords=4):
    """A live strongly connected event graph (forward arcs empty, backward arcs >= 1 token)."""
    return random_event_graph(seed, n, chords,
                              lambda rng: duration(rng, float(rng.uniform(0.3, 2.0)), det))


def resource_net(seed, det=False, inhibitors=False):
    """Job cycles whose stages hold random subsets of shared resources of random disciplines."""
    rng = np.random.default_rng(seed)
    net = Net(f"res{seed}{'-inh' if inhibitors else ''}")
    nres = int(rng.integers(1, 4))
    res = [f"r{k}" for k in range(nres)]
    for r in res:
        net.resource(r, int(rng.integers(1, 3)), DISCIPLINES[int(rng.integers(3))])
    ncyc = int(rng.integers(2, 5))
    stages = [int(rng.integers(2, 5)) for _ in range(ncyc)]
    mods = []
    if rng.random() < 0.6:
        mods.append("iid")
        mult = Deterministic(1.5) if det else Straggler(1.0, 0.3, 3.0)
        net.modulator("iid", mult, resample_on=["c0s0"])
    if not det and rng.random() < 0.6:
        mods.append("mk")
        net.markov_modulator("mk", 3.0, "5s", "2s")
    holds = {(c, i): [r for r in res if rng.random() < 0.4] for c in range(ncyc) for i in range(stages[c])}
    for r in res:  # every resource is contended: held in at least two cycles
        while len({c for (c, _), h in holds.items() if r in h}) < 2:
            c = int(rng.integers(ncyc))
            i = int(rng.integers(stages[c]))
            if r not in holds[(c, i)]:
                holds[(c, i)].append(r)
    for c in range(ncyc):
        for i in range(stages[c]):
            net.place(f"c{c}p{i}", int(rng.integers(1, 3)) if i == 0 else 0)
    if inhibitors:
        net.place("buf")
        k = int(rng.integers(1, 4))
        net.transition("produce", duration(rng, 0.8, det), outputs=["buf"], inhibitors={"buf": k},
                       resources=[res[0]] if rng.random() < 0.5 else [])
    for c in range(ncyc):
        for i in range(stages[c]):
            ins = {f"c{c}p{i}": 1}
            if inhibitors and (c, i) == (0, 0):
                ins["buf"] = 1
            inh = {"c0p1": 1} if inhibitors and (c, i) == (1, 1) else {}
            mod = mods[int(rng.integers(len(mods)))] if mods and rng.random() < 0.7 else None
            net.transition(
                f"c{c}s{i}", duration(rng, float(rng.uniform(0.3, 1.5)), det), inputs=ins,
                outputs={f"c{c}p{(i + 1) % stages[c]}": 1}, inhibitors=inh, resources=holds[(c, i)],
                servers=math.inf if rng.random() < 0.2 else 1, priority=int(rng.integers(0, 3)),
                modulator=mod, tags={"step": i == stages[c] - 1, "worker": c},
            )
    if "iid" in mods and not any(t.modulator == "iid" for t in net.transitions.values()):
        net.transitions["c0s0"].modulator = "iid"
    if "mk" in mods and not any(t.modulator == "mk" for t in net.transitions.values()):
        net.transitions["c1s0"].modulator = "mk"
    return net.validate()


def gate_net(seed, kind, det=False):
    """Workers (compute, then push over a shared link) guarded by a lag / dynamic_lag gate."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    net = Net(f"{kind}{seed}")
    net.resource("link", 1, ("fifo", "ps")[int(rng.integers(2))])
    for i in range(n):
        net.place(f"w{i}.ready", 1)
        net.place(f"w{i}.grad")
    if kind == "lag":
        net.gate("g", "lag", [f"w{i}.push" for i in range(n)], s=int(rng.integers(0, 3)))
    else:
        net.gate("g", "dynamic_lag", [f"w{i}.push" for i in range(n)], s_lower=int(rng.integers(0, 2)),
                 r_max=int(rng.integers(1, 4)))
    for i in range(n):
        speed = float(rng.uniform(1.0, 3.0))
        net.transition(f"w{i}.compute", duration(rng, speed, det), inputs=[f"w{i}.ready"],
                       outputs=[f"w{i}.grad"], gate=("g", i), tags={"worker": i, "kind": "compute"})
        net.transition(f"w{i}.push", duration(rng, 0.25, det), inputs=[f"w{i}.grad"],
                       outputs=[f"w{i}.ready"], resources=["link"],
                       tags={"worker": i, "kind": "comm", "step": True})
    if kind == "dynamic_lag" and seed % 2:  # odd seeds: a hard cap s_upper too
        g = net.gates["g"]
        g.s_upper = g.s_lower + int(rng.integers(0, 3))
    return net.validate()


def bucket(rng, bw, on):
    """Token-bucket options of a link of bandwidth ``bw`` (``on``: some links get one, with a
    burst of about one message and a peak 2-10x the bandwidth or the default)."""
    if not on or rng.random() < 0.4:
        return {}
    return {"burst": float(rng.uniform(0.1, 1.2)),
            "peak": float(bw * rng.uniform(2.0, 10.0)) if rng.random() < 0.7 else None}


def flow_net(seed, det=False, buckets=False):
    """Hosts computing then sending two messages each over their links (one connection per pair);
    with ``buckets``, token buckets on some links."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    net = Net(f"{'bucket' if buckets else 'flow'}{seed}")
    for i in range(n):
        lat = float(rng.uniform(0.01, 0.2)) if rng.random() < 0.4 else 0.0
        eff = (1.0, 0.9, 0.75) if rng.random() < 0.5 else None
        bu, bd = float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.5, 2.0))
        net.link(f"up{i}", bu, latency=lat, **bucket(rng, bu, buckets))
        net.link(f"dn{i}", bd, efficiency=eff, **bucket(rng, bd, buckets))
        net.resource(f"gpu{i}")

    def nbytes(mean):
        return Deterministic(mean) if det else (Exponential(mean), LogNormal(mean, 0.5))[int(rng.integers(2))]

    for i in range(n):
        net.place(f"h{i}.ready", int(rng.integers(1, 3)))
        net.place(f"h{i}.out")
        net.place(f"h{i}.half")
        net.transition(f"h{i}.compute", duration(rng, float(rng.uniform(0.2, 1.0)), False) if not det
                       else Deterministic(float(rng.uniform(0.2, 1.0))),
                       inputs=[f"h{i}.ready"], outputs=[f"h{i}.out"], resources=[f"gpu{i}"],
                       tags={"worker": i, "kind": "compute", "step": True})
        for k, (src, dst) in enumerate(((f"h{i}.out", f"h{i}.half"), (f"h{i}.half", f"h{i}.ready"))):
            j = int(rng.choice([x for x in range(n) if x != i]))
            cap = float(rng.uniform(0.2, 0.8)) if rng.random() < 0.2 else None
            net.transfer(f"h{i}.m{k}", nbytes(float(rng.uniform(0.2, 1.5))), [f"up{i}", f"dn{j}"],
                         inputs=[src], outputs=[dst], connection=f"{i}->{j}", cap=cap,
                         servers=math.inf if rng.random() < 0.3 else 1, tags={"worker": i})
    return net.validate()


def star_net(seed, det=False, buckets=False):
    """Hosts pushing to and pulling from one server over its two links: mostly every flow is
    bottlenecked at a server link (the kernel's single-bottleneck fast path), sometimes at a slow
    host link or a rate cap; a host's pushes may overlap (no connection key) on its uplink.
    With ``buckets``, token buckets on the server's inbound link and some host links (the fast
    path then serves the pulls' component only)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    net = Net(f"{'bstar' if buckets else 'star'}{seed}")
    eff = (1.0, 0.95, 0.9, 0.8) if rng.random() < 0.5 else None
    bi = float(rng.uniform(1.5, 4.0))
    net.link("srv_in", bi, efficiency=eff,
             **({"burst": float(rng.uniform(0.5, 2.0)), "peak": 3 * bi} if buckets else {}))
    net.link("srv_out", float(rng.uniform(1.5, 4.0)))

    def nbytes(mean):
        return Deterministic(mean) if det else (Exponential(mean), LogNormal(mean, 0.5))[int(rng.integers(2))]

    for i in range(n):
        bu = float(rng.uniform(0.3, 2.0))
        net.link(f"up{i}", bu, **bucket(rng, bu, buckets))
        net.link(f"dn{i}", float(rng.uniform(0.3, 2.0)))
        net.resource(f"gpu{i}")
        net.place(f"h{i}.ready", int(rng.integers(1, 4)))
        net.place(f"h{i}.out")
        net.place(f"h{i}.back")
        net.transition(f"h{i}.compute", Deterministic(float(rng.uniform(0.1, 0.6))) if det
                       else duration(rng, float(rng.uniform(0.1, 0.6)), False),
                       inputs=[f"h{i}.ready"], outputs=[f"h{i}.out"], resources=[f"gpu{i}"],
                       tags={"worker": i, "kind": "compute", "step": True})
        shared = rng.random() < 0.3  # no connection key: the host's pushes share its uplink
        cap = float(rng.uniform(0.2, 0.6)) if rng.random() < 0.15 else None
        net.transfer(f"h{i}.push", nbytes(float(rng.uniform(0.2, 1.5))), [f"up{i}", "srv_in"],
                     inputs=[f"h{i}.out"], outputs=[f"h{i}.back"], cap=cap,
                     connection=None if shared else f"{i}->s", servers=math.inf if shared else 1,
                     tags={"worker": i})
        net.transfer(f"h{i}.pull", nbytes(float(rng.uniform(0.2, 1.5))), ["srv_out", f"dn{i}"],
                     inputs=[f"h{i}.back"], outputs=[f"h{i}.ready"], connection=f"s->{i}",
                     tags={"worker": i})
    return net.validate()


NETS = {
    **{f"teg-{s}": (lambda det, s=s: teg_net(s, det)) for s in (1, 2, 3)},
    **{f"res-{s}": (lambda det, s=s: resource_net(s, det)) for s in (1, 2, 3, 4, 5, 6, 9, 10)},
    **{f"inh-{s}": (lambda det, s=s: resource_net(s, det, inhibitors=True)) for s in (7, 8)},
    **{f"lag-{s}": (lambda det, s=s: gate_net(s, "lag", det)) for s in (1, 2)},
    # dssp-112: one worker's lead grows past the kernel's lead bins (no s_upper)
    **{f"dssp-{s}": (lambda det, s=s: gate_net(s, "dynamic_lag", det)) for s in (1, 2, 3, 4, 5, 112)},
    **{f"flow-{s}": (lambda det, s=s: flow_net(s, det)) for s in (1, 2, 3, 4, 5, 6)},
    **{f"star-{s}": (lambda det, s=s: star_net(s, det)) for s in (2, 3, 4)},
    # token buckets (sgdnet.engine.kernel.buckets): links that run at their peak for a burst
    **{f"bucket-{s}": (lambda det, s=s: flow_net(s, det, buckets=True)) for s in (1, 2, 3, 4)},
    **{f"bstar-{s}": (lambda det, s=s: star_net(s, det, buckets=True)) for s in (2, 3)},
}
FLOWS = ("flow", "star", "bucket", "bstar")  # nets of flows: rounded ties, looser tolerances


def test_generators_cover_the_features():
    nets = [make(False) for make in NETS.values()]
    discs = {r.discipline for n in nets for r in n.resources.values()}
    assert discs == set(DISCIPLINES)
    mods = {m.kind for n in nets for m in n.modulators.values()}
    assert mods == {"iid", "markov"}
    assert {g.kind for n in nets for g in n.gates.values()} == {"lag", "dynamic_lag"}
    assert any(t.inhibitors for n in nets for t in n.transitions.values())
    assert any(t.servers == math.inf for n in nets for t in n.transitions.values())
    assert any(len(t.resources) >= 2 for n in nets for t in n.transitions.values())
    links = [r for n in nets for r in n.resources.values() if r.discipline == "flow"]
    assert any(r.burst and r.peak is None for r in links) and any(r.burst and r.peak for r in links)


# ------------------------------------------------------- same run, deterministic or not
def assert_same_run(net, k, r, rounded, rtol=1e-9):
    """Every replication of the kernel's ``k`` and the reference's ``r`` is the same run.

    ``rtol`` bounds the relative differences of times and sums; completion times are compared to
    ``1e-12`` unless ``rtol`` is looser (stochastic flow nets: the engines' roundings of max-min
    shares drift apart over a run, ~1e-12 after 200 steps and ~1e-8 after 300 in one case, as
    perturbations do in a network of shared links)."""
    ttol = rtol if rtol > 1e-9 else 1e-12
    np.testing.assert_allclose(k.throughput.samples, r.throughput.samples, rtol=rtol)
    for t in net.transitions:
        assert k.firings(t).tolist() == r.firings(t).tolist(), t
    for rep in range(len(k.seeds)):
        kt, ktr = k.step_completion_times(rep)
        rt, rtr = r.step_completion_times(rep)
        np.testing.assert_allclose(kt, rt, rtol=ttol)
        assert _in_order(kt, ktr, rounded) == _in_order(rt, rtr, rounded)
    for res in net.resources:
        np.testing.assert_allclose(k.utilization(res).samples, r.utilization(res).samples, rtol=rtol, atol=1e-12,
                                   err_msg=res)
        np.testing.assert_allclose(k.mean_wait(res).samples, r.mean_wait(res).samples, rtol=rtol, atol=1e-12,
                                   err_msg=res)
    for kraw, rraw in zip(k._raws, r._raws):  # the raw records: counts must be identical
        assert list(kraw.wait_n) == list(rraw.wait_n)
        np.testing.assert_allclose(kraw.wait_sum, rraw.wait_sum, rtol=rtol, atol=1e-9)
        np.testing.assert_allclose(kraw.busy, rraw.busy, rtol=rtol, atol=1e-9)
    for g in net.gates:
        assert k.gate_log(g).tolist() == r.gate_log(g).tolist()
        ks, rs = k.gate_stats(g), r.gate_stats(g)  # the leads at every counter completion
        assert rs.lead_counts.sum() > 0
        # the kernel pools leads >= its lead_overflow_at in its last bin, the reference keeps
        # every lead (an unbounded lead: a dynamic_lag gate without s_upper, e.g. dssp-112)
        cut = ks.lead_overflow_at
        for kl, rl in zip(ks.lead_counts, rs.lead_counts):
            exact = np.zeros(cut, dtype=np.int64)
            exact[:min(cut, rl.size)] = rl[:cut]
            assert kl[:cut].tolist() == exact.tolist()
            assert kl[cut:].sum() == rl[cut:].sum()
    if k.trace is None:
        return
    assert (_in_order(k.trace["end"], k.trace["transition"], rounded)
            == _in_order(r.trace["end"], r.trace["transition"], rounded))
    if not rounded:
        np.testing.assert_allclose(k.trace["start"], r.trace["start"], rtol=ttol, atol=1e-12)
    np.testing.assert_allclose(k.trace["end"], r.trace["end"], rtol=ttol, atol=1e-12)


@pytest.mark.parametrize("name", sorted(NETS))
def test_deterministic_nets_give_the_same_run(name):
    net = NETS[name](True)
    kw = dict(steps=150, warmup=15, replications=1, seed=0, trace=True, trace_limit=5000)
    k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)  # the kernel, not the fast path
    assert k.deterministic
    assert_same_run(net, k, r, name.startswith(FLOWS))


def _in_order(times, trans, rounded):
    """The completed transitions in completion order; with ``rounded``, completions whose times
    agree to 1e-9 are ordered by transition instead (ties that rounding may break either way)."""
    if not rounded:
        return list(trans)
    return [t for _, t in sorted(zip(np.round(np.asarray(times), 9), np.asarray(trans).tolist()))]


# ---------------------------------------------------- stochastic: same run
@pytest.mark.parametrize("name", sorted(NETS))
def test_stochastic_nets_give_the_same_run(name):
    # firing k of a transition lasts draw k of its stream in both engines, an iid modulator's
    # j-th multiplier is draw j of its stream and a Markov modulator's j-th sojourn likewise
    # (sgdnet.engine.rng): random durations, modulators and gates give the very same run
    net = NETS[name](False)
    kw = dict(steps=300, warmup=30, replications=2, seed=1, trace=True, trace_limit=3000)
    k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)
    assert not k.deterministic
    flows = name.startswith(FLOWS)
    assert_same_run(net, k, r, flows, rtol=1e-6 if flows else 1e-9)


# ------------------------------------------------------- trace bound and replay
@pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
def test_trace_is_bounded_and_a_prefix(sim):
    net = NETS["res-2"](False)
    full = sim(net, steps=50, warmup=5, replications=2, seed=9, trace=True)
    short = sim(net, steps=50, warmup=5, replications=2, seed=9, trace=True, trace_limit=7)
    for rep in range(2):
        a = full.trace[full.trace["rep"] == rep]
        b = short.trace[short.trace["rep"] == rep]
        assert b.size == 7 and np.array_equal(a[:7], b)
        assert np.all(np.diff(a["end"]) >= 0)  # completion order
    assert sim(net, steps=5, warmup=0, replications=1, seed=9).trace is None


def test_reference_replays_a_replication_from_its_seed():
    net = NETS["dssp-2"](False)
    res = simulate_reference(net, steps=60, warmup=5, replications=3, seed=12)
    again = simulate_reference(net, steps=60, warmup=5, seeds=[res.seeds[1]])
    assert again.seeds == [res.seeds[1]]
    assert again.throughput.samples[0] == res.throughput.samples[1]
    np.testing.assert_array_equal(again.step_completion_times(0)[0], res.step_completion_times(1)[0])


# ------------------------------------------------------- random switches (weights)
def switch_net(seed, bus="fifo"):
    """A closed network of stations (fifo / priority / ps servers) whose customers are routed by
    weighted zero-duration transitions, with feedback; the routes of some stations hold a shared
    one-server ``bus`` for a moment, so that tied weighted candidates also wait in a resource
    queue (a ``fifo`` ring or a ``priority`` heap) when the switch draws. (A route blocked on
    the bus while another one of its station could start is not in the draw, as in a GSPN where
    the bus would be a place: routes mixing both kinds would not fire in proportion to their
    weights.)"""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    net = Net(f"switch{seed}-{bus}")
    net.resource("bus", 1, bus)
    for i in range(n):
        net.place(f"q{i}", int(rng.integers(1, 4)))
        net.place(f"d{i}")
        net.resource(f"s{i}", int(rng.integers(1, 3)), ("fifo", "priority", "ps")[int(rng.integers(3))])
    for i in range(n):
        net.transition(f"serve{i}", duration(rng, float(rng.uniform(0.3, 1.5)), False), inputs=f"q{i}",
                       outputs=f"d{i}", resources=[f"s{i}"], servers=math.inf,
                       priority=int(rng.integers(0, 2)), tags={"step": i == 0, "worker": i})
        dests = sorted({int(x) for x in rng.choice(n, size=int(rng.integers(2, n + 1)), replace=False)} | {i})
        on_bus = rng.random() < 0.5  # all routes of a station or none, so that they all compete
        for j in dests:
            net.transition(f"route{i}{j}", Deterministic(0.125) if on_bus else 0.0, inputs=f"d{i}",
                           outputs=f"q{j}", servers=math.inf, resources=["bus"] if on_bus else None,
                           weight=float(rng.choice([0.5, 1.0, 2.0, 4.0])))
    return net.validate()


SWITCH_NETS = {f"switch-{s}-{b}": (lambda s=s, b=b: switch_net(s, b))
               for s, b in ((1, "fifo"), (2, "priority"), (3, "fifo"), (4, "priority"))}


@pytest.mark.parametrize("name", sorted(SWITCH_NETS))
def test_random_switches_give_the_same_run(name):
    # the switches draw from their own stream, one draw per choice among two or more candidates
    net = SWITCH_NETS[name]()
    kw = dict(steps=300, warmup=30, replications=2, seed=1, trace=True, trace_limit=3000)
    k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)
    assert not k.deterministic
    assert_same_run(net, k, r, False)
    for p in net.places:
        np.testing.assert_allclose(k.mean_tokens(p).samples, r.mean_tokens(p).samples, rtol=1e-9)
    for res in net.resources:
        np.testing.assert_allclose(k.mean_sojourn(res).samples, r.mean_sojourn(res).samples, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(SWITCH_NETS))
def test_random_switches_follow_their_weights(name):
    # the draws follow the weights: the routes of a station fire in proportion to them
    net = SWITCH_NETS[name]()
    k = simulate(net, steps=300, warmup=30, replications=40, seed=1)
    assert any(t.resources for t in net.transitions.values() if t.name.startswith("route"))
    tested = 0
    for i in range(len([p for p in net.places if p.startswith("q")])):
        routes = [t for t in net.transitions.values() if t.name.startswith(f"route{i}")]
        fired = np.array([k.firings(t.name).sum() for t in routes], dtype=float)
        if fired.sum() == 0:  # a station the closed network drained before the window
            continue
        w = np.array([t.weight for t in routes])
        expect = fired.sum() * w / w.sum()
        chi2 = float(((fired - expect) ** 2 / expect).sum())
        assert stats.chi2.sf(chi2, len(routes) - 1) > 1e-4, (i, fired, expect)
        tested += 1
    assert tested >= 2
