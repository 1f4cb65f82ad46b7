"""Issue #16's scheme options against hand-derived closed forms (deterministic, exact to 1e-9):
proportional sampling (``balance="batch"``), per-worker local steps, gradient compression; and
#18's ``comm_granularity`` and the step costs folded by every build.

``T_AR = 2(n-1)(alpha + S/(nB))`` is the ring all-reduce, ``(n-1)(alpha + c/B)`` the ring
all-gather of ``c`` bytes per worker; the FIFO NIC model is used where a closed form is
checked, and flows (the default) where the all-reduce runs alone on its links.
"""

import functools
import json
import math

import pytest

import sgdnet
from sgdnet import Cluster, Layer, ModelProfile, Tensor, VariantError, variants
from sgdnet.engine import simulate
from sgdnet.variants.compression import parse_compression
from sgdnet.variants.compute import batch_sizes

build = functools.partial(variants.build, discipline="fifo")

PROF = ModelProfile("toy", [Layer("a", 0.010, 0.020, 4e6), Layer("b", 0.005, 0.015, 8e6),
                            Layer("c", 0.002, 0.004, 1e6)], batch_size=32)
TC = PROF.compute_s
M = PROF.grad_bytes
BW, ALPHA = 1.25e9, 50e-6
SPEEDS = [2.0, 1.0, 1.0]          # sum 4, n 3: batches 48, 24, 24 exactly
HET = Cluster(workers=3, speeds=SPEEDS, bandwidth=BW, latency=ALPHA)
HOM = Cluster(workers=3, speeds=[4 / 3] * 3, bandwidth=BW, latency=ALPHA)


def t_ar(nbytes, n, lat=ALPHA):
    return 2 * (n - 1) * (lat + nbytes / (n * BW))


def rel(a, b):
    return abs(a - b) / abs(b)


def period(net, steps_per_period, periods=10, warmup_periods=5):
    """Simulated time per period of a deterministic net (``steps_per_period`` over all workers)."""
    k = steps_per_period
    r = simulate(net, steps=k * periods, warmup=k * warmup_periods, replications=1, seed=0)
    assert r.deterministic
    return float(r.sim_time[0]) / periods


# ---------------------------------------------------------------- balance="batch"
def test_batches_are_proportional_keep_the_global_batch_and_round_by_largest_remainder():
    assert batch_sizes(PROF, HET, "batch") == [48, 24, 24]
    assert batch_sizes(PROF, HET, "none") == [32, 32, 32]
    # 96 * (1, .8, .5) / 2.3 = 41.74, 33.39, 20.87: floors 41, 33, 20 (94), +1 to .87 and .74
    assert batch_sizes(PROF, Cluster(workers=3, speeds=[1, .8, .5]), "batch") == [42, 33, 21]
    # 160 * (1, 1, 1, 1, .3) / 4.3 = 37.21 (x4), 11.16: floors sum to 159, the one left goes to
    # the largest remainder, .21, first of the tied workers
    bs = batch_sizes(PROF, Cluster(workers=5, speeds=[1, 1, 1, 1, 0.3]), "batch")
    assert bs == [38, 37, 37, 37, 11]


@pytest.mark.parametrize("discipline", ["fifo", "flows"])
@pytest.mark.parametrize("granularity", ["coarse", "fine"])
def test_balanced_allreduce_step_is_tc_n_over_sum_of_speeds_plus_t_ar(granularity, discipline):
    """Worker i computes T_c (b_i/B)/s_i = T_c n/sum(s) = 0.75 T_c: step 0.75 T_c + T_AR
    (fine: one bucket, no overlap, so the same sum); unbalanced, the slowest sets T_c/1."""
    fine = dict(bucket_bytes=math.inf, overlap=False) if granularity == "fine" else {}
    fine["discipline"] = discipline
    net = variants.build("allreduce", PROF, HET, granularity, balance="batch", **fine)
    assert net.meta["batch_sizes"] == [48, 24, 24]
    assert rel(period(net, 3), 0.75 * TC + t_ar(M, 3)) < 1e-9
    net = variants.build("allreduce", PROF, HET, granularity, **fine)
    assert rel(period(net, 3), TC + t_ar(M, 3)) < 1e-9


