"""Memory per GPU (issue #38): the ZeRO paper's table, shard degrees, activations, the fit check.

* ZeRO (Rajbhandari et al., SC 2020, arXiv:1910.02054), Figure 1: Ψ = 7.5 B parameters,
  mixed-precision Adam (K = 12), N_d = 64: 120 GB per GPU for the baseline, 31.4 GB with
  P_os, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p (GB = 10^9 bytes);
* Korthikanti et al. 2022 (arXiv:2205.05198), Sec. 4.1, Eq. 1: a transformer block keeps
  ``s b h (34 + 5 a s / h)`` bytes of activations (16-bit, no recomputation);
* the same, Sec. 4 and Table 2: full recomputation keeps ``2 s b h`` per block plus one
  block being recomputed; selective recomputation keeps ``34 s b h`` per block;
* llm-foundry's benchmark table (tests/data/published_sharded.yaml): MPT-7B FSDP on 16
  A100-40GB at micro-batch 16 with activation checkpointing;
* NVIDIA datasheets: A100 80GB / 40GB, H100 80GB, V100 PCIe 16GB, T4 16GB, K80 12 GB per GPU.
"""

from __future__ import annotations

import math

import pytest

import sgdnet
from sgdnet import Cluster, Layer, ModelProfile, Study, models
from sgdnet.errors import ProfileError, VariantError
from sgdnet.prediction import summarize
from sgdnet.workload import compute as C
from sgdnet.workload import transformers as T
from sgdnet.workload.memory import (
    DeviceMemoryError,
    MemoryBreakdown,
    ShardDegrees,
    activation_bytes,
    check_fits,
    memory_for,
    memory_per_gpu,
    shard_degrees,
)
from sgdnet.workload.ops import Op

GIB = 2**30
TOY = ModelProfile("toy", [Layer("a", 1e-3, 2e-3, 4e6)], batch_size=1)
MIXED = dict(optimizer="adam", param_dtype="fp16", grad_dtype="fp16", master_dtype="fp32",
             activations=False, buffers=False)
TOPO = dict(gpus_per_node=8, intra_bandwidth="150GB/s", nics_per_node=4,
            nic_bandwidth="100Gbps")


@pytest.mark.parametrize("stage, gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(stage, gb):
    psi, nd = 7.5e9, 64
    deg = shard_degrees("zero", {"stage": stage}, nd) if stage else shard_degrees("allreduce",
                                                                                 {}, nd)
    m = memory_per_gpu(TOY, degrees=deg, n_params=psi, **MIXED)
    assert round(m.total / 1e9, 1) == gb
    exact = {0: 16 * psi, 1: 4 * psi + 12 * psi / nd, 2: 2 * psi + 14 * psi / nd,
             3: 16 * psi / nd}[stage]
    assert m.total == pytest.approx(exact, rel=1e-15) and m.model_states == m.total


def test_shard_degrees_of_every_strategy():
    n = 16
    assert shard_degrees("allreduce", {}, n) == ShardDegrees(1, 1, 1)
    assert shard_degrees("zero", {"stage": 1}, n) == ShardDegrees(1, 1, n)
    assert shard_degrees("zero", {"stage": 2}, n) == ShardDegrees(1, n, n)
    assert shard_degrees("zero", {}, n) == ShardDegrees(1, n, n)  # stage 2 by default
    assert shard_degrees("zero", {"stage": 3}, n) == ShardDegrees(n, n, n)
    assert shard_degrees("fsdp", {}, n) == ShardDegrees(n, n, n)  # FULL_SHARD by default
    assert shard_degrees("fsdp", {"sharding": "shard_grad_op"}, n) == ShardDegrees(1, n, n)
    assert shard_degrees("fsdp", {"sharding": "no_shard"}, n) == ShardDegrees(1, 1, 1)
    assert shard_degrees("fsdp", {"sharding": "hybrid"}, n, 8) == ShardDegrees(8, 8, 8)
    assert shard_degrees("fsdp", {"sharding": "hybrid"}, 4, 8) == ShardDegrees(4, 4, 4)
    with pytest.raises(VariantError, match="stage=4"):
        shard_degrees("zero", {"stage": 4}, n)
    with pytest.raises(VariantError, match="sharding='half'"):
        shard_degrees("fsdp", {"sharding": "half"}, n)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 64])
