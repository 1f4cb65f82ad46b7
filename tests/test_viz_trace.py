"""Chrome/Perfetto trace export and the Gantt timeline of a traced replication."""

from __future__ import annotations

import json
from collections import defaultdict

import matplotlib
import numpy as np
import pytest
from conftest import ps_net

import sgdnet
from sgdnet.errors import SgdnetError, SimulationError
from sgdnet.viz import timeline, to_chrome_trace
from sgdnet.viz._tracks import busy_from_intervals
from sgdnet.viz.style import time_unit

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def barrier_result():
    # One global step: when it completes nothing is in flight, so the trace (completed
    # firings) covers every busy second of [t0, t1].
    return sgdnet.simulate(ps_net(4, barrier=True), steps=12, warmup=3, replications=2, seed=11, trace=True)


@pytest.fixture(scope="module")
def worker_result():
    return sgdnet.simulate(ps_net(4), steps=60, warmup=10, replications=2, seed=5, trace=True)


def _busy(result, rep, name):
    j = result.resource_names.index(name)
    cap = result.resource_capacity[j]
    return float(result.utilization(name).samples[rep]) * cap * float(result.sim_time[rep]), cap


def _strict_json(text: str):
    """Parse as RFC 8259 JSON: Python's json accepts NaN / Infinity, trace viewers do not."""
    def refuse(c):
        raise ValueError(f"non-standard JSON constant {c}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_tags_still_give_strict_json(tmp_path):
    net = ps_net(2)
    net.transitions["w0/forward"].tags["budget"] = float("inf")
    net.transitions["w1/forward"].tags["score"] = np.float64("nan")
    r = sgdnet.simulate(net, steps=5, warmup=1, replications=1, seed=3, trace=True)
    path = tmp_path / "trace.json"
    to_chrome_trace(r, path)
    evs = _strict_json(path.read_text())["traceEvents"]
    fwd0 = [e for e in evs if e["name"] == "w0/forward"]
    assert fwd0 and all(e["args"]["budget"] == "inf" for e in fwd0)
    assert all(e["args"]["score"] == "nan" for e in evs if e["name"] == "w1/forward")


def test_trace_is_valid_chrome_json(barrier_result, tmp_path):
    path = tmp_path / "trace.json"
    to_chrome_trace(barrier_result, path, rep=1)
    doc = _strict_json(path.read_text())
    evs = doc["traceEvents"]
    assert evs and doc["displayTimeUnit"] == "ms"
    for e in evs:
        for k in ("ph", "ts", "dur", "pid", "tid", "name"):
            assert k in e, (k, e)
        assert e["ph"] in ("X", "M")
        assert e["dur"] >= 0
    x = [e for e in evs if e["ph"] == "X"]
    # a named process per host, a named thread per (pid, tid) used
    pnames = {e["pid"]: e["args"]["name"] for e in evs if e["name"] == "process_name"}
    tnames = {(e["pid"], e["tid"]) for e in evs if e["name"] == "thread_name"}
    assert set(pnames.values()) == {"worker0", "worker1", "worker2", "worker3", "ps0"}
    assert {(e["pid"], e["tid"]) for e in x} <= tnames
    # slices of one thread never overlap (viewers need nesting)
    by_thread = defaultdict(list)
    for e in x:
        by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for iv in by_thread.values():
        iv.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(iv, iv[1:]))
    # each traced firing appears once per resource it holds
    tr = barrier_result.trace[barrier_result.trace["rep"] == 1]
    n_expected = sum(len(barrier_result.transition_resources[int(t)]) for t in tr["transition"])
    n_ops = sum(1 for e in x if e["args"]["track"] == "ops")
    assert len(x) - n_ops == n_expected


def test_trace_durations_sum_to_busy_time(barrier_result):
    r = barrier_result
    for rep in range(r.replications):
        t0, t1 = float(r.t0[rep]), float(r.t1[rep])
        doc = to_chrome_trace(r, rep=rep, window=(t0, t1))
        per_res = defaultdict(list)
        for e in doc["traceEvents"]:
            if e["ph"] == "X" and e["args"]["track"] != "ops":
                per_res[e["args"]["track"]].append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
        disc = {n: ps_net(4, barrier=True).resources[n].discipline for n in r.resource_names}
        for name in r.resource_names:
            busy, cap = _busy(r, rep, name)
            total = sum(b - a for a, b in per_res[name])
            if disc[name] == "ps":
                # concurrent flows share the link: the busy server-time is the integral of
                # min(flows, capacity), which the overlapping slices reproduce
                assert total >= busy * (1 - 1e-9)
                assert busy_from_intervals(per_res[name], t0, t1, cap) == pytest.approx(busy, rel=1e-9, abs=1e-12)
            else:
                assert total == pytest.approx(busy, rel=1e-9, abs=1e-12), name


