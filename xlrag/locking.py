"""A lock on a folder that says who holds it: one writer at a time, readers never blocked.

The lock is an ``flock`` on a file in the folder; the holder's pid, host, command and start
time go in a sidecar file beside it, so the process that finds it taken can name whom it
waits for. It serialises writers that share the folder (one machine, or a shared
filesystem with working ``flock``). The index writer lock, the run-folder lock and the lock
of ``eval judge --out`` are uses of it.

Both files are removed when the lock is released: they sit beside a user's outputs. The
lock file is unlinked while still held, and a process that wins the lock on a file already
unlinked (it opened it just before) lets go and tries again, so two holders never coexist.
Where ``fcntl`` is missing (Windows) ``filelock`` does the locking and its file stays.
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


try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class _Flock:
    """An exclusive ``flock`` on ``path`` whose file is gone once it is released."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, blocking: bool) -> bool:
        """True when held; False when another process holds it and ``blocking`` is off."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)  # won on a file its last holder already removed: the lock is the new file's

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)  # while held: a waiter then finds its file gone and retries
            os.close(self._fd)
            self._fd = None


class _FileLock:
    """``filelock``'s lock where ``fcntl`` is missing; its file stays beside the folder's files."""

    def __init__(self, path: Path):
        from filelock import FileLock

        self._lock = FileLock(str(path))

    def acquire(self, blocking: bool) -> bool:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=-1 if blocking else 0)
        except Timeout:
            return False
        return True

    def release(self) -> None:
        self._lock.release()


class FolderLock:
    """``with FolderLock(folder, name, busy): ...``: held, or ``busy(holder)`` is raised, or
    with ``wait`` the lock is waited for, ``on_wait`` told once. The folder is created."""

    def __init__(self, folder: str | Path, name: str, busy: Callable[[str], XlragError], *, wait: bool = False,
                 on_wait: Callable[[str], None] | None = None):
        self.folder = Path(folder)
        self.busy, self.wait, self.on_wait = busy, wait, on_wait
        self.folder.mkdir(parents=True, exist_ok=True)
        self._holder_file = self.folder / f"{name}.holder"
        lock_file = self.folder / f"{name}.lock"
        self._lock = _Flock(lock_file) if fcntl is not None else _FileLock(lock_file)

    def holder(self) -> str:
        try:
            h = json.loads(self._holder_file.read_text(encoding="utf-8"))
            return f"pid {h['pid']} on {h['host']} since {h['since']}: {h['command']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"

    def __enter__(self) -> FolderLock:
        if not self._lock.acquire(blocking=False):
            if not self.wait:
                raise self.busy(self.holder())
            if self.on_wait:
                self.on_wait(self.holder())
            self._lock.acquire(blocking=True)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:300],
                  "since": datetime.now(UTC).isoformat(timespec="seconds")}
        self._holder_file.write_text(json.dumps(record), encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        self._holder_file.unlink(missing_ok=True)
        self._lock.release()
