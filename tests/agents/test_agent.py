"""The agent end to end on the real XQuAD index: a scripted model, then the real local model.

The scripted model is LangChain's ``GenericFakeChatModel`` replaying fixed replies, so
the repair path is exercised exactly; everything else (retrieval, parsing, lingua, the
graph) is real.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from xlrag.agents import build_agent
from xlrag.config import XlragConfig
from xlrag.trace import Repair

QUESTION = "¿Cuántos puntos dejaron escapar en defensa los Panthers?"
ENGLISH = ("Cited Documents:\nAnswer: The Panthers defense allowed 308 points.\n"
           "Explanation: The document says the defense gave up only 308 points.")
SPANISH = ("Cited Documents: <doc0>\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
           "Explanation: Según <doc0>, la defensa solo permitió 308 puntos en toda la temporada.")


def scripted(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def agent(retriever, llm, attribution_check: bool = False, **agent_cfg):
    # quote off by default here: these tests follow the model's own repairs (the quote's are below)
    cfg = XlragConfig(agent={"mode": "qlang_en", "quote": False, **agent_cfg}, retrieval={"k": 3},
                      answer={"attribution_check": attribution_check})
    return build_agent(cfg, llm=llm, retriever=retriever)


def test_wrong_language_without_citations_is_repaired_by_regenerating(retriever):
    out = agent(retriever, scripted(ENGLISH, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert [c.marker for c in answer.model_citations if c.valid] == [0]
    assert [r.repair for r in trace.repairs] == [Repair.REGENERATE_LANGUAGE]
    first = {c.check: c.passed for c in trace.checks if c.attempt == 0}
    last = {c.check: c.passed for c in trace.checks if c.attempt == 1}
    assert first == {"language": False, "citations": False, "non_answer": True, "refusal": True}
    assert last == {"language": True, "citations": True, "non_answer": True, "refusal": True, "unsupported": True}
    assert trace.mode == "qlang_en" and trace.lang == "es" and trace.unrepaired == []
    assert sum(trace.retrieved_langs.values()) == 3
    assert {t.step for t in trace.timings} >= {"detect", "retrieve", "generate", "verify"}


def test_an_answer_line_in_another_script_under_an_explanation_in_the_right_language_is_repaired(retriever):
    # lingua reads answer and explanation together: a Russian answer line copied from a passage
    # under a longer Spanish explanation reads as Spanish; the answer line alone is what the user
    # takes away, so its script is checked too
    russian_line = ("Cited Documents: <doc0>\nAnswer: Защита Пантер пропустила 308 очков.\n"
                    "Explanation: Según <doc0>, la defensa de los Panthers solo permitió 308 puntos en toda la "
                    "temporada regular, la sexta cifra más baja de la liga.")
    out = agent(retriever, scripted(russian_line, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    first = next(c for c in trace.checks if c.check == "language" and c.attempt == 0)
    # each part judged on its own: the answer line is Russian whatever the explanation is
    assert not first.passed and first.detail == ("wrong: answer line wrong (detected ru), explanation correct "
                                                 "(detected es); expected es")
    # its words are in no passage either, so the first repair asks for the passage's own answer
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT]
    last = next(c for c in trace.checks if c.check == "language" and c.attempt == 1)
    assert last.passed and answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert trace.unrepaired == []


def test_every_repair_in_order_ends_with_post_hoc_citations(retriever):
    # regenerating does not help; the translation (two calls: answer, explanation) does;
    # the budget of two LLM repairs is spent, so the citations come post hoc
    llm = scripted(ENGLISH, ENGLISH, "La defensa de los Panthers permitió 308 puntos.",
                   "El documento dice que la defensa solo permitió 308 puntos.")
    out = asyncio.run(agent(retriever, llm).ainvoke({"question": QUESTION}))
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE, Repair.POST_HOC]
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos." and "translated" in answer.flags
    assert answer.citations and all(c.source == "post_hoc" and c.valid for c in answer.citations)
    assert "post_hoc_citations" in answer.flags
    # post-hoc citations are shown, flagged, and never pass: the answer they alone support is unrepaired
    (last,) = [c for c in trace.checks if c.check == "citations" and c.attempt == 3]
    assert not last.passed and "do not count" in last.detail
    assert trace.unrepaired == ["citations"] and "unrepaired_citations" in answer.flags


def test_a_translation_cut_off_at_max_tokens_keeps_the_whole_untranslated_answer(retriever):
    # the translation stopped at the token limit in its first line: half an answer must not
    # replace the whole one, and the question still gets an answer, flagged unrepaired
    cut = AIMessage("La defensa de los Panthers", response_metadata={"finish_reason": "length"})
    llm = GenericFakeChatModel(messages=iter([AIMessage(ENGLISH), AIMessage(ENGLISH), cut]))
    out = agent(retriever, llm).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE, Repair.POST_HOC]
    assert "not translated" in trace.repairs[1].detail and "max_tokens" in trace.repairs[1].detail
    assert answer.answer == "The Panthers defense allowed 308 points." and "translated" not in answer.flags
    assert "language" in trace.unrepaired


def test_a_repair_that_loses_the_answer_keeps_the_previous_one(retriever):
    spanish_uncited = ("Cited Documents:\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
                       "Explanation: La defensa solo permitió 308 puntos.")
    out = agent(retriever, scripted(ENGLISH, spanish_uncited, "Cited Documents:")).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.REGENERATE_LANGUAGE, Repair.RECITE, Repair.POST_HOC]
    assert "previous one is kept" in trace.repairs[1].detail
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos."


def test_citations_given_alone_join_the_previous_answer(retriever):
    spanish_uncited = ("Cited Documents:\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
                       "Explanation: La defensa solo permitió 308 puntos.")
    out = agent(retriever, scripted(ENGLISH, spanish_uncited, "Cited Documents: <doc0>")).invoke(
        {"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.REGENERATE_LANGUAGE, Repair.RECITE]
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert [(c.marker, c.source) for c in answer.citations] == [(0, "model")] and trace.unrepaired == []


def test_no_repair_budget_still_reaches_the_deterministic_fallback(retriever):
    out = agent(retriever, scripted(ENGLISH), max_repairs=0).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.POST_HOC]
    assert trace.unrepaired == ["language", "citations"] and "unrepaired_language" in answer.flags


def test_a_graph_that_cannot_stop_hits_the_recursion_limit(retriever):
    from langgraph.errors import GraphRecursionError

    # the plan always ends; the step cap is the second bound, and it holds on its own
    with pytest.raises(GraphRecursionError):
        agent(retriever, scripted(ENGLISH, ENGLISH, "x", "y"), recursion_limit=10).invoke(
            {"question": QUESTION}, {"recursion_limit": 5})


def test_only_the_answering_model_streams(retriever):
    llm = scripted(ENGLISH, ENGLISH, "La defensa de los Panthers permitió 308 puntos.",
                   "El documento dice que la defensa solo permitió 308 puntos.")
    streamed = [(chunk.content, meta["langgraph_node"]) for chunk, meta in
                agent(retriever, llm).stream({"question": QUESTION}, stream_mode="messages")]
    text = "".join(c for c, _ in streamed)
    assert {node for _, node in streamed} == {"generate", "repair"}
    assert "308 points" in text and "permitió" not in text  # the translator's calls are not streamed


def test_an_unsupported_answer_is_asked_again_then_accepted(retriever):
    # the answer names the right passage, but the attribution check (same scripted model)
    # says it does not support it; asked again, the second answer passes
    llm = scripted(SPANISH, '{"justification": "El pasaje no lo dice.", "verdict": "not_attributable"}',
                   SPANISH, '{"justification": "El pasaje dice 308 puntos.", "verdict": "attributable"}')
    out = agent(retriever, llm, attribution_check=True).invoke({"question": QUESTION})
    trace = out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.RECITE]
    assert [(c.check, c.passed) for c in trace.checks if c.check == "attribution"] == [
        ("attribution", False), ("attribution", True)]
    assert "1 of 1 cited passages support the answer" in trace.checks[-1].detail
    assert trace.unrepaired == []


class FirstReplyScripted(GenericFakeChatModel):
    """Answers its first call with a fixed reply, then hands every call to a real model."""

    real: object = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if not getattr(self, "_spent", False):
            object.__setattr__(self, "_spent", True)
            return super()._generate(messages, stop=stop, run_manager=run_manager)
        return self.real._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._generate(messages, stop=stop, **kwargs)


@pytest.mark.slow
def test_the_real_local_model_repairs_a_wrong_language_answer(retriever):
    from xlrag.chains.llms import build_llm
    from xlrag.checks.language import judge_language, response_text
    from xlrag.config import LLMConfig

    real = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=96, n_threads=1))
    llm = FirstReplyScripted(messages=iter([AIMessage(ENGLISH)]), real=real, metadata=real.metadata)
    out = agent(retriever, llm).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert trace.repairs[0].repair is Repair.REGENERATE_LANGUAGE  # the scripted English first answer
    assert judge_language(response_text(answer), "es").status == "correct", response_text(answer)
    assert any(c.valid for c in answer.citations) and not any(not c.valid for c in answer.citations)
    # the language is repaired; citations the model did not write itself (post hoc) never pass
    assert trace.unrepaired == [] or (trace.unrepaired == ["citations"] and answer.post_hoc_only)


def test_an_english_answer_line_is_replaced_by_the_spanish_passages_own_sentence(retriever):
    """The quote repair (#51): the model answered in English from the passages; a Spanish passage
    says the same in a sentence about the question, so that sentence is the answer line, cited,
    with no model call; the English explanation is then translated (one call)."""
    llm = scripted(ENGLISH, "El documento dice que la defensa solo permitió 308 puntos.")
    out = agent(retriever, llm, quote=True).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.QUOTE, Repair.TRANSLATE]
    quoted = answer.citations[0]
    assert quoted.source == "quote" and quoted.lang == "es" and quoted.text == answer.answer
    shown = answer.passages[quoted.marker].passage.text
    assert answer.answer in shown and "308" in answer.answer and "quoted" in answer.flags
    assert answer.explanation.startswith("El documento dice") and trace.unrepaired == []
    assert "quoted from <doc" in trace.repairs[0].detail


def test_no_quote_for_a_number_no_spanish_sentence_about_the_question_holds(retriever):
    wrong = ("Cited Documents: <doc0>\nAnswer: The Panthers defense allowed 1965 points.\n"
             "Explanation: The document says so <doc0>.")
    out = agent(retriever, scripted(wrong, wrong, wrong, wrong), quote=True).invoke({"question": QUESTION})
    assert Repair.QUOTE not in [r.repair for r in out["trace"].repairs]
    assert "quoted" not in out["answer"].flags


def test_no_answer_line_even_when_asked_again_shows_the_passages_sentence_never_verified(retriever):
    from xlrag.checks.substance import QUOTED_ONLY, unverified

    empty = "Cited Documents: <doc0>\nAnswer:\nExplanation: Según el documento."
    out = agent(retriever, scripted(empty, empty, empty, empty), quote=True).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs][:2] == [Repair.EXTRACT, Repair.QUOTE]
    assert "the model gave none" in trace.repairs[1].detail
    first = next(c for c in trace.checks if c.check == "non_answer" and c.attempt == 0)
    assert not first.passed and first.detail.startswith("no answer line")
    quoted = answer.citations[0]
    assert (quoted.source == "quote" and quoted.lang == "es"
            and answer.answer in answer.passages[quoted.marker].passage.text)
    assert "308" in answer.answer  # the Spanish passage's sentence about the points the defense gave up
    assert QUOTED_ONLY in answer.flags and QUOTED_ONLY in unverified(answer)
