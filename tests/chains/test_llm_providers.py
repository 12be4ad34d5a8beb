"""Chat-model providers end to end: the local llama.cpp model and every vendor adapter.

* ``local``: the bundled gemma-3-270m through LocalLlamaChat (real llama.cpp, tiny outputs).
* ``openai``: real ChatOpenAI → real OpenAI SDK → a real ``llama_cpp.server`` subprocess.
* ``anthropic`` / ``cohere`` / ``mistral``: the real LangChain integrations and vendor SDKs
  against a local HTTP server replaying recorded responses in each vendor's wire format;
  the recorded requests show what we send (paths, auth header, system prompt, params).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage

from tests.chains.conftest import TEST_THREADS, Passage, Replay
from xlrag.chains.llms import DEFAULT_STOP, LocalLlamaChat, build_llm, render_prompt
from xlrag.config import LLMConfig
from xlrag.errors import (
    MissingAPIKeyError,
    MissingDependencyError,
    ProviderError,
    UnknownProviderError,
)

KEYS = {
    "OPENAI_API_KEY": "sk-test-openai-0000",
    "ANTHROPIC_API_KEY": "sk-ant-test-0000",
    "COHERE_API_KEY": "co-test-cohere-0000",
    "MISTRAL_API_KEY": "mi-test-mistral-0000",
}
SYSTEM = "You answer travel questions using only the document you are given. Be brief."
QUESTION = "How many days can a citizen of the United Arab Emirates stay in Switzerland as a tourist without a visa?"
ANSWER = "A UAE citizen can stay in Switzerland for up to 90 days in any 180-day period without a visa."


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)
    # Nothing in the environment may redirect the SDKs away from 127.0.0.1.
    for var in ("CO_API_KEY", "CO_API_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE",
                "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "MISTRAL_BASE_URL",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def rag_messages(p: Passage, question: str = QUESTION) -> list[Any]:
    return [
        SystemMessage(f"{SYSTEM}\n\nDocument [{p.title}]:\n{p.text}"),
        HumanMessage(f"Question: {question}\nAnswer:"),
    ]


# -- local: the bundled gemma through llama.cpp ------------------------------------------------

# The plumbing tests run on the smallest entry, whatever the catalogue's default is.
LOCAL_CFG = LLMConfig(model="gemma-3-270m", max_tokens=24, n_ctx=1024, n_threads=TEST_THREADS)


@pytest.fixture(scope="module")
def local_llm() -> LocalLlamaChat:
    llm = build_llm(LOCAL_CFG)
    assert isinstance(llm, LocalLlamaChat)
    return llm


def assert_stopped_cleanly(msg: AIMessage) -> None:
    assert msg.text.strip(), "the model returned no text"
    assert msg.response_metadata["finish_reason"] == "stop", msg.response_metadata
    assert not any(s in msg.text for s in DEFAULT_STOP), repr(msg.text)


def test_render_prompt_is_plain_completion_text() -> None:
    prompt = render_prompt([SystemMessage("Sys."), HumanMessage("Question: q\nAnswer:"), AIMessage(" A")])
    assert prompt == "Sys.\n\nQuestion: q\nAnswer: A"


def test_build_llm_defaults_to_local_without_loading() -> None:
    llm = build_llm()
    assert isinstance(llm, LocalLlamaChat)
    assert llm.model_path is None and llm.temperature == 0 and llm.seed == 0
    assert llm._llama is None  # lazily loaded
    assert llm._llm_type == "xlrag-llama-cpp"


def test_local_missing_model_file(tmp_path) -> None:
    llm = build_llm(LLMConfig(model=str(tmp_path / "nope.gguf")))
    with pytest.raises(ProviderError, match=r"does not exist"):
        llm.invoke("hi")


@pytest.mark.slow
def test_local_invoke_travel(local_llm: LocalLlamaChat, travel_passage: Passage) -> None:
    msgs = rag_messages(travel_passage)
    msg = local_llm.invoke(msgs)
    assert isinstance(msg, AIMessage)
    assert_stopped_cleanly(msg)
    meta = msg.response_metadata
    assert meta["prompt_tokens"] == local_llm.count_tokens(render_prompt(msgs)) + 1  # + BOS
    assert 0 < meta["completion_tokens"] <= LOCAL_CFG.max_tokens
    assert msg.usage_metadata == {"input_tokens": meta["prompt_tokens"],
                                  "output_tokens": meta["completion_tokens"],
                                  "total_tokens": meta["prompt_tokens"] + meta["completion_tokens"]}
    # deterministic: temperature 0, fixed seed
    assert local_llm.invoke(msgs).text == msg.text
    # the caller's stop sequences are merged with the defaults
    first_line = local_llm.invoke(msgs, stop=["\n"])
    assert first_line.response_metadata["finish_reason"] == "stop"
    assert "\n" not in first_line.text and first_line.text.strip()
    assert msg.text.startswith(first_line.text)


@pytest.mark.slow
def test_local_models_are_shared(local_llm: LocalLlamaChat) -> None:
    other = build_llm(LOCAL_CFG.model_copy(update={"max_tokens": 8}))
    assert other.count_tokens("Switzerland") == local_llm.count_tokens("Switzerland") > 0
    assert other._llama is local_llm._llama and other._lock is local_llm._lock
    assert local_llm.get_num_tokens("Switzerland") == local_llm.count_tokens("Switzerland")


@pytest.mark.slow
def test_local_stream_and_batch(local_llm: LocalLlamaChat, travel_passage: Passage) -> None:
    msgs = rag_messages(travel_passage)
    expected = local_llm.invoke(msgs).text
    chunks = list(local_llm.stream(msgs))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert len([c for c in chunks if c.text]) > 1, "expected token-by-token chunks"
    full = chunks[0]
    for c in chunks[1:]:
        full += c
    assert full.text == expected
    assert full.response_metadata["finish_reason"] == "stop"
    assert full.usage_metadata["input_tokens"] > 0 and full.usage_metadata["output_tokens"] > 0

    other_q = "Is a visa needed to study in Switzerland?"
    out = local_llm.batch([msgs, rag_messages(travel_passage, other_q)])
    assert out[0].text == expected
    assert out[1].text.strip()


@pytest.mark.slow
async def test_local_async_does_not_block_the_loop(local_llm: LocalLlamaChat, travel_passage: Passage) -> None:
    msgs = rag_messages(travel_passage)
    expected = (await asyncio.to_thread(local_llm.invoke, msgs)).text
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        t0 = time.perf_counter()
        msg = await local_llm.ainvoke(msgs)
        elapsed = time.perf_counter() - t0
        parts = [c.text async for c in local_llm.astream(msgs)]
    finally:
        task.cancel()
    assert msg.text == expected and msg.response_metadata["completion_tokens"] > 0
    assert "".join(parts) == expected and len(parts) > 1
    # The loop kept running during generation: a blocked loop would tick about once.
    assert ticks >= min(5, int(elapsed / 0.05)), (ticks, elapsed)

    # Stopping a stream early releases the model for the next caller.
    stream = local_llm.astream(msgs)
    async for _ in stream:
        break
    await stream.aclose()
    again = await asyncio.wait_for(local_llm.ainvoke(msgs), timeout=120)
    assert again.text == expected


@pytest.mark.slow
async def test_local_prompt_too_long(local_llm: LocalLlamaChat, travel_passage: Passage) -> None:
    long = [SystemMessage("\n\n".join([travel_passage.text] * 40)), HumanMessage(f"Question: {QUESTION}\nAnswer:")]
    with pytest.raises(ProviderError, match=r"lower retrieval\.k\) or raise llm\.n_ctx"):
        local_llm.invoke(long)
    with pytest.raises(ProviderError, match=r"n_ctx"):
        list(local_llm.stream(long))
    with pytest.raises(ProviderError, match=r"n_ctx"):
        await local_llm.ainvoke(long)
    with pytest.raises(ProviderError, match=r"n_ctx"):
        async for _ in local_llm.astream(long):
            pass
    # the model survives and still answers
    assert local_llm.invoke(rag_messages(travel_passage)).text.strip()


# -- openai: real ChatOpenAI against a real llama_cpp.server ----------------------------------


@pytest.mark.slow
def test_openai_adapter_against_llama_cpp_server(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")  # local OpenAI-compatible servers need no key
    llm = build_llm(LLMConfig(provider="openai", model="gemma", base_url=llama_server, max_tokens=16))
    assert type(llm).__name__ == "ChatOpenAI"
    msgs = [SystemMessage("Answer briefly."), HumanMessage("What is the capital of France?")]
    msg = llm.invoke(msgs)
    assert msg.text.strip()
    assert msg.response_metadata["model_name"] == "gemma"
    # max_tokens reached the server (langchain-openai alone sends only max_completion_tokens)
    assert 0 < msg.usage_metadata["output_tokens"] <= 16
    chunks = list(llm.stream(msgs))
    assert len(chunks) > 1
    # temperature 0: greedy, the same text from the same state. The server keeps the last prompt in
    # its context, so the first call read the whole prompt and later ones only its last token; a
    # one-token batch rounds differently from a whole prompt's (with plain weight buffers the two
    # texts part after 40 characters), so the stream is compared with a later call's
    again = llm.invoke(msgs)
    assert "".join(c.text for c in chunks) == again.text


def test_openai_needs_key_without_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MissingAPIKeyError) as e:
        build_llm(LLMConfig(provider="openai"))
    assert e.value.env_var == "OPENAI_API_KEY" and "OPENAI_API_KEY" in str(e.value)


def test_openai_spec_through_build_llm() -> None:
    llm = build_llm(LLMConfig.parse_spec("openai:gpt-4o-mini"))
    assert type(llm).__name__ == "ChatOpenAI"
    assert llm.model_name == "gpt-4o-mini" and llm.temperature == 0 and llm.seed == 0
    assert llm.max_retries == 2 and llm.request_timeout == 120.0
    assert llm.openai_api_key.get_secret_value() == KEYS["OPENAI_API_KEY"]
    assert build_llm(LLMConfig.parse_spec("openai")).model_name == "gpt-4o-mini"


# -- anthropic: Messages API replay ---------------------------------------------------------


def anthropic_message(body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, Any]:
    """A POST /v1/messages response as api.anthropic.com sends it."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 412, "output_tokens": 27, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


