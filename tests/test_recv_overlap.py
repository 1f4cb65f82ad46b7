"""Send and receive CPU work that overlaps the flow (issue #37): closed forms.

With ``Cluster.cpu_overlap=True`` a host's per-byte send / receive CPU work is a link
of bandwidth ``1 / s_per_byte`` in the flow's path, so max-min sharing gives

- one message alone: ``b * max(1/B, send_s_per_byte, recv_s_per_byte)`` (+ latency), i.e.
  ``max(link time, CPU time)``: the CPU's excess over the link time only;
- ``k`` concurrent messages into one host whose receive CPU is the bottleneck: each at
  ``1 / (k recv_s_per_byte)``; when the downlink binds first, the CPU costs nothing;
- a reduction (which needs the whole message) still after the flow;
- ``cpu_overlap=False``: the earlier ``b send + b/B + latency + b recv``.

Every case is played by the kernel and by the reference oracle (`engine/reference.py`).
"""

from __future__ import annotations

import pytest

from sgdnet import Cluster, Layer, ModelProfile, Net, simulate, variants
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import ClusterError
from sgdnet.net.compiled import structural_key
from sgdnet.variants.fabric import Fabric
from sgdnet.variants.fabric_bulk import TransferBatch

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
B = 12.5e6  # 100 Mbit/s
MB = 1e6


def _ends(sim, net: Net) -> dict[str, float]:
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


def _one(c: Cluster, nbytes: float, reduce: bool = False) -> tuple[Net, list[str]]:
    net = Net("one")
    fab = Fabric(net, c)
    go = net.place("go", tokens=1)
    names = fab.transfer("m", nbytes, ("worker", 0), ("worker", 1), inputs=[go.name],
                         outputs=[net.place("got").name], reduce=reduce)
    return net, names


@ENGINES
@pytest.mark.parametrize("send, recv", [
    (0.2 / B, 0.5 / B),   # link-bound: the CPU costs nothing
    (0.2 / B, 2.0 / B),   # receive-bound: 2x the link time
    (3.0 / B, 2.0 / B),   # send-bound
    (0.0, 1.0 / B),       # equal: still the link time, not the sum
])
def test_one_message_alone_takes_max_of_link_and_cpu(sim, send, recv):
    lat = 50e-6
    c = Cluster(workers=2, bandwidth=B, latency=lat, send_s_per_byte=send, recv_s_per_byte=recv,
                cpu_overlap=True)
    net, names = _one(c, MB)
    assert names == ["m", "m.lat"]  # no CPU stage left outside the flow
    e = _ends(sim, net)
    t = MB * max(1 / B, send, recv)
    assert e["m"] == pytest.approx(t, rel=1e-12)
    assert e["m.lat"] == pytest.approx(t + lat, rel=1e-12)


@ENGINES
def test_old_model_adds_the_cpu_before_and_after_the_flow(sim):
    send, recv, lat = 0.2 / B, 0.5 / B, 50e-6
    c = Cluster(workers=2, bandwidth=B, latency=lat, send_s_per_byte=send, recv_s_per_byte=recv,
                cpu_overlap=False)
    net, names = _one(c, MB)
    assert names == ["m.send", "m", "m.lat", "m.recv"]
    e = _ends(sim, net)
    assert e["m.recv"] == pytest.approx(MB * (send + 1 / B + recv) + lat, rel=1e-12)


@ENGINES
def test_a_reduction_still_follows_the_flow(sim):
    recv, red, lat = 2.0 / B, 0.25 / B, 0.0
    c = Cluster(workers=2, bandwidth=B, latency=lat, recv_s_per_byte=recv, reduce_s_per_byte=red,
                cpu_overlap=True)
    net, names = _one(c, MB, reduce=True)
    assert names == ["m", "m.recv"]
    e = _ends(sim, net)
    assert e["m"] == pytest.approx(MB * recv, rel=1e-12)
    assert e["m.recv"] == pytest.approx(MB * (recv + red), rel=1e-12)


def _incast(c: Cluster, k: int) -> Net:
    net = Net("in")
    fab = Fabric(net, c)
    for i in range(k):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
    return net


@ENGINES
@pytest.mark.parametrize("recv, expect", [
    (1.5 / B, 2 * MB * 1.5 / B),   # the PS's receive CPU binds: each flow at 1 / (2 recv)
    (0.4 / B, 2 * MB / B),          # the downlink binds first (1/recv = 2.5 B > B)
])
def test_two_concurrent_incoming_flows_share_the_receivers_cpu(sim, recv, expect):
    c = Cluster(workers=2, bandwidth=B, latency=0.0, recv_s_per_byte=recv, cpu_overlap=True)
    e = _ends(sim, _incast(c, 2))
    assert e["push0"] == pytest.approx(expect, rel=1e-12)
    assert e["push1"] == pytest.approx(expect, rel=1e-12)


