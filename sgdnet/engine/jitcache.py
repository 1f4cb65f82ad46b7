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

Once a process, :func:`check_cache` also reads every index of sgdnet's cache directories
(:func:`scan`: the engine's and the analysis'), as numba reads them: a compile of the kernel
loads the caches of the helpers it calls, in other modules, which the kernel's own dispatchers do
not list (issue #43: 50 of 102 files truncated made the recompile die in ``load_overload``). A
damage no check foresees (a complete pickle of the wrong thing) makes numba raise while it loads:
:func:`call_healing` around the first compiled call then deletes that function's files (and any
other damaged ones), and retries; the process warns once whatever it found.

A data file found complete is recorded (its size, time and inode, :data:`CHECKED`, next to
the cache files) and, while these still match, not read again by a later process: a warm CLI
call stats the files instead of reading them all.

It also tells whether a compile is coming (no usable index), so the CLI can say so.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pickle
import pickletools
import time
import warnings
from types import ModuleType
from typing import Any

__all__ = ["check_cache", "repair", "scan", "heal", "call_healing", "cache_dir", "preload",
           "stale_dependencies", "JitCacheWarning"]


class JitCacheWarning(UserWarning):
    """A damaged numba cache file was found and deleted; the engine is being recompiled."""


_state: dict[str, Any] = {"checked": False, "compile": None, "scanned": False,
                         "warned": set()}


def _cached_dispatchers(module: ModuleType) -> list[Any]:
    """The cached numba dispatchers in ``module``'s namespace, its own first (those it imports
    follow: their machine code may be stale for the same reasons)."""
    own, other = [], []
    for obj in vars(module).values():
        cache = getattr(obj, "_cache", None)
        if cache is not None and hasattr(cache, "_cache_file"):
            mine = getattr(getattr(obj, "py_func", None), "__module__", None) == module.__name__
            (own if mine else other).append(obj)
    return own + other


def _modules_of(module: ModuleType) -> list[ModuleType]:
    """``module``, or the modules of a package of compiled functions (its ``MODULES``: the
    kernel's, one per concept, each with its own ``JIT_DEPENDS``)."""
    names = getattr(module, "MODULES", None)
    if not names or not hasattr(module, "__path__"):
        return [module]
    import importlib

    return [importlib.import_module(f"{module.__name__}.{n}") for n in names]


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
        names = [str(n) for n in overloads.values()]
    except Exception as e:  # UnpicklingError, EOFError, ValueError, a garbled structure, ...
        return f"index {cache_file._index_path}: {type(e).__name__}", False
    for name in names:
        problem = _data_problem(os.path.join(cache_file._cache_path, name))
        if problem is not None:
            return problem, False
    return None, bool(overloads)


def _data_problem(path: str) -> str | None:
    """What is wrong with one data (``.nbc``) file, or None (complete, or missing: numba
    recompiles a missing entry itself). A file found complete before and not changed since
    (:data:`CHECKED`) is not read again."""
    try:
        st = os.stat(path)
        if _checked_before(path, st):
            return None
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path}: {e.strerror}"
    if not _complete_pickle(data):
        return f"{path}: not a complete pickle ({len(data)} bytes)"
    _record_checked(path, st)
    return None


#: The record, in each cache directory, of the data files found complete: name -> size,
#: modification time (ns) and inode when checked. Numba writes a file anew (a new inode and
#: time) rather than in place, and a change made in place changes the time, so a file whose
#: three still match is the file that was read: a warm run stats its ~190 files instead of
#: reading them (~0.05 s). A file modified less than :data:`CHECKED_AGE_S` before its check
#: is not recorded (a change within the file system's clock tick would keep its time).
CHECKED = "sgdnet-checked.json"
CHECKED_AGE_S = 2.0
_checked: dict[str, dict[str, list[int]]] = {}
_checked_dirty: set[str] = set()


def _checked_in(where: str) -> dict[str, list[int]]:
    """The record of directory ``where`` (read once a process; a missing or garbled one is
    empty)."""
    rec = _checked.get(where)
    if rec is None:
        try:
            with open(os.path.join(where, CHECKED), encoding="utf-8") as fh:
                got = json.load(fh)
            rec = {str(k): [int(x) for x in v] for k, v in got.items()
                   if isinstance(v, list) and len(v) == 3}
        except (OSError, ValueError, TypeError, AttributeError):
            rec = {}
        _checked[where] = rec
    return rec


def _checked_before(path: str, st: os.stat_result) -> bool:
    where, name = os.path.split(path)
    return _checked_in(where).get(name) == [st.st_size, st.st_mtime_ns, st.st_ino]


