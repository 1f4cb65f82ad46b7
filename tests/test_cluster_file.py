"""Cluster files: round trip, mapping onto Cluster, bad input, and --cluster in the CLI."""

from __future__ import annotations

import json

import pytest

from sgdnet import Cluster
from sgdnet.cli import main
from sgdnet.errors import ClusterError, SgdnetError
from sgdnet.workload.cluster_file import ClusterFile, Link, load_cluster_file

FULL = """\
sgdnet_cluster: 1
name: lab
workers: 4
ps_hosts: 1
ps_placement: dedicated
comm_uses_compute: true
link:
  bandwidth: 100Mbit/s
  latency: 150us
  burst: 64KB
  incast: {1: 1.0, 2: 0.9, 4: 0.8}
  table: [[1048576, 0.084], [1024, 1.6e-4]]
  share_cv: {in: 0.3, out: 0.25}
hosts:
  ps0:
    uplink: {bandwidth: 200Mbit/s, latency: 100us}
    downlink: {bandwidth: 400Mbit/s}
cpu: {send_s_per_byte: 1.1e-9, recv_s_per_byte: 1.6e-9, reduce_s_per_byte: 2.5e-10}
ps: {update_s_per_byte: 3.0e-10, update_s_per_tensor: 20us}
local_step_s: {tb-mlp: 2.1ms}
notes: [alpha fitted negative, clamped]
measurements: {rtt_s: {"4": 0.0003}}
"""


@pytest.fixture
def full(tmp_path):
    p = tmp_path / "lab.yaml"
    p.write_text(FULL)
    return p


def test_units_are_parsed_to_si(full):
    cf = load_cluster_file(full)
    assert cf.link.bandwidth == 12.5e6 and cf.link.latency == pytest.approx(150e-6)
    assert cf.link.burst == 64e3
    assert cf.link.table == ((1024.0, 1.6e-4), (1048576.0, 0.084))  # sorted by size
    assert cf.ps["update_s_per_tensor"] == pytest.approx(20e-6)
    assert cf.local_step_s == {"tb-mlp": pytest.approx(2.1e-3)}
    assert cf.uplink("ps0").bandwidth == 25e6 and cf.downlink("ps0").bandwidth == 50e6
    assert cf.uplink("worker3") is cf.link


def test_round_trip_save_load(full, tmp_path):
    cf = load_cluster_file(full)
    out = cf.save(tmp_path / "again.yaml")
    back = load_cluster_file(out)
    assert back == cf
    assert back.to_dict() == cf.to_dict()
    assert out.read_text().startswith("# sgdnet cluster file")


def test_from_file_maps_what_todays_cluster_uses(full):
    c = Cluster.from_file(full)
    assert c.workers == 4
    assert c.bandwidth == 12.5e6 and c.latency == pytest.approx(150e-6)
    assert c.ps_shards == 1 and c.ps_placement == "dedicated"
    assert c.ps_bandwidth == 25e6  # the slower direction of the PS host
    # the file has per-byte CPU costs: the flows model charges those instead of the flag
    assert c.comm_uses_compute is False
    assert (c.send_s_per_byte, c.recv_s_per_byte, c.reduce_s_per_byte) == pytest.approx(
        (1.1e-9, 1.6e-9, 2.5e-10))
    assert c.incast == pytest.approx((1.0, 0.9, 0.85, 0.8))  # 3 flows: interpolated
    assert c.update_time(1e6) == pytest.approx(20e-6 + 3e-10 * 1e6)
    assert (c.share_cv_in, c.share_cv_out) == (0.3, 0.25)
    c2 = Cluster.from_file(full, workers=2, comm_cv=0.1)
    assert (c2.workers, c2.comm_cv) == (2, 0.1)


def test_incast_efficiency_interpolates_and_is_flat_beyond():
    lk = Link(bandwidth=1e9, incast={1: 1.0, 2: 0.9, 4: 0.8})
    assert [lk.efficiency(k) for k in (1, 2, 3, 4, 9)] == pytest.approx(
        [1.0, 0.9, 0.85, 0.8, 0.8])
    assert Link(bandwidth=1e9).efficiency(7) == 1.0
    assert lk.transfer_time(1e6) == pytest.approx(1e6 / 1e9)
    assert Link(bandwidth=1e6, latency=1e-3, burst=1e5).transfer_time(1e6) == pytest.approx(0.901)


