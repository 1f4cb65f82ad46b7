"""Issue #17: API figures saved plainly (``fig.savefig(path)``, no ``bbox_inches``) keep their
labels inside the canvas, and a deterministic run gives a readable CDF (0 -> 1 step on an axis
of positive width), not a zero-width line."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from sgdnet import Net, simulate  # noqa: E402
from sgdnet.dists import Deterministic  # noqa: E402
from sgdnet.viz import plot_distribution, plot_scaling, plot_utilization  # noqa: E402


def _det_result():
    net = Net("det")
    gpu = net.resource("gpu_0", kind="gpu", host="worker0")
    a, b = net.place("a", tokens=1), net.place("b")
    net.transition("compute", Deterministic(0.02), inputs={a: 1}, outputs={b: 1},
                   resources=[gpu], tags={"worker": 0, "kind": "compute"})
    net.transition("sync", Deterministic(0.005), inputs={b: 1}, outputs={a: 1},
                   tags={"worker": 0, "step": True})
    return simulate(net, steps=50, warmup=5, replications=2, seed=0)


def _inside_canvas(ax, tmp_path):
    fig = ax.figure
    fig.savefig(tmp_path / "f.png")  # plainly: what a user does
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    def shown(axis, lim):  # tick labels matplotlib draws: those inside the view limits
        lo, hi = sorted(lim)
        return [lab for tick, lab in zip(axis.get_majorticklocs(), axis.get_majorticklabels())
                if lo <= tick <= hi]

    texts = [ax.xaxis.label, ax.yaxis.label, ax.title, *shown(ax.xaxis, ax.get_xlim()),
             *shown(ax.yaxis, ax.get_ylim())]
    for t in texts:
        if not t.get_text() or not t.get_visible():
            continue
        bb = t.get_window_extent(renderer)
        assert bb.x0 >= canvas.x0 - 1 and bb.y0 >= canvas.y0 - 1, t.get_text()
        assert bb.x1 <= canvas.x1 + 1 and bb.y1 <= canvas.y1 + 1, t.get_text()


@pytest.mark.parametrize("which", ["scaling", "distribution", "utilization"])
def test_figures_are_not_clipped_when_saved_plainly(which, tmp_path):
    res = _det_result()
    if which == "scaling":
        ax = plot_scaling({"sync-ps": [(1, 100.0), (2, 190.0), (4, 350.0), (8, 600.0)]},
                          title="a title long enough to matter")
    elif which == "distribution":
        ax = plot_distribution(res, title="step times")
    else:
        ax = plot_utilization(res, title="utilisation")
    _inside_canvas(ax, tmp_path)


def test_deterministic_cdf_is_a_visible_step():
    ax = plot_distribution(_det_result(), kind="cdf")
    line = ax.get_lines()[0]
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    assert y[0] == 0.0 and y[-1] == 1.0       # starts at 0, ends at 1
    lo, hi = ax.get_xlim()
    assert hi > lo and x.min() < 25.0 < x.max()  # every step takes 25 ms, inside the axis
