"""The sharded data-parallel nets (``zero``, ``fsdp``; issue #38): bytes on the wire measured
from the simulated nets against the ZeRO paper's counts, HYBRID_SHARD's cross-node traffic,
kernel against the reference oracle, options and refusals, the CLI flags.

Bytes per GPU and step (Rajbhandari et al., SC 2020, section 7: DDP all-reduces ``2 Psi``,
ZeRO-1/2 reduce-scatter and all-gather ``Psi`` each, ZeRO-3 adds a second all-gather,
``3 Psi``): on a ring of ``n`` a reduce-scatter or all-gather of ``S`` moves ``(n-1)/n S`` out
of every GPU, an all-reduce ``2 (n-1)/n S``. Measured here as the sum, over the transfers
of a run, of each transfer's bytes times its firings, per worker step.
"""

import math

import pytest

from sgdnet import simulate
from sgdnet.cli_args import build_parser
from sgdnet.engine.reference import simulate_reference
from sgdnet.errors import SgdnetError
from sgdnet.variants import build, get, names
from sgdnet.workload import Cluster, ModelProfile, Topology


def toy(U=3, nbytes=4e6, cv=None, root=False):
    lays = [{"name": f"h.{k}.l{j}", "forward_s": 0.005, "backward_s": 0.01,
             "grad_bytes": nbytes / 2, "cv": cv} for k in range(U) for j in range(2)]
    if root:
        lays = [{"name": "wte", "forward_s": 0.001, "backward_s": 0.002, "grad_bytes": nbytes}, *lays,
                {"name": "ln_f", "forward_s": 0.001, "backward_s": 0.001, "grad_bytes": 1e3}]
    return ModelProfile("toy", lays, 8, optimizer_s=0.004)


def wire_bytes(net, n, steps=12, warmup=4, kind=None):
    """Bytes each GPU sends per step (transfers whose path has a link of ``kind`` only)."""
    r = simulate(net, steps=steps * n, warmup=warmup * n, replications=1, seed=0)
    tot = 0.0
    for name, t in net.transitions.items():
        if t.tags.get("kind") == "comm" and t.tags.get("stage") == "link":
            if kind is not None and not any(net.resources[x].tags.get("kind") == kind
                                            for x in t.resources if x in net.resources):
                continue
            tot += t.tags["bytes"] * float(r.firings(name)[0])
    per_step = r.firings(next(x for x, t in net.transitions.items() if t.tags.get("step")))[0]
    return tot / per_step / n


@pytest.mark.parametrize("n", [2, 4])
def test_bytes_zero12_equal_ddp_and_full_shard_is_one_and_a_half(n):
    prof = toy()
    S = prof.grad_bytes
    cl = Cluster(workers=n, bandwidth=1e9, latency=1e-5)
    ddp = wire_bytes(build("allreduce", prof, cl), n)
    assert ddp == pytest.approx(2 * (n - 1) / n * S, rel=1e-12)
    for stage in (1, 2):
        z = wire_bytes(build("zero", prof, cl, stage=stage, dtype="fp32", bucket_bytes=2e6), n)
        assert z == pytest.approx(ddp, rel=1e-12)
    for net in (build("zero", prof, cl, stage=3, dtype="fp32"),
                build("fsdp", prof, cl, dtype="fp32", wrap=2)):
        assert wire_bytes(net, n) == pytest.approx(1.5 * ddp, rel=1e-12)
    # bf16 on the wire from an fp32 profile: half the bytes
    assert wire_bytes(build("fsdp", prof, cl, dtype="bf16"), n) == pytest.approx(0.75 * ddp)


def test_root_unit_is_gathered_once():
    """With wrap='block' the embedding and final LayerNorm form the root unit, which FSDP does
    not reshard after forward: two collectives for the root, three for each block."""
    n, prof = 4, toy(root=True)
    units_bytes = prof.grad_bytes - 1e3 - 4e6  # the blocks
    root = 4e6 + 1e3
    got = wire_bytes(build("fsdp", prof, Cluster(workers=n, bandwidth=1e9, latency=1e-5),
                           dtype="fp32"), n)
    assert got == pytest.approx((n - 1) / n * (3 * units_bytes + 2 * root), rel=1e-12)
    # SHARD_GRAD_OP: two for every unit
    got = wire_bytes(build("fsdp", prof, Cluster(workers=n, bandwidth=1e9, latency=1e-5),
                           dtype="fp32", sharding="shard_grad_op"), n)
    assert got == pytest.approx((n - 1) / n * 2 * prof.grad_bytes, rel=1e-12)