def test_anthropic_adapter(vendor_replay: Any, travel_passage: Passage) -> None:
    replay: Replay = vendor_replay({"/v1/messages": lambda b: (200, anthropic_message(b, [{"type": "text",
                                                                                           "text": ANSWER}]))})
    llm = build_llm(LLMConfig(provider="anthropic", base_url=replay.url, max_tokens=200, temperature=0.2))
    assert type(llm).__name__ == "ChatAnthropic"
    msg = llm.invoke(rag_messages(travel_passage))

    assert msg.content == ANSWER  # a plain string when there are no citations
    assert msg.usage_metadata["input_tokens"] == 412 and msg.usage_metadata["output_tokens"] == 27
    assert msg.response_metadata["stop_reason"] == "end_turn"
    (req,) = replay.requests
    assert req.path == "/v1/messages"
    # anthropic 2.x sends the key as a bearer token; 0.x sent it as x-api-key
    key = KEYS["ANTHROPIC_API_KEY"]
    assert req.headers.get("authorization") == f"Bearer {key}" or req.headers.get("x-api-key") == key
    assert req.headers["anthropic-version"]
    body = req.body
    assert body["model"] == "claude-sonnet-4-5"
    assert body["max_tokens"] == 200 and body["temperature"] == 0.2
    system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
    assert system.startswith(SYSTEM) and travel_passage.text in system
    assert body["messages"] == [{"role": "user", "content": f"Question: {QUESTION}\nAnswer:"}]


