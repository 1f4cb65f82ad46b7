"""The parameter-server exchange built in bulk (issue #14): a :class:`TransferBatch` builds the
very net the checked builder methods build.

Each case is built twice: as the variants build it (pushes, updates and pulls collected by
:meth:`PSExchange.bulk` and added with one :meth:`Net.insert`), and with the batch's methods
replaced by the checked ones they stand for (:meth:`Fabric.transfer`, :meth:`Net.place`,
:meth:`Net.transition`: the code before the batch). The nets must agree element by element, in
declaration order, by structural key, and in a same-seed simulation, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PS_ALPHA, PS_B, ps_cases, ps_topology
from test_bulk_build import _elements

from sgdnet import Cluster, simulate
from sgdnet.errors import NetError, VariantError
from sgdnet.net import Net
from sgdnet.net.compiled import structural_key
from sgdnet.variants import get
from sgdnet.variants.collectives import PSExchange
from sgdnet.variants.fabric import Fabric
from sgdnet.variants.fabric_bulk import TransferBatch

BASE = dict(workers=4, bandwidth=PS_B, latency=PS_ALPHA, ps_shards=2)
CPU = dict(send_s_per_byte=2e-11, recv_s_per_byte=3e-11, reduce_s_per_byte=1e-11)
NOISE = dict(comm_cv=0.2, compute_cv=0.1, share_cv_in=0.3, share_cv_out=0.15)

#: (id, variant, cluster keywords, granularity, options)
CASES = [
    ("plain", "sync-ps", BASE, "fine", {}),
    ("no-latency", "sync-ps", {**BASE, "latency": 0.0}, "fine", {}),
    ("cpu-costs", "sync-ps", {**BASE, **CPU}, "fine", {}),
    ("cpu-costs-no-latency", "sync-ps", {**BASE, **CPU, "latency": 0.0}, "fine", {}),
    ("noise", "sync-ps", {**BASE, **NOISE}, "fine", {}),
    ("noise-cpu", "async-ps", {**BASE, **NOISE, **CPU}, "fine", {}),
    ("colocated", "sync-ps", {**BASE, "ps_placement": "colocated", **CPU}, "fine", {}),
    ("colocated-3", "sync-ps", {**BASE, **NOISE}, "fine",
     {"placement": "colocated", "shards": 3}),
    ("one-worker-colocated", "sync-ps", {**BASE, "workers": 2, **NOISE}, "fine",
     {"placement": "colocated", "shards": 1}),
    ("shards-5", "sync-ps", {**BASE, "workers": 3, "incast": (1.0, 0.9, 0.8)}, "fine",
     {"shards": 5}),
    ("fifo", "sync-ps", {**BASE, **NOISE}, "fine", {"discipline": "fifo"}),
    ("fifo-compute", "sync-ps", {**BASE, "comm_uses_compute": True}, "fine",
     {"discipline": "fifo"}),
    ("ps-discipline", "async-ps", {**BASE, "latency": 0.0}, "fine", {"discipline": "ps"}),
    ("priority", "sync-ps", {**BASE, **NOISE}, "fine", {"discipline": "fifo", "priority": True}),
    ("partition", "sync-ps", {**BASE, **CPU}, "fine", {"partition_bytes": "4MB"}),
    ("tensor-granularity", "sync-ps", BASE, "fine",
     {"comm_granularity": "tensor", "max_layers": 6}),
    ("ssp", "ssp", {**BASE, **NOISE}, "fine", {"staleness": 1}),
    ("ssp-places", "ssp", BASE, "fine", {"staleness": 2, "impl": "places"}),
    ("dssp", "dssp", {**BASE, **CPU}, "fine", {}),
    ("coarse-colocated", "sync-ps", {**BASE, "ps_placement": "colocated"}, "coarse", {}),
    ("coarse-fifo", "async-ps", BASE, "coarse", {"discipline": "fifo"}),
    ("coarse+", "sync-ps", {**BASE, **NOISE}, "coarse+", {}),
    ("coarse+async", "async-ps", {**BASE, "ps_placement": "colocated"}, "coarse+", {}),
    ("join-queue", "sync-ps", {**BASE, **CPU, "tcp_queue": 0.004, "tcp_queue_model": "join"},
     "fine", {}),
    ("join-queue-async-colocated", "async-ps",
     {**BASE, **NOISE, "tcp_queue": 0.004, "tcp_queue_model": "join",
      "ps_placement": "colocated"}, "fine", {}),
    ("ack-share", "sync-ps", {**BASE, **CPU, "tcp_ack_share": (1.0, 0.9, 0.75)}, "fine", {}),
    ("ack-share-async-join", "async-ps",
     {**BASE, **NOISE, "tcp_ack_share": (0.8,), "tcp_queue": 0.004}, "fine", {}),
    ("backup", "backup", {**BASE, **NOISE}, "fine", {}),
    ("backup-coarse-colocated", "backup", {**BASE, "ps_placement": "colocated", **CPU},
     "coarse", {}),
    ("local-sgd-ps", "local-sgd", {**BASE, **CPU}, "fine", {"sync": "ps"}),
    ("local-sgd-ps-colocated", "local-sgd", {**BASE, **NOISE}, "coarse",
     {"sync": "ps", "placement": "colocated"}),
    ("topology-colocated", "sync-ps",
     dict(workers=8, latency=15e-6, ps_shards=2, topology=ps_topology(), **CPU), "fine",
     {"placement": "colocated"}),
] + [(f"ps-cases-{k}", "sync-ps", kw, "fine", {})
     for k, kw in ps_cases().items()] + [
    (f"ps-cases-{k}-async", "async-ps", ps_cases()[k], "fine", {})
    for k in ("plain", "topology", "speeds")]


def _checked_batches(m: pytest.MonkeyPatch) -> None:
    """Make every batch call the checked builder method it stands for, at once, and every
    other bulk insert refuse (so the builders go their checked ways: the code before)."""
    m.setattr(Net, "insert", lambda self, places, transitions: False)
    m.setattr(TransferBatch, "transfer", lambda self, *a, **k: self.fabric.transfer(*a, **k))
    m.setattr(TransferBatch, "place", lambda self, *a, **k: self.net.place(*a, **k))
    m.setattr(TransferBatch, "transition", lambda self, *a, **k: self.net.transition(*a, **k))


def _both(variant: str, cluster: Cluster, granularity: str, opts: dict,
          monkeypatch: pytest.MonkeyPatch) -> tuple[Net, Net]:
    inserts = []
    real = Net.insert
    with monkeypatch.context() as m:  # the bulk net, and proof that the batch was used
        m.setattr(Net, "insert", lambda self, p, t: inserts.extend(x.name for x in t)
                  or real(self, p, t))
        bulk = get(variant).build("resnet18", cluster, granularity, **opts)
    exchanged = [x for x in inserts if ".push." in x or ".pull." in x]
    assert exchanged or not any(".push." in x for x in bulk.transitions), \
        "the exchange was not added at once"
    with monkeypatch.context() as m:
        _checked_batches(m)
        checked = get(variant).build("resnet18", cluster, granularity, **opts)
    return bulk, checked


def _same_simulation(a: Net, b: Net) -> None:
    ra, rb = (simulate(x, steps=30, warmup=5, replications=2, seed=7) for x in (a, b))
    for f in ("t0", "t1", "events", "_firings", "_busy", "_wait_sum", "_token_time"):
        assert np.array_equal(getattr(ra, f), getattr(rb, f)), f
    assert np.array_equal(ra.step_times(), rb.step_times())


def _differences(a: Net, b: Net) -> list[str]:
    """What differs between two nets: elements (by value, in declaration order), the order of
    every element's tags, the structural key, the meta keys."""
    out = []
    if _elements(a) != _elements(b):
        out.append("elements")
    for table in ("places", "resources", "transitions"):
        if ([(n, list(e.tags)) for n, e in getattr(a, table).items()]
                != [(n, list(e.tags)) for n, e in getattr(b, table).items()]):
            out.append(f"{table}' tag order")
    if structural_key(a) != structural_key(b):
        out.append("structural key")
    if a.meta.keys() != b.meta.keys():
        out.append("meta")
    return out


