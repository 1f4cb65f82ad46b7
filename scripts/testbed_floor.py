"""How far the emulated testbed reproduces itself: the error floor of any prediction.

For every cell (model, scheme, link rate, workers) measured by two or more campaigns
(``validate_testbed37.py --run``'s files), this prints the spread of its repeats within each
campaign and the error of an oracle that predicts one campaign's median by the median of the
others' runs of the same cell. No model can be expected to come closer to a campaign than
the testbed's other campaigns do, so a per-cell target below this floor cannot be checked on
this machine (issue #37).

    python scripts/testbed_floor.py docs/data/testbed37_long_runs.json \\
        docs/data/testbed37_quiet_runs.json docs/data/testbed37_fresh8_runs.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def cells(campaigns: dict[str, list[dict]], min_workers: int = 2
          ) -> dict[tuple, dict[str, list[float]]]:
    """``{(model, scheme, Mbit/s, workers): {campaign: [steps/s of each quiet run]}}``."""
    out: dict[tuple, dict[str, list[float]]] = {}
    for name, runs in campaigns.items():
        for r in runs:
            if r.get("kind") != "train" or r["workers"] < min_workers or r.get("noisy"):
                continue
            key = (r["model"], r["scheme"], round(r["rate_Bps"] * 8e-6), r["workers"])
            out.setdefault(key, {}).setdefault(name, []).append(float(r["steps_per_s"]))
    return out


def floor(cs: dict[tuple, dict[str, list[float]]]) -> list[dict[str, Any]]:
    """One row per cell and campaign (cells of two or more campaigns): the oracle's error
    (the other campaigns' pooled median over this one's median, minus 1) and the spread of
    this campaign's repeats (max / min - 1, None for one repeat)."""
    rows = []
    for key, by in sorted(cs.items()):
        if len(by) < 2:
            continue
        for name, v in by.items():
            others = [x for g, w in by.items() if g != name for x in w]
            rows.append({"model": key[0], "scheme": key[1], "mbit": key[2], "workers": key[3],
                         "campaign": name, "median": statistics.median(v),
                         "oracle_err": statistics.median(others) / statistics.median(v) - 1,
                         "spread": max(v) / min(v) - 1 if len(v) > 1 else None})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per ``"model scheme"``: mean and max |oracle error|, max within-campaign spread."""
    out: dict[str, dict[str, float]] = {}
    for k in sorted({f"{r['model']} {r['scheme']}" for r in rows}):
        sel = [r for r in rows if f"{r['model']} {r['scheme']}" == k]
        e = [abs(r["oracle_err"]) for r in sel]
        sp = [r["spread"] for r in sel if r["spread"] is not None]
        out[k] = {"cells": len(sel), "mean_abs": statistics.mean(e), "max_abs": max(e),
                  "max_spread": max(sp) if sp else float("nan")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaigns", nargs="+", type=Path, help="two or more campaign files")
    ap.add_argument("--rates", default=None, help="only these Mbit/s, e.g. 75,150")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if len(a.campaigns) < 2:
        raise SystemExit("give two or more campaigns: the floor compares them")
    camps = {p.stem: json.loads(p.read_text())["runs"] for p in a.campaigns}
    rows = floor(cells(camps))
    if a.rates:
        keep = {int(x) for x in a.rates.split(",")}
        rows = [r for r in rows if r["mbit"] in keep]
    if not rows:
        raise SystemExit("no cell was measured by two of these campaigns")
    print("| model | scheme | Mbit/s | n | campaign | median | others' median: err | spread |")
    print("|---|---|---:|---:|---|---:|---:|---:|")
    for r in rows:
        sp = "" if r["spread"] is None else f"{r['spread']:.1%}"
        print(f"| {r['model']} | {r['scheme']} | {r['mbit']} | {r['workers']} | {r['campaign']} "
              f"| {r['median']:.2f} | {r['oracle_err']:+.1%} | {sp} |")
    s = summary(rows)
    for k, v in s.items():
        print(f"{k}: floor mean {v['mean_abs']:.1%}, max {v['max_abs']:.1%} over {v['cells']} "
              f"cells; repeats within a campaign up to {v['max_spread']:.1%} apart")
    if a.json:
        a.json.write_text(json.dumps({"campaigns": [str(p) for p in a.campaigns],
                                      "rows": rows, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
