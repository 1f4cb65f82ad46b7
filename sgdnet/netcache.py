"""Compiled nets kept on disk between processes, so that a repeated ``sgdnet predict`` pays
import, cache loads and the run — not building and compiling the same net again.

A variant's net is a pure function of its inputs: the variant, the model profile, the cluster,
the granularity, the options, the size limits (the fine-net memory budget) and sgdnet's own
code. :func:`load_or_build` hashes all of them (the profile and cluster by their ``to_dict``
JSON, the code by the bytes of every ``.py`` file of the package, the Python, numpy and pickle
versions besides) into one key; a file under that key holds the :class:`CompiledNet` and the
net's ``meta``, written once after a build (atomically: a temporary file renamed into place).
A changed input or an edited source file is a different key, so nothing stale is ever loaded.
A file that cannot be read back (truncated, garbage, another numpy) is deleted and the net is
built again; a directory that cannot be written only means no caching. Files are pickles, like
numba's own cache: a cache directory must be as private as the code it caches.

The last :data:`MEMORY_NETS` nets are also kept in memory under the same key, which is how
:func:`sgdnet.predict` called again with the same inputs (other seeds, steps or replications)
skips the build; the Python API uses that layer only and writes no files.

A net built here is compiled without a structural key (``compile_net(net, share=False)``):
hashing a whole fine net costs 3-4x compiling it (0.19 against 0.05 s of CPU for the fine
sync-PS net of ResNet-50 on 32 workers), and the key of its inputs identifies it already.

Where: ``$SGDNET_CACHE_DIR/nets`` when that variable is set (to an empty string: no caching),
else ``$XDG_CACHE_HOME/sgdnet/nets`` or ``~/.cache/sgdnet/nets``. At most :data:`MAX_FILES`
files are kept (the oldest are deleted), and nets of more than :data:`MAX_ELEMENTS` places and
transitions are not written (their pickle would cost about what building them costs).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["NetCacheWarning", "cache_dir", "load_or_build", "net_key", "MAX_FILES", "MAX_ELEMENTS", "MEMORY_NETS",
           "MEMORY_MAX_ELEMENTS"]

#: Files kept in the cache; writing one more deletes the oldest (by modification time).
MAX_FILES = 64
#: Nets with more places + transitions than this are built every time, never written.
MAX_ELEMENTS = 200_000
#: Compiled nets kept in memory, most recently used last (see :func:`load_or_build`).
MEMORY_NETS = 8
#: Nets with more places + transitions than this are not kept in memory.
MEMORY_MAX_ELEMENTS = 100_000
#: Bump when the file layout changes.
FORMAT = 1

_CODE: dict[str, str] = {}
_MEMORY: OrderedDict[str, tuple[Any, dict]] = OrderedDict()
_MEMORY_LOCK = threading.Lock()


def cache_dir() -> Path | None:
    """The directory of cached nets, or None when caching is off (``SGDNET_CACHE_DIR=""``)."""
    env = os.environ.get("SGDNET_CACHE_DIR")
    if env is not None:
        return Path(env).expanduser() / "nets" if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sgdnet" / "nets"


def _code_hash() -> str:
    """SHA-256 of every ``.py`` file of the installed package (path and bytes), once per
    process: an edited builder is a new key."""
    if "sha" not in _CODE:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
        _CODE["sha"] = h.hexdigest()
    return _CODE["sha"]


def net_key(variant: str, model: Any, cluster: Any, granularity: str,
            options: Mapping[str, Any]) -> str:
    """The cache key of one net: a hex SHA-256 of its inputs and of sgdnet's code.

    ``model`` and ``cluster`` are a resolved :class:`ModelProfile` and :class:`Cluster`; options
    are keyed by their ``repr`` (every checked builder option is a number, string, bool, None
    or a tuple of them; :func:`load_or_build` caches nothing when a value is not).
    """
    import numpy

    from .limits import LIMITS, limit

    doc = {
        "format": FORMAT, "code": _code_hash(), "python": sys.version,
        "numpy": numpy.__version__, "pickle": pickle.HIGHEST_PROTOCOL,
        "variant": variant, "granularity": granularity,
        "model": model.to_dict(), "cluster": cluster.to_dict(),
        "options": sorted((str(k), repr(v)) for k, v in options.items()),
        "limits": {k: limit(k) for k in sorted(LIMITS)},
    }
    blob = json.dumps(doc, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()


class NetCacheWarning(UserWarning):
    """A damaged compiled-net cache file was found and deleted; the net is rebuilt."""


#: the damaged file already reported in this process (one warning a process)
_REPORTED: list[str] = []


def _load(path: Path) -> tuple[Any, dict] | None:
    from .net.compiled import CompiledNet

    try:
        with open(path, "rb") as fh:
            fmt, cn, meta = pickle.load(fh)
        if fmt != FORMAT or not isinstance(cn, CompiledNet) or not isinstance(meta, dict):
            raise ValueError("not a cached net")
    except FileNotFoundError:
        return None
    except Exception as e:  # truncated, garbage, another numpy or sgdnet: rebuild
        try:
            path.unlink()
        except OSError:
            pass
        if isinstance(e, (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError,
                          OverflowError, MemoryError)) and not _REPORTED:
            # damage (an interrupted write, a full disk), reported once a process as the README
            # says; a file of another sgdnet or numpy (an ImportError, AttributeError) or of
            # another format is simply rebuilt
            _REPORTED.append(str(path))
            import warnings

            warnings.warn(f"sgdnet: the compiled-net cache file {str(path)!r} was damaged "
                          f"({type(e).__name__}); it was deleted and the net is being rebuilt",
                          NetCacheWarning, stacklevel=4)
        return None
    try:
        os.utime(path)  # recently used: the last to be evicted
    except OSError:
        pass
    return cn, meta


def _store(folder: Path, path: Path, cn: Any, meta: dict) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pkl")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((FORMAT, cn, meta), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        files = sorted(folder.glob("*.pkl"), key=lambda p: p.stat().st_mtime)
        for old in files[:-MAX_FILES] if len(files) > MAX_FILES else []:
            old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # a read-only or full disk, an unpicklable meta: the net simply is not cached


def load_or_build(variant: str, model: Any, cluster: Any, granularity: str,
                  options: Mapping[str, Any], build: Callable[[], Any], *,
                  disk: bool = True) -> tuple[Any, dict, bool]:
    """The compiled net of ``build()`` and its ``meta``, from the cache when it holds it.

    Parameters
    ----------
    variant, model, cluster, granularity, options
        What ``build`` builds from (a resolved :class:`ModelProfile` and :class:`Cluster`).
    build : callable
        Returns the :class:`Net` (``sgdnet.variants.build(...)``); called on a cache miss only,
        so its errors (bad options) surface as they would without a cache.
    disk : bool
        Also look in, and write to, the directory of :func:`cache_dir` (the CLI); ``False``
        keeps to the in-memory layer (the Python API).

    Returns
    -------
    (CompiledNet, dict, bool)
        The compiled net, a (deep) copy of the net's ``meta`` (a caller's edits stay its own),
        and whether it came from a cache.
    """
    from .net.compiled import compile_net

    if not all(_plain(v) for v in options.values()):  # a value its repr might not tell apart
        net = build()
        return compile_net(net, share=False), copy.deepcopy(dict(net.meta)), False
    key = net_key(variant, model, cluster, granularity, options)
    with _MEMORY_LOCK:
        kept = _MEMORY.get(key)
        if kept is not None:
            _MEMORY.move_to_end(key)
    if kept is not None:
        return kept[0], copy.deepcopy(kept[1]), True
    folder = cache_dir() if disk else None
    path = None
    if folder is not None:
        path = folder / f"{key}.pkl"
        hit = _load(path)
        if hit is not None:
            _keep(key, *hit)
            return hit[0], copy.deepcopy(hit[1]), True
    net = build()
    cn = compile_net(net, share=False)
    cn.key = f"inputs:{key}"  # not the structural key, which was not computed (see above)
    meta = dict(net.meta)
    _keep(key, cn, meta)
    if path is not None and cn.n_transitions + len(cn.place_names) <= MAX_ELEMENTS:
        _store(folder, path, cn, meta)
    return cn, copy.deepcopy(meta), False


def _plain(v: Any) -> bool:
    """Whether ``repr(v)`` tells ``v`` apart from every other value: None, bools, ints, floats,
    strings, and lists or tuples of them (not, say, a long numpy array, which ``repr`` elides)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    return isinstance(v, (list, tuple)) and all(_plain(x) for x in v)


def _keep(key: str, cn: Any, meta: dict) -> None:
    if cn.n_transitions + len(cn.place_names) > MEMORY_MAX_ELEMENTS:
        return
    with _MEMORY_LOCK:
        _MEMORY[key] = (cn, meta)
        _MEMORY.move_to_end(key)
        while len(_MEMORY) > MEMORY_NETS:
            _MEMORY.popitem(last=False)
