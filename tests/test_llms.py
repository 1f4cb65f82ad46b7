"""Llama and MPT profiles: parameter counts against the published ones, FLOPs per token against
the sources' MFU formula and their published (throughput, MFU) pairs, activation checkpointing."""

import math

import pytest

from sgdnet.errors import ProfileError
from sgdnet.workload import llms as L
from sgdnet.workload.compute import op_time

#: llm-foundry scripts/train/benchmarking/README.md (commit 49521837), column NumParams of the
#: "A100 40GB" table: the MPT sizes at sequence 2,048, and two sizes at other lengths (the
#: learned position embedding has max_seq_len rows, so the count moves with the length).
MPT_PUBLISHED = {
    ("mpt_125m", 2048): 125311488, ("mpt_350m", 2048): 355985408,
    ("mpt_760m", 2048): 760470528, ("mpt_1b", 2048): 1315950592,
    ("mpt_3b", 2048): 2651837440, ("mpt_7b", 2048): 6658859008,
    ("mpt_13b", 2048): 12853954560, ("mpt_30b", 2048): 29975214080,
    ("mpt_70b", 2048): 64862437376, ("mpt_125m", 512): 124131840,
    ("mpt_7b", 16384): 6717579264,
}

#: Published Llama parameter counts, as the Hugging Face model cards print them (safetensors
#: "Model size"): meta-llama/Llama-2-7b-hf 6.74B, Llama-2-13b-hf 13B, Llama-2-70b-hf 69B,
#: Meta-Llama-3-8B 8.03B, Meta-Llama-3-70B 70.6B; CodeLlama-34b-hf 33.7B.
LLAMA_PUBLISHED = {"llama2_7b": 6.74e9, "llama2_13b": 13.0e9, "llama2_70b": 69e9,
                   "llama3_8b": 8.03e9, "llama3_70b": 70.6e9, "llama2_34b": 33.7e9}


@pytest.mark.parametrize("size,seq", sorted(MPT_PUBLISHED))
def test_mpt_parameters_equal_llm_foundry_numparams(size, seq):
    p = L.mpt_config(size, seq_len=seq)
    assert p.meta["parameters"] == MPT_PUBLISHED[size, seq]
    assert p.grad_bytes == 4 * MPT_PUBLISHED[size, seq]


@pytest.mark.parametrize("size", sorted(LLAMA_PUBLISHED))
def test_llama_parameters_match_published(size):
    n = L.llama_config(size, seq_len=256).meta["parameters"]
    # the cards round to 2-3 significant digits
    assert abs(n - LLAMA_PUBLISHED[size]) / LLAMA_PUBLISHED[size] < 0.005


def test_llama_exact_counts_from_the_architecture():
    # Llama 2 7B: 32 x (4 d^2 + 3 d f + 2 d) + 2 V d + d, d=4096, f=11008, V=32000
    d, f, v = 4096, 11008, 32000
    assert L.llama_config("llama2_7b").meta["parameters"] == 32 * (4 * d * d + 3 * d * f
                                                                   + 2 * d) + 2 * v * d + d
    # Llama 3 8B with grouped-query attention: k and v project to 8 heads of 128
    f, v, kv = 14336, 128256, 8 * 128
    assert L.llama_config("llama3_8b").meta["parameters"] == (
        32 * (2 * d * d + 2 * d * kv + 3 * d * f + 2 * d) + 2 * v * d + d) == 8030261248


def test_llama_layout_gqa_and_no_biases():
    p = L.llama_config("llama3_8b", seq_len=128)
    names = [la.name for la in p.layers]
    assert names[:10] == ["tok_embeddings", "layers.0.attention_norm", "layers.0.attention.wq",
                          "layers.0.attention.wk", "layers.0.attention.wv",
                          "layers.0.attention.wo", "layers.0.ffn_norm",
                          "layers.0.feed_forward.w1", "layers.0.feed_forward.w3",
                          "layers.0.feed_forward.w2"]
    assert names[-2:] == ["norm", "output"]
    assert all(t.name == "weight" for la in p.layers for t in la.tensors)
    wk = p.layers[3]
    assert wk.grad_bytes == 4 * 4096 * 1024


def _fwd_matmul_flops(p):
    return sum(o.flops for la in p.layers for o in la.ops if o.kind == "matmul")


