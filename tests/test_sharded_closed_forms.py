"""Closed forms of the sharded data-parallel nets (``zero``, ``fsdp``; issue #38).

A deterministic cluster of ``n`` hosts, one link rate ``Bw`` each way and one latency ``a``
(flows over per-host up and down links, nothing shared by two transfers of a ring): a
reduce-scatter or all-gather of an ``S``-byte buffer takes ``c(S) = (n-1)(a + S/(n Bw))``
(ring, :func:`sgdnet.workload.reduce_scatter_time`), an all-reduce ``2 c(S)``. The toy model has
``U`` alike wrapped units (transformer blocks ``h.k``), forward ``F`` and backward ``B`` per
unit, and an optimizer step ``u`` (``optimizer_s``), charged ``u / n`` on each GPU's shard.

Derivations (``forward_prefetch``/``backward_prefetch`` as in :mod:`sgdnet.variants.fsdp`):

* FULL_SHARD without prefetch: every collective waits for the compute before it and the
  compute for its all-gather, so ``T = U (F + B) + 3 U c + u / n``.
* FULL_SHARD with ``forward_prefetch=True``, ``backward_prefetch="pre"``, compute-bound
  (``c <= F`` and ``2 c <= B``): only the first forward all-gather, the first backward
  all-gather and the last reduce-scatter are exposed, ``T = U (F + B) + 3 c + u / n``;
  comm-bound (``c >= F``, ``c >= B``, ``U >= 3``): the collective stream is busy but for the
  first forward, ``T = 3 U c + F + u / n``. So ``T`` is ``max(U (F+B) + 3c, 3 U c + F) + u/n``
  at both ends.
* SHARD_GRAD_OP (no backward all-gather, ``c <= B``): ``T = U (F + B) + (U + 1) c + u / n``.
* ZeRO stage 1, one bucket: ``T = U (F + B) + 2 c(US) + u / n``; stage 2 with one bucket per
  block on its own stream (``c <= B``): ``T = U (F + B) + c + U c + u / n`` (the last
  reduce-scatter, then the all-gathers bucket by bucket).
* Coarse nets sum the closed forms of the step's collectives after the compute: equal to the
  fine net (to 1e-9) where that overlaps nothing.
* Gradient accumulation over ``k`` micro-batches adds ``(k - 1) U (F + B)`` and no
  communication.
"""

import math

import pytest

from sgdnet import simulate
from sgdnet.variants import build
from sgdnet.workload import Cluster, ModelProfile, reduce_scatter_time

BW, LAT = 1e9, 1e-5


def toy(U=4, F=0.01, B=0.02, nbytes=4e6, u=0.008, per_unit=2):
    """``U`` blocks of ``per_unit`` layers, ``F`` / ``B`` per block, ``nbytes`` fp32 gradient
    bytes per block, optimizer step ``u``."""
    lays = [{"name": f"h.{k}.l{j}", "forward_s": F / per_unit, "backward_s": B / per_unit,
             "grad_bytes": nbytes / per_unit} for k in range(U) for j in range(per_unit)]
    return ModelProfile("toy", lays, 8, optimizer_s=u)


def step_time(variant, prof, n, granularity="fine", **opts):
    net = build(variant, prof, Cluster(workers=n, bandwidth=BW, latency=LAT),
                granularity=granularity, **opts)
    r = simulate(net, steps=30 * n, warmup=6 * n, replications=1, seed=0)
    assert r.deterministic
    return n / r.throughput.mean  # one worker's step


def c(S, n):
    return reduce_scatter_time(S, n, BW, LAT)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_full_shard_without_prefetch_is_the_sum_of_its_phases(n):
    U, F, B, S, u = 4, 0.01, 0.02, 4e6, 0.008
    t = step_time("fsdp", toy(U, F, B, S, u), n, backward_prefetch="none", dtype="fp32")
    assert t == pytest.approx(U * (F + B) + 3 * U * c(S, n) + u / n, rel=1e-9)


def test_bf16_halves_the_bytes_of_an_fp32_profile():
    U, F, B, S, u, n = 4, 0.01, 0.02, 4e6, 0.0, 4
    t = step_time("fsdp", toy(U, F, B, S, u), n, backward_prefetch="none", dtype="bf16")
    assert t == pytest.approx(U * (F + B) + 3 * U * c(S / 2, n), rel=1e-9)


def test_prefetch_hides_communication_when_compute_bound():
    U, F, B, S, u, n = 6, 0.01, 0.02, 4e6, 0.008, 4
    cc = c(S, n)
    assert cc <= F and 2 * cc <= B  # the regime of the closed form
    t = step_time("fsdp", toy(U, F, B, S, u), n, forward_prefetch=True, backward_prefetch="pre",
                  dtype="fp32")
    assert t == pytest.approx(U * (F + B) + 3 * cc + u / n, rel=1e-9)
    slow = step_time("fsdp", toy(U, F, B, S, u), n, backward_prefetch="none", dtype="fp32")
    assert slow - t == pytest.approx(3 * (U - 1) * cc, rel=1e-9)


def test_prefetch_leaves_the_stream_busy_when_comm_bound():
    U, F, B, S, u, n = 5, 0.002, 0.003, 4e7, 0.008, 4
    cc = c(S, n)
    assert cc >= F and cc >= B
    t = step_time("fsdp", toy(U, F, B, S, u), n, forward_prefetch=True, backward_prefetch="pre",
                  dtype="fp32")
    assert t == pytest.approx(3 * U * cc + F + u / n, rel=1e-9)


