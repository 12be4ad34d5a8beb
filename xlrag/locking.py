"""A lock on a folder that says who holds it: one writer at a time, readers never blocked.

The lock is a ``filelock`` file in the folder; the holder's pid, host, command and start
time go in a sidecar file beside it, so the process that finds it taken can name whom it
waits for. It serialises writers that share the folder (one machine, or a shared
filesystem with working ``flock``). The index writer lock and the run-folder lock are two
uses of it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from xlrag.errors import XlragError

__all__ = ["FolderLock"]


class FolderLock:
    """``with FolderLock(folder, name, busy): ...``: held, or ``busy(holder)`` is raised, or
    with ``wait`` the lock is waited for, ``on_wait`` told once. The folder is created."""

    def __init__(self, folder: str | Path, name: str, busy: Callable[[str], XlragError], *, wait: bool = False,
                 on_wait: Callable[[str], None] | None = None):
        from filelock import FileLock

        self.folder = Path(folder)
        self.busy, self.wait, self.on_wait = busy, wait, on_wait
        self.folder.mkdir(parents=True, exist_ok=True)
        self._holder_file = self.folder / f"{name}.holder"
        self._lock = FileLock(str(self.folder / f"{name}.lock"))

    def holder(self) -> str:
        try:
            h = json.loads(self._holder_file.read_text(encoding="utf-8"))
            return f"pid {h['pid']} on {h['host']} since {h['since']}: {h['command']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"

    def __enter__(self) -> FolderLock:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            if not self.wait:
                raise self.busy(self.holder()) from None
            if self.on_wait:
                self.on_wait(self.holder())
            self._lock.acquire()
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:300],
                  "since": datetime.now(UTC).isoformat(timespec="seconds")}
        self._holder_file.write_text(json.dumps(record), encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        self._holder_file.unlink(missing_ok=True)
        self._lock.release()
