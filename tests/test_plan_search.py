"""The plan study (sgdnet.plan_search): the valid (tp, pp, dp, m) plans counted by hand, plans
that do not fit memory refused before any prediction, the fastest plan of a hand case.

Closed form used (Narayanan et al., SC'21, §2.2): p equal stages of forward t_f and backward
t_b per micro-batch, free communication: an iteration of m micro-batches takes
(m + p - 1)(t_f + t_b) with 1F1B, so n GPUs of dp = n / p replicas at b samples per
micro-batch process n b m / ((m + p - 1) L (t_f + t_b)) samples/s for L equal layers.
"""

import dataclasses

import pytest

from sgdnet.cli import main
from sgdnet.errors import VariantError
from sgdnet.plan_search import best_plans, enumerate_plans, format_plans
from sgdnet.workload import Cluster, ModelProfile
from sgdnet.workload.compute import get_device
from sgdnet.workload.topology import Topology
from sgdnet.workload.transformers import gpt2

L, H, S = 8, 256, 128  # blocks, hidden, sequence of the small transformer


def small_gpt():
    return gpt2("g", n_layers=L, d_model=H, n_heads=4, seq_len=S, n_ctx=S, vocab=1000,
                batch_size=1, device="A100", precision="bf16")


def cluster16():
    return Cluster(workers=16, topology=Topology(gpus_per_node=4, intra_bandwidth="300GB/s",
                                                 nics_per_node=1, nic_bandwidth="100Gbps"))


def test_enumeration_count_closed_form():
    # 16 GPUs, 4 per node, 8 blocks. (tp, pp) with tp | 4, pp | 8, tp pp | 16:
    # tp=1: pp 1,2,4,8; tp=2: pp 1,2,4,8; tp=4: pp 1,2,4 -> 11 pairs, 3 of them pp=1.
    # 1F1B and GPipe, m in {4, 8}: pp=1 once (one stage: the schedules agree) 3*2, the 8
    # pp>1 pairs 8*2*2; interleaved v=2 needs pp>=2, 2pp | 8 (pp 2, 4; any tp: 3+3 pairs), m a
    # multiple of pp (4 and 8 both are): 6*2. Total 6 + 32 + 12 = 50.
    plans = enumerate_plans(small_gpt(), cluster16(), microbatches=[4, 8],
                            schedules=("1f1b", "gpipe", "interleaved"), virtual_stages=2)
    assert len(plans) == 50
    assert len(set(plans)) == 50
    assert all(p.size == 16 for p in plans)
    assert sum(p.schedule == "interleaved" for p in plans) == 12
    assert all(p.virtual_stages == 2 for p in plans if p.schedule == "interleaved")
    # a global batch of 24 sequences of 1: m = 24 / dp, an integer for dp in 1, 2, 4, 8 but
    # not 16 (tp = pp = 1): the 11 pairs less one, each with m = 24 / dp
    plans = enumerate_plans(small_gpt(), cluster16(), global_batch=24)
    assert len(plans) == 10
    assert all(p.microbatches * p.dp == 24 for p in plans)
    # the variant's default m: 4 pp, 1 without pipelining
    assert {(p.pp, p.microbatches) for p in enumerate_plans(small_gpt(), cluster16())} == {
        (1, 1), (2, 8), (4, 16), (8, 32)}


@pytest.mark.parametrize("kw,word", [({"tp": [3]}, "GPUs per node"),
                                     ({"pp": [3]}, "blocks"),
                                     ({"schedules": ("zigzag",)}, "schedules"),
                                     ({"microbatches": [4], "global_batch": 8}, "not both"),
                                     ({"tp": [0]}, "positive")])
def test_bad_plan_lists_are_refused(kw, word):
    with pytest.raises(VariantError, match=word):
        enumerate_plans(small_gpt(), cluster16(), **kw)


