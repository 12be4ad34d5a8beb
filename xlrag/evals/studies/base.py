"""What every run shares, the experiment grid and each seed study: a run folder
(:class:`~xlrag.evals.run_folder.RunFolder`) with its config and versions snapshot, the
model-call cache, and the one record loop, so a killed run resumes with nothing lost and
nothing duplicated."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from xlrag.config import LLMConfig
from xlrag.errors import XlragError
from xlrag.evals.cache import SQLiteLLMCache
from xlrag.evals.fingerprint import RunFingerprint, run_fingerprint
from xlrag.evals.records import Record
from xlrag.evals.run_folder import Progress, RunFolder, RunSummary, concurrency

__all__ = ["StudyRun", "cached_llm"]

W = TypeVar("W")


def cached_llm(models: dict[str, Any], cfg: LLMConfig, cache: SQLiteLLMCache) -> Any:
    """The run's model for ``cfg``, built once, its calls going through ``cache``. Keyed by the
    whole config: Ragas's LLM may share the generator's label but not its max_tokens."""
    key = cfg.model_dump_json()
    if key not in models:
        from xlrag.chains.llms import build_llm

        model = build_llm(cfg)
        model.cache = cache
        models[key] = model
    return models[key]


class StudyRun(ABC):
    """Runs ``config`` into the run folder ``out``; call :meth:`run` again after a kill to resume.
    ``cache`` is the model-call cache (default: the folder's ``cache.sqlite``)."""

    record_model: ClassVar[type[Record]]  # the model of the run's records: checked when written and when read

    def __init__(self, config: Any, out: str | Path, progress: Progress | None = None, *,
                 cache: Path | None = None):
        self.config = config
        self.retry_failed = True
        self._fingerprint: RunFingerprint | None = None
        self.folder = RunFolder(out)
        self.folder.ensure_usable()  # before the cache below makes the folder, and before any model runs
        self.out = self.folder.path
        self.progress = progress
        self.cache = SQLiteLLMCache(cache or self.folder.cache_path)
        self._llms: dict[str, Any] = {}

    def llm(self, cfg: LLMConfig) -> Any:
        return cached_llm(self._llms, cfg, self.cache)

    @staticmethod
    def not_run(config: Any) -> dict[str, str]:
        """The parts of the study the config cannot run, each with why (reported, and warned)."""
        return {}

    @classmethod
    def report_inputs(cls, config: Any, folder: RunFolder) -> Any:
        """What the report needs besides the config and the records, read here at the edge so
        the report itself reads no file: a study's parts that were not run, by default."""
        return cls.not_run(config)

    async def append(self, work: Sequence[W], key: Callable[[W], str], make: Callable[[W], Awaitable[dict]],
                     identify: Callable[[W], dict], *, timeout: float, models: Sequence[LLMConfig],
                     api: int = 4) -> RunSummary:
        """The run folder's record loop over ``work``, ``api`` records at once unless every one
        of ``models`` is local."""
        if self._fingerprint is None:
            raise RuntimeError("append() runs inside arun(), which holds the run folder's lock")
        return await self.folder.append_records(work, key, make, identify, fingerprint=self._fingerprint.fingerprint,
                                                timeout=timeout, concurrency=concurrency(models, api),
                                                retry_failed=self.retry_failed, progress=self.progress,
                                                model=self.record_model)

    @abstractmethod
    async def make_records(self) -> RunSummary:
        """Make every record not yet in ``records.jsonl``: ``written``, ``skipped``, ``failed``."""

    def _legacy_fingerprint(self) -> str:
        """The fingerprint of the snapshot a folder made before fingerprints was last run with."""
        from xlrag.evals.studies import load_run_config

        try:
            return run_fingerprint(load_run_config(self.folder.config_path)).fingerprint
        except (XlragError, OSError):
            return "unknown"  # its settings cannot be read back: its records match no run

    async def arun(self, *, retry_failed: bool = True) -> RunSummary:
        """Under the run folder's lock: the config's fingerprint (a missing input file fails
        here, before anything is written), the snapshot, :meth:`make_records` (records that
        failed before are made again with ``retry_failed``), plus ``llm_calls``: the model
        calls the cache could not answer."""
        fingerprint = run_fingerprint(self.config)
        self.retry_failed = retry_failed
        with self.folder.lock():
            self.folder.adopt_legacy(self._legacy_fingerprint)
            self.folder.snapshot(self.config, fingerprint)
            self._fingerprint = fingerprint
            before = self.cache.misses
            try:
                summary = await self.make_records()
            finally:
                self._fingerprint = None
            summary["llm_calls"] = self.cache.misses - before
            return summary

    def run(self, *, retry_failed: bool = True) -> RunSummary:
        """Run to the end (resuming a killed run); ``await arun()`` inside async code."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(retry_failed=retry_failed))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="xlrag-run") as pool:  # a notebook's loop is running
            return pool.submit(asyncio.run, self.arun(retry_failed=retry_failed)).result()

    def close(self) -> None:
        self.cache.close()
