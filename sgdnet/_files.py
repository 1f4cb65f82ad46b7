"""Reading files a user hands in (profile JSON, Chrome traces, PNML) without surprises.

YAML (cluster files, study configs, device files) is read by :func:`load_yaml` only: the same
text checks, PyYAML's safe loader (no Python tags), its recursion on deep nesting caught, and
the document's size counted with its aliases expanded (:func:`check_expanded_size`: a few lines
of ``&x [*w, *w, ...]`` expand to billions of nodes, which any later walk would take forever
over).

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

__all__ = ["read_text", "load_json", "check_depth", "load_yaml", "check_expanded_size"]


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


def check_expanded_size(data: Any, where: str, error: type[SgdnetError]) -> None:
    """Refuse a parsed document whose nodes, counted with YAML aliases expanded (a shared
    object counted each time it is referenced), exceed the ``max_config_nodes`` limit, or that
    nests deeper than ``max_depth``. Stops counting at the limit, so it is cheap."""
    budget, max_depth = limit("max_config_nodes"), limit("max_depth")
    stack: list[tuple[Any, int]] = [(data, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > budget:
            raise error(f"{where} has more than {budget:,} values once its YAML aliases "
                        "(&anchor / *alias) are expanded; write it out without nested aliases "
                        "(limit max_config_nodes, raise it with SGDNET_MAX_CONFIG_NODES=N)")
        if depth > max_depth:
            raise error(f"{where} nests deeper than {max_depth} levels (limit max_depth, raise "
                        "it with SGDNET_MAX_DEPTH=N)")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
            seen += len(node)  # the keys
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)


def load_yaml(path: str | os.PathLike | None, what: str, error: type[SgdnetError], *,
              text: str | None = None) -> Any:
    """The document of a YAML (or JSON) file, or of ``text`` when given (``path`` then only
    names it), with every failure as ``error``: the checks of :func:`read_text`, a syntax error
    with its place, nesting beyond ``max_depth`` (PyYAML recurses: refused before it runs out
    of stack), and more than ``max_config_nodes`` values with its aliases expanded."""
    import yaml

    where = f"{what} {str(path)!r}" if path is not None else what
    if text is None:
        text = read_text(path, what, error)
    if text.count("[") + text.count("{") + text.count("\n") > limit("max_depth"):
        _check_yaml_depth(text, where, error)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise error(f"{where}: not valid YAML ({' '.join(str(e).split())[:300]})") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read (limit max_depth = "
                    f"{limit('max_depth')})") from None
    except ValueError as e:  # an integer longer than Python converts (int_max_str_digits)
        raise error(f"{where}: unreadable YAML value ({' '.join(str(e).split())[:200]})") \
            from None
    check_expanded_size(data, where, error)
    return data


def _check_yaml_depth(text: str, where: str, error: type[SgdnetError]) -> None:
    """Refuse YAML text nesting deeper than ``max_depth``, by flow brackets (outside quotes)
    and by block indentation, read in one pass without recursing."""
    max_depth = limit("max_depth")
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                break
        elif ch in "]}":
            depth -= 1
        elif ch == "\n":
            quote = ""  # a quote does not span lines in the block styles sgdnet's files use
    else:
        indents = sorted({len(line) - len(line.lstrip(" -")) for line in text.splitlines()
                          if line.strip()})
        if len(indents) <= max_depth:
            return
    raise error(f"{where}: YAML nested deeper than {max_depth} levels (limit max_depth, raise it "
                "with SGDNET_MAX_DEPTH=N); not a file sgdnet writes or reads")
