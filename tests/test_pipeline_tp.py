"""Tensor parallelism, the 3D plan's placement and checks, ZeRO-1 and the net's size
(sgdnet.workload.parallelism, sgdnet.variants.tensor_parallel, sgdnet.variants.pipeline).

Megatron-LM (Shoeybi et al. 2019, §3; Narayanan et al. 2021, §3.2): per transformer block and
micro-batch two all-reduces in forward and two in backward of b s h activations each, so a ring
over t GPUs sends 8 b s h (t - 1)/t elements per GPU and block.
"""

import math

import pytest

import sgdnet
from sgdnet.errors import ClusterError, VariantError
from sgdnet.variants import build
from sgdnet.variants.tensor_parallel import split_profile, tp_allreduces
from sgdnet.workload import Cluster, ModelProfile
from sgdnet.workload.parallelism import Parallelism, model_flops, stage_partition
from sgdnet.workload.topology import Topology
from sgdnet.workload.transformers import gpt2

B, S, H = 2, 256, 512


def prof(blocks=4):
    return gpt2("g", n_layers=blocks, d_model=H, n_heads=8, seq_len=S, batch_size=B,
                vocab=1024, n_ctx=S, device="A100", precision="bf16")


def node_cluster(workers, g=4, nics=2, lat="2us"):
    return Cluster(workers=workers, latency="5us",
                   topology=Topology(gpus_per_node=g, intra_bandwidth="300GB/s",
                                     intra_latency=lat, nics_per_node=nics,
                                     nic_bandwidth="200Gbps"))


def _tp_bytes_by_worker(net):
    out = {}
    for t in net.transitions.values():
        tg = t.tags
        if tg.get("group") == "tp" and tg.get("stage") == "link":
            out[tg["worker"]] = out.get(tg["worker"], 0.0) + tg["bytes"]
    return out


def test_tp_allreduce_bytes_per_block_as_megatron_derives_them():
    t, nb = 4, 4
    p = prof(nb)
    net = build("pipeline", p, node_cluster(4), tp=t, pp=1, dp=1, microbatches=1,
                tp_ranks="all")
    got = _tp_bytes_by_worker(net)
    bsh = B * S * H * 2  # bf16 activations
    # per block 8 b s h (t-1)/t; the vocabulary-parallel embedding (forward) and the
    # column-parallel output layer (backward) add one all-reduce each: 2 (t-1)/t b s h each
    want = nb * 8 * bsh * (t - 1) / t + 2 * 2 * bsh * (t - 1) / t
    assert sorted(got) == list(range(t))
    for w in range(t):
        assert got[w] == pytest.approx(want, rel=1e-12)
    # a chunk of blocks only: two and two per block
    lo = next(i for i, la in enumerate(p.layers) if ".h.1." in la.name)
    hi = next(i for i, la in enumerate(p.layers) if ".h.3." in la.name)
    assert tp_allreduces(p, lo, hi) == (4, 4)


def test_tp_iteration_closed_form():
    # one stage, one micro-batch, one replica: compute of a TP rank, then the pass's TP
    # all-reduces (count rings of 2(t-1) rounds of alpha + S/(t B)), then the optimizer step
    t = 2
    cl = node_cluster(2, g=2, nics=1)
    pr = sgdnet.predict("pipeline", prof(2), cl, tp=t, pp=1, dp=1, microbatches=1, steps=3,
                        replications=1, seed=0)
    m = pr.meta
    fa, ba = m["tp_allreduces"][0]
    ring = 2 * (t - 1) * (2e-6 + m["tp_bytes"] / (t * 300e9))
    want = m["chunk_forward_s"][0] + m["chunk_backward_s"][0] + (fa + ba) * ring + \
        m["update_s"][0]
    assert 1 / pr.iterations_per_s.mean == pytest.approx(want, rel=1e-9)


