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
