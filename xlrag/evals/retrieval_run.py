"""Run a retriever over queries and score it: the one path behind ``xlrag eval retrieval``
and ``benchmarks/retrieval.py``, so the command and the benchmark cannot drift apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from xlrag.errors import InvalidArgumentError
from xlrag.evals.retrieval import (
    Level,
    RankedPassage,
    Ranking,
    _check_level,
    relevant_langs,
    retrieval_report,
)
from xlrag.indexes.postprocess import PassagePostprocessor, retrieve_through
from xlrag.validate import DEFAULT_RETRIEVE_K, check_k

if TYPE_CHECKING:
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.schema import Query

__all__ = ["Evaluation", "IndexInventory", "evaluate_retriever", "rank_queries"]


@dataclass(frozen=True)
class IndexInventory:
    """The language of every document and passage of an index, and passages per language."""

    doc_langs: dict[str, str] = field(default_factory=dict)
    passage_langs: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, stores: LanguageStores) -> IndexInventory:
        docs: dict[str, str] = {}
        passages: dict[str, str] = {}
        for store in stores.languages():
            for pid, _, meta in stores.scan(store):
                lang = str(meta.get("lang") or store)
                passages[pid] = lang
                docs[str(meta["doc_id"])] = lang
        return cls(docs, passages, dict(Counter(passages.values())))

    def unit_langs(self, level: Level) -> dict[str, str]:
        return self.doc_langs if level == "document" else self.passage_langs


class Evaluation(NamedTuple):
    report: dict[str, Any]
    rankings: list[Ranking]


def rank_queries(retriever: CrossLingualRetriever, queries: Sequence[Query], k: int = DEFAULT_RETRIEVE_K,
                 progress: Callable[[int, int], None] | None = None,
                 steps: Sequence[PassagePostprocessor] = ()) -> tuple[list[Ranking], bool, Counter[str]]:
    """Rankings of ``k`` passages per query, whether the index was complete, and the
    retriever's notes counted (e.g. "no 'xx' store in this index"). ``steps`` (a reranker)
    order each query's passages as the pipeline's passage postprocessors would."""
    k = check_k(k) or DEFAULT_RETRIEVE_K
    rankings, complete, notes = [], True, Counter[str]()
    for i, q in enumerate(queries, 1):
        if not q.id:
            raise InvalidArgumentError(f"queries[{i - 1}].id", "an id matching the qrels query_id", q.id)
        hits = retrieve_through(retriever, steps, q, k)
        complete = complete and hits.complete
        notes.update(hits.notes)
        lang = hits.query.lang if hits.query is not None and hits.query.lang else q.lang or ""
        rankings.append(Ranking(query_id=q.id, lang=lang, passages=[
            RankedPassage(id=h.id, doc_id=h.doc_id, lang=h.lang, score=h.score) for h in hits.hits]))
        if progress is not None:
            progress(i, len(queries))
    return rankings, complete, notes


def evaluate_retriever(
    retriever: CrossLingualRetriever,
    queries: Sequence[Query],
    qrels: dict[str, dict[str, int]],
    *,
    k: int = DEFAULT_RETRIEVE_K,
    level: Level = "document",
    inventory: IndexInventory | None = None,
    progress: Callable[[int, int], None] | None = None,
    steps: Sequence[PassagePostprocessor] = (),
    n_boot: int = 1000,
    seed: int = 13,
) -> Evaluation:
    """Retrieve ``k`` passages for every query and score them against ``qrels``.

    The report is :func:`~xlrag.evals.retrieval.retrieval_report`'s, plus the run's
    ``mode``, ``fusion``, ``index_dir``, whether the index was ``complete`` and the
    retriever's ``notes``. ``inventory`` (the index's languages) is read from the index
    when not given; pass it to score several runs over one index without rescanning.
    ``steps``: passage postprocessors (a reranker) each ranking goes through.
    """
    _check_level(level)
    inventory = inventory or IndexInventory.of(retriever.stores)
    # Qrels that do not fit the index fail here, before minutes of retrieval.
    relevant_langs([q.id for q in queries if q.id], qrels, inventory.unit_langs(level), level)
    rankings, complete, notes = rank_queries(retriever, queries, k, progress, steps)
    report = retrieval_report(rankings, qrels, inventory.unit_langs(level), inventory.counts,
                              k=k, level=level, n_boot=n_boot, seed=seed)
    head = {"mode": retriever.policy.name, "fusion": retriever.fusion, "index_dir": str(retriever.stores.index_dir)}
    return Evaluation(head | report | {"complete": complete, "notes": dict(notes)}, rankings)
