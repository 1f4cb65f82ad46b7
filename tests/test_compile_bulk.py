"""The compiler's bulk passes (issue #15) give the arrays their definitions give.

``CompiledNet`` reads each transition once and builds its CSR arrays at C speed; each array
is checked here against its definition (``sgdnet/net/compiled.py``'s module docstring) spelled
out element by element over the ``Net``, on small nets of every variant and on nets with the
rarer features (inhibitors on an input place, gates, modulators, random switches, empirical
and straggler durations, priority and ps resources).
"""

import math

import numpy as np
import pytest
from conftest import exotic_net, ps_net

from sgdnet import Cluster
from sgdnet.dists import Empirical, Gamma, Straggler, flatten, from_dict
from sgdnet.net import Net
from sgdnet.net.compiled import DISC_CODES, INF_SERVERS, CompiledNet
from sgdnet.variants import get

SMALL = Cluster(workers=3, bandwidth="10Gbps", latency="10us", compute_cv=0.1, comm_cv=0.05)


def _features_net() -> Net:
    net = Net("features")
    a, b = net.place("a", 2), net.place("b", 1)
    net.resource("r", 2, "priority")
    net.resource("q", 1, "ps")
    net.link("l", "1GB/s", efficiency=[1.0, 0.9])
    e = Empirical([1.0, 2.0, 3.0])
    net.transition("t1", e, inputs={a: 1}, outputs={a: 1}, resources=["r"], priority=3,
                   weight=1.0)
    net.transition("t2", e, inputs={a: 1, b: 1}, outputs={a: 1, b: 1}, inhibitors={a: 5, b: 2},
                   resources=["q"], weight=2.0, servers=math.inf, tags={"worker": 1})
    net.transition("t3", Straggler(e, 0.1, 3.0), inputs={a: 2}, outputs={a: 2}, resources=["r"],
                   priority=-1, tags={"worker": True, "step": True})
    net.transfer("x", 1e6, ["l"], inputs={b: 1}, outputs={b: 1}, cap="0.5GB/s", priority=-1)
    return net


def _nets() -> list[Net]:
    by_hand = _features_net()
    by_hand.name = "by-hand edits"
    by_hand.transitions["t1"].resources = ["r"]  # a list set by hand (the builder makes tuples)
    out = [_features_net(), by_hand, exotic_net(), ps_net()]
    for v in ("allreduce", "sync-ps", "ssp", "dssp", "local-sgd", "backup"):
        out.append(get(v).build("resnet18", SMALL, "fine"))
    out.append(get("allreduce").build("resnet18", SMALL, "coarse"))
    topo = Cluster.from_file("examples/clusters/p4d-8xa100-4x100g.yaml", workers=16)
    out.append(get("allreduce").build("resnet18", topo, "fine", algorithm="hierarchical"))
    return out


def _csr_of(rows):
    ptr = np.cumsum([0] + [len(r) for r in rows])
    return ptr, np.array([x for r in rows for x in r], dtype=np.int64)


