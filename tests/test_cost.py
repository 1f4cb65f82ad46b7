"""Issue #42: the cost formulas of sgdnet.workload.cost on hand cases, and the cost columns a
priced prediction carries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgdnet.errors import ClusterError
from sgdnet.workload import Cluster
from sgdnet.workload.cost import (
    cluster_nodes,
    cost_per_hour,
    cost_per_million,
    cost_samples,
    time_to_train_s,
    tokens_per_sample,
    training_samples,
)


def test_cost_per_million_samples_is_price_times_a_million_over_3600_rate():
    # $32.77/h for 2 instances = $65.54/h; at 1,000 samples/s a million samples take 1,000 s:
    # 65.54 * 1e6 / (3600 * 1000) = 18.2055... dollars
    c = cost_per_hour(32.77, 2)
    assert c == pytest.approx(65.54)
    assert cost_per_million(c, 1000.0) == pytest.approx(65.54 * 1000 / 3600)
    assert cost_per_million(36.0, 10.0) == pytest.approx(1000.0)  # 36 $/h = 1 cent/s; 1e5 s
    np.testing.assert_allclose(cost_per_million(3.6, [1.0, 2.0]), [1000.0, 500.0])
    assert math.isinf(cost_per_million(3.6, 0.0))


def test_time_and_cost_to_train_90_epochs_of_imagenet():
    train = training_samples(epochs=90, dataset_size=1_281_167)
    assert train == 90 * 1_281_167
    # at 10,000 samples/s: 11,530.503 s = 3.2029 h; at 4 x $25/h = $100/h: $320.29
    assert time_to_train_s(train, 10_000.0) == pytest.approx(11_530.503)
    rates = np.array([9_000.0, 10_000.0, 11_000.0])
    c = cost_samples(rates, 4, 25.0, train_samples=train)
    assert c["cost_per_hour"] == 100.0 and c["nodes"] == 4
    np.testing.assert_allclose(c["time_to_train_h"], train / rates / 3600)
    np.testing.assert_allclose(c["cost_to_train"], 100.0 * train / rates / 3600)
    assert c["cost_to_train"][1] == pytest.approx(320.29175)
    np.testing.assert_allclose(c["cost_per_m_samples"], 100.0 * 1e6 / (3600 * rates))


def test_unknown_price_leaves_the_costs_unknown_but_time_known():
    c = cost_samples(np.array([100.0, 100.0]), 1, None, train_samples=3.6e5)
    assert c["cost_per_hour"] is None and c["cost_per_m_samples"] is None
    assert c["cost_to_train"] is None
    np.testing.assert_allclose(c["time_to_train_h"], [1.0, 1.0])


def test_tokens_per_sample_from_the_sequence_length():
    from sgdnet import models

    assert tokens_per_sample(models.load("gpt2_medium")) == 1024
    assert tokens_per_sample(models.load("bert_large")) == 128
    assert tokens_per_sample(models.load("resnet50")) is None
    c = cost_samples(np.array([10.0, 10.0]), 1, 3.6, tokens=1024)
    np.testing.assert_allclose(c["cost_per_m_tokens"], 3.6 * 1e6 / (3600 * 10 * 1024))


def test_nodes_of_a_cluster_and_bad_lengths():
    assert cluster_nodes(Cluster(workers=3)) == 3
    assert cluster_nodes(Cluster(workers=16, topology={"gpus_per_node": 8})) == 2
    with pytest.raises(ClusterError, match="not both"):
        training_samples(samples=10, epochs=1, dataset_size=10)
    with pytest.raises(ClusterError, match="go together"):
        training_samples(epochs=3)
    with pytest.raises(ClusterError, match="positive"):
        cost_per_hour(-1.0, 2)


def test_a_priced_prediction_reports_its_cost():
    import sgdnet
    from sgdnet.prediction import summarize

    p = sgdnet.predict("allreduce", "resnet50", Cluster(workers=2, compute_cv=0.1),
                       granularity="coarse", steps=30, replications=3, seed=1,
                       price_per_hour=3.0, train_samples=1e6)
    row = summarize(p)
    rates = p.samples_per_s.samples
    assert row["nodes"] == 2 and row["cost_per_hour"] == 6.0
    per_m = 6.0 * 1e6 / (3600 * rates)  # one per replication
    assert row["cost_per_m_samples_mean"] == pytest.approx(per_m.mean())
    # the CI is the replications' Student-t interval: t(0.975, 2) = 4.3027
    half = 4.302653 * per_m.std(ddof=1) / np.sqrt(3)
    assert row["cost_per_m_samples_hi"] - row["cost_per_m_samples_mean"] == pytest.approx(half)
    assert row["time_to_train_h_mean"] == pytest.approx(np.mean(1e6 / rates / 3600))
    plain = summarize(sgdnet.predict("allreduce", "resnet50", Cluster(workers=2),
                                     granularity="coarse", steps=30, replications=2, seed=1))
    assert "cost_per_hour" not in plain  # no price, no instance, no length: no cost columns
