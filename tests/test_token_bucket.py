"""Token buckets on links (a shaper such as Linux's tbf): closed forms, played by the kernel and
the reference oracle.

A link of sustained bandwidth ``C`` with a bucket of ``b`` bytes and a peak ``P``: from a full
bucket a lone flow moves at ``P`` while the bucket drains at ``P - C``, i.e. for ``b / (P - C)``
seconds and ``x0 = b P / (P - C)`` bytes, then at ``C``; the bucket fills again at ``C`` while the
link is idle, up to ``b``.
"""

from __future__ import annotations

import pytest

from sgdnet import Net, simulate
from sgdnet.engine.api import period_check
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import NetError, UnitError
from sgdnet.net.compiled import compile_net
from sgdnet.net.elements import PEAK_FACTOR

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
C = 12.5e6  # 100 Mbit/s
P = 1.25e9  # 10 Gbit/s
B = 64_000.0  # tc's "burst 64000b"


def after_idle(S: float, tokens: float, C: float = C, P: float = P) -> float:
    """Seconds one flow of ``S`` bytes takes alone on the link starting with ``tokens``."""
    x0 = tokens * P / (P - C)
    return S / P if S <= x0 else tokens / (P - C) + (S - x0) / C


def sends(sim, net: Net, steps: int = 4) -> list[tuple[float, float]]:
    res = sim(net, steps=steps, warmup=0, replications=1, seed=0, trace=True)
    return [(e["start"], e["end"]) for e in res.trace_events(0) if e["name"] == "send"]


def ping(S: float, gap: float, *, burst=B, peak=P, latency=0.0, other=None) -> Net:
    """A message of ``S`` bytes over link L (and a second link ``other`` = its bandwidth), then
    ``gap`` seconds idle, in a loop."""
    net = Net("ping")
    net.place("ready", 1)
    net.place("sent")
    net.link("L", C, latency=latency, burst=burst, peak=peak)
    path = ["L"]
    if other is not None:
        net.link("M", other)
        path.append("M")
    net.transfer("send", S, path, inputs=["ready"], outputs=["sent"])
    net.transition("idle", gap, inputs=["sent"], outputs=["ready"], tags={"step": True})
    return net


@ENGINES
@pytest.mark.parametrize("S", [40_000.0, 64_000.0, 200_000.0, 1e6])
def test_a_message_after_an_idle_period_gets_the_burst_at_the_peak(sim, S):
    # a gap long enough to refill the bucket: every message sees a full one
    for start, end in sends(sim, ping(S, gap=1.0)):
        assert end - start == pytest.approx(after_idle(S, B), rel=1e-9)


@ENGINES
def test_the_bucket_refills_at_the_sustained_rate_while_the_link_is_idle(sim):
    # 200 kB drains the bucket; 2 ms idle refills C * 2 ms = 25 kB of it
    S, gap = 200_000.0, 0.002
    got = sends(sim, ping(S, gap), steps=5)
    assert got[0][1] - got[0][0] == pytest.approx(after_idle(S, B), rel=1e-9)
    for start, end in got[1:]:
        assert end - start == pytest.approx(after_idle(S, C * gap), rel=1e-9)


@ENGINES
def test_the_default_peak_is_a_thousand_times_the_bandwidth(sim):
    S = 200_000.0
    start, end = sends(sim, ping(S, 1.0, peak=None))[0]
    assert end - start == pytest.approx(after_idle(S, B, P=PEAK_FACTOR * C), rel=1e-9)
    # and the burst then leaves almost at once: within 0.1 % of latency-free (S - b) / C
    assert end - start == pytest.approx((S - B) / C, rel=1e-3)


@ENGINES
def test_latency_is_added_after_the_bytes_as_without_a_bucket(sim):
    S, lat = 200_000.0, 0.01
    res = sim(ping(S, 1.0, latency=lat), steps=2, warmup=0, replications=1, seed=0, trace=True)
    ev = {e["name"]: e for e in res.trace_events(0)}
    assert ev["send.lat"]["end"] - ev["send"]["start"] == pytest.approx(after_idle(S, B) + lat,
                                                                       rel=1e-9)


@ENGINES
def test_a_slower_link_on_the_path_caps_the_burst(sim):
    # M (no bucket, 50 MB/s) is the bottleneck while L holds tokens: L drains at M - C
    M, S = 50e6, 300_000.0
    t1 = B / (M - C)
    start, end = sends(sim, ping(S, 1.0, other=M))[0]
    assert end - start == pytest.approx(t1 + (S - M * t1) / C, rel=1e-9)