def two_nodes(g=2, nics=1):
    topo = Topology(gpus_per_node=g, intra="nvlink", intra_bandwidth="300GB/s",
                    intra_latency="3us", nics_per_node=nics, nic_bandwidth="100Gbps")
    return Cluster(workers=2 * g, latency="15us", topology=topo)


@pytest.mark.parametrize("g", [2, 4])
def test_hybrid_sends_across_the_nics_the_all_reduce_of_a_shard(g):
    """HYBRID_SHARD on 2 nodes of g GPUs: only the all-reduce of each GPU's 1/g shard crosses
    the NICs, ``2 (N-1)/N * S/g`` per GPU (N = 2 nodes); FULL_SHARD's flat ring sends its
    three collectives' bytes over the node's boundary edges."""
    prof = toy()
    S, N, n = prof.grad_bytes, 2, 2 * g
    cl = two_nodes(g)
    got = wire_bytes(build("fsdp", prof, cl, sharding="hybrid", dtype="fp32"), n, kind="nic_up")
    assert got == pytest.approx(2 * (N - 1) / N * S / g, rel=1e-12)
    # inside the nodes: the node's all-gathers and reduce-scatters, (g-1)/g S each
    total = wire_bytes(build("fsdp", prof, cl, sharding="hybrid", dtype="fp32"), n)
    assert total - got == pytest.approx(3 * (g - 1) / g * S, rel=1e-12)
    full = wire_bytes(build("fsdp", prof, cl, dtype="fp32"), n, kind="nic_up")
    assert full == pytest.approx(3 * (n - 1) / n * S / g, rel=1e-12)  # one edge of g per node


@pytest.mark.parametrize("variant,opts", [
    ("fsdp", {"forward_prefetch": True}),
    ("fsdp", {"sharding": "hybrid", "backward_prefetch": "post"}),
    ("fsdp", {"algorithm": "hierarchical", "backward_prefetch": "none"}),
    ("zero", {"stage": 2, "bucket_bytes": 2e6}),
    ("zero", {"stage": 1, "algorithm": "hierarchical"}),
])
def test_kernel_agrees_with_the_reference_oracle(variant, opts):
    """Same run in the Numba kernel and the pure-Python oracle, deterministic and with compute
    noise (both draw firing k of a transition from draw k of its stream)."""
    for cv in (0.0, 0.1):
        cl = two_nodes(2).replace(compute_cv=cv)
        net = build(variant, toy(), cl, **opts)
        kw = dict(steps=24, warmup=4, replications=2, seed=5)
        k, r = simulate(net, engine="generic", **kw), simulate_reference(net, **kw)
        assert k.throughput.samples == pytest.approx(r.throughput.samples, rel=1e-9)
        for t in net.transitions:
            assert k.firings(t).tolist() == r.firings(t).tolist(), t


def test_nets_grow_linearly_in_units_times_workers():
    """Elements per worker and unit stay flat from 8 to 32 workers (no O(units x workers^2)
    term): a streamed ring is O(members)."""
    def size(n, U):
        topo = Topology(gpus_per_node=4, intra="nvlink", intra_bandwidth="300GB/s",
                        nics_per_node=1, nic_bandwidth="100Gbps")
        net = build("fsdp", toy(U), Cluster(workers=n, latency="15us", topology=topo),
                    ring_form="pipelined")
        return len(net.places) + len(net.transitions)
    d1 = size(16, 4) - size(8, 4)
    d2 = size(32, 4) - size(16, 4)
    assert d2 == 2 * d1  # affine in the workers
    e1 = size(8, 8) - size(8, 4)
    e2 = size(8, 12) - size(8, 8)
    assert e1 == e2  # affine in the units


def test_registered_with_the_agreed_options():
    assert {"zero", "fsdp"} <= set(names())
    z, f = get("zero"), get("fsdp")
    assert z.defaults()["stage"] == 2 and z.defaults()["dtype"] == "bf16"
    assert f.defaults()["sharding"] == "full" and f.defaults()["backward_prefetch"] == "pre"
    assert f.defaults()["limit_all_gathers"] is True and f.defaults()["forward_prefetch"] is False
    assert f.defaults()["wrap"] == "block" and f.defaults()["optimizer"] == "adamw"
    for o in ("optimizer", "dtype", "accumulate"):
        assert o in z.option_names() and o in f.option_names()


