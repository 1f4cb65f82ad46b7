"""Built-in transformer profiles: parameter counts against an independent torch.nn build and
the published figures, tensor layout, and the shipped files against a rebuild."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from sgdnet import models
from sgdnet.errors import ProfileError
from sgdnet.workload import transformers as T

REPO = Path(__file__).resolve().parents[1]

#: Published parameter counts and their sources.
PUBLISHED = {
    # Hugging Face transformers' pretrained-models table: bert-large-uncased "24-layer,
    # 1024-hidden, 16-heads, 336M parameters"
    "bert_large": 336e6,
    # OpenAI's released GPT-2 models are named by parameter count: "355M" and "1558M"
    # (openai/gpt-2 download_model.py / DEVELOPERS.md; the paper's table says 345M and 1542M)
    "gpt2_medium": 355e6,
    "gpt2_xl": 1558e6,
    # timm's benchmark table (results/benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv):
    # vit_large_patch16_224 param_count 304.33 (millions)
    "vit_l16": 304.33e6,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_half_percent_of_published(name):
    p = models.load(name)
    n = p.grad_bytes / 4
    assert n == p.meta["parameters"]
    assert abs(n - PUBLISHED[name]) / PUBLISHED[name] < 0.005


torch = pytest.importorskip("torch")
nn = torch.nn


def torch_bert_pretraining(L=24, d=1024, f=4096, V=30522, P=512, types=2):
    """BertForPreTraining's parameters, written with plain torch.nn modules."""
    emb = [nn.Embedding(V, d), nn.Embedding(P, d), nn.Embedding(types, d), nn.LayerNorm(d)]
    block = lambda: [nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d),  # noqa
                     nn.LayerNorm(d), nn.Linear(d, f), nn.Linear(f, d), nn.LayerNorm(d)]
    heads = [nn.Linear(d, d),                      # pooler
             nn.Linear(d, d), nn.LayerNorm(d),     # MLM transform
             nn.Linear(d, 2)]                      # NSP
    mods = emb + [m for _ in range(L) for m in block()] + heads
    return sum(p.numel() for m in mods for p in m.parameters()) + V   # + MLM decoder bias


def torch_gpt2(L, d, V=50257, P=1024):
    block = lambda: [nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d),  # noqa
                     nn.Linear(d, 4 * d), nn.Linear(4 * d, d)]
    mods = [nn.Embedding(V, d), nn.Embedding(P, d)] + [m for _ in range(L) for m in block()]
    mods.append(nn.LayerNorm(d))
    return sum(p.numel() for m in mods for p in m.parameters())  # lm_head tied to wte


def torch_vit_l16():
    d = 1024
    block = lambda: [nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d),  # noqa
                     nn.Linear(d, 4 * d), nn.Linear(4 * d, d)]
    mods = [nn.Conv2d(3, d, 16, stride=16)] + [m for _ in range(24) for m in block()]
    mods += [nn.LayerNorm(d), nn.Linear(d, 1000)]
    return sum(p.numel() for m in mods for p in m.parameters()) + d + 197 * d  # cls, pos


@pytest.mark.parametrize("name, count", [
    ("bert_large", lambda: torch_bert_pretraining()),
    ("gpt2_medium", lambda: torch_gpt2(24, 1024)),
    ("gpt2_xl", lambda: torch_gpt2(48, 1600)),
    ("vit_l16", torch_vit_l16),
])
def test_parameter_bytes_exact_against_torch_modules(name, count):
    p = models.load(name)
    with torch.device("meta"):  # shapes only: no 1.5e9 parameters allocated and initialised
        n = count()
    assert p.grad_bytes == 4 * n
    # every tensor is one torch parameter: weight/bias of a module (ViT's cls/pos too)
    for la in p.layers:
        assert la.tensors and math.fsum(t.nbytes for t in la.tensors) == la.grad_bytes


def test_per_tensor_layout_of_a_gpt2_block():
    p = models.load("gpt2_medium")
    names = [la.name for la in p.layers[2:8]]
    assert names == ["transformer.h.0.ln_1", "transformer.h.0.attn.c_attn",
                     "transformer.h.0.attn.c_proj", "transformer.h.0.ln_2",
                     "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj"]
    qkv = p.layers[3]
    assert [(t.name, t.nbytes) for t in qkv.tensors] == [("weight", 4 * 1024 * 3072),
                                                         ("bias", 4 * 3072)]
    assert len(p.messages("tensor")) == 2 * p.n_layers - 2   # embeddings have no bias


def test_builtin_files_state_their_configuration():
    for name, (_, kw) in T.BUILTIN.items():
        p = models.load(name)
        assert p.batch_size == kw["batch_size"] and p.device == kw["device"]
        assert p.precision == kw["precision"] and p.has_ops and p.has_tensors
        assert p.meta["seq_len"] == kw.get("seq_len", 197)
        assert p.loss_s > 0 or name == "vit_l16"
        assert p.update_s > 0


def test_shipped_transformer_files_match_a_rebuild():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "build_models.py"), "--check",
                        *T.BUILTIN], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("kw, pat", [({"seq_len": 1025}, "n_ctx"), ({"batch_size": 0}, "batch"),
                                     ({"precision": "bf16", "device": "V100"}, "V100"),
                                     ({"n_heads": 0}, "n_heads")])
def test_builder_bad_input(kw, pat):
    with pytest.raises(ProfileError, match=pat):
        T.gpt2_medium(**kw)
