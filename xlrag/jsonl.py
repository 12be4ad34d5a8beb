"""Reading JSONL input files with errors that name the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xlrag.errors import CorpusError, CorpusRowError

__all__ = ["read_objects"]


def read_objects(path: str | Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of the ``what`` file at ``path``.

    A missing file, a line that is not UTF-8 or not JSON, or one that is not a JSON object is
    an error naming the file and line; no row is skipped in silence.
    """
    path = Path(path)
    if not path.is_file():
        why = "is a directory" if path.is_dir() else "does not exist"
        raise CorpusError(f"{what} file {path} {why}")
    # bytes, decoded line by line: text mode would raise a bare UnicodeDecodeError, without the line
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusRowError(path, n, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                                     f"save the file as UTF-8", skippable=False) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusRowError(path, n, f"invalid JSON ({e.msg})", skippable=False) from None
            if not isinstance(row, dict):
                raise CorpusRowError(path, n, f"each line must be a JSON object, not a JSON {type(row).__name__}",
                                 skippable=False)
            yield n, row
