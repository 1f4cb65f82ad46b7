"""Reading files a user hands in (profile JSON, Chrome traces, PNML) without surprises.

A path that is a directory, a file beyond the ``max_file_bytes`` limit, text that is not UTF-8
(a UTF-16 export), JSON nested deeper than ``max_depth`` or holding integers longer than Python
converts, each end in the caller's :class:`~sgdnet.SgdnetError` naming the file and the fix,
before anything large is parsed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import SgdnetError
from .limits import limit

__all__ = ["read_text", "load_json", "check_depth"]


def read_text(path: str | os.PathLike, what: str, error: type[SgdnetError]) -> str:
    """The UTF-8 text of ``path`` (a regular file within the size limit)."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} {str(p)!r} is a directory; give a file")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise error(f"{what} {str(p)!r}: cannot read: {e.strerror or e}") from None
    lim = limit("max_file_bytes")
    if size > lim:
        raise error(f"{what} {str(p)!r} is {size:,} bytes, beyond the limit {lim:,} "
                    "(max_file_bytes; raise it with SGDNET_MAX_FILE_BYTES=N if it is genuine)")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"{what} {str(p)!r}: cannot read: {e.strerror or e}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise error(f"{what} {str(p)!r} is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{what} {str(p)!r} is not UTF-8 text ({e.reason} at byte {e.start}); "
                    "save it as UTF-8") from None


def check_depth(text: str, where: str, error: type[SgdnetError]) -> None:
    """Refuse JSON text whose brackets nest deeper than ``max_depth`` (counted outside
    strings, in one pass, so a 100,000-deep document is refused without recursing)."""
    max_depth = limit("max_depth")
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise error(f"{where}: JSON nested deeper than {max_depth} levels; not a profile "
                            "or trace sgdnet writes or reads")
        elif ch in "]}":
            depth -= 1


def load_json(text: str, where: str, error: type[SgdnetError]) -> Any:
    """``json.loads(text)`` with every failure as ``error`` (syntax with line and column, depth,
    integers too long to convert)."""
    if text.count("[") + text.count("{") > limit("max_depth"):  # else it cannot be too deep
        check_depth(text, where, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") \
            from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply") from None
    except ValueError as e:  # int longer than sys.get_int_max_str_digits()
        raise error(f"{where}: unreadable JSON value ({' '.join(str(e).split())})") from None
