"""The roofline compute model: closed forms, devices, re-timing, and the published
single-GPU BERT-large throughputs it was validated against (docs/validation.md)."""

import math

import pytest

from sgdnet import models
from sgdnet.errors import ProfileError, UnknownNameError
from sgdnet.workload import compute as C
from sgdnet.workload import optimizer as O
from sgdnet.workload import transformers as T
from sgdnet.workload.ops import Op
from sgdnet.workload.profile import Layer, ModelProfile


def test_roofline_closed_forms():
    dev = C.Device("toy", {"fp32": 1e12, "fp16": 8e12}, {"fp32": 1e12, "fp16": 2e12}, 1e11,
                   efficiency=0.5)
    mm = Op("mm", "matmul", flops=1e9, elems=1e6, param_elems=1e6)
    # fp32, batch 4: compute 4e9 / 0.5e12 = 8 ms; memory (4e6 + 1e6) * 4 B / 0.5e11 = 0.4 ms
    assert C.op_time(mm, dev, "fp32", 4) == pytest.approx(8e-3)
    # fp16: compute 4e9 / 4e12 = 1 ms; memory 5e6 * 2 / 0.5e11 = 0.2 ms; backward doubles
    assert C.op_time(mm, dev, "fp16", 4) == pytest.approx(1e-3)
    assert C.op_time(mm, dev, "fp16", 4, backward=True) == pytest.approx(2e-3)
    ew = Op("relu", "vector", flops=1e6, elems=2e6)
    # memory-bound: 4 * 2e6 * 2 B / 0.5e11 = 0.32 ms (compute 4e6 / 1e12 = 4 us)
    assert C.op_time(ew, dev, "fp16", 4) == pytest.approx(3.2e-4)
    assert C.ops_time([mm, ew], dev, "fp16", 4) == pytest.approx((1.32e-3, 2.64e-3))
    # Adam: 28 B per parameter at 0.5 x 1e11 B/s
    assert O.update_time(1e6, dev, "adam") == pytest.approx(28e6 / 5e10)


def test_builtin_devices_datasheet_ratios():
    v, a, h = (C.get_device(n) for n in ("V100", "a100", "H100"))
    assert v.matmul_flops["fp16"] / v.matmul_flops["fp32"] == pytest.approx(125 / 15.7)
    assert a.matmul_flops["bf16"] == 2 * a.matmul_flops["tf32"] == 312e12
    assert h.matmul_flops["fp16"] == pytest.approx(2 * h.matmul_flops["tf32"], rel=1e-3)
    assert (v.mem_bw, a.mem_bw, h.mem_bw) == (900e9, 2039e9, 3.35e12)
    assert v.precisions == ("fp32", "fp16")
    with pytest.raises(ProfileError, match="V100 has no 'bf16'"):
        v.check_precision("bf16")
    with pytest.raises(UnknownNameError, match="V100, A100, A100-40GB, RTX3090, H100"):
        C.get_device("TPUv4")


@pytest.mark.parametrize("kw, pat", [
    ({"mem_bw": 0}, "mem_bw"), ({"efficiency": 1.5}, "above 1"), ({"efficiency": 0}, "efficiency"),
    ({"matmul_flops": {"fp8": 1e15}}, "fp8"), ({"matmul_flops": {"fp32": 1, "fp16": 2}},
                                               "vector_flops lacks"),
])
def test_device_bad_input(kw, pat):
    args = {"name": "x", "matmul_flops": {"fp32": 1e12}, "vector_flops": {"fp32": 1e12},
            "mem_bw": 1e11} | kw
    with pytest.raises(ProfileError, match=pat):
        C.Device(**args)


def test_retime_of_a_model_built_profile_equals_a_rebuild():
    p = T.gpt2_medium(seq_len=512, batch_size=4, device="A100", precision="fp16")
    q = C.retime(p, device="H100", batch_size=16, precision="bf16")
    r = T.gpt2_medium(seq_len=512, batch_size=16, device="H100", precision="bf16")
    assert q.device == "H100" and q.batch_size == 16 and q.precision == "bf16"
    for a, b in zip(q.layers, r.layers):
        assert a.forward_s == pytest.approx(b.forward_s, rel=1e-9)
        assert a.backward_s == pytest.approx(b.backward_s, rel=1e-9)
        assert a.update_s == pytest.approx(b.update_s, rel=1e-9)
        assert a.grad_bytes == b.grad_bytes
    assert q.loss_s == pytest.approx(r.loss_s, rel=1e-9)    # from meta["loss_ops"]
    assert "re-timed" in q.source
    assert C.retime(p) is p


