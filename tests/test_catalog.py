"""Issue #42: the instance catalog (sgdnet/catalog/*.yaml) loads, every figure carries a source,
and ``--instance NAME --nodes N`` / ``cluster_from_instance`` give its cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sgdnet.errors import UnknownNameError
from sgdnet.workload.compute import DEVICES
from sgdnet.workload.instances import (
    CATALOG_DIR,
    cluster_from_instance,
    get_instance,
    instance_names,
    load_instance_file,
    read_cluster_file,
)
from sgdnet.workload.transports import TRANSPORTS

#: what the issue asks the catalog to hold
WANTED = {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "a2-highgpu-8g", "a2-ultragpu-8g",
          "a3-highgpu-8g", "a3-megagpu-8g", "ND96asr_v4", "ND96amsr_A100_v4", "ND96isr_H100_v5",
          "g5.48xlarge"}


def _leaves(d, prefix=""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _leaves(v, key + ".")
        else:
            yield key, v


def test_the_catalog_has_the_instances_the_issue_names():
    assert WANTED <= set(instance_names())


@pytest.mark.parametrize("name", sorted(WANTED))
def test_every_file_loads_and_every_figure_has_a_source(name):
    inst = get_instance(name)
    raw = yaml.safe_load((CATALOG_DIR / f"{name}.yaml").read_text())
    sources = raw["sources"]
    figures = [k for k, _ in _leaves({"link": raw["link"], "topology": raw["topology"]})]
    figures += ["instance.device", "instance.transport"]
    if "price_per_hour" in raw:
        figures.append("price_per_hour")
        price = raw["instance"]["price"]
        assert price["url"].startswith("https://") and price["read"] and price["region"]
        assert inst.price_per_hour == raw["price_per_hour"] > 0
    else:  # no price found: said so, left out
        assert inst.price_per_hour is None and raw["instance"]["price"] is None
        assert "not found" in (CATALOG_DIR / f"{name}.yaml").read_text()
    missing = [f for f in figures if not str(sources.get(f, "")).strip()]
    assert not missing, f"{name}: figures without a source: {missing}"
    assert inst.device in DEVICES and inst.transport in TRANSPORTS
    assert inst.gpus_per_node == 8


def test_published_rates_of_three_instances():
    # vendor figures: p4d 4 x 100 Gb/s EFA, NVSwitch 600 GB/s bidirectional; p5 3,200 Gb/s over
    # 8 GPUs; ND H100 v5 8 x 400 Gb/s NDR
    p4d = cluster_from_instance("p4d.24xlarge", 2)
    t = p4d.topology
    assert p4d.workers == 16 and t.nics_per_node == 4 and t.nic_bandwidth == 100e9 / 8
    assert t.intra_bandwidth * 2 == 600e9
    p5 = cluster_from_instance("p5.48xlarge", 1).topology
    assert p5.nics_per_node * p5.nic_bandwidth * 8 == 3200e9
    nd = cluster_from_instance("ND96isr_H100_v5", 1).topology
    assert (nd.nics_per_node, nd.nic_bandwidth * 8) == (8, 400e9)


def test_unknown_instance_suggests_close_names():
    with pytest.raises(UnknownNameError, match="did you mean p5.48xlarge"):
        get_instance("p5.48xlarg")
    assert get_instance("P4D.24XLARGE").name == "p4d.24xlarge"


def test_a_users_price_in_a_cluster_file_overrides(tmp_path):
    text = (CATALOG_DIR / "a3-megagpu-8g.yaml").read_text()
    own = tmp_path / "mine.yaml"
    own.write_text(text.replace("name: a3-megagpu-8g", "name: a3-megagpu-8g\nprice_per_hour: 50"))
    cf, price = read_cluster_file(own)
    assert price == 50.0 and cf.topology.nics_per_node == 8
    assert load_instance_file(own).price_per_hour == 50.0


def test_predict_on_an_instance_applies_its_transport_and_price():
    import sgdnet
    from sgdnet.prediction import summarize

    p = sgdnet.predict("allreduce", "bert_large", None, instance="p4d.24xlarge", nodes=2,
                       granularity="coarse", steps=20, replications=2, seed=0)
    assert p.cluster.workers == 16
    assert p.cluster.topology.nic_bandwidth == pytest.approx(0.96 * 100e9 / 8)  # rdma goodput
    assert p.model.device == "A100-40GB"  # re-timed for the instance's GPU
    row = summarize(p)
    assert row["cost_per_hour"] == pytest.approx(2 * 32.7726)
    assert row["cost_per_m_tokens_mean"] is not None  # BERT: 128 tokens per sample
    mine = sgdnet.predict("allreduce", "bert_large", None, instance="p4d.24xlarge", nodes=2,
                          granularity="coarse", steps=20, replications=2, seed=0,
                          price_per_hour=10.0)
    assert summarize(mine)["cost_per_hour"] == 20.0


def test_catalog_is_package_data():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "setup.cfg")
    assert "catalog/*.yaml" in cfg["options.package_data"]["sgdnet"]


def test_a_study_over_instances_scales_against_one_node():
    from sgdnet import Study

    def runner(variant, model, cluster, *, seed, instance, nodes, **kw):
        return {"samples_per_s_mean": {"p4d.24xlarge": 100.0, "p5.48xlarge": 300.0}[instance]
                * nodes ** 0.5}

    res = Study(grid={"instance": ["p4d.24xlarge", "p5.48xlarge"], "nodes": [1, 4]},
                fixed={"variant": "allreduce", "model": "bert_large"}, runner=runner).run("serial")
    by = {(r["instance"], r["nodes"]): r for r in res.rows}
    # 4 nodes: sqrt(4) = 2x one node of the same instance; efficiency 2 / 4
    assert by[("p5.48xlarge", 4)]["speed_up"] == pytest.approx(2.0)
    assert by[("p4d.24xlarge", 4)]["efficiency"] == pytest.approx(0.5)
    assert by[("p4d.24xlarge", 1)]["speed_up"] == 1.0
