"""ModelProfile / Layer: derived views, scaling, JSON round trip and bad input."""

import dataclasses
import json
import math

import pytest

from sgdnet import Layer, ModelProfile
from sgdnet.errors import ProfileError, SgdnetError, UnitError


def toy():
    # layer i: fwd (i+1) ms, bwd 2(i+1) ms, (i+1) MB of gradients
    return ModelProfile("toy", [Layer(f"l{i}", (i + 1) * 1e-3, 2 * (i + 1) * 1e-3, (i + 1) * 1e6)
                                for i in range(6)], batch_size=32, device="dev", source="hand")


def test_totals_closed_form():
    p = toy()
    assert p.n_layers == 6 == len(p)
    assert p.forward_s == pytest.approx(21e-3)         # 1+..+6 ms
    assert p.backward_s == pytest.approx(42e-3)
    assert p.compute_s == pytest.approx(63e-3)
    assert p.grad_bytes == 21e6


def test_backward_order_last_layer_first():
    assert toy().backward_order() == [5, 4, 3, 2, 1, 0]


def _check_partition(p, buckets):
    flat = [i for b in buckets for i in b]
    assert flat == p.backward_order()


@pytest.mark.parametrize("thr", [0, 1e6, 2.5e6, "5MB", 7e6, 11e6, 30e6, math.inf])
def test_ddp_buckets_partition_and_threshold(thr):
    p = toy()
    t = thr if isinstance(thr, float) else (5e6 if thr == "5MB" else float(thr))
    bs = p.buckets(thr)
    _check_partition(p, bs)
    sizes = [sum(p.layers[i].grad_bytes for i in b) for b in bs]
    for b, s in zip(bs[:-1], sizes[:-1]):
        assert s >= t                                   # closed when threshold reached
        assert len(b) == 1 or s - p.layers[b[-1]].grad_bytes < t  # ...and not earlier
    assert p.bucket_bytes(thr) == sizes


def test_ddp_buckets_example():
    # backward sizes 6,5,4,3,2,1 MB, threshold 7MB -> [6,5]=11, [4,3]=7, [2,1]=3
    assert toy().buckets("7MB") == [[5, 4], [3, 2], [1, 0]]


@pytest.mark.parametrize("thr", [1e6, 5e6, 7e6, 11e6, 100e6])
def test_horovod_buckets_never_exceed_unless_single(thr):
    p = toy()
    bs = p.buckets(thr, policy="horovod")
    _check_partition(p, bs)
    for k, b in enumerate(bs):
        s = sum(p.layers[i].grad_bytes for i in b)
        assert s <= thr or len(b) == 1
        if k + 1 < len(bs):  # the next layer would not have fit
            assert s + p.layers[bs[k + 1][0]].grad_bytes > thr
    assert toy().buckets(7e6, policy="horovod") == [[5], [4], [3, 2], [1, 0]]


def test_buckets_bad_input():
    with pytest.raises(ProfileError, match="policy"):
        toy().buckets(1e6, policy="nccl")
    with pytest.raises(UnitError):
        toy().buckets("5 parsecs")


def test_scaled_doubles_times_and_keeps_bytes():
    p = toy()
    q = p.scaled(batch_size=64)
    assert q.batch_size == 64
    for a, b in zip(p.layers, q.layers):
        assert b.forward_s == pytest.approx(2 * a.forward_s)
        assert b.backward_s == pytest.approx(2 * a.backward_s)
        assert b.grad_bytes == a.grad_bytes
    r = p.scaled(speed=4.0)
    assert r.compute_s == pytest.approx(p.compute_s / 4)
    assert r.batch_size == 32 and "x4" in r.device
    assert "scaled" in q.source and q.source.startswith("hand")
    assert p.scaled() == p


@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"batch_size": 2.5}, {"speed": 0},
                                {"speed": -1.0}, {"speed": math.nan}])
def test_scaled_bad(kw):
    with pytest.raises(ProfileError):
        toy().scaled(**kw)


def test_coarse_keeps_totals():
    p = toy()
    c = p.coarse()
    assert c.n_layers == 1
    assert c.forward_s == pytest.approx(p.forward_s)
    assert c.backward_s == pytest.approx(p.backward_s)
    assert c.grad_bytes == p.grad_bytes
    assert c.layers[0].cv is None


def test_coarse_cv_of_independent_sum():
    p = ModelProfile("m", [Layer("a", 1.0, 0.0, 1, cv=0.3), Layer("b", 0.0, 1.0, 1, cv=0.4)], 1)
    # std of sum = sqrt(0.3^2 + 0.4^2) = 0.5 over a mean of 2
    assert p.coarse().layers[0].cv == pytest.approx(0.25)


