"""Issue #17: a damaged numba cache (truncated, empty or garbage .nbi/.nbc) is detected, reported
once and rebuilt, instead of an UnpicklingError/EOFError on every call forever.

The cases run in subprocesses with a NUMBA_CACHE_DIR of the module's own, on one-line
njit(cache=True) modules (each compiles in well under a second), so the kernel's own cache is
never touched; a last test checks that simulate() runs the same check on the kernel.

Each damage case has a module of its own (same source, its own cache files), so the seven cases
run in one process each time (build, heal, run again) instead of fifteen processes that each
import numba and sgdnet: a case's damage is confined to its own files, and each case's outcome
(compile flag, result, the warnings it raised, an exception) is recorded and checked on its own.
The healthy cache is checked in a process of its own, whose whole stderr must stay empty."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: one xdist worker runs the whole module (``--dist loadgroup``, setup.cfg): its module-scoped
#: processes would otherwise be started again on each worker that gets one of its tests
pytestmark = pytest.mark.xdist_group("jit_cache")

REPO = Path(__file__).resolve().parents[1]

MODULE = """\
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1
"""

#: imports each module named on the command line, checks its cache and calls it, in isolation
#: (warnings recorded per module, an exception caught per module): one JSON line per module
BATCH = """\
import json, sys, traceback, warnings
from sgdnet.engine.jitcache import check_cache
for name in sys.argv[1:]:
    rec = {"case": name, "compile": None, "result": None, "error": None}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            mod = __import__(name)
            rec["compile"] = check_cache(mod)
            rec["result"] = mod.plus_one(41)
        except Exception:
            rec["error"] = traceback.format_exc()
    rec["warnings"] = [f"{w.category.__name__}: {w.message}" for w in seen]
    print(json.dumps(rec), flush=True)
"""

CASES = [("nbi", "truncated"), ("nbi", "empty"), ("nbi", "garbage"),
         ("nbc", "truncated"), ("nbc", "empty"), ("nbc", "garbage"), ("nbc", "one-byte")]
HEALTHY = "jc_healthy"


def _name(which: str, how: str) -> str:
    """The module of one damage case."""
    return f"jc_{which}_{how.replace('-', '_')}"


def _run(tmp: Path, names: list[str]) -> tuple[dict[str, dict], subprocess.CompletedProcess]:
    """Run :data:`BATCH` on the modules ``names`` of ``tmp`` in one fresh process.

    Parameters
    ----------
    tmp : Path
        The directory of the modules; its ``cache`` subdirectory is the NUMBA_CACHE_DIR.
    names : list of str
        Module names, checked and called in this order.

    Returns
    -------
    (dict, CompletedProcess)
        Each module's record by name (``compile``, ``result``, ``warnings``, ``error``), and the
        process.
    """
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "cache"),
           "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}"}
    p = subprocess.run([sys.executable, "-c", BATCH, *names], capture_output=True, text=True,
                       timeout=240, env=env, cwd=tmp)
    recs = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            recs[rec["case"]] = rec
    return recs, p


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbage": b"\x80\x05not a pickle at all" * 3,
                      "one-byte": data[:1]}[how])


def _files(tmp: Path, name: str, suffix: str) -> list[Path]:
    """The cache files of module ``name`` with this suffix (``nbi`` or ``nbc``)."""
    return sorted((tmp / "cache").rglob(f"{name}.*.{suffix}"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A directory with the modules and their freshly built caches (one process compiles them
    all), and a function restoring those pristine caches (the modules' paths and mtimes, which
    numba's index checks, never change)."""
    tmp = tmp_path_factory.mktemp("jc")
    names = [_name(w, h) for w, h in CASES] + [HEALTHY]
    for name in names:
        (tmp / f"{name}.py").write_text(MODULE)
    first, p = _run(tmp, names)
    assert p.returncode == 0 and set(first) == set(names), p.stderr
    for name in names:
        assert first[name]["result"] == 42 and first[name]["compile"] is True, first[name]
        assert _files(tmp, name, "nbi") and _files(tmp, name, "nbc"), \
            f"numba wrote no cache files for {name}"
    pristine = {p: p.read_bytes() for p in (tmp / "cache").rglob("*") if p.is_file()}

    def restore() -> Path:
        shutil.rmtree(tmp / "cache")
        for p, data in pristine.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return tmp

    return restore


@pytest.fixture(scope="module")
def healed(built):
    """Every case's damage applied to its own module's files, then two processes: the first
    checks and calls every module (``healed``), the second does it again (``again``)."""
    tmp = built()
    damaged = {}
    for which, how in CASES:
        name = _name(which, how)
        files = _files(tmp, name, which)
        for f in files:
            _damage(f, how)
        damaged[name] = files
    names = list(damaged)
    healed, p1 = _run(tmp, names)
    again, p2 = _run(tmp, names)
    return {"damaged": damaged, "healed": healed, "again": again, "stderr": (p1.stderr, p2.stderr)}


