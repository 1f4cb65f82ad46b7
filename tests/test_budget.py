"""The memory budget of fine nets: the size estimate from two probe builds, and the stated
fallback to coarser layer groups when a net would not fit."""

from __future__ import annotations

import warnings

import pytest

from sgdnet import Cluster, variants
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
        groups = max(1, groups // 2)


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
