"""One question through every driver of the pipeline: the chain, the agent, the LlamaIndex
query engine, the CLI (chain and agent) and the server. Each is built from the same config
by ``Pipeline.from_config``, so each shows the same passages and gets the same citations and
flags. The model is the OpenAI SDK against a stand-in on 127.0.0.1 that always gives the
same reply (tests/replay.py), so only the plumbing can differ."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml

from tests.clitools import run
from tests.conftest import XQUAD_LANGS
from tests.replay import serve
from xlrag.config import XlragConfig

QUESTION = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"
# the config shows the best passage last (context.order: best_last): of three, <doc2>
REPLY = ("Cited Documents: <doc2>\nAnswer: 308 Punkte\n"
         "Explanation: Die Verteidigung der Panthers ließ in der Saison nur 308 Punkte zu <doc2>.")


def _completion(body: Any) -> tuple[int, Any]:
    return 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1750000000, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": REPLY}}],
                 "usage": {"prompt_tokens": 300, "completion_tokens": 30, "total_tokens": 330}}


@pytest.fixture(scope="module")
def stand_in():
    with serve({"/v1/chat/completions": _completion}) as replay:
        yield replay


@pytest.fixture
def cfg(stand_in, xquad_index, monkeypatch) -> XlragConfig:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return XlragConfig(index_dir=xquad_index,
                       llm={"provider": "openai", "model": "gpt-4o-mini", "base_url": f"{stand_in.url}/v1"},
                       retrieval={"mode": "qlang_en", "k": 3, "detect_candidates": XQUAD_LANGS},
                       agent={"mode": "qlang_en", "tools": "off"},
                       # the passage steps in an order of the config's own: every door runs them
                       postprocess=["context", "rerank"], context={"order": "best_last"})


def _seen(answer: dict[str, Any]) -> dict[str, Any]:
    # the server's passages are flat (PassageOut), the GroundedAnswer's are hits
    return {"passages": [h["passage"]["id"] if "passage" in h else h["id"] for h in answer["passages"]],
            "citations": [(c["marker"], c["passage_id"], c["source"], c["valid"]) for c in answer["citations"]],
            "flags": answer["flags"], "answer": answer["answer"], "lang": answer["lang"], "mode": answer["mode"]}


def test_the_same_question_through_every_driver(cfg, tmp_path):
    from tests.server.conftest import AUTH, KEY, running
    from xlrag import build_agent, build_query_engine
    from xlrag.chains.rag import GroundedChain
    from xlrag.server import create_app

    seen: dict[str, dict[str, Any]] = {}
    chain = GroundedChain.from_config(cfg)
    seen["chain"] = _seen(chain.invoke(QUESTION).model_dump(mode="json"))
    chain.pipeline.close()
    seen["agent"] = _seen(build_agent(cfg).invoke({"question": QUESTION})["answer"].model_dump(mode="json"))
    engine = build_query_engine(cfg)
    response = engine.query(QUESTION)
    seen["query engine"] = _seen(response.metadata["grounded_answer"].model_dump(mode="json"))
    assert [n.node.metadata["citation"] for n in response.source_nodes] == ["<doc2>"]
    engine.close()

    path = tmp_path / "xlrag.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    for name, extra in (("cli", []), ("cli agent", ["--agent"])):
        res = run("ask", "--config", path, "--json", *extra, QUESTION)
        assert res.exit_code == 0, res.output
        seen[name] = _seen(json.loads(res.output))
    # the retrieve doors show the passages as the prompt gets them: the same steps ran
    res = run("retrieve", "--config", path, "--json", QUESTION)
    assert res.exit_code == 0, res.output
    shown = {"cli retrieve": [h["id"] for h in json.loads(res.output)]}

    with running(create_app(cfg, api_key=KEY)) as url:
        reply = httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, headers=AUTH, timeout=120)
        found = httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION}, headers=AUTH, timeout=120)
    assert reply.status_code == 200, reply.text
    assert found.status_code == 200, found.text
    seen["server"] = _seen(reply.json()["answer"])
    shown["server retrieve"] = [h["id"] for h in found.json()["hits"]]

    first = seen["chain"]
    assert first["lang"] == "de" and first["mode"] == "qlang_en" and len(first["passages"]) == 3
    # best_last: the retriever's best passage is shown last (<doc2>)
    from xlrag.chains.pipeline import Pipeline
    from xlrag.schema import make_query

    pipeline = Pipeline.from_config(cfg)
    try:
        fused = pipeline.retriever.retrieve(make_query(QUESTION, lang="de"), k=3)
    finally:
        pipeline.close()
    assert first["passages"] == [h.id for h in fused.hits][::-1]
    assert first["citations"] == [(2, first["passages"][2], "model", True)] and first["answer"] == "308 Punkte"
    for name, got in seen.items():
        assert got == first, name
    for name, ids in shown.items():
        assert ids == first["passages"], name


class _Stamp:
    """A postprocessor that leaves a mark, to see which drivers run the pipeline's list."""

    name = "stamp"

    def process(self, answer):
        return answer.model_copy(update={"flags": [*answer.flags, "stamped"]})

    async def aprocess(self, answer):
        return self.process(answer)