@pytest.mark.parametrize("which, how", CASES)
def test_damaged_cache_is_detected_reported_once_and_rebuilt(healed, which, how):
    name = _name(which, how)
    assert healed["damaged"][name], "numba wrote no cache files"
    rec = healed["healed"].get(name)
    assert rec is not None, healed["stderr"][0]
    assert rec["error"] is None, rec["error"]
    assert rec["result"] == 42 and rec["compile"] is True
    warned = [w for w in rec["warnings"] if w.startswith("JitCacheWarning")]
    assert len(warned) == 1 and "damaged" in warned[0], rec["warnings"]
    again = healed["again"].get(name)  # rebuilt: no warning, no compile
    assert again is not None, healed["stderr"][1]
    assert again["error"] is None, again["error"]
    assert again["result"] == 42 and again["compile"] is False
    assert not [w for w in again["warnings"] if w.startswith("JitCacheWarning")]


def test_healthy_cache_is_left_alone(built):
    tmp = built()
    before = {p: p.stat().st_mtime_ns for p in (tmp / "cache").rglob("*.nb*")}
    recs, r = _run(tmp, [HEALTHY])
    assert r.returncode == 0 and recs[HEALTHY]["compile"] is False
    assert recs[HEALTHY]["result"] == 42 and not recs[HEALTHY]["warnings"]
    assert r.stderr == ""
    assert before == {p: p.stat().st_mtime_ns for p in (tmp / "cache").rglob("*.nb*")}


def test_simulate_checks_the_kernel_cache():
    src = (REPO / "sgdnet" / "engine" / "api.py").read_text()
    # the check is a call, before the driver runs: behaviour is covered above on a small module
    assert src.index("check_cache()") < src.index("out = call_healing(run,")


def test_a_changed_dependency_recompiles_instead_of_loading_stale_code(tmp_path):
    # numba keys a cache by the function's own file: a constant folded from another module
    # would be loaded stale after that module changed; JIT_DEPENDS makes check_cache see it
    (tmp_path / "jc_const.py").write_text("K = 1\n")
    (tmp_path / "jc_dep.py").write_text(
        'from numba import njit\nfrom jc_const import K\nJIT_DEPENDS = ("jc_const.py",)\n\n'
        "@njit(cache=True)\ndef plus_one(x):\n    return x + K\n")
    first, p = _run(tmp_path, ["jc_dep"])
    assert first["jc_dep"]["result"] == 42 and first["jc_dep"]["compile"] is True, p.stderr
    again, p = _run(tmp_path, ["jc_dep"])
    assert again["jc_dep"]["result"] == 42 and again["jc_dep"]["compile"] is False, p.stderr
    (tmp_path / "jc_const.py").write_text("K = 2\n")  # jc_dep.py itself is untouched
    changed, p = _run(tmp_path, ["jc_dep"])
    assert changed["jc_dep"]["error"] is None, changed["jc_dep"]["error"]
    assert changed["jc_dep"]["compile"] is True and changed["jc_dep"]["result"] == 43, p.stderr
    assert not changed["jc_dep"]["warnings"]
    settled, p = _run(tmp_path, ["jc_dep"])
    assert settled["jc_dep"]["compile"] is False and settled["jc_dep"]["result"] == 43, p.stderr


def test_the_engines_list_the_files_their_machine_code_embeds():
    import importlib

    from sgdnet.engine import fastpath, fastpath_fifo, fifo_record, kernel, rng

    parts = [importlib.import_module(f"sgdnet.engine.kernel.{m}") for m in kernel.MODULES
             if m != "jit"]  # jit.py: decorators and constants, no compiled function
    for mod in (*parts, fastpath, fastpath_fifo, fifo_record, rng):
        here = Path(mod.__file__).parent
        assert mod.JIT_DEPENDS and all((here / f).is_file() for f in mod.JIT_DEPENDS), mod.__name__
    loop = importlib.import_module("sgdnet.engine.kernel.loop")
    # the loop inlines every other module of the package, and the samplers and constants
    assert {"../rng.py", "../abi.py"} | {f"{m}.py" for m in kernel.MODULES if m != "loop"} <= set(
        loop.JIT_DEPENDS)


