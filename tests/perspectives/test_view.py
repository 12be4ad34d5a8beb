"""The perspectives view end to end on the real XQuAD index, with a model scripted by prompt
(tests/perspectives/conftest.py): retrieval per language store, the agent's checks, the
comparisons and the verdict are real; only the model's words are fixed."""

from __future__ import annotations

import asyncio

import pytest

from tests.perspectives.conftest import QUESTION, ByPrompt
from xlrag.errors import (
    ConfigError,
    InvalidArgumentError,
    LanguageNotIndexedError,
    UnknownLanguageError,
)

AGREE = {"en": ("308", "308 points."), "ru": ("308", "308 points."), "es": ("308", "308 points.")}
DISAGREE = {**AGREE, "ru": ("24", "24 points.")}


def _valid_sides(view) -> None:
    """Every side shown cites passages of its own language, each a passage the answer was shown."""
    for side in [s for d in view.disagreements for s in d.sides] + [c.chosen for c in view.consensus]:
        shown = {h.id for h in view.perspective(side.lang).answer.passages}
        assert side.citations, side
        for c in side.citations:
            assert c.valid and c.lang == side.lang and c.passage_id in shown, c


def test_answers_that_disagree_are_flagged_with_both_sides_and_their_citations(view):
    persp, llm = view(DISAGREE)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    assert (out.lang == "en" and out.choice.source == "given"
            and [p.lang for p in out.perspectives] == ["en", "ru", "es"])
    for p in out.perspectives:  # each answer grounded in its own language's store only
        assert p.status == "answered" and {h.lang for h in p.answer.passages} == {p.lang}
        assert p.answer.lang == "en" and p.trace.unrepaired == []
    assert out.status == "disagreement"
    assert {(p.a, p.b): p.agreement for p in out.pairs} == {("en", "ru"): "disagree", ("en", "es"): "agree",
                                                              ("ru", "es"): "disagree"}
    assert all(p.method == "lexical" for p in out.pairs)
    assert [[s.lang for s in d.sides] for d in out.disagreements] == [["en", "ru"], ["ru", "es"]]
    assert {s.answer for d in out.disagreements for s in d.sides} == {"308 points.", "24 points."}
    # en and es agree: a consensus of the two, never presented as everyone's
    assert [c.langs for c in out.consensus] == [["en", "es"]]
    _valid_sides(out)
    assert out.costs.model_dump() == {"answers": 3, "repairs": 0, "lexical_comparisons": 3, "judge_calls": 0}
    # the Russian side's support check translates the question and its answer into Russian (#51)
    assert llm.calls == {"answer": 3, "other": 2}


def test_answers_that_agree_are_a_consensus_with_no_false_flag(view):
    persp, llm = view(AGREE)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["ru", "es", "en"]})
    assert out.status == "consensus" and out.disagreements == []
    (consensus,) = out.consensus
    assert consensus.langs == ["ru", "es", "en"]
    # one of the agreeing answers as given, with its citations: the user's language's, all else equal
    assert consensus.chosen.lang == "en" and consensus.chosen.answer == "308 points."
    assert "user's language" in consensus.why_chosen
    _valid_sides(out)
    assert out.costs.judge_calls == 0 and llm.calls == {"answer": 3, "other": 2}  # 2: Russian support


def test_the_judge_is_asked_only_for_pairs_the_words_leave_unsure(view):
    # same words, another number: the lexical signal cannot tell, so the calibrated panel is asked
    answers = {**AGREE, "es": ("308", "308 points and 24 interceptions.")}
    persp, llm = view(answers)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    by_pair = {(p.a, p.b): p for p in out.pairs}
    assert by_pair[("en", "ru")].method == "lexical" and by_pair[("en", "ru")].agreement == "agree"
    for pair in (("en", "es"), ("ru", "es")):
        assert by_pair[pair].method == "judge" and by_pair[pair].agreement == "agree"
        assert by_pair[pair].reason.startswith("the judge: the response holds the gold answer")
        assert "different numbers" in by_pair[pair].reason and by_pair[pair].score == 1.0
    # the default panel is the lexical judge: no model call for it
    assert out.costs.judge_calls == 2 and llm.calls == {"answer": 3, "other": 2} and out.costs.lexical_comparisons == 3
    assert out.status == "consensus"


