"""Evaluation: retrieval, answer, language and citation metrics, judges, attribution, Ragas, experiments.

Names load on first use, so ``import xlrag.evals`` stays light.
"""

from __future__ import annotations

from xlrag._lazy import lazy_exports

# name -> module that defines it; one line per name.
_LAZY = {
    "AttributionChecker": "xlrag.checks.attribution",
    "AttributionResult": "xlrag.checks.attribution",
    "CalibrationItem": "xlrag.evals.calibration_items",
    "Evaluation": "xlrag.evals.retrieval_run",
    "ExperimentConfig": "xlrag.evals.experiment",
    "ExperimentRunner": "xlrag.evals.runner",
    "IndexInventory": "xlrag.evals.retrieval_run",
    "JudgeConfig": "xlrag.judges.panel",
    "JudgeItem": "xlrag.evals.judge_items",
    "JudgePanel": "xlrag.judges.panel",
    "LanguageVerdict": "xlrag.checks.language",
    "LexicalJudge": "xlrag.judges.lexical",
    "LexicalJudgeConfig": "xlrag.judges.lexical",
    "MetricScore": "xlrag.evals.ragas_metrics",
    "PanelConfig": "xlrag.judges.panel",
    "PanelVerdict": "xlrag.judges.panel",
    "Qrel": "xlrag.evals.retrieval",
    "RagasMetrics": "xlrag.evals.ragas_metrics",
    "RagasRow": "xlrag.evals.ragas_metrics",
    "RankedPassage": "xlrag.evals.retrieval",
    "Ranking": "xlrag.evals.retrieval",
    "RowScores": "xlrag.evals.ragas_metrics",
    "SQLiteLLMCache": "xlrag.evals.cache",
    "bootstrap_ci": "xlrag.evals.stats",
    "bootstrap_macro_ci": "xlrag.evals.stats",
    "build_items": "xlrag.evals.calibration_items",
    "build_report": "xlrag.evals.report",
    "calibrate": "xlrag.evals.calibration",
    "char3_recall": "xlrag.evals.answers",
    "chrf": "xlrag.evals.answers",
    "citation_summary": "xlrag.evals.citations",
    "citation_vs_inclusion": "xlrag.evals.citations",
    "cohen_kappa": "xlrag.evals.agreement",
    "default_panel": "xlrag.judges.panel",
    "evaluate_retriever": "xlrag.evals.retrieval_run",
    "exact_match": "xlrag.evals.answers",
    "fleiss_kappa": "xlrag.evals.agreement",
    "hit_at": "xlrag.evals.retrieval",
    "judge_file": "xlrag.evals.judge_items",
    "judge_language": "xlrag.checks.language",
    "language_bias": "xlrag.evals.retrieval",
    "language_summary": "xlrag.checks.language",
    "load_calibration": "xlrag.evals.calibration",
    "load_experiment": "xlrag.evals.experiment",
    "load_qrels": "xlrag.evals.retrieval",
    "metric_names": "xlrag.evals.retrieval",
    "mrr_at": "xlrag.evals.retrieval",
    "ndcg_at": "xlrag.evals.retrieval",
    "query_metrics": "xlrag.evals.retrieval",
    "ragas_embeddings": "xlrag.evals.ragas_adapter",
    "ragas_llm": "xlrag.evals.ragas_adapter",
    "rank_queries": "xlrag.evals.retrieval_run",
    "read_records": "xlrag.evals.run_folder",
    "recall_at": "xlrag.evals.retrieval",
    "relevant_langs": "xlrag.evals.retrieval",
    "retrieval_report": "xlrag.evals.retrieval",
    "score_answer": "xlrag.evals.scoring",
    "score_rows": "xlrag.evals.ragas_metrics",
    "token_f1": "xlrag.evals.answers",
    "trec_run": "xlrag.evals.retrieval",
    "write_reports": "xlrag.evals.studies",
    "write_trec_run": "xlrag.evals.retrieval",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
