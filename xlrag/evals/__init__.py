"""Evaluation: retrieval metrics by language, with bootstrap intervals.

Names load on first use, so ``import xlrag.evals`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module that defines it; one line per name.
_LAZY = {
    "Evaluation": "xlrag.evals.retrieval_run",
    "MetricScore": "xlrag.evals.ragas_adapter",
    "IndexInventory": "xlrag.evals.retrieval_run",
    "Qrel": "xlrag.evals.retrieval",
    "RagasMetrics": "xlrag.evals.ragas_adapter",
    "RagasRow": "xlrag.evals.ragas_adapter",
    "RankedPassage": "xlrag.evals.retrieval",
    "Ranking": "xlrag.evals.retrieval",
    "RowScores": "xlrag.evals.ragas_adapter",
    "bootstrap_ci": "xlrag.evals.stats",
    "bootstrap_macro_ci": "xlrag.evals.stats",
    "evaluate_retriever": "xlrag.evals.retrieval_run",
    "hit_at": "xlrag.evals.retrieval",
    "language_bias": "xlrag.evals.retrieval",
    "load_qrels": "xlrag.evals.retrieval",
    "metric_names": "xlrag.evals.retrieval",
    "mrr_at": "xlrag.evals.retrieval",
    "ndcg_at": "xlrag.evals.retrieval",
    "query_metrics": "xlrag.evals.retrieval",
    "ragas_embeddings": "xlrag.evals.ragas_adapter",
    "ragas_llm": "xlrag.evals.ragas_adapter",
    "rank_queries": "xlrag.evals.retrieval_run",
    "recall_at": "xlrag.evals.retrieval",
    "relevant_langs": "xlrag.evals.retrieval",
    "retrieval_report": "xlrag.evals.retrieval",
    "score_rows": "xlrag.evals.ragas_adapter",
    "trec_run": "xlrag.evals.retrieval",
    "write_trec_run": "xlrag.evals.retrieval",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'xlrag.evals' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
