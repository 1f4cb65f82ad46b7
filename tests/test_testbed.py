"""The testbed: quiet gate and step-rate arithmetic (pure), namespace set-up and teardown
(including an exception, SIGINT and SIGTERM), and a 2-host few-step smoke run.

The namespace tests need root and iproute2 and skip with the reason otherwise; the smoke run
also needs torch. Nothing is timed: the smoke run checks that the link shaping binds (a rate
no faster than the shaped link allows) rather than how long anything took.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sgdnet.errors import SgdnetError, TestbedError
from sgdnet.testbed import quiet
from sgdnet.testbed.netns import PREFIX, EmulatedCluster, can_create_namespaces, cleanup_stale
from sgdnet.testbed.runner import rotate, summarize_job, summarize_runs

ROOT = Path(__file__).resolve().parents[1]
OK, WHY = can_create_namespaces()
needs_ns = pytest.mark.skipif(not OK, reason=f"cannot create network namespaces here: {WHY}")


def _ns_list() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


# ---------------------------------------------------------------- pure parts
def test_cpu_jiffies_separates_process_time_from_interrupts():
    tck = os.sysconf("SC_CLK_TCK")
    text = f"cpu  {100 * tck} {10 * tck} {50 * tck} {800 * tck} {5 * tck} {1 * tck} {4 * tck} 0 0 0\n"
    busy, total, irq = quiet.cpu_jiffies(text)
    assert (busy, total, irq) == (pytest.approx(160), pytest.approx(970), pytest.approx(5))


def test_other_cores_is_machine_busy_minus_own_over_wall():
    assert quiet.other_cores(100.0, 103.0, own_cpu_s=1.0, wall_s=2.0) == 1.0
    assert quiet.other_cores(100.0, 100.5, own_cpu_s=1.0, wall_s=2.0) == 0.0  # clamped
    with pytest.raises(ValueError):
        quiet.other_cores(0, 1, 0, 0)


def test_top_others_excludes_ours_and_ranks_by_cores():
    before = {1: ("a", 10.0), 2: ("b", 5.0), 3: ("ours", 0.0)}
    after = {1: ("a", 11.0), 2: ("b", 8.0), 3: ("ours", 9.0), 4: ("new", 0.5)}
    rows = quiet.top_others(before, after, wall_s=2.0, exclude=[3])
    assert [(r["name"], r["cores"]) for r in rows] == [("b", 1.5), ("a", 0.5), ("new", 0.25)]


def test_rotate_interleaves_orders():
    assert [rotate("abcd", k) for k in range(5)] == [
        list("abcd"), list("bcda"), list("cdab"), list("dabc"), list("abcd")]


def _rank(stamps, cpu=(0.0, 1.0), stat=None):
    j = {"id": "x", "kind": "train", "t0": 0.0, "t1": 4.0, "cpu0": cpu[0], "cpu1": cpu[1]}
    if stamps is not None:
        j["stamps"] = stamps
    if stat is not None:
        j.update(stat0=stat[0], stat1=stat[1])
    return {"jobs": [j]}


def test_summarize_job_rates_from_step_end_stamps_warmup_excluded():
    # worker 1: warm-up step slow (ends at 1.0), then one step every 0.5 s; worker 2 every 0.25 s
    w1 = [1.0, 1.5, 2.0, 2.5, 3.0]
    w2 = [0.9, 1.15, 1.4, 1.65, 1.9]
    ranks = [_rank(None, stat=((100.0, 0, 0), (106.0, 0, 0))), _rank(w1), _rank(w2)]
    row = summarize_job(ranks, 0, warmup=1, threshold_cores=0.5)
    assert row["worker_steps_per_s"] == pytest.approx([2.0, 4.0])
    assert row["steps_per_s"] == pytest.approx(6.0)
    assert row["worker_stamps_s"] == [w1, w2]  # kept (relative to the job's start, here 0)
    # machine busy 6 CPU-s in 4 s, ours 3 CPU-s: others used 0.75 cores -> noisy
    assert row["other_cores"] == pytest.approx(0.75) and row["noisy"] is True
    with pytest.raises(TestbedError, match="warm-up"):
        summarize_job(ranks, 0, warmup=0)


def test_summarize_runs_median_min_max_per_cell():
    runs = [{"scheme": "ring", "workers": 2, "rate_Bps": 1.0, "steps_per_s": v,
             "noisy": nz, "other_cores": 0.1} for v, nz in ((3.0, False), (1.0, True), (2.0, None))]
    (row,) = summarize_runs(runs)
    assert (row["median"], row["min"], row["max"], row["n"], row["noisy"]) == (2.0, 1.0, 3.0, 3, 1)
    (quiet_only,) = summarize_runs(runs, include_noisy=False)
    assert (quiet_only["median"], quiet_only["n"]) == (2.5, 2)


def test_bad_campaign_arguments_fail_before_any_set_up():
    from sgdnet.testbed.runner import run_campaign

    for kw, match in (({"model": "resnet"}, "unknown testbed model"),
                      ({"schemes": ["allgather"]}, "unknown scheme"),
                      ({"warmup": 0}, "warmup >= 1"),
                      ({"rates": ["fast"]}, "rate")):
        with pytest.raises(SgdnetError, match=match):
            run_campaign(**kw, log=lambda s: None)


def test_bad_arguments_are_testbed_errors():
    with pytest.raises(TestbedError, match="hosts=0"):
        EmulatedCluster(0)
    with pytest.raises(TestbedError, match="burst"):
        EmulatedCluster(2, burst=100)
    with pytest.raises(SgdnetError, match="rate"):
        EmulatedCluster(2, rate="fast")


# ---------------------------------------------------------------- namespaces
@needs_ns
def test_setup_shapes_both_directions_and_teardown_removes_everything():
    with EmulatedCluster(2, rate="50Mbit/s", burst="32KB") as c:
        names = set(c.namespaces())
        assert names <= _ns_list()
        stats = c.qdisc_stats()
        assert set(stats) == {"h0.up", "h0.down", "h1.up", "h1.down"}
        for s in stats.values():
            assert "tbf" in s and "rate 50Mbit" in s
        ping = subprocess.run(c.exec_args(0, [sys.executable, "-c", textwrap.dedent(f"""
            import socket
            s = socket.create_connection(("{c.addr(1)}", 9), timeout=2)
            """)]), capture_output=True, text=True)
        # nobody listens on port 9: a refused connection proves the path works (no timeout)
        assert "ConnectionRefusedError" in ping.stderr
    assert not names & _ns_list()


@needs_ns
def test_teardown_on_exception_and_stale_cleanup():
    c = EmulatedCluster(2)
    with pytest.raises(RuntimeError, match="boom"):
        with c:
            names = set(c.namespaces())
            raise RuntimeError("boom")
    assert not names & _ns_list()
    # a leftover of a dead process (pid 2**22 + 1 cannot exist) is cleaned, nothing else is
    stale = f"{PREFIX}-{2 ** 22 + 1}-h0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    assert stale in cleanup_stale()
    assert stale not in _ns_list()


@needs_ns
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_teardown_on_ctrl_c_and_sigterm(tmp_path, sig):
    marker = tmp_path / "names.json"
    code = textwrap.dedent(f"""
        import json, time
        from sgdnet.testbed.netns import EmulatedCluster
        with EmulatedCluster(2) as c:
            open({str(marker)!r}, "w").write(json.dumps(c.namespaces()))
            time.sleep(60)
        """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE,
                         text=True)
    try:
        for _ in range(300):
            if marker.exists() and marker.read_text():
                break
            time.sleep(0.1)
        names = set(json.loads(marker.read_text()))
        assert names <= _ns_list()
        p.send_signal(sig)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert "KeyboardInterrupt" in p.stderr.read()
    assert not names & _ns_list()


@needs_ns
def test_smoke_run_two_hosts_few_steps():
    pytest.importorskip("torch")
    from sgdnet.testbed.models import build
    from sgdnet.testbed.runner import run_campaign

    rate = 12.5e6  # 100 Mbit/s
    res = run_campaign(model="tb-tiny", workers=[1], rates=[rate], repeats=1, steps=4, warmup=1,
                       burst="64KB", timeout_s=120, log=lambda s: None)
    rows = {r["scheme"]: r for r in res["runs"]}
    assert set(rows) == {"sync-ps", "async-ps", "ring", "ddp"}
    for r in rows.values():
        assert len(r["worker_steps_per_s"]) == 1 and r["steps_per_s"] > 0
        assert r["other_cores"] >= 0
    # each PS step pushes and pulls the whole model over a shaped link: at most
    # rate / (gradient bytes - burst) steps/s, whatever the CPU does
    m, _, _ = build("tb-tiny", 32)
    grad = sum(p.numel() * 4 for p in m.parameters())
    bound = rate / (grad - 64e3)
    for s in ("sync-ps", "async-ps"):
        assert rows[s]["steps_per_s"] < 1.05 * bound, (s, rows[s]["steps_per_s"], bound)
    assert res["meta"]["netem"] in (True, False)
    assert not {n for n in _ns_list() if n.startswith(f"{PREFIX}-{os.getpid()}-")}


def test_probe_ps_rate_is_rounds_end_to_end_inside_the_window():
    from sgdnet.testbed.tcp_probe import rounds_per_s

    ends = [0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 3.0]
    assert rounds_per_s(ends, 0.9, 2.1) == pytest.approx(4 / 1.0)  # 1.0 .. 2.0: 4 rounds
    assert rounds_per_s(ends, 2.5, 4.0) == 0.0  # one round inside: no rate


@pytest.mark.parametrize("n", [0, 3])
def test_the_probes_refuse_more_hosts_than_the_cluster_has(n):
    from sgdnet.testbed.tcp_probe import probe_duplex, probe_incast, probe_ps

    class Three:  # no namespaces are made: the check comes first
        hosts = 3

    for probe, what in ((lambda: probe_ps(Three(), n, True), "workers"),
                        (lambda: probe_incast(Three(), n), "flows"),
                        (lambda: probe_duplex(Three(), n), "flows")):
        with pytest.raises(TestbedError, match=f"{what}={n}: the cluster has 3 hosts"):
            probe()


def test_reverse_queue_probe_refuses_bad_host_counts():
    from sgdnet.testbed.tcp_reverse import probe_reverse

    class Three:  # no namespaces are made: the checks come first
        hosts = 3

    with pytest.raises(TestbedError, match="receivers=0, reverse=0: use receivers >= 1"):
        probe_reverse(Three(), 0, 0)
    with pytest.raises(TestbedError, match=r"receivers \+ reverse=3: the cluster has 3 hosts"):
        probe_reverse(Three(), 1, 2)


@needs_ns
def test_ps_traffic_probe_stays_under_the_link_and_sync_workers_keep_step():
    """The PS-traffic probe on 2 workers at 100 Mbit/s: no PS link carries more than its rate
    (rounds x the round's bytes <= the payload rate, 5 % for the tbf burst), sync workers
    go in lockstep (the sink's per-layer barrier) and async ones do not need to."""
    from sgdnet.testbed.tcp_probe import probe_ps

    with EmulatedCluster(3, rate="100Mbit/s") as cl:
        got = {sync: probe_ps(cl, 2, sync, run_s=2.5) for sync in (True, False)}
    for sync, r in got.items():
        assert 0 < r["of_bound"] <= 1.05, (sync, r["of_bound"])
        assert len(r["ends"]) == 2 and all(len(e) >= 5 for e in r["ends"])
    a, b = got[True]["per_worker"]
    assert a == pytest.approx(b, rel=0.05)
    # the sink's barrier: a sync pull leaves only once every worker's push of its index is in
    ins = collections.defaultdict(list)
    for t, _, k in got[True]["ps_in"]:
        ins[k].append(t)
    outs = got[True]["ps_out"]
    assert outs and all(len(ins[k]) == 2 and t >= max(ins[k]) for t, _, k in outs)


@needs_ns
def test_ps_probe_records_each_connection_state_and_the_congestion_control_is_set():
    """``probe_ps(tcp_state=True)``: one state before every round and one after each pull; with
    Reno on every host BBR reports nothing (bandwidth 0), with BBR (where a namespace allows
    it) its bandwidth estimate is positive; a congestion control the kernel refuses is a
    TestbedError naming it. Every worker's connection reports its run's busy time (data in
    flight: more than 0, less than the run and its last round) and the parts of it
    limited by the receiver's window and the send buffer (each within the busy time)."""
    from sgdnet.testbed.tcp_probe import PS_LAYERS, probe_ps

    with EmulatedCluster(3, rate="100Mbit/s") as cl:
        with pytest.raises(TestbedError, match="no-such-cc"):
            cl.congestion_control("no-such-cc")
        cl.congestion_control("reno")
        reno = probe_ps(cl, 2, True, run_s=2.0, tcp_state=True)
        try:
            cl.congestion_control("bbr")
        except TestbedError:
            bbr = None
        else:
            bbr = probe_ps(cl, 2, True, run_s=2.0, tcp_state=True)
    for r in (reno, bbr):
        if r is None:
            continue
        assert len(r["states"]) == 2 and len(r["t0"]) == 2
        for w in range(2):
            assert len(r["states"][w]) == len(r["rounds"][w])
            # the last round may have been cut by the run's end after some pulls
            assert all(len(s) == 1 + len(PS_LAYERS) for s in r["states"][w][:-1])
            assert all(st[0] >= 1 for s in r["states"][w] for st in s)  # cwnd
    assert all(st[4] == 0 for s in reno["states"][0] for st in s)
    for i in reno["info"]:
        assert 0 < i["busy_s"] < 2.0 + 1.0  # the 2 s run and its last round, not the idle start
        assert 0 <= i["rwnd_limited_s"] <= i["busy_s"]
        assert 0 <= i["sndbuf_limited_s"] <= i["busy_s"]
    if bbr is not None:
        assert statistics.median(st[4] for s in bbr["states"][0] for st in s) > 0


def test_kernel_arrivals_parse_the_tcp_probe_event_format():
    """``probe_ps_tcpstate.kernel_in`` and ``traced`` read lines in the ``tcp:tcp_probe``
    event's print format: data segments into the PS's socket count their bytes, ACK-only
    segments (data_len 0) and other connections do not; sequence numbers are unwrapped."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from probe_ps_tcpstate import kernel_in, traced

    def line(t, src, dst, n, nxt, una):
        return (f"  python-1  [000] ..s1. {t:.6f}: tcp_probe: family=AF_INET src={src}:2000 "
                f"dest={dst}:40000 mark=0x0 data_len={n} snd_nxt={nxt:#x} snd_una={una:#x} "
                f"snd_cwnd=10 ssthresh=2147483647 snd_wnd=65535 srtt=125 rcv_wnd=65536 "
                f"sock_cookie=1f skbaddr=000000001 skaddr=000000002")

    ps, w, v = "10.77.0.1", "10.77.0.2", "10.77.0.3"
    lines = [line(1.0, ps, w, 1448, 5, 5), line(1.1, ps, w, 0, 5, 5),
             line(1.2, ps, v, 1448, 5, 5), line(1.3, ps, w, 2896, 5, 5)]
    assert kernel_in(lines, ps, w) == ([1.0, 1.3], [1448, 4344])
    wrap = [line(2.0, w, ps, 0, 0xFFFFFF00, 0xFFFFFF00), line(2.1, w, ps, 0, 0x200, 0x100)]
    got = traced(wrap, w, ps)
    assert [(x[1], x[2]) for x in got] == [(0, 0), (0x300, 0x200)]


@needs_ns
def test_reverse_queue_probe_delays_the_answer_not_the_data():
    """The reverse-queue probe at 100 Mbit/s, one receiver: a 256 KiB message cannot arrive
    before its bytes beyond the tbf burst have crossed at the payload rate; with no stream into
    the sender its one-byte answer is back within 2 ms of the arrival, with two streams into
    the sender's downlink the answer waits behind their queue (> 2 ms) while the data itself
    arrives within 1.5x of its time without them."""
    from sgdnet.testbed.tcp_reverse import probe_reverse

    size = 262144
    with EmulatedCluster(4, rate="100Mbit/s") as cl:
        alone, loaded = (probe_reverse(cl, 1, rev, sizes=(size,), rounds=4) for rev in (0, 2))
    key = str(size)
    floor = (size - cl.burst) / (1448 / 1514 * cl.rate)
    for r in (alone, loaded):
        assert min(r["arrival_s"][key]) >= 0.95 * floor, (r["arrival_s"][key], floor)
    assert alone["median_s"][key] - alone["median_in_s"][key] < 2e-3
    assert loaded["median_s"][key] - loaded["median_in_s"][key] > 2e-3
    assert loaded["median_in_s"][key] < 1.5 * alone["median_in_s"][key]


@needs_ns
def test_allreduce_job_and_one_gloo_thread_ring_on_two_workers():
    pytest.importorskip("torch")
    from sgdnet.testbed.runner import launch

    rate, burst = 12.5e6, 64e3  # 100 Mbit/s, the cluster's default tbf burst (64 KB)
    size = 1 << 20
    with EmulatedCluster(3, rate=rate, burst="64KB") as cl:
        got = launch(cl, 3, [{"kind": "allreduce", "id": "ar", "sizes": [4, size], "reps": 3,
                              "gap_s": 0.0},
                             {"kind": "train", "id": "ring1", "scheme": "ring", "steps": 3,
                              "warmup": 1, "model": "tb-tiny", "batch": 8,
                              "gloo_threads": 1}], timeout_s=120)
    assert got["ranks"][0]["jobs"][0]["allreduce"] == {}  # the PS host takes no part
    for r in got["ranks"][1:]:
        ts = r["jobs"][0]["allreduce"]
        assert set(ts) == {"4", str(size)} and all(len(v) == 3 for v in ts.values())
        # a 2-worker ring sends 2 (n-1)/n S = S bytes a worker through its shaped link
        assert min(ts[str(size)]) >= (size - burst) / rate, ts[str(size)]
        assert len(r["jobs"][1]["stamps"]) >= 3  # the ring ran on a gloo group of its own


def test_smoke_cli_reports_a_clear_error_without_namespaces(monkeypatch, capsys):
    from sgdnet.cli import main
    from sgdnet.testbed import netns

    monkeypatch.setattr(netns, "can_create_namespaces", lambda: (False, "not root (test)"))
    assert main(["testbed", "--smoke"]) == 2
    err = capsys.readouterr().err
    assert "cannot build the emulated cluster: not root (test)" in err


def test_calibrate_cli_write_spec_and_from_records(tmp_path, capsys):
    from sgdnet import Cluster
    from sgdnet.cli import main

    spec = tmp_path / "spec.json"
    assert main(["calibrate", "--write-spec", str(spec), "--master", "10.0.0.1", "--world",
                 "3", "--records-dir", str(tmp_path)]) == 0
    s = json.loads(spec.read_text())
    assert s["world"] == 3 and [j["kind"] for j in s["jobs"]][0] == "p2p"
    assert main(["calibrate", "--write-spec", str(spec)]) == 2
    assert "--master" in capsys.readouterr().err
    # records as the hosts would write them (synthetic, see test_calibrate)
    from test_calibrate import ALPHA, BW, _synthetic_ranks  # tests/ is on sys.path (rootdir)

    for rk in _synthetic_ranks():
        (tmp_path / f"rank{rk['rank']}.json").write_text(json.dumps(rk))
    out = tmp_path / "c.yaml"
    assert main(["calibrate", "--from-records", str(tmp_path), "--out", str(out),
                 "--nccl-gpu"]) == 0
    c = Cluster.from_file(out)
    assert c.bandwidth == pytest.approx(BW, rel=1e-3)
    assert c.latency == pytest.approx(ALPHA, rel=1e-2)
    assert c.comm_uses_compute is False
    assert c.share_cv_in == 0.0  # these records have no per-flow ends
    # --update: records with per-flow ends give the file its sharing figures, nothing else
    for rk in _synthetic_ranks(share_cv=0.3):
        (tmp_path / f"rank{rk['rank']}.json").write_text(json.dumps(rk))
    upd = tmp_path / "u.yaml"
    assert main(["calibrate", "--from-records", str(tmp_path), "--update", str(out),
                 "--out", str(upd)]) == 0
    c2 = Cluster.from_file(upd)
    assert c2.share_cv_in == pytest.approx(0.3, abs=0.06)
    assert c2.replace(share_cv_in=0.0) == c


def test_table_script_predicts_every_committed_cell(capsys):
    """scripts/testbed_table.py runs on the committed campaign and calibration (it is what gets
    re-run after the network model changes): one row per measured cell, the error summary, and
    the one closed form it prints checked by hand."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("testbed_table",
                                                  ROOT / "scripts" / "testbed_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # ring bound n^2 B / (2 (n-1) M): n = 2, B = 2, M = 1 -> 4 steps/s; PS: B / M
    assert mod.link_bound("ring", 2, 2.0, 1.0) == 4.0
    assert mod.link_bound("sync-ps", 3, 2.0, 1.0) == 2.0
    assert mod.link_bound("ddp", 1, 2.0, 1.0) is None
    data = ROOT / "docs" / "data" / "testbed"
    runs = json.loads((data / "runs.json").read_text())
    cells = {(r["scheme"], r["workers"], r["rate_Bps"]) for r in runs["runs"]}
    assert mod.main([str(data / "runs.json"), str(data / "cluster-100mbit.yaml"),
                     str(data / "cluster-200mbit.yaml"), "--profile",
                     str(data / "profile-tb-mlp.json"), "--sim-steps", "30",
                     "--replications", "2"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| 1") or ln.startswith("| 2")]
    assert len(rows) == len(cells) == 32
    assert "mean absolute error (28 cells)" in out


def test_ack_share_is_the_capped_rate_over_the_payload_rate_and_interpolates():
    from sgdnet.testbed.tcp_reverse import ack_share

    rate, size = 10e6, 500e3  # bytes/s of the link; payload 1448/1514 of it
    pay = 1448 / 1514 * rate
    cells = {0: [0.050, 0.052, 0.049],
             1: [0.051, 0.052, 0.050],       # within 5 % of alone: not capped
             2: [size / (0.8 * pay)] * 3,    # moved at 0.8 of the payload rate
             4: [size / (0.5 * pay)] * 3}
    got = ack_share(cells, size, rate)
    assert got == pytest.approx((1.0, 0.8, 0.65, 0.5), rel=1e-12)
    with pytest.raises(TestbedError, match="n = 0 and at least one"):
        ack_share({1: [0.1]}, size, rate)
