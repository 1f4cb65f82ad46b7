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
files and ``limit("max_net_cache_bytes")`` bytes are kept (the least recently used are
deleted; a file bigger than that budget alone is not kept), and nets of more than
:data:`MAX_ELEMENTS` places and transitions are not written.

Files are written in a compact form (issue #41: the fine sync-PS net of ResNet-50 on 1,024
workers, 889 k places and transitions, is a 156 MB plain pickle that loads in 1.3 s): integer
arrays in the narrowest integer type that holds their values, constant arrays as their value,
a float matrix of few distinct rows (the durations' parameters) as those rows and an index,
name lists as one string, tag dicts by column, resource tuples as a table and an index —
restored to exactly the arrays and objects :class:`CompiledNet` made (same dtypes, values,
order; every array read-only). That file is 47 MB and loads in ~0.5 s of CPU; it is written
by a background thread while the run simulates (:data:`COMPACT_FROM`; the CLI waits for it
before it exits, :func:`flush`). A header holds the length and CRC-32 of the body, so a file
damaged anywhere (not only truncated: a flipped byte inside an array) is found, reported once,
deleted and rebuilt, never loaded.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import pickle
import sys
import tempfile
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NetCacheWarning", "cache_dir", "flush", "holds", "load_or_build", "net_key",
           "MAX_FILES", "MAX_ELEMENTS", "MEMORY_NETS", "MEMORY_MAX_ELEMENTS", "COMPACT_FROM"]

#: Files kept in the cache; writing one more deletes the least recently used (by modification
#: time: a load touches its file).
MAX_FILES = 64
#: Nets with more places + transitions than this are built every time, never written (above
#: any net the default ``max_net_bytes`` budget lets a fine build make: ~1.2 M elements).
MAX_ELEMENTS = 4_000_000
#: Nets of at least this many places + transitions are compacted after their build (see
#: :func:`_encode_objects`) and written by a background thread (while the caller simulates;
#: :func:`flush` waits for it); smaller ones are written before :func:`load_or_build` returns.
COMPACT_FROM = 100_000
#: Compiled nets kept in memory, most recently used last (see :func:`load_or_build`).
MEMORY_NETS = 8
#: Nets with more places + transitions than this are not kept in memory.
MEMORY_MAX_ELEMENTS = 100_000
#: Bump when the file layout changes (2: the compact form, a header with a CRC-32).
FORMAT = 2
#: The first bytes of a file: magic, then the body's length and CRC-32 (see :func:`_store`).
_MAGIC = b"sgdnet-net\x00"
_HEADER = len(_MAGIC) + 16

