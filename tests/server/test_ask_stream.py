"""``POST /v1/ask`` with ``"stream": true``: the agent's answer as server-sent events, like
``/v1/chat``'s (token…, answer, done; or error), over real HTTP. Without it, one JSON body."""

from __future__ import annotations

import threading
import time

import httpx

from tests.server.conftest import (
    ENGLISH,
    QUESTION,
    SPANISH,
    SPANISH_ANSWER,
    GatedModel,
    scripted,
    sse_events,
)


def _limits(**kw):
    from xlrag.server import ServerLimits

    return ServerLimits(**kw)


def _same(answer: dict) -> dict:
    return {k: answer[k] for k in ("answer", "lang", "mode", "citations", "passages", "flags", "verified")}


def test_ask_streams_tokens_then_the_answer_then_done(serve):
    client = serve(scripted(SPANISH, repeat=True))
    with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    names = [name for name, _ in events]
    n_tokens = names.count("token")
    assert n_tokens > 5 and names == ["token"] * n_tokens + ["answer", "done"]
    assert "".join(data["text"] for name, data in events if name == "token") == SPANISH
    answer = events[-2][1]
    assert set(answer) == {"answer", "trace"}  # an AskResponse, as the JSON reply
    assert answer["answer"]["answer"] == SPANISH_ANSWER and answer["trace"]["question"] == QUESTION
    assert events[-1][1]["session_id"] is None and events[-1][1]["seconds"] > 0
    # without stream (the default), one JSON AskResponse with the same answer
    plain = client.post("/v1/ask", json={"question": QUESTION})
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    assert _same(plain.json()["answer"]) == _same(answer["answer"])


def test_ask_streams_a_repairs_reply_as_the_next_attempt(serve):
    from tests.server.conftest import config

    # the model's own repair, streamed (agent.quote off: the quote repair calls no model)
    client = serve(scripted(ENGLISH, SPANISH), cfg=config(quote=False))
    with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as response:
        events = sse_events(response)
    tokens = [data for name, data in events if name == "token"]
    assert "".join(t["text"] for t in tokens if t["attempt"] == 0) == ENGLISH
    assert "".join(t["text"] for t in tokens if t["attempt"] == 1) == SPANISH
    assert events[-2][0] == "answer" and events[-2][1]["answer"]["answer"] == SPANISH_ANSWER


def test_a_failure_inside_the_ask_stream_is_an_error_event(serve):
    client = serve(scripted())  # no replies: the model call fails
    with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        events = sse_events(response)
    assert [name for name, _ in events] == ["error"]
    error = events[0][1]["error"]
    assert error["type"] == "internal_error" and "request id" in error["message"]
    # a bad request is refused before any stream starts, with the typed 422
    bad = client.post("/v1/ask", json={"question": QUESTION, "stream": True, "relevant_langs": ["xx"]})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/json"
    assert client.post("/v1/ask", json={"question": QUESTION, "stream": "maybe"}).status_code == 422


def test_a_client_that_leaves_an_ask_stream_frees_its_slot(serve):
    gate = threading.Event()
    llm = GatedModel(messages=iter([SPANISH, SPANISH]), gate=gate)
    client = serve(llm, limits=_limits(max_concurrent=1, max_queue=0))
    health = client.base_url.join("/v1/health")
    with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        deadline = time.monotonic() + 60
        while httpx.get(health).json()["generation"]["active"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # closed while the model still waits: the server cancels the agent and frees the slot
    deadline = time.monotonic() + 30
    while httpx.get(health).json()["generation"]["active"] != 0:
        assert time.monotonic() < deadline, "the slot was never freed"
        time.sleep(0.05)
    gate.set()
    assert client.post("/v1/ask", json={"question": QUESTION}).status_code == 200


def test_openapi_documents_the_ask_stream(serve):
    from xlrag.server.streaming import EVENTS

    spec = serve(scripted()).get("/openapi.json").json()
    ok = spec["paths"]["/v1/ask"]["post"]["responses"]["200"]["content"]
    events = ok["text/event-stream"]["x-events"]
    assert tuple(events) == EVENTS and events["answer"]["$ref"] == "#/components/schemas/AskResponse"
    assert ok["application/json"]["schema"]["$ref"] == "#/components/schemas/AskResponse"
    assert spec["components"]["schemas"]["AskRequest"]["properties"]["stream"]["default"] is False
