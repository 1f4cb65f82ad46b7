"""Issue #42: ``sgdnet choose``: the Pareto front of time and cost, budget and deadline."""

from __future__ import annotations

import pytest

from sgdnet.choose import _rank, choose, pareto_front
from sgdnet.errors import ProfileError, VariantError


def test_pareto_front_of_a_hand_made_table():
    rows = [{"time_h": 10, "cost": 100},   # 0: on the front (fastest)
            {"time_h": 12, "cost": 100},   # 1: dominated by 0 (slower, same cost)
            {"time_h": 20, "cost": 60},    # 2: front
            {"time_h": 25, "cost": 70},    # 3: dominated by 2
            {"time_h": 40, "cost": 30},    # 4: front (cheapest)
            {"time_h": 40, "cost": 30},    # 5: a tie with 4: neither dominates the other
            {"time_h": None, "cost": 1}]   # 6: unknown time: no part
    assert pareto_front(rows) == [0, 2, 4, 5]


def test_budget_and_deadline_drop_before_the_front():
    rows = [{"instance": "a", "nodes": n, "variant": "v", "samples_per_s_mean": 1.0,
             "time_to_train_h_mean": t, "cost_to_train_mean": c, "cost_per_m_samples_mean": 1}
            for n, (t, c) in enumerate([(10, 100), (20, 60), (40, 30)])]
    ch = _rank(rows, 1e6, budget=80, deadline=30, model="m", granularity="coarse")
    assert [r["within"] for r in ch.rows] == [False, True, False]
    assert ch.front == [1] and ch.dropped == {"budget": 1, "deadline": 1}


def _runner(variant, model, cluster, *, instance, nodes, train_samples, **kw):
    # a node of p5 is 3x a p4d node; 2 nodes are 2**0.9 = 1.866x one
    rate = {"p4d.24xlarge": 1000.0, "p5.48xlarge": 3000.0}[instance] * nodes ** 0.9
    price = {"p4d.24xlarge": 32.7726, "p5.48xlarge": 98.32}[instance]
    hours = train_samples / rate / 3600
    return {"samples_per_s_mean": rate, "cost_per_hour": price * nodes,
            "time_to_train_h_mean": hours, "cost_to_train_mean": price * nodes * hours,
            "cost_per_m_samples_mean": price * nodes * 1e6 / 3600 / rate}


def test_choose_sweeps_instances_nodes_and_variants():
    ch = choose("bert_large", instances="p4d.24xlarge,p5.48xlarge", nodes=[1, 2],
                variants=["allreduce", "sync-ps"], train_samples=3.6e7, runner=_runner)
    assert len(ch.rows) == 2 * 2 * 2
    # $/sample: p4d x1 32.7726/1000 = 0.0327726 < p5 x1 98.32/3000 = 0.0327733 (slower, a
    # hair cheaper: front); p5 x1 and x2 (fastest): front; p4d x2 (1,866/s for 0.0351/sample)
    # is slower and dearer than p5 x1: dominated. The two variants tie, so both are kept.
    front = [(ch.rows[i]["instance"], ch.rows[i]["nodes"]) for i in ch.front]
    assert sorted(set(front)) == [("p4d.24xlarge", 1), ("p5.48xlarge", 1), ("p5.48xlarge", 2)]
    assert len(front) == 6 and all(ch.rows[i]["within"] for i in ch.front)


def test_choose_refuses_what_it_cannot_compare():
    with pytest.raises(VariantError, match="training length"):
        choose("bert_large", budget=100, runner=_runner)
    with pytest.raises(ProfileError, match="not a built-in"):
        choose("resnet50", instances="p4d.24xlarge", runner=_runner)
