"""Scaling, distribution and utilisation plots."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from conftest import ps_net

import sgdnet
from sgdnet.errors import SgdnetError
from sgdnet.viz import plot_distribution, plot_scaling, plot_utilization
from sgdnet.viz.plots import as_interval

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return sgdnet.simulate(ps_net(2), steps=60, warmup=5, replications=3, seed=2)


def _save(ax, path):
    ax.figure.savefig(path, dpi=100)
    plt.close(ax.figure)
    return path.stat().st_size


def test_scaling_plot_draws_means_bands_and_ideal(tmp_path, result):
    pts = {
        "a": [(1, (10.0, 9.0, 11.0)), (2, (19.0, 18.0, 20.0)), (8, (60.0, 55.0, 65.0))],
        "b": [{"workers": 1, "samples_per_s": 8.0}, {"workers": 8, "samples_per_s": result.throughput}],
    }
    ax = plot_scaling(pts)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"a", "b", "ideal linear"}
    np.testing.assert_allclose(lines["a"].get_ydata(), [10, 19, 60])
    # ideal = the best 1-worker throughput times the number of workers
    np.testing.assert_allclose(lines["ideal linear"].get_ydata(), [10, 20, 80])
    assert ax.get_xscale() == "log" and "workers" in ax.get_xlabel() and "samples/s" in ax.get_ylabel()
    assert len(ax.collections) >= 2  # CI bands
    assert _save(ax, tmp_path / "s.png") > 10_000


def test_scaling_accepts_a_list_and_refuses_junk():
    ax = plot_scaling([(1, 5.0), (2, 9.0)], metric="steps_per_s", ideal=False)
    assert "steps/s" in ax.get_ylabel() and ax.get_xscale() == "linear"
    plt.close(ax.figure)
    with pytest.raises(SgdnetError, match="no 'workers'"):
        plot_scaling({"x": [{"n": 3}]})
    with pytest.raises(SgdnetError, match="no points"):
        plot_scaling({})


def test_as_interval_reads_estimates(result):
    m, lo, hi = as_interval(result.throughput)
    assert (m, (lo, hi)) == (result.throughput.mean, result.throughput.ci())
    assert as_interval(3.0) == (3.0, 3.0, 3.0)


@pytest.mark.parametrize("kind", ["hist", "cdf"])
def test_distribution_has_a_curve_per_worker(result, kind, tmp_path):
    ax = plot_distribution(result, kind=kind)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 2 and labels[0].startswith("worker 0")
    assert "step time (ms)" == ax.get_xlabel()
    if kind == "cdf":
        ys = ax.get_lines()[0].get_ydata()
        assert ys[-1] == pytest.approx(1.0) and np.all(np.diff(ys) >= 0)
    assert _save(ax, tmp_path / "d.png") > 10_000
    with pytest.raises(SgdnetError, match="kind="):
        plot_distribution(result, kind="violin")


def test_utilization_bars_match_the_result(result, tmp_path):
    ax = plot_utilization(result)
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert set(names) == set(result.resource_names)
    widths = {n: p.get_width() for n, p in zip(names, ax.patches)}
    for n in names:
        assert widths[n] == pytest.approx(100 * result.utilization(n).mean)
    assert _save(ax, tmp_path / "u.png") > 10_000
    with pytest.raises(SgdnetError, match="unknown"):
        plot_utilization(result, resources=["nope"])
    ax = plot_utilization({"x": 0.5})
    plt.close(ax.figure)


def _rows():
    """variant x workers x bandwidth, samples/s = 10 * workers (a) or 5 * workers (b)."""
    return [{"variant": v, "cluster.workers": w, "cluster.bandwidth": bw,
             "cluster.bandwidth_Bps": bps, "samples_per_s_mean": f * w,
             "efficiency": 1.0 if w == 1 else 0.5}
            for v, f in (("a", 10.0), ("b", 5.0)) for w in (1, 2, 4)
            for bw, bps in (("1Gbps", 1.25e8), ("10Gbps", 1.25e9), ("100Gbps", 1.25e10))]


def test_plot_table_facets_one_panel_per_bandwidth():
    from sgdnet.viz import plot_table

    ax = plot_table(_rows(), "cluster.workers")
    panels = [a for a in ax.figure.axes if a.get_visible()]
    assert len(panels) == 3
    for a, bw in zip(panels, ("1Gbps", "10Gbps", "100Gbps")):
        assert a.get_title() == f"bandwidth {bw}"
        data = {ln.get_label(): ln for ln in a.get_lines()}
        np.testing.assert_allclose(data["a"].get_ydata(), [10, 20, 40])
        np.testing.assert_allclose(data["b"].get_ydata(), [5, 10, 20])
        # ideal: the panel's best one-worker throughput times the workers
        np.testing.assert_allclose(data["ideal linear"].get_ydata(), [10, 20, 40])
    plt.close(ax.figure)


def test_plot_table_refuses_a_line_through_mixed_settings():
    from sgdnet.viz import plot_table

    rows = [dict(r, **{"cluster.latency": lat}) for r in _rows() for lat in ("5us", "50us")]
    rows = [dict(r, **{"model": m}) for r in rows for m in ("x", "y")]
    with pytest.raises(SgdnetError, match="mixed settings") as e:
        plot_table(rows, "cluster.workers")
    assert "model" in str(e.value) and "--where" in str(e.value)
    with pytest.raises(SgdnetError, match="do not fit one ax"):
        plot_table(_rows(), "cluster.workers", ax=plt.subplots()[1])
    # two rows at one point of one line (a column that is not a parameter differs)
    dup = [dict(r, row_id=str(i)) for i, r in enumerate(_rows() + _rows())]
    with pytest.raises(SgdnetError, match="two rows at"):
        plot_table(dup, "cluster.workers", where=[("cluster.bandwidth", "1Gbps")])
    plt.close("all")


def test_efficiency_is_labelled_and_its_ideal_is_flat():
    from sgdnet.viz import plot_table

    ax = plot_table(_rows(), "cluster.workers", "efficiency", where=[("cluster.bandwidth", "1Gbps")])
    assert ax.get_ylabel() == "scaling efficiency"
    ideal = [ln for ln in ax.get_lines() if ln.get_label().startswith("ideal")]
    assert len(ideal) == 1 and set(ideal[0].get_ydata()) == {1.0}
    plt.close(ax.figure)


def test_pareto_plot_marks_the_front():
    from sgdnet.viz.pareto import plot_pareto

    rows = [{"instance": "p4d", "nodes": n, "variant": "v", "time_h": t, "cost": c,
             "within": True} for n, t, c in ((1, 40, 30), (2, 20, 60), (4, 12, 100))]
    ax = plot_pareto(rows, [("p4d", 1, "v"), ("p4d", 2, "v"), ("p4d", 4, "v")])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("hours per 10⁶ samples", "$ per 10⁶ samples")
    assert len(ax.collections) == 3 and len(ax.texts) == 3
    plt.close(ax.figure)
    with pytest.raises(SgdnetError, match="prices unknown"):
        plot_pareto([{"instance": "x", "nodes": 1, "variant": "v", "time_h": 1, "cost": None}])