def test_a_panel_without_a_verdict_leaves_the_pair_unsure():
    from xlrag.judges.panel import JudgeVote, PanelVerdict
    from xlrag.perspectives.compare import AgreementJudge

    invalid = PanelVerdict(verdict="invalid", votes=[JudgeVote(judge="qwen", verdict="invalid", raw="",
                                                               reason="TimeoutError: slow")],
                           counts={"invalid": 1})
    assert AgreementJudge._read(invalid) == ("unsure", "the judge gave no verdict (TimeoutError: slow)")


def test_costs_stay_within_n_answers_and_n_choose_2_comparisons(view):
    persp, llm = view({**DISAGREE, "de": ("308", "308 points.")})
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es", "de"]})  # named: all kept
    n = len(out.perspectives)
    assert n == 4 and out.costs.answers == n == llm.calls["answer"]
    assert out.costs.lexical_comparisons == len(out.pairs) == n * (n - 1) // 2
    assert out.costs.judge_calls == sum(p.method == "judge" for p in out.pairs) == 0


def test_async_gives_what_sync_gives(view):
    persp, _ = view(DISAGREE)
    sync = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    persp2, llm = view(DISAGREE)
    out = asyncio.run(persp2.ainvoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]}))
    assert out.status == sync.status and out.pairs == sync.pairs
    assert [p.said for p in out.perspectives] == [p.said for p in sync.perspectives]
    # the Russian side's support check translates the question and its answer into Russian (#51)
    assert llm.calls == {"answer": 3, "other": 2}


def test_one_language_is_a_single_perspective_that_says_why(view):
    persp, llm = view(AGREE)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["ru"]})
    assert out.status == "single" and [p.lang for p in out.perspectives] == ["ru"]
    assert "one language was chosen" in out.note and "nothing to compare" in out.note
    assert out.pairs == [] and out.consensus == [] and out.disagreements == []
    assert out.costs.answers == 1 and out.costs.lexical_comparisons == 0 and llm.calls == {"answer": 1, "other": 2}


def test_the_languages_come_from_a_rule_with_the_users_language_first(view):
    persp, _ = view(DISAGREE, agent={"rules": [{"names": ["Panthers"], "relevant_langs": ["ru", "es", "fr"]}]})
    out = persp.invoke(QUESTION)
    assert out.choice.source == "rule" and out.choice.langs == ["en", "ru", "es"]
    assert out.choice.reason == "rule naming 'Panthers' (agent.rules)"
    assert out.choice.notes == ["rule naming 'Panthers' (agent.rules) names 'fr', which has no store in this index"]
    assert out.status == "disagreement"


def test_without_a_rule_the_best_ranked_stores_are_compared(view, retriever):
    persp, _ = view({**AGREE, "de": ("308", "308 points.")})
    out = persp.invoke({"question": QUESTION, "max_langs": 2})
    ranked = list(dict.fromkeys(h.lang for h in retriever.retrieve(QUESTION, mode="all", k=20).hits))
    assert out.choice.source == "top_by_retrieval" and out.choice.langs == ranked[:2]
    assert out.status == "consensus"


@pytest.mark.parametrize(("inp", "error", "words"), [
    ({"relevant_langs": ["Russian"]}, UnknownLanguageError, "did you mean 'ru'?"),
    ({"relevant_langs": ["xx"]}, UnknownLanguageError, "unknown language code 'xx' in relevant_langs"),
    ({"relevant_langs": ["en", "fr"]}, LanguageNotIndexedError,
     "the index has no 'fr' store (its languages: ar, de, en"),
    ({"relevant_langs": ["en", "ru", "es", "de"], "max_langs": 3}, InvalidArgumentError,
     "at most max_langs=3 languages"),
    ({"relevant_langs": []}, InvalidArgumentError, "one or more language codes"),
    ({"languages": ["en"]}, ConfigError, "unknown perspectives input 'languages'"),
    ({"max_langs": 0}, ConfigError, "bad perspectives input max_langs"),
])
def test_bad_input_is_one_line_before_any_model_call(view, inp, error, words):
    persp, llm = view(AGREE)
    with pytest.raises(error) as e:
        persp.invoke({"question": QUESTION, **inp})
    assert words in str(e.value) and "\n" not in str(e.value)
    assert llm.calls == {}