@pytest.mark.parametrize("variant,kw,granularity,opts", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bulk_and_checked_ps_nets_are_the_same(variant, kw, granularity, opts, monkeypatch):
    cluster = Cluster(**kw)
    bulk, checked = _both(variant, cluster, granularity, opts, monkeypatch)
    assert _differences(bulk, checked) == []


SIMULATED = ["plain", "cpu-costs", "noise-cpu", "colocated-3", "fifo", "priority", "ssp",
             "dssp", "backup", "local-sgd-ps", "ps-cases-topology", "coarse+", "join-queue",
             "join-queue-async-colocated", "ack-share", "ack-share-async-join"]


@pytest.mark.parametrize("case", SIMULATED)
def test_bulk_and_checked_ps_nets_simulate_alike(case, monkeypatch):
    _, variant, kw, granularity, opts = next(c for c in CASES if c[0] == case)
    bulk, checked = _both(variant, Cluster(**{**kw, "workers": min(kw["workers"], 4)})
                          if "topology" not in kw else Cluster(**kw), granularity, opts,
                          monkeypatch)
    _same_simulation(bulk, checked)


def test_the_comparison_sees_a_swapped_order(monkeypatch):
    """The comparison fails when the batch adds two transitions (or two places) in the wrong
    order, a transition's tags in another order, or another priority."""
    cluster = Cluster(**{**BASE, **CPU})
    real = Net.insert
    with monkeypatch.context() as m:
        _checked_batches(m)
        checked = get("sync-ps").build("resnet18", cluster, "fine")

    def swap(xs: list, t: list) -> list:  # in the exchange's batch only
        return [xs[1], xs[0], *xs[2:]] if any(".push." in x.name for x in t) else xs

    patches = {"transitions": lambda self, p, t: real(self, p, swap(t, t)),
               "places": lambda self, p, t: real(self, swap(p, t), t)}
    for what, patch in patches.items():
        with monkeypatch.context() as m:
            m.setattr(Net, "insert", patch)
            bulk = get("sync-ps").build("resnet18", cluster, "fine")
        assert "elements" in _differences(bulk, checked), what
    bulk = get("sync-ps").build("resnet18", cluster, "fine")
    assert _differences(bulk, checked) == []
    t = next(t for t in bulk.transitions.values() if t.tags.get("direction") == "push")
    t.tags = dict(reversed(list(t.tags.items())))  # same tags, another order
    assert "transitions' tag order" in _differences(bulk, checked)
    assert "elements" not in _differences(bulk, checked)
    t.priority += 1
    assert "elements" in _differences(bulk, checked)


def _fabric(**kw) -> tuple[Net, Fabric, PSExchange]:
    net = Net()
    fab = Fabric(net, Cluster(**{**BASE, **kw}))
    return net, fab, PSExchange(fab)


def test_a_taken_name_is_reported_by_the_checked_builder():
    net, fab, ex = _fabric()
    net.place("ps0.from1")
    net.place("w1.push.x.wire")
    with pytest.raises(NetError, match="'w1.push.x.wire' is already used"):
        with ex.bulk():
            ex.push(0, 0, 1e6, "x", chunk=0, inputs=["g0"], outputs=["ps0.from0"])
            ex.push(1, 0, 1e6, "x", chunk=0, inputs=["g1"], outputs=["ps0.from1"])
    # two transfers of one name in one batch: the second one's name is reported
    net, fab, ex = _fabric()
    with pytest.raises(NetError, match="'w0.push.x.wire' is already used"):
        with ex.bulk():
            for _ in range(2):
                ex.push(0, 0, 1e6, "x", chunk=0, inputs=["g0"], outputs=["ps0.from0"])


def test_what_the_batch_does_not_prepare_goes_the_checked_way_in_order():
    net, fab, _ = _fabric()
    ref_net, ref_fab, _ = _fabric()
    for f, add in ((fab, TransferBatch(fab)), (ref_fab, ref_fab)):
        tr = add.transfer
        p = (add.place if isinstance(add, TransferBatch) else f.net.place)("a", 1, worker=0)
        tr("t1", 1e6, ("worker", 0), ("ps", 0), inputs=["a"], outputs=["b"])
        tr("t2", 1e6, ("worker", 1), ("ps", 1), inputs=[p], outputs=["c"])  # a node: checked
        tr("t3", 2e6, ("worker", 0), ("ps", 1), inputs=["c"], outputs=["d"], latency=0.0)
        if isinstance(add, TransferBatch):
            add.flush()
    assert _elements(net) == _elements(ref_net)
    net, fab, _ = _fabric()
    b = TransferBatch(fab)
    b.transfer("t1", 1e6, ("worker", 0), ("ps", 0), inputs=["a"], outputs=["b"])
    with pytest.raises(VariantError, match="same host"):
        b.transfer("t2", 1e6, ("worker", 0), ("worker", 0), inputs=["a"], outputs=["b"])
    assert "t1" in net.transitions  # flushed before the checked call
    with pytest.raises(VariantError, match="share='sideways'"):
        b.transfer("t3", 1e6, ("worker", 0), ("ps", 0), inputs=["a"], outputs=["b"],
                   share="sideways")


def test_an_error_inside_the_block_adds_nothing_pending():
    net, fab, ex = _fabric()
    with pytest.raises(RuntimeError):
        with ex.bulk():
            ex.push(0, 0, 1e6, "x", chunk=0, inputs=["g0"], outputs=["ps0.from0"])
            raise RuntimeError("stop")
    assert not net.transitions
    ex.push(0, 0, 1e6, "x", chunk=0, inputs=["g0"], outputs=["ps0.from0"])  # checked again
    assert "w0.push.x" in net.transitions
