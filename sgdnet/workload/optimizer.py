"""The optimizer step: bytes it reads and writes per parameter, timed on the memory bandwidth.

An optimizer step is elementwise over the parameters and moves far more bytes than it computes
FLOPs (Adam: ~15 FLOPs for 28 bytes per parameter), so it runs at the device's memory
bandwidth. Its time for ``n`` parameters is

    t = n * (bytes read + bytes written per parameter) / (device.mem_bw * device.efficiency)

(the achievable fraction of the bandwidth is the compute model's one efficiency factor,
:data:`sgdnet.workload.compute.EFFICIENCY`). What one step reads and writes per parameter, for a
fused / foreach kernel that makes one pass (PyTorch's ``fused=True`` / ``foreach=True``
``torch.optim.SGD``, ``Adam`` and ``AdamW``; Apex ``FusedAdam``; DeepSpeed's fused Adam):

* the **master weights** it updates (dtype ``master_dtype``): read and written;
* the **gradient** (``grad_dtype``): read;
* its **state** tensors, each of the master weights' dtype (PyTorch allocates them with
  ``torch.zeros_like(param)``): SGD none, momentum one buffer, Adam/AdamW the first and
  second moments, all read and written;
* with mixed precision (``param_dtype`` other than ``master_dtype``), the **low-precision copy**
  of the parameters the forward pass uses: written (Apex's ``fused_adam_cuda_kernel.cu`` writes
  ``p_copy[j] = (half) p[j]`` in the same kernel; DeepSpeed copies the updated fp32 partition
  into the bf16/fp16 one).

So fp32 AdamW reads p, g, m, v (16 B) and writes p, m, v (12 B): 28 B per parameter; under mixed
precision with fp32 master weights and bf16 gradients and parameters it reads 4 + 2 + 8 and
writes 4 + 8 + 2, again 28 B. SGD moves 12 B, momentum 20 B, in both cases. AdamW's decoupled
weight decay is applied to the weight in the same pass (no extra traffic). LAMB is counted as
Adam (a lower bound: its trust ratio also reads the weights and the update for two norms).

Memory kept between steps (what the ZeRO paper calls the optimizer states, ``K`` bytes per
parameter, Rajbhandari et al. 2020, Sec. 3.1) is :func:`state_bytes_per_param`: the master
copy when it differs from the parameters, plus the state tensors: 4 + 4 + 4 = 12 for
mixed-precision Adam (``K = 12``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import ProfileError
from .compute import DTYPE_BYTES, get_device
from .profile import Layer, ModelProfile, Tensor

if TYPE_CHECKING:
    from .compute import Device

__all__ = ["OPTIMIZERS", "DTYPE_BYTES", "OPTIMIZER_BYTES", "step_traffic", "bytes_per_param",
           "state_bytes_per_param", "optimizer_step_seconds", "update_time", "with_optimizer",
           "profile_parameters", "profile_optimizer"]

#: State tensors per parameter of each optimizer (each of the master weights' dtype): SGD
#: none; SGD with momentum its momentum buffer; Adam / AdamW (and LAMB) the first and second
#: moments (``exp_avg``, ``exp_avg_sq`` of ``torch.optim.Adam``).
OPTIMIZERS: Mapping[str, int] = MappingProxyType({"sgd": 0, "momentum": 1, "adam": 2,
                                                   "adamw": 2, "lamb": 2})



def _optimizer(optimizer: object) -> int:
    if optimizer not in OPTIMIZERS:
        raise ProfileError(f"unknown optimizer {optimizer!r}; use one of {list(OPTIMIZERS)}")
    return OPTIMIZERS[optimizer]  # type: ignore[index]


def _dtype(dtype: object, what: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ProfileError(f"unknown {what} {dtype!r}; use one of {list(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]  # type: ignore[index]


def step_traffic(optimizer: str = "adamw", *, master_dtype: str = "fp32",
                 grad_dtype: str = "bf16", param_dtype: str = "bf16") -> tuple[int, int]:
    """Bytes one optimizer step reads and writes per parameter (see the module docstring).

    Parameters
    ----------
    optimizer : {"sgd", "momentum", "adam", "adamw", "lamb"}
        The optimizer.
    master_dtype : {"fp32", "bf16", "fp16"}
        Dtype of the weights the optimizer updates (and of its state tensors).
    grad_dtype : {"fp32", "bf16", "fp16"}
        Dtype of the gradients it reads.
    param_dtype : {"fp32", "bf16", "fp16"}
        Dtype of the parameters the forward pass uses; a copy is written when it differs from
        ``master_dtype`` (mixed precision with master weights).

    Returns
    -------
    (int, int)
        Bytes read, bytes written, per parameter.

    Raises
    ------
    ProfileError
        Unknown optimizer or dtype.

    Examples
    --------
    >>> step_traffic("adamw", master_dtype="fp32", grad_dtype="fp32", param_dtype="fp32")
    (16, 12)
    >>> step_traffic("adamw")  # fp32 master weights, bf16 gradients and parameters
    (14, 14)
    """
    states = _optimizer(optimizer)
    m = _dtype(master_dtype, "master dtype")
    g = _dtype(grad_dtype, "gradient dtype")
    p = _dtype(param_dtype, "parameter dtype")
    copy = p if param_dtype != master_dtype else 0
    return m + g + states * m, m + states * m + copy


def bytes_per_param(optimizer: str = "adamw", *, master_dtype: str = "fp32",
                    grad_dtype: str = "bf16", param_dtype: str = "bf16") -> int:
    """Bytes read plus written per parameter by one step (:func:`step_traffic`'s sum)."""
    r, w = step_traffic(optimizer, master_dtype=master_dtype, grad_dtype=grad_dtype,
                        param_dtype=param_dtype)
    return r + w


def state_bytes_per_param(optimizer: str = "adamw", *, master_dtype: str = "fp32",
                          param_dtype: str = "bf16") -> int:
    """Bytes per parameter the optimizer keeps between steps (the ZeRO paper's ``K``): the
    master copy of the weights when ``master_dtype`` differs from ``param_dtype``, plus its
    state tensors in ``master_dtype``.

    Examples
    --------
    >>> state_bytes_per_param("adam", master_dtype="fp32", param_dtype="fp16")  # ZeRO's K
    12
    >>> state_bytes_per_param("adam", master_dtype="fp32", param_dtype="fp32")
    8
    """
    states = _optimizer(optimizer)
    m = _dtype(master_dtype, "master dtype")
    _dtype(param_dtype, "parameter dtype")
    return (m if param_dtype != master_dtype else 0) + states * m


#: Bytes moved per parameter by one step with fp32 weights, gradients and states (no separate
#: master copy): SGD 12, momentum 20, Adam / AdamW / LAMB 28. What
#: :func:`update_time` uses; mixed precision with fp32 master weights
#: and 16-bit gradients and parameters moves the same totals.
OPTIMIZER_BYTES: Mapping[str, int] = MappingProxyType(
    {k: bytes_per_param(k, master_dtype="fp32", grad_dtype="fp32", param_dtype="fp32")
     for k in OPTIMIZERS})


def optimizer_step_seconds(n_params: float, device: str | Device, optimizer: str = "adamw", *,
                           master_dtype: str = "fp32", grad_dtype: str = "bf16",
                           param_dtype: str = "bf16") -> float:
    """Memory-bound time of one optimizer step over ``n_params`` parameters, seconds:
    :func:`bytes_per_param` times ``n_params`` over ``device.mem_bw * device.efficiency``.

    Parameters
    ----------
    n_params : float
        Parameters updated (a shard's count for a sharded optimizer), >= 0.
    device : str or Device
        A device name (:func:`sgdnet.workload.compute.get_device`), device file or Device.
    optimizer, master_dtype, grad_dtype, param_dtype
        As :func:`step_traffic`.

    Raises
    ------
    ProfileError
        Negative or non-finite ``n_params``, unknown optimizer or dtype.
    UnknownNameError
        Unknown device name.
    """
    if isinstance(n_params, bool) or not isinstance(n_params, (int, float)) or not (
            math.isfinite(n_params) and n_params >= 0):
        raise ProfileError(f"n_params must be a finite number >= 0 (parameters updated), got "
                           f"{n_params!r}")
    d = get_device(device)
    b = bytes_per_param(optimizer, master_dtype=master_dtype, grad_dtype=grad_dtype,
                        param_dtype=param_dtype)
    return n_params * b / (d.mem_bw * d.efficiency)


def update_time(n_params: float, device: str | Device, optimizer: str = "adam") -> float:
    """Memory-bound time of one optimizer update of ``n_params`` parameters, seconds:
    :func:`optimizer_step_seconds` with fp32 weights, gradients and state
    (:data:`OPTIMIZER_BYTES`; mixed precision with fp32 master weights moves the same bytes)."""
    return optimizer_step_seconds(n_params, device, optimizer, master_dtype="fp32",
                                  grad_dtype="fp32", param_dtype="fp32")


def _grad_elem_bytes(profile: ModelProfile) -> int:
    g = profile.meta.get("grad_dtype", "fp32")
    if g not in DTYPE_BYTES:
        raise ProfileError(f"profile {profile.name!r}: meta.grad_dtype {g!r} is not one of "
                           f"{list(DTYPE_BYTES)}")
    return DTYPE_BYTES[g]


def profile_parameters(profile: ModelProfile) -> float | None:
    """The parameter count of a profile: ``meta["parameters"]`` when stated (the builders of
    :mod:`.transformers` and :mod:`.cnns` and ``scripts/build_models.py`` write it), else its
    gradient bytes over the bytes per gradient element (``meta["grad_dtype"]``, fp32 when
    absent: a profile's ``grad_bytes`` are one gradient of every parameter); None when the
    profile has no gradient bytes."""
    n = profile.meta.get("parameters")
    if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n > 0:
        return float(n)
    gb = profile.grad_bytes
    return gb / _grad_elem_bytes(profile) if gb > 0 else None


def profile_optimizer(profile: ModelProfile, default: str = "adamw") -> str:
    """The optimizer a profile was built for (``meta["optimizer"]`` when it is one of
    :data:`OPTIMIZERS`), else ``default``."""
    o = profile.meta.get("optimizer")
    return o if isinstance(o, str) and o in OPTIMIZERS else default


def with_optimizer(profile: ModelProfile, optimizer: str, device: str | Device, *,
                   master_dtype: str = "fp32", grad_dtype: str = "bf16",
                   param_dtype: str = "bf16") -> ModelProfile:
    """The profile whose optimizer step is ``optimizer``'s on ``device``.

    Every tensor's ``update_s`` becomes :func:`optimizer_step_seconds` of its parameter count
    (its gradient bytes over the bytes per element of ``meta["grad_dtype"]``, fp32 when
    absent); the parameters of layers without a tensor list are timed together as
    ``optimizer_s`` (which replaces the profile's). ``meta["optimizer"]`` is set; nothing else
    changes, so :attr:`ModelProfile.update_s` is the whole model's step time.

    Raises
    ------
    ProfileError
        Unknown optimizer or dtype, or a bad ``meta["grad_dtype"]``.
    UnknownNameError
        Unknown device name.
    """
    d = get_device(device)
    kw: dict[str, Any] = dict(master_dtype=master_dtype, grad_dtype=grad_dtype,
                              param_dtype=param_dtype)
    _optimizer(optimizer)
    eb = _grad_elem_bytes(profile)

    def t(nbytes: float) -> float:
        return optimizer_step_seconds(nbytes / eb, d, optimizer, **kw)

    lays: list[Layer] = []
    loose = 0.0
    for la in profile.layers:
        if la.tensors is None:
            loose += la.grad_bytes
            lays.append(la)
        else:
            lays.append(dataclasses.replace(la, tensors=tuple(
                Tensor(x.name, x.nbytes, t(x.nbytes)) for x in la.tensors)))
    note = (f"optimizer step: {optimizer} on {d.name} ({bytes_per_param(optimizer, **kw)} B "
            f"per parameter: master {master_dtype}, gradients {grad_dtype}, parameters "
            f"{param_dtype})")
    return profile._copy(layers=lays, optimizer_s=t(loose),
                         meta=dict(profile.meta, optimizer=optimizer),
                         source=profile.source + ("; " if profile.source else "") + note)