def test_split_profile_divides_the_gemms():
    p = prof(2)
    sp, note = split_profile(p, 4)
    assert "roofline" in note
    for a, b in zip(p.layers, sp.layers):
        if a.name.endswith(("c_fc", "c_attn")):  # column-parallel GEMMs: compute bound, /4
            assert b.forward_s == pytest.approx(a.forward_s / 4, rel=0.35)
        if a.name.endswith(("ln_1", "ln_2")):  # replicated LayerNorms
            assert b.forward_s == a.forward_s
    spp, _ = split_profile(p, 4, sequence_parallel=True)
    ln = [i for i, la in enumerate(p.layers) if la.name.endswith("ln_1")][0]
    assert spp.layers[ln].forward_s < p.layers[ln].forward_s  # split along the sequence
    flat = ModelProfile("x", [{"name": "a", "forward_s": 4.0, "backward_s": 8.0,
                               "grad_bytes": 0}], 1)
    fs, note = split_profile(flat, 4)
    assert fs.layers[0].forward_s == 1.0 and "divided by tp=4" in note


def test_placement_tp_innermost_on_a_node():
    pl = Parallelism(tp=8, pp=8, dp=16, microbatches=8)
    assert pl.size == 1024
    assert pl.tp_group(0, 0) == list(range(8))  # one node
    assert pl.dp_group(0, 0) == [8 * d for d in range(16)]
    assert pl.rank(3, 5, 7) == 3 + 8 * (5 + 16 * 7)
    assert all(pl.coords(pl.rank(t, d, q)) == (t, d, q)
               for t in (0, 7) for d in (0, 15) for q in (0, 7))
    other = Parallelism(tp=2, pp=2, dp=2, order="pp-tp-dp")
    assert other.rank(1, 0, 1) == 1 + 2 * 1
    with pytest.raises(ClusterError, match="tp=8 must divide the 4 GPUs per node"):
        Parallelism(tp=8, pp=1, dp=1).check(node_cluster(8))
    with pytest.raises(ClusterError, match="tp\\*pp\\*dp = 2\\*2\\*2 = 8 GPUs"):
        Parallelism(tp=2, pp=2, dp=2).check(Cluster(workers=16))


@pytest.mark.parametrize("kw,match", [
    (dict(pp=4), "blocks of 'g' are not divisible by pp\\*virtual_stages = 4"),
    (dict(pp=2, schedule="interleaved", virtual_stages=2, microbatches=3),
     "multiple of pp"),
    (dict(pp=2, virtual_stages=2), "needs schedule='interleaved'"),
    (dict(pp=2, accumulate=2), "microbatches= instead"),
    (dict(pp=2, tp_ranks="x"), "tp_ranks"),
    (dict(pp=2, tp=1, sequence_parallel=True), "needs tp >= 2"),
])
def test_bad_plans_are_refused(kw, match):
    with pytest.raises((VariantError, ClusterError), match=match):
        build("pipeline", prof(6), node_cluster(4, g=4, nics=1), **kw)


def test_non_transformer_needs_bytes():
    flat = ModelProfile("x", [{"name": f"a{i}", "forward_s": 1.0, "backward_s": 2.0,
                               "grad_bytes": 0} for i in range(2)], 1)
    with pytest.raises(VariantError, match="activation_bytes="):
        build("pipeline", flat, Cluster(workers=2), pp=2)


@pytest.mark.parametrize("leaf_spine", [False, True])
def test_one_rank_stands_for_all_on_symmetric_groups(leaf_spine):
    # two GPUs share each NIC (4 GPUs, 2 NICs): rank 0's flows carry both ranks' bytes; on
    # an oversubscribed leaf-spine fabric every TP rank's flow shares the leaf uplink too
    p = prof(4)
    cl = node_cluster(16, g=4, nics=2)
    if leaf_spine:
        cl = cl.replace(topology=cl.topology.replace(fabric="leaf-spine", rack_nodes=2,
                                                     oversubscription=4.0))
    got = {}
    for mode in ("one", "all"):
        pr = sgdnet.predict("pipeline", p, cl, tp=4, pp=2, dp=2, microbatches=4, tp_ranks=mode,
                            steps=3, replications=1, seed=1)
        got[mode] = 1 / pr.iterations_per_s.mean
    assert got["one"] == pytest.approx(got["all"], rel=1e-9)