def test_model_states_scale_with_the_shard_degrees(n):
    psi = 1e9
    for deg, want in ((ShardDegrees(1, 1, n), (2, 2, 12 / n)),
                      (ShardDegrees(1, n, n), (2, 2 / n, 12 / n)),
                      (ShardDegrees(n, n, n), (2 / n, 2 / n, 12 / n))):
        m = memory_per_gpu(TOY, degrees=deg, n_params=psi, **MIXED)
        assert (m.params, m.grads, m.optimizer) == pytest.approx([w * psi for w in want],
                                                                 rel=1e-15)


def test_hybrid_shards_inside_a_node():
    p = models.load("gpt2_xl")
    psi = p.meta["parameters"]
    clu = Cluster(workers=16, topology=TOPO)
    opts = sgdnet.variants.get("fsdp").resolve({"sharding": "hybrid"})
    m = memory_for("fsdp", opts, p, clu)
    # 2 nodes of 8: sharded over the node's 8 GPUs (bf16 params and grads, K = 12)
    assert m.model_states == pytest.approx(16 * psi / 8, rel=1e-12)
    full = memory_for("fsdp", sgdnet.variants.get("fsdp").resolve({}), p, clu)
    assert full.model_states == pytest.approx(16 * psi / 16, rel=1e-12)


def _gpt2(n_layers, **kw):
    return T.gpt2("g", n_layers=n_layers, d_model=256, n_heads=8, vocab=1000, n_ctx=512,
                  seq_len=512, batch_size=4, device="A100", **kw)


def test_korthikanti_activations_per_block():
    s, b, h, a = 512, 4, 256, 8
    one, three = activation_bytes(_gpt2(1))[0], activation_bytes(_gpt2(3))[0]
    assert (three - one) / 2 == pytest.approx(s * b * h * (34 + 5 * a * s / h), rel=1e-12)
    # unfused kernels change the time, not what a block keeps
    assert activation_bytes(_gpt2(3, fused=False))[0] == pytest.approx(three, rel=1e-12)
    # fp32 activations: every 2-byte element of the formula counts 4, the masks stay 1 byte
    f1 = activation_bytes(_gpt2(1, precision="fp32"))[0]
    f3 = activation_bytes(_gpt2(3, precision="fp32"))[0]
    assert (f3 - f1) / 2 == pytest.approx(s * b * h * (66 + 9 * a * s / h), rel=1e-12)


def test_vit_blocks_have_no_dropout_masks():
    kw = dict(d_model=128, n_heads=4, image=64, patch=16, n_classes=10, batch_size=2,
              device="A100")
    one = activation_bytes(T.vit("v", n_layers=1, **kw))[0]
    two = activation_bytes(T.vit("v", n_layers=2, **kw))[0]
    s, b, h, a = 17, 2, 128, 4  # 16 patches + the class token
    assert two - one == pytest.approx(s * b * h * (32 + 2 * a * s / h), rel=1e-12)


def test_ops_rule_for_other_profiles():
    conv = Op("conv", "matmul", 1e9, 3e6, 1e5)
    bn = Op("batchnorm", "vector", 8e6, 2e6)
    relu = Op("relu", "vector", 1e6, 2e6)  # ReLU(inplace=True): writes over its input
    prof = ModelProfile("cnn", [Layer("c", 1e-3, 2e-3, 4e5, ops=(conv, bn, relu))],
                        batch_size=8, precision="fp16")
    got, rule = activation_bytes(prof)
    assert got == 8 * 2 * (3e6 + 2e6) / 2 and "ops" in rule
    assert activation_bytes(TOY) == (0.0, "activations not counted: the profile has no ops")