def test_anthropic_citations_land_in_content_blocks(vendor_replay: Any, travel_passage: Passage) -> None:
    doc = travel_passage.text
    cited = ("A citizen of the United Arab Emirates does not need a visa for up to 90 days of stay in each "
             "180 day-period.")
    start = doc.index(cited)
    content = [
        {"type": "text", "text": "According to the document, "},
        {"type": "text", "text": "UAE citizens need no visa for stays of up to 90 days in any 180-day period",
         "citations": [{"type": "char_location", "cited_text": cited, "document_index": 0,
                        "document_title": travel_passage.title, "start_char_index": start,
                        "end_char_index": start + len(cited)}]},
        {"type": "text", "text": "."},
    ]
    replay: Replay = vendor_replay({"/v1/messages": lambda b: (200, anthropic_message(b, content))})
    llm = build_llm(LLMConfig(provider="anthropic", base_url=replay.url))
    question = HumanMessage(content=[
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": doc},
         "title": travel_passage.title, "citations": {"enabled": True}},
        {"type": "text", "text": QUESTION},
    ])
    msg = llm.invoke([SystemMessage(SYSTEM), question])

    # Request: the document block with citations enabled went out unchanged.
    sent = replay.requests[0].body["messages"][0]["content"]
    assert sent[0]["type"] == "document" and sent[0]["citations"] == {"enabled": True}
    assert sent[0]["source"]["data"] == doc and sent[1]["text"] == QUESTION
    # Response: WHERE ANTHROPIC CITATIONS LAND — msg.content becomes the list of content
    # blocks; a text block's "citations" holds char_location dicts (cited_text,
    # document_index, document_title, start_char_index, end_char_index). msg.text joins the
    # text blocks. Nothing goes to additional_kwargs / response_metadata.
    assert isinstance(msg.content, list)
    assert msg.text == ("According to the document, UAE citizens need no visa for stays of up to 90 days in any "
                        "180-day period.")
    (block,) = [b for b in msg.content if b.get("citations")]
    (c,) = block["citations"]
    assert c["type"] == "char_location" and c["document_index"] == 0
    assert c["document_title"] == travel_passage.title
    assert doc[c["start_char_index"]:c["end_char_index"]] == c["cited_text"] == cited
    assert "citations" not in msg.additional_kwargs and "citations" not in msg.response_metadata


