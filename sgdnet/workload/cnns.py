"""Convolutional network profiles from their architecture: ResNet, VGG, AlexNet, Inception-v3
and Inception-v4.

Like :mod:`sgdnet.workload.transformers`, a builder turns an architecture into a
:class:`~sgdnet.workload.profile.ModelProfile` whose

* **layers** are the parameter-carrying modules in forward order, named as torchvision
  registers them (``conv1``, ``layer1.0.bn2``, ``layer2.0.downsample.0``, ``features.0``,
  ``Mixed_5b.branch1x1.conv``, ``fc``...): every ``Conv2d``, ``BatchNorm2d`` and ``Linear``;
  parameterless work (ReLU, pooling, residual adds, concatenations, dropout) is folded into
  the module executed last before it, as in the PipeDream-derived library
  (``scripts/build_models.py``);
* **tensors** are each module's ``weight`` and ``bias`` (fp32 gradients, 4 bytes per
  parameter; BatchNorm's running statistics are buffers, not gradients), so the parameter
  count is exact from the architecture;
* **ops** are those of :mod:`sgdnet.workload.ops` (convolutions and linear layers as matmuls,
  the rest as vector ops), per sample, from the shapes the architecture gives at the stated
  image size; the **times** are those ops on a :class:`~sgdnet.workload.compute.Device` by
  the roofline of :mod:`sgdnet.workload.compute`;
* **step costs**: the softmax cross-entropy loss (plus Inception's auxiliary classifier's,
  when present) as ``loss_s``; the optimizer's per-tensor update as each tensor's
  ``update_s`` (SGD with momentum by default, torchvision's and NVIDIA's recipe).

Architectures are torchvision's (``torchvision/models/resnet.py``, ``vgg.py``,
``alexnet.py``, ``inception.py``). torchvision's ResNet bottleneck strides in its 3x3
convolution ("ResNet v1.5", also NVIDIA DeepLearningExamples' ResNet-50), not in the first
1x1 as the original paper (v1) does: the parameters are the same, v1.5 costs ~5 % more
FLOPs (torchvision's 4.09 GMACs for ResNet-50, against 3.9 for v1).
Parameter counts equal torchvision's published ``num_params`` (ResNet-18 11,689,512,
ResNet-34 21,797,672, ResNet-50 25,557,032, ResNet-101 44,549,160, ResNet-152 60,192,808,
VGG-16 138,357,544, VGG-19 143,667,240, AlexNet 61,100,840, Inception-v3 27,161,264 with
the auxiliary classifier, 23,834,568 without) and the forward multiply-accumulates its
``_ops`` metadata (GFLOPS column of the model table); ``tests/test_cnns.py`` checks both.
Inception-v4, which torchvision lacks, is TF-slim's and tf_cnn_benchmarks' (see
:func:`inception_v4`): 42,649,769 parameters as tf_cnn_benchmarks trains it (1001 classes,
BatchNorm beta only), 42,679,816 as the PyTorch/Keras ports count it (1000 classes,
BatchNorm gamma and beta; osmr/imgclsmob ``pytorch/README.md``, keras-hub's
``inception_v4_imagenet`` preset), 12.25 forward GMACs at 299x299 (Open Model Zoo
``googlenet-v4-tf``: 24.584 GFLOPs, i.e. 12.29 GMACs).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ProfileError
from .compute import Device, get_device, ops_time
from .ops import (
    Op,
    batchnorm_op,
    conv2d_op,
    eltwise_op,
    linear_op,
    pool_op,
    softmax_xent_op,
)
from .optimizer import update_time
from .profile import Layer, ModelProfile, Tensor
from .transformers import ArchLayer

__all__ = ["resnet", "vgg", "alexnet", "inception_v3", "inception_v4", "resnet18", "resnet34",
           "resnet50", "resnet101", "resnet152", "vgg16", "vgg19", "RESNET_BLOCKS",
           "VGG_CONFIGS", "BUILTIN"]

_GRAD_BYTES = 4  # fp32 gradients
Shape = tuple[int, int, int]  # channels, height, width of one sample

#: ResNet depth -> (block type, blocks per stage), torchvision ``resnet.py``.
RESNET_BLOCKS = {18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)),
                 50: ("bottleneck", (3, 4, 6, 3)), 101: ("bottleneck", (3, 4, 23, 3)),
                 152: ("bottleneck", (3, 8, 36, 3))}
#: VGG depth -> convolution widths, "M" a 2x2 max pool (torchvision ``vgg.py`` cfgs D, E).
VGG_CONFIGS = {
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512,
         "M"),
    19: (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512,
         512, 512, 512, "M"),
}


def _pair(x: int | tuple[int, int]) -> tuple[int, int]:
    return (x, x) if isinstance(x, int) else x


def _n(x: Shape) -> int:
    return x[0] * x[1] * x[2]


class _Net:
    """Parameter modules with their ops, and the shape each op produces."""

    def __init__(self, bn_scale: bool = True) -> None:
        self.layers: list[ArchLayer] = []
        #: BatchNorm learns gamma (``weight``) and beta (``bias``); False: beta only
        #: (TF's ``scale=False``, the default of tf_cnn_benchmarks and TF-slim's Inceptions).
        self.bn_scale = bn_scale

    def _op(self, op: Op) -> None:
        self.layers[-1].ops.append(op)

    def conv(self, name: str, x: Shape, c_out: int, k: int | tuple[int, int],
             s: int | tuple[int, int] = 1, p: int | tuple[int, int] = 0, *,
             bias: bool = False) -> Shape:
        (kh, kw), (sh, sw), (ph, pw) = _pair(k), _pair(s), _pair(p)
        h, w = (x[1] + 2 * ph - kh) // sh + 1, (x[2] + 2 * pw - kw) // sw + 1
        if h < 1 or w < 1:
            raise ProfileError(f"{name}: a {kh}x{kw} convolution does not fit a "
                               f"{x[1]}x{x[2]} input; use a larger image")
        params = [("weight", c_out * x[0] * kh * kw)] + ([("bias", c_out)] if bias else [])
        self.layers.append(ArchLayer(name, params, [
            conv2d_op(x[0], c_out, kh, kw, h * w, _n(x), bias=bias)]))
        return (c_out, h, w)

    def bn(self, name: str, x: Shape) -> Shape:
        params = ([("weight", x[0])] if self.bn_scale else []) + [("bias", x[0])]
        self.layers.append(ArchLayer(name, params, [batchnorm_op(_n(x), x[0])]))
        return x

    def linear(self, name: str, n_in: int, n_out: int) -> None:
        self.layers.append(ArchLayer(name, [("weight", n_in * n_out), ("bias", n_out)],
                                     [linear_op(n_in, n_out)]))

    def relu(self, x: Shape | int) -> None:
        n = x if isinstance(x, int) else _n(x)
        self._op(eltwise_op("relu", n, n))

    def dropout(self, n: int) -> None:
        self._op(eltwise_op("dropout", n, n))

    def add(self, x: Shape) -> None:
        self._op(eltwise_op("add", 2 * _n(x), _n(x)))

    def concat(self, xs: Sequence[Shape]) -> Shape:
        out = (sum(x[0] for x in xs), xs[0][1], xs[0][2])
        self._op(eltwise_op("concat", _n(out), _n(out), 0.0))
        return out

    def pool(self, kind: str, x: Shape, k: int, s: int, p: int = 0) -> Shape:
        out = (x[0], (x[1] + 2 * p - k) // s + 1, (x[2] + 2 * p - k) // s + 1)
        if out[1] < 1 or out[2] < 1:
            raise ProfileError(f"a {k}x{k} {kind} does not fit a {x[1]}x{x[2]} input (after "
                               f"{self.layers[-1].name}); use a larger image")
        self._op(pool_op(kind, _n(x), _n(out), k * k))
        return out

    def global_pool(self, x: Shape, side: int = 1) -> Shape:
        """Adaptive average pooling to ``side`` x ``side`` (identity if already that size)."""
        if (x[1], x[2]) == (side, side):
            return x
        out = (x[0], side, side)
        self._op(pool_op("avgpool", _n(x), _n(out), max(1, _n(x) // _n(out))))
        return out

    def conv_bn_relu(self, name: str, x: Shape, c_out: int, k: int | tuple[int, int],
                     s: int | tuple[int, int] = 1, p: int | tuple[int, int] = 0) -> Shape:
        """Inception's ``BasicConv2d`` (``name.conv``, ``name.bn``, ReLU)."""
        y = self.conv(name + ".conv", x, c_out, k, s, p)
        self.bn(name + ".bn", y)
        self.relu(y)
        return y