@ENGINES
def test_two_flows_share_the_peak_then_the_bandwidth(sim):
    S = 150_000.0
    net = Net("pair")
    net.link("L", C, burst=B, peak=P)
    for f in ("a", "b"):
        net.place(f"{f}.go", 1)
        net.transfer(f, S, ["L"], inputs=[f"{f}.go"])
    clk = net.place("clock", 1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    ends = [e["end"] for e in res.trace_events(0) if e["name"] in ("a", "b")]
    # together they are one flow of 2S: P / 2 each until dry, then C / 2 each
    assert ends == pytest.approx([after_idle(2 * S, B)] * 2, rel=1e-9)


@ENGINES
def test_a_link_without_a_bucket_is_unchanged(sim):
    S = 200_000.0
    start, end = sends(sim, ping(S, 1.0, burst=0.0))[0]
    assert end - start == pytest.approx(S / C, rel=1e-12)


def test_bucket_nets_are_not_skipped_as_periodic():
    # the periodic search's canonical state has no tokens: a deterministic net with a bucket
    # plays every event (and still agrees with the closed form above)
    assert period_check(compile_net(ping(200_000.0, 1.0, burst=0.0))) > 0
    assert period_check(compile_net(ping(200_000.0, 1.0))) == 0


@pytest.mark.parametrize("kw, err, match", [
    ({"burst": -1.0}, UnitError, "burst -1.0 must be non-negative"),
    ({"burst": "64 apples"}, UnitError, "unknown size unit 'apples'.*use e.g. B, KB"),
    ({"burst": B, "peak": C / 2}, NetError, "peak=6250000.0 must be above the bandwidth.*None"),
])
def test_bad_buckets_are_refused_with_the_fix(kw, err, match):
    with pytest.raises(err, match=match):
        Net("bad").link("L", C, **kw)


def test_validate_lists_a_bucket_set_by_hand():
    net = Net("by-hand")
    net.link("L", C).burst = -5.0
    with pytest.raises(NetError, match="burst=-5.0 must be a finite number of bytes >= 0"):
        net.validate()


def test_burst_takes_units():
    net = Net("units")
    assert net.link("a", C, burst="64KiB").burst == 65536.0
    assert net.link("b", C, burst="64kB").burst == 64000.0


def test_a_clusters_bucket_shortens_a_sync_ps_step_by_the_closed_form():
    # one worker, one layer: step = forward + backward + push + latency + update + pull +
    # latency; each message crosses two links with full buckets (the 10 ms of compute refill
    # C * 10 ms = 125 kB > b), which drain together at P - C
    from sgdnet import Cluster, Layer, ModelProfile, variants

    g, f, b, u, lat = 100_000.0, 4e-3, 6e-3, 2e-4, 50e-6
    prof = ModelProfile("one", [Layer("l0", f, b, g)], batch_size=8)
    steps = {}
    for burst in (0.0, B):
        c = Cluster(workers=1, bandwidth=C, latency=lat, update_s_per_layer=u, burst=burst,
                    burst_peak=P)
        net = variants.build("sync-ps", prof, c)
        links = [r for r in net.resources.values() if r.discipline == "flow"]
        assert links and all(r.burst == burst and r.peak == P for r in links)
        res = simulate(net, steps=20, warmup=5, replications=1, seed=0)
        steps[burst] = 1 / res.throughput.mean
    assert steps[0.0] == pytest.approx(f + b + 2 * (g / C + lat) + u, rel=1e-9)
    assert steps[B] == pytest.approx(f + b + 2 * (after_idle(g, B) + lat) + u, rel=1e-9)


def test_a_calibrated_files_burst_reaches_the_cluster_when_asked(tmp_path):
    from sgdnet import Cluster
    from sgdnet.errors import ClusterError

    f = tmp_path / "c.yaml"
    f.write_text("sgdnet_cluster: 1\nname: tb\nworkers: 2\nlink: {bandwidth: 12.5MB/s, "
                 "latency: 100us, burst: 64KiB}\n")
    assert Cluster.from_file(f).burst == 0.0  # opt-in
    assert Cluster.from_file(f, burst="file").burst == 65536.0
    assert Cluster.from_file(f, burst="8KiB").burst == 8192.0
    with pytest.raises(ClusterError, match="burst=inf"):
        Cluster(workers=1, burst=float("inf"))


def test_the_cli_puts_a_bucket_on_the_links(tmp_path, capsys):
    from sgdnet.cli import main
    from sgdnet.cli_args import build_parser
    from sgdnet.cli_inputs import _cluster

    f = tmp_path / "c.yaml"
    f.write_text("sgdnet_cluster: 1\nname: tb\nworkers: 2\nlink: {bandwidth: 12.5MB/s, "
                 "latency: 100us, burst: 60000}\n")
    parse = build_parser().parse_args
    base = ["predict", "--model", "resnet50", "--variant", "sync-ps", "--workers", "2"]
    assert _cluster(parse(base + ["--cluster", str(f)]), 2).burst == 0.0
    assert _cluster(parse(base + ["--cluster", str(f), "--burst", "file"]), 2).burst == 60000.0
    assert _cluster(parse(base + ["--burst", "64KiB"]), 2).burst == 65536.0
    assert main(base + ["--burst", "file"]) == 2
    assert "--burst file takes the token bucket of a --cluster file" in capsys.readouterr().err
    assert main(base + ["--burst", "64KiB", "--instance", "p5.48xlarge"]) == 2
    assert "an --instance's links are its topology's" in capsys.readouterr().err
