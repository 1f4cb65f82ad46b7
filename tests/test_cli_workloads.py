"""CLI --device / --batch-size / --precision: the profile is re-timed before predicting."""

import pytest

from sgdnet import Cluster, ModelProfile, models, variants
from sgdnet.cli import _load_model, build_parser, main
from sgdnet.workload.compute import retime


def _args(*extra):
    return build_parser().parse_args(["draw", "allreduce", "--out", "x.dot", *extra])


def test_device_batch_precision_retime_the_profile_and_the_build_folds_step_costs():
    m = _load_model(_args("--model", "gpt2_medium", "--device", "H100", "--batch-size", "16",
                          "--precision", "bf16"))
    want = retime(models.load("gpt2_medium"), device="H100", batch_size=16, precision="bf16")
    assert (m.device, m.batch_size, m.precision) == ("H100", 16, "bf16")
    assert m == want and m.overhead_s > 0
    # the costs outside the layers are folded where every net is built (predict, CLI, build)
    net = variants.build("allreduce", m, Cluster(workers=1), granularity="coarse")
    assert net.transitions["w0.compute"].duration.mean == pytest.approx(want.step_s)


def test_without_options_the_builtin_cnn_is_untouched():
    assert _load_model(_args("--model", "resnet50")) is models.load("resnet50")
    m = _load_model(_args("--model", "resnet50", "--batch-size", "64"))
    assert m == models.load("resnet50").scaled(batch_size=64)


def test_device_on_a_profile_without_ops_is_a_usage_error(capsys, tmp_path):
    bare = tmp_path / "bare.json"
    ModelProfile("bare", [("a", 1e-3, 1e-3, 8)], 4).save(bare)
    rc = main(["draw", "allreduce", "--model", str(bare), "--device", "A100",
               "--out", str(tmp_path / "n.dot")])
    err = capsys.readouterr().err
    assert rc == 2 and "no per-layer ops" in err and "bare" in err
    # PipeDream's profiles carry ops, but their GPU is unnamed: --from-device is needed
    rc = main(["draw", "allreduce", "--model", "resnet50", "--device", "A100",
               "--out", str(tmp_path / "n.dot")])
    assert rc == 2 and "from-device" in capsys.readouterr().err
    rc = main(["draw", "allreduce", "--model", "gpt2_xl", "--device", "V100",
               "--out", str(tmp_path / "n.dot")])
    assert rc == 2 and "V100 has no 'bf16'" in capsys.readouterr().err
    rc = main(["draw", "allreduce", "--model", "gpt2_xl", "--device", "TPU",
               "--out", str(tmp_path / "n.dot")])
    assert rc == 2 and "unknown device 'TPU'" in capsys.readouterr().err


def test_models_table_step_includes_costs_outside_the_layers(capsys):
    import json

    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    bert = rows["bert_large"]
    p = models.load("bert_large")
    assert bert["step_s"] == pytest.approx(p.compute_s + p.loss_s + p.update_s)
    assert bert["step_s"] > bert["forward_s"] + bert["backward_s"]
    assert bert["precision"] == "fp16" and bert["device"] == "A100"
    r50 = rows["resnet50"]
    assert r50["step_s"] == pytest.approx(r50["forward_s"] + r50["backward_s"])