def _check(**kw: int) -> None:
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ProfileError(f"{k} must be a positive integer, got {v!r}")


def _profile(name: str, net: _Net, loss_ops: list[Op], *, batch_size: int,
             device: str | Device, precision: str, optimizer: str, source: str,
             meta: dict) -> ModelProfile:
    dev = get_device(device)
    dev.check_precision(precision)
    _check(batch_size=batch_size)
    layers = []
    for la in net.layers:
        f, b = ops_time(la.ops, dev, precision, batch_size)
        tensors = tuple(Tensor(t, _GRAD_BYTES * n, update_time(n, dev, optimizer))
                        for t, n in la.params)
        layers.append(Layer(la.name, f, b, _GRAD_BYTES * la.n_params, None, tensors,
                            tuple(la.ops)))
    lf, lb = ops_time(loss_ops, dev, precision, batch_size)
    n = sum(la.n_params for la in net.layers)
    macs = sum(o.flops for la in net.layers for o in la.ops if o.kind == "matmul") / 2
    meta = dict(meta, builder="sgdnet.workload.cnns", parameters=n, optimizer=optimizer,
                compute_device=dev.name, efficiency=dev.efficiency,
                forward_macs_per_sample=macs, loss_ops=[o.to_dict() for o in loss_ops])
    src = (f"compute model (sgdnet.workload.compute) of {source} training on {dev.name}, "
           f"{precision}, batch {batch_size}; parameters exact from the architecture "
           "(torchvision module layout)")
    return ModelProfile(name, layers, batch_size, dev.name, src, None, meta,
                        precision=precision, loss_s=lf + lb)