def test_accumulation_keeps_one_micro_batch_and_the_whole_gradient():
    p = _gpt2(2)
    deg = ShardDegrees(8, 8, 8)
    m1 = memory_per_gpu(p, degrees=deg)
    m4 = memory_per_gpu(p, degrees=deg, accumulate=4)
    assert m4.activations == m1.activations and m4.params == m1.params
    assert m4.grads == 8 * m1.grads  # no reduce-scatter before the last micro-batch


def test_full_shard_buffers_closed_form():
    # two blocks of 3e6 and 1e6 parameters, a root (embedding) of 5e6, fp32 gradient bytes
    lay = [Layer("wte", 0, 0, 4 * 5e6), Layer("h.0.mlp", 0, 0, 4 * 3e6),
           Layer("h.1.mlp", 0, 0, 4 * 1e6)]
    p = ModelProfile("b", lay, batch_size=1)
    deg = ShardDegrees(4, 4, 4)
    m = memory_per_gpu(p, degrees=deg, activations=False)
    # bf16: root 5e6 + two units of the largest (3e6) gathered, one unsharded gradient of 5e6
    assert m.buffers == pytest.approx(2 * (5e6 + 2 * 3e6) + 2 * 5e6, rel=1e-15)
    unlimited = memory_per_gpu(p, degrees=deg, activations=False, limit_all_gathers=False)
    assert unlimited.buffers == m.buffers  # two units: both in flight either way
    per_layer = memory_per_gpu(p, degrees=deg, activations=False, wrap=1)
    assert per_layer.buffers == pytest.approx(2 * (2 * 5e6) + 2 * 5e6, rel=1e-15)
    assert memory_per_gpu(p, degrees=ShardDegrees(1, 4, 4), activations=False).buffers == 0


def test_device_memory_from_the_datasheets():
    D = C.DEVICES
    assert D["A100"].memory == 80 * GIB and D["A100-40GB"].memory == 40 * GIB
    assert D["H100"].memory == 80 * GIB and D["V100-PCIe"].memory == 16 * GIB
    assert D["T4"].memory == 16 * GIB and D["K80"].memory == 12 * GIB
    assert D["A10"].memory == D["L4"].memory == 24 * GIB
    assert all(d.memory is not None for d in D.values())


def test_device_files_take_memory_optionally(tmp_path):
    y = tmp_path / "g.yaml"
    y.write_text("name: G\nfp32_tflops: 5\nmem_bw_gbs: 100\nmemory_gb: 24\n")
    assert C.load_device(y).memory == 24 * GIB
    old = tmp_path / "old.yaml"
    old.write_text("name: G\nfp32_tflops: 5\nmem_bw_gbs: 100\n")
    d = C.load_device(old)
    assert d.memory is None
    with pytest.raises(ProfileError, match="memory is unknown"):
        memory_per_gpu(TOY, n_params=1e6).fits(d)
    with pytest.raises(ProfileError, match="memory_gb must be a positive"):
        C.Device.from_datasheet("X", fp32_tflops=1, mem_bw_gbs=1, memory_gb=0)


def test_breakdown_fits_and_reads():
    m = memory_per_gpu(TOY, n_params=1e9, device="T4", **MIXED)
    assert m.total == 16e9 and m.fits() and not m.fits("K80")
    text = str(m)
    assert "memory per GPU: 16.00 GB" in text and "optimizer states" in text
    assert "T4" in text and "17.18 GB (16 GiB): fits" in text
    assert m.to_dict()["total"] == 16e9
    assert isinstance(m, MemoryBreakdown)


