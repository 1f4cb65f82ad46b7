"""sgdnet.testbed.ps_efficiency: the PS downlink efficiency fitted to the PS-traffic probe."""

from __future__ import annotations

import pytest

import sgdnet
from sgdnet.errors import CalibrationError, TestbedError
from sgdnet.testbed.calibrate import _gradient_bytes, calibrate_testbed
from sgdnet.testbed.ps_efficiency import fit, probe_profile, with_ps_efficiency
from sgdnet.workload import Layer, ModelProfile
from sgdnet.workload.cluster_file import load_cluster_file

LAYERS = [5160, 131584, 525312]  # pushed in this order (backward: the last layer first)
RATE = 9.375e6  # 75 Mbit/s


@pytest.fixture
def cf(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("sgdnet_cluster: 1\nworkers: 4\nlink: {bandwidth: 9375000, latency: 300us}\n"
                 "measurements: {tbf_rate_Bps: 9375000}\n")
    return load_cluster_file(f)


def test_probe_profile_is_the_probes_pattern():
    p = probe_profile(LAYERS, 0.002)
    assert [ly.grad_bytes for ly in p.layers] == [525312, 131584, 5160]  # forward order
    assert p.layers[0].forward_s == 0.002 and all(ly.forward_s == 0 for ly in p.layers[1:])


def _measured(cf, eff: tuple[float, ...], k: int) -> dict:
    """The model's own rounds/s with efficiency ``eff``: what the fit must find again."""
    out = {}
    for mode in ("sync", "async"):
        c = sgdnet.Cluster(**cf.cluster_kwargs(workers=k, update_s_per_byte=0.0,
                                               update_s_per_layer=0.0, ps_link_efficiency=eff))
        p = sgdnet.predict(f"{mode}-ps", probe_profile(LAYERS, 0.002), c, steps=60, warmup=10,
                           replications=1, seed=0)
        out[f"{round(RATE)}/{mode}/{k}"] = [{"steps_per_s": float(p.steps_per_s.mean)}]
    return out


def test_fit_finds_the_efficiency_that_made_the_cells(cf):
    """Cells made by the model at e_2 = 0.85 (two workers: the PS downlink carries two flows
    while both push) are fitted back to 0.85 with no error left; the efficiency changes the
    cells (so the fit is not blind to it)."""
    runs = _measured(cf, (1.0, 0.85), 2)
    assert runs != _measured(cf, (), 2)
    table, rms = fit(runs, LAYERS, 0.002, cf, burst=False, sim_steps=60, replications=1,
                     lo=0.75, log=lambda m: None)
    assert table == {1: 1.0, 2: pytest.approx(0.85)}
    assert rms[2] == pytest.approx(0.0, abs=1e-9)


def test_fit_refuses_what_it_cannot_fit(cf, tmp_path):
    with pytest.raises(TestbedError, match="2 or more workers"):
        fit({f"{round(RATE)}/sync/1": [{"steps_per_s": 5.0}]}, LAYERS, 0.002, cf)
    f = tmp_path / "real.yaml"
    f.write_text("sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps}\n")
    with pytest.raises(TestbedError, match="tbf_rate_Bps"):
        fit({f"{round(RATE)}/sync/2": [{"steps_per_s": 5.0}]}, LAYERS, 0.002,
            load_cluster_file(f))


def test_with_ps_efficiency_writes_the_link_and_the_record(cf, tmp_path):
    out = with_ps_efficiency(cf, {1: 1.0, 2: 0.9}, probe="x.json", burst=True)
    assert out.link.ps_efficiency == {1: 1.0, 2: 0.9}
    assert out.measurements["ps_efficiency"] == {"probe": "x.json", "burst": True,
                                                 "table": {1: 1.0, 2: 0.9}}
    back = load_cluster_file(out.save(tmp_path / "o.yaml"))
    assert back.link.ps_efficiency == {1: 1.0, 2: 0.9}
    assert sgdnet.Cluster.from_file(tmp_path / "o.yaml").ps_link_efficiency == (1.0, 0.9)


def test_calibrate_gives_the_probe_the_profiles_gradients_in_push_order():
    p = ModelProfile("m", [Layer("a", 1e-3, 1e-3, 1000.0), Layer("b", 1e-3, 1e-3, 0.0),
                           Layer("c", 1e-3, 1e-3, 3000.0)], batch_size=4)
    assert _gradient_bytes(p) == [3000, 1000]  # the last layer's first, no empty ones
    assert _gradient_bytes(None) is None


@pytest.mark.parametrize("kw", [{"workers": 1}, {"update": "file.yaml"}])
def test_calibrate_refuses_a_ps_probe_it_cannot_run(kw):
    with pytest.raises(CalibrationError, match="ps_probe"):
        calibrate_testbed(ps_probe=True, **{"workers": 4, **kw})


def test_calibrates_summary_lists_the_fitted_efficiencies(cf):
    from sgdnet.testbed.commands import describe

    out = with_ps_efficiency(cf, {1: 1.0, 2: 0.89, 3: 0.8}, rms={2: 0.002, 3: 0.011})
    lines = [ln for ln in describe(out) if "ps_efficiency" in ln]
    assert len(lines) == 2 and "0.89" in lines[0] and "rms 0.2%" in lines[0]
    assert "0.80" in lines[1] and "rms 1.1%" in lines[1]
    assert not [ln for ln in describe(cf) if "ps_efficiency" in ln]
