"""Issue #42: the timeline draws each row as one collection (not one ``broken_barh`` per bar,
which autoscaled the axes at each of ~9,000 bars), with the bars the trace says: one per firing
on that resource inside the window, at its clipped start and with its clipped duration."""

from __future__ import annotations

from collections import defaultdict

import matplotlib
import numpy as np
import pytest
from conftest import ps_net

import sgdnet
from sgdnet.viz import timeline
from sgdnet.viz.style import time_unit

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402


@pytest.fixture(scope="module")
def traced():
    return sgdnet.simulate(ps_net(3), steps=20, warmup=4, replications=1, seed=7, trace=True)


def _expected_bars(result, lo, hi):
    """(x, width) in the axis unit of every firing of replication 0 on each resource, from the
    raw trace (not from the timeline's own tracks)."""
    _, scale = time_unit(hi - lo)
    tr = result.trace[result.trace["rep"] == 0]
    out = defaultdict(list)
    for t, s, e in zip(tr["transition"].tolist(), tr["start"].tolist(), tr["end"].tolist()):
        if e < lo or s > hi:
            continue
        for r in result.transition_resources[t]:
            out[r].append(((max(s, lo) - lo) / scale, max(min(e, hi) - max(s, lo), 0.0) / scale))
    return {r: sorted(v) for r, v in out.items()}


def test_one_bar_collection_per_row_with_the_traced_bars(traced):
    t0 = float(traced.t0[0])
    lo, hi = t0, t0 + 0.08
    ax = timeline(traced, window=(lo, hi), ops=False)
    colls = [c for c in ax.collections if isinstance(c, PolyCollection)]
    gids = [c.get_gid() for c in colls]
    bar_gids = [g for g in gids if g and g.startswith("bars:")]
    assert len(bar_gids) == len(set(bar_gids))  # one bar collection per row
    # every PolyCollection is a row's bars or a row's idle spans: nothing drawn bar by bar
    assert all(g and g.split(":", 1)[0] in ("bars", "blocked") for g in gids)
    expected = _expected_bars(traced, lo, hi)
    assert expected and set(expected) == {g.split(":", 1)[1] for g in bar_gids}
    for c in colls:
        kind, res = c.get_gid().split(":", 1)
        if kind != "bars":
            continue
        v = np.array([p.vertices[:4] for p in c.get_paths()])  # (bars, 4 corners, xy)
        got = sorted(zip(v[:, 0, 0].tolist(), (v[:, 2, 0] - v[:, 0, 0]).tolist()))
        assert len(got) == len(expected[res]), res
        np.testing.assert_allclose(np.array(got), np.array(expected[res]), rtol=0, atol=1e-9)
        # bars sharing a sub-row never overlap (a capacity-1 row has a single sub-row)
        by_y = defaultdict(list)
        for (x0, y0), (x1, _y1) in zip(v[:, 0], v[:, 2]):
            by_y[round(float(y0), 9)].append((float(x0), float(x1)))
        for spans in by_y.values():
            spans.sort()
            assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:])), res
    plt.close(ax.figure)


def test_idle_spans_are_one_collection_per_worker_compute_row(traced):
    t0 = float(traced.t0[0])
    ax = timeline(traced, window=(t0, t0 + 0.08), labels=False)
    blocked = [c.get_gid() for c in ax.collections if (c.get_gid() or "").startswith("blocked:")]
    assert blocked and len(blocked) == len(set(blocked))
    assert all(g.split(":", 1)[1] in traced.resource_names for g in blocked)
    plt.close(ax.figure)
