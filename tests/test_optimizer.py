"""The optimizer step (issue #38): bytes per parameter, memory-bound time, the generic option.

References for the per-parameter counts:

* ZeRO (Rajbhandari et al., SC 2020, arXiv:1910.02054), Sec. 3.1: mixed-precision Adam keeps
  an fp32 copy of the parameters, the momentum and the variance, "K = 12" bytes per parameter
  of optimizer states, beside 2 + 2 bytes of fp16 parameters and gradients;
* Apex ``csrc/fused_adam_cuda_kernel.cu`` (``adam_cuda_kernel``): reads ``p`` (fp32), ``m``,
  ``v`` (fp32) and ``g`` (fp16), writes ``p``, ``m``, ``v`` and ``p_copy`` (fp16);
* ``torch.optim.AdamW(fused=True)`` on fp32 parameters: reads param, grad, exp_avg,
  exp_avg_sq and writes param, exp_avg, exp_avg_sq; ``torch.optim.SGD``: ``p -= lr * g``
  (momentum: ``buf = mu * buf + g; p -= lr * buf``).
"""

from __future__ import annotations

import pytest

import sgdnet
from sgdnet import Cluster, Layer, ModelProfile, Tensor, variants
from sgdnet.errors import ProfileError, VariantError
from sgdnet.workload import compute as C
from sgdnet.workload import optimizer as O
from sgdnet.workload import transformers as T

FP32 = dict(master_dtype="fp32", grad_dtype="fp32", param_dtype="fp32")


def test_zero_paper_k_is_12_for_mixed_precision_adam():
    assert O.state_bytes_per_param("adam", master_dtype="fp32", param_dtype="fp16") == 12
    assert O.state_bytes_per_param("adamw", master_dtype="fp32", param_dtype="bf16") == 12
    # without a separate master copy (fp32 training): momentum and variance only
    assert O.state_bytes_per_param("adam", master_dtype="fp32", param_dtype="fp32") == 8
    assert O.state_bytes_per_param("momentum", master_dtype="fp32", param_dtype="fp32") == 4
    assert O.state_bytes_per_param("sgd", master_dtype="fp32", param_dtype="fp32") == 0


def test_apex_fused_adam_kernel_traffic():
    # reads p, m, v (4 B each) and g (2 B); writes p, m, v (4 B each) and p_copy (2 B)
    assert O.step_traffic("adam", master_dtype="fp32", grad_dtype="fp16",
                          param_dtype="fp16") == (4 + 4 + 4 + 2, 4 + 4 + 4 + 2)


@pytest.mark.parametrize("opt, read, written", [
    ("sgd", (4, 4), (4,)),                         # p, g -> p
    ("momentum", (4, 4, 4), (4, 4)),               # p, g, buf -> p, buf
    ("adam", (4, 4, 4, 4), (4, 4, 4)),             # p, g, m, v -> p, m, v
    ("adamw", (4, 4, 4, 4), (4, 4, 4)),            # decoupled decay: the same pass
])
def test_pytorch_fp32_optimizers_traffic(opt, read, written):
    assert O.step_traffic(opt, **FP32) == (sum(read), sum(written))
    assert O.bytes_per_param(opt, **FP32) == sum(read) + sum(written)


def test_update_time_is_the_fp32_optimizer_step():
    # the old table (fp32: 3, 5, 7 accesses of 4 B) is kept, and derived in one place
    assert dict(O.OPTIMIZER_BYTES) == {"sgd": 12, "momentum": 20, "adam": 28, "adamw": 28,
                                       "lamb": 28}
    a100 = C.DEVICES["A100"]
    for opt, b in O.OPTIMIZER_BYTES.items():
        assert O.update_time(1e9, "A100", opt) == pytest.approx(
            1e9 * b / (2039e9 * a100.efficiency), rel=1e-15)
    # mixed precision with fp32 master weights moves the same totals
    for opt in ("sgd", "momentum", "adam"):
        assert O.bytes_per_param(opt, master_dtype="fp32", grad_dtype="bf16",
                                 param_dtype="bf16") == O.OPTIMIZER_BYTES[opt]


def test_step_time_is_bytes_over_bandwidth_hand_case():
    dev = C.Device.from_datasheet("X", fp32_tflops=10, mem_bw_gbs=1000, efficiency=0.5)
    # AdamW, fp32 master, bf16 grads and params: 14 + 14 B per parameter on 500 GB/s
    assert O.optimizer_step_seconds(1e9, dev, "adamw") == pytest.approx(28e9 / 500e9, rel=1e-15)
    # fp32 gradients, bf16 parameter copy: 4 + 4 + 8 read, 4 + 8 + 2 written
    assert O.optimizer_step_seconds(2e9, dev, "adam", grad_dtype="fp32") == pytest.approx(
        2e9 * 30 / 500e9, rel=1e-15)
    # pure bf16 (no master copy, bf16 states): 2 + 2 + 4 read, 2 + 4 written
    assert O.bytes_per_param("adam", master_dtype="bf16", grad_dtype="bf16",
                             param_dtype="bf16") == 14
    assert O.optimizer_step_seconds(0, dev) == 0.0


