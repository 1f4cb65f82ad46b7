"""``scripts/validate_real.py``: its alpha/B fit, its gloo launcher and the DDP buckets it
assumes. Nothing here depends on timing: the fit is checked on synthetic timings, the launcher
on the value an all-reduce must produce, the buckets on DDP's own report."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover - builds without distributed
    pytest.skip("torch.distributed is not available", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import validate_real as vr  # noqa: E402

from sgdnet.workload import ring_allreduce_time  # noqa: E402


@pytest.mark.parametrize("n", [2, 3, 8])
def test_fit_recovers_alpha_and_bandwidth_of_sgdnets_ring_formula(n):
    alpha, bw = 75e-6, 1.3e9
    sizes = [4e3, 64e3, 1e6, 4e6, 16e6]
    times = [ring_allreduce_time(s, n, bw, alpha) for s in sizes]
    a, b, resid = vr.fit_alpha_beta(sizes, times, n)
    assert a == pytest.approx(alpha, rel=1e-9)
    assert b == pytest.approx(bw, rel=1e-9)
    assert resid < 1e-9


def test_fit_with_noise_is_close_and_reports_its_residual():
    alpha, bw = 50e-6, 2e9
    sizes = [4e3, 64e3, 1e6, 4e6, 16e6]
    wobble = [1.05, 0.95, 1.04, 0.97, 1.02]
    times = [w * ring_allreduce_time(s, 2, bw, alpha) for s, w in zip(sizes, wobble)]
    a, b, resid = vr.fit_alpha_beta(sizes, times, 2)
    assert a == pytest.approx(alpha, rel=0.15)
    assert b == pytest.approx(bw, rel=0.1)
    assert 0.01 < resid < 0.1


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="at least two distinct sizes"):
        vr.fit_alpha_beta([1e6, 1e6], [1e-3, 1e-3])
    with pytest.raises(ValueError, match="> 0"):
        vr.fit_alpha_beta([1e3, 1e6], [1e-3, 0.0])
    with pytest.raises(ValueError, match="does not grow"):
        vr.fit_alpha_beta([1e3, 1e6], [2e-3, 1e-3])
    with pytest.raises(ValueError, match="at least 2 ranks"):
        vr.fit_alpha_beta([1e3, 1e6], [1e-3, 2e-3], n=1)


def test_launcher_sums_over_two_ranks_and_ddp_buckets_match_sgdnets():
    """The two-process gloo group really all-reduces, and the buckets sgdnet is given for the
    DDP runs (``bucket_bytes`` = DDP's ``bucket_cap_mb``) are the ones DDP builds."""
    from sgdnet.profiling import profile_module

    got = vr.run_workers(2, vr.check_group, timeout=120)
    assert [g["sum"] for g in got] == [3.0, 3.0]
    model, x, y = vr.build_model("mlp", batch=4)
    prof = profile_module(model, (x,), repeats=1, warmup=0)
    for cap, ddp_sizes in got[0]["buckets"].items():
        ours = [math.fsum(prof.layers[i].grad_bytes for i in b)
                for b in prof.buckets(cap * vr.MIB)]
        assert ours == ddp_sizes, (cap, ours, ddp_sizes)
    assert len(got[0]["buckets"][1]) == 3 and len(got[0]["buckets"][25]) == 1


def test_launcher_reports_a_failing_rank_instead_of_hanging():
    with pytest.raises(RuntimeError, match="unknown model 'nope'"):
        vr.run_workers(1, vr.train_all, (["nope"], ("local",), 1, 0, 1, ()), timeout=120)
