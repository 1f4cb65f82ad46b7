"""``accumulate=k`` (gradient accumulation, issue #36): a step is k micro-batches and one exchange.

Closed forms on deterministic clusters of ``n = 2`` workers at ``W = 1 GB/s``, no latency, with
a profile of two layers (forward ``f``, backward ``b``, gradient bytes ``M``):
``L0 = (10 ms, 20 ms, 1 MB)``, ``L1 = (5 ms, 15 ms, 4 MB)``, ``F + B = 50 ms``:

- fine ``allreduce`` with one bucket per layer: layer 1's all-reduce (4 ms) hides behind layer
  0's backward (20 ms), layer 0's (``M0 / W`` = 1 ms: the ring's ``2 (n-1)/n M / W``) does not:
  ``T_k = (k - 1)(F + B) + t_1`` with ``t_1 = F + B + M0 / W``;
- coarse ``allreduce`` (nothing overlaps): ``T_k = k (F + B) + M / W``;
- ``sync-ps`` on one dedicated shard of bandwidth ``W``: coarse ``T_k = k (F + B) + 2 n M / W``
  (the n pushes into and pulls out of the shard's NIC), fine ``T_k = k (F + B) + 2 n M0 / W``
  (layer 1's push and pull hide behind layer 0's backward and forward);
- every variant, compute-bound: ``T_k - T_1 = (k - 1)(F + B)``;
- samples per second ``n k B / T_k``; the micro-batches' noise adds up: the step's compute
  variance is ``k`` times a micro-batch's.
"""

from __future__ import annotations

import math

import pytest

from sgdnet import Cluster, Layer, ModelProfile, predict, variants
from sgdnet.errors import ProfileError, VariantError
from sgdnet.variants.layers import compute_cv

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 1e6), Layer("b", 0.005, 0.015, 4e6)],
                    batch_size=32)
FB, M0, M, W, N = 0.050, 1e6, 5e6, 1e9, 2
CL = Cluster(workers=N, bandwidth=W, ps_bandwidth=W, latency=0.0)


def step(variant: str, k: int, granularity: str, **opts) -> tuple[float, float]:
    """(step time, samples/s) of a deterministic run."""
    p = predict(variant, PROF, CL, granularity=granularity, steps=40, replications=1, seed=0,
                accumulate=k, **opts)
    return 1.0 / p.iterations_per_s.mean, p.samples_per_s.mean


@pytest.mark.parametrize("k", [1, 2, 4])
def test_fine_allreduce_hides_all_but_the_last_bucket(k):
    T, samples = step("allreduce", k, "fine", bucket_bytes=0)
    t1 = FB + M0 / W
    assert T == pytest.approx((k - 1) * FB + t1, rel=1e-9)
    assert samples == pytest.approx(N * k * 32 / T, rel=1e-9)


@pytest.mark.parametrize("k", [1, 3])
def test_coarse_allreduce_adds_the_whole_exchange_once(k):
    T, samples = step("allreduce", k, "coarse")
    assert T == pytest.approx(k * FB + M / W, rel=1e-9)
    assert samples == pytest.approx(N * k * 32 / T, rel=1e-9)


@pytest.mark.parametrize("granularity, exposed", [("coarse", M), ("fine", M0)])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_sync_ps_pushes_and_pulls_once_per_k_micro_batches(granularity, exposed, k):
    T, _ = step("sync-ps", k, granularity)
    assert T == pytest.approx(k * FB + 2 * N * exposed / W, rel=1e-9)


VARIANTS = [("sync-ps", {}), ("async-ps", {}), ("ssp", {}), ("dssp", {}), ("local-sgd", {}),
            ("cocod", {}), ("pipe-sgd", {}), ("backup", {"backups": 0}),
            ("allreduce", {"bucket_bytes": 0})]


@pytest.mark.parametrize("granularity", ["fine", "coarse"])
@pytest.mark.parametrize("name, opts", VARIANTS)
def test_every_variant_adds_k_minus_1_micro_batches_per_step(name, opts, granularity):
    t1, s1 = step(name, 1, granularity, **opts)
    t3, s3 = step(name, 3, granularity, **opts)
    assert t3 - t1 == pytest.approx(2 * FB, rel=1e-9)
    assert s3 / s1 == pytest.approx(3 * t1 / t3, rel=1e-9)


