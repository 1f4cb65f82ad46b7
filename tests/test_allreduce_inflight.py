"""``allreduce(inflight=k)``: k collectives in flight at once, begun in bucket order.

Latency-dominated all-reduces (alpha = 1 ms a hop, 1 kB buckets) after the whole backward
(``overlap=False``), one bucket per layer, on FIFO NICs: every bucket's ring takes
T = 2 (n - 1) (alpha + m / (n B)) alone. With k in flight the B buckets run in ceil(B / k)
waves, so the step is TC + ceil(B / k) T, plus at most the serialisation of the buckets that
queue behind one another on a NIC (a few microseconds here, against a millisecond per wave):
the expected figures come from that count, not from the code.
"""

from __future__ import annotations

import functools
import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, SgdnetError, simulate, variants

build = functools.partial(variants.build, discipline="fifo")

BW = 1.25e9  # bytes/s
ALPHA = 1e-3
M = 1000.0  # bytes per layer (= per bucket)
#: three layers, 0.3 ms of compute each: the all-reduces' latency dominates the step
PROF = ModelProfile("lat3", [Layer(f"l{i}", 1e-4, 2e-4, M) for i in range(3)], batch_size=8,
                    device="test", source="hand-made for tests")
TC = PROF.forward_s + PROF.backward_s


def ring_time(n: int) -> float:
    return 2 * (n - 1) * (ALPHA + M / (n * BW))


def period(n: int, inflight: int) -> float:
    net = build("allreduce", PROF, Cluster(workers=n, bandwidth=BW, latency=ALPHA),
                granularity="fine", bucket_bytes=0, overlap=False, inflight=inflight)
    r = simulate(net, steps=30 * n, warmup=6 * n, replications=1, seed=0, parallel=False)
    return n / r.throughput.mean


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("inflight", [1, 2, 3, 5])
def test_step_is_compute_plus_one_ring_per_wave(n, inflight):
    waves = math.ceil(3 / inflight)
    expected = TC + waves * ring_time(n)
    # buckets begun together queue on each NIC: at most every other bucket's bytes each hop
    slack = 2 * (n - 1) * 3 * M / (n * BW)
    got = period(n, inflight)
    assert expected - 1e-12 <= got <= expected + slack, (got, expected, slack)


def test_one_in_flight_is_exactly_the_sum_of_the_rings():
    # one at a time nothing queues: the closed form holds to rounding
    assert period(2, 1) == pytest.approx(TC + 3 * ring_time(2), rel=1e-12)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_bad_inflight_is_refused_with_its_value(bad):
    with pytest.raises(SgdnetError, match="inflight"):
        build("allreduce", PROF, Cluster(workers=2, bandwidth=BW, latency=ALPHA),
              granularity="fine", inflight=bad)
