"""scripts/testbed_burst_probe.py --from: each run predicted with and without its bucket."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import sgdnet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from testbed_burst_probe import predict  # noqa: E402

CLUSTER = ROOT / "docs/data/testbed37_quiet_cluster-100mbit.yaml"
PROFILES = ROOT / "docs/data/testbed37_fresh9_runs.json"


def test_a_run_is_predicted_on_the_file_and_its_bucket_scaled_as_calibrated(tmp_path):
    """One 1-worker sync-PS run whose 'measured' rate is what sgdnet gives for the file with
    no bucket: its no-bucket error is 0; with the bucket (64 KB x the file's calibrated /
    nominal burst, the file's own link.burst) the push after idle passes at the peak, so the
    prediction is faster (error > 0) and equals the one with ``burst="file"``."""
    prof = sgdnet.ModelProfile.from_dict(json.loads(PROFILES.read_text())["profiles"]["tb-mlp"])
    cf = sgdnet.load_cluster_file(CLUSTER)
    bw = 31.25e6 * cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])

    def rate(**kw):
        c = sgdnet.Cluster.from_file(CLUSTER, workers=1, bandwidth=bw, **kw)
        return float(sgdnet.predict("sync-ps", prof, c, steps=200, warmup=20, replications=3,
                                    seed=0).steps_per_s.mean)

    plain = rate()
    runs = {"runs": [{"burst": "64KB", "burst_B": 64000.0, "model": "tb-mlp",
                      "scheme": "sync-ps", "workers": 1, "rate_Bps": 31.25e6,
                      "steps_per_s": plain, "own_cores": 0.5, "irq_cores": 0.2}]}
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(runs))
    (row,) = predict(f, PROFILES, CLUSTER, {"tb-mlp": CLUSTER})
    assert row["err_none"] == pytest.approx(0.0, abs=1e-12)
    assert row["err_bucket"] == pytest.approx(rate(burst="file") / plain - 1, rel=1e-9)
    assert row["err_bucket"] > 0.01