@pytest.mark.parametrize("size", ["mpt_125m", "mpt_7b", "mpt_70b"])
def test_mpt_flops_per_token_are_the_mfu_formula(size):
    # 3 x forward matmul FLOPs = 6 N + 12 L d s, less the causal half of attention (6 L d s),
    # less 6 x the parameters no matrix product uses: the position embedding (s x d), and
    # the norms and biases (under 0.3 % of N)
    s = 2048
    p = L.mpt_config(size, seq_len=s)
    n, d = p.meta["n_layers"], p.meta["d_model"]
    per_token = 3 * _fwd_matmul_flops(p) / s
    full = L.train_flops_per_token(p.meta["parameters"] - s * d, n, d, s)
    assert per_token + 6 * n * d * s == pytest.approx(full, rel=0.003)
    assert per_token + 6 * n * d * s < full


@pytest.mark.parametrize("size", ["llama2_7b", "llama3_8b", "llama2_70b"])
def test_llama_flops_per_token_are_the_mfu_formula_without_the_embedding(size):
    s = 4096
    p = L.llama_config(size, seq_len=s)
    n, d, v = p.meta["n_layers"], p.meta["d_model"], p.meta["vocab"]
    per_token = 3 * _fwd_matmul_flops(p) / s
    # the input embedding is a gather (no FLOPs); the norms' weights are not in a matmul
    full = L.train_flops_per_token(p.meta["parameters"] - v * d, n, d, s)
    assert per_token + 6 * n * d * s == pytest.approx(full, rel=1e-4)


@pytest.mark.parametrize("builder,size,seq,tokens_per_gpu_s,mfu", [
    # torchtitan docs/performance.md (commit 1ea476e9): Llama 3 8B on 64 A100 80GB, selective
    # op AC: 2,973 WPS, MFU 58.2 %; 70B full AC: 331 WPS, 51.7 %
    ("llama", "llama3_8b", 8192, 2973, 0.582),
    ("llama", "llama3_70b", 8192, 331, 0.517),
    # Llama 2 13B, no AC, sequence 4,096: 2,162 WPS, 61.1 %
    ("llama", "llama2_13b", 4096, 2162, 0.611),
    # llm-foundry benchmarking README (A100 40GB): MPT-7B 8 GPUs 3,679 T/s/GPU, MFU 50.92 %;
    # MPT-70B 128 GPUs 376 T/s/GPU, 48.91 %
    ("mpt", "mpt_7b", 2048, 3679, 0.5092),
    ("mpt", "mpt_70b", 2048, 376, 0.4891),
])
def test_published_mfu_from_published_throughput(builder, size, seq, tokens_per_gpu_s, mfu):
    cfg = L.llama_config if builder == "llama" else L.mpt_config
    p = cfg(size, seq_len=seq)
    flops = L.train_flops_per_token(p.meta["parameters"], p.meta["n_layers"],
                                    p.meta["d_model"], seq)
    # A100 bf16 dense peak 312 TFLOPS, the figure both sources divide by
    assert tokens_per_gpu_s * flops / 312e12 == pytest.approx(mfu, abs=0.0015)


def _bwd(p):
    return math.fsum(la.backward_s for la in p.layers)


def _block_fwd(p, blocks=None):
    return math.fsum(la.forward_s for la in p.layers if L._block_index(la.name) is not None
                     and (blocks is None or L._block_index(la.name) in blocks))


def test_full_recompute_adds_every_block_forward_to_backward():
    p = L.mpt_config("mpt_125m", seq_len=512, batch_size=4, device="A100-40GB")
    q = L.with_recompute(p, "full", "A100-40GB")
    assert _bwd(q) - _bwd(p) == pytest.approx(_block_fwd(p), rel=1e-12)
    assert [la.forward_s for la in q.layers] == [la.forward_s for la in p.layers]
    # embeddings, the final norm and the loss are not recomputed
    assert q.layers[0].backward_s == p.layers[0].backward_s and q.loss_s == p.loss_s
    assert q.meta["recompute"] == "full"
    assert L.mpt_config("mpt_125m", seq_len=512, batch_size=4, device="A100-40GB",
                        recompute="full").layers == q.layers