def resnet(name: str = "resnet", *, depth: int = 50, image: int = 224, n_classes: int = 1000,
           batch_size: int = 64, device: str | Device = "V100", precision: str = "fp32",
           optimizer: str = "momentum") -> ModelProfile:
    """ResNet-18/34/50/101/152 as torchvision defines them (v1.5 bottleneck: stride in the
    3x3 convolution; downsample = 1x1 convolution + BatchNorm on the first block of a stage).

    Raises
    ------
    ProfileError
        A depth other than 18, 34, 50, 101 or 152, a bad size, or a precision the device
        lacks.
    """
    if depth not in RESNET_BLOCKS:
        raise ProfileError(f"ResNet depth {depth!r} is not one of {sorted(RESNET_BLOCKS)}")
    _check(image=image, n_classes=n_classes)
    kind, blocks = RESNET_BLOCKS[depth]
    exp = 1 if kind == "basic" else 4
    net = _Net()
    x = net.conv("conv1", (3, image, image), 64, 7, 2, 3)
    net.bn("bn1", x)
    net.relu(x)
    x = net.pool("maxpool", x, 3, 2, 1)
    c_in = 64
    for stage, (planes, n_blocks) in enumerate(zip((64, 128, 256, 512), blocks), 1):
        for i in range(n_blocks):
            p = f"layer{stage}.{i}."
            stride = 2 if stage > 1 and i == 0 else 1
            inp = x
            if kind == "basic":
                y = net.conv(p + "conv1", x, planes, 3, stride, 1)
                net.bn(p + "bn1", y)
                net.relu(y)
                y = net.conv(p + "conv2", y, planes, 3, 1, 1)
                net.bn(p + "bn2", y)
            else:
                y = net.conv(p + "conv1", x, planes, 1)
                net.bn(p + "bn1", y)
                net.relu(y)
                y = net.conv(p + "conv2", y, planes, 3, stride, 1)
                net.bn(p + "bn2", y)
                net.relu(y)
                y = net.conv(p + "conv3", y, planes * exp, 1)
                net.bn(p + "bn3", y)
            if stride != 1 or c_in != planes * exp:
                d = net.conv(p + "downsample.0", inp, planes * exp, 1, stride)
                net.bn(p + "downsample.1", d)
            net.add(y)
            net.relu(y)
            x, c_in = y, planes * exp
    x = net.global_pool(x)
    net.linear("fc", _n(x), n_classes)
    return _profile(name, net, [softmax_xent_op(n_classes)], batch_size=batch_size,
                    device=device, precision=precision, optimizer=optimizer,
                    source=f"ResNet-{depth} ({image}x{image} images, {n_classes} classes)",
                    meta={"architecture": f"resnet{depth}", "image": image})