def test_balanced_samples_per_s_through_predict():
    p = sgdnet.predict("allreduce", PROF, HET, granularity="coarse", balance="batch",
                       discipline="fifo", steps=20, warmup=3, replications=1, seed=0)
    assert rel(p.samples_per_s.mean, 96 / (0.75 * TC + t_ar(M, 3))) < 1e-9
    assert [p.per_worker[w].batch_size for w in range(3)] == [48, 24, 24]
    q = sgdnet.predict("allreduce", PROF, HET, granularity="coarse", discipline="fifo",
                       steps=20, warmup=3, replications=1, seed=0)
    assert rel(q.samples_per_s.mean, 96 / (TC + t_ar(M, 3))) < 1e-9


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("name,opts,steps", [
    ("sync-ps", {}, 3), ("allreduce", {}, 3), ("pipe-sgd", {}, 3), ("local-sgd", {"H": 2}, 6),
    ("cocod", {"k": 2}, 6), ("backup", {"backups": 0}, 3)])
def test_balanced_heterogeneous_equals_homogeneous_at_the_mean_speed(name, opts, steps,
                                                                     granularity):
    """Proportional batches make every worker compute T_c n/sum(s): the same net timing as
    identical workers of speed sum(s)/n, for every synchronous scheme (same total batch)."""
    a = build(name, PROF, HET, granularity, balance="batch", **opts)
    b = build(name, PROF, HOM, granularity, **opts)
    assert rel(period(a, steps), period(b, steps)) < 1e-9


def test_asynchronous_variants_refuse_balance_with_the_reason():
    for name in ("async-ps", "ssp", "dssp"):
        with pytest.raises(VariantError, match="asynchronous variants"):
            variants.build(name, PROF, HET, balance="batch")
    with pytest.raises(VariantError, match="balance"):
        variants.build("allreduce", PROF, HET, balance="speed")


# ---------------------------------------------------------------- per-worker k
@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("H", [[4, 2], [4, 1], [2, 2]])
def test_local_sgd_per_worker_H_period(granularity, H):
    """Speeds (1, 0.5): period max(H_0 T_c, 2 H_1 T_c) + T_AR with H_0 + H_1 steps."""
    c = Cluster(workers=2, speeds=[1.0, 0.5], bandwidth=BW, latency=ALPHA)
    net = build("local-sgd", PROF, c, granularity, H=H)
    want = max(H[0] * TC, 2 * H[1] * TC) + t_ar(M, 2)
    assert rel(period(net, sum(H)), want) < 1e-9


@pytest.mark.parametrize("bw", [BW, BW / 20], ids=["compute-bound", "comm-bound"])
def test_cocod_per_worker_k_period(bw):
    """Speeds (1, 0.5), k = (4, 2): period max(max_i k_i T_c/s_i, T_AR) after the first round."""
    c = Cluster(workers=2, speeds=[1.0, 0.5], bandwidth=bw, latency=ALPHA)
    net = build("cocod", PROF, c, "coarse", k=[4, 2])
    tar = 2 * (ALPHA + M / (2 * bw))
    assert rel(period(net, 6), max(4 * TC, tar)) < 1e-9


def test_per_worker_k_is_validated_and_read_from_the_command_line_form():
    with pytest.raises(VariantError, match=r"H=\[1, 2, 3\] has 3 entries but the cluster has 2"):
        variants.build("local-sgd", PROF, Cluster(workers=2), H=[1, 2, 3])
    with pytest.raises(VariantError, match="element 0"):
        variants.build("cocod", PROF, Cluster(workers=2), k=[0, 1])
    with pytest.raises(VariantError, match="not an integer or a comma-separated list"):
        variants.build("cocod", PROF, Cluster(workers=2), k="two")
    net = variants.build("cocod", PROF, Cluster(workers=2), k="3,5")
    assert net.meta["options"]["k"] == (3, 5)
    assert variants.get("cocod").default_warmup(None, {"k": (3, 5)}) == 15


# ---------------------------------------------------------------- compression
def _comp_cluster(n=4, bw=BW):
    return Cluster(workers=n, bandwidth=bw, latency=ALPHA)