@pytest.mark.parametrize("variant,opts,words", [
    ("fsdp", {"sharding": "hybrid"}, "topology"),
    ("fsdp", {"sharding": "quarter"}, "sharding"),
    ("fsdp", {"wrap": [["nope"]]}, "unknown layer"),
    ("fsdp", {"wrap": [["h.0.l0"], ["h.0.l0"]]}, "two units"),
    ("zero", {"stage": 4}, "stage"),
    ("zero", {"dtype": "int8"}, "dtype"),
    ("zero", {"algorithm": "tree"}, "algorithm"),
    ("fsdp", {"algorithm": "hierarchical"}, "hierarchical"),
])
def test_bad_options_raise_naming_the_value(variant, opts, words):
    cl = Cluster(workers=4, bandwidth=1e9, latency=1e-5)
    with pytest.raises(SgdnetError, match=words):
        build(variant, toy(), cl, **opts)


def test_wrap_policies():
    from sgdnet.variants.fsdp import wrap_units

    prof = toy(U=3, root=True)
    units, root = wrap_units(prof, "block")
    assert units == [[0, 7], [1, 2], [3, 4], [5, 6]] and root == 0
    assert wrap_units(prof, 3) == ([[0, 1, 2], [3, 4, 5], [6, 7]], None)
    units, root = wrap_units(prof, [["h.0.l0", "h.0.l1", "h.1.l0"]])
    assert units == [[0, 4, 5, 6, 7], [1, 2, 3]] and root == 0
    flat = ModelProfile("cnn", [{"name": f"conv{i}", "forward_s": 1e-3, "backward_s": 2e-3,
                                 "grad_bytes": 1e5} for i in range(3)], 8)
    assert wrap_units(flat, "block") == ([[0], [1], [2]], None)


def test_cli_flags_are_variant_options():
    p = build_parser()
    a = p.parse_args(["predict", "--variant", "fsdp", "--sharding", "hybrid", "--dtype", "fp16",
                      "--accumulate", "4", "--optimizer", "adam", "-o", "wrap=2"])
    assert dict(a.option) == {"sharding": "hybrid", "dtype": "fp16", "accumulate": 4,
                              "optimizer": "adam", "wrap": 2}
    a = p.parse_args(["predict", "--variant", "zero", "--stage", "3"])
    assert dict(a.option) == {"stage": 3}
    with pytest.raises(Exception, match="sharding"):
        p.parse_args(["predict", "--variant", "fsdp", "--sharding", "half"])


def test_optimizer_step_is_charged_on_the_shard():
    """The optimizer's ``optimizer_s`` is not folded into the layers: each GPU steps its
    ``1/n`` (so a sharded step is ``(n-1)/n * u`` shorter than its unsharded twin)."""
    from sgdnet.workload import ring_allreduce_time

    prof = toy()
    n = 4
    cl = Cluster(workers=n, bandwidth=1e9, latency=1e-5)
    nets = {s: build("fsdp", prof, cl, sharding=s, dtype="fp32", granularity="coarse")
            for s in ("full", "no_shard")}
    t = {s: n / simulate(net, steps=10 * n, warmup=2 * n, replications=1).throughput.mean
         for s, net in nets.items()}
    ar = sum(ring_allreduce_time(4e6, n, 1e9, 1e-5) for _ in range(3))
    assert t["no_shard"] == pytest.approx(prof.compute_s + ar + prof.optimizer_s, rel=1e-9)
    rs = 3 * 3 * (n - 1) * (1e-5 + 4e6 / (n * 1e9))
    assert t["full"] == pytest.approx(prof.compute_s + rs + prof.optimizer_s / n, rel=1e-9)
    assert math.isclose(nets["full"].meta["unit_bytes"][0], 4e6)


def _one_node(n):
    """``n`` GPUs in one node (HYBRID_SHARD needs nodes; its cross-node groups are then one
    GPU each)."""
    topo = Topology(gpus_per_node=n, intra="nvlink", intra_bandwidth="300GB/s",
                    intra_latency="3us", nics_per_node=1, nic_bandwidth="100Gbps")
    return Cluster(workers=n, latency="15us", topology=topo)