@pytest.mark.parametrize("net", _nets(), ids=lambda n: n.name)
def test_arrays_match_their_definitions(net):
    cn = CompiledNet(net)
    P, T, R = list(net.places), list(net.transitions.values()), list(net.resources.values())
    pi = {p: i for i, p in enumerate(P)}
    ri = {r.name: i for i, r in enumerate(R)}
    assert cn.place_names == P and cn.transition_names == [t.name for t in T]
    assert cn.transition_tags == [dict(t.tags) for t in T]
    assert cn.transition_resources == [tuple(t.resources) for t in T]
    for arcs, (ptr, idx, w) in (
            ("inputs", (cn.in_ptr, cn.in_place, cn.in_w)),
            ("outputs", (cn.out_ptr, cn.out_place, cn.out_w)),
            ("inhibitors", (cn.inh_ptr, cn.inh_place, cn.inh_thr))):
        rows = [getattr(t, arcs) for t in T]
        eptr, eidx = _csr_of([[pi[p] for p in r] for r in rows])
        assert np.array_equal(ptr, eptr) and np.array_equal(idx, eidx)
        assert np.array_equal(w, [x for r in rows for x in r.values()])
    # the transitions that read each place (input or inhibitor arc), in index order; collected
    # arc by arc (the same sets as ``{i for i, t in enumerate(T) if p in t.inputs or p in
    # t.inhibitors}`` for each p, without the places x transitions scan)
    readers = [set() for _ in P]
    for i, t in enumerate(T):
        for p in (*t.inputs, *t.inhibitors):
            readers[pi[p]].add(i)
    readers = [sorted(r) for r in readers]
    eptr, eidx = _csr_of(readers)
    assert np.array_equal(cn.dep_ptr, eptr) and np.array_equal(cn.dep_trans, eidx)
    shared = {r.name for r in R if r.discipline in ("ps", "flow")}
    eptr, eidx = _csr_of([[ri[r] for r in t.resources if r not in shared] for t in T])
    assert np.array_equal(cn.qres_ptr, eptr) and np.array_equal(cn.qres_idx, eidx)
    eptr, eidx = _csr_of([[ri[r] for r in t.resources if r in shared] for t in T])
    assert np.array_equal(cn.psres_ptr, eptr) and np.array_equal(cn.psres_idx, eidx)
    users = [sum(r.name in t.resources for t in T) for r in R]
    assert list(cn.r_users) == users and list(cn.rq_base) == list(np.cumsum([0] + users))
    assert list(cn.r_disc) == [DISC_CODES[r.discipline] for r in R]
    assert list(cn.servers) == [INF_SERVERS if t.servers == math.inf else t.servers for t in T]
    assert list(cn.priority) == [t.priority for t in T]
    prio = [t.priority if any(net.resources[r].discipline == "priority" for r in t.resources)
            else 0 for t in T]
    assert list(cn.prio_class) == prio
    order = sorted(range(len(T)), key=lambda i: (T[i].priority, i))
    assert [int(cn.rank[i]) for i in order] == list(range(len(T)))
    assert list(cn.is_step) == [int(bool(t.tags.get("step"))) for t in T]
    w = [t.tags.get("worker") for t in T]
    assert list(cn.worker) == [v if type(v) is int and v >= 0 else -1 for v in w]
    assert list(cn.fl_cap) == [float(t.flow_cap) for t in T]
    assert list(cn.sw_w) == [0.0 if t.weight is None else t.weight for t in T]
    assert cn.step_transitions == [i for i, t in enumerate(T) if t.tags.get("step")]
    for a in vars(cn).values():
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous and not a.flags.writeable


def test_flatten_of_shared_objects_is_flatten_of_copies():
    g, e = Gamma(2.0, 0.5), Empirical([1.0, 4.0])
    shared = [g, g, Gamma(1.0, 0.1), g]
    copies = [from_dict(d.to_dict()) for d in shared]  # equal values, distinct objects
    for a, b in zip(flatten(shared), flatten(copies)):
        assert np.array_equal(a, b)
    with_samples = [e, g, e, Straggler(e, 0.5, 2.0), g]
    copies = [from_dict(d.to_dict()) for d in with_samples]
    for a, b in zip(flatten(with_samples), flatten(copies)):
        assert np.array_equal(a, b)