_CODE: dict[str, str] = {}
_MEMORY: OrderedDict[str, tuple[Any, dict]] = OrderedDict()
_MEMORY_LOCK = threading.Lock()
_WRITERS: list[threading.Thread] = []


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
    from .limits import LIMITS, limit

    doc = {
        "format": FORMAT, "code": _code_hash(), "python": sys.version,
        "numpy": np.__version__, "pickle": pickle.HIGHEST_PROTOCOL,
        "variant": variant, "granularity": granularity,
        "model": model.to_dict(), "cluster": cluster.to_dict(),
        "options": sorted((str(k), repr(v)) for k, v in options.items()),
        "limits": {k: limit(k) for k in sorted(LIMITS) if k not in _NOT_IN_KEY},
    }
    blob = json.dumps(doc, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()


#: limits that change no net (the cache's own size budget), left out of the key
_NOT_IN_KEY = ("max_net_cache_bytes",)


class NetCacheWarning(UserWarning):
    """A damaged compiled-net cache file was found and deleted; the net is rebuilt."""


#: the damaged file already reported in this process (one warning a process)
_REPORTED: list[str] = []


def _load(path: Path) -> tuple[Any, dict] | None:
    from ._gc import paused_gc
    from .net.compiled import CompiledNet

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:  # unreadable (a directory, no permission): not cached, nothing deleted
        return None
    damaged: Exception | None = None
    try:
        body = memoryview(data)[_HEADER:]
        if (data[:len(_MAGIC)] != _MAGIC
                or int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 8], "little") != len(body)
                or int.from_bytes(data[len(_MAGIC) + 8:_HEADER], "little") != zlib.crc32(body)):
            raise ValueError("not a whole cached net (length or CRC-32 differs)")
        del body
        with paused_gc():  # ~400 k tag dicts, all alive: no collection walks them
            stream = io.BytesIO(data)  # shares the bytes (no copy)
            stream.seek(_HEADER)
            fmt, meta, names = pickle.load(stream)
            if fmt != FORMAT or not isinstance(meta, dict) or not isinstance(names, list):
                raise ValueError("not a cached net")
            cn = _unpack(CompiledNet, _fields(stream, names))
            if stream.read(1):
                raise ValueError("bytes after the last field")
            del stream
    except Exception as e:  # damaged, or a file of another sgdnet or numpy: rebuild
        damaged = e
    finally:
        del data
    if damaged is not None:
        try:
            path.unlink()
        except OSError:
            pass
        if isinstance(damaged, (pickle.UnpicklingError, EOFError, ValueError, IndexError,
                                KeyError, OverflowError, MemoryError)) and not _REPORTED:
            # damage (an interrupted write, a full disk, a flipped byte), reported once a
            # process as the README says; a file of another sgdnet or numpy (an ImportError,
            # AttributeError) is simply rebuilt
            _REPORTED.append(str(path))
            import warnings

            warnings.warn(f"sgdnet: the compiled-net cache file {str(path)!r} was damaged "
                          f"({type(damaged).__name__}); it was deleted and the net is being "
                          "rebuilt", NetCacheWarning, stacklevel=4)
        return None
    try:
        os.utime(path)  # recently used: the last to be evicted
    except OSError:
        pass
    return cn, meta


def _store(folder: Path, path: Path, fields: dict[str, Any], meta: dict,
           packed: Mapping[str, tuple] | None = None) -> None:
    """Write a compiled net's ``fields`` (a snapshot of its ``vars``) and ``meta`` under
    ``path`` (compact form, header, atomically), then delete the least recently used files
    beyond :data:`MAX_FILES` or the byte budget; ``packed``: fields encoded already."""
    packed = packed or {}
    from ._gc import paused_gc
    from .limits import limit

    try:
        budget = limit("max_net_cache_bytes")
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pkl")
        try:
            with os.fdopen(fd, "wb") as fh, paused_gc():
                fh.write(_MAGIC + bytes(16))  # the body's length and CRC-32 once written
                out = _Summing(fh)
                names = [f for f in fields if not f.startswith("_")]  # not what runs learned
                pickle.dump((FORMAT, meta, names), out, protocol=pickle.HIGHEST_PROTOCOL)
                for f in names:  # one field at a time: no encoded copy of the whole net
                    enc = packed[f] if f in packed else _pack_value(fields[f])
                    pickle.dump(enc, out, protocol=pickle.HIGHEST_PROTOCOL)
                fh.seek(len(_MAGIC))
                fh.write(out.n.to_bytes(8, "little") + out.crc.to_bytes(8, "little"))
            if _HEADER + out.n > budget:  # alone bigger than the whole cache may be
                raise _TooBig
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        _evict(folder, path, budget)
    except (OSError, pickle.PicklingError, TypeError, AttributeError, _TooBig):
        pass  # a read-only or full disk, an unpicklable meta: the net simply is not cached


class _TooBig(Exception):
    """A file over the whole cache's byte budget (not kept)."""


class _Summing:
    """A binary file's ``write`` that also counts the bytes and their CRC-32."""

    def __init__(self, fh: Any) -> None:
        self._fh, self.n, self.crc = fh, 0, 0

    def write(self, b: Any) -> int:
        self.crc = zlib.crc32(b, self.crc)
        n = self._fh.write(b)
        self.n += n
        return n