def test_every_driver_runs_the_postprocessors(cfg):
    import asyncio

    from xlrag import Pipeline, build_agent
    from xlrag.chains.postprocess import POST_HOC, AnswerPostprocessor
    from xlrag.chains.query_engine import XlragQueryEngine
    from xlrag.chains.rag import GroundedChain

    pipeline = Pipeline.from_config(cfg, postprocessors=[_Stamp()])
    try:
        assert [p.name for p in pipeline.answer_steps] == [POST_HOC, "stamp"]
        assert [p.name for p in pipeline.passage_steps] == ["context", "none"]
        assert all(isinstance(p, AnswerPostprocessor) for p in pipeline.answer_steps)
        chain = GroundedChain(pipeline=pipeline)
        assert "stamped" in chain.invoke(QUESTION).flags
        assert "stamped" in asyncio.run(chain.ainvoke(QUESTION)).flags
        assert "stamped" in XlragQueryEngine(chain).query(QUESTION).metadata["grounded_answer"].flags
        agent = build_agent(cfg, pipeline=pipeline)
        assert "stamped" in agent.invoke({"question": QUESTION})["answer"].flags
        assert "stamped" in asyncio.run(agent.ainvoke({"question": QUESTION}))["answer"].flags
    finally:
        pipeline.close()


def test_the_config_turns_postprocessors_on_and_off(cfg):
    from xlrag import Pipeline
    from xlrag.chains.attribution_rerank import AttributionReranker
    from xlrag.config import AnswerConfig

    answer = AnswerConfig(attribution_rerank=True, post_hoc_citations=False)
    on = Pipeline.from_config(cfg.model_copy(update={"answer": answer}))
    try:
        assert [type(p) for p in on.answer_steps] == [AttributionReranker] and on.citer is None
    finally:
        on.close()
    closed = Pipeline.from_config(cfg, mode="no_ir")
    # closed-book: no retriever is opened, so nothing to cite after the fact either
    assert closed.retriever is None and closed.answer_steps == [] and not closed.owns_retriever


def test_one_attribution_checker_serves_the_reranker_the_agent_and_the_view(cfg):
    """answer.attribution_checker names the model of every attribution check in the stack: the
    one checker, built once by Pipeline.from_config (the agent's copy used to ignore it)."""
    from xlrag import Pipeline
    from xlrag.agents.build import Stack
    from xlrag.chains.attribution_rerank import AttributionReranker
    from xlrag.config import AnswerConfig
    from xlrag.errors import ConfigError

    own = cfg.llm.model_copy(update={"model": "checker-model"})
    both = cfg.model_copy(update={"answer": AnswerConfig(attribution_rerank=True, attribution_check=True,
                                                         attribution_checker=own)})
    stack = Stack.build(both)
    try:
        checker = stack.pipeline.attribution
        assert checker is not None and checker.llm.bound.model_name == "checker-model"
        (rerank,) = [p for p in stack.pipeline.postprocessors if isinstance(p, AttributionReranker)]
        assert rerank.checker is checker and stack.attribution is checker
        assert stack._agent(False).attribution is checker  # the agent's verify step, and the view's graph
        assert stack.perspectives_view is stack.perspectives_view  # built once per stack
    finally:
        stack.close()
    # a pipeline built from parts without a checker cannot silently drop answer.attribution_check
    bare = Pipeline.from_config(cfg, mode="no_ir")
    with pytest.raises(ConfigError, match=r"answer\.attribution_check is on, but the pipeline given has no attrib"):
        Stack(both, bare)
    assert Stack(cfg, bare).attribution is None


def test_bad_assembly_is_a_one_line_error(cfg):
    from xlrag import Pipeline, build_agent
    from xlrag.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown IR mode 'qlang-en'.*did you mean 'qlang_en'"):
        Pipeline.from_config(cfg, mode="qlang-en")
    pipeline = Pipeline.from_config(cfg, mode="no_ir")
    with pytest.raises(ConfigError, match="give a pipeline, or an llm and a retriever to build one, not both"):
        build_agent(cfg, pipeline=pipeline, llm=pipeline.llm)


def test_every_driver_refuses_an_overlong_question_with_one_message(cfg, tmp_path):
    from tests.clitools import error_line
    from xlrag import build_agent, build_query_engine
    from xlrag.chains.rag import GroundedChain
    from xlrag.errors import QuestionTooLongError

    cfg = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"max_question_chars": 20})})
    said = (f"the question has {len(QUESTION)} characters, over the limit of 20; shorten it or raise "
            f"retrieval.max_question_chars")
    chain = GroundedChain.from_config(cfg)
    engine = build_query_engine(cfg)
    try:
        for name, call in (("chain", lambda: chain.invoke(QUESTION)),
                           ("agent", lambda: build_agent(cfg).invoke({"question": QUESTION})),
                           ("query engine", lambda: engine.query(QUESTION))):
            with pytest.raises(QuestionTooLongError) as caught:
                call()
            assert str(caught.value) == said, name
    finally:
        chain.pipeline.close()
        engine.close()
    path = tmp_path / "xlrag.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    res = run("ask", "--config", path, QUESTION)
    assert res.exit_code == 2 and error_line(res) == f"error: {said}"
