"""Chroma as xlrag's storage: clients, collection names, the manifest, and damage detection.

Two deployments share one layout. ``persistent``: Chroma files in
``index_dir/chroma`` and the manifest in ``index_dir/xlrag-index.json``.
``http``: a Chroma server (``chroma run``); the manifest is the metadata of a
dedicated collection, so every client of the server sees the same embedder,
dimension, splitter and status. Collections are namespaced by an index name, so
several indexes can share one server.

Chroma reports damage as ``InternalError`` (or sqlite errors) from deep inside
its Rust core; :func:`guard` is the one place that turns those into
:class:`IndexCorruptError`, and :func:`verify_files` detects the damage it would
otherwise hide (a deleted database is silently recreated empty; deleted vector
files leave passages that are never found) before a client is opened. A client
only opens a local database that exists: only an index's writer creates one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xlrag.config import StoreConfig
from xlrag.errors import DiskFullError, IndexCorruptError, IndexDirError, IndexNotFoundError

__all__ = ["MANIFEST", "Backend", "disk_full", "guard", "missing_vector_dirs", "verify_files"]

MANIFEST = "xlrag-index.json"
SQLITE = "chroma.sqlite3"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def index_name(index_dir: Path, store: StoreConfig) -> str:
    """The namespace of the index's collections (``store.name``, else the directory's name)."""
    if store.kind == "persistent":
        return "index"  # one index per Chroma directory: nothing to share
    name = store.name or Path(index_dir).resolve().name
    if not _NAME_RE.match(name):
        raise IndexDirError(
            f"index name {name!r} is not usable on a Chroma server; set store.name to letters, "
            f"digits, '-' or '_' (at most 63 characters)"
        )
    return name


@contextlib.contextmanager
def guard(index_dir: Path | str, store: StoreConfig | None = None) -> Iterator[None]:
    """Translate Chroma's and sqlite's internal failures into one typed error."""
    try:
        yield
    except (IndexDirError, KeyboardInterrupt):
        raise
    except Exception as e:
        from chromadb.errors import ChromaError, NotFoundError

        if disk_full(e):
            raise DiskFullError(index_dir, _short(e)) from None
        if isinstance(e, NotFoundError):
            raise IndexCorruptError(index_dir, f"a store vanished while in use: {_short(e)}") from None
        if store is not None and store.kind == "http" and _is_connection_error(e):
            raise IndexDirError(
                f"cannot reach the Chroma server at {store.host}:{store.port} ({_short(e)}); start it with "
                f"'chroma run --path DIR --host {store.host} --port {store.port}' or fix store.host/port"
            ) from None
        if isinstance(e, ChromaError | sqlite3.DatabaseError):
            raise IndexCorruptError(index_dir, f"Chroma failed: {_short(e)}") from None
        raise


# sqlite's SQLITE_FULL, the OS's ENOSPC, and both as Chroma's Rust core words them
_DISK_FULL = re.compile(r"disk is full|no space left on device|os error 28|\bENOSPC\b", re.IGNORECASE)


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (or what it wraps) says the disk is full rather than that a file is damaged."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno == errno.ENOSPC:
            return True
        if _DISK_FULL.search(str(cur)):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _is_connection_error(e: BaseException) -> bool:
    import httpx

    return isinstance(e, httpx.TransportError | ConnectionError)


def verify_files(index_dir: Path) -> None:
    """Cheap structural checks of a persistent index, before Chroma may 'repair' by recreating.

    Reads the sqlite header (magic, page count against the file size) and, for
    every store holding passages, that its HNSW vector folder exists.
    """
    lost = missing_vector_dirs(index_dir)
    if lost:
        name, segment, count = lost[0]
        raise IndexCorruptError(
            index_dir, f"the vector files of store {name.rsplit('.', 1)[-1]!r} (chroma/{segment}/) are missing; "
                       f"{count} passages have no vectors"
        )


def missing_vector_dirs(index_dir: Path) -> list[tuple[str, str, int]]:
    """``(collection, segment, passages)`` of stores whose vectors are gone: the HNSW folder is
    missing and Chroma's log no longer holds every vector to rebuild it from. Raises
    :class:`IndexCorruptError` when the database itself is missing or damaged.

    Run before a client opens (Chroma rebuilds a folder from whatever is left of its log,
    hiding the loss). Everything is read inside one read transaction, so a writer's commit
    in progress is never mistaken for damage.
    """
    chroma_dir = index_dir / "chroma"
    db = chroma_dir / SQLITE
    if not db.is_file():
        raise IndexCorruptError(index_dir, f"{db} is missing", repairable=False)
    with db.open("rb") as fh:
        magic = fh.read(16)
    if magic != _SQLITE_MAGIC:
        raise IndexCorruptError(index_dir, f"{db} is not a SQLite database (truncated or overwritten)",
                                repairable=False)
    try:
        # mode=rw, not ro: like Chroma, roll back the hot journal a killed writer left behind.
        con = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=60, isolation_level=None)
        try:
            con.execute("BEGIN")
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # SHARED lock: no commit until we end
            _check_length(index_dir, db)
            rows = con.execute(
                "SELECT c.name, v.id, (SELECT COUNT(*) FROM embeddings e WHERE e.segment_id = m.id), "
                "(SELECT COUNT(*) FROM embeddings_queue q WHERE q.topic LIKE '%/' || c.id) "
                "FROM collections c JOIN segments v ON v.collection = c.id AND v.scope = 'VECTOR' "
                "JOIN segments m ON m.collection = c.id AND m.scope = 'METADATA'"
            ).fetchall()
            con.execute("ROLLBACK")
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        _check_length(index_dir, db)  # the likelier, clearer reason first
        raise IndexCorruptError(index_dir, f"{db} is unreadable ({_short(e)})", repairable=False) from None
    return [(str(n), str(seg), int(c)) for n, seg, c, logged in rows
            if c and logged < c and not (chroma_dir / str(seg)).is_dir()]


def stored_collections(index_dir: Path) -> int:
    """How many collections the local database holds (0 if there is none yet): a new index
    creates its database before its manifest, and its collections only after."""
    db = index_dir / "chroma" / SQLITE
    if not db.is_file():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            return int(con.execute("SELECT COUNT(*) FROM collections").fetchone()[0])
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if "no such table" in str(e):
            return 0  # Chroma is creating its schema right now
        return 1  # a database there, and damaged: treat as holding stores


def _check_length(index_dir: Path, db: Path) -> None:
    size = db.stat().st_size
    with db.open("rb") as fh:
        header = fh.read(100)
    if len(header) < 100:
        raise IndexCorruptError(index_dir, f"{db} is truncated ({size} bytes)", repairable=False)
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages = struct.unpack(">I", header[28:32])[0]
    # The in-header page count is valid when the change counter matches "version-valid-for".
    if header[24:28] == header[92:96] and pages * page_size > size:
        raise IndexCorruptError(index_dir, f"{db} is truncated ({size} of {pages * page_size} bytes)", repairable=False)


def files_stamp(chroma_dir: Path) -> tuple[int, ...] | None:
    """What changes whenever any process commits a write to local Chroma files, or None
    when the database is gone: sqlite's file change counter (bumped by every commit in
    its rollback-journal mode), the inode (a rebuild makes a new file), and a WAL file's
    size and time should Chroma ever switch to WAL mode."""
    db = chroma_dir / SQLITE
    try:
        with db.open("rb") as f:
            header = f.read(28)
            ino = os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        return None
    counter = struct.unpack(">I", header[24:28])[0] if len(header) == 28 else -1
    try:
        wal = os.stat(str(db) + "-wal")
        wal_part: tuple[int, ...] = (wal.st_size, wal.st_mtime_ns)
    except FileNotFoundError:
        wal_part = ()
    return (counter, ino, *wal_part)


def content_stamp(chroma_dir: Path) -> tuple[object, ...] | None:
    """What changes whenever a process changes what local Chroma files hold, or None when it
    cannot be read: Chroma's write log (every add, update and delete is one entry: its newest
    and how many) and the collections. :func:`files_stamp` alone moves for more than that:
    every Chroma client commits a row of its own when it opens the files (its ``acquire_write``
    table), so under ``serve --workers 2`` each worker's reload made the other reload, for as
    long as they searched, and each reload built the store's vector index anew (Chroma inserts
    the vectors its last sync left out into a new HNSW graph, which differs from the last),
    answering some questions with other passages each time."""
    try:
        con = sqlite3.connect(f"file:{chroma_dir / SQLITE}?mode=ro", uri=True, timeout=5)
        try:
            log = con.execute("SELECT MAX(seq_id), COUNT(*) FROM embeddings_queue").fetchone()
            collections = con.execute("SELECT id FROM collections ORDER BY id").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return None
    return (*log, *(c for (c,) in collections))


# The files' stamp when this process's cached Chroma system for a directory loaded them.
# A local system keeps the vector index in memory and never sees what another process
# writes later: passages added there are never found, and ids deleted there come back
# without text or metadata. Readers compare this stamp with the files' and load afresh.
_loaded_at: dict[str, tuple[int, ...] | None] = {}
_loaded_content: dict[str, tuple[object, ...] | None] = {}  # and their content_stamp
# Chroma clients are built one at a time: a server's first requests arrive together (each
# worker of serve --workers takes a burst), and a second PersistentClient built while the first
# is still starting finds Chroma's shared system half made ('RustBindingsAPI' has no 'bindings')
_OPENING = threading.Lock()


class Backend:
    """One index's view of a Chroma deployment: client, collection names, manifest I/O."""

    def __init__(self, index_dir: Path, store: StoreConfig):
        self.index_dir = Path(index_dir)
        self.store = store
        self.name = index_name(self.index_dir, store)
        self.prefix = f"xlrag.{self.name}."
        self.manifest_collection = f"xlrag-manifest.{self.name}"
        self._client: Any = None
        self._stamp: tuple[int, ...] | None = None
        self._content: tuple[object, ...] | None = None

    @property
    def _chroma_dir(self) -> Path:
        # absolute: Chroma's client cache (and ours) is keyed by this path's text, so a relative
        # '.xlrag-index' opened from two working directories in one process would share a client
        return (self.index_dir / "chroma").resolve()

    def outdated(self) -> bool:
        """True when another process wrote the local files after this client loaded them
        (a Chroma server serves every client the same current state: never outdated)."""
        if self.store.kind != "persistent" or self._client is None:
            return False
        now = files_stamp(self._chroma_dir)
        if now == self._stamp:
            return False
        same_file = now is not None and self._stamp is not None and now[1:] == self._stamp[1:]
        if same_file and self._content is not None and content_stamp(self._chroma_dir) == self._content:
            self._stamp = now  # another client opened the files: nothing they hold changed
            return False
        return True

    def reload(self) -> None:
        """Drop this client so the next use loads the files as they are now.

        The process's cached system is replaced only if it is older than the files, and
        it is not stopped: other holders (a writer in this process, a search in another
        thread) keep using it safely until they, too, see the new stamp.
        """
        if self.store.kind != "persistent":
            return
        now = files_stamp(self._chroma_dir)
        if now is None:
            raise IndexNotFoundError(self.index_dir, "its Chroma files were removed while it was open, "
                                     "e.g. by 'xlrag index --rebuild'; open it again once that ends")
        key = str(self._chroma_dir)
        if _loaded_at.get(key) != now:
            from chromadb.api.shared_system_client import SharedSystemClient

            SharedSystemClient._identifier_to_system.pop(key, None)
            SharedSystemClient._identifier_to_refcount.pop(key, None)
            _loaded_at.pop(key, None)
            _loaded_content.pop(key, None)
        self._client = None

    @property
    def where(self) -> str:
        if self.store.kind == "http":
            scheme = "https" if self.store.ssl else "http"
            return f"{scheme}://{self.store.host}:{self.store.port} (index {self.name!r})"
        return str(self.index_dir)

    @property
    def client(self) -> Any:
        """The Chroma client over the index's existing files. A local database that is not there
        is an error, never created: Chroma would create an empty one in its place, and a reader
        (a server whose index was moved away) would answer 'no passages' from it, and leave behind
        a database that makes the folder no index and no empty folder. Writers create it with
        :meth:`create_database`."""
        if self._client is None and self.store.kind == "persistent" and not (self._chroma_dir / SQLITE).is_file():
            raise IndexNotFoundError(self.index_dir, f"its Chroma database chroma/{SQLITE} is not there: the folder "
                                     f"was moved or removed, or its build never began")
        return self._open()

    def create_database(self) -> None:
        """Create the local database (a new index's writer), or open the one already there."""
        self._open()

    def _open(self) -> Any:
        # read once: another thread's reload() may drop self._client at any moment
        if (client := self._client) is not None:
            return client
        with _OPENING:
            if (client := self._client) is None:
                os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
                import chromadb
                from chromadb.config import Settings

                settings = Settings(anonymized_telemetry=False)
                with guard(self.index_dir, self.store):
                    if self.store.kind == "http":
                        try:
                            client = self._client = chromadb.HttpClient(
                                host=self.store.host, port=self.store.port, ssl=self.store.ssl,
                                headers=dict(self.store.headers) or None, settings=settings,
                            )
                        except ValueError as e:  # what HttpClient raises when nothing answers
                            raise ConnectionError(str(e)) from None
                    else:
                        from chromadb.api.shared_system_client import SharedSystemClient

                        key = str(self._chroma_dir)
                        fresh = key not in SharedSystemClient._identifier_to_system
                        client = chromadb.PersistentClient(path=key, settings=settings)
                        if fresh:
                            # Stamped after the client commits its own start-up write, and before any
                            # vectors load (lazily, at a collection's first query): a write landing
                            # in between is loaded and only costs one needless reload later.
                            _loaded_at[key] = files_stamp(self._chroma_dir)
                            _loaded_content[key] = content_stamp(self._chroma_dir)
                        self._stamp, self._content = _loaded_at.get(key), _loaded_content.get(key)
                        # published last: a thread that sees the client (outdated()) sees its stamps
                        self._client = client
        return client

    def collection_name(self, lang: str) -> str:
        return self.prefix + lang

    def languages(self) -> list[str]:
        with guard(self.index_dir, self.store):
            names = [c.name if hasattr(c, "name") else str(c) for c in self.client.list_collections()]
        return sorted(n[len(self.prefix):] for n in names if n.startswith(self.prefix))

    # -- manifest -------------------------------------------------------------------
    def manifest_stamp(self) -> tuple[int, ...] | None:
        """What changes whenever the local manifest is written (it is replaced whole, so its
        inode changes), or None (no manifest, or a Chroma server's, read afresh anyway)."""
        if self.store.kind != "persistent":
            return None
        try:
            st = (self.index_dir / MANIFEST).stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def read_manifest(self) -> str | None:
        """The manifest's JSON text, or None when there is none."""
        if self.store.kind == "persistent":
            path = self.index_dir / MANIFEST
            return path.read_text(encoding="utf-8") if path.is_file() else None
        client = self.client
        with guard(self.index_dir, self.store):
            try:
                col = client.get_collection(self.manifest_collection, embedding_function=None)
            except Exception as e:
                from chromadb.errors import NotFoundError

                if isinstance(e, NotFoundError | ValueError):
                    return None
                raise
            return str((col.metadata or {}).get("manifest") or "") or None

    def write_manifest(self, text: str) -> None:
        if self.store.kind == "persistent":
            tmp = self.index_dir / (MANIFEST + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.index_dir / MANIFEST)  # atomic: a crash never leaves half a manifest
            return
        with guard(self.index_dir, self.store):
            col = self.client.get_or_create_collection(self.manifest_collection, embedding_function=None)
            col.modify(metadata={"manifest": text})

    def drop_all(self) -> None:
        """Delete every collection of this index and its manifest (``index --rebuild``).

        Locally the files are removed, not opened: a damaged database must not stop a rebuild.
        """
        if self.store.kind == "persistent":
            import shutil

            chroma_dir = self.index_dir / "chroma"
            if not ((self.index_dir / MANIFEST).exists() or (chroma_dir / SQLITE).exists()):
                return  # not an xlrag index: leave it for create() to refuse
            _forget_system(chroma_dir)
            if chroma_dir.is_dir():
                shutil.rmtree(chroma_dir)
            # the lexical folders are derived from the stores: without them they are garbage
            shutil.rmtree(self.index_dir / "lexical", ignore_errors=True)
            (self.index_dir / MANIFEST).unlink(missing_ok=True)
            return
        with guard(self.index_dir, self.store):
            for lang in self.languages():
                self.client.delete_collection(self.collection_name(lang))
            with contextlib.suppress(Exception):
                self.client.delete_collection(self.manifest_collection)


def _forget_system(chroma_dir: Path) -> None:
    """Stop the Chroma system this process caches for ``chroma_dir``: after its files are
    removed, a cached one would write to a deleted database ("readonly database")."""
    from chromadb.api.shared_system_client import SharedSystemClient

    for key in (str(chroma_dir), str(chroma_dir.resolve())):
        _loaded_at.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
        system = SharedSystemClient._identifier_to_system.pop(key, None)
        if system is not None:
            with contextlib.suppress(Exception):
                system.stop()
