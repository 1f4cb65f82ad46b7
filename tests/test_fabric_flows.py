"""The network of every variant on flows (issue #12): closed forms through the Fabric.

- a sync PS with one worker, per-layer pushes and pulls on their own connections over
  full-duplex links: the step time equals the pipeline recurrence derived by hand below;
- n workers pushing at once into one PS downlink each finish at ``n s / B`` (FIFO would finish
  them at ``s/B, 2s/B, ...``), slowed by the cluster's incast curve;
- a transfer's CPU costs: ``s * send + s / B + latency + s * recv`` (``+ s * reduce`` for a
  reducing receiver), the CPU held for that work only;
- the choices that no longer make sense with flows are refused with the fix.
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, Net, predict, simulate, variants
from sgdnet.errors import ClusterError, VariantError
from sgdnet.variants.fabric import Fabric

B = 125e6  # 1 Gb/s
MB = 1e6


def _ends(net: Net) -> dict[str, float]:
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0)}


def pipeline_step_time(f, b, g, u, bw, lat, steps=60):
    """Hand-derived steady-state step time of one worker on a PS (all times deterministic).

    Per step k: forwards F_0..F_{L-1} then backwards B_{L-1}..B_0 on the GPU; F_l needs the
    pull of layer l of step k-1. After B_l the push of layer l goes on the worker->PS
    connection (in order: after the previous push's last byte), at rate bw, arriving lat
    later; the PS updates layer l (u_l, its CPU in arrival order); the pull goes back on the
    PS->worker connection (full duplex: concurrent with pushes), arriving lat after its last
    byte. Returns the mean of the last steps' B_0 intervals.
    """
    L = len(f)
    pulled = [0.0] * L  # arrival of layer l's parameters
    push_free = upd_free = pull_free = 0.0
    gpu = 0.0
    ends = []
    for _ in range(steps):
        t = gpu
        for l in range(L):
            t = max(t, pulled[l]) + f[l]
        bend = {}
        for l in reversed(range(L)):
            t += b[l]
            bend[l] = t
        gpu = t
        ends.append(t)
        for l in reversed(range(L)):
            push_free = max(bend[l], push_free) + g[l] / bw
            upd_free = max(push_free + lat, upd_free) + u
            pull_free = max(upd_free, pull_free) + g[l] / bw
            pulled[l] = pull_free + lat
    tail = ends[steps // 2:]
    return (tail[-1] - tail[0]) / (len(tail) - 1)


@pytest.mark.parametrize("f,b,g,u,lat", [
    ((1e-3, 2e-3, 1.5e-3), (2e-3, 4e-3, 3e-3), (4 * MB, 1 * MB, 8 * MB), 5e-4, 50e-6),  # network-bound
    ((8e-3, 6e-3), (16e-3, 12e-3), (0.5 * MB, 0.25 * MB), 1e-4, 0.0),  # compute-bound
    ((1e-3,) * 4, (2e-3,) * 4, (2 * MB,) * 4, 2e-3, 10e-6),  # update-bound
])
def test_sync_ps_one_worker_equals_the_hand_derived_pipeline(f, b, g, u, lat):
    prof = ModelProfile("pipe", [Layer(f"l{i}", f[i], b[i], g[i]) for i in range(len(f))],
                        batch_size=8)
    c = Cluster(workers=1, bandwidth=B, latency=lat, update_s_per_layer=u)
    res = simulate(variants.build("sync-ps", prof, c), steps=40, warmup=20, replications=1, seed=0)
    expect = pipeline_step_time(f, b, g, u, B, lat)
    assert 1 / res.throughput.mean == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_n_workers_pushing_into_one_ps_downlink_each_finish_at_n_s_over_b(n):
    c = Cluster(workers=n, bandwidth=B, latency="20us")
    net = Net("push")
    fab = Fabric(net, c)
    for i in range(n):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
    e = _ends(net)
    for i in range(n):
        assert e[f"push{i}"] == pytest.approx(n * MB / B, rel=1e-12)  # the last byte
        assert e[f"push{i}.lat"] == pytest.approx(n * MB / B + 20e-6, rel=1e-12)  # arrival


def test_the_clusters_incast_curve_slows_the_ps_downlink():
    n = 4
    c = Cluster(workers=n, bandwidth=B, latency=0, incast=(1.0, 0.95, 0.9))
    net = Net("incast")
    fab = Fabric(net, c)
    for i in range(n):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
    e = _ends(net)
    for i in range(n):  # 4 flows: beyond the curve, its last value
        assert e[f"push{i}"] == pytest.approx(n * MB / (0.9 * B), rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_ps_link_efficiency_replaces_incast_on_the_ps_downlink_only(k):
    """``ps_link_efficiency`` on a dedicated PS host's downlink: k pushes at once into it end at
    ``k s / (e_k B)`` (the curve's last value beyond it), whatever ``incast`` says; a worker's
    downlink keeps ``incast``: k messages from the other workers into worker 0 end at
    ``k s / (incast_k B)`` (the downlinks are the bottlenecks of both groups)."""
    eff, inc = (1.0, 0.9, 0.8), (1.0, 0.5)
    c = Cluster(workers=k + 1, bandwidth=B, latency=0, incast=inc, ps_link_efficiency=eff)
    net = Net("ps-eff")
    fab = Fabric(net, c)
    for i in range(k):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
        go2 = net.place(f"peer{i}", tokens=1)
        fab.transfer(f"peer{i}", MB, ("worker", i + 1), ("worker", 0), inputs=[go2.name],
                     outputs=[])
    assert net.resources["ps0.down"].efficiency == eff
    e = _ends(net)
    for i in range(k):
        assert e[f"push{i}"] == pytest.approx(k * MB / (eff[min(k, 3) - 1] * B), rel=1e-12)
        assert e[f"peer{i}"] == pytest.approx(k * MB / (inc[min(k, 2) - 1] * B), rel=1e-12)


def test_one_connection_per_pair_keeps_a_workers_messages_in_order():
    c = Cluster(workers=1, bandwidth=B, latency=0)
    net = Net("order")
    fab = Fabric(net, c)
    for k, s in enumerate((3 * MB, 1 * MB)):
        go = net.place(f"go{k}", tokens=1)
        fab.transfer(f"m{k}", s, ("worker", 0), ("ps", 0), inputs=[go.name], outputs=[])
    e = _ends(net)
    assert e["m0"] == pytest.approx(3 * MB / B, rel=1e-12)
    assert e["m1"] == pytest.approx(4 * MB / B, rel=1e-12)  # behind m0, not sharing with it


@pytest.mark.parametrize("reduce", [False, True])
def test_cpu_costs_are_held_for_their_work_only(reduce):
    send, recv, red, lat = 2e-9, 3e-9, 1e-9, 30e-6
    c = Cluster(workers=2, bandwidth=B, latency=lat, send_s_per_byte=send, recv_s_per_byte=recv,
                reduce_s_per_byte=red)
    net = Net("cpu")
    fab = Fabric(net, c)
    go = net.place("go", tokens=1)
    names = fab.transfer("m", MB, ("worker", 0), ("worker", 1), inputs=[go.name], outputs=[],
                         reduce=reduce)
    assert names == ["m.send", "m", "m.lat", "m.recv"]
    # the receiver's GPU is free while the bytes are on the wire: a compute there runs at once
    busy = net.place("busy", tokens=1)
    net.transition("other", 1e-3, inputs={busy: 1}, resources=[fab.gpu(1)])
    e = _ends(net)
    t_send = MB * send
    assert e["m.send"] == pytest.approx(t_send, rel=1e-12)
    assert e["m"] == pytest.approx(t_send + MB / B, rel=1e-12)
    assert e["other"] == pytest.approx(1e-3, rel=1e-12)
    rx = MB * (recv + (red if reduce else 0.0))
    start_rx = max(t_send + MB / B + lat, 1e-3)  # the GPU finishes "other" first
    assert e["m.recv"] == pytest.approx(start_rx + rx, rel=1e-12)


def test_ring_allreduce_on_flows_is_the_closed_form():
    # each ring step is alone on its links, so flows give 2(n-1)(alpha + M/(nB)) exactly
    n, m, lat = 4, 8 * MB, 25e-6
    prof = ModelProfile("one", [Layer("w", 1e-3, 2e-3, m)], batch_size=8)
    c = Cluster(workers=n, bandwidth=B, latency=lat)
    res = simulate(variants.build("allreduce", prof, c, bucket_bytes=0, overlap=False),
                   steps=20, warmup=5, replications=1, seed=0)
    comm = 2 * (n - 1) * (lat + m / (n * B))
    assert 1 / res.throughput.mean * n == pytest.approx(3e-3 + comm, rel=1e-9)


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_coarse_allreduce_on_flows_takes_the_closed_form_time(algorithm):
    # a coarse share is alone on its links: its flow moves the closed form's bytes at the link
    # bandwidth and then waits its latency term, the same time as the closed-form transition
    n, m, lat = 3, 6 * MB, 40e-6
    prof = ModelProfile("one", [Layer("w", 1e-3, 2e-3, m)], batch_size=8)
    c = Cluster(workers=n, bandwidth=B, latency=lat)
    thr = {d: simulate(variants.build("allreduce", prof, c, granularity="coarse",
                                      algorithm=algorithm, discipline=d),
                       steps=20, warmup=5, replications=1, seed=0).throughput.mean
           for d in ("flows", "fifo")}
    assert thr["flows"] == pytest.approx(thr["fifo"], rel=1e-12)


def test_flows_refuse_what_only_the_nic_queues_mean():
    prof = ModelProfile("one", [Layer("w", 1e-3, 2e-3, MB)], batch_size=8)
    with pytest.raises(VariantError, match="discipline='fifo'"):
        variants.build("sync-ps", prof, Cluster(workers=2, comm_uses_compute=True))
    with pytest.raises(VariantError, match="priority=True needs discipline='fifo'"):
        variants.build("sync-ps", prof, Cluster(workers=2), priority=True)
    # the earlier models stay available
    variants.build("sync-ps", prof, Cluster(workers=2, comm_uses_compute=True), discipline="fifo")
    variants.build("sync-ps", prof, Cluster(workers=2), priority=True, discipline="fifo")


@pytest.mark.parametrize("kw, match", [
    ({"incast": (1.0, 1.2)}, r"incast\[1\]=1.2"),
    ({"incast": "high"}, "incast"),
    ({"ps_link_efficiency": (1.0, 0.0)}, r"ps_link_efficiency\[1\]=0.0"),
    ({"ps_link_efficiency": 0.9}, "ps_link_efficiency"),
    ({"send_s_per_byte": -1e-9}, "send_s_per_byte"),
    ({"recv_s_per_byte": "fast"}, "recv_s_per_byte"),
])
def test_bad_network_fields_name_the_value(kw, match):
    with pytest.raises((ClusterError, Exception), match=match):
        Cluster(workers=2, **kw)


def test_flows_are_the_default_and_fifo_stays_available():
    prof = ModelProfile("one", [Layer("w", 1e-3, 2e-3, MB)], batch_size=8)
    net = variants.build("async-ps", prof, Cluster(workers=2))
    assert {r.discipline for r in net.resources.values() if r.tags.get("kind") == "nic_up"} == {"flow"}
    net = variants.build("async-ps", prof, Cluster(workers=2), discipline="fifo")
    assert {r.discipline for r in net.resources.values() if r.tags.get("kind") == "nic_up"} == {"fifo"}
    p = predict("async-ps", prof, Cluster(workers=2), steps=50, warmup=5, replications=1)
    assert math.isfinite(p.samples_per_s.mean)


def test_the_chrome_trace_shows_each_flows_mean_rate():
    from sgdnet.viz.chrome_trace import to_chrome_trace

    c = Cluster(workers=2, bandwidth=B, latency=0)
    net = Net("rates")
    fab = Fabric(net, c)
    for i in range(2):
        go = net.place(f"go{i}", tokens=1)
        fab.transfer(f"push{i}", MB, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[])
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1.0, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = simulate(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    ev = {e["name"]: e for e in to_chrome_trace(res)["traceEvents"] if e.get("ph") == "X"}
    for i in range(2):  # two flows into one PS downlink: half the bandwidth each
        assert ev[f"push{i}"]["args"]["mean_rate_Bps"] == pytest.approx(B / 2, rel=1e-9)
    assert "mean_rate_Bps" not in ev["tick"]["args"]


# ------------------------------------------------------------ uneven sharing (share_cv)
def _cvs(variant: str, cluster: Cluster, **opts) -> dict[str, float]:
    """CV of every link stage's bytes (push/pull/ring steps) of ``variant``'s fine net."""
    prof = ModelProfile("t", [Layer("a", 1e-3, 2e-3, 1e6), Layer("b", 1e-3, 2e-3, 2e6)],
                        batch_size=8)
    net = variants.get(variant).build(prof, cluster, "fine", **opts)
    out = {}
    for name, t in net.transitions.items():
        if t.tags.get("stage") == "link":
            d = t.duration
            out[name] = round(math.sqrt(d.var) / d.mean, 12)
    return out


def _r(x: float) -> float:
    return round(x, 12)


def test_share_cv_adds_to_pushes_into_and_pulls_out_of_a_shared_ps_only():
    kw = dict(bandwidth=B, comm_cv=0.1, share_cv_in=0.3, share_cv_out=0.4)
    cvs = _cvs("async-ps", Cluster(workers=2, **kw))
    push = {v for k, v in cvs.items() if ".push." in k}
    pull = {v for k, v in cvs.items() if ".pull." in k}
    assert push == {_r(math.hypot(0.1, 0.3))}
    assert pull == {_r(math.hypot(0.1, 0.4))}
    # one worker: its connections have the PS's links to themselves
    assert set(_cvs("async-ps", Cluster(workers=1, **kw)).values()) == {_r(0.1)}
    # a ring's links each carry one connection; the FIFO NIC model has no sharing at all
    assert set(_cvs("allreduce", Cluster(workers=3, **kw), bucket_bytes=0).values()) == {_r(0.1)}
    assert set(_cvs("sync-ps", Cluster(workers=2, **kw), discipline="fifo").values()) == {_r(0.1)}
    # a colocated shard serves the other n - 1 workers over the network
    col = _cvs("sync-ps", Cluster(workers=2, ps_placement="colocated", **kw))
    assert set(col.values()) == {_r(0.1)}
    col3 = _cvs("sync-ps", Cluster(workers=3, ps_placement="colocated", **kw))
    assert {v for k, v in col3.items() if ".push." in k} == {_r(math.hypot(0.1, 0.3))}


def test_share_cv_zero_keeps_the_transfers_deterministic():
    cvs = _cvs("async-ps", Cluster(workers=3, bandwidth=B))
    assert cvs and set(cvs.values()) == {0.0}


@pytest.mark.parametrize("field", ["share_cv_in", "share_cv_out"])
def test_bad_share_cv_names_the_field(field):
    with pytest.raises(ClusterError, match=field):
        Cluster(workers=2, **{field: -0.1})
