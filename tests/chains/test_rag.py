"""The grounded chains: parsing into GroundedAnswer, citation validation, post-hoc and
vendor citations, and the local model end to end over the real XQuAD index."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from tests.chains.conftest import TEST_THREADS
from tests.prompts.recorded import recorded_format
from xlrag.chains.echo import echo_reference
from xlrag.chains.grounding import PostHocCiter
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import ChainInput, ChainState, GroundedChain, finalize
from xlrag.config import AnswerConfig, LLMConfig
from xlrag.errors import ConfigError, PolicyError
from xlrag.prompts import PromptLibrary
from xlrag.schema import GroundedAnswer, make_query

QUESTION_DE = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"
QUESTION_EN = "How many points did the Panthers defense surrender?"


@pytest.fixture(scope="module")
def hits(retriever):
    return retriever.retrieve(make_query(QUESTION_EN, lang="en"), mode="qlang_en", k=3).hits


@pytest.fixture(scope="module")
def local_llm():
    from xlrag.chains.llms import build_llm

    # plumbing: the smallest entry
    return build_llm(LLMConfig(model="gemma-3-270m", max_tokens=48, n_threads=TEST_THREADS))


def state(retriever, hits, fmt="citation", options=None, question=QUESTION_EN, lang="en"):
    q = retriever.prepare(question, lang=lang)
    lib = PromptLibrary()
    docs = [h.passage.text for h in hits]
    msgs = lib.build_messages(lang, question, docs, fmt, options)
    return ChainState(query=q, hits=hits, fmt=fmt, options=options, mode="qlang_en", model="test/replayed",
                      echo_reference=echo_reference(msgs, docs, question, options))


def fin(st: ChainState, message: Any, citer) -> GroundedAnswer:
    return finalize(st.model_copy(update={"message": message}), citer)


def test_model_citations_resolve_to_passages(retriever, hits):
    out = ("Cited Documents: <doc0>, <doc2>\nAnswer: 308 points.\n"
           "Explanation: because the defense gave up just 308 points <doc0>.")
    a = fin(state(retriever, hits), AIMessage(out), None)
    assert isinstance(a, GroundedAnswer)
    assert a.answer == "308 points." and "<doc0>" in a.explanation
    assert [c.marker for c in a.citations] == [0, 2]
    assert [c.passage_id for c in a.citations] == [hits[0].id, hits[2].id]
    assert all(c.valid and c.source == "model" and c.lang == "en" for c in a.citations)
    assert a.flags == [] and a.cited_passages == [hits[0], hits[2]]


def test_invalid_ids_are_flagged_not_dropped(retriever, hits):
    out = "Cited Documents: <doc7>\nAnswer: 308.\nExplanation: because <doc7> says so."
    a = fin(state(retriever, hits), AIMessage(out), None)
    assert [(c.marker, c.valid, c.passage_id) for c in a.citations] == [(7, False, None)]
    assert "invalid_citation" in a.flags and "no_citations" in a.flags


def test_no_citations_get_post_hoc_ones_marked_as_such(retriever, hits):
    out = "Cited Documents:\nAnswer: The Panthers defense gave up just 308 points.\nExplanation: because it did."
    citer = PostHocCiter(retriever.embedder, retriever.stores)
    a = fin(state(retriever, hits), AIMessage(out), citer)
    assert "no_citations" in a.flags and "post_hoc_citations" in a.flags
    assert a.citations and all(c.source == "post_hoc" and c.post_hoc and c.score >= 0.8 for c in a.citations)
    assert a.citations[0].passage_id == hits[0].id  # the passage that states it
    assert a.model_citations == []  # never passed off as the model's own


def test_template_echo_is_not_an_answer(retriever, hits):
    lib = PromptLibrary()
    # the example block holds headers only (#33): what is left to copy is the instruction line
    instruction = lib.render("citation_format", "en", answer_header="Answer:").splitlines()[0]
    a = fin(state(retriever, hits), AIMessage(f"Answer: {instruction}"), None)
    assert "prompt_echo" in a.flags and a.answer is None


def test_a_copied_citation_line_then_a_real_answer_is_answered(retriever, hits):
    # a real 1.5B reply from the Travel report: the Arabic example's citation line, then the answer
    out = ("Cited Documents: المستندات التي استخدمتها، مثل <doc0>, <doc2>\n\n"
           "Answer: نعم، يمكن قيادة السيارة في غيانا برخصة اماراتية.\n\n"
           "Explanation: من المستندات، يمكن القيادة بالرخصة الإماراتية دون الحاجة للاختبار.")
    # recorded under the Arabic example block shipped before #33, so compared with that prompt
    st = state(retriever, hits, question="هل يمكن القيادة في غيانا برخصة إماراتية؟", lang="ar")
    st = st.model_copy(update={"echo_reference": st.echo_reference + "\n" + recorded_format("ar", "Answer:")})
    a = fin(st, AIMessage(out), None)
    assert "prompt_echo" in a.flags and a.model_citations == []  # the example's markers are not citations
    assert a.answer == "نعم، يمكن قيادة السيارة في غيانا برخصة اماراتية." and a.answered
    # today's prompt: its instruction line (which names <doc0>, <doc1>) copied as the citations
    instruction = PromptLibrary().render("citation_format", "en", answer_header="Answer:").splitlines()[0]
    echo_only = fin(state(retriever, hits), AIMessage(f"Cited Documents: {instruction}"), None)
    assert "prompt_echo" in echo_only.flags and not echo_only.answered and echo_only.model_citations == []


def test_mc_parses_native_options(retriever, hits):
    options = ["308", "24", "136"]
    a = fin(state(retriever, hits, fmt="mc", options=options), AIMessage(" A) 308"), None)
    assert (a.option_index, a.chosen_option, a.flags) == (0, "308", [])
    a = fin(state(retriever, hits, fmt="mc", options=options), AIMessage("I am not sure."), None)
    assert a.option_index is None and "unparseable" in a.flags


def test_citation_with_options_uses_chosen_option(retriever):
    hits = retriever.retrieve(make_query("¿Quién controla Ceuta?", lang="es"), mode="qlang", k=2).hits
    options = ["España", "Marruecos"]
    out = "Cited Documents: <doc1>\nChosen Option: A) España\nExplanation: porque <doc1> lo dice."
    a = fin(state(retriever, hits, fmt="citation", options=options, question="¿Quién controla Ceuta?",
                       lang="es"), AIMessage(out), None)
    assert a.option_index == 0 and a.chosen_option == "España" and a.citations[0].marker == 1


def test_cohere_native_citations_map_to_doc_markers(retriever, hits, vendor_replay, monkeypatch):
    from xlrag.chains.llms import build_llm

    monkeypatch.setenv("COHERE_API_KEY", "co-test-key")
    span = "308 points"
    answer = "The Panthers defense surrendered 308 points."

    def chat(body: dict[str, Any]):
        sent = [d["id"] for d in body["documents"]]
        start = answer.index(span)
        return 200, {"id": "x", "finish_reason": "COMPLETE",
                     "message": {"role": "assistant", "content": [{"type": "text", "text": answer}],
                                 "citations": [{"start": start, "end": start + len(span), "text": span,
                                                "type": "TEXT_CONTENT",
                                                "sources": [{"type": "document", "id": sent[1],
                                                             "document": {"id": sent[1]}}]}]},
                     "usage": {"tokens": {"input_tokens": 10, "output_tokens": 8}}}

    replay = vendor_replay({"/v2/chat": chat})
    llm = build_llm(LLMConfig(provider="cohere", base_url=replay.url))
    a = GroundedChain(pipeline=Pipeline.create(retriever, llm, answer=AnswerConfig(format="answer"), mode="qlang_en",
                                               k=3)).invoke({"question": QUESTION_EN, "lang": "en"})
    vendor = [c for c in a.citations if c.source == "vendor"]
    assert [(c.marker, c.passage_id, c.text) for c in vendor] == [(1, a.passages[1].id, span)]
    assert [d["id"] for d in replay.requests[0].body["documents"]] == [h.id for h in a.passages]
    assert "no_citations" not in a.flags


def test_anthropic_citation_blocks_map_to_doc_markers(retriever, vendor_replay, monkeypatch):
    from xlrag.chains.llms import build_llm

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    def messages(body: dict[str, Any]):
        docs = [b for b in body["messages"][-1]["content"] if b["type"] == "document"]
        cited = docs[0]["source"]["data"][:40]
        return 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                     "content": [{"type": "text", "text": "308 points.",
                                  "citations": [{"type": "char_location", "cited_text": cited, "document_index": 0,
                                                 "document_title": "t", "start_char_index": 0,
                                                 "end_char_index": 40}]}],
                     "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 10, "output_tokens": 4}}

    replay = vendor_replay({"/v1/messages": messages})
    llm = build_llm(LLMConfig(provider="anthropic", base_url=replay.url))
    a = GroundedChain(pipeline=Pipeline.create(retriever, llm, answer=AnswerConfig(format="answer"), mode="qlang_en",
                                               k=2)).invoke({"question": QUESTION_EN, "lang": "en"})
    assert a.answer == "308 points."
    assert [(c.marker, c.source, c.passage_id) for c in a.citations] == [(0, "vendor", a.passages[0].id)]


def test_bad_inputs(retriever, local_llm):
    with pytest.raises(ConfigError, match="options"):
        GroundedChain(pipeline=Pipeline.create(retriever, local_llm,
                                               answer=AnswerConfig(format="mc"))).invoke(QUESTION_EN)
    with pytest.raises(ValidationError, match="unknown answer format"):
        GroundedChain(pipeline=Pipeline.create(retriever, local_llm, answer=AnswerConfig(format="essay")))
    with pytest.raises(ConfigError, match="question"):
        GroundedChain(pipeline=Pipeline.create(retriever, local_llm)).invoke({"q": QUESTION_EN})


def test_an_undetectable_question_is_one_error_with_or_without_retrieval(retriever, local_llm):
    # one owner (xlrag.detect.question_language): closed-book once answered it as English
    for r in (retriever, None):
        with pytest.raises(PolicyError, match=r"could not detect the language of '12345 \.\.\.'"):
            GroundedChain(pipeline=Pipeline.create(r, local_llm, answer=AnswerConfig(format="answer"))
                          ).invoke({"question": "12345 ..."})
    assert GroundedChain(pipeline=Pipeline.create(None, local_llm, answer=AnswerConfig(format="answer"))).query_for(
        ChainInput(question="¿Quién ganó el partido?")).lang == "es"


@pytest.mark.slow
def test_local_model_end_to_end(retriever, local_llm):
    chain = GroundedChain(pipeline=Pipeline.create(retriever, local_llm, answer=AnswerConfig(format="citation"),
                                                   mode="qlang_en", k=3))
    a = chain.invoke({"question": QUESTION_DE})
    assert a.lang == "de" and a.mode == "qlang_en" and a.model.startswith("local/gemma-3-270m")
    assert len(a.passages) == 3 and {h.lang for h in a.passages} <= {"de", "en"}
    assert a.raw_output.strip()
    # Whatever the tiny model wrote, every citation is validated and labelled.
    assert all(c.valid == (c.passage_id is not None) for c in a.citations)
    assert a.citations or "no_citations" in a.flags


@pytest.mark.slow
def test_runnable_protocol_with_local_model(retriever, local_llm):
    chain = GroundedChain(pipeline=Pipeline.create(retriever, local_llm, answer=AnswerConfig(format="answer"),
                                                   mode="qlang", k=2))
    sync = chain.invoke({"question": QUESTION_EN, "lang": "en"})
    asyn = asyncio.run(chain.ainvoke({"question": QUESTION_EN, "lang": "en"}))
    assert [h.id for h in sync.passages] == [h.id for h in asyn.passages]
    assert sync.answer and asyn.answer and sync.lang == asyn.lang == "en"
    batch = chain.batch([QUESTION_EN, "¿Cuántos puntos permitió la defensa de los Panthers?"])
    assert [b.lang for b in batch] == ["en", "es"]
    streamed = list(chain.stream(QUESTION_EN))
    assert isinstance(streamed[-1], GroundedAnswer)


@pytest.mark.slow
def test_closed_book(local_llm):
    a = GroundedChain(pipeline=Pipeline.create(None, local_llm, answer=AnswerConfig(format="answer"))
                      ).invoke({"question": QUESTION_EN, "lang": "en"})
    assert a.passages == [] and "closed_book" in a.flags and a.mode == "no_ir"


@pytest.mark.slow
def test_llm_translator_drives_translate_mode(retriever, local_llm):
    from xlrag.chains.translator import LLMTranslator
    from xlrag.indexes.policies import Translate
    from xlrag.indexes.translate import CachedTranslator

    calls = []

    class Counting(LLMTranslator):
        def translate(self, text, source_lang, target_lang):
            calls.append(target_lang)
            return super().translate(text, source_lang, target_lang)

    translator = CachedTranslator(Counting(local_llm))
    policy = Translate(translator, languages=["en", "de", "ru"])
    hits = retriever.retrieve(make_query(QUESTION_EN, lang="en"), mode=policy, k=6)
    assert sorted(calls) == ["de", "ru"]
    # each store is searched with the model's translation into its language (read from the cache:
    # what the model says may be the question unchanged, so the texts are compared with its words)
    planned = {"en": QUESTION_EN, **{lang: translator.translate(QUESTION_EN, "en", lang) for lang in ("de", "ru")}}
    assert {h.store: h.query_text for h in hits.hits}.items() <= planned.items()
    plan = policy.plan(make_query(QUESTION_EN, lang="en"), "en", ["en", "de", "ru"], 6)
    assert {s.store: s.text for s in plan.searches} == planned
    retriever.retrieve(make_query(QUESTION_EN, lang="en"), mode=policy, k=6)
    assert sorted(calls) == ["de", "ru"]  # cached: translated once per language


@pytest.mark.parametrize(("lang", "output", "kept"), [
    # Real gemma-3-270m replies: the format example copied, spliced and cut short.
    ("en", ' the documents you used, for example <doc0>, <doc1>, and so on. Reply in exactly the format below. '
           'Keep the three headers "Cited Documents:", "Answer:" and "Explanation:" in English, exactly as written.\n'
           "Answer: the documents you used, for example, and so on.", ""),
    ("de", " die Dokumente, die du verwendet hast, z. B. <doc0>, <doc2>\nAnswer: die Dokumente, die du verwendet "
           "hast, z. B., usw.\nExplanation: weil … (zitiere die Dokumente direkt im Text, z. B.", ""),
    # Real answers survive, in the prompt's language or not.
    ("en", " <doc0>\nAnswer: Saturday and Sunday.\nExplanation: because <doc0> lists the weekend days.", None),
    ("de", " <doc1>\nAnswer: 308 Punkte.\nExplanation: weil die Verteidigung nur 308 Punkte abgab <doc1>.", None),
])
def test_echo_detection_on_real_replies(lang, output, kept):
    from xlrag.chains.echo import drop_echo as _drop_echo

    # These replies came from the chat-style prompt shipped before #33, so the reference is cut
    # from it: today's prompt with that example block.
    msgs = [*PromptLibrary().build_messages(lang, QUESTION_EN, ["a passage"], "citation"),
            ("user", recorded_format(lang, "Answer:"))]
    assert _drop_echo(output, echo_reference(msgs, ["a passage"], QUESTION_EN)) == (output if kept is None else kept)


def test_base_models_get_a_worked_example_in_the_users_language_layout(retriever, hits):
    from xlrag.chains.rag import base_model_messages

    lib = PromptLibrary()
    msgs, example = base_model_messages(lib, "de", QUESTION_DE, ["**Kopf** | Text", "Zwei"], "citation", None)
    (_, system), (_, user) = msgs
    assert lib.render("answer_language", "de") in system  # still told, in German, to answer in German
    assert user.startswith(example) and "Frage: What is the capital of Germany?" in example
    assert "<doc0> Kopf Text" in user  # markdown noise removed for the base model
    assert user.endswith(f"Frage: {QUESTION_DE}\nCited Documents:")


def test_citing_the_examples_doc_number_is_not_an_echo(retriever, hits):
    from xlrag.chains.rag import base_model_messages

    _, example = base_model_messages(PromptLibrary(), "en", QUESTION_EN, ["a", "b"], "citation", None)
    st = state(retriever, hits)
    st = st.model_copy(update={"echo_reference": st.echo_reference + "\n" + example})
    a = fin(st, AIMessage(" <doc1>\nAnswer: 308\nExplanation: because <doc1> says 308."), None)
    assert "prompt_echo" not in a.flags and [c.marker for c in a.citations] == [1]


def test_a_bare_reply_is_an_answer_not_a_document_list(retriever, hits):
    # Instruct models given the worked example often reply just "308": that is no <doc308>.
    a = fin(state(retriever, hits), AIMessage("308"), None)
    assert a.answer == "308" and "invalid_citation" not in a.flags and "no_citations" in a.flags
    a = fin(state(retriever, hits), AIMessage(" <doc1>\nAnswer: 308\nExplanation: because <doc1>."), None)
    assert a.answer == "308" and [c.marker for c in a.citations] == [1]


@pytest.mark.parametrize(("metadata", "cut"), [
    ({"finish_reason": "stop"}, False),  # the provider says it finished: no full stop needed
    ({"finish_reason": "length"}, True),  # it says the budget ran out, however complete it reads
    # it says nothing: the answer line is whole, and an explanation ending on "119" is no sign of a cut
    # (issue 51: the text's last character flagged short complete answers)
    ({}, False),
])
def test_the_providers_word_on_how_a_reply_ended_decides_truncated(retriever, hits, metadata, cut):
    from xlrag.chains.profiles import ProviderProfile

    out = "Cited Documents: <doc0>\nAnswer: 110 أو 111\nExplanation: الإسعاف والمطافئ: 110 أو 111\nشرطة الطوارئ: 119"
    a = finalize(state(retriever, hits).model_copy(update={"message": AIMessage(out, response_metadata=metadata)}),
                 None, ProviderProfile())
    assert ("truncated" in a.flags) is cut


@pytest.mark.parametrize(("out", "cut"), [
    # issue 51: a correct, short answer with no full stop, from a provider that does not say how it ended
    ("Cited Documents: <doc0>\nAnswer: Nicholas E. Golovin", False),
    ("Cited Documents: <doc0>\nAnswer: Nicholas E. Golovin\nExplanation: Seaman named him <doc0>", False),
    ("Nicholas E. Golovin", False),  # a bare reply
    # the answer line itself unfinished: the reply ends inside it
    ("Cited Documents: <doc0>\nAnswer: Police 999, Ambulance", False),
    ("Cited Documents: <doc0>\nAnswer: Police 999, Ambulance 998,", True),
    ("Cited Documents: <doc0>\nAnswer: Police 999 <do", True),
    ("Cited Documents: <doc0>\nAnswer: (Police", True),
])
def test_truncated_only_when_the_answer_line_itself_is_unfinished(retriever, hits, out, cut):
    from xlrag.chains.profiles import ProviderProfile

    a = finalize(state(retriever, hits).model_copy(update={"message": AIMessage(out)}), None, ProviderProfile())
    assert ("truncated" in a.flags) is cut, a.flags