def test_the_profile_transformation():
    """Micro-batch 1's forward and the last backward keep their layer times; the other
    micro-batches (with their loss) land after the last forward; zero_grad and the optimizer
    step stay once per step; the batch is k B."""
    p = ModelProfile("p", [Layer("a", 0.010, 0.020, 1e6), Layer("b", 0.005, 0.015, 4e6)],
                     batch_size=8, zero_grad_s=0.001, loss_s=0.002, optimizer_s=0.003)
    a = p.with_accumulation(4)
    assert a.batch_size == 32
    assert [la.forward_s for la in a.layers] == [0.010, pytest.approx(0.005 + 3 * 0.052)]
    assert [la.backward_s for la in a.layers] == [0.020, 0.015]
    assert a.step_s == pytest.approx(4 * (0.050 + 0.002) + 0.001 + 0.003)
    folded = a.with_step_costs_folded()
    assert folded.compute_s == pytest.approx(a.step_s)
    assert p.with_accumulation(1) is p


@pytest.mark.parametrize("default_cv, layer_cv", [(0.1, None), (0.0, 0.2), (0.05, 0.3)])
def test_the_micro_batches_noise_adds_up(default_cv, layer_cv):
    """A step's compute variance is k times a micro-batch's: sum_l c_l^2 (f_l^2 + b_l^2)."""
    p = ModelProfile("p", [Layer("a", 0.010, 0.020, 1e6, cv=layer_cv),
                           Layer("b", 0.005, 0.015, 4e6)], batch_size=8)
    c0 = layer_cv if layer_cv is not None else default_cv
    var1 = c0**2 * (0.010**2 + 0.020**2) + default_cv**2 * (0.005**2 + 0.015**2)
    for k in (2, 5):
        a = p.with_accumulation(k, default_cv)
        sd = compute_cv(a, default_cv) * a.compute_s
        assert sd == pytest.approx(math.sqrt(k * var1), rel=1e-12)
        assert a.compute_s == pytest.approx(k * p.compute_s)


def test_coarse_compute_phase_carries_k_micro_batches():
    cl = CL.replace(compute_cv=0.1)
    net = variants.build("allreduce", PROF, cl, granularity="coarse", accumulate=4)
    d = net.transitions["w0.compute"].duration
    var1 = 0.1**2 * (0.010**2 + 0.020**2 + 0.005**2 + 0.015**2)
    assert d.mean == pytest.approx(4 * FB)
    assert d.var == pytest.approx(4 * var1, rel=1e-9)


def test_one_micro_batch_is_the_plain_net_and_meta_counts_the_samples():
    for g in ("fine", "coarse"):
        plain = variants.build("sync-ps", PROF, CL, granularity=g)
        one = variants.build("sync-ps", PROF, CL, granularity=g, accumulate=1)
        assert list(one.transitions) == list(plain.transitions)
        assert [t.duration for t in one.transitions.values()] == \
            [t.duration for t in plain.transitions.values()]
        assert "batch_sizes" not in one.meta and one.meta["options"]["accumulate"] == 1
    net = variants.build("sync-ps", PROF, CL, accumulate=3)
    assert net.meta["batch_sizes"] == [96, 96] and net.meta["batch_size"] == 96
    bal = variants.build("sync-ps", PROF, CL.replace(speeds=[1.0, 0.5]), accumulate=3,
                         balance="batch")
    assert sum(bal.meta["batch_sizes"]) == N * 96


def test_every_variant_has_the_option():
    for name in variants.names():
        assert "accumulate" in variants.get(name).option_names(), name


@pytest.mark.parametrize("value, match", [(0, "accumulate"), (-2, "accumulate"),
                                          ("x", "accumulate"), (2.5, "accumulate")])
def test_bad_accumulate_is_refused(value, match):
    with pytest.raises(VariantError, match=match):
        variants.build("allreduce", PROF, CL, accumulate=value)


def test_coarse_plus_refuses_accumulation():
    with pytest.raises(VariantError, match="coarse\\+.*accumulate=2"):
        variants.build("allreduce", PROF, CL, granularity="coarse+", accumulate=2)
    with pytest.raises(ProfileError, match="k=0"):
        PROF.with_accumulation(0)
