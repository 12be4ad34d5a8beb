"""GroundedChain: typed input, provider profiles, and adding a vendor in one place."""

from __future__ import annotations

from typing import Any

import pytest

from tests.replay import Replay
from xlrag.chains.llms import build_llm
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.profiles import (
    CHAT,
    LocalProfile,
    ProviderProfile,
    Request,
    profile_for,
    register_profile,
)
from xlrag.chains.rag import ChainInput, GroundedChain
from xlrag.config import AnswerConfig, LLMConfig
from xlrag.errors import ConfigError
from xlrag.registry import register
from xlrag.schema import Citation, GroundedAnswer

QUESTION = "How many points did the Panthers defense surrender?"


def test_chain_input_is_typed_and_strict():
    assert ChainInput.coerce("q").question == "q"
    with pytest.raises(ConfigError, match="did you mean 'question'"):
        ChainInput.coerce({"questoin": "q"})
    with pytest.raises(ConfigError, match="did you mean 'relevant_langs'"):
        ChainInput.coerce({"question": "q", "relevant_lang": ["es"]})
    with pytest.raises(ConfigError, match="options"):
        ChainInput.coerce({"question": "q", "options": "España"})


def test_mc_needs_two_options_before_any_call(retriever):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    chain = GroundedChain(pipeline=Pipeline.create(retriever, GenericFakeChatModel(messages=iter([])),
                                                   answer=AnswerConfig(format="mc")))
    with pytest.raises(ConfigError, match="at least two options"):
        chain.invoke({"question": "¿Quién controla Ceuta?", "options": ["España"]})


def test_build_llm_records_the_provider_for_its_profile(monkeypatch):
    local = build_llm(LLMConfig(provider="local", few_shot=False))
    assert isinstance(profile_for(local), LocalProfile)
    chain = GroundedChain(pipeline=Pipeline.create(None, local))
    assert isinstance(chain, GroundedChain) and chain.few_shot is False  # the configured choice wins
    # and the argument beats it
    assert GroundedChain(pipeline=Pipeline.create(None, local, few_shot=True)).few_shot is True
    monkeypatch.setenv("MISTRAL_API_KEY", "k")
    assert profile_for(build_llm(LLMConfig(provider="mistral"))).name == "mistral"


def test_a_users_own_chat_model_gets_the_generic_profile():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    assert profile_for(GenericFakeChatModel(messages=iter([]))) is CHAT


# -- a new vendor, added in one place ----------------------------------------------------------------


class AcmeProfile(ProviderProfile):
    """A made-up OpenAI-compatible vendor that grounds on `extra_body.sources` and answers
    with its own citation list in the message's additional kwargs."""

    name: str = "acme"

    def request(self, messages, hits, stop):
        sources = [{"id": h.id, "text": h.passage.text} for h in hits]
        return Request(messages=messages, kwargs={"extra_body": {"sources": sources}})

    def citations(self, message, hits):
        ids = {h.id: n for n, h in enumerate(hits)}
        refs = (getattr(message, "response_metadata", {}) or {}).get("acme_refs") or []
        return [Citation(marker=ids[r], passage_id=r, doc_id=hits[ids[r]].doc_id, lang=hits[ids[r]].lang,
                         valid=True, source="vendor") for r in refs if r in ids]


def _acme_setup() -> None:
    # The one place: a factory and its profile, side by side.
    @register("llm", "acme")
    def _acme(cfg: LLMConfig):
        from langchain_openai import ChatOpenAI

        class AcmeChat(ChatOpenAI):
            def _create_chat_result(self, response: Any, generation_info: Any = None):
                result = super()._create_chat_result(response, generation_info)
                body = response if isinstance(response, dict) else response.model_dump()
                result.generations[0].message.response_metadata["acme_refs"] = body.get("acme_refs", [])
                return result

        return AcmeChat(model=cfg.model or "acme-1", api_key="acme-key", base_url=cfg.base_url,
                        max_retries=0, temperature=cfg.temperature)

    register_profile("acme", AcmeProfile())


def test_a_new_vendor_needs_only_its_factory_and_profile(retriever, vendor_replay):
    _acme_setup()

    def chat(body: dict[str, Any]):
        first = body["sources"][0]["id"]
        return 200, {"id": "c1", "object": "chat.completion", "created": 1, "model": "acme-1",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "308 points."}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
                     "acme_refs": [first]}

    replay: Replay = vendor_replay({"/v1/chat/completions": chat})
    llm = build_llm(LLMConfig(provider="acme", base_url=f"{replay.url}/v1"))
    answer = GroundedChain(pipeline=Pipeline.create(retriever, llm, answer=AnswerConfig(format="answer"),
                                                    k=2)).invoke({"question": QUESTION, "lang": "en"})
    assert isinstance(answer, GroundedAnswer) and answer.model == "acme/acme-1"
    (req,) = replay.requests
    assert [s["id"] for s in req.body["sources"]] == [h.id for h in answer.passages]
    vendor = [c for c in answer.citations if c.source == "vendor"]
    assert [c.passage_id for c in vendor] == [answer.passages[0].id] and "no_citations" not in answer.flags


async def test_async_and_batch_keep_the_types(retriever):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    replies = iter([AIMessage("Cited Documents: <doc0>\nAnswer: 308\nExplanation: because <doc0>.")] * 3)
    chain = GroundedChain(pipeline=Pipeline.create(retriever, GenericFakeChatModel(messages=replies), k=2))
    a = await chain.ainvoke({"question": QUESTION, "lang": "en"})
    assert a.answer == "308" and a.model_citations[0].marker == 0
    (b,) = await chain.abatch([{"question": QUESTION, "lang": "en"}])
    assert isinstance(b, GroundedAnswer) and b.lang == "en"


# -- passages the caller gives ------------------------------------------------------------------------


def test_given_passages_are_answered_over_in_their_order_without_retrieval():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from xlrag.schema import Passage

    given = [Passage(id="p-es", doc_id="d1", text="Los Broncos ganaron la Super Bowl 50.", lang="es"),
             Passage(id="p-en", doc_id="d2", text="Denver beat Carolina 24-10 in Super Bowl 50.", lang="en")]
    reply = "Cited Documents: <doc1>\n\nAnswer: Denver ganó 24-10 <doc1>.\n\nExplanation: lo dice <doc1>."
    chain = GroundedChain(pipeline=Pipeline.create(None, GenericFakeChatModel(messages=iter([AIMessage(reply)])),
                                                   answer=AnswerConfig(format="citation")))
    ans = chain.invoke({"question": "¿Quién ganó la Super Bowl 50?", "lang": "es", "passages": given})
    assert ans.mode == "given" and [h.id for h in ans.passages] == ["p-es", "p-en"]
    assert [(c.passage_id, c.valid) for c in ans.citations] == [("p-en", True)]
    state = chain.prepare({"question": "¿Quién ganó?", "lang": "es", "passages": given})
    user = state.request.messages[-1][1]
    assert user.index("<doc0>") < user.index("Los Broncos") < user.index("<doc1>") < user.index("Denver beat")
    with pytest.raises(ConfigError, match="not both"):
        chain.prepare({"question": "¿Quién ganó?", "passages": given, "mode": "qlang"})
    with pytest.raises(ConfigError, match=r"passages\.0\.lang"):
        chain.prepare({"question": "¿Quién ganó?", "passages": [{"id": "x", "doc_id": "d", "text": "t"}]})