def test_gpt2_xl_unsharded_adam_does_not_fit_a_16gb_gpu():
    # 1.56 B parameters x 16 B (AMP: fp32 weights and gradients, Adam's two moments) = 24.9 GB
    p = models.load("gpt2_xl")
    assert 16 * p.meta["parameters"] > 16 * GIB
    with pytest.raises(DeviceMemoryError, match=r"needs \d+\.\d+ GB per GPU.*V100-PCIe has "
                                                r"17\.18 GB \(16 GiB\).*shard more.*accumulate"):
        sgdnet.predict("allreduce", p, Cluster(workers=2), granularity="coarse", steps=5,
                       replications=1, device="V100-PCIe")
    assert issubclass(DeviceMemoryError, VariantError)
    got = sgdnet.predict("allreduce", p, Cluster(workers=2), granularity="coarse", steps=5,
                         replications=1, seed=0, device="V100-PCIe", check_memory=False)
    assert not got.memory.fits()
    assert summarize(got)["memory_gb"] == pytest.approx(got.memory.total / 1e9)
    # sharded over 64 GPUs the model states take 16 * 1.56e9 / 64 = 0.39 GB
    opts = sgdnet.variants.get("fsdp").resolve({})
    m = memory_for("fsdp", opts, p, Cluster(workers=64, topology=TOPO), "V100-PCIe")
    assert m.model_states == pytest.approx(16 * p.meta["parameters"] / 64, rel=1e-12)


def test_every_prediction_reports_memory():
    p = sgdnet.predict("allreduce", "resnet50", Cluster(workers=2), granularity="coarse",
                       steps=5, replications=1, seed=0)
    psi = models.load("resnet50").meta["parameters"]
    # no device named ("unspecified GPU"): reported, not checked; AMP accounting, AdamW
    assert p.memory.device is None
    assert p.memory.model_states == pytest.approx(16 * psi, rel=1e-12)
    assert summarize(p)["memory_gb"] == pytest.approx(p.memory.total / 1e9)
    assert p.to_dict()["memory"]["total"] == p.memory.total
    no_count = ModelProfile("z", [Layer("a", 1e-3, 1e-3, 0.0)], batch_size=1)
    q = sgdnet.predict("allreduce", no_count, Cluster(workers=2), granularity="coarse",
                       steps=5, replications=1, seed=0)
    assert q.memory is None and summarize(q)["memory_gb"] is None


def test_a_study_records_a_configuration_that_does_not_fit(tmp_path):
    s = Study(grid={"device": ["H100", "T4"]},
              fixed={"variant": "allreduce", "model": "gpt2_xl", "granularity": "coarse",
                     "steps": 5, "cluster.workers": 2}, replications=1)
    res = s.run("serial", out=tmp_path / "t.csv")
    assert len(res.failed) == 1
    assert res.failed[0]["error"].startswith("DeviceMemoryError:")
    assert "T4" in res.failed[0]["error"]
    ok = [r for r in res.rows if not r.get("error")]
    assert len(ok) == 1 and math.isfinite(ok[0]["memory_gb"])
    assert ok[0]["memory_gb"] < 80 * GIB / 1e9


# ------------------------------------------------ activation checkpointing (recomputation)
# Korthikanti et al. 2022 (arXiv:2205.05198), Sec. 4 and Table 2: with full recomputation a
# block keeps its input, 2 s b h bytes (16-bit), and one block's Eq. 1 activations are live
# again while it is recomputed; selective recomputation drops Eq. 1's 5 a s / h term.
S, B, H, A = 512, 4, 256, 8
SBH = S * B * H
BLOCK = SBH * (34 + 5 * A * S / H)  # Eq. 1, one block, no recomputation


def _ckpt(n_layers, policy, **kw):
    from sgdnet.workload.llms import with_recompute
    return with_recompute(_gpt2(n_layers, **kw), policy, "A100")


def _act(p, recompute=None):
    return activation_bytes(p, recompute)[0]


def test_full_recomputation_keeps_each_block_input_and_one_block():
    none1, none3 = _act(_gpt2(1)), _act(_gpt2(3))
    full1, full3 = _act(_ckpt(1, "full")), _act(_ckpt(3, "full"))
    assert (full3 - full1) / 2 == pytest.approx(2 * SBH, rel=1e-12)  # input only per block
    # one block: its input plus its own activations recomputed in backward
    assert full1 - none1 == pytest.approx(2 * SBH, rel=1e-12)
    # L blocks: L inputs + one block instead of L blocks
    assert none3 - full3 == pytest.approx(2 * BLOCK - 3 * 2 * SBH, rel=1e-12)
    # fp32 activations: the kept input counts 4 bytes per element
    f1, f3 = _act(_ckpt(1, "full", precision="fp32")), _act(_ckpt(3, "full",
                                                                    precision="fp32"))
    assert (f3 - f1) / 2 == pytest.approx(4 * SBH, rel=1e-12)


