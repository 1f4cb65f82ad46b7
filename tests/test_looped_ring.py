"""The looped ring (a ring all-reduce as a sub-net with a round counter, O(members)
transitions) against the unrolled ring (one transfer per member and round) and the closed form.

Deterministic cases must give the same times to the last bit (the loop only adds zero-time
transitions); stochastic ones must agree within their confidence intervals (the random streams
differ: the looped net has other transitions); the kernel must agree with the plain-Python
reference engine on a looped net (its inhibitor and weighted arcs).
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, Net, Topology, simulate, variants
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import VariantError
from sgdnet.variants.collectives import LOOP_ROUNDS, allreduce, ring_is_looped
from sgdnet.variants.fabric import Fabric

GB = 1e9
S = 512e6


def _net(cl: Cluster, algorithm: str, form: str, discipline: str = "flows",
         **kw) -> tuple[Net, str]:
    net = Net("ar")
    fab = Fabric(net, cl, discipline)
    n = cl.workers
    ins = {i: [net.place(f"in{i}", 1).name] for i in range(n)}
    outs = {i: [net.place(f"out{i}").name] for i in range(n)}
    _, end = allreduce(net, fab, cl, "ar", S, inputs=ins, outputs=outs, coarse=False,
                       stream=None, algorithm=algorithm, ring_form=form, **kw)
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    return net, end


def _end(cl: Cluster, algorithm: str, form: str, discipline: str = "flows", **kw) -> float:
    net, end = _net(cl, algorithm, form, discipline, **kw)
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0)}[end]


def _topo(**kw) -> Topology:
    base = dict(gpus_per_node=4, intra_bandwidth=100 * GB, intra_latency=0.0, nics_per_node=1,
                nic_bandwidth=10 * GB)
    return Topology(**{**base, **kw})


@pytest.mark.parametrize("discipline", ["flows", "fifo"])
@pytest.mark.parametrize("n", [2, 8, 13])
def test_looped_ring_time_is_the_closed_form(n, discipline):
    alpha, B = 5e-6, 10 * GB
    cl = Cluster(workers=n, bandwidth=B, latency=alpha)
    want = 2 * (n - 1) * (alpha + S / (n * B))
    assert _end(cl, "ring", "looped", discipline) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("case", ["cpu-costs", "nvlink", "hierarchical", "channels", "chunks"])
def test_looped_equals_unrolled_to_the_last_bit(case):
    kw = {}
    if case == "cpu-costs":  # reducing rounds cost more: the loop is two phases
        cl, alg = Cluster(workers=8, bandwidth=10 * GB, latency=5e-6, send_s_per_byte=1e-11,
                          recv_s_per_byte=2e-11, reduce_s_per_byte=3e-11), "ring"
    elif case == "nvlink":  # node-crossing senders never idle: only the last latency shows
        cl, alg = Cluster(workers=12, latency=5e-6, topology=_topo(intra_latency=5e-6)), "ring"
    elif case == "hierarchical":  # g = 4, N = 8 nodes (14 inter-node rounds), NICs shared by 2
        cl, alg = Cluster(workers=32, latency=7e-6,
                          topology=_topo(intra_latency=2e-6, nics_per_node=2)), "hierarchical"
    elif case == "channels":  # two concurrent rings, one per NIC, on their own connections
        cl, alg = Cluster(workers=24, latency=5e-6,
                          topology=_topo(intra_latency=2e-6, nics_per_node=2)), "ring"
        kw = {"channels": 2}
    else:  # pipelined hierarchical: 3 pieces through the three phases, 10 nodes
        cl, alg = Cluster(workers=40, latency=5e-6,
                          topology=_topo(intra_latency=2e-6, nics_per_node=2)), "hierarchical"
        kw = {"chunks": 3}
    assert _end(cl, alg, "looped", **kw) == _end(cl, alg, "unrolled", **kw)


def test_looped_ring_grows_linearly_and_unrolled_quadratically():
    def size(n, form):
        return len(_net(Cluster(workers=n, bandwidth=10 * GB, latency=0), "ring", form)[0]
                   .transitions)

    # unrolled: 2n(n-1) transfers; looped: start, send, next, fin per member
    assert size(32, "unrolled") - size(16, "unrolled") > 3 * (size(16, "unrolled") - size(8, "unrolled"))
    assert size(32, "looped") - size(16, "looped") == 2 * (size(16, "looped") - size(8, "looped"))
    assert size(64, "looped") < size(64, "unrolled") / 20


def test_only_looped_loops_and_bad_forms_are_refused():
    # "auto" pipelines long rings now (tests/test_pipelined_ring.py); looping is asked for
    assert not ring_is_looped("auto", LOOP_ROUNDS) and not ring_is_looped("auto", 10**6)
    assert ring_is_looped("looped", 2) and not ring_is_looped("unrolled", 10**6)
    with pytest.raises(VariantError, match="ring_form='spiral'"):
        _net(Cluster(workers=4, bandwidth=GB), "ring", "spiral")
    with pytest.raises(VariantError, match="ring_form"):
        variants.build("allreduce", "resnet18", Cluster(workers=4), ring_form="spiral")


TOY = ModelProfile("toy3", [Layer("a", 0.004, 0.008, 8e6), Layer("b", 0.006, 0.012, 20e6),
                            Layer("c", 0.002, 0.004, 12e6)], batch_size=32, device="test",
                   source="hand-made for tests")


def test_stochastic_variant_agrees_within_its_confidence_intervals():
    """Fine all-reduce SGD, one bucket per layer, noisy compute and links: the looped and the
    unrolled nets are the same model, so their throughputs differ by sampling noise only."""
    cl = Cluster(workers=10, bandwidth=1.25e9, latency=50e-6, compute_cv=0.2, comm_cv=0.3)
    kw = dict(steps=400, warmup=40, replications=8, seed=11, parallel=False)
    est = {form: simulate(variants.build("allreduce", TOY, cl, bucket_bytes=0, ring_form=form),
                          **kw).throughput for form in ("looped", "unrolled")}
    a, b = est["looped"], est["unrolled"]
    # 95 % half-widths; the difference of two independent means within their combined width
    assert abs(a.mean - b.mean) <= math.hypot(a.half_width(), b.half_width())
    assert a.half_width() < 0.02 * a.mean  # the test can tell a 2 % bias


def test_kernel_matches_the_reference_engine_on_a_looped_net():
    """Deterministic, so both engines play the same run: same throughput, same firings."""
    cl = Cluster(workers=5, bandwidth=1.25e9, latency=50e-6)
    for disc in ("fifo", "flows"):
        net = variants.build("allreduce", TOY, cl, bucket_bytes=0, ring_form="looped",
                             discipline=disc)
        kw = dict(steps=60, warmup=10, replications=1, seed=0)
        k, r = simulate(net, parallel=False, **kw), simulate_reference(net, **kw)
        assert k.throughput.mean == pytest.approx(r.throughput.mean, rel=1e-12)
        for t in net.transitions:
            assert k.firings(t)[0] == r.firings(t)[0], t


def test_event_graph_analysis_asks_for_the_unrolled_form():
    from sgdnet.variants.allreduce import without_resources

    net = variants.build("allreduce", TOY, Cluster(workers=4, bandwidth=GB), discipline="fifo",
                         ring_form="looped")
    with pytest.raises(VariantError, match="ring_form='unrolled'"):
        without_resources(net)
