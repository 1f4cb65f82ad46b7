"""Stragglers under FSDP FULL_SHARD and DDP (issue #38; the study: scripts/straggler_fsdp.py).

A cluster of ``n`` hosts, one link rate ``BW`` each way, latency ``LAT`` (flows on per-host links):
a ring reduce-scatter or all-gather of ``S`` bytes takes ``c(S) = (n-1)(LAT + S/(n BW))``, an
all-reduce ``2 c(S)`` (:func:`sgdnet.workload.reduce_scatter_time`,
:func:`sgdnet.workload.ring_allreduce_time`). The toy model has ``U`` alike blocks, forward ``F``
and backward ``B`` per block, ``S`` gradient bytes per block and an optimizer step ``u``.

Derivations, worker 0 slower by ``f`` (``Cluster.speeds[0] = 1/f``: its compute times ``x f``),
deterministic:

* FULL_SHARD without prefetch (``backward_prefetch="none"``): every collective is a ring through
  every GPU, so it starts when the slowest GPU issues it, i.e. when worker 0 ends the compute
  before it; the others wait for it at every unit. The step is the hand sum of
  ``tests/test_sharded_closed_forms.py`` with worker 0's compute times ``f``:
  ``T = f (U (F + B) + u / n) + 3 U c(S)``.
* DDP without overlap, one bucket: the all-reduce starts when worker 0 ends its backward:
  ``T = f (U (F + B) + u) + 2 c(U S)``.

Per-op noise (every compute operation Gamma, CV ``v``; communication tiny so both are
compute-bound): DDP synchronises its GPUs once per step (the next forward waits for the last
bucket's all-reduce), FULL_SHARD at every unit's all-gather, so FSDP pays the maximum over the GPUs
of many more partial sums: its relative slowdown must exceed DDP's, beyond both CIs.
"""

import math

import pytest
from test_sharded_closed_forms import BW, LAT, toy  # the same toy profile and links

from sgdnet import simulate
from sgdnet.variants import build
from sgdnet.workload import Cluster, reduce_scatter_time


def cluster(n, f=1.0, cv=0.0):
    speeds = None if f == 1.0 else [1.0 / f] + [1.0] * (n - 1)
    return Cluster(workers=n, bandwidth=BW, latency=LAT, speeds=speeds, compute_cv=cv)


def step_time(net, n):
    r = simulate(net, steps=30 * n, warmup=6 * n, replications=1, seed=0, parallel=False)
    assert r.deterministic
    return n / r.throughput.mean  # one worker's step


def c(S, n):
    return reduce_scatter_time(S, n, BW, LAT)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("f", [1.1, 1.5])
def test_full_shard_waits_for_the_slow_gpu_at_every_unit(n, f):
    U, F, B, S, u = 4, 0.01, 0.02, 4e6, 0.008
    net = build("fsdp", toy(U, F, B, S, u), cluster(n, f), backward_prefetch="none",
                dtype="fp32")
    t = step_time(net, n)
    assert t == pytest.approx(f * (U * (F + B) + u / n) + 3 * U * c(S, n), rel=1e-9)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("f", [1.1, 1.5])
def test_ddp_waits_for_the_slow_gpu_once_per_step(n, f):
    U, F, B, S, u = 4, 0.01, 0.02, 4e6, 0.008
    net = build("allreduce", toy(U, F, B, S, u), cluster(n, f), bucket_bytes=math.inf,
                overlap=False)
    t = step_time(net, n)
    assert t == pytest.approx(f * (U * (F + B) + u) + 2 * c(U * S, n), rel=1e-9)


@pytest.mark.parametrize("f", [1.1, 1.5])
def test_compute_bound_slow_gpu_costs_both_the_same(f):
    """Compute-bound (``c <= F``, ``2 c <= B``) FULL_SHARD with ``forward_prefetch=True`` and
    BACKWARD_PRE exposes the first forward and backward all-gathers and the last reduce-scatter
    (tests/test_sharded_closed_forms.py), the slow GPU's compute stretching by ``f`` around
    them: ``T = f (U (F + B) + u / n) + 3 c``. DDP with overlapped 25 MiB buckets: its step
    grows by ``(f - 1)`` times the slow GPU's compute too, ``(f - 1) (U (F + B) + u)``: a
    deterministic straggler costs both exactly its extra compute, the max-plus bound."""
    U, F, B, S, u, n = 6, 0.01, 0.02, 4e6, 0.008, 4
    cc = c(S, n)
    assert cc <= F and 2 * cc <= B
    fs = build("fsdp", toy(U, F, B, S, u), cluster(n, f), forward_prefetch=True, dtype="fp32")
    assert step_time(fs, n) == pytest.approx(f * (U * (F + B) + u / n) + 3 * cc, rel=1e-9)
    dd = [step_time(build("allreduce", toy(U, F, B, S, u), cluster(n, g),
                          bucket_bytes=25 * 2**20, overlap=True), n) for g in (1.0, f)]
    assert dd[1] - dd[0] == pytest.approx((f - 1) * (U * (F + B) + u), rel=1e-9)


def _slowdown(variant, n, cv, seed, **opts):
    """``1 - X / X_0`` of a noisy run against the deterministic one, with the CI bounds."""
    prof = toy(U=12, F=0.01, B=0.02, nbytes=1e4, u=0.0)  # c(S) ~ 1e-5 s: compute-bound
    base = simulate(build(variant, prof, cluster(n), **opts), steps=20, warmup=4,
                    replications=1, seed=0, parallel=False).throughput.mean
    est = simulate(build(variant, prof, cluster(n, cv=cv), **opts), steps=60, warmup=6,
                   replications=8, seed=seed, parallel=False).throughput
    lo, hi = est.ci()
    return 1 - est.mean / base, 1 - hi / base, 1 - lo / base


@pytest.mark.parametrize("n", [4])
def test_per_op_noise_costs_full_shard_more_than_ddp(n):
    cv = 0.1
    fs, fs_lo, _ = _slowdown("fsdp", n, cv, 38, dtype="fp32", forward_prefetch=True)
    dd, _, dd_hi = _slowdown("allreduce", n, cv, 38, bucket_bytes=25 * 2**20, overlap=True)
    assert fs_lo > dd_hi, (fs, dd)
    # Nor does FSDP lose more than a net that waits for the slowest GPU at every operation:
    # E[max of n iid] - mean <= sigma (n - 1) / sqrt(2 n - 1) for any law (Gumbel 1954,
    # Hartley & David 1954), so T' <= T (1 + k v) and 1 - T / T' <= k v / (1 + k v).
    k = (n - 1) / math.sqrt(2 * n - 1)
    assert 0 < dd < fs < k * cv / (1 + k * cv)