def vgg(name: str = "vgg", *, depth: int = 16, image: int = 224, n_classes: int = 1000,
        batch_size: int = 64, device: str | Device = "V100", precision: str = "fp32",
        optimizer: str = "momentum") -> ModelProfile:
    """VGG-16/19 without batch normalisation (torchvision ``vgg16``/``vgg19``): 3x3
    convolutions with bias and ReLU, 2x2 max pools, adaptive pooling to 7x7, then
    Linear(25088, 4096), ReLU, Dropout, Linear(4096, 4096), ReLU, Dropout, Linear(4096,
    classes)."""
    if depth not in VGG_CONFIGS:
        raise ProfileError(f"VGG depth {depth!r} is not one of {sorted(VGG_CONFIGS)}")
    _check(image=image, n_classes=n_classes)
    net = _Net()
    x: Shape = (3, image, image)
    idx = 0
    for v in VGG_CONFIGS[depth]:
        if v == "M":
            x = net.pool("maxpool", x, 2, 2)
            idx += 1
            continue
        x = net.conv(f"features.{idx}", x, int(v), 3, 1, 1, bias=True)
        net.relu(x)
        idx += 2
    x = net.global_pool(x, 7)
    net.linear("classifier.0", _n(x), 4096)
    net.relu(4096)
    net.dropout(4096)
    net.linear("classifier.3", 4096, 4096)
    net.relu(4096)
    net.dropout(4096)
    net.linear("classifier.6", 4096, n_classes)
    return _profile(name, net, [softmax_xent_op(n_classes)], batch_size=batch_size,
                    device=device, precision=precision, optimizer=optimizer,
                    source=f"VGG-{depth} ({image}x{image} images, {n_classes} classes)",
                    meta={"architecture": f"vgg{depth}", "image": image})


def alexnet(name: str = "alexnet", *, image: int = 224, n_classes: int = 1000,
            batch_size: int = 256, device: str | Device = "V100", precision: str = "fp32",
            optimizer: str = "momentum") -> ModelProfile:
    """AlexNet as torchvision defines it (the "one weird trick" single-tower variant: 64,
    192, 384, 256, 256 filters; adaptive pooling to 6x6; dropout before the first two
    linear layers)."""
    _check(image=image, n_classes=n_classes)
    net = _Net()
    x = net.conv("features.0", (3, image, image), 64, 11, 4, 2, bias=True)
    net.relu(x)
    x = net.pool("maxpool", x, 3, 2)
    x = net.conv("features.3", x, 192, 5, 1, 2, bias=True)
    net.relu(x)
    x = net.pool("maxpool", x, 3, 2)
    for i, c in ((6, 384), (8, 256), (10, 256)):
        x = net.conv(f"features.{i}", x, c, 3, 1, 1, bias=True)
        net.relu(x)
    x = net.pool("maxpool", x, 3, 2)
    x = net.global_pool(x, 6)
    net.dropout(_n(x))
    net.linear("classifier.1", _n(x), 4096)
    net.relu(4096)
    net.dropout(4096)
    net.linear("classifier.4", 4096, 4096)
    net.relu(4096)
    net.linear("classifier.6", 4096, n_classes)
    return _profile(name, net, [softmax_xent_op(n_classes)], batch_size=batch_size,
                    device=device, precision=precision, optimizer=optimizer,
                    source=f"AlexNet ({image}x{image} images, {n_classes} classes)",
                    meta={"architecture": "alexnet", "image": image})


def _inception_a(net: _Net, p: str, x: Shape, pool_features: int) -> Shape:
    b1 = net.conv_bn_relu(p + "branch1x1", x, 64, 1)
    b5 = net.conv_bn_relu(p + "branch5x5_1", x, 48, 1)
    b5 = net.conv_bn_relu(p + "branch5x5_2", b5, 64, 5, 1, 2)
    b3 = net.conv_bn_relu(p + "branch3x3dbl_1", x, 64, 1)
    b3 = net.conv_bn_relu(p + "branch3x3dbl_2", b3, 96, 3, 1, 1)
    b3 = net.conv_bn_relu(p + "branch3x3dbl_3", b3, 96, 3, 1, 1)
    bp = net.pool("avgpool", x, 3, 1, 1)
    bp = net.conv_bn_relu(p + "branch_pool", bp, pool_features, 1)
    return net.concat([b1, b5, b3, bp])


def _inception_b(net: _Net, p: str, x: Shape) -> Shape:
    b3 = net.conv_bn_relu(p + "branch3x3", x, 384, 3, 2)
    bd = net.conv_bn_relu(p + "branch3x3dbl_1", x, 64, 1)
    bd = net.conv_bn_relu(p + "branch3x3dbl_2", bd, 96, 3, 1, 1)
    bd = net.conv_bn_relu(p + "branch3x3dbl_3", bd, 96, 3, 2)
    bp = net.pool("maxpool", x, 3, 2)
    return net.concat([b3, bd, bp])


