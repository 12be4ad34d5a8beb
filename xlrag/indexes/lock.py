"""The per-index writer lock: one writer at a time, readers never blocked.

Two Chroma clients writing one directory at once lose vectors for good (the
HNSW files of one overwrite the other's), so every write path (index, delete,
check --repair) holds this lock. Readers never take it. The holder's pid, host
and command are kept in a sidecar file so a waiting writer can say whom it waits
for. The lock is a ``filelock`` in the index directory: it serialises writers
that share that directory (one machine, or a shared filesystem with working
``flock``). With a Chroma server and writers on several machines each using its
own directory, it does not; run one writer at a time there.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from xlrag.errors import IndexDirError, IndexLockedError

__all__ = ["LOCK_FILE", "WriterLock"]

LOCK_FILE = ".xlrag-write.lock"
HOLDER_FILE = ".xlrag-write.holder"


class WriterLock:
    """``with WriterLock(dir, wait=False): ...``; ``on_wait`` gets one message if it must wait."""

    def __init__(self, index_dir: str | Path, *, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                 create: bool = True):
        from filelock import FileLock

        self.index_dir = Path(index_dir)
        self.wait = wait
        self.on_wait = on_wait
        if self.index_dir.exists() and not self.index_dir.is_dir():
            raise IndexDirError(f"--index-dir {self.index_dir} is a file, not a directory; choose a directory")
        if not create and not self.index_dir.is_dir():
            from xlrag.errors import IndexNotFoundError

            raise IndexNotFoundError(self.index_dir, "no such directory")
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.index_dir / LOCK_FILE))

    def holder(self) -> str:
        try:
            h = json.loads((self.index_dir / HOLDER_FILE).read_text(encoding="utf-8"))
            return f"pid {h['pid']} on {h['host']} since {h['since']}: {h['command']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"

    def __enter__(self) -> WriterLock:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            if not self.wait:
                raise IndexLockedError(self.index_dir, self.holder()) from None
            if self.on_wait:
                self.on_wait(f"index {self.index_dir} is being written by {self.holder()}; waiting for it to finish")
            self._lock.acquire()
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:300],
                  "since": datetime.now(UTC).isoformat(timespec="seconds")}
        (self.index_dir / HOLDER_FILE).write_text(json.dumps(record), encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        (self.index_dir / HOLDER_FILE).unlink(missing_ok=True)
        self._lock.release()