def _fields(stream: Any, names: list) -> dict[str, Any]:
    """The encoded fields that follow the head of a file, one pickle each, by name."""
    return {f: pickle.load(stream) for f in names}


def _evict(folder: Path, keep: Path, budget: int) -> None:
    """Delete the least recently used files (oldest modification time first) while there are
    more than :data:`MAX_FILES` or they hold more than ``budget`` bytes; ``keep`` (the file
    just written) goes last."""
    files = []
    for p in folder.glob("*.pkl"):
        try:
            st = p.stat()
        except OSError:  # deleted meanwhile by another process
            continue
        files.append((p == keep, st.st_mtime, st.st_size, p))
    files.sort(key=lambda f: f[:2])
    total = sum(f[2] for f in files)
    for i, (_, _, size, p) in enumerate(files):
        if len(files) - i <= MAX_FILES and total <= budget:
            break
        p.unlink(missing_ok=True)
        total -= size


# ------------------------------------------------------------------ the compact form
#: the separator of a name list stored as one string (a list holding it is stored as a list)
_SEP = "\x00"
_INTS = (np.int8, np.int16, np.int32, np.int64)


def _pack(cn: Any) -> dict[str, tuple]:
    """The fields of ``cn`` (an object, or its ``vars``; all but ``_*``: what runs learned),
    each encoded by :func:`_pack_value`."""
    fields = cn if isinstance(cn, dict) else vars(cn)
    return {f: _pack_value(v) for f, v in fields.items() if not f.startswith("_")}


def _pack_value(v: Any) -> tuple:
    """``(code, ...)``: a compact encoding of one field that :func:`_unpack_value` restores
    exactly (the same type, dtype, values and order)."""
    if isinstance(v, np.ndarray):
        return _pack_array(v)
    if type(v) is list and v:
        kinds = set(map(type, v))
        if kinds == {str}:
            if not any(_SEP in x for x in v):
                return ("names", _SEP.join(v), len(v))
        elif kinds == {dict}:
            return _pack_dicts(v)
        elif kinds == {tuple}:
            try:
                table = list(dict.fromkeys(v))
            except TypeError:  # an unhashable member
                return ("plain", v)
            if not all(type(x) is str for t in table for x in t):  # 1 == 1.0 == True: kept
                return ("plain", v)
            index = dict(zip(table, range(len(table))))
            return ("table", table, _pack_array(np.fromiter(map(index.__getitem__, v),
                                                           dtype=np.int64, count=len(v))))
    return ("plain", v)


def _pack_array(a: np.ndarray) -> tuple:
    if a.size and a.dtype.kind in "biuf" and a.dtype.itemsize in (1, 2, 4, 8):
        bits = a.reshape(-1).view(f"u{a.dtype.itemsize}")
        if (bits == bits[0]).all():  # one value (bit for bit: -0.0 and nan kept)
            return ("const", a.dtype.str, a.shape, a.reshape(-1)[:1].copy())
        if a.dtype.kind in "iu" and a.dtype.itemsize > 1:
            lo, hi = int(a.min()), int(a.max())
            for t in _INTS:
                if np.dtype(t).itemsize >= a.dtype.itemsize:
                    break
                if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
                    return ("narrow", a.dtype.str, a.shape, a.reshape(-1).astype(t))
        if a.dtype.kind == "f" and a.ndim == 2 and a.shape[0] > 64 and a.shape[1]:
            rows = np.ascontiguousarray(a).view(np.dtype((np.void, a.dtype.itemsize * a.shape[1])))
            uniq, inverse = np.unique(rows.reshape(-1), return_inverse=True)
            if 4 * uniq.size <= a.shape[0]:  # few distinct rows (the laws' parameters)
                return ("rows", a.dtype.str, a.shape, uniq.view(a.dtype).reshape(-1, a.shape[1]),
                        _pack_array(inverse.reshape(-1).astype(np.int64)))
    return ("array", a)


