"""sgdnet.testbed.ps_efficiency: the PS downlink efficiency fitted to the PS-traffic probe."""

from __future__ import annotations

import pytest

import sgdnet
from sgdnet.errors import CalibrationError, TestbedError
from sgdnet.testbed.calibrate import _gradient_bytes, calibrate_testbed
from sgdnet.testbed.fit import t95
from sgdnet.testbed.ps_efficiency import (
    fit,
    fit_repeats,
    probe_profile,
    split_repeats,
    with_ps_efficiency,
)
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


def test_split_repeats_takes_the_ith_record_of_every_cell():
    runs = {"a": [{"x": 1}, {"x": 2}], "b": [{"x": 3}]}
    assert split_repeats(runs) == [{"a": [{"x": 1}], "b": [{"x": 3}]}, {"a": [{"x": 2}]}]


def test_fit_repeats_states_each_efficiency_with_its_interval(cf):
    """Repeat 0 made by the model at e_2 = 0.85, repeat 1 at 0.80: each is fitted back on its
    own, the value is their mean and the interval the Student-t one of two samples,
    0.825 +- t95(1) * sd / sqrt(2) with sd = 0.05 / sqrt(2); the file then carries it in
    ``calibration.figures``, and so wide an interval (+-0.32 > 0.05) makes it low quality."""
    a, b = _measured(cf, (1.0, 0.85), 2), _measured(cf, (1.0, 0.80), 2)
    runs = {k: a[k] + b[k] for k in a}
    table, figs, per = fit_repeats(runs, LAYERS, 0.002, cf, burst=False, sim_steps=60,
                                   replications=1, lo=0.75, log=lambda m: None)
    assert [t[2] for t in per] == [pytest.approx(0.85), pytest.approx(0.80)]
    f = figs["link.ps_efficiency.2"]
    half = t95(1) * (0.05 / 2 ** 0.5) / 2 ** 0.5
    assert f["value"] == pytest.approx(0.825) and f["n"] == 2
    assert f["ci95"] == [pytest.approx(0.825 - half), pytest.approx(0.825 + half)]
    assert f["worst_rel_residual"] == pytest.approx(0.0, abs=1e-9)
    assert table == {1: 1.0, 2: pytest.approx(0.82)}  # 0.825 rounded to 0.01 (half-even)
    judged = with_ps_efficiency(cf.replace(calibration={"repeats": 2, "quality": "good",
                                                        "figures": {}}),
                                table, figures=figs)
    assert judged.calibration["quality"] == "low"
    assert any("link.ps_efficiency.2" in p for p in judged.calibration["problems"])
    ok = dict(f, ci95=[0.81, 0.84])  # +-0.015: inside the 0.05 allowed
    good = with_ps_efficiency(cf.replace(calibration={"repeats": 2, "figures": {}}), table,
                              figures={"link.ps_efficiency.2": ok})
    assert good.calibration["quality"] == "good"
    noisy = cf.replace(calibration={"repeats": 2, "figures": {}},  # the file's own quiet gate
                       measurements={**cf.measurements, "quiet": [
                           {"id": "stream", "noisy": True, "other_cores": 0.9}]})
    assert with_ps_efficiency(noisy, table, figures={"link.ps_efficiency.2": ok}
                              ).calibration["quality"] == "low"


def test_calibrates_summary_lists_the_efficiencies_with_their_intervals(cf):
    from sgdnet.testbed.commands import describe

    figs = {"link.ps_efficiency.2": {"value": 0.89, "ci95": [0.86, 0.92], "n": 3, "sd": 0.01,
                                     "worst_rel_residual": 0.002},
            "link.ps_efficiency.3": {"value": 0.8, "ci95": None, "n": 1, "sd": 0.0,
                                     "worst_rel_residual": 0.011}}
    out = with_ps_efficiency(cf.replace(calibration={"repeats": 3, "figures": {}}),
                             {1: 1.0, 2: 0.89, 3: 0.8}, figures=figs)
    lines = [ln for ln in describe(out) if "ps_efficiency" in ln]
    assert len(lines) == 2 and "0.89" in lines[0] and "[0.86 .. 0.92]" in lines[0]
    assert "n=3" in lines[0] and "worst residual 0%" in lines[0]
    assert "0.8" in lines[1] and "no interval" in lines[1]
    assert not [ln for ln in describe(cf) if "ps_efficiency" in ln]
    old = with_ps_efficiency(cf, {1: 1.0, 2: 0.89}, rms={2: 0.002})  # fitted before intervals
    lines = [ln for ln in describe(old) if "ps_efficiency" in ln]
    assert len(lines) == 1 and "0.89" in lines[0] and "no interval; rms 0.2%" in lines[0]