def test_zero1_one_bucket_closed_form_and_stage2_overlaps():
    U, F, B, S, u, n = 4, 0.01, 0.02, 4e6, 0.008, 4
    prof = toy(U, F, B, S, u)
    t1 = step_time("zero", prof, n, stage=1, dtype="fp32", bucket_bytes=math.inf)
    assert t1 == pytest.approx(U * (F + B) + 2 * c(U * S, n) + u / n, rel=1e-9)
    # stage 2 with per-block buckets on their own stream: all but the last bucket's
    # reduce-scatter hide behind the backward (each takes c(S) <= B / 2 here)
    t2 = step_time("zero", prof, n, stage=2, dtype="fp32", bucket_bytes=S / 2 * 2,
                   overlap_comm=True)
    assert t2 == pytest.approx(U * (F + B) + c(S, n) + c(S, n) * U + u / n, rel=1e-9)


def test_shard_grad_op_keeps_parameters_for_backward():
    """No backward all-gathers: each reduce-scatter (``c <= B``) hides behind the next unit's
    backward but the last, ``T = U (F + B) + (U + 1) c + u / n``; the coarse net, which
    overlaps nothing, takes ``U (F + B) + 2 U c + u / n``."""
    U, F, B, S, u, n = 4, 0.01, 0.02, 4e6, 0.008, 4
    prof = toy(U, F, B, S, u)
    fine = step_time("fsdp", prof, n, sharding="shard_grad_op", dtype="fp32")
    assert fine == pytest.approx(U * (F + B) + (U + 1) * c(S, n) + u / n, rel=1e-9)
    coarse = step_time("fsdp", prof, n, "coarse", sharding="shard_grad_op", dtype="fp32")
    assert coarse == pytest.approx(U * (F + B) + 2 * U * c(S, n) + u / n, rel=1e-9)


def test_accumulation_adds_compute_only():
    U, F, B, S, u, n = 4, 0.01, 0.02, 4e6, 0.008, 4
    prof = toy(U, F, B, S, u)
    t1 = step_time("fsdp", prof, n, backward_prefetch="none", dtype="fp32")
    t3 = step_time("fsdp", prof, n, backward_prefetch="none", dtype="fp32", accumulate=3)
    assert t3 - t1 == pytest.approx(2 * U * (F + B), rel=1e-9)


@pytest.mark.parametrize("variant,opts", [
    ("fsdp", {"backward_prefetch": "none"}),
    ("fsdp", {"sharding": "no_shard"}),
    ("zero", {"stage": 1, "bucket_bytes": math.inf}),
])
def test_coarse_agrees_with_fine_when_nothing_overlaps(variant, opts):
    """The coarse net sums the closed forms of the fine net's collectives: equal to 1e-9 where
    the fine net overlaps nothing (NO_SHARD: its last unit's all-reduce only follows the
    backward, so the coarse one, all after the backward, is slower by the hidden ones)."""
    U, F, B, S, u, n = 4, 0.01, 0.02, 4e6, 0.008, 4
    prof = toy(U, F, B, S, u)
    fine = step_time(variant, prof, n, dtype="fp32", **opts)
    coarse = step_time(variant, prof, n, "coarse", dtype="fp32", **opts)
    if opts.get("sharding") == "no_shard":
        assert coarse == pytest.approx(U * (F + B) + 2 * U * c(S, n) + u, rel=1e-9)
        assert fine < coarse
    else:
        assert coarse == pytest.approx(fine, rel=1e-9)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_backward_post_closed_form(n):
    """FULL_SHARD, ``backward_prefetch="post"`` (BACKWARD_POST: unit ``k-1``'s all-gather is
    issued when unit ``k``'s backward ends, before unit ``k``'s reduce-scatter), ``U`` equal
    units, one collective ``c = c(S)``, ``c <= B``.

    Derivation. Forward without prefetch: each all-gather waits for the forward before it,
    ``U (c + F)``. Backward: the last unit's all-gather is issued at the end of the forward,
    ``c``, then its backward ``B``. When unit ``k``'s backward ends, the stream runs ``ag(k-1)``
    then ``rs(k)``; unit ``k-1``'s backward starts after ``ag(k-1)``, so each unit costs
    ``c + B``, and ``rs(k)`` (``c``) ends ``2c <= c + B`` after that event, before the next
    all-gather is issued: the stream is free and every reduce-scatter but the last is hidden.
    After the first unit's backward, its reduce-scatter ``c``, then the optimizer ``u / n``,
    which the next step's first all-gather waits for:
    ``T = U (c + F) + U (c + B) + c + u / n = U (F + B) + (2U + 1) c + u / n``.
    With ``forward_prefetch=True`` (and ``c <= F``: two all-gathers in flight, the next issued
    when a forward ends) the forward exposes its first all-gather only, ``c + U F``, so
    ``T = U (F + B) + (U + 2) c + u / n``. Against ``"none"`` (``3 U c``) BACKWARD_POST hides
    ``U - 1`` reduce-scatters."""
    U, F, B, S, u = 4, 0.01, 0.02, 4e6, 0.008
    cc = c(S, n)
    assert cc <= F and cc <= B  # the regime of the closed forms
    prof = toy(U, F, B, S, u)
    t = step_time("fsdp", prof, n, backward_prefetch="post", dtype="fp32")
    assert t == pytest.approx(U * (F + B) + (2 * U + 1) * cc + u / n, rel=1e-9)
    t = step_time("fsdp", prof, n, backward_prefetch="post", forward_prefetch=True, dtype="fp32")
    assert t == pytest.approx(U * (F + B) + (U + 2) * cc + u / n, rel=1e-9)