def test_plan_that_does_not_fit_is_flagged_not_predicted():
    # ZeRO paper (Rajbhandari et al. 2020, §3.1): mixed-precision Adam keeps 2 + 2 + 12 = 16
    # bytes per parameter (fp16 parameters, gradients and the optimizer's fp32 states), at
    # least; the blocks alone hold 12 L H^2 parameters. A device of half the 16 bytes of
    # those cannot hold the whole model on one GPU (tp = pp = 1).
    cap = 8.0 * 12 * L * H * H
    dev = dataclasses.replace(get_device("A100"), memory=cap)
    calls = []

    def runner(variant, prof, clu, **kw):
        import sgdnet

        calls.append((kw["tp"], kw["pp"], kw["microbatches"]))
        return sgdnet.predict(variant, prof, clu, **kw)

    st = best_plans(small_gpt(), cluster16(), microbatches=[4], device=dev, runner=runner,
                    steps=2, replications=1)
    rows = st.rows
    assert len(rows) == 11
    whole = [r for r in rows if r["tp"] == 1 and r["pp"] == 1]
    assert whole and all(r["fits"] is False and not r["predicted"] for r in whole)
    refused = [r for r in rows if r["fits"] is False]
    for r in refused:  # never simulated, and its figure is above the device's memory
        assert (r["tp"], r["pp"], r["microbatches"]) not in calls
        assert r["samples_per_s_mean"] is None
        assert r["memory_gb"] * 1e9 > cap
    fitting = [r for r in rows if r["fits"] is True]
    assert fitting and all(r["predicted"] and r["memory_gb"] * 1e9 <= cap for r in fitting)
    assert len(calls) == len(fitting)
    # the best is the fastest of those that fit; the refused ones are listed after them
    assert st.best == 0 and st.best_row["samples_per_s_mean"] == max(
        r["samples_per_s_mean"] for r in fitting)
    assert rows.index(refused[0]) > max(rows.index(r) for r in fitting)
    text = format_plans(st)
    assert "does not fit" in text and "fastest plan that fits" in text


TF, TB, NL = 1.0, 2.0, 8


def equal():
    return ModelProfile("equal", [{"name": f"l{i}", "forward_s": TF, "backward_s": TB,
                                   "grad_bytes": 0} for i in range(NL)], 1)


def test_fastest_plan_free_communication_is_the_smallest_bubble():
    # 8 GPUs without a topology (tp = 1), 8 equal layers, no bytes to send: every plan's rate
    # is the closed form, so the fastest is the smallest bubble (p-1)/(m+p-1): p=2, m=8
    n = 8
    st = best_plans(equal(), Cluster(workers=n), pp=[2, 4, 8], microbatches=[2, 4, 8],
                    steps=3, replications=1, activation_bytes=0)
    assert len(st.rows) == 9
    for r in st.rows:
        p, m = r["pp"], r["microbatches"]
        assert r["fits"] is None and r["predicted"]  # no parameter count: memory unknown
        assert r["samples_per_s_mean"] == pytest.approx(n * m / ((m + p - 1) * NL * (TF + TB)),
                                                        rel=1e-12)
        assert r["idle"] == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    b = st.best_row
    assert (b["pp"], b["microbatches"], b["dp"]) == (2, 8, 4)
    assert b["bubble"] == min(r["bubble"] for r in st.rows) == pytest.approx(1 / 9)
    rates = [r["samples_per_s_mean"] for r in st.rows]
    assert rates == sorted(rates, reverse=True)


def test_plan_command(capsys):
    code = main(["plan", "--model", "gpt2_xl", "--instance", "p4d.24xlarge", "--nodes", "1",
                 "--tp", "4,8", "--pp", "1,2", "--steps", "2", "--replications", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "fastest plan that fits" in out
    body = [ln.split() for ln in out.splitlines() if ln[:2] in ("* ", "  ", "x ")
            and ln.split() and ln.split()[-1] != "MFU"]
    marked = [ln for ln in out.splitlines() if ln.startswith("* ")]
    # on 8 GPUs: tp 4 with pp 1 or 2, tp 8 with pp 1 (tp 8 x pp 2 needs 16)
    assert len(marked) == 1 and len(body) == 3
    code = main(["plan", "--model", "gpt2_xl", "--instance", "p4d.24xlarge", "--nodes", "1",
                 "--tp", "3"])
    assert code == 2 and "tp must divide the 8 GPUs per node" in capsys.readouterr().err


def test_predict_prints_the_pipeline_report(capsys):
    code = main(["predict", "--variant", "pipeline", "--model", "gpt2_xl", "--instance",
                 "p4d.24xlarge", "--nodes", "1", "--tp", "4", "--pp", "2", "--granularity",
                 "coarse", "--steps", "2", "--warmup", "1", "--replications", "1"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("pipeline, "))
    # 8 GPUs = tp 4 x pp 2 x dp 1; the variant's default m = 4 pp = 8; (p-1)/(m+p-1) = 1/9
    assert "8 GPUs: tp 4 x pp 2 x dp 1, m 8 1f1b" in line
    assert "bubble 0.111 (closed form)" in line
    assert "TFLOP/s per GPU" in line and "MFU" in line