@pytest.mark.parametrize("n", [2, 3])
def test_every_prefetch_combination_completes(n):
    """Every sharding x backward_prefetch x forward_prefetch x limit_all_gathers on 2 and 3
    GPUs runs (no DeadlockError), with a root unit (embeddings and final norm, whose
    gradients are complete only at the end of the backward pass: BACKWARD_POST deadlocked on
    it, the block after the root waiting for an all-gather issued by the root's
    post-backward hook), with a unit of non-adjacent layers, and without a root."""
    from sgdnet.errors import DeadlockError

    profs = {"root": (toy(root=True), "block"), "plain": (toy(), "block"),
             "split": (toy(), [["h.0.l0", "h.2.l1"], ["h.1.l0", "h.1.l1"]])}
    cl = _one_node(n)
    for sharding in ("full", "shard_grad_op", "no_shard", "hybrid"):
        for bp in ("pre", "post", "none"):
            for fp in (False, True):
                for lag in (False, True):
                    for what, (prof, wrap) in profs.items():
                        net = build("fsdp", prof, cl, sharding=sharding, backward_prefetch=bp,
                                    forward_prefetch=fp, limit_all_gathers=lag, wrap=wrap)
                        try:
                            r = simulate(net, steps=3 * n, warmup=n, replications=1, seed=0)
                        except DeadlockError as e:  # pragma: no cover - the failure reported
                            pytest.fail(f"{sharding}/{bp}/fp={fp}/lag={lag}/{what}: {e}")
                        assert r.throughput.mean > 0


def test_backward_post_gathers_before_the_reduce_scatter():
    """BACKWARD_POST (``torch.distributed.fsdp.BackwardPrefetch``): the next unit's backward
    all-gather is issued after the current unit's gradient computation, before its
    reduce-scatter; with a root unit, the last block (whose prefetcher, the root, finishes its
    gradients last) is all-gathered by its own pre-backward hook, as without prefetch."""
    prof = toy(U=3, root=True)  # units: 0 root, 1..3 the blocks
    cl = Cluster(workers=2, bandwidth=1e9, latency=1e-5)
    order = build("fsdp", prof, cl, backward_prefetch="post").meta["collectives"]
    bwd = order[order.index(("ag_f", 3)) + 1:]
    assert bwd == [("ag_b", 3), ("ag_b", 2), ("rs", 3), ("ag_b", 1), ("rs", 2), ("rs", 1),
                   ("rs", 0)]
    order = build("fsdp", prof, cl, backward_prefetch="none").meta["collectives"]
    assert order[order.index(("ag_f", 3)) + 1:] == [
        ("ag_b", 3), ("rs", 3), ("ag_b", 2), ("rs", 2), ("ag_b", 1), ("rs", 1), ("rs", 0)]


def _op_bytes(net, n, op):
    """Bytes each GPU sends per step in the transfers of collectives of ``op``."""
    r = simulate(net, steps=12 * n, warmup=4 * n, replications=1, seed=0)
    tot = math.fsum(t.tags["bytes"] * float(r.firings(x)[0]) for x, t in net.transitions.items()
                    if t.tags.get("kind") == "comm" and t.tags.get("stage") == "link"
                    and t.tags.get("op") == op)
    step = next(x for x, t in net.transitions.items() if t.tags.get("step"))
    return tot / r.firings(step)[0] / n