def _pack_dicts(v: list[dict]) -> tuple:
    """Dicts by their key sequences (a net has a few: a compute op's tags, a transfer's):
    ``("dicts", n, [(keys, positions, columns), ...])``, a column being a list of values."""
    groups: dict[tuple, list[int]] = {}
    for i, d in enumerate(v):
        groups.setdefault(tuple(d), []).append(i)
    if not all(type(k) is str for keys in groups for k in keys):  # 1 == True as keys: kept
        return ("plain", v)
    out = []
    for keys, pos in groups.items():
        rows = [v[i] for i in pos] if len(groups) > 1 else v
        cols = [list(map(dict.__getitem__, rows, repeat(k))) for k in keys]
        out.append((keys, _pack_array(np.array(pos, dtype=np.int64)), cols))
    return ("dicts", len(v), out)


def _unpack(cls: type, fields: Mapping[str, tuple]) -> Any:
    """The object of class ``cls`` (a :class:`CompiledNet`) whose fields :func:`_pack` encoded,
    every array read-only as the compiler leaves it."""
    obj = cls.__new__(cls)
    obj.__dict__.update((f, _unpack_value(c)) for f, c in fields.items())
    return obj


def _dict_maker(keys: tuple) -> Callable[..., dict]:
    """``f(v0, v1, ...) -> {keys[0]: v0, keys[1]: v1, ...}`` as a dict display (1.5x faster than
    ``dict(zip(keys, values))`` over ~400 k rows); the keys are strings (their ``repr`` a
    literal)."""
    if not all(type(k) is str for k in keys):
        raise ValueError("tag keys must be strings")
    args = ", ".join(f"v{j}" for j in range(len(keys)))
    body = ", ".join(f"{k!r}: v{j}" for j, k in enumerate(keys))
    return eval(f"lambda {args}: {{{body}}}")  # noqa: S307 - keys are repr'd strings


def _unpack_value(c: tuple) -> Any:
    code = c[0]
    if code == "plain":
        return c[1]
    if code == "names":
        return c[1].split(_SEP) if c[2] else []
    if code == "table":
        table = c[1]
        return [table[i] for i in _unpack_value(c[2]).tolist()]
    if code == "dicts":
        n, groups = c[1], c[2]
        rows: list = []
        order = []
        for keys, pos, cols in groups:
            at = _unpack_value(pos)
            rows.extend(map(_dict_maker(keys), *cols) if keys else ({} for _ in range(at.size)))
            order.append(at)
        at = np.concatenate(order) if order else np.zeros(0, dtype=np.int64)
        if len(rows) != n or at.size != n or (n and (at.min() < 0 or at.max() >= n
                                                     or not np.bincount(at).all())):
            raise ValueError("the tag dicts do not cover the list")
        if len(groups) == 1:
            return rows
        where = np.empty(n, dtype=np.int64)
        where[at] = np.arange(n, dtype=np.int64)
        return list(map(rows.__getitem__, where.tolist()))
    if code == "array":
        a = np.ascontiguousarray(c[1])
    elif code == "const":
        a = np.full(c[2], c[3][0], dtype=np.dtype(c[1]))
    elif code == "narrow":
        a = c[3].astype(np.dtype(c[1])).reshape(c[2])
    elif code == "rows":
        a = np.ascontiguousarray(c[3][_unpack_value(c[4])].astype(np.dtype(c[1]), copy=False)
                                 .reshape(c[2]))
    else:
        raise ValueError(f"unknown field code {code!r}")
    a.setflags(write=False)
    return a


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

    key = _cache_key(variant, model, cluster, granularity, options)
    if key is None:
        net = build()
        return compile_net(net, share=False), copy.deepcopy(dict(net.meta)), False
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
    del net  # a large net's objects freed before the file is encoded (peak memory)
    size = cn.n_transitions + len(cn.place_names)
    packed: dict[str, tuple] = {}
    if size >= COMPACT_FROM:  # encoded, the scattered objects freed, then made anew
        packed, rest = _encode_objects(cn)
        del cn
        _trim()
        cn = _rebuild(packed, rest)
    _keep(key, cn, meta)
    if path is not None and size <= MAX_ELEMENTS:
        # a snapshot of the fields: a run adds ``_*`` ones (what it learned) while it is written
        args = (folder, path, dict(vars(cn)), copy.deepcopy(meta), packed)
        if size < COMPACT_FROM:
            _store(*args)
        else:  # ~0.3 s of CPU for ~0.9 M elements: written while the caller simulates
            writer = threading.Thread(target=_store, args=args, name="sgdnet-netcache-write")
            writer.start()
            _WRITERS.append(writer)
    return cn, copy.deepcopy(meta), False


