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
