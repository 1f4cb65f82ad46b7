"""The built-in model library, checked against ../shared/data read directly.

The totals are recomputed here with a deliberately simple parser (string splitting, no
topological sort, no folding), so they do not share code paths with scripts/build_models.py.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sgdnet import ModelProfile, models
from sgdnet.errors import ProfileError, UnknownNameError

REPO = Path(__file__).resolve().parents[1]
# ../shared/data next to a checkout; a git worktree under <root>/wt/<name> finds <root>/shared
DATA = next((d for d in (q / "shared" / "data" for q in REPO.parents) if d.is_dir()),
            REPO.parent / "shared" / "data")
needs_data = pytest.mark.skipif(not (DATA / "pipedream_profiles").is_dir(),
                                reason=f"reference data not found at {DATA}")

REQUIRED = ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101", "inception_v3",
            "densenet121", "gnmt"]
PIPEDREAM = REQUIRED + ["resnext50", "squeezenet1_0"]


def raw_nodes(model):
    """(repr, fwd_ms, bwd_ms, activation, parameter_bytes) of every node line."""
    out = []
    for line in (DATA / "pipedream_profiles" / f"{model}.graph.txt").read_text().splitlines():
        if line.startswith("\t") or not line.startswith("node"):
            continue
        parts = line.split(" -- ")
        kv = dict(x.split("=") for x in parts[-1].split(", "))
        out.append((parts[1], float(kv["forward_compute_time"]),
                    float(kv["backward_compute_time"]), kv["activation_size"],
                    float(kv["parameter_size"])))
    return out


def published_params():
    tot = {}
    for line in (DATA / "layer_params.txt").read_text().splitlines():
        m = re.match(r"## (\w+?)(?:_imagenet)? .*total params = ([\d,]+)", line)
        if m:
            tot[m.group(1)] = int(m.group(2).replace(",", ""))
    return tot


def published_layers(section):
    counts, on = [], False
    for line in (DATA / "layer_params.txt").read_text().splitlines():
        if line.startswith("## "):
            on = line.startswith(f"## {section} ")
            continue
        if on:
            m = re.search(r"\s([\d,]+)\s+\(", line)
            if m:
                counts.append(int(m.group(1).replace(",", "")))
    return counts


def test_names_lists_library():
    n = models.names()
    assert n == sorted(n)
    for name in PIPEDREAM:
        assert name in n


@needs_data
@pytest.mark.parametrize("model", PIPEDREAM)
def test_totals_match_source_files(model):
    prof = models.load(model)
    nodes = raw_nodes(model)
    compute = [x for x in nodes if not x[0].startswith("Input")]
    assert prof.forward_s == pytest.approx(sum(x[1] for x in compute) / 1e3, rel=1e-9)
    assert prof.backward_s == pytest.approx(sum(x[2] for x in compute) / 1e3, rel=1e-9)
    assert prof.grad_bytes == sum(x[4] for x in nodes)
    assert prof.n_layers == sum(1 for x in nodes if x[4] > 0)
    assert all(la.grad_bytes > 0 for la in prof.layers)
    assert "PipeDream" in prof.source and "Input" in prof.source


@needs_data
@pytest.mark.parametrize("model, side", [("alexnet", 224), ("vgg16", 224), ("resnet18", 224),
                                         ("resnet50", 224), ("resnet101", 224),
                                         ("resnext50", 224), ("densenet121", 224),
                                         ("squeezenet1_0", 224), ("inception_v3", 299)])
def test_batch_from_input_activation(model, side):
    act = [float(x[3]) for x in raw_nodes(model) if x[0] == "Input"][0]
    assert models.load(model).batch_size * 3 * side * side * 4 == act


@needs_data
def test_gnmt_batch_from_lstm_state():
    # LSTM(…, 1024) outputs [output; h_n; c_n]; h_n is 1 x B x 1024 fp32
    lstm = [x for x in raw_nodes("gnmt") if x[0].startswith("LSTM(")]
    h = {float(x[3].strip("[]").split(";")[1]) for x in lstm}
    assert len(h) == 1
    prof = models.load("gnmt")
    assert prof.batch_size * 1024 * 4 == h.pop()
    assert "LSTM" in prof.source and "sentences" in prof.source


@needs_data
@pytest.mark.parametrize("model", ["resnet18", "resnet50", "vgg16", "alexnet"])
def test_gradient_bytes_match_published_parameter_totals(model):
    pub = published_params()[model]
    assert models.load(model).grad_bytes == pytest.approx(4 * pub, rel=0.01)


def test_headline_totals():
    # the figures, written out
    assert models.load("resnet50").grad_bytes == pytest.approx(25_557_032 * 4, rel=0.01)
    assert models.load("vgg16").grad_bytes == pytest.approx(138_357_544 * 4, rel=0.01)


@needs_data
@pytest.mark.parametrize("model, section", [("resnet18", "resnet18_imagenet"),
                                            ("resnet50", "resnet50_imagenet"),
                                            ("vgg16", "vgg16_imagenet"), ("alexnet", "alexnet")])
def test_per_layer_sizes_match_layer_params(model, section):
    expected = sorted(4 * c for c in published_layers(section))
    assert sorted(la.grad_bytes for la in models.load(model).layers) == expected


def test_first_and_last_layers_resnet50():
    p = models.load("resnet50")
    assert p.layers[0].grad_bytes == 9408 * 4            # conv1 3->64 k7
    assert p.layers[-1].grad_bytes == (2048 * 1000 + 1000) * 4  # fc
    assert p.backward_order()[0] == p.n_layers - 1


def test_unknown_name_lists_known():
    with pytest.raises(UnknownNameError) as info:
        models.load("resnet51")
    msg = str(info.value)
    assert "resnet51" in msg and "resnet50" in msg and "vgg16" in msg


def test_load_case_insensitive_and_by_path(tmp_path):
    assert models.load("ResNet18") == models.load("resnet18")
    p = models.load("alexnet").scaled(batch_size=128)
    f = p.save(tmp_path / "mine.json")
    assert models.load(str(f)) == p
    assert models.load(f) == p
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "name": "x", "batch_size": 1,
                               "layers": [{"name": "a", "forward_s": -1, "backward_s": 0,
                                           "grad_bytes": 0}]}))
    with pytest.raises(ProfileError, match=r"bad\.json.*layers\[0\]\.forward_s"):
        models.load(bad)


def test_every_builtin_file_is_valid_json_profile():
    for name in models.names():
        p = ModelProfile.load(models.path(name))
        assert p.name == name and p.batch_size >= 1 and p.compute_s > 0


@needs_data
def test_library_is_up_to_date_with_build_script():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "build_models.py"), "--check",
                        "--data", str(DATA)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