def _trim() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``; elsewhere
    nothing): the freed net's large blocks (its dicts' tables) stay in the heap otherwise, 0.17
    GB of the 1,024-worker net's (issue #41)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc
        pass


def _encode_objects(cn: Any) -> tuple[dict[str, tuple], dict[str, Any]]:
    """``(encodings, the rest)`` of a compiled net's fields: its names, tags and tuples encoded
    (:func:`_pack_value`, the file's form too), its arrays and scalars as they are.

    A compiled net's names, tags and tuples are the net's own objects, scattered over the
    memory of the ~0.9 M elements just freed, so that most of that memory stays allocated
    around them (fine sync-PS net of ResNet-50 on 1,024 workers: 1.09 GB resident after the net
    is freed). Encoded, then freed (the caller drops the net), then made anew from their
    encodings (:func:`_rebuild`), they are contiguous and the rest is given back before the run
    allocates its own tables (issue #41: the CLI's peak was the build's leftovers plus the
    run's). Arrays are freed whole by numpy: kept as they are.
    """
    from ._gc import paused_gc

    with paused_gc():
        packed = {f: _pack_value(v) for f, v in vars(cn).items()
                  if not f.startswith("_") and isinstance(v, list)}
    kept = {f: (None if f in packed else v) for f, v in vars(cn).items() if not f.startswith("_")}
    return packed, kept


def _rebuild(packed: Mapping[str, tuple], kept: Mapping[str, Any]) -> Any:
    """The :class:`CompiledNet` of :func:`_encode_objects`'s two halves, fields in order."""
    from ._gc import paused_gc
    from .net.compiled import CompiledNet

    with paused_gc():
        fresh = CompiledNet.__new__(CompiledNet)
        fresh.__dict__.update((f, _unpack_value(packed[f]) if f in packed else v)
                              for f, v in kept.items())
    return fresh


def flush() -> None:
    """Wait for the cache files still being written in the background (nets of
    :data:`COMPACT_FROM` elements and more); the interpreter also waits for them at exit."""
    while _WRITERS:
        _WRITERS.pop().join()


def holds(variant: str, model: Any, cluster: Any, granularity: str,
          options: Mapping[str, Any], *, disk: bool = True) -> bool:
    """Whether :func:`load_or_build` with these inputs would find the net without building it
    (in memory, or a file under its key when ``disk``), so that what is checked before a build
    (:func:`sgdnet.variants.budget.spec_work_check`) can be skipped."""
    key = _cache_key(variant, model, cluster, granularity, options)
    if key is None:
        return False
    with _MEMORY_LOCK:
        if key in _MEMORY:
            return True
    folder = cache_dir() if disk else None
    return folder is not None and (folder / f"{key}.pkl").is_file()


def _cache_key(variant: str, model: Any, cluster: Any, granularity: str,
               options: Mapping[str, Any]) -> str | None:
    """:func:`net_key` of these inputs, or None when an option's value is one its ``repr``
    might not tell apart (such a net is never cached)."""
    if not all(_plain(v) for v in options.values()):
        return None
    return net_key(variant, model, cluster, granularity, options)


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