def test_retime_of_a_measured_profile_keeps_its_detail_and_follows_ratios():
    ops = (Op("mm", "matmul", 1e9, 1e3),)
    p = ModelProfile("m", [Layer("a", 3e-3, 5e-3, 40, ops=ops)], 8, device="V100",
                     precision="fp32")
    q = C.retime(p, device="A100", precision="tf32")
    ratio = C.op_time(ops[0], "A100", "tf32", 8) / C.op_time(ops[0], "V100", "fp32", 8)
    assert q.layers[0].forward_s == pytest.approx(3e-3 * ratio)
    assert q.layers[0].backward_s == pytest.approx(5e-3 * ratio)


def test_retime_needs_ops_for_a_device_but_not_for_a_batch():
    bare = ModelProfile("bare", [Layer("a", 1e-3, 2e-3, 4)], 8)
    with pytest.raises(ProfileError, match="no per-layer ops"):
        C.retime(bare, device="A100")
    p = models.load("resnet50")  # ops, but measured on PipeDream's unnamed GPU
    with pytest.raises(ProfileError, match="from_device"):
        C.retime(p, device="A100")
    assert C.retime(p, batch_size=64) == p.scaled(batch_size=64)
    q = ModelProfile("m", [Layer("a", 1, 1, 4, ops=[Op("x", "vector", 1, 1)])], 1,
                     device="my GPU", precision="fp32")
    with pytest.raises(ProfileError, match="from_device"):
        C.retime(q, device="A100")
    assert C.retime(q, device="A100", from_device="V100").device == "A100"
    with pytest.raises(ProfileError, match="positive integer"):
        C.retime(q, batch_size=0)


#: Published single-GPU BERT-large pre-training throughput (sequences/s), NVIDIA
#: DeepLearningExamples PyTorch/LanguageModeling/BERT README, pytorch:21.11 NGC container:
#: (device, precision, sequence length, micro-batch per GPU, sequences/s).
CALIBRATION = ("A100", "fp16", 128, 256, 580)
VALIDATION = [("A100", "tf32", 128, 128, 317), ("V100", "fp16", 128, 64, 224)]


def _bert_rate(dev, prec, seq, batch):
    p = T.bert_large(seq_len=seq, batch_size=batch, device=dev, precision=prec)
    return batch / (p.compute_s + p.loss_s)     # optimizer amortised over 32-256 micro-steps


def test_efficiency_is_the_calibration_point():
    dev, prec, seq, b, pub = CALIBRATION
    assert _bert_rate(dev, prec, seq, b) == pytest.approx(pub, rel=0.01)


@pytest.mark.parametrize("dev, prec, seq, batch, published", VALIDATION)
def test_bert_large_single_gpu_throughput_within_20_percent(dev, prec, seq, batch, published):
    assert abs(_bert_rate(dev, prec, seq, batch) / published - 1) < 0.20


def test_bigger_gpu_is_faster_and_bytes_do_not_change():
    p = models.load("gpt2_medium")
    times = [C.retime(p, device=d).compute_s for d in ("V100", "A100", "H100")]
    assert times[0] > times[1] > times[2]
    assert math.isclose(C.retime(p, device="V100").grad_bytes, p.grad_bytes)


#: timm's training benchmark on one RTX 3090, AMP (huggingface/pytorch-image-models,
#: results/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv): model, architecture, batch,
#: train_samples_per_sec, param_count (millions).
TIMM = [("vit_large_patch16_224", dict(n_layers=24, d_model=1024, n_heads=16, patch=16,
                                       image=224), 64, 117.08, 304.33),
        ("vit_huge_patch14_224", dict(n_layers=32, d_model=1280, n_heads=16, patch=14,
                                      image=224), 16, 39.94, 632.05),
        ("vit_base_patch16_384", dict(n_layers=12, d_model=768, n_heads=12, patch=16,
                                      image=384), 32, 96.96, 86.86)]


@pytest.mark.parametrize("name, arch, batch, published, params_m", TIMM)
def test_vit_on_rtx3090_within_20_percent_of_timm_benchmark(name, arch, batch, published,
                                                            params_m):
    p = T.vit(name, batch_size=batch, device="RTX3090", precision="fp16", optimizer="momentum",
              **arch)
    n = p.meta["parameters"]
    assert round(n / 1e6, 2) == params_m                  # timm's own parameter count
    rate = batch / (p.compute_s + p.loss_s + O.update_time(n, "RTX3090", "momentum"))
    assert abs(rate / published - 1) < 0.20
