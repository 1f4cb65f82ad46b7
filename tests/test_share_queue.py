"""``Cluster.tcp_queue``: the standing queue of a PS host's shared link (issue #37).

A message of one of ``k >= 2`` connections into / out of the PS host waits the queue on top
of its latency; with one connection (one worker) there is no queue. On a deterministic
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
    cl = Cluster(workers=n, bandwidth=1.25e8, latency=1e-4, tcp_queue=q)
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