def _inception_c(net: _Net, p: str, x: Shape, c7: int) -> Shape:
    b1 = net.conv_bn_relu(p + "branch1x1", x, 192, 1)
    b7 = net.conv_bn_relu(p + "branch7x7_1", x, c7, 1)
    b7 = net.conv_bn_relu(p + "branch7x7_2", b7, c7, (1, 7), 1, (0, 3))
    b7 = net.conv_bn_relu(p + "branch7x7_3", b7, 192, (7, 1), 1, (3, 0))
    bd = net.conv_bn_relu(p + "branch7x7dbl_1", x, c7, 1)
    for i, (c, k, pad) in enumerate(((c7, (7, 1), (3, 0)), (c7, (1, 7), (0, 3)),
                                     (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))), 2):
        bd = net.conv_bn_relu(p + f"branch7x7dbl_{i}", bd, c, k, 1, pad)
    bp = net.pool("avgpool", x, 3, 1, 1)
    bp = net.conv_bn_relu(p + "branch_pool", bp, 192, 1)
    return net.concat([b1, b7, bd, bp])


def _inception_d(net: _Net, p: str, x: Shape) -> Shape:
    b3 = net.conv_bn_relu(p + "branch3x3_1", x, 192, 1)
    b3 = net.conv_bn_relu(p + "branch3x3_2", b3, 320, 3, 2)
    b7 = net.conv_bn_relu(p + "branch7x7x3_1", x, 192, 1)
    b7 = net.conv_bn_relu(p + "branch7x7x3_2", b7, 192, (1, 7), 1, (0, 3))
    b7 = net.conv_bn_relu(p + "branch7x7x3_3", b7, 192, (7, 1), 1, (3, 0))
    b7 = net.conv_bn_relu(p + "branch7x7x3_4", b7, 192, 3, 2)
    bp = net.pool("maxpool", x, 3, 2)
    return net.concat([b3, b7, bp])


def _inception_e(net: _Net, p: str, x: Shape) -> Shape:
    b1 = net.conv_bn_relu(p + "branch1x1", x, 320, 1)
    b3 = net.conv_bn_relu(p + "branch3x3_1", x, 384, 1)
    b3a = net.conv_bn_relu(p + "branch3x3_2a", b3, 384, (1, 3), 1, (0, 1))
    b3b = net.conv_bn_relu(p + "branch3x3_2b", b3, 384, (3, 1), 1, (1, 0))
    bd = net.conv_bn_relu(p + "branch3x3dbl_1", x, 448, 1)
    bd = net.conv_bn_relu(p + "branch3x3dbl_2", bd, 384, 3, 1, 1)
    bda = net.conv_bn_relu(p + "branch3x3dbl_3a", bd, 384, (1, 3), 1, (0, 1))
    bdb = net.conv_bn_relu(p + "branch3x3dbl_3b", bd, 384, (3, 1), 1, (1, 0))
    bp = net.pool("avgpool", x, 3, 1, 1)
    bp = net.conv_bn_relu(p + "branch_pool", bp, 192, 1)
    return net.concat([b1, b3a, b3b, bda, bdb, bp])


def inception_v3(name: str = "inception_v3", *, aux_logits: bool = True, image: int = 299,
                 n_classes: int = 1000, batch_size: int = 64, device: str | Device = "V100",
                 precision: str = "fp32", optimizer: str = "momentum") -> ModelProfile:
    """Inception-v3 as torchvision defines it (``Inception3``: ``BasicConv2d`` = convolution
    without bias, BatchNorm, ReLU), at 299x299; with ``aux_logits`` the auxiliary classifier
    after ``Mixed_6e`` runs in training, as torchvision's default, and adds its loss."""
    _check(image=image, n_classes=n_classes)
    if not isinstance(aux_logits, bool):
        raise ProfileError(f"aux_logits must be True or False, got {aux_logits!r}")
    net = _Net()
    x = net.conv_bn_relu("Conv2d_1a_3x3", (3, image, image), 32, 3, 2)
    x = net.conv_bn_relu("Conv2d_2a_3x3", x, 32, 3)
    x = net.conv_bn_relu("Conv2d_2b_3x3", x, 64, 3, 1, 1)
    x = net.pool("maxpool", x, 3, 2)
    x = net.conv_bn_relu("Conv2d_3b_1x1", x, 80, 1)
    x = net.conv_bn_relu("Conv2d_4a_3x3", x, 192, 3)
    x = net.pool("maxpool", x, 3, 2)
    for blk, pf in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        x = _inception_a(net, blk + ".", x, pf)
    x = _inception_b(net, "Mixed_6a.", x)
    for blk, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160),
                    ("Mixed_6e", 192)):
        x = _inception_c(net, blk + ".", x, c7)
    loss = [softmax_xent_op(n_classes)]
    if aux_logits:
        a = net.pool("avgpool", x, 5, 3)
        a = net.conv_bn_relu("AuxLogits.conv0", a, 128, 1)
        a = net.conv_bn_relu("AuxLogits.conv1", a, 768, 5)
        a = net.global_pool(a)
        net.linear("AuxLogits.fc", _n(a), n_classes)
        loss.append(softmax_xent_op(n_classes, "aux_cross_entropy"))
    x = _inception_d(net, "Mixed_7a.", x)
    x = _inception_e(net, "Mixed_7b.", x)
    x = _inception_e(net, "Mixed_7c.", x)
    x = net.global_pool(x)
    net.dropout(_n(x))
    net.linear("fc", _n(x), n_classes)
    return _profile(name, net, loss, batch_size=batch_size, device=device, precision=precision,
                    optimizer=optimizer,
                    source=f"Inception-v3 ({image}x{image} images, {n_classes} classes, "
                           f"auxiliary classifier {'on' if aux_logits else 'off'})",
                    meta={"architecture": "inception_v3", "image": image,
                          "aux_logits": aux_logits})


