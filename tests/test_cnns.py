"""CNN profiles with ops: the architecture builders (sgdnet.workload.cnns), the ops derived from
the PipeDream graphs (scripts/build_models.py), re-timing them and their gradient dtype.

References, none of them produced by this code:

* torchvision's published parameter counts and forward multiply-accumulates per image
  (``num_params`` and ``_ops``, the "Params" and "GFLOPS" columns of the model table;
  ``torchvision/models/resnet.py``, ``vgg.py``, ``alexnet.py``, ``inception.py``,
  ``densenet.py``, ``squeezenet.py``);
* ``tests/data/reference/layer_params.txt`` (per-layer parameter counts, read directly);
* Inception-v4 (no torchvision model): osmr/imgclsmob ``pytorch/README.md`` (ImageNet-1K table,
  InceptionV4 row, ported from Cadene/pretrained-models.pytorch: 42,679,816 parameters, 1000
  classes, BatchNorm2d with gamma and beta; 12,304.93M FLOPs), the same 42,679,816 in keras-hub's
  ``inception_v4_imagenet`` preset metadata, and Open Model Zoo
  ``models/public/googlenet-v4-tf/googlenet-v4-tf.md`` (TF-slim's checkpoint, 1001 outputs:
  24.584 GFLOPs, 42.648 MParams); tf_cnn_benchmarks' builder defaults (``datasets.py``
  ``ImageDataset(num_classes=1001)``, ``convnet_builder.py`` ``batch_norm(scale=False)``) and
  the paper's filter widths (Szegedy et al. 2017, figures 3-9) for the by-hand differences;
* convolution arithmetic written out by hand.
"""

from pathlib import Path

import pytest
from test_models import published_layers

from sgdnet import models
from sgdnet.errors import ProfileError
from sgdnet.workload import cnns
from sgdnet.workload import compute as C

DATA = Path(__file__).resolve().parent / "data" / "reference"

#: torchvision num_params (weights' metadata).
NUM_PARAMS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
              "resnet101": 44_549_160, "resnet152": 60_192_808, "vgg16": 138_357_544,
              "vgg19": 143_667_240, "alexnet": 61_100_840}
#: torchvision _ops: forward GMACs per image at 224x224 (299x299 for Inception-v3, eval
#: mode: no auxiliary classifier), printed with 3 decimals.
GMACS = {"resnet18": 1.814, "resnet34": 3.664, "resnet50": 4.089, "resnet101": 7.801,
         "resnet152": 11.514, "vgg16": 15.47, "vgg19": 19.632, "alexnet": 0.714,
         "resnext50": 4.23, "densenet121": 2.834, "squeezenet1_0": 0.819}

BUILDERS = {"resnet18": cnns.resnet18, "resnet34": cnns.resnet34, "resnet50": cnns.resnet50,
            "resnet101": cnns.resnet101, "resnet152": cnns.resnet152, "vgg16": cnns.vgg16,
            "vgg19": cnns.vgg19, "alexnet": cnns.alexnet}


def macs(profile):
    return sum(o.flops for la in profile.layers for o in la.ops if o.kind == "matmul") / 2


@pytest.mark.parametrize("model", sorted(NUM_PARAMS))
def test_parameter_counts_are_torchvisions(model):
    p = BUILDERS[model]()
    assert p.meta["parameters"] == NUM_PARAMS[model]
    assert p.grad_bytes == 4 * NUM_PARAMS[model]
    assert all(la.grad_bytes == sum(t.nbytes for t in la.tensors) for la in p.layers)


def test_inception_v3_parameters_with_and_without_the_auxiliary_classifier():
    # torchvision Inception_V3_Weights num_params 27,161,264 (aux_logits=True); the auxiliary
    # head is conv0 768*128 + bn 2*128, conv1 128*768*25 + bn 2*768, fc 768*1000 + 1000
    aux = 768 * 128 + 256 + 128 * 768 * 25 + 1536 + 768 * 1000 + 1000
    assert cnns.inception_v3().meta["parameters"] == 27_161_264
    assert cnns.inception_v3(aux_logits=False).meta["parameters"] == 27_161_264 - aux \
        == 23_834_568


