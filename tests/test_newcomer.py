"""Issue #17, the newcomer's path: the README's first command (``pip install -e .`` and
``sgdnet predict``) needs none of the optional extras, and its install line is the core only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BLOCKER = """\
import sys, importlib.abc

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "dask", "distributed", "pandas", "scipy"}:
            raise ImportError(f"{name} is blocked: the main job must not need it")

sys.meta_path.insert(0, Block())
from sgdnet.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules
                if m.split(".")[0] in {"torch", "dask", "distributed", "pandas", "scipy"})
print("LOADED", loaded)
sys.exit(code)
"""


def _readme_bash_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [" ".join(ln.strip() for ln in b.strip().splitlines() if ln.strip())
            for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_quick_start_installs_the_core_then_the_tests():
    first, second = _readme_bash_blocks()[:2]
    assert first.startswith("pip install -e . && sgdnet predict ")
    assert second.startswith("pip install -e .[test] && python -m pytest")
    cfg = (REPO / "setup.cfg").read_text()
    assert "torch==" not in cfg  # a pin would replace a user's CUDA build


def test_predict_runs_with_torch_dask_pandas_scipy_blocked():
    first = _readme_bash_blocks()[0]
    argv = first.split("sgdnet predict ", 1)[1].split()
    # the README's example, shortened so the test is quick (same code path)
    argv += ["--steps", "5", "--warmup", "1", "--replications", "1", "--granularity", "coarse",
             "--no-progress"]
    # a bare environment, but the suite's numba cache (if one is set): a cache of its own would
    # recompile the kernel (~40 s of CPU) for nothing
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
           **{k: os.environ[k] for k in ("NUMBA_CACHE_DIR",) if k in os.environ}}
    p = subprocess.run([sys.executable, "-c", BLOCKER, "predict", *argv], capture_output=True,
                       text=True, timeout=600, cwd=REPO, env=env)
    assert p.returncode == 0, p.stderr
    assert "LOADED []" in p.stdout
    assert "sync-ps | resnet50" in p.stdout