def _col(net: _Net, p: str, x: Shape, *convs: tuple) -> Shape:
    """Convolution + BatchNorm + ReLU modules in a row, each ``(name, c_out, kernel)`` with
    TF's stride-1 'SAME' padding or ``(name, c_out, kernel, stride)`` with 'VALID' padding."""
    for name, c, k, *s in convs:
        if s:
            x = net.conv_bn_relu(p + name, x, c, k, s[0])
        else:
            kh, kw = _pair(k)
            x = net.conv_bn_relu(p + name, x, c, k, 1, (kh // 2, kw // 2))
    return x


def _v4_a(net: _Net, p: str, x: Shape) -> Shape:
    b0 = _col(net, p, x, ("Branch_0.Conv2d_0a_1x1", 96, 1))
    b1 = _col(net, p, x, ("Branch_1.Conv2d_0a_1x1", 64, 1), ("Branch_1.Conv2d_0b_3x3", 96, 3))
    b2 = _col(net, p, x, ("Branch_2.Conv2d_0a_1x1", 64, 1), ("Branch_2.Conv2d_0b_3x3", 96, 3),
              ("Branch_2.Conv2d_0c_3x3", 96, 3))
    b3 = _col(net, p, net.pool("avgpool", x, 3, 1, 1), ("Branch_3.Conv2d_0b_1x1", 96, 1))
    return net.concat([b0, b1, b2, b3])


def _v4_b(net: _Net, p: str, x: Shape) -> Shape:
    b0 = _col(net, p, x, ("Branch_0.Conv2d_0a_1x1", 384, 1))
    b1 = _col(net, p, x, ("Branch_1.Conv2d_0a_1x1", 192, 1),
              ("Branch_1.Conv2d_0b_1x7", 224, (1, 7)), ("Branch_1.Conv2d_0c_7x1", 256, (7, 1)))
    b2 = _col(net, p, x, ("Branch_2.Conv2d_0a_1x1", 192, 1),
              ("Branch_2.Conv2d_0b_7x1", 192, (7, 1)), ("Branch_2.Conv2d_0c_1x7", 224, (1, 7)),
              ("Branch_2.Conv2d_0d_7x1", 224, (7, 1)), ("Branch_2.Conv2d_0e_1x7", 256, (1, 7)))
    b3 = _col(net, p, net.pool("avgpool", x, 3, 1, 1), ("Branch_3.Conv2d_0b_1x1", 128, 1))
    return net.concat([b0, b1, b2, b3])


def _v4_c(net: _Net, p: str, x: Shape) -> Shape:
    b0 = _col(net, p, x, ("Branch_0.Conv2d_0a_1x1", 256, 1))
    b1 = _col(net, p, x, ("Branch_1.Conv2d_0a_1x1", 384, 1))
    b1a = _col(net, p, b1, ("Branch_1.Conv2d_0b_1x3", 256, (1, 3)))
    b1b = _col(net, p, b1, ("Branch_1.Conv2d_0c_3x1", 256, (3, 1)))
    b2 = _col(net, p, x, ("Branch_2.Conv2d_0a_1x1", 384, 1),
              ("Branch_2.Conv2d_0b_3x1", 448, (3, 1)), ("Branch_2.Conv2d_0c_1x3", 512, (1, 3)))
    b2a = _col(net, p, b2, ("Branch_2.Conv2d_0d_1x3", 256, (1, 3)))
    b2b = _col(net, p, b2, ("Branch_2.Conv2d_0e_3x1", 256, (3, 1)))
    b3 = _col(net, p, net.pool("avgpool", x, 3, 1, 1), ("Branch_3.Conv2d_0b_1x1", 256, 1))
    return net.concat([b0, b1a, b1b, b2a, b2b, b3])


def inception_v4(name: str = "inception_v4", *, n_classes: int = 1001, bn_scale: bool = False,
                 aux_logits: bool = False, image: int = 299, batch_size: int = 64,
                 device: str | Device = "V100", precision: str = "fp32",
                 optimizer: str = "momentum") -> ModelProfile:
    """Inception-v4 (Szegedy et al., AAAI 2017, arXiv:1602.07261, figures 3-9) as TF-slim
    (``research/slim/nets/inception_v4.py``) and tf_cnn_benchmarks
    (``scripts/tf_cnn_benchmarks/models/inception_model.py``, ``Inceptionv4Model``) build it.

    Every convolution is bias-free, followed by BatchNorm and ReLU; layers are named by
    TF-slim's scopes (``Mixed_6b.Branch_2.Conv2d_0c_1x7.conv``). The defaults are
    tf_cnn_benchmarks': 1001 classes (``ImageDataset(num_classes=1001)`` in ``datasets.py``,
    ImageNet's 1000 plus background), BatchNorm with beta only (``ConvNetBuilder.batch_norm``'s
    ``scale=False``; TF-slim's ``inception_arg_scope`` has ``batch_norm_scale=False`` too) and
    no auxiliary head. tf_cnn_benchmarks factorises three 7x7/3x3 pairs in the other order
    (1x7 before 7x1 where TF-slim has 7x1 first): the same parameters and FLOPs.

    Parameters
    ----------
    n_classes : int
        Logits (1001: TensorFlow's ImageNet label set; 1000: timm's and Cadene's ports).
    bn_scale : bool
        BatchNorm also learns gamma (PyTorch ports' ``BatchNorm2d(affine=True)``).
    aux_logits : bool
        TF-slim's auxiliary classifier after ``Mixed_6h`` (its ``create_aux_logits``):
        5x5/3 average pool, 1x1 convolution to 128, 5x5 to 768, linear; adds its loss.

    Raises
    ------
    ProfileError
        A bad size or flag, an image too small for the stem, or a precision the device lacks.
    """
    _check(image=image, n_classes=n_classes)
    for flag, v in (("bn_scale", bn_scale), ("aux_logits", aux_logits)):
        if not isinstance(v, bool):
            raise ProfileError(f"{flag} must be True or False, got {v!r}")
    net = _Net(bn_scale=bn_scale)
    x = _col(net, "", (3, image, image), ("Conv2d_1a_3x3", 32, 3, 2), ("Conv2d_2a_3x3", 32, 3, 1),
             ("Conv2d_2b_3x3", 64, 3))
    b1 = _col(net, "Mixed_3a.", x, ("Branch_1.Conv2d_0a_3x3", 96, 3, 2))
    x = net.concat([net.pool("maxpool", x, 3, 2), b1])
    b0 = _col(net, "Mixed_4a.", x, ("Branch_0.Conv2d_0a_1x1", 64, 1),
              ("Branch_0.Conv2d_1a_3x3", 96, 3, 1))
    b1 = _col(net, "Mixed_4a.", x, ("Branch_1.Conv2d_0a_1x1", 64, 1),
              ("Branch_1.Conv2d_0b_1x7", 64, (1, 7)), ("Branch_1.Conv2d_0c_7x1", 64, (7, 1)),
              ("Branch_1.Conv2d_1a_3x3", 96, 3, 1))
    x = net.concat([b0, b1])
    b0 = _col(net, "Mixed_5a.", x, ("Branch_0.Conv2d_1a_3x3", 192, 3, 2))
    x = net.concat([b0, net.pool("maxpool", x, 3, 2)])
    for blk in "bcde":
        x = _v4_a(net, f"Mixed_5{blk}.", x)
    b0 = _col(net, "Mixed_6a.", x, ("Branch_0.Conv2d_1a_3x3", 384, 3, 2))
    b1 = _col(net, "Mixed_6a.", x, ("Branch_1.Conv2d_0a_1x1", 192, 1),
              ("Branch_1.Conv2d_0b_3x3", 224, 3), ("Branch_1.Conv2d_1a_3x3", 256, 3, 2))
    x = net.concat([b0, b1, net.pool("maxpool", x, 3, 2)])
    for blk in "bcdefgh":
        x = _v4_b(net, f"Mixed_6{blk}.", x)
    loss = [softmax_xent_op(n_classes)]
    if aux_logits:
        a = _col(net, "AuxLogits.", net.pool("avgpool", x, 5, 3), ("Conv2d_1b_1x1", 128, 1))
        a = _col(net, "AuxLogits.", a, ("Conv2d_2a", 768, (a[1], a[2]), 1))
        net.linear("AuxLogits.Aux_logits", _n(a), n_classes)
        loss.append(softmax_xent_op(n_classes, "aux_cross_entropy"))
    b0 = _col(net, "Mixed_7a.", x, ("Branch_0.Conv2d_0a_1x1", 192, 1),
              ("Branch_0.Conv2d_1a_3x3", 192, 3, 2))
    b1 = _col(net, "Mixed_7a.", x, ("Branch_1.Conv2d_0a_1x1", 256, 1),
              ("Branch_1.Conv2d_0b_1x7", 256, (1, 7)), ("Branch_1.Conv2d_0c_7x1", 320, (7, 1)),
              ("Branch_1.Conv2d_1a_3x3", 320, 3, 2))
    x = net.concat([b0, b1, net.pool("maxpool", x, 3, 2)])
    for blk in "bcd":
        x = _v4_c(net, f"Mixed_7{blk}.", x)
    x = net.global_pool(x)
    net.dropout(_n(x))
    net.linear("Logits", _n(x), n_classes)
    return _profile(name, net, loss, batch_size=batch_size, device=device, precision=precision,
                    optimizer=optimizer,
                    source=f"Inception-v4 ({image}x{image} images, {n_classes} classes, "
                           f"BatchNorm {'gamma and beta' if bn_scale else 'beta only'}, "
                           f"auxiliary classifier {'on' if aux_logits else 'off'})",
                    meta={"architecture": "inception_v4", "image": image,
                          "aux_logits": aux_logits, "bn_scale": bn_scale})


def resnet18(**kw) -> ModelProfile:
    """ResNet-18 (He et al. 2016; torchvision)."""
    return resnet(**{"name": "resnet18", "depth": 18} | kw)


def resnet34(**kw) -> ModelProfile:
    """ResNet-34 (He et al. 2016; torchvision)."""
    return resnet(**{"name": "resnet34", "depth": 34} | kw)


def resnet50(**kw) -> ModelProfile:
    """ResNet-50 v1.5 (torchvision; NVIDIA DeepLearningExamples' ResNet-50)."""
    return resnet(**{"name": "resnet50", "depth": 50} | kw)


def resnet101(**kw) -> ModelProfile:
    """ResNet-101 (torchvision)."""
    return resnet(**{"name": "resnet101", "depth": 101} | kw)


def resnet152(**kw) -> ModelProfile:
    """ResNet-152 (torchvision)."""
    return resnet(**{"name": "resnet152", "depth": 152} | kw)


def vgg16(**kw) -> ModelProfile:
    """VGG-16 (Simonyan and Zisserman 2015, configuration D; torchvision)."""
    return vgg(**{"name": "vgg16", "depth": 16} | kw)


def vgg19(**kw) -> ModelProfile:
    """VGG-19 (configuration E; torchvision)."""
    return vgg(**{"name": "vgg19", "depth": 19} | kw)


#: The built-in CNN profiles built from their architecture and shipped in ``models/`` (the
#: PipeDream-measured library has no ResNet-34, ResNet-152, VGG-19 or Inception-v4): name ->
#: builder keyword arguments. V100 (SXM2), fp32, batch 64: the batch of TensorFlow's published
#: ResNet-152 and VGG-16 single-GPU benchmarks (tensorflow/docs, r1 performance benchmarks).
#: Inception-v4 as tf_cnn_benchmarks builds it (its builder's defaults: 1001 classes,
#: BatchNorm beta only, no auxiliary head).
BUILTIN = {
    "resnet34": (resnet34, {"batch_size": 64, "device": "V100", "precision": "fp32"}),
    "resnet152": (resnet152, {"batch_size": 64, "device": "V100", "precision": "fp32"}),
    "vgg19": (vgg19, {"batch_size": 64, "device": "V100", "precision": "fp32"}),
    "inception_v4": (inception_v4, {"batch_size": 64, "device": "V100", "precision": "fp32"}),
}
