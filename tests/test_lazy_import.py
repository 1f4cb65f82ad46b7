"""Issue #41: ``import sgdnet`` imports no subsystem (PEP 562 lazy namespaces), the public
names still resolve as eager imports made them, and a warm ``sgdnet predict`` imports only what
it runs (no numba before the engine, no other variant, no time-to-accuracy, no PNML, no cluster
files)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=timeout, env=ENV, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def test_import_sgdnet_imports_no_subsystem_and_a_public_name_then_works():
    code = (
        "import sys, sgdnet\n"
        "heavy = {'numpy', 'numba', 'networkx', 'matplotlib', 'yaml'}\n"
        "assert not heavy & set(sys.modules), sorted(heavy & set(sys.modules))\n"
        "assert sorted(m for m in sys.modules if m.startswith('sgdnet.')) == "
        "['sgdnet._lazy', 'sgdnet._version'], sorted(m for m in sys.modules if 'sgdnet' in m)\n"
        "from sgdnet import Cluster, SgdnetError\n"
        "assert Cluster(workers=2).workers == 2 and issubclass(SgdnetError, Exception)\n"
        "assert 'numba' not in sys.modules and 'sgdnet.variants' not in sys.modules\n"
        "from sgdnet.analysis import batch_means, mean_ci\n"  # statistics, no max-plus
        "assert 'sgdnet.analysis.maxplus' not in sys.modules and 'numba' not in sys.modules\n"
        "assert callable(sgdnet.simulate) and sgdnet.engine.simulate is sgdnet.simulate\n"
        "print('ok')\n")
    assert _python(code).stdout.strip() == "ok"


def test_every_public_name_resolves_and_star_import_binds_all():
    import sgdnet

    for name in sgdnet.__all__:
        value = getattr(sgdnet, name)
        assert value is not None, name
        if isinstance(value, types.ModuleType):
            assert value.__name__ == f"sgdnet.{name}"
        else:  # defined in one of sgdnet's own modules (or its version string)
            assert name == "__version__" or value.__module__.startswith("sgdnet."), name
    assert set(sgdnet.__all__) <= set(dir(sgdnet))
    ns: dict = {}
    exec("from sgdnet import *", ns)
    assert set(ns) - {"__builtins__"} == set(sgdnet.__all__)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        sgdnet.not_a_name  # noqa: B018


def test_choose_stays_the_function_after_its_module_is_imported():
    # sgdnet/choose.py defines sgdnet.choose: importing the module must not rebind the name
    code = ("import importlib, sgdnet\n"
            "importlib.import_module('sgdnet.choose')\n"
            "import sgdnet.choose\n"
            "assert callable(sgdnet.choose) and sgdnet.choose.__name__ == 'choose', sgdnet.choose\n"
            "assert sgdnet.choose is sys.modules['sgdnet.choose'].choose\n"
            "print('ok')\n")
    assert _python("import sys\n" + code).stdout.strip() == "ok"


def test_a_warm_cli_prediction_imports_only_what_it_runs(tmp_path):
    # the command as a user runs it (python -m: main() reads sys.argv), twice on one net cache:
    # the second run loads the net; neither imports the other variants' builders, the
    # time-to-accuracy package, PNML or cluster files, and both print the same table
    argv = ["predict", "--model", "resnet50", "--variant", "sync-ps", "--workers", "2",
            "--bandwidth", "10Gbps", "--granularity", "coarse", "--steps", "5", "--warmup",
            "1", "--replications", "1", "--no-progress"]
    code = ("import runpy, sys, atexit\n"
            "def report():\n"
            "    mods = sorted(m for m in sys.modules if m.startswith(('sgdnet.variants.', "
            "'sgdnet.accuracy', 'sgdnet.net.pnml', 'sgdnet.workload.cluster_file', "
            "'sgdnet.viz', 'sgdnet.study', 'sgdnet.testbed')))\n"
            "    print('MODULES', ' '.join(mods), file=sys.stderr)\n"
            "atexit.register(report)\n"
            "sys.argv = ['sgdnet'] + sys.argv[1:]\n"
            "runpy.run_module('sgdnet.cli', run_name='__main__')\n")
    env = {**ENV, "SGDNET_CACHE_DIR": str(tmp_path)}
    outs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                           timeout=600, env=env, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        outs.append(p)
    mods = [ln.split()[1:] for ln in outs[1].stderr.splitlines() if ln.startswith("MODULES")]
    assert mods, outs[1].stderr[-2000:]
    loaded = set(mods[0])
    others = {m for m in loaded if m.rsplit(".", 1)[-1] in
              {"ssp", "allreduce", "async_ps", "fsdp", "pipeline", "zero", "cocod", "backup",
               "local_sgd", "pipe_sgd", "dssp"}}
    assert "sgdnet.variants.sync_ps" in loaded and not others, sorted(loaded)
    assert not {m for m in loaded if m.startswith(("sgdnet.accuracy", "sgdnet.net.pnml",
                                                   "sgdnet.workload.cluster_file",
                                                   "sgdnet.viz", "sgdnet.study",
                                                   "sgdnet.testbed"))}, sorted(loaded)
    tables = [[ln for ln in p.stdout.splitlines() if not ln.startswith("computed in")]
              for p in outs]
    assert tables[0] == tables[1] and any(ln.startswith("workers") for ln in tables[0])


def test_the_numba_cache_check_rereads_a_changed_file(tmp_path):
    # a data file found complete is recorded (size, time, inode) and not read again while
    # they match; a truncated one (a new size) is read, and found damaged, all the same
    from sgdnet.engine import jitcache as jc

    data = pickle.dumps(list(range(1000)))
    f = tmp_path / "m.f-1.py311.1.nbc"
    f.write_bytes(data)
    old = os.stat(f).st_mtime - 10 * jc.CHECKED_AGE_S
    os.utime(f, (old, old))
    assert jc._data_problem(str(f)) is None
    assert f.name in jc._checked_in(str(tmp_path))
    jc._save_checked()
    assert (tmp_path / jc.CHECKED).is_file()
    f.write_bytes(data[: len(data) // 2])
    assert "not a complete pickle" in jc._data_problem(str(f))
    fresh = tmp_path / "m.g-1.py311.1.nbc"  # just written: not recorded (the clock's tick)
    fresh.write_bytes(data)
    assert jc._data_problem(str(fresh)) is None
    assert fresh.name not in jc._checked_in(str(tmp_path))
