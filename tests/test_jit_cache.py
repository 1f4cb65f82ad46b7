"""Issue #17: a damaged numba cache (truncated, empty or garbage .nbi/.nbc) is detected, reported
once and rebuilt, instead of an UnpicklingError/EOFError on every call forever.

Each case runs in subprocesses with a NUMBA_CACHE_DIR of the module's own (built once, restored
before each case) on a one-line njit(cache=True)
module (compiles in about a second), so the kernel's own cache is never touched; a last test
checks that simulate() runs the same check on the kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MODULE = """\
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1
"""

CALL = """\
import warnings, sys
warnings.simplefilter("always")
import jc_mod
from sgdnet.engine.jitcache import check_cache
{check}
print("result", jc_mod.plus_one(41))
"""


def _run(tmp: Path, check: bool) -> subprocess.CompletedProcess:
    code = CALL.format(check="print('compile', check_cache(jc_mod))" if check else "")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "cache"),
           "PYTHONPATH": f"{tmp}{os.pathsep}{REPO}"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, env=env, cwd=tmp)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbage": b"\x80\x05not a pickle at all" * 3,
                      "one-byte": data[:1]}[how])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A directory with the module and its freshly built cache (one compile for every case), and
    a function restoring that pristine cache (the module's path and mtime, which numba's index
    checks, never change)."""
    tmp = tmp_path_factory.mktemp("jc")
    (tmp / "jc_mod.py").write_text(MODULE)
    first = _run(tmp, check=True)
    assert "result 42" in first.stdout and "compile True" in first.stdout, first.stderr
    pristine = {p: p.read_bytes() for p in (tmp / "cache").rglob("*") if p.is_file()}
    assert any(p.suffix == ".nbi" for p in pristine) and any(p.suffix == ".nbc" for p in pristine), \
        "numba wrote no cache files"

    def restore() -> Path:
        shutil.rmtree(tmp / "cache")
        for p, data in pristine.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return tmp

    return restore


@pytest.mark.parametrize("which, how", [
    ("nbi", "truncated"), ("nbi", "empty"), ("nbi", "garbage"),
    ("nbc", "truncated"), ("nbc", "empty"), ("nbc", "garbage"), ("nbc", "one-byte"),
])
def test_damaged_cache_is_detected_reported_once_and_rebuilt(built, which, how):
    tmp = built()
    files = sorted((tmp / "cache").rglob(f"*.{which}"))
    assert files, "numba wrote no cache files"
    for f in files:
        _damage(f, how)
    healed = _run(tmp, check=True)
    assert healed.returncode == 0, healed.stderr
    assert "result 42" in healed.stdout and "compile True" in healed.stdout
    assert healed.stderr.count("JitCacheWarning") == 1 and "damaged" in healed.stderr
    again = _run(tmp, check=True)  # rebuilt: no warning, no compile
    assert "result 42" in again.stdout and "compile False" in again.stdout
    assert "JitCacheWarning" not in again.stderr


def test_healthy_cache_is_left_alone(built):
    tmp = built()
    before = {p: p.stat().st_mtime_ns for p in (tmp / "cache").rglob("*.nb*")}
    r = _run(tmp, check=True)
    assert "compile False" in r.stdout and r.stderr == ""
    assert before == {p: p.stat().st_mtime_ns for p in (tmp / "cache").rglob("*.nb*")}


def test_simulate_checks_the_kernel_cache():
    src = (REPO / "sgdnet" / "engine" / "api.py").read_text()
    # the check is a call, before the driver runs: behaviour is covered above on a small module
    assert src.index("check_cache()") < src.index("out = run(")
