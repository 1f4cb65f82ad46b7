"""Build once, re-rate (sgdnet.study.rerate): a net re-rated to another bandwidth is the net a
fresh build compiles to — every compiled array equal, for every variant it is used for, over
worker counts and bandwidths — and a study row computed through it is the ``predict`` row."""

import numpy as np
import pytest

import sgdnet
from sgdnet.net.compiled import compile_net
from sgdnet.study import rerate
from sgdnet.variants import build


def _same_compiled(a, b):
    va, vb = vars(a), vars(b)
    keys = {k for k in va if not k.startswith("_")} | {k for k in vb if not k.startswith("_")}
    for k in sorted(keys - {"key"}):
        x, y = va[k], vb[k]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), k
            assert x.flags.writeable == y.flags.writeable, k  # else another kernel signature
        else:
            assert x == y, k


@pytest.mark.parametrize("variant", sorted(rerate.VERIFIED))
def test_rerated_net_is_the_fresh_net(variant):
    sizes = (1, 4, 9) if variant in ("sync-ps", "allreduce") else (2, 4)
    for workers in sizes:
        base = sgdnet.Cluster(workers=workers, bandwidth="10Gbps")
        net = build(variant, "resnet18", base, "fine")
        cn = compile_net(net)
        for bw in ("1Gbps", "100Gbps"):
            clu = base.replace(bandwidth=bw)
            fresh = build(variant, "resnet18", clu, "fine")
            got = rerate.rerated(cn, float(base.up_bw(0)), float(clu.up_bw(0)))
            assert got is not None
            _same_compiled(got, compile_net(fresh))
            assert {**net.meta, "cluster": clu} == fresh.meta


def test_study_rows_through_rerating_equal_predict(monkeypatch):
    rerate._TEMPLATES.clear()
    calls = []
    real = rerate.rerated
    monkeypatch.setattr(rerate, "rerated", lambda *a: calls.append(1) or real(*a))
    kw = dict(granularity="fine", steps=20, warmup=2, replications=2)
    clusters = [sgdnet.Cluster(workers=3, bandwidth=bw, compute_cv=0.1)
                for bw in ("10Gbps", "1Gbps", "100Gbps")]
    for variant in ("sync-ps", "allreduce"):
        for i, clu in enumerate(clusters):
            got = rerate.predict(variant, "resnet18", clu, seed=7 + i, **kw)
            want = sgdnet.predict(variant, "resnet18", clu, seed=7 + i, **kw)
            assert sgdnet.prediction.summarize(got) == sgdnet.prediction.summarize(want)
            for ra, rb in zip(got.result._raws, want.result._raws):
                np.testing.assert_array_equal(ra.step_times, rb.step_times)
                np.testing.assert_array_equal(ra.firings, rb.firings)
            assert got.cluster == clu and got.meta == want.meta
    assert len(calls) == 4  # two re-rated rows per variant


def test_what_is_not_rerated():
    clu = sgdnet.Cluster(workers=2)
    group = rerate._group
    assert group("sync-ps", "resnet18", clu, {"granularity": "fine", "steps": 5}) is not None
    assert group("sync-ps", "resnet18", clu, {"granularity": "coarse"}) is None
    assert group("sync-ps", "resnet18", clu, {"shards": 2}) is None  # a variant option
    assert group("sync-ps", "resnet18", clu.replace(uplink="1Gbps"), {}) is None
    assert group("sync-ps", sgdnet.models.load("resnet18"), clu, {}) is None
    assert group("no-such-variant", "resnet18", clu, {}) is None