# -- cohere: v2 chat replay -------------------------------------------------------------------


def cohere_chat(body: dict[str, Any], passage: Passage) -> dict[str, Any]:
    """A POST /v2/chat response (grounded on documents) as api.cohere.com sends it."""
    span = "up to 90 days in any 180-day period"
    start = ANSWER.index(span)
    return {
        "id": "c14c80c3-18eb-4519-9460-6c92edd8cfb4",
        "finish_reason": "COMPLETE",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": ANSWER}],
            "citations": [{
                "start": start, "end": start + len(span), "text": span, "type": "TEXT_CONTENT",
                "sources": [{"type": "document", "id": passage.id,
                             "document": {"id": passage.id, "title": passage.title, "text": passage.text}}],
            }],
        },
        "usage": {"billed_units": {"input_tokens": 301, "output_tokens": 21},
                  "tokens": {"input_tokens": 1012, "output_tokens": 23}},
    }


def test_cohere_adapter_and_citations(vendor_replay: Any, travel_passage: Passage) -> None:
    replay: Replay = vendor_replay({"/v2/chat": lambda b: (200, cohere_chat(b, travel_passage))})
    llm = build_llm(LLMConfig(provider="cohere", base_url=replay.url, max_tokens=128, seed=7))
    assert isinstance(llm, BaseChatModel) and llm._llm_type == "cohere-chat"
    docs = [{"id": travel_passage.id, "data": {"title": travel_passage.title, "text": travel_passage.text}}]
    msg = llm.invoke([SystemMessage(SYSTEM), HumanMessage(QUESTION)], documents=docs)

    assert msg.text == ANSWER
    (req,) = replay.requests
    assert req.path == "/v2/chat"
    assert req.headers["authorization"] == f"Bearer {KEYS['COHERE_API_KEY']}"
    body = req.body
    assert body["model"] == "command-a-03-2025"
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert body["messages"][-1] == {"role": "user", "content": QUESTION}
    assert body["temperature"] == 0 and body["max_tokens"] == 128 and body["seed"] == 7
    assert body["documents"] == docs

    # WHERE COHERE CITATIONS LAND — msg.additional_kwargs["citations"], and the same list in
    # msg.response_metadata["citations"]: cohere SDK `Citation` objects (attributes, not
    # dict keys) with .start/.end = character offsets into msg.content, .text, and
    # .sources[i] with .type == "document", .id (the id we sent) and .document (our fields).
    # The documents sent are echoed in additional_kwargs["documents"]. (Streaming drops them.)
    cites = msg.additional_kwargs["citations"]
    assert msg.response_metadata["citations"] == cites
    (c,) = cites
    assert msg.text[c.start:c.end] == c.text == "up to 90 days in any 180-day period"
    (src,) = c.sources
    assert src.type == "document" and src.id == travel_passage.id
    assert src.document["title"] == travel_passage.title
    assert msg.additional_kwargs["documents"] == docs
    assert msg.usage_metadata["input_tokens"] == 1012 and msg.usage_metadata["output_tokens"] == 23