def test_a_load_error_no_check_foresaw_is_healed_by_one_retry(built):
    # a data file that is a complete pickle of the wrong thing passes every check of its bytes;
    # numba raises while rebuilding it: call_healing deletes the files and retries (one warning)
    tmp = built()
    name = _name("nbc", "garbage")
    import pickle

    for f in _files(tmp, name, "nbc"):
        f.write_bytes(pickle.dumps(("not", "numba's payload")))
    script = (
        "import json, warnings\n"
        "from sgdnet.engine.jitcache import call_healing, check_cache\n"
        f"import {name} as mod\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    first = check_cache(mod)\n"
        "    out = call_healing(mod.plus_one, 41)\n"
        "print(json.dumps({'first': first, 'out': out,\n"
        "                  'warnings': [str(w.message) for w in seen]}))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "cache"),
           "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=240, env=env, cwd=tmp)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    assert rec["first"] is False  # the check saw a complete pickle: nothing to repair up front
    assert rec["out"] == 42
    assert len(rec["warnings"]) == 1 and "damaged" in rec["warnings"][0], rec["warnings"]


#: the warm engine cache, every file damaged in turn (detection, no compile) and then all at once
#: (a prediction, one compile): issue #43
WHOLE = """\
import glob, json, os, sys, warnings
root = sys.argv[1]
mode = sys.argv[2]
DAMAGE = {"truncated": lambda d: d[: len(d) // 2], "empty": lambda d: b"",
          "garbage": lambda d: b"\\x80\\x05garbage, not a pickle" * 3}
files = sorted(glob.glob(os.path.join(root, "*", "*.nb[ic]")))
if mode == "in-turn":
    from sgdnet.engine.jitcache import scan
    missed = []
    for f in files:
        saved = {g: open(g, "rb").read() for g in glob.glob(os.path.join(root, "*", "*"))}
        for how, fn in DAMAGE.items():
            open(f, "wb").write(fn(saved[f]))
            problems = scan()
            if len(problems) != 1 or os.path.exists(f):
                missed.append([os.path.basename(f), how, problems])
            for g, data in saved.items():
                open(g, "wb").write(data)
            for g in glob.glob(os.path.join(root, "*", "*")):
                if g not in saved:
                    os.unlink(g)
    print(json.dumps({"files": len(files), "missed": missed}))
    sys.exit(0)
if mode == "all":
    kinds = list(DAMAGE.values())
    for i, f in enumerate(files):
        data = open(f, "rb").read()
        open(f, "wb").write(kinds[i % 3](data))
    for f in glob.glob(os.path.join(root, "*", "*.sgdnet-deps")):
        open(f, "wb").write(b"\\xff\\xfe garbled")
import sgdnet
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    out = []
    for variant, cv in (("sync-ps", 0.1), ("allreduce", 0.0)):
        p = sgdnet.predict(variant, "resnet50", sgdnet.Cluster(workers=2, compute_cv=cv),
                           steps=20, warmup=2, replications=2, seed=1)
        out.append([float(p.samples_per_s.mean), float(p.samples_per_s.half_width())])
print(json.dumps({"out": out, "files": len(files),
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in seen]}))
"""


def _whole(root: Path, mode: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(root), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", WHOLE, str(root), mode], capture_output=True,
                       text=True, timeout=900, env=env, cwd=root)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_warm_engine_cache_damaged_file_by_file_and_all_at_once_heals(tmp_path):
    # a private copy of the warm cache (the real one is never touched): every file damaged in
    # turn is found by the check, and with every file damaged at once a prediction gives the
    # clean cache's numbers after exactly one warning (one recompile, the test's only one)
    from sgdnet.engine import jitcache
    from sgdnet.engine.jitcache import JIT_DIRS, cache_dir

    here = Path(jitcache.__file__).parent
    for rel in JIT_DIRS:
        src_dir = (here / rel).resolve()
        real = cache_dir(str(src_dir / "__init__.py"))
        sub = tmp_path / "cache" / (src_dir.name + "_" + __import__("hashlib").sha1(
            str(src_dir).encode()).hexdigest())  # numba's NUMBA_CACHE_DIR layout
        sub.mkdir(parents=True)
        for f in Path(real).glob("*"):
            if f.suffix in (".nbi", ".nbc") or f.name.endswith(".sgdnet-deps"):
                shutil.copy2(f, sub / f.name)
    root = tmp_path / "cache"
    clean = _whole(root, "clean")  # warms the private copy if the real cache was cold
    assert clean["files"] > 20 and not [w for w in clean["warnings"] if "JitCache" in w]
    turn = _whole(root, "in-turn")
    assert turn["files"] >= clean["files"] and turn["missed"] == [], turn["missed"][:5]
    damaged = _whole(root, "all")
    assert damaged["out"] == clean["out"]
    warned = [w for w in damaged["warnings"] if w.startswith("JitCacheWarning")]
    assert len(warned) == 1 and "damaged" in warned[0], damaged["warnings"]
    again = _whole(root, "clean")  # rebuilt: the same numbers, no warning
    assert again["out"] == clean["out"] and not again["warnings"]