def _record_checked(path: str, st: os.stat_result) -> None:
    if time.time_ns() - st.st_mtime_ns < CHECKED_AGE_S * 1e9:
        return
    where, name = os.path.split(path)
    _checked_in(where)[name] = [st.st_size, st.st_mtime_ns, st.st_ino]
    _checked_dirty.add(where)


def _save_checked() -> None:
    """Write the records that changed (a temporary file renamed over the old one; a read-only
    cache directory keeps none)."""
    while _checked_dirty:
        try:
            where = _checked_dirty.pop()
        except KeyError:  # another thread took the last one
            return
        items = list(_checked.get(where, {}).items())  # one C call: no thread's insert between
        rec = {k: v for k, v in items if os.path.exists(os.path.join(where, k))}
        tmp = os.path.join(where, f".{CHECKED}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(rec, fh, separators=(",", ":"))
            os.replace(tmp, os.path.join(where, CHECKED))
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _index_problem(path: str) -> str | None:
    """What is wrong with one index (``.nbi``) file and the data files it names, read as numba
    reads it (:meth:`numba.core.caching.IndexDataCacheFile._load_index`: a version pickle, then
    a pickle of ``(stamp, overloads)``), or None."""
    import numba

    try:
        with open(path, "rb") as fh:
            version = pickle.load(fh)
            rest = fh.read()
        if version != numba.__version__:
            return None  # another numba's index: numba ignores it (and overwrites it)
        _stamp, overloads = pickle.loads(rest)
        names = [str(n) for n in overloads.values()]
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 - any damage: truncated, garbled, a wrong structure
        return f"index {path}: {type(e).__name__}"
    for name in names:
        problem = _data_problem(os.path.join(os.path.dirname(path), name))
        if problem is not None:
            return problem
    return None


def _delete(cache_file: Any) -> None:
    _delete_base(cache_file._index_path[: -len(".nbi")])


def _delete_base(base: str) -> None:
    """Delete one function's index ``base.nbi`` and its data files ``base.*.nbc``."""
    for path in [base + ".nbi", *glob.glob(glob.escape(base) + ".*.nbc")]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:  # a read-only cache: numba cannot use it either, nothing more to do
            pass


#: The source directories (relative to this one) whose compiled functions sgdnet caches: the
#: engine's (the kernel, the helpers it calls, the fast paths, the random streams) and the
#: analysis' (max-plus); :func:`scan` checks every index of their numba cache directories.
JIT_DIRS = (".", "kernel", "../analysis")


def cache_dir(py_file: str) -> str | None:
    """The directory numba caches the functions of ``py_file`` in (its own choice of locator:
    ``NUMBA_CACHE_DIR``, the source tree's ``__pycache__``, the user-wide cache), or None."""
    from numba.core.caching import CacheImpl

    def probe() -> None:  # a function "of" py_file for the locators (they read its line number)
        pass

    for cls in CacheImpl._locator_classes:
        try:
            loc = cls.from_function(probe, py_file)
        except Exception:  # noqa: BLE001 - a locator that does not apply (IPython, zip)
            loc = None
        if loc is not None:
            return loc.get_cache_path()
    return None


def scan(dirs: tuple[str, ...] = JIT_DIRS) -> list[str]:
    """Check every numba index (and the data files it names) of sgdnet's cache directories, read
    as numba reads them, and delete each damaged function's files.

    Unlike :func:`repair`, this needs no dispatcher: it covers the functions a compile loads
    from the cache without their module being imported yet (a kernel helper in another module,
    the max-plus analysis) and the indexes of functions no longer in the source.

    Returns
    -------
    list of str
        One problem per damaged function (its files deleted).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    problems: list[str] = []
    seen: set[str] = set()
    for rel in dirs:
        src = os.path.normpath(os.path.join(here, rel))
        py_files = sorted(glob.glob(os.path.join(glob.escape(src), "*.py")))
        if not py_files:
            continue
        where = cache_dir(py_files[0])
        if where is None or where in seen or not os.path.isdir(where):
            continue
        seen.add(where)
        stems = {os.path.basename(f)[:-3] + "." for f in py_files}
        for index in sorted(glob.glob(os.path.join(glob.escape(where), "*.nbi"))):
            if not any(os.path.basename(index).startswith(st) for st in stems):
                continue
            problem = _index_problem(index)
            if problem is not None:
                _delete_base(index[: -len(".nbi")])
                problems.append(problem)
    _save_checked()
    return problems


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
    except (OSError, ValueError):  # missing, unreadable or garbled (not ASCII): a changed digest
        old = None
    stale = False
    if old != digest:
        for d in dispatchers:
            cf = d._cache._cache_file
            if os.path.exists(cf._index_path):
                _delete(cf)
                stale = True
        # and the module's functions made at run time, not in its namespace (the kernel's
        # specialised loops: sgdnet.engine.kernel.specialise), cached under its name too
        for index in glob.glob(os.path.join(glob.escape(cache_dir), f"{glob.escape(name)}.*.nbi")):
            _delete_base(index[: -len(".nbi")])
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
        # a package (the kernel's): each module's dependencies and dispatchers; the entry
        # point's cache decides whether a compile is coming
        mods = _modules_of(module)
        problems, usable, stale = [], True, False
        entry = any(ENTRY in {getattr(d, "__name__", None) for d in _cached_dispatchers(m)}
                    for m in mods)
        for m in mods:
            dispatchers = _cached_dispatchers(m)
            if not dispatchers:
                continue
            stale = stale_dependencies(m, dispatchers) or stale
            found, ok = repair(dispatchers, (ENTRY,) if entry else None)
            problems += found
            usable = usable and ok
        usable = usable and not stale
    except (AttributeError, TypeError):  # a numba whose cache internals differ: leave it be
        problems, usable = [], True
    if not _state["scanned"] and _ours(module):
        # every index of sgdnet's cache directories once a process: a compile of the kernel
        # loads its helpers' caches (other modules), which the dispatchers above do not list
        _state["scanned"] = True
        try:
            problems += scan()
        except Exception:  # noqa: BLE001 - other numba internals: the retry in heal() remains
            pass
    _save_checked()
    _warn(problems, "sgdnet" if _ours(module) else getattr(module, "__name__", "?"))
    _state["checked"], _state["compile"] = True, not usable
    return not usable


def _ours(module: ModuleType) -> bool:
    """Whether ``module`` is one of sgdnet's (not a user's or a test's own njit module)."""
    return getattr(module, "__name__", "").startswith(__package__.split(".")[0] + ".")


def _warn(problems: list[str], key: str = "sgdnet") -> None:
    """The one warning of a process about a damaged cache of sgdnet's (or of another module
    ``key``): later damage found is not warned about again, the files are deleted and rebuilt
    all the same."""
    if not problems or key in _state["warned"]:
        return
    _state["warned"].add(key)
    warnings.warn(
        f"sgdnet: the engine's numba cache was damaged ({problems[0]}"
        f"{f' and {len(problems) - 1} more' if len(problems) > 1 else ''}); the damaged files "
        "were deleted and the engine is being recompiled (once)", JitCacheWarning,
        stacklevel=4)


def _cache_frames(exc: BaseException) -> list[Any]:
    """The numba cache objects (``IndexDataCacheFile`` / ``Cache``) in the tracebacks of ``exc``
    and of the exceptions it chains: non-empty when it was raised loading or saving a cache."""
    found: list[Any] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename.replace(os.sep, "/").endswith("numba/core/caching.py"):
                found.append(tb.tb_frame.f_locals.get("self"))
            tb = tb.tb_next
        todo += [e.__cause__, e.__context__]
    return found


def heal(exc: BaseException) -> bool:
    """After an exception of a first compiled call: if numba raised it reading its cache (a
    damage no check foresaw), delete the files of the function it was reading and of every
    other damaged function of sgdnet's cache directories (one warning a process), so that a
    retry recompiles.

    Returns
    -------
    bool
        True when ``exc`` came from numba's cache and files were deleted (retry the call);
        False: not a cache error (raise it).
    """
    frames = _cache_frames(exc)
    if not frames:
        return False
    problems: list[str] = []
    for obj in frames:
        cf = getattr(obj, "_cache_file", obj)  # a Cache holds its IndexDataCacheFile
        index = getattr(cf, "_index_path", None)
        if isinstance(index, str) and os.path.exists(index):
            _delete(cf)
            problems.append(f"index {index}: {type(exc).__name__} {exc}")
    try:
        problems += scan()
    except Exception:  # noqa: BLE001 - nothing more to repair than the files above
        pass
    if not problems:
        return False  # nothing deleted: a retry would fail the same way
    _warn(problems)
    _state["compile"] = True
    return True


def call_healing(fn: Any, *args: Any, retries: int = 2, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, retried (at most ``retries`` times) after :func:`heal` deleted
    the damaged cache files that made numba raise while loading compiled code."""
    for attempt in range(retries + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if attempt == retries or not heal(e):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


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