@pytest.mark.parametrize("n", [2, 4])
def test_reduce_dtype_fp32_with_bf16_parameters(n):
    """``dtype="bf16", reduce_dtype="fp32"`` (FSDP ``MixedPrecision(param_dtype=bfloat16,
    reduce_dtype=float32)``, DeepSpeed ``communication_data_type``): on a ring of ``n`` each
    GPU sends ``(n-1)/n`` of each collective's buffer, so per step ``2 (n-1)/n P * 2 B`` of
    FULL_SHARD's two all-gathers plus ``(n-1)/n P * 4 B`` of its reduce-scatter, ``P`` the
    parameters (an fp32 profile: ``grad_bytes / 4``); ZeRO-1/2: one all-gather at 2 B and one
    reduce-scatter at 4 B."""
    prof = toy()
    P = prof.grad_bytes / 4
    f = (n - 1) / n
    cl = Cluster(workers=n, bandwidth=1e9, latency=1e-5)
    mixed = {"dtype": "bf16", "reduce_dtype": "fp32"}
    for net in (build("fsdp", prof, cl, wrap=2, **mixed),
                build("zero", prof, cl, stage=3, **mixed)):
        ag, rs = _op_bytes(net, n, "all_gather"), _op_bytes(net, n, "reduce_scatter")
        assert ag == pytest.approx(2 * f * P * 2, rel=1e-12)
        assert rs == pytest.approx(f * P * 4, rel=1e-12)
        assert wire_bytes(net, n) == pytest.approx(2 * f * P * 2 + f * P * 4, rel=1e-12)
    for stage in (1, 2):
        net = build("zero", prof, cl, stage=stage, bucket_bytes=1e6, **mixed)
        assert _op_bytes(net, n, "all_gather") == pytest.approx(f * P * 2, rel=1e-12)
        assert _op_bytes(net, n, "reduce_scatter") == pytest.approx(f * P * 4, rel=1e-12)
    # NO_SHARD all-reduces gradients only: 2 (n-1)/n P at 4 B
    net = build("fsdp", prof, cl, sharding="no_shard", **mixed)
    assert wire_bytes(net, n) == pytest.approx(2 * f * P * 4, rel=1e-12)
    # the coarse nets move the same bytes (one ring per phase, no op tag per collective)
    coarse = build("fsdp", prof, cl, wrap=2, granularity="coarse", **mixed)
    assert wire_bytes(coarse, n) == pytest.approx(2 * f * P * 2 + f * P * 4, rel=1e-12)
    coarse = build("zero", prof, cl, stage=1, granularity="coarse", **mixed)
    assert wire_bytes(coarse, n) == pytest.approx(f * P * 2 + f * P * 4, rel=1e-12)
    # None is dtype's: the same net as reduce_dtype equal to dtype
    same = build("fsdp", prof, cl, wrap=2, dtype="bf16", reduce_dtype="bf16")
    assert wire_bytes(same, n) == pytest.approx(3 * f * P * 2, rel=1e-12)


def test_hybrid_reduce_dtype_crosses_the_nics_in_fp32():
    """HYBRID_SHARD's cross-node all-reduce of the 1/g shard is a gradient reduction: at
    ``reduce_dtype``, ``2 (N-1)/N * P/g * 4 B`` per GPU over the NICs."""
    g, N = 2, 2
    prof = toy()
    P = prof.grad_bytes / 4
    net = build("fsdp", prof, two_nodes(g), sharding="hybrid", dtype="bf16", reduce_dtype="fp32")
    assert wire_bytes(net, 2 * g, kind="nic_up") == pytest.approx(2 * (N - 1) / N * P / g * 4,
                                                                  rel=1e-12)


def test_reduce_dtype_option_cli_and_memory():
    from sgdnet.workload.llms import mpt
    from sgdnet.workload.memory import memory_for

    assert get("fsdp").defaults()["reduce_dtype"] is None
    assert get("zero").defaults()["reduce_dtype"] is None
    with pytest.raises(SgdnetError, match="reduce_dtype"):
        build("fsdp", toy(), Cluster(workers=2, bandwidth=1e9), reduce_dtype="int8")
    p = build_parser()
    a = p.parse_args(["predict", "--variant", "fsdp", "--dtype", "bf16", "--reduce-dtype", "fp32"])
    assert dict(a.option) == {"dtype": "bf16", "reduce_dtype": "fp32"}
    with pytest.raises(Exception, match="reduce-dtype"):
        p.parse_args(["predict", "--variant", "fsdp", "--reduce-dtype", "fp8"])
    # the gradients held in the reduce dtype: twice bf16's bytes in fp32
    prof = mpt(n_layers=2, d_model=64, n_heads=4, vocab=100, seq_len=32)
    cl = Cluster(workers=2, bandwidth=1e9)
    spec = get("fsdp")
    bf = memory_for("fsdp", spec.resolve({}), prof, cl)
    fp = memory_for("fsdp", spec.resolve({"reduce_dtype": "fp32"}), prof, cl)
    assert fp.grads == pytest.approx(2 * bf.grads, rel=1e-12)
    assert fp.params == bf.params