#: Inception-v4 as the PyTorch/Keras ports count it (1000 classes, BatchNorm gamma and beta):
#: osmr/imgclsmob pytorch/README.md and keras-hub's inception_v4_imagenet preset.
V4_PORTS = 42_679_816
#: BatchNorm channels = every convolution's filters, from the paper's figures 3-9: stem
#: 32+32+64+96+(64+96)+(64+64+64+96)+192; Inception-A 96+64+96+64+96+96+96 (x4);
#: Reduction-A (k, l, m, n) = (192, 224, 256, 384); Inception-B
#: 384+192+224+256+192+192+224+224+256+128 (x7); Reduction-B 192+192+256+256+320+320;
#: Inception-C 256+384+256+256+384+448+512+256+256+256 (x3)
V4_BN_CHANNELS = (32 + 32 + 64 + 96 + 160 + 288 + 192 + 4 * 608 + (192 + 224 + 256 + 384)
                  + 7 * 2272 + 1536 + 3 * 3264)
#: tf_cnn_benchmarks drops gamma (scale=False) and has one more class (1001: 1536 + 1 more)
V4_TF_CNN_BENCHMARKS = V4_PORTS - V4_BN_CHANNELS + 1537


def test_inception_v4_parameters_are_the_published_ports():
    assert 4 * 608 == 4 * (96 + 64 + 96 + 64 + 96 + 96 + 96)
    assert 2272 == 384 + 192 + 224 + 256 + 192 + 192 + 224 + 224 + 256 + 128
    assert 3264 == 256 + 384 + 256 + 256 + 384 + 448 + 512 + 256 + 256 + 256
    p = cnns.inception_v4(n_classes=1000, bn_scale=True)
    assert p.meta["parameters"] == V4_PORTS
    assert p.grad_bytes == 4 * V4_PORTS


def test_inception_v4_parameters_as_tf_cnn_benchmarks_builds_it():
    p = cnns.inception_v4()  # 1001 classes, BatchNorm beta only, no auxiliary head
    assert p.meta["parameters"] == V4_TF_CNN_BENCHMARKS == 42_649_769
    # Open Model Zoo's count of TF-slim's 1001-class checkpoint: 42.648 M
    assert p.meta["parameters"] == pytest.approx(42.648e6, rel=1e-4)
    assert all(la.grad_bytes == sum(t.nbytes for t in la.tensors) for la in p.layers)
    bns = [la for la in p.layers if la.name.endswith(".bn")]
    assert 2 * len(bns) == len(p.layers) - 1 and all(len(la.tensors) == 1 for la in bns)
    assert sum(la.grad_bytes for la in bns) == 4 * V4_BN_CHANNELS
    last = p.layers[-1]
    assert last.name == "Logits" and last.grad_bytes == 4 * (1536 * 1001 + 1001)
    # TF-slim's auxiliary head after Mixed_6h (17x17x1024): 5x5/3 pool -> 5x5, 1x1 conv to
    # 128 + beta, 5x5 conv to 768 + beta, linear to 1001
    aux = 1024 * 128 + 128 + 128 * 768 * 25 + 768 + 768 * 1001 + 1001
    assert cnns.inception_v4(aux_logits=True).meta["parameters"] == V4_TF_CNN_BENCHMARKS + aux


def test_inception_v4_macs_are_the_published_ones():
    # Open Model Zoo googlenet-v4-tf: 24.584 GFLOPs = 12.292 GMACs; imgclsmob 12,304.93 M
    # (both also count some non-matmul work); the convolutions and the classifier, within 2 %
    m = macs(cnns.inception_v4())
    assert m / 1e9 == pytest.approx(24.584 / 2, rel=0.02)
    assert m / 1e9 == pytest.approx(12.30493, rel=0.02)
    assert m - macs(cnns.inception_v4(n_classes=1000)) == 1536
    # the auxiliary head: 1x1 conv at 5x5, 5x5 conv to 1x1, linear
    aux = 1024 * 128 * 25 + 128 * 768 * 25 + 768 * 1001
    assert macs(cnns.inception_v4(aux_logits=True)) - m == aux
    # the stem's first convolution by hand: 3x3/2 VALID on 3x299x299 -> 32x149x149
    op = cnns.inception_v4().layers[0].ops[0]
    assert op.flops == 2 * 3 * 9 * 32 * 149 * 149


