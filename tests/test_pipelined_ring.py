"""The pipelined ring (``ring_form="pipelined"``, the default of rings of more than
``LOOP_ROUNDS`` rounds): a ring of ``R`` rounds as one flow of ``R * chunk`` bytes per ring
edge, then ``R`` latencies, as NCCL streams a ring.

Closed forms checked (deterministic):

- ring all-reduce of ``S`` over ``n`` workers: ``2(n-1)(alpha + S/(n B))``, i.e. NCCL's
  ``busbw = algbw * 2(n-1)/n = B`` at zero latency;
- hierarchical all-reduce (intra reduce-scatter + ``g`` inter-node rings of ``S/g`` at the NIC
  share ``B_nic * nics / g`` + intra all-gather): a shared NIC congests by itself;
- an ``over``:1 leaf-spine divides the cross-rack edges' rate, and so the inter-node phase;
- equal to the stepwise (unrolled) ring on homogeneous rings, with CPU costs, chunks;
- O(members) firings per all-reduce whatever the rounds; kernel == reference engine.
"""

from __future__ import annotations

import pytest
from test_looped_ring import GB, TOY, S, _net, _topo

from sgdnet import Cluster, Topology, simulate, variants
from sgdnet.engine.reference import simulate_reference
from sgdnet.variants.collectives import LOOP_ROUNDS, resolve_ring_form


def _run(cl: Cluster, algorithm: str, form: str, discipline: str = "flows", **kw):
    net, end = _net(cl, algorithm, form, discipline, **kw)
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return net, end, res


def _end(cl: Cluster, algorithm: str, form: str, discipline: str = "flows", **kw) -> float:
    _, end, res = _run(cl, algorithm, form, discipline, **kw)
    return {e["name"]: e["end"] for e in res.trace_events(0)}[end]


@pytest.mark.parametrize("discipline", ["flows", "fifo"])
@pytest.mark.parametrize("n", [2, 8, 13, 40])
def test_pipelined_ring_time_is_the_closed_form(n, discipline):
    alpha, B = 5e-6, 10 * GB
    cl = Cluster(workers=n, bandwidth=B, latency=alpha)
    want = 2 * (n - 1) * (alpha + S / (n * B))
    assert _end(cl, "ring", "pipelined", discipline) == pytest.approx(want, rel=1e-12)


def test_nccl_bus_bandwidth_is_the_link_rate():
    n, B = 24, 10 * GB
    t = _end(Cluster(workers=n, bandwidth=B, latency=0.0), "ring", "pipelined")
    assert (S / t) * 2 * (n - 1) / n == pytest.approx(B, rel=1e-12)


@pytest.mark.parametrize("nics", [1, 2, 4])
def test_hierarchical_shared_nics_congest_by_themselves(nics):
    """g = 4, N = 10 nodes: the inter-node rings have 18 rounds, so ``"auto"`` pipelines them;
    the g rings run at once and GPUs sharing a NIC split its rate."""
    g, N = 4, 10
    Bi, Bn, ai, an = 100 * GB, 10 * GB, 2e-6, 7e-6
    cl = Cluster(workers=g * N, latency=an, topology=_topo(intra_latency=ai, nics_per_node=nics))
    intra = (g - 1) * (ai + S / (g * Bi))
    inter = 2 * (N - 1) * (an + (S / (g * N)) / (Bn * nics / g))
    assert resolve_ring_form("auto", 2 * (N - 1)) == "pipelined"
    assert _end(cl, "hierarchical", "auto") == pytest.approx(2 * intra + inter, rel=1e-12)


@pytest.mark.parametrize("over", [1.0, 4.0])
def test_oversubscribed_spine_slows_the_cross_rack_edges(over):
    """2 GPUs per node, one NIC each, 2 nodes per rack, 4 nodes: each inter-node ring crosses
    the spine twice; a leaf uplink (capacity ``4 B_nic / over``) carries the 2 rings' crossing
    flows, each at ``min(B_nic, 2 B_nic / over)``; the ring runs at its slowest edge."""
    g, N, Bn, Bi = 2, 4, 10 * GB, 100 * GB
    t = Topology(gpus_per_node=g, nics_per_node=2, nic_bandwidth=Bn, intra_bandwidth=Bi,
                 intra_latency=0.0, fabric="leaf-spine", rack_nodes=2,
                 oversubscription=over)
    cl = Cluster(workers=g * N, latency=0.0, topology=t)
    edge = min(Bn, 2 * Bn / over)
    want = 2 * (g - 1) * S / (g * Bi) + 2 * (N - 1) * (S / (g * N)) / edge
    assert _end(cl, "hierarchical", "pipelined") == pytest.approx(want, rel=1e-12)
    assert _end(cl, "hierarchical", "unrolled") == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("case", ["cpu-costs", "equal-edges", "hierarchical", "chunks"])
