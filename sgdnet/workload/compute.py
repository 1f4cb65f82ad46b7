"""A Paleo-style compute model: time a layer on a GPU nobody profiled.

Every layer of a profile may carry its forward :class:`~sgdnet.workload.ops.Op` list (FLOPs
and elements moved per sample, parameters read per pass). A :class:`Device` states its peak
FLOP rate per precision for matrix units and for ordinary ALUs, its memory bandwidth, and one
achievable-efficiency factor (Paleo's "platform percent of peak", applied to both). An op
then takes the roofline time

    t = max(B * flops / (peak * eff), (B * elems + param_elems) * bytes / (bandwidth * eff))

for a batch of ``B`` samples, with ``bytes`` per element from the precision (4 for fp32 and
tf32, 2 for fp16 and bf16: mixed precision keeps activations in half precision). The backward
pass of an op costs twice its forward (gradients with respect to the input and to the
weights), in FLOPs and in traffic. A layer's time is the sum of its ops' times.

Optimizer steps are memory-bound on the device's bandwidth: :mod:`sgdnet.workload.optimizer`
(bytes per parameter of every optimizer and precision, ``update_time``).

A device's ``memory`` (bytes of HBM / GDDR per GPU) is what :mod:`sgdnet.workload.memory`
checks a configuration's memory per GPU against.

Peak numbers are NVIDIA's public datasheet / whitepaper figures (dense, without structured
sparsity); see :data:`DEVICES`. The default efficiency :data:`EFFICIENCY` was calibrated once
on a single published measurement and validated on others (``docs/validation.md``).

Assumptions (state them when you quote a number): kernels run one at a time, each at the
roofline of its op; no launch overheads, no fusion beyond what the op list says; gradient
bytes are fp32 (PyTorch AMP keeps fp32 parameters and gradients) unless :func:`retime` is
given ``grad_dtype``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ProfileError, UnknownNameError
from .ops import Op
from .profile import PRECISIONS, Layer, ModelProfile, Tensor

__all__ = ["Device", "DEVICES", "DEVICE_ALIASES", "EFFICIENCY", "DTYPE_BYTES", "GIB",
           "BYTES_PER_ELEM", "GRAD_DTYPES", "get_device", "load_device", "op_time", "ops_time",
           "retime"]

#: Bytes per activation element for each precision.
BYTES_PER_ELEM = MappingProxyType({"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2})

#: Bytes per element of the dtypes parameters, gradients and master weights are kept in (and
#: sent in: :func:`retime`'s ``grad_dtype``, the sharded variants' ``dtype``).
DTYPE_BYTES: Mapping[str, int] = MappingProxyType({"fp32": 4, "fp16": 2, "bf16": 2})
#: Bytes per gradient element as a framework communicates it (:func:`retime`'s
#: ``grad_dtype``).
GRAD_DTYPES = DTYPE_BYTES

#: Bytes in a GiB: the GB of GPU memory on NVIDIA's datasheets are binary (DRAM dies come in
#: powers of two; nvidia-smi reports 81,920 MiB on an A100-SXM4-80GB).
GIB = 2**30

#: Achievable fraction of peak FLOP/s and of peak bandwidth (one factor, as Paleo's "platform
#: percent of peak"). Calibrated on one measurement: BERT-large pre-training, sequence 128,
#: batch 256, mixed precision on one A100 80GB, 580 sequences/s (NVIDIA DeepLearningExamples,
#: PyTorch BERT README, pytorch:21.11 container); see docs/validation.md for how and for the
#: pairs it was checked against.
EFFICIENCY = 0.57


def _positive(x: object, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise ProfileError(f"{what} must be a positive finite number, got {x!r}")
    return float(x)


@dataclass(frozen=True)
class Device:
    """One accelerator for the compute model.

    Parameters
    ----------
    name : str
        Short name (``"A100"``).
    matmul_flops : mapping
        Peak FLOP/s of matrix operations per precision (``"fp32"``, ``"tf32"``, ``"fp16"``,
        ``"bf16"``); tensor-core rates where the precision runs on them. A precision the
        device cannot run is absent.
    vector_flops : mapping
        Peak FLOP/s of elementwise / reduction operations per precision (CUDA cores).
    mem_bw : float
        Peak memory bandwidth, bytes/s.
    efficiency : float
        Achievable fraction of both peaks, in (0, 1].
    source : str
        Where the numbers come from.
    memory : float or None
        Bytes of device memory (HBM / GDDR) of one GPU, as the datasheet states it (in GiB,
        :data:`GIB`); None when unknown (then no configuration is checked against it). Not
        compared (like ``source``): two devices with the same rates are equal.

    Raises
    ------
    ProfileError
        A non-positive rate, bandwidth or memory, an efficiency outside (0, 1], an unknown
        precision, or a precision with a matrix rate but no vector rate.
    """

    name: str
    matmul_flops: Mapping[str, float]
    vector_flops: Mapping[str, float]
    mem_bw: float
    efficiency: float = EFFICIENCY
    source: str = field(default="", compare=False)
    memory: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"device name must be a non-empty string, got {self.name!r}")
        for what in ("matmul_flops", "vector_flops"):
            m = getattr(self, what)
            if not isinstance(m, Mapping) or not m:
                raise ProfileError(f"device {self.name!r}: {what} must map precisions to FLOP/s")
            bad = sorted(set(m) - set(PRECISIONS))
            if bad:
                raise ProfileError(f"device {self.name!r}: {what}: unknown precision(s) {bad}; "
                                   f"use {list(PRECISIONS)}")
            object.__setattr__(self, what, MappingProxyType(
                {k: _positive(v, f"device {self.name!r}: {what}[{k!r}]") for k, v in m.items()}))
        missing = sorted(set(self.matmul_flops) - set(self.vector_flops))
        if missing:
            raise ProfileError(f"device {self.name!r}: vector_flops lacks {missing}, which "
                               "matmul_flops has")
        object.__setattr__(self, "mem_bw", _positive(self.mem_bw, f"device {self.name!r}: "
                                                                  "mem_bw"))
        e = _positive(self.efficiency, f"device {self.name!r}: efficiency")
        if e > 1:
            raise ProfileError(f"device {self.name!r}: efficiency {e!r} is above 1 (a fraction "
                               "of peak)")
        object.__setattr__(self, "efficiency", e)
        if self.memory is not None:
            object.__setattr__(self, "memory", _positive(self.memory, f"device {self.name!r}: "
                                                                      "memory"))

    @property
    def precisions(self) -> tuple[str, ...]:
        """Precisions this device runs."""
        return tuple(p for p in PRECISIONS if p in self.matmul_flops)

    def check_precision(self, precision: str) -> str:
        """Return ``precision`` if the device runs it, else raise a ProfileError naming both."""
        if precision not in self.matmul_flops:
            raise ProfileError(f"device {self.name} has no {precision!r} rate; it runs "
                               f"{', '.join(self.precisions)}")
        return precision

    def with_efficiency(self, efficiency: float) -> Device:
        """A copy with another efficiency."""
        return Device(self.name, self.matmul_flops, self.vector_flops, self.mem_bw, efficiency,
                      self.source, self.memory)

    @classmethod
    def from_datasheet(cls, name: str, *, fp32_tflops: float, mem_bw_gbs: float,
                       fp16_tensor_tflops: float | None = None,
                       fp16_tflops: float | None = None,
                       tf32_tensor_tflops: float | None = None,
                       bf16_tensor_tflops: float | None = None,
                       bf16_tflops: float | None = None, sparse: bool = False,
                       efficiency: float = EFFICIENCY, source: str = "",
                       memory_gb: float | None = None) -> Device:
        """A device from the figures of its datasheet (TFLOPS and GB/s, as printed).

        Parameters
        ----------
        name : str
            Name of the device.
        fp32_tflops : float
            FP32 peak on the CUDA cores ("Single precision" / "FP32").
        mem_bw_gbs : float
            Memory bandwidth, GB/s (10^9 bytes/s).
        fp16_tensor_tflops : float, optional
            FP16 tensor-core peak with FP32 accumulate ("Tensor performance", "FP16 Tensor
            Core", "Mixed precision"): the rate of the matrix ops in ``fp16``. Without it,
            fp16 matrix ops run at ``fp16_tflops`` if given (a GPU without tensor cores whose
            CUDA cores run FP16 at their own rate), else fp16 is absent.
        fp16_tflops : float, optional
            FP16 on the CUDA cores ("Half precision", "FP16 (non-tensor)"): the rate of the
            vector ops in ``fp16``; default the FP32 rate (Ampere GA10x and Ada run FP16 at
            the FP32 rate on CUDA cores; Pascal GP100, Volta, Turing, GA100 and Hopper faster,
            so give it for them).
        tf32_tensor_tflops, bf16_tensor_tflops : float, optional
            TF32 / BF16 tensor-core peaks (Ampere and later); the precision is absent without.
        bf16_tflops : float, optional
            BF16 on the CUDA cores; default the FP32 rate.
        sparse : bool
            The tensor figures given are "with sparsity" (the datasheets' asterisk): they are
            halved to the dense rates the compute model uses.
        efficiency : float
            Achievable fraction of peak (default :data:`EFFICIENCY`).
        source : str
            Where the figures come from (default: "datasheet figures given by the user").
        memory_gb : float, optional
            Device memory of one GPU as printed ("80GB HBM2e"): GiB, :data:`GIB` bytes each;
            default unknown.

        Raises
        ------
        ProfileError
            A figure that is not a positive finite number.

        Examples
        --------
        >>> t4 = Device.from_datasheet("T4", fp32_tflops=8.1, fp16_tensor_tflops=65,
        ...                            fp16_tflops=16.2, mem_bw_gbs=320)
        >>> t4.precisions
        ('fp32', 'fp16')
        """
        what = f"device {name!r}"
        f32 = _positive(fp32_tflops, f"{what}: fp32_tflops") * _T
        dense = 0.5 if sparse else 1.0

        def opt(x: float | None, field_: str) -> float | None:
            return None if x is None else _positive(x, f"{what}: {field_}") * _T

        t16, v16 = opt(fp16_tensor_tflops, "fp16_tensor_tflops"), opt(fp16_tflops, "fp16_tflops")
        t32, t_bf = opt(tf32_tensor_tflops, "tf32_tensor_tflops"), opt(bf16_tensor_tflops,
                                                                       "bf16_tensor_tflops")
        v_bf = opt(bf16_tflops, "bf16_tflops")
        matmul, vector = {"fp32": f32}, {"fp32": f32}
        if t32 is not None:
            matmul["tf32"], vector["tf32"] = t32 * dense, f32
        if t16 is not None or v16 is not None:
            matmul["fp16"] = t16 * dense if t16 is not None else v16
            vector["fp16"] = v16 if v16 is not None else f32
        if t_bf is not None:
            matmul["bf16"], vector["bf16"] = t_bf * dense, (v_bf if v_bf is not None else f32)
        bw = _positive(mem_bw_gbs, f"{what}: mem_bw_gbs") * 1e9
        mem = None if memory_gb is None else _positive(memory_gb, f"{what}: memory_gb") * GIB
        return cls(name, matmul, vector, bw, efficiency,
                   source or "datasheet figures given by the user", mem)


_T = 1e12
#: Built-in devices, dense peaks (no structured sparsity); ``V100``, ``A100``, ``A100-40GB``
#: and ``H100`` are the SXM form factor, the others say theirs (``*-PCIe``). Matrix rates are
#: those of FP32 accumulation, which framework mixed precision uses. Each device's ``source``
#: cites its figures; a GPU not listed is one :meth:`Device.from_datasheet` call or a device
#: file (:func:`load_device`) away.
#:
#: * V100 SXM2 32GB -- NVIDIA Tesla V100 datasheet (2018): FP32 15.7 TFLOPS, Tensor (mixed
#:   precision FP16) 125 TFLOPS, HBM2 900 GB/s; FP16 on CUDA cores 31.4 TFLOPS (Volta
#:   architecture whitepaper, 2x FP32). No TF32 or BF16.
#: * A100 SXM4 80GB -- NVIDIA A100 datasheet (2021): FP32 19.5 TFLOPS, TF32 Tensor 156,
#:   BF16/FP16 Tensor 312 TFLOPS, HBM2e 2,039 GB/s; FP16 78 and BF16 39 TFLOPS on CUDA
#:   cores (Ampere GA100 whitepaper, table 1).
#: * A100-40GB -- as A100, HBM2 1,555 GB/s (A100 datasheet).
#: * RTX3090 -- NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090 column: FP32 35.6 TFLOPS,
#:   FP16/BF16 Tensor with FP32 accumulate 71 TFLOPS and TF32 Tensor 35.6 TFLOPS (dense),
#:   FP16/BF16 on CUDA cores 35.6 TFLOPS, GDDR6X 936 GB/s. (PyTorch AMP GEMMs accumulate in
#:   FP32.)
#: * H100 SXM5 80GB -- NVIDIA H100 datasheet: FP32 67 TFLOPS, TF32 Tensor 989 and BF16/FP16
#:   Tensor 1,979 TFLOPS *with sparsity*, i.e. 494.7 and 989.4 dense; HBM3 3.35 TB/s;
#:   FP16/BF16 on CUDA cores 133.8 TFLOPS (Hopper whitepaper, table 2).
DEVICES: Mapping[str, Device] = MappingProxyType({d.name: d for d in (
    Device("V100", {"fp32": 15.7 * _T, "fp16": 125 * _T},
           {"fp32": 15.7 * _T, "fp16": 31.4 * _T}, 900e9,
           memory=32 * GIB,
           source="NVIDIA Tesla V100 datasheet (SXM2 32GB: 32 GB HBM2); Volta whitepaper"),
    Device("A100", {"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T, "bf16": 312 * _T},
           {"fp32": 19.5 * _T, "tf32": 19.5 * _T, "fp16": 78 * _T, "bf16": 39 * _T}, 2039e9,
           memory=80 * GIB,
           source="NVIDIA A100 datasheet (SXM4 80GB: 80 GB HBM2e); Ampere GA100 whitepaper"),
    Device("A100-40GB", {"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T,
                         "bf16": 312 * _T},
           {"fp32": 19.5 * _T, "tf32": 19.5 * _T, "fp16": 78 * _T, "bf16": 39 * _T}, 1555e9,
           memory=40 * GIB,
           source="NVIDIA A100 datasheet (SXM4 40GB: 40 GB HBM2); Ampere GA100 whitepaper"),
    Device("RTX3090", {"fp32": 35.6 * _T, "tf32": 35.6 * _T, "fp16": 71 * _T, "bf16": 71 * _T},
           {"fp32": 35.6 * _T, "tf32": 35.6 * _T, "fp16": 35.6 * _T, "bf16": 35.6 * _T}, 936e9,
           memory=24 * GIB,
           source="NVIDIA Ampere GA102 whitepaper (GeForce RTX 3090): tensor rates with FP32 "
                  "accumulate, as PyTorch AMP uses; 24 GB GDDR6X"),
    Device("H100", {"fp32": 67 * _T, "tf32": 494.7 * _T, "fp16": 989.4 * _T,
                    "bf16": 989.4 * _T},
           {"fp32": 67 * _T, "tf32": 67 * _T, "fp16": 133.8 * _T, "bf16": 133.8 * _T}, 3.35e12,
           memory=80 * GIB,
           source="NVIDIA H100 datasheet (SXM5, dense = half the sparse figures; 80 GB "
                  "HBM3); Hopper whitepaper"),
    # -- older and inference-class GPUs the clouds rent (issue #36) --
    Device("K80", {"fp32": 4.37 * _T}, {"fp32": 4.37 * _T}, 240e9,
           memory=12 * GIB,
           source="NVIDIA Tesla K80 datasheet (2014): 8.74 TFLOPS FP32 at GPU Boost and 480 "
                  "GB/s for the board's two GK210 GPUs; one GK210 (one CUDA device, as "
                  "clouds expose it) has half: 2,496 cores x 2 x 875 MHz = 4.37 TFLOPS, "
                  "240 GB/s, and 12 GB of the board's 24 GB GDDR5. Kepler has no FP16 "
                  "arithmetic: fp32 only"),
    Device("P100-SXM2", {"fp32": 10.6 * _T, "fp16": 10.6 * _T},
           {"fp32": 10.6 * _T, "fp16": 21.2 * _T}, 732e9,
           memory=16 * GIB,
           source="NVIDIA Tesla P100 datasheet (2016), NVLink/SXM2 column: FP32 10.6, FP16 "
                  "21.2 TFLOPS, 16 GB CoWoS HBM2 at 732 GB/s. No tensor cores: FP16 runs at 2x on "
                  "the CUDA cores (vector ops), but mixed-precision GEMMs and convolutions "
                  "accumulate in FP32 (PyTorch AMP's cublasGemmEx compute type, TF's "
                  "TF_FP16_MATMUL/CONV_USE_FP32_COMPUTE defaults), which runs at the FP32 "
                  "rate"),
    Device("P100-PCIe", {"fp32": 9.3 * _T, "fp16": 9.3 * _T},
           {"fp32": 9.3 * _T, "fp16": 18.7 * _T}, 732e9,
           memory=16 * GIB,
           source="NVIDIA Tesla P100 datasheet (2016), PCIe 16GB column: FP32 9.3, FP16 18.7 "
                  "TFLOPS, 16 GB at 732 GB/s (12 GB at 549 GB/s on the 12GB card); FP16 matrix "
                  "ops at the FP32 rate as for P100-SXM2"),
    Device("V100-PCIe", {"fp32": 14 * _T, "fp16": 112 * _T},
           {"fp32": 14 * _T, "fp16": 28 * _T}, 900e9,
           memory=16 * GIB,
           source="NVIDIA Tesla V100 datasheet (2018), PCIe column: FP32 14, Tensor 112 "
                  "TFLOPS, HBM2 900 GB/s, 16 GB (the datasheet's 32 GB card: "
                  "dataclasses.replace(d, memory=32 * GIB)); FP16 on CUDA cores 2x FP32 "
                  "(Volta whitepaper)"),
    Device("T4", {"fp32": 8.1 * _T, "fp16": 65 * _T},
           {"fp32": 8.1 * _T, "fp16": 16.2 * _T}, 320e9,
           memory=16 * GIB,
           source="NVIDIA T4 datasheet (2018): FP32 8.1, mixed precision (FP16/FP32) 65 "
                  "TFLOPS, 16 GB GDDR6 at 320 GB/s; FP16 on CUDA cores 2x FP32 (Turing "
                  "whitepaper)"),
    Device("A10", {"fp32": 31.2 * _T, "tf32": 62.5 * _T, "fp16": 125 * _T, "bf16": 125 * _T},
           {"fp32": 31.2 * _T, "tf32": 31.2 * _T, "fp16": 31.2 * _T, "bf16": 31.2 * _T},
           600e9,
           memory=24 * GIB,
           source="NVIDIA A10 datasheet (2021): FP32 31.2, TF32 Tensor 62.5, BF16/FP16 Tensor "
                  "125 TFLOPS dense (twice with sparsity), 24 GB GDDR6 at 600 GB/s; FP16/BF16 on "
                  "CUDA "
                  "cores at the FP32 rate (GA102, Ampere GA102 whitepaper)"),
    Device("L4", {"fp32": 30.3 * _T, "tf32": 60 * _T, "fp16": 121 * _T, "bf16": 121 * _T},
           {"fp32": 30.3 * _T, "tf32": 30.3 * _T, "fp16": 30.3 * _T, "bf16": 30.3 * _T},
           300e9,
           memory=24 * GIB,
           source="NVIDIA L4 datasheet (2023): FP32 30.3, TF32 Tensor 120 and BF16/FP16 "
                  "Tensor 242 TFLOPS with sparsity (60 and 121 dense), 24 GB GDDR6 at 300 GB/s; "
                  "FP16 "
                  "on CUDA cores at the FP32 rate (Ada AD104)"),
    Device("A100-PCIe", {"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T,
                         "bf16": 312 * _T},
           {"fp32": 19.5 * _T, "tf32": 19.5 * _T, "fp16": 78 * _T, "bf16": 39 * _T}, 1935e9,
           memory=80 * GIB,
           source="NVIDIA A100 datasheet (PCIe 80GB: the SXM rates, 80 GB HBM2e at 1,935 "
                  "GB/s); Ampere GA100 whitepaper"),
)})

#: Other names of built-in devices (case-insensitive, as :func:`get_device` reads them).
DEVICE_ALIASES: Mapping[str, str] = MappingProxyType({
    "V100-SXM2": "V100", "A100-SXM4": "A100", "A100-80GB": "A100", "A100-SXM4-40GB": "A100-40GB",
    "H100-SXM5": "H100", "H100-SXM": "H100", "Tesla-K80": "K80", "GK210": "K80"})


_DATASHEET_KEYS = ("name", "fp32_tflops", "mem_bw_gbs", "fp16_tensor_tflops", "fp16_tflops",
                   "tf32_tensor_tflops", "bf16_tensor_tflops", "bf16_tflops", "sparse",
                   "efficiency", "source", "memory_gb")


def load_device(path: str | os.PathLike) -> Device:
    """A device from a YAML or JSON file of datasheet figures.

    The file holds one mapping with the keyword arguments of :meth:`Device.from_datasheet`
    (``name``, ``fp32_tflops`` and ``mem_bw_gbs`` required; ``memory_gb``, the GPU's memory
    in GiB, optional: without it no configuration is checked against the device's memory)::

        name: A10G
        fp32_tflops: 31.2
        fp16_tensor_tflops: 70
        mem_bw_gbs: 600
        memory_gb: 24
        source: AWS EC2 G5 instance page

    Raises
    ------
    ProfileError
        Unreadable file, not YAML, not a mapping, an unknown or missing key, or a bad figure
        (the message names the file and the key).
    """
    import yaml

    from .._files import read_text

    where = f"device file {str(path)!r}"
    text = read_text(path, "device file", ProfileError)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ProfileError(f"{where}: not valid YAML or JSON ({' '.join(str(e).split())})") \
            from None
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where}: expected a mapping of datasheet figures "
                           f"({', '.join(_DATASHEET_KEYS)}), got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(_DATASHEET_KEYS))
    missing = [k for k in ("name", "fp32_tflops", "mem_bw_gbs") if k not in data]
    if unknown or missing:
        raise ProfileError(f"{where}: unknown keys {unknown}, missing keys {missing}; a device "
                           f"file has {', '.join(_DATASHEET_KEYS)}")
    kw: dict[str, Any] = dict(data)
    name = kw.pop("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{where}: 'name' must be a non-empty string, got {name!r}")
    if not isinstance(kw.get("sparse", False), bool):
        raise ProfileError(f"{where}: 'sparse' must be true or false, got {kw['sparse']!r}")
    kw.setdefault("source", f"datasheet figures in {path}")
    try:
        return Device.from_datasheet(name, **kw)
    except ProfileError as e:
        raise ProfileError(f"{where}: {e}") from None


def get_device(device: str | os.PathLike | Device) -> Device:
    """A :class:`Device` by name (case-insensitive; :data:`DEVICE_ALIASES` too), from a device
    file (a path ending in ``.yaml``, ``.yml`` or ``.json``: :func:`load_device`), or itself.

    Raises
    ------
    UnknownNameError
        Unknown name (the message lists the built-in devices).
    ProfileError
        A device file that cannot be read as one.
    """
    if isinstance(device, Device):
        return device
    if isinstance(device, os.PathLike) or (isinstance(device, str) and device.strip().lower()
                                           .endswith((".yaml", ".yml", ".json"))):
        return load_device(device)
    if isinstance(device, str):
        key = device.strip().lower()
        for alias, target in DEVICE_ALIASES.items():
            if alias.lower() == key:
                key = target.lower()
        for k, d in DEVICES.items():
            if k.lower() == key:
                return d
    raise UnknownNameError(f"unknown device {device!r}; built-in devices are "
                           f"{', '.join(DEVICES)} (also {', '.join(DEVICE_ALIASES)}), or give "
                           "a device file (.yaml/.json of datasheet figures: name, "
                           "fp32_tflops, mem_bw_gbs, fp16_tensor_tflops, ...) or a "
                           "sgdnet.workload.compute.Device (Device.from_datasheet)")


def _builtin(name: str) -> Device | None:
    """The built-in device of that name or alias, or None (never a file)."""
    if name.strip().lower().endswith((".yaml", ".yml", ".json")):
        return None
    try:
        return get_device(name)
    except UnknownNameError:
        return None


def _precision(precision: object) -> str:
    if precision not in PRECISIONS:
        raise ProfileError(f"unknown precision {precision!r}; use one of {list(PRECISIONS)}")
    return precision  # type: ignore[return-value]


def op_time(op: Op, device: str | Device, precision: str, batch_size: int, *,
            backward: bool = False) -> float:
    """Roofline time of one op for a batch, seconds (see the module docstring)."""
    d = get_device(device)
    p = d.check_precision(_precision(precision))
    mult = 2.0 if backward else 1.0
    peak = (d.matmul_flops if op.kind == "matmul" else d.vector_flops)[p]
    t_flops = mult * batch_size * op.flops / (peak * d.efficiency)
    t_mem = (mult * (batch_size * op.elems + op.param_elems) * BYTES_PER_ELEM[p]
             / (d.mem_bw * d.efficiency))
    return max(t_flops, t_mem)


def ops_time(ops: Iterable[Op], device: str | Device, precision: str, batch_size: int
             ) -> tuple[float, float]:
    """Forward and backward time of a list of ops run one after the other, seconds."""
    ops = list(ops)
    f = math.fsum(op_time(o, device, precision, batch_size) for o in ops)
    b = math.fsum(op_time(o, device, precision, batch_size, backward=True) for o in ops)
    return f, b


def _model_time(layers: Iterable[Layer], device: Device, precision: str, batch: int
                ) -> list[tuple[float, float]]:
    return [ops_time(la.ops or (), device, precision, batch) for la in layers]


def _grad_dtype(profile: ModelProfile, grad_dtype: str | None) -> ModelProfile:
    """``profile`` with its gradient bytes for ``grad_dtype`` (None: unchanged)."""
    if grad_dtype is None:
        return profile
    if grad_dtype not in GRAD_DTYPES:
        raise ProfileError(f"unknown gradient dtype {grad_dtype!r}; use one of "
                           f"{list(GRAD_DTYPES)} (or None to keep the profile's)")
    old = profile.meta.get("grad_dtype", "fp32")
    if old not in GRAD_DTYPES:
        raise ProfileError(f"profile {profile.name!r}: meta.grad_dtype {old!r} is not one of "
                           f"{list(GRAD_DTYPES)}")
    if old == grad_dtype:
        return profile
    f = GRAD_DTYPES[grad_dtype] / GRAD_DTYPES[old]
    lays = [Layer(la.name, la.forward_s, la.backward_s, la.grad_bytes * f, la.cv,
                  None if la.tensors is None else tuple(Tensor(t.name, t.nbytes * f, t.update_s)
                                                        for t in la.tensors), la.ops)
            for la in profile.layers]
    note = f"gradients communicated as {grad_dtype} ({old} in the source profile)"
    return profile._copy(layers=lays, meta=dict(profile.meta, grad_dtype=grad_dtype),
                         source=profile.source + ("; " if profile.source else "") + note)


def retime(profile: ModelProfile, device: str | Device | None = None,
           batch_size: int | None = None, precision: str | None = None, *,
           from_device: str | Device | None = None,
           grad_dtype: str | None = None) -> ModelProfile:
    """The profile re-timed for another device, batch size and/or precision.

    Every layer's forward and backward time is multiplied by the ratio of its compute-model
    time on the new (device, precision, batch) to that on the profile's own; so a profile
    built by the compute model is recomputed, and a measured profile keeps its measured
    per-layer detail while following the model's ratios. ``loss_s`` follows the ratio of the
    ops in ``meta["loss_ops"]`` when the profile has them (the transformer builders write
    them), else of the whole model's time; ``zero_grad_s``, ``optimizer_s`` and the tensors' ``update_s``
    (memory-bound per-parameter work) follow the ratio of achievable bandwidths. Gradient
    bytes change only with ``grad_dtype``.

    Parameters
    ----------
    profile : ModelProfile
        Needs ops on every layer (``profile.has_ops``) and a stated ``precision``, unless only
        ``batch_size`` changes: then a profile without ops is scaled linearly
        (:meth:`ModelProfile.scaled`).
    device : str or Device, optional
        Target device (default: the profile's).
    batch_size : int, optional
        Target batch size per worker (default: the profile's).
    precision : {"fp32", "tf32", "fp16", "bf16"}, optional
        Target precision (default: the profile's).
    from_device : str or Device, optional
        The device the profile's times are for, when ``profile.device`` is not a built-in
        device name (the PipeDream CNN profiles do not name their GPU). Without it, a profile
        whose device is unknown can only change its batch size, linearly.
    grad_dtype : {"fp32", "fp16", "bf16"}, optional
        The dtype of the gradients as the framework communicates them; the gradient bytes
        (layers' and tensors') are scaled from the profile's (``meta["grad_dtype"]``, fp32
        when absent) and ``meta["grad_dtype"]`` is set. Default: unchanged, whatever the
        precision, because the common frameworks keep fp32 gradients under mixed
        precision: PyTorch AMP (fp32 parameters, so DDP all-reduces fp32 gradients, unless
        a ``fp16_compress_hook`` is registered: then ``"fp16"``). ``"fp16"`` is right for
        tf_cnn_benchmarks ``--use_fp16`` (its ``--compact_gradient_transfer``, on by
        default, all-reduces fp16 gradients: ``variable_mgr.py``), for Horovod's
        ``Compression.fp16`` and for Apex ``amp`` O2/O3 or ``model.half()`` training with
        fp16 parameters.

    Raises
    ------
    ProfileError
        The profile cannot be re-timed this way (no ops, no precision, unknown reference
        device), the device lacks the precision, or a bad batch size.
    UnknownNameError
        Unknown device name.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise ProfileError(f"batch size must be a positive integer, got {batch_size!r}")
    profile = _grad_dtype(profile, grad_dtype)
    if device is None and precision is None:
        if batch_size is None or batch_size == profile.batch_size:
            return profile
        if not profile.has_ops or profile.precision is None or (
                from_device is None and _builtin(profile.device) is None):
            return profile.scaled(batch_size=batch_size)
    if not profile.has_ops:
        raise ProfileError(f"profile {profile.name!r} has no per-layer ops (FLOPs and bytes), "
                           "so the compute model cannot re-time it for another device or "
                           "precision; use a built-in transformer profile, build one with "
                           "sgdnet.workload.transformers, or scale it with "
                           "ModelProfile.scaled(speed=...)")
    if profile.precision is None:
        raise ProfileError(f"profile {profile.name!r} does not state its precision; re-timing "
                           "needs it (ModelProfile(..., precision='fp32'))")
    old_dev = get_device(from_device) if from_device is not None else _builtin(profile.device)
    if old_dev is None:
        raise ProfileError(f"profile {profile.name!r} is for device {profile.device!r}, which "
                           f"is not a built-in device ({', '.join(DEVICES)}); pass "
                           "from_device=<the Device its times were measured on> (CLI "
                           "--from-device), or use a profile built for a stated device "
                           "(sgdnet.workload.cnns, sgdnet.workload.transformers)")
    new_dev = get_device(device) if device is not None else old_dev
    new_p = _precision(precision) if precision is not None else profile.precision
    new_dev.check_precision(new_p)
    b_new = batch_size if batch_size is not None else profile.batch_size
    old_t = _model_time(profile.layers, old_dev, profile.precision, profile.batch_size)
    new_t = _model_time(profile.layers, new_dev, new_p, b_new)
    bw = (old_dev.mem_bw * old_dev.efficiency) / (new_dev.mem_bw * new_dev.efficiency)

    def ratio(new: float, old: float) -> float:
        return new / old if old > 0 else (b_new / profile.batch_size)

    lays = []
    for la, (of, ob), (nf, nb) in zip(profile.layers, old_t, new_t):
        tensors = None if la.tensors is None else tuple(
            Tensor(t.name, t.nbytes, t.update_s * bw) for t in la.tensors)
        lays.append(Layer(la.name, la.forward_s * ratio(nf, of), la.backward_s * ratio(nb, ob),
                          la.grad_bytes, la.cv, tensors, la.ops))
    loss_ops = profile.meta.get("loss_ops")
    if loss_ops:
        ops = [Op.from_obj(o, f"profile {profile.name!r}: meta.loss_ops") for o in loss_ops]
        tot = ratio(sum(ops_time(ops, new_dev, new_p, b_new)),
                    sum(ops_time(ops, old_dev, profile.precision, profile.batch_size)))
    else:
        tot = ratio(math.fsum(f + b for f, b in new_t), math.fsum(f + b for f, b in old_t))
    note = (f"re-timed by the compute model from {old_dev.name}/{profile.precision}/batch "
            f"{profile.batch_size} to {new_dev.name}/{new_p}/batch {b_new}")
    return profile._copy(layers=lays, batch_size=b_new, device=new_dev.name, precision=new_p,
                         source=profile.source + ("; " if profile.source else "") + note,
                         loss_s=profile.loss_s * tot, zero_grad_s=profile.zero_grad_s * bw,
                         optimizer_s=profile.optimizer_s * bw)