@ENGINES
def test_unequal_messages_on_a_cpu_bound_receiver(sim):
    # 1 MB and 3 MB into one host at R = 1/recv = B/2: both at R/2 until the 1 MB one ends at
    # 2 MB/R = 4 MB/B; the 3 MB one then has 2 MB left at min(B, R) = R: ends at 8 MB/B
    recv = 2.0 / B
    c = Cluster(workers=2, bandwidth=B, latency=0.0, recv_s_per_byte=recv, cpu_overlap=True)
    net = Net("uneq")
    fab = Fabric(net, c)
    for i, s in enumerate((1 * MB, 3 * MB)):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", s, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
    e = _ends(sim, net)
    assert e["push0"] == pytest.approx(4 * MB / B, rel=1e-12)
    assert e["push1"] == pytest.approx(8 * MB / B, rel=1e-12)


def test_ring_rounds_pay_the_cpu_excess_only():
    # one all-reduce per step, alone on the ring: 2(n-1) rounds of max(M/(nB), M/n recv) + lat
    n, m, lat = 3, 6 * MB, 40e-6
    prof = ModelProfile("one", [Layer("w", 1e-3, 2e-3, m)], batch_size=8)
    for recv in (0.5 / B, 1.5 / B):
        c = Cluster(workers=n, bandwidth=B, latency=lat, recv_s_per_byte=recv, cpu_overlap=True)
        res = simulate(variants.build("allreduce", prof, c, bucket_bytes=0, overlap=False),
                       steps=21, warmup=6, replications=1, seed=0)  # whole rounds of n
        comm = 2 * (n - 1) * (lat + m / n * max(1 / B, recv))
        assert 1 / res.throughput.mean * n == pytest.approx(3e-3 + comm, rel=1e-9)


@pytest.mark.parametrize("variant", ["sync-ps", "async-ps", "allreduce"])
def test_kernel_and_reference_agree_on_a_net_with_cpu_links(variant):
    prof = ModelProfile("two", [Layer("a", 1e-3, 2e-3, 2 * MB), Layer("b", 5e-4, 1e-3, MB)],
                        batch_size=8)
    c = Cluster(workers=3, bandwidth=B, latency=50e-6, send_s_per_byte=0.3 / B,
                recv_s_per_byte=1.2 / B, reduce_s_per_byte=0.05 / B, comm_cv=0.1,
                cpu_overlap=True, tcp_pacing=1.5)
    kw = {"bucket_bytes": 0} if variant == "allreduce" else {}
    net = variants.build(variant, prof, c, **kw)
    assert any(r.tags.get("kind") == "rx_cpu" for r in net.resources.values())
    a = simulate(net, steps=12, warmup=2, replications=2, seed=3)
    b = simulate_reference(net, steps=12, warmup=2, replications=2, seed=3)
    assert a.throughput.mean == pytest.approx(b.throughput.mean, rel=1e-9)


@pytest.mark.parametrize("overlap", [True, False])
def test_bulk_twin_builds_the_same_net(overlap):
    c = Cluster(workers=3, bandwidth=B, latency=50e-6, send_s_per_byte=0.3 / B,
                recv_s_per_byte=1.2 / B, reduce_s_per_byte=0.05 / B, cpu_overlap=overlap,
                tcp_pacing=1.5, tcp_rtt=2e-3)
    nets = []
    for bulk in (False, True):
        net = Net("t")
        fab = Fabric(net, c)
        adder = TransferBatch(fab) if bulk else fab
        places = adder if bulk else net
        for i in range(3):
            go = places.place(f"go{i}", tokens=1)
            adder.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name],
                           outputs=[], reduce=i == 1, share="in" if i else None)
        if bulk:
            adder.flush()
        nets.append(net)
    assert list(nets[0].resources) == list(nets[1].resources)
    assert list(nets[0].transitions) == list(nets[1].transitions)
    assert structural_key(nets[0]) == structural_key(nets[1])
    caps = [[t.flow_cap for t in n.transitions.values()] for n in nets]
    assert caps[0] == caps[1] and 1.5 * B / 3 in caps[0]


def test_cpu_overlap_must_be_a_bool():
    with pytest.raises(ClusterError, match="cpu_overlap"):
        Cluster(workers=2, cpu_overlap="yes")
