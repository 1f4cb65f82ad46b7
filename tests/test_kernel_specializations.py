"""The kernel compiles once (issues #11/#14: a cold compile is ~30 s): histograms or not, the
driver calls ``run_replication`` with the same argument types, and no jitted helper is compiled
for two argument types (a literal ``0`` argument is a numba type of its own)."""

from __future__ import annotations

import pytest
from conftest import ps_net
from numba.core.registry import CPUDispatcher

from sgdnet.engine import abi, driver, kernel
from sgdnet.net.compiled import compile_net


@pytest.mark.parametrize("mode", ["generic", "specialised"])
def test_histograms_use_the_same_specialization(mode, monkeypatch):
    monkeypatch.setenv("SGDNET_KERNEL", mode)
    cn = compile_net(ps_net(workers=2, layers=1))
    kw = dict(steps=5, warmup=1, max_events=10**6, zeno_limit=10**6, samples=False, trace_limit=0,
              parallel=False)
    without = driver.run(cn, [3], histograms=False, **kw)
    with_h = driver.run(cn, [3], histograms=True, **kw)
    used = (kernel.run_replication if mode == "generic" else
            kernel.specialise.kernel_for(kernel.specialise.features(abi.net_args(cn))))
    assert len(used.signatures) == 1
    assert with_h.wait_hist[0].sum() > 0 and without.wait_hist.shape[1] == 0


def test_helpers_compile_once():
    # meaningful on a cold cache (CI), where each helper called by the kernel is compiled; a
    # kernel loaded from the cache brings its helpers inlined and compiles none
    import importlib

    mods = [importlib.import_module(f"sgdnet.engine.kernel.{m}") for m in kernel.MODULES]
    twice = {f"{m.__name__}.{n}": d.signatures for m in mods for n, d in vars(m).items()
             if isinstance(d, CPUDispatcher) and len(d.overloads) > 1}
    assert not twice


def _long_calls_in_loops(path):
    """``(function, callee, number of arguments)`` of every call with more than 30 positional
    arguments made inside a loop of a function of ``path``."""
    import ast

    tree = ast.parse(path.read_text())
    found = []

    def visit(node, fn, in_loop):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name, False)
                continue
            loop = in_loop or isinstance(child, (ast.For, ast.While))
            if (loop and isinstance(child, ast.Call) and len(child.args) > 30
                    and isinstance(child.func, (ast.Name, ast.Attribute))):
                found.append((fn, ast.unparse(child.func), len(child.args)))
            visit(child, fn, loop)

    visit(tree, None, False)
    return found


def test_no_call_in_a_jitted_loop_packs_its_arguments_into_a_tuple():
    # CPython compiles a call of more than 30 arguments into CALL_FUNCTION_EX with a tuple of
    # them; numba then takes a reference to every array of that tuple and drops it after the
    # call, and in the kernel's control flow its reference-count pruning keeps both: two atomic
    # operations per array per call. One such call of the kernel's full flow
    # allocation (48 arguments) was 26 % of a fine sync-PS run of one worker (perf: samples in
    # NRT_incref / NRT_decref), so calls made per event stay at 30 arguments or fewer.
    from pathlib import Path

    import sgdnet.engine

    root = Path(sgdnet.engine.__file__).parent
    jitted = [p for p in sorted([*root.glob("*.py"), *root.glob("kernel/*.py")])
              if "@njit" in p.read_text() or "_inner" in p.read_text() or "@phase" in p.read_text()
              or "@inner" in p.read_text()]
    assert root / "kernel" / "loop.py" in jitted and len(jitted) >= 12
    assert ({str(p.relative_to(root)): _long_calls_in_loops(p) for p in jitted}
            == {str(p.relative_to(root)): [] for p in jitted})


def test_the_fast_paths_share_one_version_of_their_draw_loop():
    # both fast paths call round_durations (the event-graph one with its lane index, the FIFO one
    # with lane 0): a literal 0 there compiled it a second time on a cold cache (~1 s); on a
    # warm one their kernels come from the cache with it inlined and it compiles nothing
    from test_fastpath import random_eg
    from test_fastpath_fifo import ps_net as fifo_net

    from sgdnet import simulate
    from sgdnet.engine import fastpath

    kw = dict(steps=20, warmup=2, replications=1, seed=1, parallel=False)
    assert simulate(random_eg(1, det=False), engine="fast", **kw).engine == "fast"
    assert simulate(fifo_net(1, det=False), engine="fast", **kw).engine == "fast-fifo"
    assert len(fastpath.round_durations.overloads) <= 1
