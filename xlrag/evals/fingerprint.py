"""What shapes a run's records, as one hash: a changed setting makes new records and never
relabels old ones.

The fingerprint of a run config is the SHA-256 of its settings as canonical JSON, with
every input file (a corpus, queries, qrels, territories) replaced by the SHA-256 of its
contents, so an edited corpus counts as a changed setting and a moved one does not. Left
out are the fields that cannot change a record: each config model names them in its
``RECORD_INERT`` (a run's name, its timeout and concurrency, a model's retries), and the
index a run builds rather than reads (:data:`OUTPUT_PATHS`). A config whose layout changed
keeps its records by naming its settings as before (``fingerprint_fields``). Every record is written with
the fingerprint of the settings that made it (its ``fp``); a run skips only the records of
its own fingerprint, and a report reads only those.

An input file that does not exist is a :class:`~xlrag.errors.ConfigError` here, before
the run writes anything: a corpus path typed wrong used to fill a run with failed records.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from xlrag.errors import ConfigError

__all__ = ["OUTPUT_PATHS", "RunFingerprint", "inert_fields", "run_fingerprint"]

# an index a run builds: its path names which index, its files are not an input; the run keeps
# it in step with the corpus hashed here, or refuses it (xlrag.evals.run_index)
OUTPUT_PATHS = frozenset({"index_dir"})


class RunFingerprint(BaseModel):
    """``fingerprint`` and the inputs it hashed (path -> SHA-256), kept in the run folder's
    ``run.json`` so a user can see what a rerun found changed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fingerprint: str
    inputs: dict[str, str] = {}


def inert_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` that do not shape a record (its ``RECORD_INERT``)."""
    return frozenset(getattr(model, "RECORD_INERT", ()))


def _file_digest(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _digest(path: Path, where: str) -> str:
    if path.is_file():
        return _file_digest(path)
    if path.is_dir():
        # a folder input (an upstream BorderLines checkout): its files' names and contents
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f.relative_to(path).as_posix().encode() + b"\0" + _file_digest(f).encode())
        return h.hexdigest()
    raise ConfigError(f"{where}: {path} does not exist; fix the path in the run's YAML (relative paths are "
                      f"read from the YAML's folder)")


def _view(value: Any, where: str, inputs: dict[str, str]) -> Any:
    if isinstance(value, BaseModel):
        inert = inert_fields(type(value))
        # a model whose layout changed names what its records were fingerprinted with before
        fields = value.fingerprint_fields() if hasattr(value, "fingerprint_fields") else \
            {n: getattr(value, n) for n in type(value).model_fields}
        out = {}
        for name, v in fields.items():
            if name in inert:
                continue
            sub = f"{where}.{name}" if where != "run config" else name
            out[name] = (None if v is None else str(v)) if name in OUTPUT_PATHS else _view(v, sub, inputs)
        return out
    if isinstance(value, Path):
        digest = inputs[str(value)] = _digest(value, where)
        return {"sha256": digest}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _view(v, f"{where}.{k}", inputs) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_view(v, f"{where}[{getattr(v, 'name', i)!r}]", inputs) for i, v in enumerate(value)]
        return sorted(items, key=json.dumps) if isinstance(value, set | frozenset) else items
    return value


def run_fingerprint(config: BaseModel) -> RunFingerprint:
    """The fingerprint of ``config`` (a loaded grid or study config, its paths resolved)."""
    inputs: dict[str, str] = {}
    view = {"kind": type(config).__name__, "settings": _view(config, "run config", inputs)}
    blob = json.dumps(view, sort_keys=True, ensure_ascii=False, default=str).encode()
    return RunFingerprint(fingerprint=hashlib.sha256(blob).hexdigest()[:16], inputs=inputs)