def test_selective_recomputation_drops_the_attention_term():
    op1, op3 = _act(_ckpt(1, "op")), _act(_ckpt(3, "op"))
    assert (op3 - op1) / 2 == pytest.approx(34 * SBH, rel=1e-12)  # Table 2: 34 s b h
    assert _act(_gpt2(1)) - op1 == pytest.approx(5 * A * S * S * B, rel=1e-12)


def test_every_k_th_block_checkpointed():
    none4 = _act(_gpt2(4))
    # k = 2: blocks 1 and 3 keep their inputs, one of them is recomputed at a time
    assert none4 - _act(_ckpt(4, 2)) == pytest.approx(BLOCK - 2 * 2 * SBH, rel=1e-12)
    # k = 3 on 3 blocks: block 2 only (with_recompute's numbering); no saving at the peak
    assert _act(_ckpt(3, 3)) - _act(_gpt2(3)) == pytest.approx(2 * SBH, rel=1e-12)
    # k = 4 on 3 blocks: none checkpointed; k = 1 is full
    assert _act(_ckpt(3, 4)) == pytest.approx(_act(_gpt2(3)), rel=1e-15)
    assert _act(_ckpt(3, 1)) == pytest.approx(_act(_ckpt(3, "full")), rel=1e-15)


def test_policy_read_from_the_profile_and_overridable():
    p = _ckpt(3, "full")
    assert p.meta["recompute"] == "full"
    assert _act(p, "none") == pytest.approx(_act(_gpt2(3)), rel=1e-15)
    assert _act(_gpt2(3), "op") == pytest.approx(_act(_ckpt(3, "op")), rel=1e-15)
    deg = ShardDegrees(8, 8, 8)
    assert memory_per_gpu(p, degrees=deg).activations == _act(p)
    with pytest.raises(ProfileError, match="'half'.*positive int k"):
        activation_bytes(_gpt2(1), "half")


def _published_mpt_7b_16_gpus():
    import pathlib

    import yaml
    path = pathlib.Path(__file__).parent / "data" / "published_sharded.yaml"
    rows = yaml.safe_load(path.read_text())["rows"]
    return next(r for r in rows if r["setup"] == "mosaic-a100-40gb-pure"
                and r["model"] == "mpt_7b" and r["gpus"] == 16)


def test_mpt_7b_full_shard_on_16_a100_40gb_fits_only_with_checkpointing():
    # llm-foundry's benchmark table 'A100 40GB ...', row 7b / 2048 / 16 GPUs: FSDP FULL_SHARD,
    # micro-batch 16, activation checkpointing on (tests/data/published_sharded.yaml)
    from sgdnet.workload import llms
    row = _published_mpt_7b_16_gpus()
    assert (row["micro_batch"], row["sharding"], row["recompute"]) == (16, "full", "full")
    clu = Cluster(workers=16, topology=TOPO)
    opts = sgdnet.variants.get("fsdp").resolve({"sharding": "full"})
    got = {}
    for policy in ("full", "none"):
        p = llms.mpt_config("mpt_7b", seq_len=row["seq_len"], batch_size=row["micro_batch"],
                            device="A100-40GB", recompute=policy)
        got[policy] = memory_for("fsdp", opts, p, clu, "A100-40GB")
    s, b, h, n = row["seq_len"], row["micro_batch"], 4096, 32
    assert got["full"].activations >= n * 2 * s * b * h  # every block's input is kept
    assert got["full"].fits() and got["full"].total <= 40 * GIB
    assert not got["none"].fits()
    with pytest.raises(DeviceMemoryError, match="A100-40GB"):
        check_fits(got["none"])