def test_ps_efficiency_round_trips_and_maps_to_the_cluster(tmp_path):
    """``link.ps_efficiency`` (a PS host's downlink under the PS's own traffic) survives a save
    and load, and ``Cluster.from_file`` gives it as ``ps_link_efficiency``, interpolated like
    ``incast`` (3 flows between 2 and 4), next to an ``incast`` of its own."""
    f = tmp_path / "c.yaml"
    f.write_text("sgdnet_cluster: 1\nworkers: 4\nlink: {bandwidth: 100Mbit/s, "
                 "incast: {1: 1.0, 4: 0.99}, ps_efficiency: {1: 1.0, 2: 0.9, 4: 0.8}}\n")
    cf = load_cluster_file(f)
    assert cf.link.ps_efficiency == {1: 1.0, 2: 0.9, 4: 0.8}
    assert cf.link.efficiency(3, "ps_efficiency") == pytest.approx(0.85)
    assert cf.link.efficiency(3) == pytest.approx(1 - 0.02 / 3)  # the incast curve
    with pytest.raises(ClusterError, match="curve='table'"):
        cf.link.efficiency(2, "table")
    assert load_cluster_file(cf.save(tmp_path / "again.yaml")) == cf
    c = Cluster.from_file(f)
    assert c.ps_link_efficiency == pytest.approx((1.0, 0.9, 0.85, 0.8))
    assert c.incast == pytest.approx((1.0, 1 - 0.01 / 3, 1 - 0.02 / 3, 0.99))
    assert Cluster.from_file(f, ps_link_efficiency=()).ps_link_efficiency == ()
    bad = tmp_path / "bad.yaml"
    bad.write_text("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, ps_efficiency: {2: 0}}\n")
    with pytest.raises(ClusterError, match=r"link.ps_efficiency\[2\]=0"):
        load_cluster_file(bad)


@pytest.mark.parametrize("text, match", [
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps}\nbandwith: 3\n", r"unknown key\(s\) \['bandwith'\]"),
    ("sgdnet_cluster: 2\nlink: {bandwidth: 1Gbps}\n", "schema 1"),
    ("name: x\nlink: {bandwidth: 1Gbps}\n", "sgdnet_cluster"),
    ("sgdnet_cluster: 1\n", "link: required"),
    ("sgdnet_cluster: 1\nlink: {latency: 1ms}\n", "'bandwidth' is required"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 0}\n", "must be positive"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, incast: {0: 1.0}}\n", "flows >= 1"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, incast: {2: -1}}\n", "efficiency"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps}\ncpu: {send: 1}\n", "cpu: unknown key"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, share_cv: {up: 0.1}}\n", "share_cv: unknown"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, share_cv: {in: -0.1}}\n", "share_cv.in"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, share_cv: 0.3}\n", "share_cv: expected a"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps}\nworkers: 0\n", "workers=0"),
    ("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps}\nhosts: {ps0: {up: {}}}\n", "hosts.ps0"),
    ("sgdnet_cluster: 1\nlink: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
])
def test_bad_files_name_the_path_and_the_field(tmp_path, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ClusterError, match=match) as e:
        load_cluster_file(p)
    assert isinstance(e.value, SgdnetError)
    assert str(p) in str(e.value)


def test_to_cluster_needs_a_worker_count():
    cf = ClusterFile(link=Link(bandwidth="1Gbps"))
    with pytest.raises(ClusterError, match="no 'workers'"):
        Cluster(**cf.cluster_kwargs())
    assert Cluster(**cf.cluster_kwargs(3)).workers == 3


def _predict_json(capsys, *args):
    assert main(["predict", "--variant", "sync-ps", "--model", "squeezenet1_0", "--workers",
                 "2", "--steps", "30", "--warmup", "5", "--replications", "2", "--json",
                 "--no-progress", *args]) == 0
    return json.loads(capsys.readouterr().out)["rows"][0]


def test_cli_cluster_file_gives_the_same_prediction_as_equivalent_flags(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, latency: 80us}\n")
    by_file = _predict_json(capsys, "--cluster", str(p))
    by_flags = _predict_json(capsys, "--bandwidth", "1Gbps", "--latency", "80us")
    assert by_file["steps_per_s_mean"] == by_flags["steps_per_s_mean"]
    # and the file is really read: a 10x slower link predicts fewer steps/s
    p.write_text("sgdnet_cluster: 1\nlink: {bandwidth: 100Mbps, latency: 80us}\n")
    assert _predict_json(capsys, "--cluster", str(p))["steps_per_s_mean"] < \
        0.5 * by_file["steps_per_s_mean"]


def test_cli_bad_cluster_file_is_one_line_exit_2(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("sgdnet_cluster: 1\nlink: {bandwidth: fast}\n")
    assert main(["predict", "--variant", "sync-ps", "--cluster", str(p), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "link.bandwidth" in err and str(p) in err
