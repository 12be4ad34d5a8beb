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
from xlrag.evals.cache import SQLiteLLMCache
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
        self.folder = RunFolder(out)
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
        return await self.folder.append_records(work, key, make, identify, timeout=timeout,
                                                concurrency=concurrency(models, api), progress=self.progress,
                                                model=self.record_model)

    @abstractmethod
    async def make_records(self) -> RunSummary:
        """Make every record not yet in ``records.jsonl``: ``written``, ``skipped``, ``failed``."""

    async def arun(self) -> RunSummary:
        """The config snapshot, :meth:`make_records`, plus ``llm_calls``: the model calls the
        cache could not answer."""
        self.folder.snapshot(self.config)
        before = self.cache.misses
        summary = await self.make_records()
        summary["llm_calls"] = self.cache.misses - before
        return summary

    def run(self) -> RunSummary:
        """Run to the end (resuming a killed run); ``await arun()`` inside async code."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun())
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="xlrag-run") as pool:  # a notebook's loop is running
            return pool.submit(asyncio.run, self.arun()).result()

    def close(self) -> None:
        self.cache.close()
