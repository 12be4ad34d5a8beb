"""Opening a cache's SQLite file (the eval LLM cache, the embedding cache).

A cache file damaged by a crash or a bad copy fails on the first statement with sqlite's
"file is not a database"; that becomes a one-line :class:`~xlrag.errors.CacheDamagedError`
telling the user the file may simply be deleted.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

from xlrag.errors import CacheDamagedError

__all__ = ["open_cache"]


def open_cache(path: str | Path, what: str, *schema: str, timeout: float = 5.0,
               isolation_level: Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"]
               | None = "DEFERRED") -> sqlite3.Connection:
    """A connection to the cache at ``path`` (created if absent) with ``schema`` applied;
    ``what`` names the cache in the error a damaged file raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = None
    try:
        db = sqlite3.connect(str(path), check_same_thread=False, timeout=timeout, isolation_level=isolation_level)
        # reads the header and the schema page: a damaged file fails here, not mid-run
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        for statement in schema:
            db.execute(statement)
    except sqlite3.DatabaseError as e:
        if db is not None:
            db.close()
        raise CacheDamagedError(what, path, str(e)) from None
    return db