def test_inception_v4_builtin_is_tf_cnn_benchmarks_on_a_v100():
    p = models.load("inception_v4")
    assert p.grad_bytes == 4 * V4_TF_CNN_BENCHMARKS
    assert (p.batch_size, p.device, p.precision) == (64, "V100", "fp32")
    assert p.meta["image"] == 299 and p.meta["aux_logits"] is False
    assert p.meta["bn_scale"] is False


def test_inception_v4_refuses_bad_input():
    with pytest.raises(ProfileError, match="does not fit"):
        cnns.inception_v4(image=64)
    with pytest.raises(ProfileError, match="aux_logits must be True or False"):
        cnns.inception_v4(aux_logits=1)
    with pytest.raises(ProfileError, match="n_classes"):
        cnns.inception_v4(n_classes=0)


@pytest.mark.parametrize("model, section", [("resnet18", "resnet18_imagenet"),
                                            ("resnet50", "resnet50_imagenet"),
                                            ("vgg16", "vgg16_imagenet"),
                                            ("vgg19", "vgg19_imagenet"), ("alexnet", "alexnet")])
def test_per_layer_parameters_match_layer_params(model, section):
    expected = published_layers(section)
    assert [la.grad_bytes / 4 for la in BUILDERS[model]().layers] == expected


@pytest.mark.parametrize("model", sorted(NUM_PARAMS))
def test_builder_forward_macs_are_torchvisions(model):
    assert macs(BUILDERS[model]()) / 1e9 == pytest.approx(GMACS[model], abs=6e-4)


def test_inception_v3_macs():
    assert macs(cnns.inception_v3(aux_logits=False)) / 1e9 == pytest.approx(5.713, abs=6e-4)
    # the auxiliary head adds its convolutions and fc at 17x17 -> 5x5 -> 1x1
    aux = 768 * 128 * 25 + 128 * 768 * 25 + 768 * 1000
    assert macs(cnns.inception_v3()) - macs(cnns.inception_v3(aux_logits=False)) == aux


@pytest.mark.parametrize("model", ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101",
                                   "resnext50", "densenet121", "squeezenet1_0"])
def test_pipedream_profiles_carry_ops_with_torchvisions_macs(model):
    p = models.load(model)
    assert p.has_ops and p.precision == "fp32"
    assert macs(p) / 1e9 == pytest.approx(GMACS[model], abs=6e-4)


def test_the_issues_headline_flops():
    # ResNet-50 ~4.1 GMACs = 8.2 GFLOPs per image, VGG-16 ~15.5 GMACs, AlexNet ~0.72 GMACs
    assert 2 * macs(models.load("resnet50")) == pytest.approx(8.2e9, rel=0.01)
    assert macs(models.load("vgg16")) == pytest.approx(15.5e9, rel=0.01)
    assert macs(models.load("alexnet")) == pytest.approx(0.72e9, rel=0.01)


def test_graph_and_architecture_derivations_agree_layer_by_layer():
    # the graph derivation reads shapes from PipeDream's activation sizes, the builder
    # computes them from the architecture: the same convolutions either way
    def conv_flops(p):
        return sorted(o.flops for la in p.layers for o in la.ops if o.kind == "matmul")
    for name in ("resnet50", "vgg16", "alexnet", "resnet18"):
        assert conv_flops(models.load(name)) == conv_flops(BUILDERS[name]())


def test_first_convolution_by_hand():
    # ResNet conv1: 7x7, stride 2, padding 3 on 3x224x224 -> 64x112x112
    op = cnns.resnet50().layers[0].ops[0]
    assert op.kind == "matmul"
    assert op.flops == 2 * 3 * 7 * 7 * 64 * 112 * 112
    assert op.elems == 3 * 224 * 224 + 64 * 112 * 112
    assert op.param_elems == 64 * 3 * 7 * 7


def test_parameterless_ops_join_the_module_executed_before_them():
    p = cnns.resnet50()
    by = {la.name: [o.name for o in la.ops] for la in p.layers}
    assert by["bn1"] == ["batchnorm", "relu", "maxpool"]
    assert by["layer1.0.downsample.1"] == ["batchnorm", "add", "relu"]  # the block's end
    assert by["layer1.1.bn3"] == ["batchnorm", "add", "relu"]
    assert [la.name for la in p.layers][-1] == "fc"


