"""The README figures, drawn from built-in variants (not the hand-built test nets): a 4-worker
sync-PS net, a timeline of a traced sync-PS run and a scaling plot of several variants.

Each is rendered headless (Agg) to a PNG of sensible size, and the net drawing is checked for
what makes a figure unreadable: transition labels that overlap one another or leave the canvas.
"""

from __future__ import annotations

import itertools

import matplotlib
import pytest

import sgdnet
from sgdnet import Cluster, variants, viz

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _cluster(workers: int = 4) -> Cluster:
    return Cluster(workers=workers, bandwidth="10Gbps", compute_cv=0.1, comm_cv=0.1, update_s_per_byte=1e-10)


def _png(fig, path, dpi=100) -> int:
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return path.stat().st_size


def _overlapping_pairs(boxes):
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_backend_is_agg():
    assert matplotlib.get_backend().lower() == "agg"


def test_sync_ps_net_drawing_is_readable(tmp_path):
    net = variants.build("sync-ps", "resnet50", _cluster(4), max_layers=3)
    ax = viz.draw_net(net)
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    lane_names = {f"worker{w}" for w in range(4)} | {"ps0"}
    texts = [t for t in ax.texts if t.get_text() and t.get_text() not in lane_names]
    assert len(texts) >= len(net.transitions)
    # transition labels (the small ones under the bars) never overlap one another
    bar_labels = [(t.get_text(), t.get_window_extent(r)) for t in texts if t.get_va() == "top"]
    assert len(bar_labels) == len(net.transitions)
    assert _overlapping_pairs(bar_labels) == []
    # ... and stay inside the figure
    fb = fig.bbox
    for name, bb in bar_labels:
        assert fb.x0 <= bb.x0 and bb.x1 <= fb.x1 and fb.y0 <= bb.y0 and bb.y1 <= fb.y1, name
    # legend: every operation kind drawn in colour is named
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"compute", "comm", "update", "step", "place"} <= legend
    size = _png(fig, tmp_path / "net.png")
    assert 30_000 < size < 1_500_000


@pytest.fixture(scope="module")
def traced_sync_ps():
    net = variants.build("sync-ps", "resnet50", _cluster(4), max_layers=4)
    return sgdnet.simulate(net, steps=20, warmup=4, replications=1, seed=3, trace=True, parallel=False)


def test_sync_ps_timeline_png(traced_sync_ps, tmp_path):
    ax = viz.timeline(traced_sync_ps, title="sync-ps")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels.count("gpu") == 4 and "cpu" in labels
    assert "ms" in ax.get_xlabel() or "µs" in ax.get_xlabel() or "(s)" in ax.get_xlabel()
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"compute", "comm", "update", "step done"} <= legend
    # on the figure timeline() made itself, host names (drawn outside the axes), legend and
    # title are inside the canvas even with a plain savefig (no bbox_inches="tight")
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    outside = [t.get_text() for t in [*ax.texts, ax.title, *ax.get_legend().get_texts()]
               if t.get_text() and not fig.bbox.contains(*t.get_window_extent(r).p0)]
    hosts = [t.get_text() for t in ax.texts]
    assert {"worker0", "worker3", "ps0"} <= set(hosts) and outside == []
    size = _png(fig, tmp_path / "timeline.png")
    assert 15_000 < size < 1_500_000


def test_scaling_png_from_scaling_runs(tmp_path):
    base = _cluster(1)
    data = {v: sgdnet.scaling(v, "resnet18", base, workers=[1, 2, 4], steps=30, warmup=5, replications=2,
                              seed=1, max_layers=3)
            for v in ("sync-ps", "allreduce")}
    ax = viz.plot_scaling(data, title="ResNet-18")
    assert "samples/s" in ax.get_ylabel() and ax.get_xlabel() == "workers"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["sync-ps", "allreduce", "ideal linear"]
    size = _png(ax.figure, tmp_path / "scaling.png")
    assert 10_000 < size < 1_000_000
