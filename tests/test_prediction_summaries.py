"""The bulk per-worker / per-resource summaries of a prediction (one pass over the records)
give the values of the per-worker computation they replaced (kept here as the reference)."""

from __future__ import annotations

import numpy as np
import pytest

from sgdnet import Cluster, predict


def _old_percentiles(x: np.ndarray) -> dict:
    if x.size < 2:
        return {}
    p50, p95, p99 = np.quantile(x, [0.5, 0.95, 0.99])
    return {"mean": float(x.mean()), "p50": float(p50), "p95": float(p95), "p99": float(p99)}


def _old_summaries(p) -> tuple[dict, np.ndarray, dict]:
    """The per-worker loop of ``Prediction.__init__`` and ``Result.utilizations`` before the
    bulk form: one ``throughput_by`` and one ``step_times(w)`` scan per worker, one
    ``utilization`` per resource."""
    result, model = p.result, p.model
    bs = list(p.meta.get("batch_sizes") or [model.batch_size] * p.workers)
    by = result.throughput_by("worker")
    per = {}
    samples = np.zeros(result.replications)
    for w in sorted(by):
        est = by[w]
        b = int(bs[w])
        s = est.samples * b
        samples = samples + np.nan_to_num(s)
        st = result.step_times(w) if result.samples else np.zeros(0)
        per[int(w)] = (est.samples, s, b, _old_percentiles(st))
    util = {n: result.utilization(n) for n in result.resource_names}
    return per, samples, util


CASES = [
    ("allreduce", "coarse", {}, {}),
    ("allreduce", "fine", {"max_layers": 6}, {}),
    ("sync-ps", "coarse", {}, {"ps_shards": 2}),
    ("async-ps", "coarse", {}, {"ps_shards": 2}),  # workers make different numbers of steps
    ("ssp", "fine", {"max_layers": 4}, {}),
]


@pytest.mark.parametrize("variant,granularity,opts,ckw", CASES)
@pytest.mark.parametrize("samples", [True, False])
def test_bulk_summaries_equal_the_per_worker_ones(variant, granularity, opts, ckw, samples):
    cl = Cluster(workers=4, compute_cv=0.2, speeds=[1.0, 1.0, 0.6, 1.3], **ckw)
    p = predict(variant, "resnet18", cl, granularity=granularity, steps=15, replications=3,
                seed=7, parallel=False, samples=samples, **opts)
    per, samples_sum, util = _old_summaries(p)
    assert sorted(p.per_worker) == sorted(per)
    for w, (steps, smp, b, pct) in per.items():
        f = p.per_worker[w]
        np.testing.assert_array_equal(f.steps_per_s.samples, steps)
        np.testing.assert_array_equal(f.samples_per_s.samples, smp)
        assert f.batch_size == b
        assert f.step_time_s == pct
    np.testing.assert_array_equal(p.samples_per_s.samples, samples_sum)
    assert list(p.utilization) == list(util)
    for name, est in util.items():
        np.testing.assert_array_equal(p.utilization[name].samples, est.samples)
        assert p.utilization[name].label == est.label


def test_unequal_step_counts_take_the_per_worker_path():
    cl = Cluster(workers=3, speeds=[1.0, 0.5, 0.25], ps_shards=1)
    p = predict("async-ps", "resnet18", cl, granularity="coarse", steps=12, replications=1,
                seed=1, parallel=False)
    counts = {w: f.steps_per_s.mean for w, f in p.per_worker.items()}
    assert len(set(counts.values())) > 1  # the case the matrix form cannot take
    for w, f in p.per_worker.items():
        assert f.step_time_s == _old_percentiles(p.result.step_times(w))


def test_step_times_by_worker_matches_step_times():
    cl = Cluster(workers=3, compute_cv=0.3)
    p = predict("allreduce", "resnet18", cl, granularity="coarse", steps=10, replications=2,
                seed=3, parallel=False)
    got = p.result.step_times_by_worker()
    assert sorted(got) == [0, 1, 2]
    for w, x in got.items():
        np.testing.assert_array_equal(x, p.result.step_times(w))
