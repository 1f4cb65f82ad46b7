"""The arcs' CSR arrays and the transitions' columns that ``Net.validate`` computes while it checks
every arc are handed to the compile of the unchanged net (one pass over the transitions and arcs
instead of two); an edit after the validation, a copy or a pickle never carries stale arrays
over."""

from __future__ import annotations

import pickle

import numpy as np
from conftest import ps_net, ring

from sgdnet.net.compiled import CompiledNet
from sgdnet.net.problems import COLUMNS, arcs_csr

FIELDS = ("in_ptr", "in_place", "in_w", "out_ptr", "out_place", "out_w", "inh_ptr", "inh_place",
          "inh_thr")


def _fresh(net):
    """The arrays computed from the net's arcs directly (no kept arrays)."""
    pidx = {p: i for i, p in enumerate(net.places)}
    T = list(net.transitions.values())
    out = []
    for kind in ("inputs", "outputs", "inhibitors"):
        out.extend(arcs_csr([getattr(t, kind) for t in T], pidx))
    return out


def test_validate_keeps_the_arrays_the_compile_would_build():
    net = ps_net(workers=3, layers=2)
    net.transition("inhibited", 1.0, inputs={"w0/param0": 1}, outputs={"w0/param0": 1},
                   inhibitors={"w1/param0": 2})
    net.validate()
    kept = net.__dict__["_arcs_at"][1]
    assert len(kept) == 4
    for a, b in zip([x for c in kept[:3] for x in c], _fresh(net), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # and every transition's fields the compile reads, as columns, in COLUMNS' order
    T = list(net.transitions.values())
    assert kept[3] == [tuple(getattr(t, f) for t in T) for f in COLUMNS]
    assert all(a is b for a, b in zip(kept[3][COLUMNS.index("tags")], (t.tags for t in T)))
    cn = CompiledNet(net, "k")
    assert "_arcs_at" not in net.__dict__  # handed over, not kept twice
    assert cn.inh_thr.tolist() == [2] and cn.inh_place[0] == list(net.places).index("w1/param0")
    for f, b in zip(FIELDS, _fresh(net)):
        assert np.array_equal(getattr(cn, f), b)


def test_an_edit_after_validation_is_compiled_not_the_kept_arrays():
    net = ring([1.0, 2.0, 3.0], [1, 0, 0])
    net.validate()
    net.transitions["t1"].inputs["p1"] = 2  # a tracked edit: the net's stamp changes
    net.places["p1"].tokens = 2
    assert net._take_arcs() is None  # stale: not handed over
    net.validate()
    net.transitions["t1"].inputs["p1"] = 3
    cn = CompiledNet(net, "k")  # validates again, so it compiles the arcs as they are now
    assert cn.in_w.tolist() == [1, 3, 1]


def test_copies_and_pickles_carry_no_arrays():
    net = ring([1.0, 2.0], [1, 0])
    net.validate()
    assert "_arcs_at" in net.__dict__
    assert "_arcs_at" not in pickle.loads(pickle.dumps(net)).__dict__
    assert "_arcs_at" not in net.copy().__dict__