def test_a_store_with_no_passage_for_the_question_says_so_and_asks_no_model(tmp_path, embedder, xquad_docs):
    from tests.perspectives.conftest import ByPrompt
    from xlrag import build_perspectives
    from xlrag.config import SplitterConfig, XlragConfig
    from xlrag.indexes.indexer import delete_documents, index_documents

    docs = [d for d in xquad_docs if d.id in ("xquad-00-en", "xquad-00-ru", "xquad-00-es")]
    index_documents(docs, tmp_path / "idx", embedder, SplitterConfig(chunk_size=400, chunk_overlap=0))
    delete_documents(tmp_path / "idx", ["xquad-00-es"])
    llm = ByPrompt(answers=DISAGREE)
    persp = build_perspectives(XlragConfig(index_dir=tmp_path / "idx", retrieval={"k": 3}), llm=llm)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    es = out.perspective("es")
    assert es.status == "no_passages" and es.answer is None and es.note.startswith("no passages")
    assert llm.calls == {"answer": 2, "other": 2} and out.costs.answers == 2  # 2: Russian support (#51)
    assert [(p.a, p.b) for p in out.pairs] == [("en", "ru")] and out.status == "disagreement"
    assert out.note == "not compared: es (no passages)"


def test_an_answer_its_passages_do_not_hold_is_shown_but_never_compared(view):
    # an English answer whose words the Russian passage does not hold: the agent's checks
    # fail it, the repairs (translation, asking again) cannot fix it, so it stays unverified
    persp, llm = view({**AGREE, "ru": ("24", "Twenty-four interceptions by the linebackers.")})
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    ru = out.perspective("ru")
    assert ru.status == "unverified" and "unsupported" in ru.note and ru.said is None
    assert ru.shown == "Twenty-four interceptions by the linebackers." and ru.trace.repairs
    assert [(p.a, p.b) for p in out.pairs] == [("en", "es")] and out.status == "consensus"
    assert out.note == "not compared: ru (unverified)"
    assert out.consensus[0].langs == ["en", "es"] and out.costs.answers == 3
    assert out.costs.repairs == len(ru.trace.repairs) and llm.calls["answer"] == 3 + sum(
        r.repair.value in ("extract", "regenerate_language", "recite") for r in ru.trace.repairs)
    # to look the answer up in the Russian passage it is translated with its question, whose
    # words the passage holds whatever the answer says; each once, though checked after each repair
    texts = sorted(p.rsplit("\n\n", 1)[-1] for p in llm.asked)
    assert texts == sorted([QUESTION, "Twenty-four interceptions by the linebackers."]), texts


def test_a_refusal_is_shown_but_never_compared(view):
    # "the documents do not say" is no position: compared, it would disagree with every answer
    persp, _ = view({**AGREE, "ru": ("308", "The documents do not contain the answer to the question.")})
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    assert out.perspective("ru").status == "not_an_answer"
    assert all("ru" not in (p.a, p.b) for p in out.pairs) and out.status == "consensus"


@pytest.mark.parametrize(("cfg", "written"), [
    ({}, False),  # the default: the view shows no explanation, so none is written
    ({"agent": {"perspectives": {"explanation": True}}}, True),
    ({"agent": {"perspectives": {"explanation": True}}, "answer": {"explanation": False}}, False),
])
def test_the_views_answers_write_an_explanation_only_when_asked(view, cfg, written):
    # the scripted model writes one every time, as a model not stopped at the header would;
    # the pipeline drops it when the reply should have stopped there
    persp, _ = view(AGREE, **cfg)
    out = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "es"]})
    assert [p.status for p in out.perspectives] == ["answered", "answered"]
    assert all((p.answer.explanation is not None) is written for p in out.perspectives)
    assert persp.pipeline.answer_config.explanation is written
    if written:
        assert out.perspective("en").answer.explanation.endswith("gives 308.")


def test_the_views_own_pipeline_shares_the_stacks_model_and_stores(retriever):
    from xlrag.agents.build import Stack
    from xlrag.config import XlragConfig

    stack = Stack.build(XlragConfig(retrieval={"k": 3}), llm=ByPrompt(answers=AGREE), retriever=retriever)
    view = stack.perspectives_view
    assert stack.pipeline.answer_config.explanation is True and view.pipeline.answer_config.explanation is False
    assert view.pipeline.llm is stack.pipeline.llm and view.pipeline.retriever is stack.pipeline.retriever
