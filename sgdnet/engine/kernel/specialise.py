"""Specialised kernels: the event loop compiled once per set of features a net uses.

Invariant: a specialised copy of :func:`~sgdnet.engine.kernel.loop.run_replication` plays the
very trajectory of the generic one, bit for bit, on every net whose features it was made for
(:func:`features`): its compile-time constants only remove what such a net never executes.

- ``FLAG_MASK`` / ``FLAG_SET``: the loop reads a transition's flags as
  ``(TS_FL & FLAG_MASK) | FLAG_SET``; the mask clears the feature flags (``FEATURES``) no
  transition of the net has, the set forces ``F_S1`` when every transition has one server. Both
  are no-ops on that net, and constants LLVM folds into every test of the flags in the loop and
  the phases inlined into it, so the branches of absent features (flows, processor sharing,
  gates, modulators, random switches, inhibitors, multi-server transitions) vanish.
- ``FLOWS``, ``SHARED``: sections of the loop not guarded by a flag (the flows' re-allocation,
  the re-rating of shared resources' holders), pruned by numba before type inference when False
  (their helpers are then not even compiled: with the helpers' caches warm, a specialised loop
  compiles in ~20-40 s against ~80 s for the generic one). Histograms and the periodic search stay runtime switches, so that one
  net's kernel serves both.

A copy is the loop's own code object with other globals (the constants), under a qualified name
of its own (``run_replication__<key>``): numba caches it on disk next to the loop's cache, keyed
by that name, and invalidates it with the loop's source (numba's own stamp of ``loop.py``, and
:mod:`sgdnet.engine.jitcache`, which deletes every cache of ``loop``'s functions when a file in
its ``JIT_DEPENDS`` changed). When the driver takes one (``SGDNET_KERNEL``): :func:`choose`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...net.compiled import DISC_FLOW, GATE_DYNAMIC_LAG
from ..layout import (
    F_BACKLOG,
    F_CNT,
    F_FLOW,
    F_GUARD,
    F_INH,
    F_JOIN,
    F_MOD,
    F_PS,
    F_QRES,
    F_RS,
    F_S1,
    F_SELF,
    F_STEP,
    F_SW,
    F_W1,
)
from .jit import JOIN_ARCS

__all__ = ["FEATURES", "features", "flags", "kernel_for", "choose", "generic_only"]

#: the flags whose code a specialised kernel drops when no transition has them
FEATURES = F_FLOW | F_PS | F_INH | F_GUARD | F_CNT | F_SW | F_RS | F_MOD | F_SELF | F_BACKLOG

_lock = threading.Lock()
_made: dict[tuple, Any] = {}


def _cached(d: Any) -> bool:
    """Whether dispatcher ``d`` has machine code in this process or an index on disk."""
    try:
        return bool(d.overloads) or os.path.exists(d._cache._cache_file._index_path)
    except AttributeError:  # other numba internals: as if cached (no compile is forced)
        return True


def choose(generic: Any, a: dict[str, np.ndarray]) -> Any:
    """The kernel the driver runs for a net (its arguments ``a``), by ``SGDNET_KERNEL``:
    ``generic`` (the default) the generic one; ``specialised`` the net's specialised kernel;
    ``auto`` the specialised kernel when it is compiled or cached, or when the generic one is
    not either (a compile is coming anyway), else the generic one, so that a net whose features
    have no kernel yet does not wait for a compile.

    Off by default: on a cold cache the first specialised kernel costs about what the generic
    one does (the helpers are compiled for it), and each other feature set ~30-40 s more, over
    today's budget of one compile for every net (bench/README.md, "Specialised kernels")."""
    mode = os.environ.get("SGDNET_KERNEL", "generic")
    if mode == "generic" or _generic_only[0] or not hasattr(generic, "py_func"):
        return generic  # (no py_func: NUMBA_DISABLE_JIT, plain Python)
    spec = kernel_for(features(a))
    if mode == "specialised" or _cached(spec) or not _cached(generic):
        return spec
    return generic


_generic_only = [False]


