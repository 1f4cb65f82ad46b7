"""TCP's slow-start restart and BBR's pacing while sharing (issue #37): closed forms by hand.

- ``slow_start_time``: rounds of one RTT while the window (doubling from 10 x 1448 B, RFC 6928)
  is below the pipe ``B R``, then the rest at ``B``; ``b / B`` when the initial window already
  fills the pipe (the emulated testbed: 14,480 B against ~0.8 KB);
- ``pacing_cap``: ``factor B / k``;
- through the Fabric: a message's arrival is ``b / B + latency + ramp_delay``; flows into a PS
  host are held to their cap while fewer than ``k`` of them send.
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Cluster, Net, simulate
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import ClusterError, VariantError
from sgdnet.testbed.tcp_probe import summarize
from sgdnet.variants.fabric import Fabric
from sgdnet.variants.tcp_ramp import pacing_cap, ramp_delay, slow_start_time

ENGINES = pytest.mark.parametrize("sim", [simulate, simulate_reference], ids=["kernel", "reference"])
G = 125e6  # 1 Gbit/s
W0 = 14480.0


def test_window_covering_the_pipe_costs_nothing():
    # 100 Mbit/s, 20 us: pipe 250 B < 14,480 B
    assert slow_start_time(1e6, 12.5e6, 20e-6) == pytest.approx(1e6 / 12.5e6, rel=1e-15)
    assert ramp_delay(1e6, 12.5e6, 20e-6) == 0.0


def test_long_message_pays_the_rounds_below_the_pipe():
    # 1 Gbit/s, 1 ms: pipe 125,000 B; windows 14,480, 28,960, 57,920, 115,840 are below it
    # (4 rounds, 217,200 B), the 5th (231,680) is not: the rest goes at B
    r = 1e-3
    t = slow_start_time(1e6, G, r, W0)
    assert t == pytest.approx(4 * r + (1e6 - 217_200) / G, rel=1e-12)
    assert ramp_delay(1e6, G, r, W0) == pytest.approx(4 * r - 217_200 / G, rel=1e-12)


def test_short_message_ends_inside_the_ramp():
    # 40,000 B: round 1 carries 14,480, round 2 the rest (43,440 >= 40,000): two round trips
    assert slow_start_time(40_000, G, 1e-3, W0) == pytest.approx(2e-3, rel=1e-12)
    assert slow_start_time(0, G, 1e-3, W0) == 0.0


def test_pacing_cap_is_factor_times_fair_share():
    assert pacing_cap(G, 4, 2.0) == pytest.approx(G / 2, rel=1e-15)
    assert pacing_cap(G, 4, 0.0) == math.inf  # no pacing model
    assert pacing_cap(G, 1, 2.0) == math.inf  # one flow: nothing to share
    with pytest.raises(VariantError, match="flows"):
        pacing_cap(G, 0, 2.0)
    with pytest.raises(VariantError, match="factor"):
        pacing_cap(G, 2, -1.0)
    with pytest.raises(VariantError, match="rtt"):
        slow_start_time(1e6, G, -1.0)


def _ends(sim, net: Net) -> dict[str, float]:
    clk = net.place("clock", tokens=1)
    net.transition("tick", 1e4, inputs={clk: 1}, outputs={clk: 1}, tags={"step": True})
    res = sim(net, steps=1, warmup=0, replications=1, seed=0, trace=True)
    return {e["name"]: e["end"] for e in res.trace_events(0) if e["name"] != "tick"}


@ENGINES
def test_fabric_adds_the_ramp_to_the_arrival(sim):
    r, lat, b = 1e-3, 30e-6, 1e6
    c = Cluster(workers=2, bandwidth=G, latency=lat, tcp_rtt=r)
    net = Net("ramp")
    fab = Fabric(net, c)
    go = net.place("go", tokens=1)
    fab.transfer("m", b, ("worker", 0), ("worker", 1), inputs=[go.name], outputs=[])
    e = _ends(sim, net)
    assert e["m"] == pytest.approx(b / G, rel=1e-12)
    assert e["m.lat"] == pytest.approx(b / G + lat + 4 * r - 217_200 / G, rel=1e-12)


@ENGINES
def test_paced_flows_into_a_ps_leave_the_link_part_idle(sim):
    # 4 workers share the PS downlink: cap 1.5 B / 4 = 0.375 B. Two pushes alone are held to
    # it (0.75 B of the link used): each ends at b / (0.375 B); four at once get B/4 < cap
    b = 1e6
    for k, expect in ((2, b / (0.375 * G)), (4, 4 * b / G)):
        c = Cluster(workers=4, bandwidth=G, latency=0.0, tcp_pacing=1.5)
        net = Net("pace")
        fab = Fabric(net, c)
        for i in range(k):
            go = net.place(f"go{i}", tokens=1)
            fab.transfer(f"p{i}", b, ("worker", i), ("ps", 0), inputs=[go.name], outputs=[],
                         share="in")
        e = _ends(sim, net)
        for i in range(k):
            assert e[f"p{i}"] == pytest.approx(expect, rel=1e-12)


def test_unshared_flows_are_not_capped():
    c = Cluster(workers=4, bandwidth=G, latency=0.0, tcp_pacing=1.5)
    fab = Fabric(Net("x"), c)
    assert fab.flow_cap(None, ("worker", 0), ("worker", 1)) == math.inf
    assert fab.flow_cap("out", ("ps", 0), ("worker", 1)) == pytest.approx(0.375 * G)
    assert Fabric(Net("y"), c, discipline="fifo").flow_cap("in", ("worker", 0), ("ps", 0)) \
        == math.inf


def test_bad_tcp_fields_are_refused():
    with pytest.raises(ClusterError, match="tcp_pacing"):
        Cluster(workers=2, tcp_pacing=-1)
    with pytest.raises(ClusterError, match="tcp_pacing"):
        Cluster(workers=2, tcp_pacing=True)


def _record(after_share: float, after_alone: float = 0.1) -> dict:
    info = {"rto_s": 0.204, "mss": 1448, "rtt_s": 1e-4, "cwnd": 10, "pacing_Bps": 6e6,
            "bytes_acked": 1, "min_rtt_s": 2e-5}
    run = {"flows": 4, "bytes": 1 << 20, "gap_s": 0.1, "after_share_s": after_share,
           "after_alone_s": after_alone, "samples": [[0.2, [info] * 4], [0.6, [info] * 4]]}
    return {"tcp_slow_start_after_idle": "1", "tcp_congestion_control": "bbr", "fresh": info,
            "ping_s": [3e-4, 1e-4, 2e-4],
            "after_idle": [{"bytes": 1000, "warm_s": 1.0, "idle_s": 1.5, "cwnd_before": 10,
                            "rto_s": 0.2}],
            "sharing": [run, dict(run, after_share_s=after_share * 1.1), dict(run)]}


def test_probe_summary_turns_the_lone_message_after_sharing_into_the_cap():
    # a message alone after sharing with 3 others takes twice as long as after being alone:
    # it ran at B/2 = factor B / 4, factor 2 (the median of the three runs)
    s = summarize(_record(0.2), 12.5e6)
    assert s["alone_fraction"] == pytest.approx(0.5, rel=1e-12)
    assert s["tcp_pacing"] == pytest.approx(2.0, rel=1e-12)
    assert s["cluster"] == {"tcp_pacing": 2.0}
    assert (s["rtt_min_s"], s["rtt_median_s"], s["init_window_B"]) == (1e-4, 2e-4, 14480)
    assert s["after_idle"]["1000"]["excess_s"] == pytest.approx(0.5)
    # 4 x 6 MB/s over 1448/1514 x 12.5 MB/s
    assert s["pace_over_fair"] == pytest.approx(24e6 / (1448 / 1514 * 12.5e6), rel=1e-12)
    # the samples after 0.5 s: rtt 1e-4 while sharing, idle minimum 1e-4: no standing queue
    assert s["rtt_loaded_s"] == 1e-4 and s["standing_queue_s"] == 0.0
    # as fast as after being alone: no cap; never below the fair share (factor >= 1)
    assert summarize(_record(0.1), 12.5e6)["tcp_pacing"] == 0.0
    assert summarize(_record(1.0), 12.5e6)["tcp_pacing"] == 1.0


def test_probe_summary_reads_the_standing_queue_from_the_rtt_while_sharing():
    rec = _record(0.2)
    for run in rec["sharing"]:  # 14 ms while sharing (samples after 0.5 s), 20 ms before
        run["samples"] = [[0.2, [dict(run["samples"][0][1][0], rtt_s=0.020)] * 4],
                          [0.6, [dict(run["samples"][0][1][0], rtt_s=0.014)] * 4]]
    s = summarize(rec, 12.5e6)
    assert s["rtt_loaded_s"] == 0.014
    assert s["standing_queue_s"] == pytest.approx(0.014 - 1e-4, rel=1e-12)
    assert s["standing_queue_B"] == pytest.approx((0.014 - 1e-4) * 1448 / 1514 * 12.5e6,
                                                  rel=1e-12)
    assert "standing queue 13.90 ms" in s["summary"]


def test_with_probe_writes_the_cap_into_the_cluster_file_and_back(tmp_path):
    from sgdnet.testbed.calibrate import save_cluster_file
    from sgdnet.testbed.tcp_probe import with_probe
    from sgdnet.workload.cluster_file import ClusterFile, Link, load_cluster_file

    probe = summarize(_record(0.2), 12.5e6)
    cf = with_probe(ClusterFile(link=Link(bandwidth="100Mbit/s")), probe)
    assert cf.link.tcp_pacing == pytest.approx(2.0)
    assert cf.measurements["tcp"]["alone_fraction"] == pytest.approx(0.5)
    p = save_cluster_file(cf, tmp_path / "c.yaml")
    back = load_cluster_file(p)
    assert back.link.tcp_pacing == pytest.approx(2.0)
    assert Cluster(**back.cluster_kwargs(4)).tcp_pacing == pytest.approx(2.0)
    with pytest.raises(ClusterError, match="tcp_pacing"):
        Link(bandwidth="1Gbps", tcp_pacing=-1.0)


def _stream(rtt, unacked, rate, t_end, stream_end, mss=1448):
    """A synthetic streamer record: TCP_INFO every 5 ms, bytes acked at ``rate`` B/s."""
    return {"ping_s": [5e-5, 6e-5], "stream_end_s": stream_end,
            "samples": [[t, {"rtt_s": rtt, "unacked": unacked, "mss": mss,
                             "bytes_acked": int(rate * t)}]
                        for t in (k * 0.005 for k in range(1, int(t_end / 0.005) + 1))]}


def test_incast_summary_reads_the_queue_the_bytes_in_flight_and_the_survivor():
    from sgdnet.testbed.tcp_probe import summarize_incast

    link = 31.25e6
    beff = 1448 / 1514 * link
    # two hosts share for 2 s (RTT 9 ms, 50 segments in flight); the first goes on alone at
    # 0.8 of the link's payload rate (its bytes acked grow at that rate all along: the
    # fraction is read from the growth after its peer's last message was acknowledged)
    recs = [_stream(0.009, 50, 0.8 * beff, 2.6, 2.0), _stream(0.009, 50, 0.5 * beff, 2.0, 2.02)]
    out = summarize_incast(recs, link)
    assert out["rtt_min_s"] == 5e-5
    assert out["standing_queue_s"] == pytest.approx(0.009 - 5e-5)
    assert out["standing_queue_B"] == pytest.approx((0.009 - 5e-5) * beff)
    assert out["inflight_B"] == 50 * 1448
    fr = out["solo_fraction"]
    assert set(fr) == {"50ms", "100ms", "200ms", "400ms"}
    for v in fr.values():
        assert v == pytest.approx(0.8, rel=0.03)  # 5 ms samples: +-1 sample over the window
