"""/v1/ask and /v1/chat over real HTTP: streamed events in order, sessions, concurrency, the queue."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.server.conftest import (
    ENGLISH,
    QUESTION,
    SPANISH,
    SPANISH_ANSWER,
    GatedModel,
    QuotingModel,
    scripted,
    sse_events,
)

FOLLOW_UP = "¿y cuántas capturas tuvo Jared Allen?"
CONDENSED = "¿Cuántas capturas ha conseguido Jared Allen en su carrera?"
ALLEN = ("Cited Documents: <doc0>\nAnswer: Jared Allen consiguió 136 capturas.\n"
         "Explanation: Según <doc0>, Jared Allen tiene 136 capturas en su carrera.")


def _limits(**kw):
    from xlrag.server import ServerLimits

    return ServerLimits(**kw)


def test_chat_streams_tokens_then_the_answer_then_done_and_keeps_the_session(serve):
    # replies: turn 1's answer; turn 2's condensed question (not streamed), then its answer
    client = serve(scripted(SPANISH, CONDENSED, ALLEN))
    with client.stream("POST", "/v1/chat", json={"question": QUESTION}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        session = response.headers["x-session-id"]
        events = sse_events(response)
    names = [name for name, _ in events]
    n_tokens = names.count("token")
    assert n_tokens > 5 and names == ["token"] * n_tokens + ["answer", "done"]
    assert "".join(data["text"] for name, data in events if name == "token") == SPANISH  # the model's tokens
    assert {data["attempt"] for name, data in events if name == "token"} == {0}
    answer = events[-2][1]
    assert answer["session_id"] == session and answer["turn"] == 1
    assert answer["answer"]["answer"] == SPANISH_ANSWER and answer["answer"]["lang"] == "es"
    assert [(s["marker"], s["doc_id"]) for s in answer["sources"]] == [(0, "xquad-00-es")]
    assert answer["trace"]["repairs"] == [] and answer["trace"]["unrepaired"] == []
    assert events[-1][1]["session_id"] == session and events[-1][1]["seconds"] > 0

    # the follow-up, same session, as one JSON reply: condensed in Spanish, and the turn remembered
    second = client.post("/v1/chat", json={"question": FOLLOW_UP, "session_id": session, "stream": False})
    assert second.status_code == 200, second.text
    data = second.json()
    assert data["session_id"] == session and data["turn"] == 2
    assert data["trace"]["original_question"] == FOLLOW_UP and data["trace"]["question"] == CONDENSED
    assert data["answer"]["answer"] == "Jared Allen consiguió 136 capturas."
    assert data["answer"]["passages"][0]["doc_id"] == "xquad-00-es"

    assert client.delete(f"/v1/chat/{session}").status_code == 204
    assert client.delete(f"/v1/chat/{session}").status_code == 404


def test_sessions_are_compacted_and_the_least_recently_used_dropped(serve):
    from tests.server.conftest import config

    client = serve(scripted(SPANISH, repeat=True), cfg=config(chat={"retention_sessions": 2}))
    sessions = []
    for _ in range(3):
        reply = client.post("/v1/chat", json={"question": QUESTION, "stream": False})
        assert reply.status_code == 200 and reply.json()["turn"] == 1
        sessions.append(reply.json()["session_id"])
    s1, s2, s3 = sessions
    # s1 was used least recently: gone; the others hold one checkpoint each, with their turn
    assert client.delete(f"/v1/chat/{s1}").status_code == 404
    server = client.server
    assert len(server.sessions) == 2
    for session in (s2, s3):
        cfg = server.sessions.config(session)
        assert len(list(server.saver.list(cfg))) == 1
        assert [t.question for t in server.chat.get_state(cfg).values["turns"]] == [QUESTION]
    assert list(server.saver.list(server.sessions.config(s1))) == []


def test_after_a_repair_the_answer_event_is_the_repaired_answer(serve):
    # the first answer is English without citations: the agent regenerates (no quote: that
    # repair calls no model, and this test follows the streamed attempts), and both attempts
    # stream; the answer event carries the checked, Spanish one
    from tests.server.conftest import config

    client = serve(scripted(ENGLISH, SPANISH), cfg=config(quote=False))
    with client.stream("POST", "/v1/chat", json={"question": QUESTION}) as response:
        events = sse_events(response)
    tokens = [data for name, data in events if name == "token"]
    assert [name for name, _ in events][-2:] == ["answer", "done"]
    first = "".join(t["text"] for t in tokens if t["attempt"] == 0)
    second = "".join(t["text"] for t in tokens if t["attempt"] == 1)
    assert first == ENGLISH and second == SPANISH
    answer = events[-2][1]
    assert answer["answer"]["answer"] == SPANISH_ANSWER
    assert [r["repair"] for r in answer["trace"]["repairs"]] == ["regenerate_language"]


def test_a_failure_inside_the_stream_is_an_error_event(serve):
    client = serve(scripted())  # no replies: the model call fails
    with client.stream("POST", "/v1/chat", json={"question": QUESTION}) as response:
        assert response.status_code == 200
        events = sse_events(response)
    assert [name for name, _ in events] == ["error"]
    error = events[0][1]["error"]
    assert error["type"] == "internal_error" and "request id" in error["message"]
    assert "Traceback" not in str(events)


def test_twenty_concurrent_asks_are_all_answered_correctly(serve, xquad_queries):
    llm = QuotingModel(messages=iter([]))
    client = serve(llm, limits=_limits(max_concurrent=2, max_queue=32))
    spanish = [q["question"] for q in xquad_queries if q["lang"] == "es"]
    questions = (spanish * 2)[:20]
    # what each question must be answered from, asked one at a time
    expected = {q: [h["id"] for h in client.post("/v1/retrieve", json={"question": q, "k": 3}).json()["hits"]]
                for q in set(questions)}

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(lambda q: client.post("/v1/ask", json={"question": q}), questions))

    for question, response in zip(questions, responses, strict=True):
        assert response.status_code == 200, response.text
        data = response.json()
        answer, trace = data["answer"], data["trace"]
        assert trace["question"] == question  # no request got another's answer
        assert [p["id"] for p in answer["passages"]] == expected[question]
        # the reply quotes the passage it was shown first: no request got another's passages
        quoted = answer["passages"][0]["text"].split()[10:20]
        assert answer["answer"].split()[:10] == quoted and answer["lang"] == "es" and answer["flags"] == []
        cited = [c for c in answer["citations"] if c["valid"] and c["source"] == "model"]
        assert [c["passage_id"] for c in cited] == [answer["passages"][0]["id"]]
        assert trace["repairs"] == [] and trace["unrepaired"] == []
    assert 1 <= llm.stats["peak"] <= 2  # never more generations at once than allowed


def test_a_full_queue_gets_503_and_the_running_request_finishes(serve):
    gate = threading.Event()
    llm = GatedModel(messages=iter([SPANISH]), gate=gate)
    client = serve(llm, limits=_limits(max_concurrent=1, max_queue=0))
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(client.post, "/v1/ask", json={"question": QUESTION})
        deadline = time.monotonic() + 60
        while httpx.get(client.base_url.join("/v1/health")).json()["generation"]["active"] == 0:
            assert time.monotonic() < deadline and not first.done()
            time.sleep(0.05)
        busy = client.post("/v1/ask", json={"question": QUESTION})
        assert busy.status_code == 503 and busy.json()["error"]["type"] == "overloaded"
        assert int(busy.headers["retry-after"]) >= 1
        stream = client.post("/v1/chat", json={"question": QUESTION})  # refused before it starts
        assert stream.status_code == 503 and stream.json()["error"]["type"] == "overloaded"
        assert client.post("/v1/retrieve", json={"question": QUESTION}).status_code == 200  # no generation
        gate.set()
        assert first.result().status_code == 200
    health = httpx.get(client.base_url.join("/v1/health")).json()["generation"]
    assert health["active"] == 0 and health["queued"] == 0


def test_a_client_that_leaves_a_stream_frees_its_slot(serve):
    gate = threading.Event()
    llm = GatedModel(messages=iter([SPANISH, SPANISH]), gate=gate)
    client = serve(llm, limits=_limits(max_concurrent=1, max_queue=0))
    with client.stream("POST", "/v1/chat", json={"question": QUESTION}) as response:
        assert response.status_code == 200
        deadline = time.monotonic() + 60
        while httpx.get(client.base_url.join("/v1/health")).json()["generation"]["active"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # the stream is closed while the model still waits: the server cancels the turn
    deadline = time.monotonic() + 30
    while httpx.get(client.base_url.join("/v1/health")).json()["generation"]["active"] != 0:
        assert time.monotonic() < deadline, "the slot was never freed"
        time.sleep(0.05)
    gate.set()
    assert client.post("/v1/ask", json={"question": QUESTION}).status_code == 200


def test_shutdown_lets_the_running_answer_finish(retriever):
    from tests.server.conftest import AUTH, config, running
    from xlrag.server import create_app

    gate = threading.Event()
    app = create_app(config(), llm=GatedModel(messages=iter([SPANISH]), gate=gate), retriever=retriever,
                     api_key=AUTH["Authorization"].split()[1])
    with running(app) as url, ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(httpx.post, f"{url}/v1/ask", json={"question": QUESTION}, headers=AUTH, timeout=60)
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/v1/health").json()["generation"]["active"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        app.state.uvicorn.should_exit = True  # what SIGTERM does
        while True:  # new connections are refused...
            try:
                httpx.get(f"{url}/v1/health", timeout=5)
            except httpx.TransportError:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        gate.set()  # ...while the answer already running goes on to the end
        response = first.result(timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["answer"]["answer"] == SPANISH_ANSWER
