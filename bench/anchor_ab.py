"""``--extra`` runners of the speed anchors' harness for an A/B of kernels in one run: this
checkout's kernel specialised to the anchor net's features, the same generic, and another
one-file kernel module (``$SGDNET_OLD_KERNEL``, e.g. the last one before the package)::

    git show 0441880:sgdnet/engine/kernel.py > /tmp/kernel_old.py
    cp -r /work/shared/anchors /tmp/anchors && cd /tmp/anchors
    SGDNET_OLD_KERNEL=/tmp/kernel_old.py PYTHONPATH=/path/to/worktree:/path/to/worktree/bench \\
        python bench.py --what table --impl c,numba --modes sync --N 4,16,64 --reps 5 --min-s 1 \\
        --extra anchor_ab:run_specialised,anchor_ab:run_generic,anchor_ab:run_old

Each runner is :func:`anchor_runner.run` with ``engine="generic"`` (the anchor net would take
the FIFO fast path otherwise) and the kernel it names installed for the call.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from anchor_runner import run

_OLD: dict = {}


def _with(kernel: str, p, t_end: float, seed: int) -> dict:
    from sgdnet.engine import kernel as K

    real = K.run_replication
    before = os.environ.get("SGDNET_KERNEL")
    try:
        if kernel == "old":
            if "run" not in _OLD:
                spec = importlib.util.spec_from_file_location("sgdnet.engine.kernel_old",
                                                              os.environ["SGDNET_OLD_KERNEL"])
                mod = importlib.util.module_from_spec(spec)
                sys.modules["sgdnet.engine.kernel_old"] = mod
                spec.loader.exec_module(mod)
                _OLD["run"] = mod.run_replication
            K.run_replication = _OLD["run"]
        else:
            os.environ["SGDNET_KERNEL"] = kernel
        return run(p, t_end, seed, engine="generic")
    finally:
        K.run_replication = real
        if before is None:
            os.environ.pop("SGDNET_KERNEL", None)
        else:
            os.environ["SGDNET_KERNEL"] = before


def run_specialised(p, t_end: float, seed: int = 1) -> dict:
    """This checkout's kernel compiled for the anchor net's features."""
    return _with("specialised", p, t_end, seed)


def run_generic(p, t_end: float, seed: int = 1) -> dict:
    """This checkout's generic kernel."""
    return _with("generic", p, t_end, seed)


def run_old(p, t_end: float, seed: int = 1) -> dict:
    """The kernel module ``$SGDNET_OLD_KERNEL``."""
    return _with("old", p, t_end, seed)