def test_every_second_block_recomputes_the_odd_blocks():
    p = L.llama(n_layers=4, d_model=256, n_heads=4, d_ff=512, vocab=1000, seq_len=128)
    q = L.with_recompute(p, 2)
    assert _bwd(q) - _bwd(p) == pytest.approx(_block_fwd(p, {1, 3}), rel=1e-12)
    assert L.with_recompute(p, 1).layers == L.with_recompute(p, "full").layers
    assert L.with_recompute(p, "none") is p


def test_op_policy_recomputes_every_second_matmul_and_the_elementwise_ops():
    p = L.llama(n_layers=2, d_model=256, n_heads=4, d_ff=512, vocab=1000, seq_len=128)
    q = L.with_recompute(p, "op")
    # per block the matmuls in order are wq wk wv wo w1 w3 w2: wk, wo, w3 are recomputed,
    # with every vector op (norms, rotary, swiglu, residuals); attention is kept
    want = 0.0
    for la in p.layers:
        if L._block_index(la.name) is None:
            continue
        short = la.name.split(".", 2)[2]
        for o in la.ops:
            if o.kind == "vector" or (o.name == "matmul" and short in (
                    "attention.wk", "attention.wo", "feed_forward.w3")):
                want += op_time(o, "A100", "bf16", 1)
    assert _bwd(q) - _bwd(p) == pytest.approx(want, rel=1e-12)
    assert 0 < want < _block_fwd(p)


def test_bad_input_raises_profile_error():
    p = L.mpt(n_layers=2, d_model=64, n_heads=4, vocab=100, seq_len=32)
    for bad in ("selective", 0, -1, True, 1.5):
        with pytest.raises(ProfileError, match="activation-checkpointing policy"):
            L.with_recompute(p, bad)
    with pytest.raises(ProfileError, match="n_kv_heads"):
        L.llama(n_layers=2, d_model=64, n_heads=4, n_kv_heads=3, d_ff=128, vocab=100)
    with pytest.raises(ProfileError, match="max_seq_len"):
        L.mpt(n_layers=2, d_model=64, n_heads=4, seq_len=64, max_seq_len=32)
    with pytest.raises(ProfileError, match="unknown Llama size"):
        L.llama_config("llama4_8b")
    with pytest.raises(ProfileError, match="unknown MPT size"):
        L.mpt_config("mpt_2b")
    with pytest.raises(ProfileError, match="positive integer"):
        L.llama(n_layers=0, d_model=64, n_heads=4, d_ff=128)
    from sgdnet.workload.transformers import gpt2
    g = gpt2(n_layers=2, d_model=64, n_heads=4, vocab=100, n_ctx=32, seq_len=32)
    assert L.with_recompute(g, "full").meta["recompute"] == "full"  # h.<i>. blocks


def test_published_sharded_rows_agree_with_their_own_mfu():
    """Every row of tests/data/published_sharded.yaml whose source prints an MFU: the row's
    throughput and the builder's parameter count give that MFU (a check of the copied numbers
    and of the architectures). MosaicML and torchtitan to 0.2 points (their printed rounding);
    IBM's fms-fsdp to 3.5 points (its MFU follows nanoGPT / PaLM's count, not 6 N + 12 L d s)."""
    from pathlib import Path

    import yaml

    data = yaml.safe_load((Path(__file__).parent / "data" / "published_sharded.yaml")
                          .read_text(encoding="utf-8"))
    source = {s["id"]: s["source"] for s in data["setups"]}
    checked = 0
    for r in data["rows"]:
        if r["mfu"] is None:
            continue
        cfg = L.mpt_config if r["model"].startswith("mpt_") else L.llama_config
        p = cfg(r["model"], seq_len=r["seq_len"])
        if r["parameters"] is not None:
            assert p.meta["parameters"] == r["parameters"]
        flops = L.train_flops_per_token(p.meta["parameters"], p.meta["n_layers"],
                                        p.meta["d_model"], r["seq_len"])
        # dense BF16 peaks: A100 312 TFLOPS, H100 SXM 989 TFLOPS (the sources' divisors)
        peak = 989e12 if "h100" in r["setup"] else 312e12
        tol = 0.035 if source[r["setup"]] == "fms-fsdp" else 0.002
        assert r["throughput"] * flops / peak == pytest.approx(r["mfu"], abs=tol), r["notes"]
        checked += 1
    assert checked == 75
