"""The memory budget of fine nets: the size estimate from two probe builds, and the stated
fallback to coarser layer groups when a net would not fit."""

from __future__ import annotations

import math
import warnings

import pytest

from sgdnet import Cluster, Layer, ModelProfile, StepSlowdown, variants
from sgdnet.variants import budget
from sgdnet.variants.inputs import resolve_model

RESNET = resolve_model("resnet50")


@pytest.mark.parametrize("name,kw", [("async-ps", {}), ("local-sgd", {}),
                                     ("sync-ps", {"ps_shards": 4})])
def test_estimate_is_close_to_the_built_size(name, kw):
    cl = Cluster(workers=8, bandwidth="10Gbps", **kw)
    spec = variants.get(name)
    opts = spec.resolve({})
    est = budget.estimate_elements(lambda m: spec.build_fine(m, cl, **opts), RESNET)
    net = spec.build_fine(RESNET, cl, **opts)
    assert est == pytest.approx(len(net.places) + len(net.transitions), rel=0.15)


def test_a_net_over_the_budget_is_built_with_fewer_layer_groups_and_says_so(monkeypatch):
    cl = Cluster(workers=8, bandwidth="10Gbps")
    full = variants.build("async-ps", RESNET, cl)
    size = len(full.places) + len(full.transitions)
    assert "layer_fallback" not in full.meta  # below PROBE_FROM: never probed
    monkeypatch.setattr(budget, "PROBE_FROM", 1)
    cap = size * budget.BYTES_PER_ELEMENT // 3
    monkeypatch.setenv("SGDNET_MAX_NET_BYTES", str(cap))
    with pytest.warns(UserWarning, match=r"merged into \d+ groups.*SGDNET_MAX_NET_BYTES"):
        net = variants.build("async-ps", RESNET, cl)
    fb = net.meta["layer_fallback"]
    assert fb["layers"] == RESNET.n_layers and 1 <= fb["layer_groups"] < RESNET.n_layers
    assert fb["budget_bytes"] == cap and fb["estimated_bytes"] > cap
    built = (len(net.places) + len(net.transitions)) * budget.BYTES_PER_ELEMENT
    assert built <= cap and fb["built_bytes"] == built
    # an explicit max_layers is the user's choice: no probing, no fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net = variants.build("async-ps", RESNET, cl, max_layers=50)
    assert "layer_fallback" not in net.meta


def _fit_without_reuse(build, model, workers, default_cv):
    """``fit_layer_groups`` as it was before probes were reused: every estimate builds both
    of its probes."""
    from sgdnet.limits import limit
    from sgdnet.variants.layers import group_layers

    cap = limit("max_net_bytes")
    est = budget.estimate_elements(build, model) * budget.BYTES_PER_ELEMENT
    if est <= cap:
        return None
    L = model.n_layers
    groups = max(1, min(L - 1, int(L * cap / est * budget.MARGIN)))
    while True:
        g_est = budget.estimate_elements(build, group_layers(model, groups, default_cv))
        if g_est * budget.BYTES_PER_ELEMENT <= cap * budget.MARGIN or groups == 1:
            return groups
        groups = max(1, min(groups - 1, int(groups * cap * budget.MARGIN
                                            / (g_est * budget.BYTES_PER_ELEMENT))))


@pytest.mark.parametrize("name,kw", [("async-ps", {}), ("local-sgd", {}), ("ssp", {}),
                                     ("backup", {}), ("sync-ps", {"ps_shards": 4}),
                                     ("sync-ps", {}), ("allreduce", {})])
