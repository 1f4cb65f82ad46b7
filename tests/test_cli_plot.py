"""Issue #17: study results plug into a plot: ``sgdnet plot results.csv --x ... --hue ...`` and
``viz.plot_table`` (rows, StudyResult or DataFrame)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from sgdnet import Study  # noqa: E402
from sgdnet.cli import main  # noqa: E402
from sgdnet.errors import SgdnetError  # noqa: E402
from sgdnet.viz import plot_table  # noqa: E402


def runner(variant, model, cluster, *, seed, **kw):
    rate = cluster.bandwidth / 1e9
    return {"samples_per_s_mean": 100.0 * cluster.workers * rate,
            "samples_per_s_lo": 95.0 * cluster.workers * rate,
            "samples_per_s_hi": 105.0 * cluster.workers * rate}


@pytest.fixture
def table(tmp_path):
    out = tmp_path / "results.csv"
    Study(grid={"variant": ["a", "b"], "cluster.workers": [1, 2, 4],
                "cluster.bandwidth": ["1Gbps", "10Gbps"]},
          fixed={"model": "m"}, runner=runner).run("serial", out=out)
    return out


def test_plot_command_draws_one_line_per_hue(table, tmp_path, capsys):
    png = tmp_path / "fig.png"
    code = main(["plot", str(table), "--x", "cluster.bandwidth", "--hue", "variant",
                 "--out", str(png)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert png.stat().st_size > 1000 and "(2 lines)" in out


def test_plot_table_uses_the_numeric_twin_and_means(table):
    from sgdnet.study import read_table

    rows = [r for r in read_table(table) if r["cluster.workers"] == 2]
    ax = plot_table(rows, "cluster.bandwidth", hue="variant")
    line = ax.get_lines()[0]
    # 1 Gbps = 1.25e8 B/s -> 100 * 2 * 0.125 = 25 samples/s; 10 Gbps -> 250
    np.testing.assert_allclose(line.get_xdata(), [1.25e8, 1.25e9])
    np.testing.assert_allclose(line.get_ydata(), [25.0, 250.0])


def test_plot_table_against_workers_is_the_scaling_plot(table):
    pd = pytest.importorskip("pandas")
    from sgdnet.study import read_table

    rows = [r for r in read_table(table) if r["cluster.bandwidth"] == "10Gbps"]
    for source in (rows, pd.DataFrame(rows)):
        ax = plot_table(source, "cluster.workers", hue="variant")
        labels = [ln.get_label() for ln in ax.get_lines()]
        assert labels == ["a", "b", "ideal linear"]


def test_unknown_column_is_one_line_exit_2(table, tmp_path, capsys):
    code = main(["plot", str(table), "--x", "bogus", "--out", str(tmp_path / "f.png")])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cluster.workers" in err
    with pytest.raises(SgdnetError, match="list of dicts"):
        plot_table("results.csv", "x")
