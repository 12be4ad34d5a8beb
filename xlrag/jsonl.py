"""Reading JSONL input files with errors that name the file and the line.

The one owner of what a line of a user's JSONL file may hold, for every reader: corpora,
queries, eval items, labels, territories, and the verdict and record files xlrag resumes
from. A line that is not UTF-8, not JSON, not an object, or that holds text no file can store
(a lone surrogate such as ``"\\ud83d"``: half an emoji, left by a broken JSON export) is an
error naming the file and the line; a reader that may skip rows (``xlrag index --skip-bad``)
gets it as a value, the others as an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from xlrag.errors import CorpusError, CorpusRowError

__all__ = ["LineError", "encoding_of", "open_text", "parse_line", "read_objects", "read_rows",
           "undecodable", "unencodable"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# a JSON escape of a surrogate: only such a line can decode to a lone one
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class LineError(ValueError):
    """One line cannot be read as a JSON value; the message says why, for a user."""


def encoding_of(path: Path, what: str) -> str:
    """UTF-8, with or without a BOM, or UTF-16 with its BOM (what spreadsheet exports write)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as e:
        raise CorpusError(f"cannot read {what} file {path}: {e.strerror or e}; check its permissions") from None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    return "utf-8-sig"  # also reads plain UTF-8


def open_text(path: Path, what: str, newline: str | None = None) -> TextIO:
    """``path`` opened for reading text line by line: bytes that do not decode are kept as
    lone surrogates (:func:`undecodable` names them per line), so one bad line does not make
    the whole file unreadable."""
    encoding = encoding_of(path, what)
    errors = "surrogatepass" if encoding == "utf-16" else "surrogateescape"
    return path.open(encoding=encoding, errors=errors, newline=newline)


def undecodable(text: str) -> str | None:
    """Why raw ``text`` read by :func:`open_text` is not text (a byte that is not UTF-8, a
    lone UTF-16 half), or None."""
    bad = _SURROGATE.search(text)
    if bad is None:
        return None
    code = ord(bad.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for an undecodable byte
        return f"not UTF-8 text (byte 0x{code - 0xDC00:02x} at column {bad.start() + 1}); save the file as UTF-8"
    return f"not UTF-16 text (a lone surrogate at column {bad.start() + 1}); save the file as UTF-8"


def unencodable(value: Any, where: str = "") -> str | None:
    """Why ``value`` (a parsed JSON value) holds text that cannot be written anywhere: the
    field and the lone surrogate, or None."""
    if isinstance(value, str):
        bad = _SURROGATE.search(value)
        if bad is None:
            return None
        field = f"field {where!r}" if where else "the value"
        return (f"{field} holds a lone surrogate {bad.group(0).encode('unicode_escape').decode()} at character "
                f"{bad.start() + 1} (half an emoji, cut by a broken export), which no file can store")
    if isinstance(value, dict):
        for key, item in value.items():
            if _SURROGATE.search(str(key)):
                return f"a key holds a lone surrogate ({unencodable(str(key))})"
            found = unencodable(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = unencodable(item, f"{where}[{i}]")
            if found:
                return found
    return None


def parse_line(line: str | bytes) -> Any:
    """The JSON value on ``line``; :class:`LineError` if the line is not UTF-8, not JSON, or
    holds a lone surrogate."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="surrogateescape")
    why = undecodable(line)
    if why:
        raise LineError(why)
    try:
        value = json.loads(line)
    except json.JSONDecodeError as e:
        raise LineError(f"invalid JSON ({e.msg} at column {e.colno})") from None
    if _ESCAPED_SURROGATE.search(line):  # a valid pair passes: only a lone half is refused
        why = unencodable(value)
        if why:
            raise LineError(why)
    return value


def read_rows(path: str | Path, what: str, *,
              skippable: bool = True) -> Iterator[tuple[int, dict[str, Any] | CorpusRowError]]:
    """``(line number, object or the error that line is)`` for every non-blank line of the
    ``what`` file at ``path``: a bad line is a value, for a reader that may skip it."""
    path = Path(path)
    if not path.is_file():
        why = "is a directory" if path.is_dir() else "does not exist"
        raise CorpusError(f"{what} file {path} {why}")
    try:
        with open_text(path, what) as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = parse_line(line)
                except LineError as e:
                    yield n, CorpusRowError(path, n, str(e), skippable=skippable)
                    continue
                if not isinstance(row, dict):
                    yield n, CorpusRowError(path, n, f"each line must be a JSON object, not a JSON "
                                                     f"{type(row).__name__}", skippable=skippable)
                    continue
                yield n, row
    except UnicodeError as e:  # only a UTF-16 file cut mid-character is left to fail here
        raise CorpusError(f"{what} file {path} is not UTF-8 or UTF-16 text ({getattr(e, 'reason', e)}); save it as "
                          "UTF-8") from None
    except OSError as e:
        raise CorpusError(f"cannot read {what} file {path}: {e.strerror or e}; check its permissions") from None


def read_objects(path: str | Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of the ``what`` file at ``path``.

    A missing file, or a line that is not UTF-8, not JSON, not a JSON object or holds a lone
    surrogate, is an error naming the file and line; no row is skipped in silence.
    """
    for n, row in read_rows(path, what, skippable=False):
        if isinstance(row, CorpusRowError):
            raise row
        yield n, row