BIG = ModelProfile("big", [Layer("w", 0.001, 0.002, 4e6 * 4)], batch_size=8)  # 4M fp32 elements


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
@pytest.mark.parametrize("spec,comm", [
    ("onebit;s_per_byte=0", lambda n: t_ar(16e6 / 32, n)),
    ("powersgd:4;s_per_byte=0", lambda n: 2 * t_ar(4 * 2000 * 4, n)),   # side 2000: P = Q
    ("topk:0.01;s_per_byte=0", lambda n: (n - 1) * (ALPHA + 2 * 0.01 * 16e6 / BW)),
])
@pytest.mark.parametrize("discipline", ["fifo", "flows"])
def test_compressed_step_closed_forms(granularity, spec, comm, discipline):
    """One square 2000 x 2000 fp32 tensor: 1-bit is a ring all-reduce of S/32; PowerSGD rank 4
    two dependent all-reduces of 4*2000 elements; top-k an all-gather of 2 r S per worker."""
    n = 4
    fine = dict(bucket_bytes=math.inf, overlap=False) if granularity == "fine" else {}
    net = variants.build("allreduce", BIG, _comp_cluster(n), granularity, compression=spec,
                         discipline=discipline, **fine)
    assert rel(period(net, n), BIG.compute_s + comm(n)) < 1e-9


def test_top_k_ratio_halves_and_quarters_the_comm_term_when_latency_is_zero():
    c = Cluster(workers=4, bandwidth=BW, latency=0.0)
    comm = {}
    for r in (0.04, 0.02, 0.01):
        net = build("allreduce", BIG, c, "coarse", compression=f"topk:{r};s_per_byte=0")
        comm[r] = period(net, 4) - BIG.compute_s
    assert rel(comm[0.04] / comm[0.02], 2) < 1e-9 and rel(comm[0.04] / comm[0.01], 4) < 1e-9
    assert rel(comm[0.01], 3 * 2 * 0.01 * 16e6 / BW) < 1e-9


def test_compress_and_decompress_costs_sit_on_the_gpu():
    """s_per_byte = c: the step gains c S before and c S after the collective."""
    c = 1e-10
    net = build("allreduce", BIG, _comp_cluster(), "coarse", compression=f"onebit;s_per_byte={c}")
    want = BIG.compute_s + 2 * c * 16e6 + t_ar(16e6 / 32, 4)
    assert rel(period(net, 4), want) < 1e-9
    ops = [t for t in net.transitions.values() if t.tags.get("phase") == "compress"]
    assert len(ops) == 4 and all(t.resources == (f"w{t.tags['worker']}.gpu",) for t in ops)


def test_default_cost_is_memory_passes_at_the_device_bandwidth():
    from sgdnet.workload import DEVICES

    v100 = DEVICES["V100"]
    comp = parse_compression("topk:0.01")
    c, d = comp.costs(BIG)   # device "unknown": a V100
    assert c == pytest.approx(4 / (v100.mem_bw * v100.efficiency))
    assert d == pytest.approx(1 / (v100.mem_bw * v100.efficiency))
    a100 = DEVICES["A100"]
    c2, _ = comp.costs(ModelProfile("x", [Layer("w", 1, 1, 4)], 1, device="A100"))
    assert c2 == pytest.approx(4 / (a100.mem_bw * a100.efficiency))


def test_powersgd_sends_small_tensors_uncompressed_and_bounds_the_wire_below():
    comp = parse_compression("powersgd:4")
    # 1000 elements: side 31.6, 2*4*31.6 = 253 < 1000 -> compressed; 16 elements: not
    (p, _, pb), (q, _, qb) = comp.phases([4000.0, 64.0])
    side = math.sqrt(1000)
    assert (p, q) == ("P", "Q") and pb == pytest.approx(4 * side * 4 + 64) \
        and qb == pytest.approx(4 * side * 4)
    # a 1000 x 4000 matrix really sends 4 (1000 + 4000) elements; the square form sends less
    assert comp.wire_bytes([4e6 * 4]) <= 4 * (1000 + 4000) * 4


def test_compression_specs_are_checked_and_refused_where_not_modelled():
    for bad, why in [("zip", "unknown method"), ("topk", "needs its ratio"),
                     ("topk:2", r"must be in \(0, 1\]"), ("powersgd:1.5", "integer >= 1"),
                     ("onebit:3", "takes no parameter"), ("topk:0.1;cost=1", "s_per_byte"),
                     ("topk:0.1;s_per_byte=-1", ">= 0")]:
        with pytest.raises(VariantError, match=why):
            variants.build("allreduce", BIG, _comp_cluster(), compression=bad)
    net = variants.build("allreduce", BIG, _comp_cluster(), granularity="coarse",
                         compression={"method": "topk", "ratio": 0.05})
    assert net.meta["options"]["compression"] == "topk:0.05"
    with pytest.raises(VariantError, match="all-gather"):
        variants.build("allreduce", BIG, _comp_cluster(), algorithm="tree",
                       compression="topk:0.01")
    with pytest.raises(VariantError, match="sync='ps'"):
        variants.build("local-sgd", BIG, _comp_cluster(), sync="ps", compression="onebit")
    with pytest.raises(VariantError, match="parameter server aggregating"):
        variants.build("sync-ps", BIG, _comp_cluster(), compression="onebit")


