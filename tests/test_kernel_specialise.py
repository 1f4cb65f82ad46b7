"""Specialised kernels (issue #41): the loop compiled for the features a net uses plays the
generic loop's trajectory bit for bit, because its constants only remove what the net never
executes: the flags :func:`sgdnet.engine.kernel.specialise.flags` computes in Python are the very
flags the kernel's tables hold (``tables.fill``), for every variant's nets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ps_net
from numba import njit

from sgdnet import simulate, variants
from sgdnet.engine import abi
from sgdnet.engine.kernel import specialise, tables
from sgdnet.engine.layout import N_TD, N_TF, N_TS, TS_FL
from sgdnet.net.compiled import compile_net


@njit
def _fill_flags(servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate, rs_ptr, mod_of,
                psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls, rank, d_code,
                d_par, jn_link):
    nT = servers.size
    TS = np.zeros((nT, N_TS), dtype=np.int64)
    TD = np.zeros((nT, N_TD), dtype=np.int64)
    TF = np.zeros((nT, N_TF), dtype=np.float64)
    rq = np.zeros(nT, dtype=np.int64)
    tables.fill(TS, TD, TF, servers, in_ptr, in_w, out_ptr, inh_ptr, guard, g_kind, mem_gate,
                rs_ptr, mod_of, psres_ptr, psres_idx, r_disc, qres_ptr, cnt_ptr, is_step, sw_w, pcls,
                rank, d_code, d_par, rq, rq, jn_link)
    return TS[:, TS_FL].copy()


def _kernel_flags(a):
    names = ("servers", "in_ptr", "in_w", "out_ptr", "inh_ptr", "guard", "g_kind", "mem_gate",
             "rs_ptr", "mod_of", "psres_ptr", "psres_idx", "r_disc", "qres_ptr", "cnt_ptr",
             "is_step", "sw_w", "pcls", "rank", "d_code", "d_par", "jn_link")
    return _fill_flags(*(a[n] for n in names))


def _nets():
    for name in variants.names():
        for g in ("fine", "coarse"):
            try:
                yield f"{name}-{g}", variants.get(name).build(
                    "resnet50", {"workers": 3, "compute_cv": 0.1, "bandwidth": "10Gbps"}, g)
            except Exception:  # noqa: BLE001 - a variant without that granularity
                continue
    yield "ps_net", ps_net(workers=3)
    from sgdnet import Cluster  # join stages (F_BACKLOG) before the PS's shared messages
    yield "sync-ps-join", variants.get("sync-ps").build(
        "resnet50", Cluster(workers=3, bandwidth="10Gbps", tcp_queue=0.004), "fine")


@pytest.mark.parametrize("label,net", list(_nets()), ids=lambda x: x if isinstance(x, str) else "")
def test_python_flags_are_the_kernels(label, net):
    a = abi.net_args(compile_net(net))
    assert np.array_equal(specialise.flags(a), _kernel_flags(a)), label


def test_a_specialised_kernel_plays_the_generic_trajectory(monkeypatch):
    net = variants.get("dssp").build("resnet50", {"workers": 3, "compute_cv": 0.1,
                                                  "bandwidth": "10Gbps"}, "fine")
    runs = {}
    for mode in ("generic", "specialised"):
        monkeypatch.setenv("SGDNET_KERNEL", mode)
        runs[mode] = simulate(net, steps=40, warmup=5, replications=2, seed=3, parallel=False,
                              engine="generic")
    g, s = runs["generic"], runs["specialised"]
    for f in ("step_times", "step_trans", "firings", "busy", "wait_sum"):
        for rg, rs in zip(g._raws, s._raws):
            assert np.array_equal(getattr(rg, f), getattr(rs, f)), f
    assert list(g.events) == list(s.events)
