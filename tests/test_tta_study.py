"""Targets as one string (``digits:acc=0.95``), on the CLI (``--target``) and as a study axis
(``target`` / ``target.<field>``, rows reporting the time to accuracy)."""

from __future__ import annotations

import json
import re

import pytest

from sgdnet import Study
from sgdnet.accuracy import Target
from sgdnet.accuracy.target import parse_target
from sgdnet.errors import SgdnetError, StudyError

FIXED = {"variant": "async-ps", "model": "resnet50", "granularity": "coarse",
         "cluster.workers": 2, "steps": 80}


# ----------------------------------------------------------------------------- spelling
def test_parse_target_reads_every_key():
    assert parse_target("logreg:acc=0.9") == Target("logreg", accuracy=0.9)
    assert parse_target("logreg:accuracy=0.9") == Target("logreg", accuracy=0.9)
    t = parse_target(" mlp : loss=0.3, lr=0.2, window=3, seed=4, eval_every=2 ")
    assert t == Target("mlp", loss=0.3, lr=0.2, window=3, seed=4, eval_every=2)
    # defaults fill what the text leaves out; the text wins
    assert parse_target("logreg:loss=0.3,lr=0.1", lr=0.5, window=2) == \
        Target("logreg", loss=0.3, lr=0.1, window=2)
    assert parse_target(t) is t


def test_spec_reads_back():
    for t in (Target("logreg", accuracy=0.84), Target("mlp", loss=0.25, lr=0.3, window=4,
                                                      seed=2, eval_every=5)):
        assert parse_target(t.spec()) == t


@pytest.mark.parametrize("text,words", [
    ("logreg", "TASK:KEY=VALUE"), ("logreg:", "TASK:KEY=VALUE"), (":loss=0.3", "TASK:KEY"),
    ("logreg:loss", "'loss' is not KEY=VALUE"), ("logreg:lr=0.1", "neither loss= nor acc="),
    ("logreg:bogus=1", "unknown key 'bogus'"), ("logreg:acc=x", "acc='x' is not a number"),
    ("logreg:loss=1,window=1.5", "window='1.5' is not an integer"),
    ("logreg:loss=0.3,loss=0.2", "'loss' given twice"),
    ("logreg:acc=0.9,loss=0.3", "exactly one of"), ("logreg:acc=1.5", "fraction"),
    ("logreg:loss=-1", "positive"), ("nosuchtask:loss=0.3", "nosuchtask"), (3, "not a string"),
])
def test_bad_spellings_say_what_is_wrong(text, words):
    with pytest.raises(SgdnetError, match=re.escape(words)):
        parse_target(text)


# ----------------------------------------------------------------------------- CLI
ARGS = ["predict", "--variant", "async-ps", "--model", "resnet50", "--workers", "2",
        "--granularity", "coarse", "--steps", "20", "--replications", "2", "--json"]


def test_cli_target_spelling_is_the_old_options(capsys):
    from sgdnet.cli import main

    assert main(ARGS + ["--target", "logreg:loss=0.34,lr=0.5"]) == 0
    new = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(ARGS + ["--target-loss", "0.34", "--task", "logreg", "--lr", "0.5"]) == 0
    old = json.loads(capsys.readouterr().out)["rows"][0]
    assert new["target"] == "logreg: loss <= 0.34" and new["reached"] == "2/2"
    assert {k: new[k] for k in new if k.startswith("tta_")} == \
        {k: old[k] for k in old if k.startswith("tta_")}


def test_cli_bad_target_and_two_tasks(capsys):
    from sgdnet.cli import main

    assert main(ARGS + ["--target", "logreg:bogus=1"]) == 2
    assert "unknown key 'bogus'" in capsys.readouterr().err
    assert main(ARGS + ["--target", "logreg:loss=0.3", "--target-loss", "0.3"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert main(ARGS + ["--target", "logreg:loss=0.3", "--task", "mlp"]) != 0
    assert "name different tasks" in capsys.readouterr().err


# ----------------------------------------------------------------------------- studies
def test_study_target_axis_reports_time_to_accuracy():
    """With common random numbers every row replays the same simulated runs on the same batch
    streams, so the curves are the same: a lower loss is reached no sooner, and the two
    spellings of one target (``target.loss`` over a spec, a spec alone) give the same row."""
    s = Study(configs=[{"target": "logreg:loss=0.5,lr=0.5", "target.loss": 0.45},
                       {"target": "logreg:loss=0.5,lr=0.5", "target.loss": 0.4},
                       {"target": "logreg:loss=0.45,lr=0.5"}],
              fixed=FIXED, replications=2, seed=3, common_random_numbers=True)
    rows = s.run(executor="serial", progress=False).rows
    assert [r.get("error") for r in rows] == [None] * 3
    a, b, c = rows
    assert a["out_target"] == c["out_target"] == "logreg: loss <= 0.45"
    assert b["out_target"] == "logreg: loss <= 0.4"
    assert a["reached"] == b["reached"] == "2/2" and a["n"] == 2
    assert 0 < a["tta_s_mean"] <= b["tta_s_mean"]
    assert a["updates_mean"] <= b["updates_mean"]
    assert {k: a[k] for k in a if k.startswith("tta_")} == \
        {k: c[k] for k in c if k.startswith("tta_")}


def test_target_fields_alone_default_to_logreg_and_replace_the_other_kind():
    from sgdnet.study.rows import row_target

    assert row_target({"target.loss": 0.4}) == Target("logreg", loss=0.4)
    assert row_target({"target": "mlp:acc=0.8,lr=0.2", "target.loss": 0.3}) == \
        Target("mlp", loss=0.3, lr=0.2)
    assert row_target({"target": {"task": "logreg", "acc": 0.8}}) == \
        Target("logreg", accuracy=0.8)
    assert row_target({"variant": "sync-ps"}) is None


def test_a_custom_runner_gets_the_target():
    got = []

    def runner(variant, model, cluster, *, seed, target=None, **kw):
        got.append(target)
        return {"x": 1.0}

    Study(grid={"target.accuracy": [0.8, 0.9]}, fixed=FIXED,
          runner=runner).run(executor="serial", progress=False)
    assert got == [Target("logreg", accuracy=0.8), Target("logreg", accuracy=0.9)]


def test_bad_targets_fail_before_anything_runs(tmp_path):
    with pytest.raises(StudyError, match="unknown key 'bogus'"):
        Study(grid={"target": ["logreg:loss=0.4", "logreg:bogus=1"]}, fixed=FIXED)
    with pytest.raises(StudyError, match="'target.speed' is not a target field"):
        Study(grid={"target.speed": [1, 2]}, fixed=FIXED)
    with pytest.raises(StudyError, match="exactly one"):
        Study(grid={"target.lr": [0.1]}, fixed={**FIXED, "target": {"task": "logreg"}})
    f = tmp_path / "s.yaml"
    f.write_text("fixed: {variant: sync-ps, model: resnet50}\n"
                 "grid: {target: ['logreg:loss=0.4', 'logreg:acc=0.8'], target.lr: [0.1, 0.2]}\n")
    assert len(Study.from_file(f)) == 4
