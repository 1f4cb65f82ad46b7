"""The kernel compiles once (issues #11/#14: a cold compile is ~30 s): histograms or not, the
driver calls ``run_replication`` with the same argument types, and no jitted helper is compiled
for two argument types (a literal ``0`` argument is a numba type of its own)."""

from __future__ import annotations

from conftest import ps_net
from numba.core.registry import CPUDispatcher

from sgdnet.engine import driver, kernel
from sgdnet.net.compiled import compile_net


def test_histograms_use_the_same_specialization():
    cn = compile_net(ps_net(workers=2, layers=1))
    kw = dict(steps=5, warmup=1, max_events=10**6, zeno_limit=10**6, samples=False, trace_limit=0,
              parallel=False)
    without = driver.run(cn, [3], histograms=False, **kw)
    with_h = driver.run(cn, [3], histograms=True, **kw)
    assert len(kernel.run_replication.signatures) == 1
    assert with_h.wait_hist[0].sum() > 0 and without.wait_hist.shape[1] == 0


def test_helpers_compile_once():
    # meaningful on a cold cache (CI), where each helper called by the kernel is compiled; a
    # kernel loaded from the cache brings its helpers inlined and compiles none
    twice = {n: d.signatures for n, d in vars(kernel).items()
             if isinstance(d, CPUDispatcher) and len(d.overloads) > 1}
    assert not twice