def test_builtin_architecture_cnns_are_in_the_library():
    expected = NUM_PARAMS | {"inception_v4": V4_TF_CNN_BENCHMARKS}
    for name, (fn, kw) in cnns.BUILTIN.items():
        p = models.load(name)
        assert p.device == kw["device"] and p.precision == "fp32" and p.has_ops
        assert p.grad_bytes == 4 * expected[name]
        assert p.meta["builder"] == "sgdnet.workload.cnns"
        ref = fn(**kw)
        assert p.compute_s == pytest.approx(ref.compute_s, rel=1e-9)
    assert "resnet152" in models.names() and "inception_v4" in models.names()


def test_retime_a_pipedream_cnn_needs_its_device_and_follows_the_ops():
    p = models.load("resnet50")
    with pytest.raises(ProfileError, match="from_device"):
        C.retime(p, device="T4", precision="fp16")
    q = C.retime(p, device="T4", precision="fp16", from_device="V100")
    assert q.device == "T4" and q.precision == "fp16"
    for la, lb in zip(p.layers, q.layers):
        old = C.ops_time(la.ops, "V100", "fp32", p.batch_size)
        new = C.ops_time(la.ops, "T4", "fp16", p.batch_size)
        assert lb.forward_s == pytest.approx(la.forward_s * new[0] / old[0], rel=1e-12)
        assert lb.backward_s == pytest.approx(la.backward_s * new[1] / old[1], rel=1e-12)
    assert q.grad_bytes == p.grad_bytes  # AMP keeps fp32 gradients


def test_conv_roofline_by_hand_on_t4():
    # conv1 of ResNet-50 at batch 64 in fp16 on a T4: compute-bound at 65 TFLOPS x 0.57
    op = cnns.resnet50().layers[0].ops[0]
    flops = 64 * 2 * 3 * 49 * 64 * 112 * 112
    bytes_ = (64 * (3 * 224 * 224 + 64 * 112 * 112) + 64 * 147) * 2
    expect = max(flops / (65e12 * C.EFFICIENCY), bytes_ / (320e9 * C.EFFICIENCY))
    assert C.op_time(op, "T4", "fp16", 64) == pytest.approx(expect, rel=1e-12)


def test_batch_only_on_an_unnamed_device_scales_linearly():
    p = models.load("vgg16")
    assert C.retime(p, batch_size=32) == p.scaled(batch_size=32)


def test_grad_dtype_sets_the_gradient_bytes():
    p = models.load("resnet152")
    h = C.retime(p, precision="fp16", grad_dtype="fp16")
    assert h.grad_bytes == p.grad_bytes / 2 == 2 * NUM_PARAMS["resnet152"]
    assert all(t.nbytes * 2 == u.nbytes for la, lb in zip(h.layers, p.layers)
               for t, u in zip(la.tensors, lb.tensors))
    assert h.meta["grad_dtype"] == "fp16" and h.precision == "fp16"
    assert C.retime(h, grad_dtype="fp32").grad_bytes == p.grad_bytes
    assert C.retime(p, precision="fp16").grad_bytes == p.grad_bytes
    # without ops too (bytes only)
    r = models.load("resnet50")
    assert C.retime(r, grad_dtype="bf16").grad_bytes == r.grad_bytes / 2
    assert C.retime(r, grad_dtype="bf16").compute_s == r.compute_s
    with pytest.raises(ProfileError, match="gradient dtype 'int8'"):
        C.retime(p, grad_dtype="int8")


def test_bad_architectures_are_refused():
    with pytest.raises(ProfileError, match="depth 42"):
        cnns.resnet(depth=42)
    with pytest.raises(ProfileError, match="VGG depth 11"):
        cnns.vgg(depth=11)
    with pytest.raises(ProfileError, match="does not fit"):
        cnns.alexnet(image=32)
    with pytest.raises(ProfileError, match="batch_size"):
        cnns.resnet18(batch_size=0)
    with pytest.raises(ProfileError, match="K80 has no 'fp16'"):
        cnns.resnet18(device="K80", precision="fp16")
