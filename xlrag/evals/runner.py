"""Run an experiment grid: one record per (cell, query), appended as it completes.

The grid is a run like the seed studies (:class:`~xlrag.evals.studies.base.StudyRun`): its
folder, resume rule and cache are :mod:`xlrag.evals.run_folder`'s. API models run
``concurrency`` records at once, each bounded by ``timeout``; local models one at a time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from xlrag.config import LLMConfig
from xlrag.errors import ConfigError, CorpusRowError
from xlrag.evals.experiment import (
    Cell,
    DatasetConfig,
    ExperimentConfig,
    Variant,
    answering_config,
    llm_label,
    sample_queries,
)
from xlrag.evals.records import GridRecord
from xlrag.evals.run_folder import Progress, RunFolder, RunSummary
from xlrag.evals.scoring import score_answer, scored_text
from xlrag.evals.studies.base import StudyRun
from xlrag.jsonl import read_objects
from xlrag.schema import make_query

__all__ = ["ExperimentRunner"]


def _load_queries(ds: DatasetConfig) -> list[dict]:
    if ds.queries is None:  # DatasetConfig.resolved fills it in for a built-in dataset; another names it
        raise ConfigError(f"dataset {ds.name} has no queries path; give one, or read the experiment with "
                          f"load_experiment(), which fills in a built-in dataset's files")
    rows = []
    for n, q in read_objects(ds.queries, "queries"):
        if not q.get("id") or not q.get("question") or not q.get("lang"):
            raise CorpusRowError(ds.queries, n, "a query needs id, question and lang", skippable=False)
        golds = q.get("answers") or ([q["answer"]] if q.get("answer") else [])
        rows.append({"id": str(q["id"]), "question": q["question"], "lang": q["lang"], "answers": golds})
    return sample_queries(rows, ds.sample)


class ExperimentRunner(StudyRun):
    """Runs ``config`` into ``out``; call :meth:`run` again after a kill to resume."""

    record_model = GridRecord

    def __init__(self, config: ExperimentConfig, out: str | Path, progress: Progress | None = None):
        super().__init__(config, out, progress, cache=config.cache)
        self.config: ExperimentConfig = config
        self._retrievers: dict[str, Any] = {}
        self._reranker: Any = None
        self._panel = None
        self._ragas = None
        self._ragas_ids: dict[str, set[str]] = {}

    @classmethod
    def report_inputs(cls, config: ExperimentConfig, folder: RunFolder) -> Any:
        from xlrag.evals.report import read_inputs

        return read_inputs(config, folder)

    def retriever(self, ds: DatasetConfig):
        if ds.name not in self._retrievers:
            from xlrag.evals.retrieval_run import IndexInventory
            from xlrag.evals.run_index import run_retriever

            translator = None
            if "translate" in self.config.modes:
                from xlrag.chains.translator import LLMTranslator
                from xlrag.indexes.translate import CachedTranslator

                # through self.llm: the translations are cached with every other model call
                cfg = self.config.translator or (self.config.llms[0] if self.config.llms else LLMConfig())
                translator = CachedTranslator(LLMTranslator(self.llm(cfg)))
            # this dataset's corpus only: an index holding the other demo corpus too would
            # put its languages into the `all` and `balanced` results
            retriever = run_retriever(self.folder, ds.name, corpus=ds.corpus,
                                      index=ds.index_dir or self.out / f"index-{ds.name}",
                                      embedder=self.config.embedder, retrieval=self.config.retrieval_settings(),
                                      translator=translator)
            # the report scores retrieval from the records alone: it needs each document's
            # language and the index's size per language, as they were at run time
            inv = IndexInventory.of(retriever.stores)
            self.folder.write_inventory(ds.name, inv.doc_langs, inv.counts)
            self._retrievers[ds.name] = retriever
        return self._retrievers[ds.name]

    def rerank_steps(self) -> list[Any]:
        """The run's reranker (``rerank:``), built once: it orders the retrieval records and is
        the chains' first passage step; none for ``rerank.name: none``."""
        if self.config.rerank.name == "none":
            return []
        if self._reranker is None:
            from xlrag.indexes.rerank import build_reranker

            self._reranker = build_reranker(self.config.rerank)
        return [self._reranker]

    def panel(self):
        if self._panel is None and self.config.judges is not None:
            from xlrag.judges.panel import JudgePanel

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
        after: list[Any] = list(self.rerank_steps())
        if variant.rerank == "attribution":
            from xlrag.chains.attribution_rerank import AttributionReranker
            from xlrag.chains.checkers import attribution_checker

            # the checker comes from the run's model cache, as every model of the run does
            after.append(AttributionReranker(attribution_checker(self.llm(self.config.attribution_checker or llm_cfg))))
        return GroundedChain.from_config(answering_config(self.config.retrieval.k), llm=self.llm(llm_cfg),
                                         retriever=self.retriever(ds), fmt=variant.format, mode=cell.mode,
                                         prompts=prompts, few_shot=variant.few_shot, postprocessors=after)

    # -- one record -----------------------------------------------------------------------

    def _retrieval(self, ds: DatasetConfig, cell: Cell, q: dict) -> list[dict]:
        from xlrag.indexes.postprocess import run_postprocessors

        depth = self.config.retrieval.retrieve_k
        result = self.retriever(ds).retrieve(make_query(q["question"], lang=q["lang"], id=q["id"]), mode=cell.mode,
                                             k=depth)
        # the candidates as the reranker orders them, all kept: hit@k says whether evidence was found
        hits = run_postprocessors(self.rerank_steps(), result.hits, result.query, depth)
        return [{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang, "score": h.score} for h in hits]

    @staticmethod
    def _identity(ds: DatasetConfig, cell: Cell, q: dict) -> dict[str, Any]:
        """What a record starts with, and all a failed one has besides its error."""
        return {"key": cell.key(q["id"]), **cell.model_dump(), "query_id": q["id"], "lang": q["lang"],
                "question": q["question"], "golds": q["answers"]}

    async def _record(self, ds: DatasetConfig, cell: Cell, q: dict, chains: dict) -> dict:
        rec = self._identity(ds, cell, q)
        t0 = time.perf_counter()
        rec["retrieved"] = await asyncio.to_thread(self._retrieval, ds, cell, q)
        if cell.llm is not None:
            ans = await chains[(cell.dataset, cell.llm, cell.variant)].ainvoke(
                {"question": q["question"], "lang": q["lang"], "mode": cell.mode, "id": q["id"]})
            # no golds, nothing to judge: the judges' models are not even built
            score = await score_answer(ans, q["question"], q["answers"], q["lang"],
                                       self.panel() if q["answers"] else None)
            sections = score.sections()
            # ragas goes between metrics and judges, where the records written so far hold it
            judges = sections.pop("judges", None)
            rec.update(
                answer=ans.answer, explanation=ans.explanation, raw_output=ans.raw_output, flags=ans.flags,
                answered=ans.answered,
                shown=[{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang} for h in ans.passages],
                citations=[c.model_dump(include={"marker", "passage_id", "doc_id", "lang", "valid", "source"})
                           for c in ans.citations],
                **sections,
            )
            if self.config.ragas and q["answers"] and q["id"] in self._ragas_ids[ds.name]:
                rec["ragas"] = await self._ragas_scores(q, scored_text(ans), ans)
            if judges is not None:
                rec["judges"] = judges
        rec["seconds"] = time.perf_counter() - t0
        return rec

    # -- the grid -------------------------------------------------------------------------

    async def make_records(self) -> RunSummary:
        work: list[tuple[DatasetConfig, Cell, dict]] = []
        for ds in self.config.datasets:
            queries = _load_queries(ds)
            answered = sample_queries(queries, self.config.generate_sample)
            self._ragas_ids[ds.name] = {q["id"] for q in sample_queries(answered, self.config.ragas_sample)}
            work.extend((ds, cell, q) for cell, q in self.config.plan(ds.name, queries))
        # a chain per (dataset, llm, variant) takes the IR mode per call, so every record
        # of the grid can run concurrently
        chains = {}
        for ds in self.config.datasets:
            # the index first, outside any record: an embedder that cannot be built (no API key)
            # or an index of another embedder fails the run in one line, not each record
            self.retriever(ds)
            for llm_cfg in self.config.llms:
                for v in self.config.variants:
                    cell = Cell(dataset=ds.name, mode=self.config.modes[0], llm=llm_label(llm_cfg), variant=v.name)
                    chains[(ds.name, cell.llm, v.name)] = self.chain(ds, cell, llm_cfg, v)
        models = [*self.config.llms, *(self.config.judges.llm_judges if self.config.judges else []),
                  *([self.config.attribution_checker] if self.config.attribution_checker else [])]
        return await self.append(work, lambda w: w[1].key(w[2]["id"]), lambda w: self._record(*w, chains),
                                 lambda w: self._identity(*w), timeout=self.config.timeout, models=models,
                                 api=self.config.concurrency)

    def close(self) -> None:
        for r in self._retrievers.values():
            r.close()
        super().close()