@pytest.mark.parametrize("fraction", [2, 8])
def test_reusing_the_probes_chooses_the_same_groups(monkeypatch, name, kw, fraction):
    cl = Cluster(workers=8, bandwidth="10Gbps", **kw)
    spec = variants.get(name)
    opts = spec.resolve({})
    model = RESNET.with_step_costs_folded()
    calls = []

    def build(m):
        calls.append(m.n_layers)
        return spec.build_fine(m, cl, **opts)

    full = build(model)
    size = len(full.places) + len(full.transitions)
    monkeypatch.setattr(budget, "PROBE_FROM", 1)
    monkeypatch.setenv("SGDNET_MAX_NET_BYTES", str(size * budget.BYTES_PER_ELEMENT // fraction))
    calls.clear()
    groups, note = budget.fit_layer_groups(build, model, cl.workers, cl.compute_cv)
    reused = len(calls)
    calls.clear()
    assert groups == _fit_without_reuse(build, model, cl.workers, cl.compute_cv)
    assert reused <= len(calls)


# ------------------------------------------------------------ probes counted on smaller clusters
SIX = budget._sample(RESNET.with_step_costs_folded(), 6)  # layers under and over shard_min_bytes
P4D = dict(gpus_per_node=8, intra_bandwidth="150GB/s", nics_per_node=4, nic_bandwidth="100Gbps")


def _counted(name, cl, model=SIX, **options):
    """``(count from the ElementCounter, whether it scaled, the size of the real build)``."""
    spec = variants.get(name)
    opts = spec.resolve(options)

    def build(m, c):
        return spec.build_fine(m, c, **opts)

    counter = budget.ElementCounter(build, cl)
    n = counter(model)
    net = build(model, cl)
    return n, counter.scaled, len(net.places) + len(net.transitions)


@pytest.mark.parametrize("name", variants.names())
def test_a_count_from_smaller_clusters_is_the_real_size(name):
    # 48 workers: counted from clusters of 4, 8 and 12 (speeds dropped: they change durations,
    # not elements); every variant, whether its nets grow linearly (then scaled) or not
    cl = Cluster(workers=48, speeds=[1.0 + (i % 5) / 10 for i in range(48)], ps_shards=2,
                 compute_cv=0.1, comm_cv=0.1)
    n, scaled, real = _counted(name, cl)
    assert n == real
    assert scaled is not None


@pytest.mark.parametrize("name,kw,options", [
    ("sync-ps", {"ps_shards": 16}, {}),
    ("async-ps", {"ps_shards": 2, "ps_placement": "colocated"}, {}),
    ("sync-ps", {"ps_shards": 3, "topology": dict(P4D, fabric="leaf-spine", rack_nodes=2,
                                                  oversubscription=2.0)}, {}),
    ("allreduce", {}, {"algorithm": "hierarchical"}),
])
def test_a_count_on_a_topology_from_smaller_clusters_is_the_real_size(name, kw, options):
    kw = {"topology": P4D, **kw}
    cl = Cluster(workers=192, **kw)  # 24 nodes; counted from 1, 2 and 3 (or the real cluster)
    n, scaled, real = _counted(name, cl, budget._sample(SIX, 3), **options)
    assert n == real
    if name != "allreduce":  # parameter-server nets grow linearly in the workers
        assert scaled


def test_parameter_server_counts_come_from_smaller_clusters_and_rings_do_not():
    cl = Cluster(workers=48)
    assert _counted("sync-ps", cl)[1] is True
    # an unrolled ring grows with the square of its members: counted on the real cluster
    assert _counted("allreduce", cl, ring_form="unrolled")[1] is False


def test_a_builder_choice_that_changes_with_size_is_caught_by_the_one_layer_check():
    # linear on the small clusters, another line from 100 workers on (as a ring's form would)
    sizes = []

    def build(model, cl):
        sizes.append(cl.workers)
        per = 10 if cl.workers < 100 else 7
        return per * cl.workers * model.n_layers + 3

    counter = budget.ElementCounter(build, Cluster(workers=240))
    assert counter(SIX) == 7 * 240 * 6 + 3 and counter.scaled is False
    assert sizes == [4, 8, 12, 240, 240]  # the check, then the real build

    sizes.clear()
    counter = budget.ElementCounter(lambda m, cl: sizes.append(cl.workers) or
                                    10 * cl.workers * m.n_layers + 3, Cluster(workers=240))
    assert counter(SIX) == 10 * 240 * 6 + 3 and counter.scaled is True
    assert sizes == [4, 8, 12, 240, 4, 8, 12]  # the check, then the small clusters only


def test_clusters_that_cannot_shrink_are_counted_as_they_are():
    assert budget._smaller_clusters(Cluster(workers=47)) == ()  # under SCALE_FROM x 4
    assert budget._smaller_clusters(Cluster(workers=48, straggler=StepSlowdown(0.2, 3))) == ()
    small = budget._smaller_clusters(Cluster(workers=64, ps_shards=8, ps_placement="colocated"))
    assert small == () or all(c.workers >= 8 for c in small)
    topo = budget._smaller_clusters(Cluster(workers=384, topology=dict(
        P4D, fabric="leaf-spine", rack_nodes=2, node_nic_bandwidth=["100Gbps"] * 48)))
    assert [c.workers for c in topo] == [16, 32, 48]  # whole racks of two nodes
    assert all(c.topology.node_nic_bandwidth is None for c in topo)


def _over_budget(monkeypatch, model, cl, warning):
    """``(elements of the full sync-ps net, the budget set, the fallback note)`` of a build of
    ``model`` on ``cl`` under a budget a third of the full net's, which warns ``warning``."""
    full = variants.build("sync-ps", model, cl)
    size = len(full.places) + len(full.transitions)
    del full
    monkeypatch.setattr(budget, "PROBE_FROM", 1)
    cap = size * budget.BYTES_PER_ELEMENT // 3
    monkeypatch.setenv("SGDNET_MAX_NET_BYTES", str(cap))
    with pytest.warns(UserWarning, match=warning):
        net = variants.build("sync-ps", model, cl)
    fb = net.meta["layer_fallback"]
    fb["transitions"] = len(net.transitions)
    return size, cap, fb


# ------------------------------------------------ the first fallback of sharded parameter servers
def test_merging_small_layers_keeps_the_sums_and_reaches_the_bound():
    from sgdnet.variants.layers import merge_small_layers

    model = RESNET.with_step_costs_folded()
    m = merge_small_layers(model, 1e6)
    assert 1 < m.n_layers < model.n_layers
    assert all(la.grad_bytes >= 1e6 for la in m.layers)
    for f in ("forward_s", "backward_s", "grad_bytes"):
        assert sum(getattr(la, f) for la in m.layers) == pytest.approx(
            sum(getattr(la, f) for la in model.layers), rel=1e-12)
    # groups are consecutive and close as soon as they reach the bound; a short tail joins
    # the last group
    sizes = [1.0, 2.0, 0.5, 0.2, 0.4, 3.0, 0.1]
    toy = ModelProfile("toy", [Layer(f"l{i}", 0.001, 0.002, b) for i, b in enumerate(sizes)],
                       batch_size=8)
    assert [la.grad_bytes for la in merge_small_layers(toy, 1.0).layers] == \
        pytest.approx([1.0, 2.0, 1.1, 3.1])
    assert merge_small_layers(toy, 0.05) is toy  # nothing to merge
    assert merge_small_layers(toy, 100.0).n_layers == 1  # all below the bound: one group


@pytest.mark.parametrize("name,kw,options,merges", [
    ("sync-ps", {"ps_shards": 16}, {}, True),
    ("async-ps", {"ps_shards": 4}, {}, True),
    ("sync-ps", {"ps_shards": 16}, {"shards": 1}, False),
    ("sync-ps", {"ps_shards": 16}, {"comm_granularity": "tensor"}, False),
    ("sync-ps", {"ps_shards": 16, "shard_min_bytes": 0}, {}, False),
    ("local-sgd", {"ps_shards": 16}, {}, False),
    ("local-sgd", {"ps_shards": 16}, {"sync": "ps"}, True),
    ("allreduce", {"ps_shards": 16}, {}, False),
])
def test_which_nets_get_the_merged_fallback(name, kw, options, merges):
    from sgdnet.variants.registry import _compact

    cl = Cluster(workers=8, **kw)
    got = _compact(RESNET, cl, variants.get(name).resolve(options))
    assert (got is not None and got.n_layers < RESNET.n_layers) == merges


def test_a_sharded_ps_over_the_budget_merges_its_small_layers_first(monkeypatch):
    # 16 shards, most layers whole on one of them: two probes of 6 and 12 sampled layers miss
    # the size (-26 % on 256 p4d GPUs); counted on 4, 8 and 12 workers it is exact
    from sgdnet.variants.layers import merge_small_layers

    model = budget._sample(RESNET.with_step_costs_folded(), 40)
    cl = Cluster(workers=48, ps_shards=16)
    size, cap, fb = _over_budget(monkeypatch, model, cl, "at least shard_min_bytes")
    spec = variants.get("sync-ps")
    opts = spec.resolve({})
    counter = budget.ElementCounter(lambda m, c: spec.build_fine(m, c, **opts), cl)
    assert budget.estimate_elements(counter, model) == size and counter.scaled
    merged = merge_small_layers(model, cl.shard_min_bytes)
    assert fb["merged_small"] and 1 < fb["layer_groups"] == merged.n_layers < model.n_layers
    assert fb["estimated_bytes"] == size * budget.BYTES_PER_ELEMENT
    assert fb["built_bytes"] == fb["estimated_bytes_grouped"] <= cap * budget.MARGIN
    # every group is split over all 16 shards, so the net carries them as flow groups:
    # 4 W L + 2 W L + S L transitions plus the step's (far fewer than the per-piece net's)
    W, L, S = 48, merged.n_layers, 16
    assert 6 * W * L + S * L <= fb["transitions"] <= 6 * W * L + S * L + 4 * W


def test_the_merged_fallback_predicts_what_the_per_layer_net_does():
    # the approximation the fallback makes: layers under shard_min_bytes (78 of ResNet-50's
    # 107) pushed and pulled together with the layers after them, split over the shards
    from sgdnet import predict
    from sgdnet.variants.layers import merge_small_layers

    model = RESNET.with_step_costs_folded()
    cl = Cluster(workers=16, ps_shards=16, bandwidth="10Gbps")
    kw = dict(steps=20, replications=1, parallel=False)
    per_layer = float(predict("sync-ps", model, cl, **kw).samples_per_s.mean)
    merged = float(predict("sync-ps", merge_small_layers(model, cl.shard_min_bytes), cl,
                           **kw).samples_per_s.mean)
    assert merged == pytest.approx(per_layer, rel=0.005)


@pytest.mark.parametrize("name", ["sync-ps", "async-ps", "ssp"])
def test_the_merged_profile_as_an_option(name):
    from sgdnet.net.compiled import structural_key
    from sgdnet.variants.layers import merge_small_layers

    model = budget._sample(RESNET.with_step_costs_folded(), 24)
    cl = Cluster(workers=4, ps_shards=4)
    opted = variants.build(name, model, cl, merge_small_layers=True)
    merged = variants.build(name, merge_small_layers(model, cl.shard_min_bytes), cl)
    assert structural_key(opted) == structural_key(merged)
    assert structural_key(opted) != structural_key(variants.build(name, model, cl))
    # one shard, or no finite bound: no group can be split over shards, nothing is merged
    for one in (Cluster(workers=4), Cluster(workers=4, ps_shards=4, shard_min_bytes=math.inf)):
        assert structural_key(variants.build(name, model, one, merge_small_layers=True)) == \
            structural_key(variants.build(name, model, one))
