"""A lexical index's folder on disk: bm25s's arrays, the passage ids, and what proves them whole.

One folder per store and write, named after what it was built from (``<lang>-<ids digest>-
<analyzer digest>``). It is written in a temporary folder whose files are synced, then
renamed into place, so a folder with a final name is always whole, even after a power cut.

The ids are two files read memory-mapped (``ids.bin``, the ids' UTF-8 bytes end to end, and
``ids.offsets.npy``, where each starts), not a JSON list, and so is bm25s's vocabulary (the
terms sorted, ``vocab.terms.bin``, ``vocab.offsets.npy``, and each one's column,
``vocab.ids.npy``; bm25s's own ``vocab.index.json`` stays beside it): a reader never holds a
million Python strings to name the ten passages it ranks first or to find the eight terms of a
question, and its start-up reads none of the score arrays. ``ids.json`` records the files'
sizes, digests of the ids and of the vocabulary files, and the manifest entry the folder was
written for. Folders of the first format (the ids as a JSON list inside ``ids.json``, bm25s's
vocabulary alone) are still read.

Two depths of checking. Opening (every reader, at its first lexical search): the files' sizes,
the digests of the ids and vocabulary files (streamed reads of a few percent of the folder),
the entry it was written for, and bm25s's shapes. Verifying (``xlrag check``, a writer
deciding whether to keep a folder): also the ids' own digest, the vocabulary against bm25s's,
and that the score arrays name no passage past the last, which reads them whole.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from xlrag.indexes.store import LexicalRef

__all__ = ["IdList", "MappedStrings", "MappedVocab", "folder_name", "ids_digest", "prune_folders", "read_folder",
           "write_folder"]

_META = "ids.json"
_BLOB = "ids.bin"
_OFFSETS = "ids.offsets.npy"
_ID_FILES = (_BLOB, _OFFSETS)
_TERMS = "vocab.terms.bin"
_TERM_OFFSETS = "vocab.offsets.npy"
_TERM_IDS = "vocab.ids.npy"
_VOCAB_FILES = (_TERMS, _TERM_OFFSETS, _TERM_IDS)
_BM25_VOCAB = "vocab.index.json"  # bm25s's own, kept beside: bm25s.BM25.load reads the folder as it is
_FORMAT = 2  # 1: the ids as a JSON list inside ids.json (still read)


def ids_digest(ids: Iterable[str]) -> str:
    """Order-free digest of a store's passage ids. Ids embed the document's fingerprint and the
    passage text, so equal digests mean equal contents."""
    h = hashlib.sha1(usedforsecurity=False)
    for pid in sorted(ids):
        h.update(pid.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def folder_name(lang: str, digest: str, analyzer: str) -> str:
    """What a store's folder is called: what it was built from (its ids' digest, its analyzer)."""
    return f"{lang}-{digest}-{hashlib.sha1(analyzer.encode(), usedforsecurity=False).hexdigest()[:6]}"


class MappedStrings(Sequence[str]):
    """Strings stored as their UTF-8 bytes end to end (``blob``) and where each starts
    (``offsets``, one more than the strings), memory-mapped: the i-th is decoded when asked for."""

    def __init__(self, folder: Path, blob: str, offsets: str):
        # plain array views of the mappings: a slice of an np.memmap costs ~20 times a slice of
        # an array, and a term's binary search takes ~20 of them
        self._offsets = np.load(folder / offsets, mmap_mode="r", allow_pickle=False).view(np.ndarray)
        size = (folder / blob).stat().st_size
        if self._offsets.ndim != 1 or len(self._offsets) < 1 or int(self._offsets[0]) != 0 \
                or int(self._offsets[-1]) != size:
            raise ValueError(f"{offsets} disagrees with {blob}")
        # np.memmap refuses an empty file: strings that are all empty have none
        self._blob = (np.memmap(folder / blob, dtype=np.uint8, mode="r").view(np.ndarray) if size
                      else np.zeros(0, np.uint8))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def raw(self, i: int) -> bytes:
        return self._blob[int(self._offsets[i]):int(self._offsets[i + 1])].tobytes()

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= i < n:
            raise IndexError(i)
        return self.raw(i).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        blob, offsets = self._blob.tobytes(), np.asarray(self._offsets).tolist()
        for a, b in itertools.pairwise(offsets):
            yield blob[a:b].decode("utf-8")


class IdList(MappedStrings):
    """A folder's passage ids, in the order of the index's rows."""

    def __init__(self, folder: Path):
        super().__init__(folder, _BLOB, _OFFSETS)


class MappedVocab(Mapping[str, int]):
    """bm25s's vocabulary (term -> its column in the score arrays), memory-mapped: the terms
    sorted by their bytes, found by binary search. Stands in for the dict bm25s loads from
    ``vocab.index.json``, which at a million terms is ~200 MB of Python objects and most of a
    second to parse (benchmarks/lexical_shared.py)."""

    def __init__(self, folder: Path):
        self._terms = MappedStrings(folder, _TERMS, _TERM_OFFSETS)
        self._ids = np.load(folder / _TERM_IDS, mmap_mode="r", allow_pickle=False).view(np.ndarray)
        if self._ids.ndim != 1 or len(self._ids) != len(self._terms):
            raise ValueError(f"{_TERM_IDS} disagrees with {_TERMS}")

    def _find(self, term: str) -> int:
        key, lo, hi = term.encode("utf-8"), 0, len(self._terms)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._terms.raw(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self._terms) and self._terms.raw(lo) == key else -1

    def __getitem__(self, term: str) -> int:
        i = self._find(term) if isinstance(term, str) else -1
        if i < 0:
            raise KeyError(term)
        return int(self._ids[i])

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._find(term) >= 0

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)


def _write_strings(folder: Path, blob: str, offsets: str, strings: Iterable[str]) -> None:
    encoded = [x.encode("utf-8") for x in strings]
    starts = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=starts[1:])
    (folder / blob).write_bytes(b"".join(encoded))
    np.save(folder / offsets, starts, allow_pickle=False)


def _files_digest(folder: Path, names: Sequence[str]) -> str:
    """Digest of mapped files, streamed (no mapping: a check adds nothing to a reader's
    resident memory): a reordered or rewritten id or term changes it."""
    h = hashlib.sha1(usedforsecurity=False)
    for name in names:
        with (folder / name).open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _order_digest_v1(ids: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(ids).encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def write_folder(base: Path, folder: str, bm25: Any, ids: Sequence[str], ref: LexicalRef) -> None:
    """Write ``base/folder`` whole or not at all, replacing whatever stands at its path (a
    damaged folder, a plain file, a plain file where ``base`` should be)."""
    _clear(base, keep_dir=True)
    base.mkdir(parents=True, exist_ok=True)
    final = base / folder
    tmp = base / f".tmp-{folder}-{os.getpid()}-{threading.get_ident()}"
    _clear(tmp)
    tmp.mkdir(parents=True)
    if bm25 is not None:
        bm25.save(str(tmp), show_progress=False)
    _write_strings(tmp, _BLOB, _OFFSETS, ids)
    meta: dict[str, Any] = {"format": _FORMAT, "passages": len(ids), "order": _files_digest(tmp, _ID_FILES)}
    if bm25 is not None:
        terms = sorted(bm25.vocab_dict.items(), key=lambda kv: kv[0].encode("utf-8"))
        _write_strings(tmp, _TERMS, _TERM_OFFSETS, (t for t, _ in terms))
        np.save(tmp / _TERM_IDS, np.asarray([i for _, i in terms], dtype=np.int64), allow_pickle=False)
        meta["vocab"] = _files_digest(tmp, _VOCAB_FILES)
    # each file's size: a stat per file tells a file of another store or of another write
    # (same shape, other bytes) from its own without reading the arrays
    meta["sizes"] = {f.name: f.stat().st_size for f in sorted(tmp.iterdir())}
    (tmp / _META).write_text(json.dumps({**meta, "ref": ref.model_dump()}), encoding="utf-8")
    for f in tmp.iterdir():  # the data first: a synced rename of unsynced files can name empty ones
        _fsync(f)
    _fsync(tmp)
    if final.exists() or final.is_symlink():
        trash = base / f".old-{folder}-{os.getpid()}"
        _clear(trash)
        os.replace(final, trash)
        _clear(trash)
    os.replace(tmp, final)
    _fsync(base)


def read_folder(base: Path, ref: LexicalRef, *, mmap: bool, verify: bool) -> tuple[Sequence[str], Any]:
    """The ids and the bm25s index (None when no passage gave a token) of the folder ``ref``
    names, after the checks the module's docstring lists (``verify``: the full ones); any
    exception when it is missing or damaged."""
    import bm25s

    folder = base / ref.folder
    raw = json.loads((folder / _META).read_text(encoding="utf-8"))
    sizes = {f.name: f.stat().st_size for f in folder.iterdir() if f.name != _META}
    if sizes != raw.get("sizes"):
        raise ValueError("its files are not the ones it was written with (missing, cut short or replaced)")
    written_for = LexicalRef.model_validate(raw["ref"])
    if written_for.digest != ref.digest or written_for.passages != ref.passages:
        raise ValueError("it does not hold the passages the manifest names")
    ids: Sequence[str]
    if "ids" in raw:  # format 1
        ids = raw["ids"]
        if raw.get("order") != _order_digest_v1(ids):
            raise ValueError("its ids are not in the order the index was built in")
        verify = True  # the list is in memory already: its digest costs little more
    else:
        if raw.get("order") != _files_digest(folder, _ID_FILES):
            raise ValueError("its ids are not in the order the index was built in")
        ids = IdList(folder)
    if len(ids) != ref.passages or (verify and ids_digest(ids) != ref.digest):
        raise ValueError("it does not hold the passages the manifest names")
    bm25 = None
    if ref.passages > ref.empty:
        mapped = "vocab" in raw  # folders written before the mapped vocabulary have bm25s's alone
        if mapped and raw["vocab"] != _files_digest(folder, _VOCAB_FILES):
            raise ValueError("its vocabulary is not the one it was written with")
        bm25 = bm25s.BM25.load(str(folder), mmap=mmap, load_vocab=not mapped, show_progress=False, verbosity=0)
        if mapped:
            bm25.vocab_dict = MappedVocab(folder)
            if verify and dict(bm25.vocab_dict.items()) != json.loads((folder / _BM25_VOCAB).read_text("utf-8")):
                raise ValueError("its vocabulary disagrees with bm25s's own")
        _check_shape(bm25, len(ids), full=verify)
    return ids, bm25


def _check_shape(bm25: Any, n_ids: int, full: bool) -> None:
    """The consistency of a loaded BM25 matrix with its ids: files of another store, or of two
    writes, disagree here. A CSC matrix: one column per vocabulary term, rows are passages.
    Only ``full`` reads the row numbers (the largest array): a reader meets a bad one when a
    query touches it, in :meth:`xlrag.indexes.lexical.LexicalIndex.rank`."""
    scores = bm25.scores
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    if int(scores["num_docs"]) != n_ids:
        raise ValueError(f"it scores {scores['num_docs']} passages, its ids list {n_ids}")
    if len(data) != len(indices) or len(indptr) < 1 or int(indptr[-1]) != len(data) \
            or len(indptr) - 1 > len(bm25.vocab_dict):
        raise ValueError("its score arrays disagree with each other or with its vocabulary")
    if full and len(indices) and int(np.max(indices)) >= n_ids:
        raise ValueError("it scores passages its ids list does not have")


def prune_folders(base: Path, keep: set[str]) -> int:
    """Remove what ``base`` holds besides the folders ``keep`` names. Returns how many."""
    if not base.is_dir():
        return 0
    gone = 0
    for p in base.iterdir():
        if p.name not in keep:
            _clear(p)
            gone += 1
    return gone


def _fsync(path: Path) -> None:
    # a rename is durable only once its folder is synced, and names whole files only once they are
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _clear(path: Path, keep_dir: bool = False) -> None:
    """Remove what stands at ``path``: a file or link always, a folder unless ``keep_dir``."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir() and not keep_dir:
        shutil.rmtree(path, ignore_errors=True)