def test_bad_inputs():
    with pytest.raises(ProfileError, match="unknown optimizer 'rmsprop'.*adamw"):
        O.bytes_per_param("rmsprop")
    with pytest.raises(ProfileError, match="gradient dtype 'int8'"):
        O.step_traffic("sgd", grad_dtype="int8")
    with pytest.raises(ProfileError, match="n_params"):
        O.optimizer_step_seconds(-1, "A100")


def test_with_optimizer_retimes_every_tensor_and_the_rest():
    dev = C.Device.from_datasheet("X", fp32_tflops=10, mem_bw_gbs=1000, efficiency=0.5)
    prof = ModelProfile("toy", [Layer("a", 1e-3, 2e-3, 8e6, tensors=(Tensor("w", 6e6),
                                                                      Tensor("b", 2e6))),
                                Layer("c", 1e-3, 2e-3, 4e6)], batch_size=8, optimizer_s=1.0)
    got = O.with_optimizer(prof, "sgd", dev, **FP32)
    # fp32 gradients: 4 B per parameter; SGD 12 B per parameter on 500 GB/s
    w, b = got.layers[0].tensors
    assert w.update_s == pytest.approx(1.5e6 * 12 / 500e9, rel=1e-15)
    assert b.update_s == pytest.approx(0.5e6 * 12 / 500e9, rel=1e-15)
    assert got.optimizer_s == pytest.approx(1e6 * 12 / 500e9, rel=1e-15)  # layer c: no tensors
    assert got.update_s == pytest.approx(3e6 * 12 / 500e9, rel=1e-12)
    assert got.meta["optimizer"] == "sgd" and got.compute_s == prof.compute_s
    # bf16 gradients: 2 B per parameter, twice the parameters of the same bytes
    half = prof._copy(meta={"grad_dtype": "bf16"})
    assert O.with_optimizer(half, "sgd", dev, **FP32).update_s == pytest.approx(
        2 * got.update_s, rel=1e-12)


def test_transformer_profiles_keep_their_update_times():
    p = T.gpt2("tiny", n_layers=1, d_model=64, n_heads=4, vocab=1000, n_ctx=128, seq_len=128,
               batch_size=2, device="A100")
    again = O.with_optimizer(p, "adamw", "A100", **FP32)
    assert again.update_s == pytest.approx(p.update_s, rel=1e-12)
    n = p.meta["parameters"]
    assert p.update_s == pytest.approx(n * 28 / (2039e9 * C.EFFICIENCY), rel=1e-12)
    assert O.profile_parameters(p) == n and O.profile_optimizer(p) == "adamw"


def test_the_generic_option_of_every_variant():
    for name in variants.names():
        assert "optimizer" in variants.get(name).option_names(), name
    with pytest.raises(VariantError, match="optimizer='rmsprop'.*adamw"):
        variants.build("allreduce", "resnet50", Cluster(workers=2), optimizer="rmsprop")


def _step(prof, **kw):
    p = sgdnet.predict("allreduce", prof, Cluster(workers=2, bandwidth=1e9, latency=0.0),
                       granularity="coarse", steps=20, replications=1, seed=0, **kw)
    return 1.0 / p.iterations_per_s.mean, p


def test_the_option_retimes_the_step_on_the_profiles_device():
    p = T.gpt2("tiny", n_layers=1, d_model=64, n_heads=4, vocab=1000, n_ctx=128, seq_len=128,
               batch_size=2, device="A100")
    n, bw = p.meta["parameters"], 2039e9 * C.EFFICIENCY
    t_default, _ = _step(p)
    t_adamw, pa = _step(p, optimizer="adamw")
    t_sgd, ps = _step(p, optimizer="sgd")
    assert t_adamw == pytest.approx(t_default, rel=1e-12)  # the profile is built for AdamW
    assert t_adamw - t_sgd == pytest.approx(n * (28 - 12) / bw, rel=1e-6)
    assert ps.options["optimizer"] == "sgd" and pa.options["optimizer"] == "adamw"
    # SGD keeps no optimizer state: the memory follows the option too
    assert ps.memory.optimizer == 0 and pa.memory.optimizer == pytest.approx(8 * n)
    # a device that is not a built-in one: the update times are kept
    q = p._copy(device="my GPU")
    assert _step(q, optimizer="sgd")[0] == pytest.approx(_step(q)[0], rel=1e-12)