@contextlib.contextmanager
def generic_only() -> Iterator[None]:
    """Within the block, :func:`choose` takes the generic kernel (to compile it: ensure_kernel)."""
    _generic_only[0] = True
    try:
        yield
    finally:
        _generic_only[0] = False


def flags(a: dict[str, np.ndarray]) -> np.ndarray:
    """Every transition's flags ``F_*``, as :func:`sgdnet.engine.kernel.tables.fill` sets them,
    from the kernel's net arguments ``a`` (:func:`sgdnet.engine.abi.net_args`)."""
    servers = np.asarray(a["servers"])
    nT = servers.size
    in_ptr, in_w = np.asarray(a["in_ptr"]), np.asarray(a["in_w"])
    nin = np.diff(in_ptr)
    f = np.full(nT, F_W1, dtype=np.int64)
    heavy = np.zeros(nT, dtype=bool)
    heavy[np.repeat(np.arange(nT), nin)[in_w[: in_ptr[-1]] != 1]] = True
    f[heavy] &= ~F_W1
    f[np.diff(a["inh_ptr"]) > 0] |= F_INH | F_SELF
    guard = np.asarray(a["guard"])
    g = guard >= 0
    f[g] |= F_GUARD
    if g.any():
        kind = np.asarray(a["g_kind"])[np.asarray(a["mem_gate"])[guard[g]]]
        idx = np.flatnonzero(g)[kind == GATE_DYNAMIC_LAG]
        f[idx] |= F_SELF
    f[np.diff(a["rs_ptr"]) > 0] |= F_RS
    f[np.asarray(a["mod_of"]) >= 0] |= F_MOD
    psres_ptr = np.asarray(a["psres_ptr"])
    ps = np.diff(psres_ptr) > 0
    f[ps] |= F_PS
    if ps.any():
        first = np.asarray(a["psres_idx"])[psres_ptr[:-1][ps]]
        f[np.flatnonzero(ps)[np.asarray(a["r_disc"])[first] == DISC_FLOW]] |= F_FLOW
    f[np.diff(a["qres_ptr"]) > 0] |= F_QRES
    f[np.diff(a["cnt_ptr"]) > 0] |= F_CNT
    f[np.asarray(a["is_step"]) != 0] |= F_STEP
    f[servers == 1] |= F_S1
    f[nin > JOIN_ARCS] |= F_JOIN
    sw = np.asarray(a["sw_w"]) > 0.0
    if sw.sum() >= 2:
        f[sw] |= F_SW
    f[np.asarray(a["jn_link"]) >= 0] |= F_BACKLOG
    return f


def features(a: dict[str, np.ndarray]) -> tuple[int, int, bool, bool]:
    """The compile-time constants of the kernel for a net (its arguments ``a``):
    ``(FLAG_MASK, FLAG_SET, FLOWS, SHARED)``."""
    f = flags(a)
    union = int(np.bitwise_or.reduce(f)) if f.size else 0
    inter = int(np.bitwise_and.reduce(f)) if f.size else 0
    mask = ~FEATURES | (union & FEATURES)
    return mask, inter & F_S1, bool(union & F_FLOW), bool(union & F_PS)


def _key_name(key: tuple) -> str:
    mask, fset, *rest = key
    bits = "".join("1" if b else "0" for b in rest)
    return f"run_replication__{(mask & FEATURES):x}_{fset:x}_{bits}"


def kernel_for(key: tuple) -> Any:
    """The specialised kernel (a numba dispatcher, cached on disk) for the constants ``key``
    (:func:`features`); made once a process."""
    with _lock:
        d = _made.get(key)
        if d is not None:
            return d
        from numba import njit

        from . import loop

        base = loop.run_replication.py_func
        name = _key_name(key)
        g = dict(base.__globals__)
        g.update(zip(("FLAG_MASK", "FLAG_SET", "FLOWS", "SHARED"), key))
        fn = types.FunctionType(base.__code__, g, name, base.__defaults__, base.__closure__)
        fn.__qualname__ = name
        fn.__module__ = base.__module__
        fn.__doc__ = base.__doc__
        d = njit(cache=True, nogil=True, error_model="numpy")(fn)
        _made[key] = d
        return d
