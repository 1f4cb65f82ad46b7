"""The engine's on-disk Numba cache: detect damaged files, warn once, rebuild.

Numba loads its cache (an index ``.nbi`` and data ``.nbc`` files per function) with
:mod:`pickle`; a truncated, empty or garbage file (an interrupted write, a full disk) makes every
later call raise ``UnpicklingError`` / ``EOFError`` until the files are deleted by hand. Before the
first simulation of a process, :func:`check_cache` reads every index of the kernel's functions
and checks that each data file it names is a complete pickle stream (opcodes only, nothing is
executed); a damaged function's files are deleted with one warning, and numba recompiles it.

Numba keys a function's cache by that function's own source file only, so machine code that
inlined a helper or folded a constant from *another* file (the kernel inlines
:mod:`~sgdnet.engine.rng`'s samplers and folds :mod:`~sgdnet.engine.abi`'s slots, the codes of
:mod:`sgdnet.dists` and :mod:`sgdnet.net.compiled`) would be loaded stale after that file changed.
A module lists those files in ``JIT_DEPENDS`` (paths relative to its own); :func:`check_cache`
keeps a digest of them next to the module's cache files and deletes the cache when they changed,
so numba compiles it again (once) instead of running stale code.

It also tells whether a compile is coming (no usable index), so the CLI can say so.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pickle
import pickletools
import warnings
from types import ModuleType
from typing import Any

__all__ = ["check_cache", "repair", "preload", "stale_dependencies", "JitCacheWarning"]


class JitCacheWarning(UserWarning):
    """A damaged numba cache file was found and deleted; the engine is being recompiled."""


_state: dict[str, Any] = {"checked": False, "compile": None}


def _cached_dispatchers(module: ModuleType) -> list[Any]:
    out = []
    for obj in vars(module).values():
        cache = getattr(obj, "_cache", None)
        if cache is not None and hasattr(cache, "_cache_file"):
            out.append(obj)
    return out


def _complete_pickle(data: bytes) -> bool:
    try:
        for _ in pickletools.genops(data):
            pass
    except Exception:  # ValueError (truncated / unknown opcode) and anything odd
        return False
    return True


def _damage(cache_file: Any) -> tuple[str | None, bool]:
    """``(problem or None, usable)`` of one function's index and data files."""
    try:
        overloads = cache_file._load_index()
    except Exception as e:  # UnpicklingError, EOFError, ValueError, ...
        return f"index {cache_file._index_path}: {type(e).__name__}", False
    for name in overloads.values():
        path = os.path.join(cache_file._cache_path, name)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            continue  # numba recompiles a missing entry itself
        except OSError as e:
            return f"{path}: {e.strerror}", False
        if not _complete_pickle(data):
            return f"{path}: not a complete pickle ({len(data)} bytes)", False
    return None, bool(overloads)


def _delete(cache_file: Any) -> None:
    base = cache_file._index_path[: -len(".nbi")]
    for path in [cache_file._index_path, *glob.glob(glob.escape(base) + ".*.nbc")]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


#: The kernel's entry point: a usable cache entry for it means no compile (helpers that are
#: inlined or unused never get one of their own).
ENTRY = "run_replication"


def repair(dispatchers: list[Any], entries: tuple[str, ...] | None = None) -> tuple[list[str], bool]:
    """Delete the cache files of every dispatcher whose files are damaged.

    Parameters
    ----------
    dispatchers : list of numba dispatchers compiled with ``cache=True``
    entries : tuple of str, optional
        Names of the dispatchers whose cache decides whether a compile is coming (default all).

    Returns
    -------
    (list of str, bool)
        The problems found (one per damaged function, its files deleted), and whether every
        function had a usable cache entry (``False``: numba will compile).
    """
    problems: list[str] = []
    usable = True
    for d in dispatchers:
        cf = d._cache._cache_file
        problem, ok = _damage(cf)
        if problem is not None:
            _delete(cf)
            problems.append(problem)
        if entries is None or getattr(d, "__name__", None) in entries:
            usable = usable and ok
    return problems, usable


def _depends_digest(module: ModuleType) -> str | None:
    """SHA-1 over the module's own file and its ``JIT_DEPENDS`` files (None: it lists none)."""
    deps = getattr(module, "JIT_DEPENDS", None)
    src = getattr(module, "__file__", None)
    if not deps or not src:
        return None
    here = os.path.dirname(os.path.abspath(src))
    h = hashlib.sha1()
    for rel in (os.path.basename(src), *deps):
        try:
            with open(os.path.join(here, rel), "rb") as fh:
                h.update(rel.encode() + b"\0" + fh.read() + b"\0")
        except OSError:
            h.update(rel.encode() + b"\0missing\0")
    return h.hexdigest()


