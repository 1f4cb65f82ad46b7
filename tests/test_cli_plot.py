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


def test_plot_command_draws_one_line_per_hue_and_panel(table, tmp_path, capsys):
    # issue #42: the rows also vary in cluster.workers, which gets a panel each (it used to
    # be one zig-zag line per variant through every worker count)
    png = tmp_path / "fig.png"
    code = main(["plot", str(table), "--x", "cluster.bandwidth", "--hue", "variant",
                 "--out", str(png)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert png.stat().st_size > 1000 and "3 panel(s), 6 lines" in out
    assert "panel by cluster.workers" in out
    code = main(["plot", str(table), "--x", "cluster.bandwidth", "--where",
                 "cluster.workers=2", "--out", str(png)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 panel(s), 2 lines" in out


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


def test_three_axes_give_one_line_per_combination_with_units(tmp_path, capsys):
    """The README's study shape (variant x workers x bandwidth x straggler): a panel per
    bandwidth, a colour per variant, a line style per straggler setting, units on the axes."""
    out = tmp_path / "r.csv"

    def run(variant, model, cluster, *, seed, **kw):
        slow = 1.0 if cluster.straggler is None else 0.8
        return {"samples_per_s_mean": 10.0 * cluster.workers * slow * (2 if variant == "a" else 1)}

    Study(grid={"variant": ["a", "b"], "cluster.workers": [1, 2, 4],
                "cluster.bandwidth": ["1Gbps", "10Gbps"],
                "cluster.straggler": [None, {"kind": "step", "p": 0.1, "factor": 3}]},
          fixed={"model": "m"}, runner=run).run("serial", out=out)
    png = tmp_path / "f.png"
    assert main(["plot", str(out), "--x", "cluster.workers", "--out", str(png)]) == 0
    assert "2 panel(s), 8 lines" in capsys.readouterr().out
    from sgdnet.study import read_table

    ax = plot_table(read_table(out), "cluster.workers")
    panels = [a for a in ax.figure.axes if a.get_visible()]
    assert [a.get_title() for a in panels] == ["bandwidth 1Gbps", "bandwidth 10Gbps"]
    assert panels[0].get_ylabel() == "throughput (samples/s)"
    assert panels[0].get_xlabel() == "workers"
    styles = {ln.get_linestyle() for ln in panels[0].get_lines() if ln.get_label() != "ideal linear"}
    assert len(styles) == 2  # straggler none / step
    labels = [t.get_text() for t in ax.figure.legends[0].get_texts()]
    assert labels[:4] == ["a", "b", "none", "step factor=3 p=0.1"]
    ax = plot_table(read_table(out), "cluster.bandwidth", where=[("cluster.workers", 4)])
    assert ax.get_xlabel() == "bandwidth (Gbit/s)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "10"]
