"""Where xlrag writes: the one rule for every output path a user names.

- An output is a file, or for a run a folder xlrag owns; its folder exists and can be
  written. Every command checks this before any model runs, so a typo costs a second,
  not an hour of answers.
- An existing file is replaced or appended to only when it holds xlrag's own output of
  that :class:`Kind` (each writer names its kind); anything else is left untouched and
  refused in one line naming the file and the first line that is not xlrag's.
- Of a file xlrag appends to (verdicts, run records), only a torn *last* line is repaired:
  a line a kill cut mid-write (no newline, the start of a JSON object). A bad line anywhere
  else means the file is not xlrag's, and it is refused as it is.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlrag.errors import OutputPathError
from xlrag.jsonl import LineError, parse_line

__all__ = ["Kind", "check_output", "check_run_folder", "document_kind", "jsonl_kind", "lines_kind",
           "read_appended"]

# why one line (or the whole text) is not xlrag's output of a kind; None when it is
Check = Callable[[str], str | None]


@dataclass(frozen=True)
class Kind:
    """A kind of file xlrag writes: ``what`` it holds (for messages), an ``example`` file name,
    and ``check``, which tells one of its lines (``by_line``; ``jsonl`` files may end in a torn
    line) or its whole text from anything else."""

    what: str
    example: str
    check: Check
    by_line: bool = True
    jsonl: bool = False


def jsonl_kind(what: str, example: str, *keys: str) -> Kind:
    """One JSON object a line, each holding ``keys``."""

    def line(text: str) -> str | None:
        try:
            obj = parse_line(text)  # the one JSONL line reader (lone surrogates, bad UTF-8)
        except LineError as e:
            return str(e)
        if not isinstance(obj, dict):
            return f"a JSON {type(obj).__name__}, not an object"
        missing = [k for k in keys if k not in obj]
        return f"an object without {', '.join(map(repr, missing))}" if missing else None

    return Kind(what, example, line, jsonl=True)


def lines_kind(what: str, example: str, line: Check) -> Kind:
    return Kind(what, example, line)


def document_kind(what: str, example: str, whole: Check) -> Kind:
    return Kind(what, example, whole, by_line=False)


def _refuse(option: str, path: Path, kind: Kind, line: int | None, why: str) -> OutputPathError:
    where = f"{path}:{line}" if line else str(path)
    named = f"{option} {path}" if option else str(path)
    return OutputPathError(f"{named} holds something other than {kind.what} written by xlrag "
                           f"({where}: {why}); it is left untouched: give a new file, or move this one away")


def _scan(path: Path, kind: Kind, option: str) -> tuple[list[dict[str, Any]], int]:
    """The records of a ``jsonl`` kind's file (or nothing, for a ``lines`` kind) and the byte
    offset where its complete lines end; any line not of ``kind`` but a torn last one raises."""
    raw = path.read_bytes()
    if not kind.by_line:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _refuse(option, path, kind, None, "it is not UTF-8 text") from None
        why = kind.check(text)
        if why:
            raise _refuse(option, path, kind, None, why)
        return [], len(raw)
    records: list[dict[str, Any]] = []
    lines = raw.splitlines(keepends=True)
    end = 0
    for n, line in enumerate(lines, 1):
        if not line.endswith(b"\n") and n == len(lines) and kind.jsonl and line.lstrip().startswith(b"{"):
            break  # torn: the process died mid-write; the record is made again
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _refuse(option, path, kind, n, f"not UTF-8 (byte 0x{line[e.start]:02x})") from None
        if text.strip():
            why = kind.check(text)
            if why:
                raise _refuse(option, path, kind, n, why)
            if kind.jsonl:
                records.append(parse_line(text))
        end += len(line)
    return records, end


def _writable(folder: Path, option: str, path: Path) -> None:
    why = None
    if not os.access(folder, os.W_OK | os.X_OK):
        why = "permission denied"
    else:
        # os.access trusts mode bits; a read-only mount or a full quota shows only on a real write
        try:
            fd, probe = tempfile.mkstemp(prefix=".xlrag-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            why = e.strerror or type(e).__name__
    if why:
        raise OutputPathError(f"{option} {path}: the folder {folder} cannot be written ({why}); "
                              f"choose a folder you can write to")


def check_output(path: str | Path, option: str, kind: Kind) -> Path:
    """``path`` as a file of ``kind`` xlrag may write: not a folder, in a folder that exists
    and can be written, and new, empty or already of ``kind``. Raises
    :class:`~xlrag.errors.OutputPathError` in one line otherwise; reads the file, never writes it."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{option} {path} is a directory; give a file path such as {path / kind.example}")
    if not path.parent.is_dir():
        raise OutputPathError(f"{option} {path}: the folder {path.parent} does not exist; create it first, "
                              f"or write elsewhere")
    _writable(path.parent, option, path)
    if path.exists():
        if not path.is_file():
            raise OutputPathError(f"{option} {path} is not a regular file; give a file path such as "
                                  f"{path.parent / kind.example}")
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{option} {path} cannot be written (permission denied); make it writable, "
                                  f"or give another file")
        _scan(path, kind, option)
    return path


def read_appended(path: str | Path, kind: Kind, *, option: str = "--out", repair: bool = False
                  ) -> list[dict[str, Any]]:
    """The records of ``path``, a file of the ``jsonl`` ``kind`` xlrag appends to (none when it
    does not exist). A torn last line is left out, and with ``repair`` cut off the file; any
    other line that is not a record of ``kind`` raises :class:`~xlrag.errors.OutputPathError`
    naming it, and the file is not touched."""
    path = Path(path)
    if not path.exists():
        return []
    records, end = _scan(path, kind, option)
    if repair and end < path.stat().st_size:
        with path.open("r+b") as fh:
            fh.truncate(end)
    return records


def check_run_folder(path: str | Path, option: str, what: str, owns: Callable[[str], bool]) -> Path:
    """``path`` as a folder xlrag may write ``what`` into: new, empty, or holding only the
    entries ``owns`` (an entry's name) says xlrag writes there; its nearest existing folder
    can be written. Raises :class:`~xlrag.errors.OutputPathError` in one line otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is a file; give a folder for the {what} (a new one is made)")
    if path.is_dir():
        foreign = sorted(p.name for p in path.iterdir() if not owns(p.name))
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise OutputPathError(f"{option} {path} holds files that are not a {what}'s ({shown}); give a new "
                                  f"or empty folder, or the folder of an earlier run")
        _writable(path, option, path)
        return path
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{option} {path}: {parent} is a file, not a folder; give another path")
    _writable(parent, option, path)
    return path
