"""The per-index writer lock: one writer at a time, readers never blocked.

Two Chroma clients writing one directory at once lose vectors for good (the
HNSW files of one overwrite the other's), so every write path (index, delete,
check --repair) holds this lock. Readers never take it. It is a
:class:`~xlrag.locking.FolderLock` in the index directory, so it serialises writers
that share that directory; with a Chroma server and writers on several machines each
using its own directory, it does not: run one writer at a time there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from xlrag.errors import IndexDirError, IndexLockedError, IndexNotFoundError
from xlrag.locking import FolderLock

__all__ = ["LOCK_FILE", "WriterLock"]

_NAME = ".xlrag-write"
LOCK_FILE = f"{_NAME}.lock"


class WriterLock(FolderLock):
    """``with WriterLock(dir, wait=False): ...``; ``on_wait`` gets one message if it must wait."""

    def __init__(self, index_dir: str | Path, *, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                 create: bool = True):
        self.index_dir = Path(index_dir)
        if self.index_dir.exists() and not self.index_dir.is_dir():
            raise IndexDirError(f"--index-dir {self.index_dir} is a file, not a directory; choose a directory")
        if not create and not self.index_dir.is_dir():
            raise IndexNotFoundError(self.index_dir, "no such directory")
        told = None if on_wait is None else (
            lambda holder: on_wait(f"index {self.index_dir} is being written by {holder}; waiting for it to finish"))
        super().__init__(self.index_dir, _NAME, lambda holder: IndexLockedError(self.index_dir, holder),
                         wait=wait, on_wait=told)
