"""A study's table on disk (CSV or JSON Lines): column order, streaming writes with resume,
:func:`read_table`, and :class:`StudyResult`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import StudyError
from .rows import _JSONL_SUFFIXES, _METRIC_SET, _TAIL_COLUMNS, METRIC_COLUMNS

__all__ = ["read_table", "StudyResult"]

# ---------------------------------------------------------------------------- files
def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    raise StudyError(f"study output {str(path)!r}: unknown format {suffix or '(no suffix)'!r}; "
                     "use a .csv file or JSON Lines (.jsonl, .ndjson, .json)")


def table_path(out: str | os.PathLike | None, default: Path | None) -> Path | None:
    """The table file of a run given ``out`` (``None``: ``default``, the study's own), its
    format checked; a StudyError names a bad value."""
    if out is None:
        path = default
    elif isinstance(out, (str, os.PathLike)):
        path = Path(out)
    else:
        raise StudyError(f"out={out!r} must be a file path (str or os.PathLike), e.g. "
                         "'results.csv', or None to keep the rows in memory only")
    if path is not None:
        _format_of(path)
    return path


def resumed_rows(path: Path | None, ids: Sequence[str], resume: bool,
                 retry_errors: bool) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``(done, kept)`` of a study whose rows are ``ids``: its rows already in the table
    ``path`` (by ``row_id``; with ``retry_errors``, not those recorded with an error), and the
    rows of other studies that share the file (they stay). Nothing without ``resume``."""
    done: dict[str, dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    if path is not None and resume and path.exists():
        wanted = set(ids)
        for r in read_table(path):
            rid = str(r.get("row_id"))
            if rid in wanted and not (retry_errors and r.get("error")):
                done[rid] = r
            elif rid not in wanted:
                kept.append(r)
    return done, kept


_INT_RE = re.compile(r"^[-+]?\d+$")
_TEXT_COLUMNS = {"row_id", "seeds", "error"}


def _from_csv(key: str, text: str) -> Any:
    if key in _TEXT_COLUMNS:
        return text if text != "" else None
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if _INT_RE.match(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a study table written by :meth:`Study.run` (CSV or JSON Lines).

    A torn last line (a run killed while writing) is skipped; CSV cells are converted back to
    ``int`` / ``float`` / ``bool`` / ``None`` where they look like one.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of dict

    Raises
    ------
    StudyError
        Unknown file format, or a file that is not a study table (no ``row_id`` column).
    """
    p = Path(path)
    fmt = _format_of(p)
    if not p.exists():
        raise StudyError(f"study table {str(p)!r} does not exist")
    rows: list[dict[str, Any]] = []
    if p.is_dir():
        raise StudyError(f"study table {str(p)!r} is a directory; give the table's file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:  # a binary file, or a UTF-16 export
        raise StudyError(f"study table {str(p)!r} is not UTF-8 text ({e.reason} at byte "
                         f"{e.start}), so not a table a Study wrote; pass another path") from None
    if not text.strip():
        return rows
    if fmt == "jsonl":
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1 and not text.endswith("\n"):
                    break  # torn last line
                raise StudyError(f"study table {str(p)!r}: line {i + 1} is not JSON; fix or "
                                 "delete it (or start a new table)") from None
            if not isinstance(row, dict) or "row_id" not in row:
                raise StudyError(f"study table {str(p)!r}: line {i + 1} is not a study row "
                                 "(no 'row_id'); pass another out= path")
            rows.append(row)
        return rows
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader)
    except StopIteration:
        return rows
    if "row_id" not in header:
        raise StudyError(f"study table {str(p)!r} has no 'row_id' column, so it was not written by "
                         "a Study; pass another out= path")
    records = list(reader)
    for i, rec in enumerate(records):
        if len(rec) != len(header):
            if i == len(records) - 1:
                break  # torn last line
            raise StudyError(f"study table {str(p)!r}: row {i + 2} has {len(rec)} cells, header "
                             f"has {len(header)}; fix or delete it")
        rows.append({k: _from_csv(k, v) for k, v in zip(header, rec)})
    if rows and not text.endswith("\n"):
        # the last record parsed but may be cut inside its last cell: trust only complete lines
        rows.pop()
    return rows


def _util_key(col: str) -> tuple[str, int, str]:
    base, _, stat = col.rpartition("_")
    return (base, {"mean": 0, "max": 1}.get(stat, 2), stat)


def _order_columns(columns: Iterable[str], params: Sequence[str]) -> list[str]:
    """Table order: row_id, parameters, fixed metrics, utilisations, other metrics, seeds, error."""
    cols = list(dict.fromkeys(columns))
    present = set(cols)
    pset = set(params)
    head = [c for c in ("row_id",) if c in present]
    par = [c for c in params if c in present]
    par += [c for c in cols if c not in pset and c not in _METRIC_SET and c != "row_id"
            and not c.startswith("util_") and c not in _TAIL_COLUMNS and "." in c]
    metrics = [c for c in METRIC_COLUMNS if c in present]
    utils = sorted((c for c in cols if c.startswith("util_")), key=_util_key)
    placed = set(head) | set(par) | set(metrics) | set(utils) | set(_TAIL_COLUMNS)
    extra = [c for c in cols if c not in placed]
    tail = [c for c in _TAIL_COLUMNS if c in present]
    return head + par + metrics + utils + extra + tail


class TableLock:
    """An exclusive lock on a study table, held while a study reads and writes it.

    Two studies writing one file would lose rows (one replaces the file while the other appends
    to the replaced one), so the second is refused. The lock is ``flock`` on a sibling file
    ``<table>.lock`` (kept, never replaced); the operating system releases it when the process
    dies, so a killed study never leaves a stale lock.

    Raises
    ------
    StudyError
        Another process holds the lock, or the table's directory does not exist.
    """

    def __init__(self, path: Path):
        self.path = path.with_name(path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> TableLock:
        """Take the lock or raise :class:`StudyError` at once (never waits)."""
        if not self.path.parent.is_dir():
            raise StudyError(f"study output {str(self.path.parent / self.path.name[:-5])!r}: "
                             f"directory {str(self.path.parent)!r} does not exist; create it "
                             "first (sgdnet creates no directories)")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks, no protection
            self._fd = fd
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StudyError(f"study table {str(self.path)[:-5]!r} is being written by another "
                             "study (it holds the lock file "
                             f"{str(self.path)!r}); wait for it to finish, or pass another "
                             "out= path") from None
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (the lock file stays; it is empty)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TableLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


class _TableWriter:
    """Append rows to a CSV / JSON Lines file, flushing each; extends the CSV header on need.

    The caller holds the table's :class:`TableLock` for the writer's whole life.
    """

    def __init__(self, path: Path, rows: list[dict[str, Any]], params: Sequence[str]):
        self.path = path
        self.params = list(params)
        self.format = _format_of(path)
        self.columns: list[str] = []
        self._fh = None
        self.rewrite(rows)

    def _merge_columns(self, row: Mapping[str, Any]) -> bool:
        new = [k for k in row if k not in self.columns]
        if not new:
            return False
        self.columns = _order_columns([*self.columns, *new], self.params)
        return True

    def rewrite(self, rows: Iterable[dict[str, Any]]) -> None:
        """Write ``rows`` to the file from scratch (atomically) and reopen it for appending."""
        rows = list(rows)
        for r in rows:
            self._merge_columns(r)
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            if self.format == "csv":
                if self.columns:
                    w = csv.DictWriter(fh, fieldnames=self.columns, lineterminator="\n")
                    w.writeheader()
                    for r in rows:
                        w.writerow(r)
            else:
                for r in rows:
                    fh.write(json.dumps(r, allow_nan=False) + "\n")
        os.replace(tmp, self.path)
        self._rows = rows
        self._fh = open(self.path, "a", encoding="utf-8", newline="")

    def append(self, row: dict[str, Any]) -> None:
        """Append one row and flush it to the operating system."""
        if self.format == "csv" and self._merge_columns(row):
            self.rewrite([*self._rows, row])
            return
        self._rows.append(row)
        if self.format == "csv":
            buf = io.StringIO()
            csv.DictWriter(buf, fieldnames=self.columns, lineterminator="\n").writerow(row)
            line = buf.getvalue()
        else:
            line = json.dumps(row, allow_nan=False) + "\n"
        _write_whole(self._fh, line.encode("utf-8"))

    def close(self) -> None:
        """Close the file."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _write_whole(fh: Any, data: bytes) -> None:
    """Append ``data`` (one whole row) to the open table ``fh`` or nothing: a write that fails
    part-way (a full disk) is cut back to the previous end before the error is raised, so the
    table never keeps a torn last line (:func:`read_table` would skip one all the same, and a
    resumed study run that row again)."""
    fh.flush()
    fd = fh.fileno()
    end = os.fstat(fd).st_size
    done = 0
    try:
        while done < len(data):
            done += os.write(fd, data[done:])
    except OSError:
        try:
            os.ftruncate(fd, end)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------------------- results
class StudyResult:
    """The table of a finished (or interrupted-and-resumed) study.

    Attributes
    ----------
    rows : list of dict
        One flat row per configuration, in grid order.
    ran : int
        Rows computed by this call of :meth:`Study.run`.
    resumed : int
        Rows taken from an existing output file instead.
    out : pathlib.Path or None
        The table file.
    elapsed_s : float
        Wall-clock seconds of the run.
    params : list of str
        The parameter columns.
    """

    def __init__(self, rows: list[dict[str, Any]], ran: int, resumed: int, out: Path | None,
                 elapsed_s: float, params: Sequence[str] = ()):
        self.rows = rows
        self.params = list(params)
        self.ran = ran
        self.resumed = resumed
        self.out = out
        self.elapsed_s = elapsed_s

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Rows whose simulation raised an :class:`~sgdnet.SgdnetError` (``error`` is set)."""
        return [r for r in self.rows if r.get("error")]

    @property
    def columns(self) -> list[str]:
        """All column names, in table order."""
        seen: dict[str, None] = {}
        for r in self.rows:
            for k in r:
                seen.setdefault(k, None)
        return _order_columns(seen, self.params)

    def frame(self):
        """The table as a :class:`pandas.DataFrame` (needs pandas: ``pip install sgdnet[pandas]``).

        Raises
        ------
        StudyError
            pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise StudyError("StudyResult.frame() needs pandas; pip install 'sgdnet[pandas]' or "
                             "use StudyResult.rows (a list of dicts)") from None
        return pd.DataFrame(self.rows, columns=self.columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]

    def __repr__(self) -> str:
        where = f", out={str(self.out)!r}" if self.out else ""
        return (f"StudyResult({len(self.rows)} rows: ran={self.ran}, resumed={self.resumed}, "
                f"failed={len(self.failed)}{where})")