def test_layer_cv_fallback():
    p = ModelProfile("m", [Layer("a", 1, 1, 1, cv=0.1), Layer("b", 1, 1, 1)], 1, cv=0.2)
    assert p.layer_cv(0) == 0.1 and p.layer_cv(1) == 0.2
    assert ModelProfile("m", [Layer("b", 1, 1, 1)], 1).layer_cv(0, default=0.05) == 0.05


def test_units_in_layers_and_tuples():
    p = ModelProfile("m", [("a", "3ms", "6ms", "2MB"), {"name": "b", "forward_s": 1e-3,
                                                         "backward_s": 0, "grad_bytes": 5}], 8)
    assert p.layers[0].forward_s == pytest.approx(3e-3)
    assert p.layers[0].grad_bytes == 2e6


def test_json_round_trip(tmp_path):
    p = ModelProfile("m", [Layer("a", 1e-3, 2e-3, 4e6, cv=0.05), Layer("b", 3e-3, 4e-3, 1e6)],
                     16, device="V100", source="test", cv=0.1, meta={"k": [1, 2]})
    f = p.save(tmp_path / "m.json")
    d = json.loads(f.read_text())
    assert d["schema_version"] == 1
    assert d["totals"]["grad_bytes"] == 5e6
    assert ModelProfile.load(f) == p
    assert ModelProfile.from_dict(p.to_dict()) == p


def test_immutable():
    p = toy()
    with pytest.raises(AttributeError):
        p.name = "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.layers[0].forward_s = 1.0


@pytest.mark.parametrize("layer, field", [
    (("a", -1.0, 0, 0), "forward_s"),
    (("a", 0, math.nan, 0), "backward_s"),
    (("a", 0, 0, -5), "grad_bytes"),
    (("a", 0, math.inf, 0), "backward_s"),
    (("a", "1 fortnight", 0, 0), "forward_s"),
    (("a", 0, 0, 0, -0.1), "cv"),
    (("", 0, 0, 0), "name"),
])
def test_bad_layers(layer, field):
    with pytest.raises(ProfileError, match=field) as info:
        ModelProfile("m", [layer], 1)
    assert isinstance(info.value, SgdnetError)


def test_bad_layer_direct():
    with pytest.raises(ProfileError, match="forward_s"):
        Layer("a", -1e-3, 0, 0)


@pytest.mark.parametrize("kw, pat", [({"layers": []}, "at least one"),
                                     ({"batch_size": 0}, "batch_size"),
                                     ({"batch_size": True}, "batch_size"),
                                     ({"name": ""}, "name"),
                                     ({"cv": -1}, "cv")])
def test_bad_profile(kw, pat):
    args = {"name": "m", "layers": [("a", 1, 1, 1)], "batch_size": 1} | kw
    with pytest.raises(ProfileError, match=pat):
        ModelProfile(**args)


def _write(tmp_path, obj, text=None):
    f = tmp_path / "bad.json"
    f.write_text(text if text is not None else json.dumps(obj))
    return f


GOOD = {"schema_version": 1, "name": "m", "batch_size": 4,
        "layers": [{"name": "a", "forward_s": 1e-3, "backward_s": 2e-3, "grad_bytes": 10}]}


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("schema_version"), "schema_version"),
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d.pop("layers"), "layers"),
    (lambda d: d.update(layers={"a": 1}), "layers"),
    (lambda d: d["layers"][0].update(forward_s=-1), r"layers\[0\]\.forward_s"),
    (lambda d: d["layers"][0].update(backward_s="fast"), r"layers\[0\]\.backward_s"),
    (lambda d: d["layers"][0].pop("grad_bytes"), r"layers\[0\]\.grad_bytes"),
    (lambda d: d["layers"][0].update(colour="red"), r"layers\[0\]"),
    (lambda d: d.update(batchsize=3), "batchsize"),
    (lambda d: d.update(batch_size=-4), "batch_size"),
])
def test_malformed_file_names_path_and_field(tmp_path, mutate, field):
    d = json.loads(json.dumps(GOOD))
    mutate(d)
    f = _write(tmp_path, d)
    with pytest.raises(ProfileError, match=field) as info:
        ModelProfile.load(f)
    assert str(f) in str(info.value)


def test_not_json_and_missing_file(tmp_path):
    f = _write(tmp_path, None, text='{"schema_version": 1,')
    with pytest.raises(ProfileError, match="line 1") as info:
        ModelProfile.load(f)
    assert str(f) in str(info.value)
    with pytest.raises(ProfileError, match="cannot read"):
        ModelProfile.load(tmp_path / "nope.json")
    with pytest.raises(ProfileError, match="top level"):
        ModelProfile.load(_write(tmp_path, [1, 2]))