def test_pipelined_equals_stepwise_on_homogeneous_rings(case):
    kw = {}
    if case == "cpu-costs":  # send / receive / reduce work, the reducing rounds cost more
        cl, alg = Cluster(workers=8, bandwidth=10 * GB, latency=5e-6, send_s_per_byte=1e-11,
                          recv_s_per_byte=2e-11, reduce_s_per_byte=3e-11), "ring"
    elif case == "equal-edges":  # a flat ring over a topology whose every hop is alike
        cl, alg = Cluster(workers=12, latency=5e-6, topology=_topo(
            gpus_per_node=2, nics_per_node=2, intra_bandwidth=10 * GB, intra_latency=5e-6)), "ring"
    elif case == "hierarchical":  # N = 8 nodes, NICs shared by 2
        cl, alg = Cluster(workers=32, latency=7e-6,
                          topology=_topo(intra_latency=2e-6, nics_per_node=2)), "hierarchical"
    else:  # 3 pieces through the three phases, 10 nodes
        cl, alg = Cluster(workers=40, latency=5e-6,
                          topology=_topo(intra_latency=2e-6, nics_per_node=2)), "hierarchical"
        kw = {"chunks": 3}
    assert _end(cl, alg, "pipelined", **kw) == pytest.approx(_end(cl, alg, "unrolled", **kw),
                                                             rel=1e-12)


def test_unequal_edge_latencies_cost_the_mean_per_round():
    """A flat ring over NVLink (2 us) and one NIC hop per node (5 us): the stepwise ring never
    idles its NIC senders, so only one latency shows; the pipelined ring charges every round
    the ring's mean edge latency (what a chunk's chain of dependencies pays going round)."""
    n, ai, an = 24, 2e-6, 5e-6
    cl = Cluster(workers=n, latency=an, topology=_topo(intra_latency=ai))
    R, m_lat = 2 * (n - 1), (3 * ai + an) / 4  # per node: 3 NVLink edges, 1 NIC edge
    bw = 2 * (n - 1) * S / (n * 10 * GB)
    assert _end(cl, "ring", "pipelined") == pytest.approx(bw + R * m_lat, rel=1e-12)
    assert _end(cl, "ring", "unrolled") == pytest.approx(bw + an, rel=1e-9)


def test_firings_per_allreduce_do_not_grow_with_the_rounds():
    """Per member: one flow, its latency and a finish, plus one barrier per ring."""
    for n in (20, 40):
        cl = Cluster(workers=n, bandwidth=10 * GB, latency=5e-6)
        net, _, res = _run(cl, "ring", "pipelined")
        fired = sum(int(res.firings(t)[0]) for t in net.transitions if t != "tick")
        assert fired == 2 + 1 + 3 * n  # begin, end, ring barrier, n x (send, .lat, fin)


def test_auto_unrolls_short_rings_and_pipelines_long_ones():
    assert resolve_ring_form("auto", LOOP_ROUNDS) == "unrolled"
    assert resolve_ring_form("auto", LOOP_ROUNDS + 1) == "pipelined"
    assert resolve_ring_form("looped", 10**6) == "looped"
    cl = Cluster(workers=16, topology=_topo())  # coarse hierarchical: 3-round intra rings too
    net = variants.build("allreduce", "resnet18", cl, "coarse", algorithm="hierarchical")
    forms = {t.tags.get("form") for t in net.transitions.values() if t.tags.get("rounds")}
    assert forms == {"pipelined"}


def test_kernel_matches_the_reference_engine_on_a_pipelined_net():
    """Deterministic, so both engines play the same run: same throughput, same firings."""
    cl = Cluster(workers=5, bandwidth=1.25e9, latency=50e-6)
    hier = Cluster(workers=8, latency=50e-6, topology=_topo(nics_per_node=2, intra_latency=5e-6))
    for disc, c, alg in (("fifo", cl, "ring"), ("flows", cl, "ring"),
                         ("flows", hier, "hierarchical")):  # weighted arcs between phases
        net = variants.build("allreduce", TOY, c, bucket_bytes=0, ring_form="pipelined",
                             discipline=disc, algorithm=alg)
        kw = dict(steps=60, warmup=10, replications=1, seed=0)
        k, r = simulate(net, parallel=False, **kw), simulate_reference(net, **kw)
        assert k.throughput.mean == pytest.approx(r.throughput.mean, rel=1e-12)
        for t in net.transitions:
            assert k.firings(t)[0] == r.firings(t)[0], t