# ------------------------------------------------------------------ validation's bulk guard
def _corruptions():
    """(label, edit) pairs: each edit makes one transition, place or arc of a valid net bad
    (or odd but valid: a numpy weight, a float cap)."""
    def arc(kind, w):
        return lambda net, t: getattr(t, kind).__setitem__(next(iter(net.places)), w)

    def attr(name, v):
        return lambda net, t: setattr(t, name, v)

    return [
        ("input weight 0", arc("inputs", 0)), ("output weight True", arc("outputs", True)),
        ("inhibitor 2.0", arc("inhibitors", 2.0)), ("weight beyond the limit", arc("inputs", 2**63)),
        ("numpy weight", arc("inputs", np.int64(1))),
        ("unknown place", lambda net, t: t.outputs.__setitem__("nowhere", 1)),
        ("no inputs", lambda net, t: (t.inputs.clear(), t.inhibitors.clear())),
        ("unknown resource", attr("resources", ("nope",))),
        ("resource twice", lambda net, t: setattr(t, "resources", (*t.resources, *t.resources)
                                                  or ("r0", "r0"))),
        ("list of resources", attr("resources", ["r0"])),
        ("cap nan", attr("flow_cap", float("nan"))), ("cap -1", attr("flow_cap", -1.0)),
        ("cap without a link", attr("flow_cap", 5.0)), ("cap True", attr("flow_cap", True)),
        ("servers 0", attr("servers", 0)), ("servers 2.0", attr("servers", 2.0)),
        ("servers huge", attr("servers", 2**63)), ("priority True", attr("priority", True)),
        ("priority 2**62", attr("priority", 2**62)), ("priority -2**62", attr("priority", -2**62)),
        ("weight 0", attr("weight", 0.0)), ("weight inf", attr("weight", math.inf)),
        ("weight 2", attr("weight", 2)), ("unknown modulator", attr("modulator", "m?")),
        ("unknown gate", attr("gate", ("g?", 0))), ("gate member list", attr("gate", ("g?", [0]))),
        ("tokens -1", lambda net, t: setattr(next(iter(net.places.values())), "tokens", -1)),
        ("tokens True", lambda net, t: setattr(next(iter(net.places.values())), "tokens", True)),
        ("tokens huge", lambda net, t: setattr(next(iter(net.places.values())), "tokens", 2**63)),
    ]


def _element_by_element(net, monkeypatch):
    from sgdnet.net import problems

    with monkeypatch.context() as m:
        m.setattr(problems, "_tokens_ok", lambda *a: False)
        m.setattr(problems, "_transitions_ok", lambda *a: False)
        return problems.net_problems(net)


@pytest.mark.parametrize("label,edit", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_bulk_validation_finds_what_the_element_checks_find(label, edit, monkeypatch):
    from sgdnet.net.problems import net_problems

    for net in (_features_net(), exotic_net(), ps_net()):
        net.resource("r0")  # held by nobody unless an edit uses it
        for pick in (0, len(net.transitions) // 2, -1):
            t = list(net.transitions.values())[pick]
            n2 = net.copy()
            edit(n2, n2.transitions[t.name])
            assert net_problems(n2) == _element_by_element(n2, monkeypatch), label


@pytest.mark.parametrize("net", _nets(), ids=lambda n: n.name)
def test_valid_nets_pass_both_validations(net, monkeypatch):
    from sgdnet.net.problems import net_problems

    assert net_problems(net) == _element_by_element(net, monkeypatch) == []


def test_zero_rows_is_can_be_zero_row_by_row():
    from sgdnet.dists import Deterministic, Exponential, ShiftedExponential, Uniform
    from sgdnet.engine.fastpath import _can_be_zero, zero_rows

    dists = [Deterministic(0.0), Deterministic(1.0), Uniform(0.0, 1.0), Uniform(0.5, 1.0),
             ShiftedExponential(0.0, 1.0), ShiftedExponential(0.1, 1.0), Exponential(1.0),
             Gamma(1.0, 0.5), Empirical([0.0, 1.0]), Empirical([1.0, 2.0]),
             Straggler(Deterministic(0.0), 0.1, 2.0), Straggler(Uniform(0.2, 1.0), 0.1, 2.0),
             Straggler(Empirical([0.0, 2.0]), 0.5, 3.0), Straggler(Empirical([1.0]), 0.5, 3.0)]
    net = Net("zeros")
    net.place("a", 1)
    for k, d in enumerate(dists):
        net.transition(f"t{k}", d, inputs={"a": 1}, outputs={"a": 1})
    cn = CompiledNet(net)
    want = [_can_be_zero(int(cn.d_code[t]), cn.d_par[t], cn.d_pool) for t in range(len(dists))]
    assert zero_rows(cn).tolist() == want
    assert want == [True, False, True, False, True, False, False, False, True, False, True,
                    False, True, False]
    for net in _nets():
        cn = CompiledNet(net)
        assert zero_rows(cn).tolist() == [
            _can_be_zero(int(cn.d_code[t]), cn.d_par[t], cn.d_pool)
            for t in range(cn.n_transitions)]