def test_cohere_key_fallback_co_api_key(monkeypatch: pytest.MonkeyPatch, vendor_replay: Any,
                                        travel_passage: Passage) -> None:
    monkeypatch.delenv("COHERE_API_KEY")
    monkeypatch.setenv("CO_API_KEY", "co-fallback-key")
    replay: Replay = vendor_replay({"/v2/chat": lambda b: (200, cohere_chat(b, travel_passage))})
    build_llm(LLMConfig(provider="cohere", base_url=replay.url)).invoke(QUESTION)
    assert replay.requests[0].headers["authorization"] == "Bearer co-fallback-key"


# -- mistral: chat completions replay -----------------------------------------------------------


def mistral_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A POST /v1/chat/completions response as api.mistral.ai sends it."""
    return {
        "id": "cmpl-e5cc70bb28c444948073e77776eb30ef",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "mistral-large-2411",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": ANSWER, "tool_calls": None, "prefix": False}}],
        "usage": {"prompt_tokens": 289, "completion_tokens": 24, "total_tokens": 313},
    }


def test_mistral_adapter(vendor_replay: Any, travel_passage: Passage) -> None:
    replay: Replay = vendor_replay({"/v1/chat/completions": lambda b: (200, mistral_chat(b))})
    llm = build_llm(LLMConfig(provider="mistral", base_url=f"{replay.url}/v1", max_tokens=64))
    assert type(llm).__name__ == "ChatMistralAI"
    msg = llm.invoke(rag_messages(travel_passage))

    assert msg.text == ANSWER
    assert msg.usage_metadata["input_tokens"] == 289 and msg.usage_metadata["output_tokens"] == 24
    (req,) = replay.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEYS['MISTRAL_API_KEY']}"
    body = req.body
    assert body["model"] == "mistral-large-latest"
    assert body["temperature"] == 0 and body["max_tokens"] == 64 and body["random_seed"] == 0
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"].startswith(SYSTEM)
    assert body["messages"][1] == {"role": "user", "content": f"Question: {QUESTION}\nAnswer:"}


# -- configuration errors -----------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "env_var"), [
    ("anthropic", "ANTHROPIC_API_KEY"),
    ("cohere", "COHERE_API_KEY"),
    ("mistral", "MISTRAL_API_KEY"),
])
def test_missing_vendor_keys(monkeypatch: pytest.MonkeyPatch, provider: str, env_var: str) -> None:
    monkeypatch.delenv(env_var)
    with pytest.raises(MissingAPIKeyError) as e:
        build_llm(LLMConfig(provider=provider))
    assert e.value.env_var == env_var and env_var in str(e.value)


def test_unknown_provider() -> None:
    with pytest.raises(UnknownProviderError) as e:
        build_llm(LLMConfig.parse_spec("gemini:flash"))
    assert {"local", "openai", "anthropic", "cohere", "mistral"} <= set(e.value.known)


def test_missing_integration_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules is how Python marks a module as not importable.
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)
    with pytest.raises(MissingDependencyError) as e:
        build_llm(LLMConfig(provider="mistral"))
    assert e.value.extra == "mistral" and "xlrag[mistral]" in str(e.value)


def test_vendor_defaults_pass_timeouts_and_retries() -> None:
    cfg = LLMConfig(timeout=33, max_retries=4)
    anthropic = build_llm(cfg.model_copy(update={"provider": "anthropic"}))
    assert anthropic.default_request_timeout == 33 and anthropic.max_retries == 4
    mistral = build_llm(cfg.model_copy(update={"provider": "mistral"}))
    assert mistral.timeout == 33 and mistral.max_retries == 4
    cohere = build_llm(cfg.model_copy(update={"provider": "cohere"}))
    assert cohere.timeout_seconds == 33
    assert cohere._default_params["request_options"] == {"max_retries": 4}
