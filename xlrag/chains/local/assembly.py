"""Assemble a catalogue entry's chunk packages into one verified GGUF in the user cache.

The parts are concatenated into a temporary file beside the target, hashed while written,
and renamed into place only when the SHA-256 and the header's ``general.name`` match the
catalogue: a reader never sees a half-written model. A file lock makes concurrent
processes wait for the first one instead of assembling twice. A cached file is re-hashed
before every first load in a process, so a corrupted cache is an error, never a silently
wrong model.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import struct
import tempfile
from pathlib import Path
from typing import BinaryIO, TypedDict

from filelock import FileLock

from xlrag.chains.local.catalogue import CatalogueEntry
from xlrag.errors import XlragError

__all__ = ["ModelChecksumError", "assemble", "cache_dir", "gguf_name", "part_files", "sha256_file", "status"]

_BLOCK = 1 << 20


class ModelChecksumError(XlragError):
    """An assembled local model does not match its pinned SHA-256 or GGUF name."""

    def __init__(self, path: Path, what: str, expected: str, got: str):
        self.path = path
        super().__init__(
            f"local model {path} is damaged: its {what} is {got}, expected {expected}; "
            f"nothing was loaded. Delete the file to assemble it again from the installed "
            f"packages (reinstall them with pip install --force-reinstall if it recurs)"
        )


def cache_dir() -> Path:
    """Where assembled models live: $XLRAG_CACHE_DIR, else the platform's user cache."""
    override = os.environ.get("XLRAG_CACHE_DIR")
    if override:
        return Path(override).expanduser() / "models"
    try:
        import platformdirs
    except ImportError:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xlrag"
    else:
        base = Path(platformdirs.user_cache_dir("xlrag", appauthor=False))
    return base / "models"


def part_files(entry: CatalogueEntry) -> list[Path]:
    """The installed chunk files of ``entry``, in order (one data file per distribution)."""
    entry.require()
    paths = []
    for dist_name in entry.parts:
        dist = importlib.metadata.distribution(dist_name)
        data = [f for f in dist.files or () if "/data/" in f.as_posix() and f.suffix != ".py"]
        if len(data) != 1:
            raise XlragError(f"package {dist_name} should hold one data/ chunk but has {len(data)}; "
                             f"reinstall it with pip install --force-reinstall {dist_name}=={entry.version}")
        located = dist.locate_file(data[0])
        if not isinstance(located, os.PathLike):
            raise XlragError(f"package {dist_name} is not installed as files on disk; reinstall it with "
                             f"pip install --force-reinstall {dist_name}=={entry.version}")
        paths.append(Path(located))
    return paths


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def _read_str(fh: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", fh.read(8))
    return fh.read(n).decode("utf-8", errors="replace")


# GGUF value types: fixed-size scalars by struct format; 8 = string, 9 = array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _skip_value(fh: BinaryIO, vtype: int) -> object:
    if vtype in _SCALARS:
        fmt = "<" + _SCALARS[vtype]
        return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]
    if vtype == 8:
        return _read_str(fh)
    if vtype == 9:
        (itype,), (n,) = struct.unpack("<I", fh.read(4)), struct.unpack("<Q", fh.read(8))
        if itype in _SCALARS:
            fh.seek(n * struct.calcsize("<" + _SCALARS[itype]), os.SEEK_CUR)
        else:
            for _ in range(n):
                _skip_value(fh, itype)
        return None
    raise ValueError(f"unknown GGUF value type {vtype}")


def gguf_name(path: Path) -> str | None:
    """``general.name`` from a GGUF header (None when absent); reads only the header."""
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        _version, _tensors, n_kv = struct.unpack("<IQQ", fh.read(20))
        for _ in range(n_kv):
            key = _read_str(fh)
            (vtype,) = struct.unpack("<I", fh.read(4))
            value = _skip_value(fh, vtype)
            if key == "general.name":
                return str(value)
    return None


def _verify(entry: CatalogueEntry, path: Path, digest: str, shown: Path) -> None:
    if digest != entry.sha256:
        raise ModelChecksumError(shown, "SHA-256", entry.sha256, digest)
    name = gguf_name(path)
    if name != entry.general_name:
        raise ModelChecksumError(shown, "GGUF general.name", repr(entry.general_name), repr(name))


def assemble(entry: CatalogueEntry, directory: Path | None = None) -> Path:
    """The verified GGUF of ``entry``, assembled from its installed parts on first use."""
    directory = Path(directory) if directory is not None else cache_dir()
    target = directory / entry.filename
    parts = part_files(entry)  # missing extra: MissingDependencyError before touching the cache
    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.exists():
            _verify(entry, target, sha256_file(target), target)
            return target
        fd, tmp_name = tempfile.mkstemp(prefix=f".{entry.filename}.", suffix=".tmp", dir=directory)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with part.open("rb") as fh:
                        while block := fh.read(_BLOCK):
                            h.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            _verify(entry, tmp, h.hexdigest(), target)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return target


class ModelStatus(TypedDict):
    installed: bool
    path: str
    verified: bool | None


def status(entry: CatalogueEntry, directory: Path | None = None) -> ModelStatus:
    """Whether ``entry``'s parts are installed, and whether its assembled file is verified
    (None: not assembled yet; it is assembled and verified on first use)."""
    target = (Path(directory) if directory is not None else cache_dir()) / entry.filename
    verified: bool | None = None
    if target.exists():
        verified = sha256_file(target) == entry.sha256 and gguf_name(target) == entry.general_name
    return {"installed": not entry.missing_parts(), "path": str(target), "verified": verified}