def _slices_by_resource(result, window):
    per_res = defaultdict(list)
    for e in to_chrome_trace(result, rep=0, window=window)["traceEvents"]:
        if e["ph"] == "X" and e["args"]["track"] != "ops":
            per_res[e["args"]["track"]].append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
    return per_res


@pytest.mark.parametrize("variant", ["async-ps", "sync-ps", "allreduce"])
def test_trace_of_a_variant_covers_busy_time_once_in_flight_firings_complete(variant):
    # When the last counted step completes, other workers (async-ps) or the next step's
    # communication (sync-ps, allreduce) are mid-flight; those firings are not in the trace.
    # The same seed with more steps replays the same trajectory and completes them, so its
    # trace clipped to [t0, t1] must give every resource's busy time.
    from sgdnet import Cluster, models, variants

    # FIFO NICs: every resource busy time is then covered by firings (a link's is its bytes)
    net = variants.build(variant, models.load("resnet18"), Cluster(workers=3, compute_cv=0.1, comm_cv=0.1), discipline="fifo",
                         max_layers=4)
    kw = dict(warmup=4, replications=1, seed=7, trace=True, parallel=False)
    short = sgdnet.simulate(net, steps=20, **kw)
    longer = sgdnet.simulate(net, steps=30, **kw)
    t0, t1 = float(short.t0[0]), float(short.t1[0])
    cut, full = _slices_by_resource(short, (t0, t1)), _slices_by_resource(longer, (t0, t1))
    short_of_busy = 0
    for name in short.resource_names:
        busy, cap = _busy(short, 0, name)
        assert net.resources[name].discipline == "fifo" and cap == 1
        assert busy_from_intervals(full[name], t0, t1, cap) == pytest.approx(busy, rel=1e-9, abs=1e-12), name
        partial = busy_from_intervals(cut[name], t0, t1, cap)
        assert partial <= busy + 1e-12
        short_of_busy += partial < busy * (1 - 1e-9)
    if variant == "async-ps":
        assert short_of_busy >= 1  # the gap is real for this variant, which is why the note exists


def test_trace_needs_a_traced_result_and_a_valid_rep(barrier_result):
    plain = sgdnet.simulate(ps_net(2), steps=5, warmup=1, replications=1, seed=1)
    with pytest.raises(SimulationError, match="trace=True"):
        to_chrome_trace(plain)
    with pytest.raises(SgdnetError, match="rep=5"):
        to_chrome_trace(barrier_result, rep=5)
    with pytest.raises(SgdnetError, match="end > start"):
        to_chrome_trace(barrier_result, window=(2.0, 1.0))


def test_timeline_draws_rows_per_resource(worker_result, tmp_path):
    ax = timeline(worker_result, rep=0)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels.count("gpu") == 4 and labels.count("nic_up") == 5 and "cpu" in labels
    lo, hi = ax.get_xlim()
    assert hi > lo
    path = tmp_path / "tl.png"
    ax.figure.savefig(path, dpi=80)
    assert path.stat().st_size > 10_000
    plt.close(ax.figure)


def test_timeline_worker_subset_and_window(worker_result):
    t0 = float(worker_result.t0[0])
    ax = timeline(worker_result, workers=[1], window=(t0, t0 + 0.05))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels.count("gpu") == 1  # worker1 only, plus the server rows
    assert "cpu" in labels
    assert ax.get_xlim()[1] == pytest.approx(50.0)  # 50 ms window in ms
    plt.close(ax.figure)
    with pytest.raises(SgdnetError, match="workers"):
        timeline(worker_result, workers=[9])
    with pytest.raises(SgdnetError, match="end > start"):
        timeline(worker_result, window=(1.0, 1.0))


def test_timeline_blocked_time_is_the_idle_gpu_time(barrier_result):
    # blocked shading on a worker gpu + its busy bars cover the whole window exactly once
    r = barrier_result
    t0, t1 = float(r.t0[0]), float(r.t1[0])
    ax = timeline(r, window=(t0, t1), labels=False)
    from matplotlib.collections import PolyCollection

    grey = matplotlib.colors.to_rgba(sgdnet.viz.KIND_COLORS["blocked"])
    ys = {}
    for c in ax.collections:
        if isinstance(c, PolyCollection) and np.allclose(c.get_facecolor()[0], grey):
            for p in c.get_paths():
                v = p.vertices
                ys.setdefault(round(float(v[:, 1].min()), 3), 0.0)
                ys[round(float(v[:, 1].min()), 3)] += float(v[:, 0].max() - v[:, 0].min())
    busy0, _ = _busy(r, 0, "worker0/gpu")
    _, scale = time_unit(t1 - t0)
    idle = (t1 - t0 - busy0) / scale  # in the axis unit
    assert idle > 0
    assert min(ys.values(), key=lambda v: abs(v - idle)) == pytest.approx(idle, rel=1e-6)
    plt.close(ax.figure)
