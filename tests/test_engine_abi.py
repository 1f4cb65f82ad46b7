"""The kernel's interface table (sgdnet.engine.abi) against the kernel itself: the argument
order is the kernel's signature, every CompiledNet field it names exists, outputs are shaped and
typed by the table, and unpack() reads back what the kernel wrote."""

from __future__ import annotations

import inspect

import numpy as np
from conftest import loop

from sgdnet import simulate
from sgdnet.engine import abi, driver, kernel
from sgdnet.net.compiled import compile_net


def test_signature_is_the_kernels():
    names = tuple(inspect.signature(kernel.run_replication.py_func).parameters)
    assert abi.SIGNATURE == names
    assert len(set(abi.SIGNATURE)) == len(abi.SIGNATURE)


def test_codes_and_slots_are_distinct_ints_the_kernel_folds():
    codes = [abi.ST_OK, abi.ST_DEADLOCK, abi.ST_BUDGET, abi.ST_ZENO, abi.ST_GROW, abi.ST_HALTED]
    assert len(set(codes)) == len(codes) and all(type(c) is int for c in codes)
    oi = [abi.OI_STATUS, abi.OI_EVENTS, abi.OI_NSTEPS, abi.OI_NTRACE, abi.OI_NGLOG, abi.OI_NREC, abi.OI_GROW,
          abi.OI_PSTART, abi.OI_PERIOD, abi.OI_PSKIP, abi.OI_PWSKIP]
    assert sorted(oi) == list(range(abi.N_OI))
    assert sorted([abi.OF_T0, abi.OF_T1, abi.OF_NOW, abi.OF_CYCLE]) == list(range(abi.N_OF))
    grow = [abi.GROW_SLOTS, abi.GROW_REQUESTS, abi.GROW_HOLDERS]
    assert all(g & (g - 1) == 0 for g in grow) and len(set(grow)) == 3  # bits
    from sgdnet.engine.kernel import loop, statistics

    assert loop.abi is abi  # the loop reads abi.ST_HALTED, abi.ST_GROW, ... through the module
    for mod, name in ((statistics, "OI_EVENTS"), (statistics, "OF_T1")):
        assert getattr(mod, name) is getattr(abi, name)  # the kernel uses the same objects


def test_net_args_name_compiled_arrays():
    from conftest import exotic_net

    cn = compile_net(exotic_net())
    for p, a in abi.net_args(cn).items():
        assert isinstance(a, np.ndarray) and not a.flags.writeable, p


def test_outputs_follow_the_table_and_unpack_reads_them():
    cn = compile_net(loop())
    kw = dict(steps=7, warmup=2, max_events=10**6, zeno_limit=10**6, samples=True, trace_limit=5,
              parallel=False)
    for hist in (False, True):
        out = driver.run(cn, [3, 4], histograms=hist, **kw)
        for _, attr, dtype, _shape in abi.OUTPUTS + abi.STAT_OUTPUTS + abi.HIST_OUTPUTS:
            a = getattr(out, attr)
            assert a.dtype == dtype and a.shape[0] == 2, attr
        assert out.step_t.shape == (2, 7) and out.tr_t.shape == (2, 5)
        assert out.wait_hist.shape[1] == (cn.n_resources if hist else 0)
        raw = abi.unpack(out, 1, samples=True)
        # a deterministic 1 s loop: steps 3..9 complete at t = 3..9, 5 traced firings, 9 events
        assert raw.t0 == 2.0 and raw.t1 == 9.0 and raw.events == 9
        np.testing.assert_array_equal(raw.step_times, np.arange(3.0, 10.0))
        np.testing.assert_array_equal(raw.trace_end, np.arange(1.0, 6.0))
        assert (raw.wait_hist is not None) == hist
    res = simulate(cn, steps=7, warmup=2, replications=2, seed=0, engine="generic")
    assert res.sim_time.tolist() == [7.0, 7.0]
