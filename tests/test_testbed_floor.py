"""scripts/testbed_floor.py: the testbed's own reproducibility, worked out by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from testbed_floor import cells, floor, main, summary  # noqa: E402


def _run(v, n=2, rate=9.375e6, scheme="ring", model="tb-mlp", noisy=False):
    return {"kind": "train", "model": model, "scheme": scheme, "rate_Bps": rate,
            "workers": n, "steps_per_s": v, "noisy": noisy}


CAMPS = {"a": [_run(10.0), _run(12.0), _run(99.0, noisy=True), _run(5.0, n=1)],
         "b": [_run(11.0), _run(20.0, n=3)],
         "c": [_run(9.0)]}


def test_the_oracle_is_the_other_campaigns_pooled_median():
    """Cell (ring, 75 Mbit/s, n=2): a = [10, 12] (the noisy 99 and the one-worker run are
    left out), b = [11], c = [9]. Oracle for a: median(11, 9) = 10 against median 11 ->
    -1/11; for b: median(10, 12, 9) = 10 against 11; for c: median(10, 12, 11) = 11 against
    9. The n = 3 cell is in one campaign only and is skipped."""
    rows = floor(cells(CAMPS))
    assert [(r["campaign"], r["workers"]) for r in rows] == [("a", 2), ("b", 2), ("c", 2)]
    got = {r["campaign"]: r for r in rows}
    assert got["a"]["oracle_err"] == pytest.approx(10 / 11 - 1)
    assert got["b"]["oracle_err"] == pytest.approx(10 / 11 - 1)
    assert got["c"]["oracle_err"] == pytest.approx(11 / 9 - 1)
    assert got["a"]["spread"] == pytest.approx(12 / 10 - 1)
    assert got["b"]["spread"] is None
    s = summary(rows)["tb-mlp ring"]
    assert s["max_abs"] == pytest.approx(2 / 9)
    assert s["mean_abs"] == pytest.approx((1 / 11 + 1 / 11 + 2 / 9) / 3)
    assert s["max_spread"] == pytest.approx(0.2)


def test_one_campaign_is_refused(tmp_path):
    f = tmp_path / "a.json"
    f.write_text(json.dumps({"runs": CAMPS["a"]}))
    with pytest.raises(SystemExit, match="two or more"):
        main([str(f)])
    g = tmp_path / "b.json"
    g.write_text(json.dumps({"runs": [_run(3.0, n=4)]}))
    with pytest.raises(SystemExit, match="no cell"):
        main([str(f), str(g)])