def test_net_grows_as_stages_times_microbatches_times_replicas():
    p = prof(4)

    def size(tp=2, pp=2, dp=2, m=4):
        net = build("pipeline", p, node_cluster(tp * pp * dp, g=4, nics=2), tp=tp, pp=pp,
                    dp=dp, microbatches=m)
        return len(net.transitions)

    a, b, c = size(m=4), size(m=8), size(m=12)
    assert b - a == c - b  # linear in the micro-batches
    per = (b - a) / (4 * 2 * 2)  # per stage, micro-batch and replica
    assert per < 40
    assert size(dp=4) < 2 * size(dp=2) + 8  # linear in the replicas
    # independent of the TP degree with tp_ranks="one", up to one step marker per GPU
    assert size(tp=4) - size(tp=2) == 2 * 2 * 2


def test_zero1_shards_the_optimizer_and_gathers_parameters():
    p = prof(4)
    cl = node_cluster(8, g=2, nics=1)
    nets = {z: build("pipeline", p, cl, tp=2, pp=2, dp=2, microbatches=2, zero_stage=z,
                      tp_ranks="all")
            for z in (0, 1)}
    upd = nets[0].meta["update_s"]
    for q in range(2):
        o0 = nets[0].transitions[f"s{q}.d0.optimizer"].duration.mean
        o1 = nets[1].transitions[f"s{q}.d0.optimizer"].duration.mean
        assert o0 == pytest.approx(upd[q]) and o1 == pytest.approx(upd[q] / 2)

    def dp_bytes(net, q):
        return sum(t.tags["bytes"] for t in net.transitions.values()
                   if t.tags.get("group") == "dp" and t.tags.get("pipe_stage") == q
                   and t.tags.get("stage") == "link" and t.tags.get("worker") == 0)

    g, pb = nets[0].meta["dp_grad_bytes"][0], nets[0].meta["param_bytes"][0]
    assert dp_bytes(nets[0], 0) == pytest.approx(2 * g / 2)  # all-reduce: 2 (d-1)/d G
    assert dp_bytes(nets[1], 0) == pytest.approx(g / 2 + pb / 2)  # RS of G, AG of params


def test_model_flops_eq3():
    # Narayanan et al. 2021, eq. 3, GPT-3 175B (l=96, h=12288, s=2048, V=51200), batch 1536
    f = model_flops(1536, 2048, 96, 12288, 51200, recompute=True)
    assert f == pytest.approx(96 * 1536 * 2048 * 96 * 12288**2
                              * (1 + 2048 / (6 * 12288) + 51200 / (16 * 96 * 12288)))
    # without recomputation: 3/4 of the transformer FLOPs, the logit layer unchanged
    g = model_flops(1536, 2048, 96, 12288, 51200)
    logit = 6 * 1536 * 2048 * 12288 * 51200
    assert g - logit == pytest.approx(0.75 * (f - logit))


def test_partition_rules():
    p = prof(4)
    r = stage_partition(p, 2, "blocks")
    assert r[0][0] == 0 and r[-1][1] == p.n_layers
    assert ".h.2." in p.layers[r[1][0]].name  # the second chunk starts at block 2
    bal = stage_partition(p, 3, "balanced")
    assert len(bal) == 3 and bal[0][0] == 0 and bal[-1][1] == p.n_layers
    t = [la.compute_s for la in p.layers]
    worst = max(math.fsum(t[lo:hi]) for lo, hi in bal)
    L = len(t)
    # the optimum over every contiguous cut into 3 chunks, by brute force
    best = min(max(math.fsum(t[:a]), math.fsum(t[a:b]), math.fsum(t[b:]))
               for a in range(1, L - 1) for b in range(a + 1, L))
    assert worst == pytest.approx(best, rel=1e-9)
    with pytest.raises(VariantError, match="adding up to"):
        stage_partition(p, 2, [1, 2])