def stale_dependencies(module: ModuleType, dispatchers: list[Any]) -> bool:
    """Delete the module's cache files if the files its compiled code depends on changed since
    they were written (or since an unknown time: cache files without a recorded digest), and
    record the current digest. Returns True when files were deleted."""
    digest = _depends_digest(module)
    if digest is None or not dispatchers:
        return False
    name = getattr(module, "__name__", "module").rsplit(".", 1)[-1]
    cache_dir = dispatchers[0]._cache._cache_file._cache_path
    record = os.path.join(cache_dir, f"{name}.sgdnet-deps")
    try:
        with open(record, encoding="ascii") as fh:
            old = fh.read().strip()
    except OSError:
        old = None
    stale = False
    if old != digest:
        for d in dispatchers:
            cf = d._cache._cache_file
            if os.path.exists(cf._index_path):
                _delete(cf)
                stale = True
        try:
            os.makedirs(cache_dir, exist_ok=True)
            with open(record, "w", encoding="ascii") as fh:
                fh.write(digest + "\n")
        except OSError:  # a read-only cache: numba will not write there either
            pass
    return stale


def _kernel_compiled() -> bool:
    """Whether this process already has the kernel's machine code (compiled or loaded)."""
    import sys

    kernel = sys.modules.get(__package__ + ".kernel")
    return bool(getattr(getattr(kernel, ENTRY, None), "overloads", None))


def check_cache(module: ModuleType | None = None) -> bool:
    """Check the cache of the kernel's functions; repair and warn once. Once found usable (or the
    kernel compiled in this process) it is not read again in the process.

    Returns
    -------
    bool
        True when a JIT compile is coming (no usable cache for some kernel function).

    Warns
    -----
    JitCacheWarning
        Damaged cache files were found and deleted.
    """
    if _state["checked"] and module is None:
        # a usable cache stays usable in a process; a compile announced earlier may have
        # happened since (here, or in another process that filled the cache): check again
        if not _state["compile"] or _kernel_compiled():
            return False
    if module is None:
        from . import kernel as module  # type: ignore[no-redef]
    try:
        dispatchers = _cached_dispatchers(module)
        names = {getattr(d, "__name__", None) for d in dispatchers}
        stale = stale_dependencies(module, dispatchers)
        problems, usable = repair(dispatchers, (ENTRY,) if ENTRY in names else None)
        usable = usable and not stale
    except (AttributeError, TypeError):  # a numba whose cache internals differ: leave it be
        problems, usable = [], True
    if problems:
        warnings.warn(
            f"sgdnet: the engine's numba cache was damaged ({problems[0]}"
            f"{f' and {len(problems) - 1} more' if len(problems) > 1 else ''}); the damaged files "
            "were deleted and the engine is being recompiled (once)", JitCacheWarning,
            stacklevel=3)
    _state["checked"], _state["compile"] = True, not usable
    return not usable


def preload(dispatcher: Any) -> bool:
    """Install ``dispatcher``'s cached machine code without numba's registry refresh.

    Numba's own cache load (:meth:`numba.core.caching.Cache.load_overload`) first refreshes the
    target context, which imports every lowering registry numba has (``numba.np.arraymath``
    among them, which imports ``scipy.linalg`` when SciPy is installed to check for BLAS): ~0.3 s
    of CPU in a fresh process, paid by every CLI call, although a cache hit compiles nothing.
    This loads the entries of the index that match this machine (same key check as numba:
    signature, target and bytecode hashes), with the NRT initialised, and adds them as overloads;
    a later compile (a new signature) refreshes the context itself as usual.

    Returns
    -------
    bool
        True when the dispatcher has a compiled overload afterwards; False (nothing changed, the
        first call compiles or loads the usual way) when there is no usable entry, the
        dispatcher is not a cached numba dispatcher (e.g. a test's spy), or numba's internals
        differ from what this expects.
    """
    try:
        if dispatcher.overloads:
            return True
        cache = dispatcher._cache
        if not getattr(cache, "_enabled", False):
            return False
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.runtime import nrt

        ctx = dispatcher.targetctx
        magic = ctx.codegen().magic_tuple()
        with global_compiler_lock:
            for key in cache._cache_file._load_index():
                sig = key[0]
                if key[1] != magic or tuple(sig) in dispatcher.overloads:
                    continue
                nrt.rtsys.initialize(ctx)
                cres = cache._load_overload(sig, ctx)  # None unless the bytecode hashes match
                if cres is None or cres.objectmode:
                    continue
                ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
                dispatcher.add_overload(cres)
        return bool(dispatcher.overloads)
    except Exception:  # damaged files (check_cache deals with them), other numba versions
        return False


# pickle is imported for the exception types numba raises from it (documentation of intent)
_ = pickle