@pytest.mark.parametrize("name,opts", [("pipe-sgd", {"width": 1}), ("local-sgd", {"H": 1}),
                                       ("cocod", {"k": 1})])
def test_compression_in_the_other_allreduce_variants(name, opts):
    """Comm-bound (slow net): the all-reduce of S/32 replaces that of S in each variant's
    closed form (width 1 and H = 1: T_c + T_AR; cocod k = 1: max(T_c, T_AR))."""
    c = _comp_cluster(4, BW / 10)
    tar = 2 * 3 * (ALPHA + 16e6 / 32 / (4 * BW / 10))
    net = build(name, BIG, c, "coarse", compression="onebit;s_per_byte=0", **opts)
    want = max(BIG.compute_s, tar) if name == "cocod" else BIG.compute_s + tar
    assert rel(period(net, 4), want) < 1e-9


# ---------------------------------------------------------------- comm_granularity
TENS = ModelProfile("tens", [
    Layer("l0", 0.002, 0.004, 6e6, tensors=(Tensor("weight", 5e6), Tensor("bias", 1e6))),
    Layer("l1", 0.003, 0.006, 9e6, tensors=(Tensor("weight", 8e6), Tensor("bias", 1e6))),
    Layer("l2", 0.001, 0.002, 3e6, tensors=(Tensor("weight", 3e6),))], batch_size=16)


def test_allreduce_messages_follow_comm_granularity():
    c = Cluster(workers=2)
    for g, bb, want in [("layer", 0, TENS.messages("layer")),
                        ("tensor", 25e6, TENS.messages("tensor")),
                        ("bucket", 7e6, TENS.messages("bucket", 7e6))]:
        net = variants.build("allreduce", TENS, c, comm_granularity=g, bucket_bytes=bb)
        assert net.meta["bucket_bytes"] == [m.nbytes for m in want], g


def test_ps_pieces_follow_comm_granularity_and_buckets_keep_the_compute():
    c = Cluster(workers=2, ps_shards=1)
    for g, want in [("tensor", TENS.messages("tensor")),
                    ("bucket", TENS.messages("bucket", 7e6))]:
        net = variants.build("sync-ps", TENS, c, comm_granularity=g, bucket_bytes=7e6)
        got = sorted(b for layer in net.meta["ps_plan"] for _, b in layer)
        assert got == sorted(m.nbytes for m in want), g
        gpu = [t.duration.mean for t in net.transitions.values()
               if t.tags.get("worker") == 0 and t.tags.get("kind") == "compute"]
        assert math.fsum(gpu) == pytest.approx(TENS.compute_s, rel=1e-12)


# ---------------------------------------------------------------- step costs folded
def test_every_build_folds_the_step_costs_outside_the_layers():
    p = ModelProfile("over", PROF.layers, 32, zero_grad_s=0.001, loss_s=0.002, optimizer_s=0.004)
    c = Cluster(workers=1)
    for g in ("fine", "coarse"):
        net = variants.build("allreduce", p, c, granularity=g)
        work = math.fsum(t.duration.mean for t in net.transitions.values()
                         if t.tags.get("kind") == "compute")
        assert work == pytest.approx(p.step_s, rel=1e-12)
    pred = sgdnet.predict("allreduce", p, c, granularity="coarse", steps=10, warmup=2,
                          replications=1, seed=0)
    assert rel(pred.steps_per_s.mean, 1 / p.step_s) < 1e-9


# ---------------------------------------------------------------- command line
def test_cli_passes_the_new_options_through_option_flags(capsys):
    from sgdnet.cli import main

    argv = ["predict", "--variant", "local-sgd", "--model", "resnet18", "--workers", "2",
            "--speeds", "1,0.5", "--granularity", "coarse", "--steps", "6", "--warmup", "2",
            "--replications", "1", "--no-progress", "--json",
            "-o", "H=4,2", "-o", "balance=batch", "-o", "compression=onebit;s_per_byte=0"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["options"] == {"H": "4,2", "balance": "batch",
                              "compression": "onebit;s_per_byte=0"}
    assert out["rows"][0]["samples_per_s_mean"] > 0
    assert main([*argv[:-2], "-o", "compression=zip"]) == 2
    assert "unknown method 'zip'" in capsys.readouterr().err
