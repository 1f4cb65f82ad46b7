"""Issue #17: ``sgdnet draw`` caps the image (a fine-grained ResNet-50 was 13,164 px wide) at
``max_drawing_px`` on its longer side and says so. Tested with a lowered cap on a coarse net,
which is quick to draw."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402

from sgdnet.cli import main  # noqa: E402

ARGS = ["draw", "sync-ps", "--model", "resnet18", "--workers", "8"]


def test_drawing_is_capped_and_says_so(tmp_path, capsys, monkeypatch):
    free = tmp_path / "free.png"
    assert main([*ARGS, "--out", str(free)]) == 0
    out = capsys.readouterr().out
    assert "capped at" not in out
    wide = max(mpimg.imread(free).shape[:2])
    assert wide > 900  # the uncapped drawing is wider than the cap below

    monkeypatch.setenv("SGDNET_MAX_DRAWING_PX", "600")
    capped = tmp_path / "capped.png"
    assert main([*ARGS, "--out", str(capped)]) == 0
    out = capsys.readouterr().out
    assert "capped at max_drawing_px" in out
    assert max(mpimg.imread(capped).shape[:2]) <= 600
