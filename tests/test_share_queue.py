"""``Cluster.tcp_queue``: the standing queue of a PS host's shared link (issue #37).

``tcp_queue_model="static"``: a message of one of ``k >= 2`` connections into / out of the PS
host waits the queue on top of its latency; with one connection (one worker) there is no queue. On a deterministic
one-layer sync PS every step is push -> average -> pull, one after another, so each worker's
step grows by exactly 2 q (its push and its pull each wait q) when 2 or more workers share the
PS's links, and not at all with one worker.
"""

from __future__ import annotations

import pytest

from sgdnet import Cluster, Layer, ModelProfile, SgdnetError, simulate, variants

ONE = ModelProfile("one", [Layer("only", 0.002, 0.004, 2e6)], batch_size=8, device="test",
                   source="hand-made for tests")
Q = 0.0123


def period(n: int, q: float, variant: str = "sync-ps") -> float:
    cl = Cluster(workers=n, bandwidth=1.25e8, latency=1e-4, tcp_queue=q, tcp_queue_model="static")
    net = variants.build(variant, ONE, cl, granularity="fine")
    r = simulate(net, steps=20 * n, warmup=4 * n, replications=1, seed=0, parallel=False)
    return n / r.throughput.mean


@pytest.mark.parametrize("n", [2, 3])
def test_every_shared_push_and_pull_waits_the_queue(n):
    assert period(n, Q) - period(n, 0.0) == pytest.approx(2 * Q, rel=1e-9)


def test_one_worker_has_no_queue():
    assert period(1, Q) == pytest.approx(period(1, 0.0), rel=1e-12)


def test_rings_share_no_ps_link():
    assert period(3, Q, "allreduce") == pytest.approx(period(3, 0.0, "allreduce"), rel=1e-12)


@pytest.mark.parametrize("bad", [-1.0, "fast", float("inf")])
def test_bad_queue_is_refused_naming_the_field(bad):
    with pytest.raises(SgdnetError, match="tcp_queue"):
        Cluster(workers=2, tcp_queue=bad)


# ----------------------------------------------------- tcp_queue_model="join" (the dynamic one)
def join_run(speeds, q, n_steps=6):
    cl = Cluster(workers=len(speeds), speeds=tuple(speeds), bandwidth=1.25e8, latency=1e-4,
                 tcp_queue=q, tcp_queue_model="join")
    net = variants.build("sync-ps", ONE, cl, granularity="fine")
    r = simulate(net, steps=n_steps * len(speeds), warmup=0, replications=1, seed=0,
                 parallel=False, trace=True)
    return net, r


@pytest.mark.parametrize("n", [2, 3])
def test_workers_that_push_and_pull_together_never_wait_a_join_queue(n):
    """Identical workers start their pushes (and the PS its pulls) at the same instants: no
    transfer has moved a byte when another joins, so the step is the one without a queue."""
    cl = dict(workers=n, bandwidth=1.25e8, latency=1e-4, tcp_queue=Q, tcp_queue_model="join")
    net = variants.build("sync-ps", ONE, Cluster(**cl), granularity="fine")
    assert any(t.endswith(".join") for t in net.transitions)
    r = simulate(net, steps=20 * n, warmup=4 * n, replications=1, seed=0, parallel=False)
    assert n / r.throughput.mean == pytest.approx(period(n, 0.0), rel=1e-12)


def _first(net, ev, worker, stage):
    first = {}
    for e in ev:
        first.setdefault(e["name"], e)
    return next(e for n_, e in first.items() if n_.startswith(f"w{worker}.push")
                and net.transitions[n_].tags.get("stage") == stage)


def test_a_push_alone_queues_nothing_for_the_late_one():
    """Worker 1 computes at half speed: worker 0's push had the PS downlink alone, at its pace,
    so it queued nothing and worker 1's join stage costs nothing."""
    net, r = join_run((1.0, 0.5), 0.030)
    ev = r.trace_events(0)
    join1 = _first(net, ev, 1, "join")
    assert join1["start"] > _first(net, ev, 0, "link")["start"]
    assert join1["end"] == join1["start"]


def test_a_late_push_waits_what_the_sharing_ones_fell_behind_their_pace():
    """Workers 0 and 1 push together (each at B/2, half its pace B) for d seconds before the
    slow worker 2 joins: each has fallen B d / 2 behind, so the join stage lasts
    2 min(q, B d / 2, S - B d / 2) / B with q = tcp_queue * B / 2 (k - 1 = 2 others)."""
    B, S = 1.25e8, 2e6
    for q in (0.002, 0.030):
        net, r = join_run((1.0, 1.0, 0.5), q)
        ev = r.trace_events(0)
        p0, p1, join2 = _first(net, ev, 0, "link"), _first(net, ev, 1, "link"), _first(net, ev, 2, "join")
        assert p0["start"] == p1["start"]
        d = join2["start"] - p0["start"]
        assert 0 < B * d / 2 < S
        want = 2 * min(q * B / 2, B * d / 2, S - B * d / 2) / B
        assert join2["end"] - join2["start"] == pytest.approx(want, rel=1e-9)


def test_the_join_model_is_the_default_and_the_model_name_is_checked():
    assert Cluster(workers=2).tcp_queue_model == "join"
    with pytest.raises(SgdnetError, match="tcp_queue_model"):
        Cluster(workers=2, tcp_queue=Q, tcp_queue_model="dynamic")
