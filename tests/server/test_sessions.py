"""Chat sessions under load and between keys (issue #52): a request that ran no turn neither
creates nor evicts a session, a session belongs to the key that made it and to an id the server
issued, and a burst of streams is refused with 503s, not answered 200 and told so in the stream.
Real HTTP, the XQuAD index, a scripted model held at a gate to keep the generation slot busy."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.server.conftest import AUTH, KEY, QUESTION, SPANISH, GatedModel, config, sse_events
from tests.server.test_api import assert_typed
from tests.server.test_generation import ALLEN, CONDENSED, FOLLOW_UP

OTHER = "another-key-0123456789abcdef"


def _limits(**kw: Any) -> Any:
    from xlrag.server import ServerLimits

    return ServerLimits(**kw)


def _until(client: Any, active: int, queued: int | None = None) -> None:
    deadline = time.monotonic() + 60
    while True:
        g = httpx.get(client.base_url.join("/v1/health")).json()["generation"]
        if g["active"] == active and (queued is None or g["queued"] == queued):
            return
        assert time.monotonic() < deadline, g
        time.sleep(0.05)


def _turn(client: Any, **body: Any) -> dict:
    r = client.post("/v1/chat", json={"question": QUESTION, "stream": False, **body})
    assert r.status_code == 200, r.text
    return r.json()


def _chat_stream(client: Any, **body: Any) -> tuple[int, list]:
    with client.stream("POST", "/v1/chat", json={"question": QUESTION, **body}) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, [r.json()]
        return 200, sse_events(r)


def test_refused_turns_neither_create_nor_evict_sessions(serve):
    """The probe: with the slot busy and no room to queue, every new conversation and every
    follow-up is refused; the two live conversations (the most the server keeps) survive."""
    gate = threading.Event()
    gate.set()
    # two first turns, the held answer, then a follow-up's condensed question and answer
    llm = GatedModel(messages=iter([SPANISH, SPANISH, SPANISH, CONDENSED, ALLEN]), gate=gate)
    client = serve(llm, cfg=config(chat={"retention_sessions": 2}), limits=_limits(max_concurrent=1, max_queue=0))
    first, second = _turn(client)["session_id"], _turn(client)["session_id"]
    gate.clear()
    with ThreadPoolExecutor(max_workers=1) as pool:
        held = pool.submit(client.post, "/v1/ask", json={"question": QUESTION})
        _until(client, active=1)
        for _ in range(6):
            assert_typed(client.post("/v1/chat", json={"question": QUESTION, "stream": False}), 503, "overloaded")
            status, (body,) = _chat_stream(client)
            assert status == 503 and body["error"]["type"] == "overloaded"  # before any 200
        for session in (first, second):
            r = client.post("/v1/chat", json={"question": FOLLOW_UP, "session_id": session, "stream": False})
            assert_typed(r, 503, "overloaded")
        assert len(client.server.sessions) == 2
        gate.set()
        assert held.result().status_code == 200
    # the first conversation (the least recently used) goes on where it was
    after = _turn(client, question=FOLLOW_UP, session_id=first)
    assert after["session_id"] == first and after["turn"] == 2
    assert after["trace"]["question"] == CONDENSED
    assert len(client.server.sessions) == 2 and second in client.server.sessions


def test_a_turn_that_times_out_in_the_queue_makes_no_session(serve):
    gate = threading.Event()
    gate.set()
    llm = GatedModel(messages=iter([SPANISH, SPANISH, SPANISH]), gate=gate)
    client = serve(llm, cfg=config(chat={"retention_sessions": 1}),
                   limits=_limits(max_concurrent=1, max_queue=4, queue_timeout=0.5))
    live = _turn(client)["session_id"]
    gate.clear()
    with ThreadPoolExecutor(max_workers=1) as pool:
        held = pool.submit(client.post, "/v1/ask", json={"question": QUESTION})
        _until(client, active=1)
        assert_typed(client.post("/v1/chat", json={"question": QUESTION, "stream": False}), 503, "overloaded")
        # a stream already answered 200 when its wait ran out: the error event says so, and the
        # id it was given is no session
        status, events = _chat_stream(client)
        assert status == 200 and [n for n, _ in events] == ["error"] and events[0][1]["error"]["type"] == "overloaded"
        gate.set()
        assert held.result().status_code == 200
    assert list(client.server.sessions._entries) == [live]
    assert len(list(client.server.saver.list(None))) == 1  # and no checkpoint of theirs either


def test_sessions_are_issued_by_the_server_and_belong_to_their_key(serve):
    llm = GatedModel(messages=iter([SPANISH, CONDENSED, ALLEN]))
    client = serve(llm, api_key=[KEY, OTHER])
    other = {"Authorization": f"Bearer {OTHER}"}
    # a name the client chose is not a session, however it is spelt (the docs' old example)
    for chosen in ("ana", "0" * 32):
        err = assert_typed(client.post("/v1/chat", json={"question": QUESTION, "session_id": chosen}), 404,
                           "unknown_session")
        assert "issued by the server" in err["message"]
    assert len(client.server.sessions) == 0
    session = _turn(client)["session_id"]
    assert re.fullmatch("[0-9a-f]{32}", session)  # 128 random bits: not guessed
    # another key's session is no session: it can neither continue nor delete it, nor learn it exists
    r = client.post("/v1/chat", json={"question": FOLLOW_UP, "session_id": session, "stream": False}, headers=other)
    assert_typed(r, 404, "unknown_session")
    assert_typed(client.delete(f"/v1/chat/{session}", headers=other), 404, "unknown_session")
    follow = _turn(client, question=FOLLOW_UP, session_id=session)
    assert follow["turn"] == 2
    assert client.delete(f"/v1/chat/{session}", headers=AUTH).status_code == 204
    assert_typed(client.delete(f"/v1/chat/{session}"), 404, "unknown_session")


def test_an_unknown_session_id_is_echoed_capped(serve):
    client = serve(GatedModel(messages=iter([])))
    long = "a" * 20_000
    for response in (client.delete(f"/v1/chat/{long}"), client.get(f"/ui/{long}"), client.get(f"/v1/{long}")):
        assert response.status_code == 404
        assert long[:200] not in response.text and len(response.text) < 600, len(response.text)


def test_a_burst_of_streams_gets_503s_not_200s_that_say_overloaded(retriever):
    """Eight streamed asks at once, one slot and one place in the queue: two are answered, six
    refused with 503 before any stream starts. The eight run on one event loop (httpx's ASGI
    transport), each endpoint before any of their streams: the order in which a burst that
    arrives together is served, made certain."""
    import asyncio

    from xlrag.server import create_app

    gate = threading.Event()
    llm = GatedModel(messages=iter([SPANISH, SPANISH]), gate=gate)
    app = create_app(config(), llm=llm, retriever=retriever, api_key=KEY,
                     limits=_limits(max_concurrent=1, max_queue=1))

    async def one(client: httpx.AsyncClient) -> tuple[int, list[str]]:
        r = await client.post("/v1/ask", json={"question": QUESTION, "stream": True})
        if r.status_code != 200:
            return r.status_code, [r.json()["error"]["type"]]
        return 200, [line.removeprefix("event: ") for line in r.text.splitlines() if line.startswith("event:")]

    async def burst() -> list[tuple[int, list[str]]]:
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1", headers=AUTH, timeout=120) as client:
            tasks = [asyncio.create_task(one(client)) for _ in range(8)]
            deadline = time.monotonic() + 60
            while sum(t.done() for t in tasks) < 6:  # the refused ones come back at once
                assert time.monotonic() < deadline, [t.result() for t in tasks if t.done()]
                await asyncio.sleep(0.05)
            gate.set()
            return await asyncio.gather(*tasks)

    results = asyncio.run(burst())
    refused = [r for r in results if r[0] == 503]
    answered = [r for r in results if r[0] == 200]
    # the probe: every one of the eight got its 200, and six streams then said "overloaded"
    assert len(refused) == 6 and all(kinds == ["overloaded"] for _, kinds in refused), results
    assert len(answered) == 2 and all(names[-2:] == ["answer", "done"] for _, names in answered), results
    limiter = app.state.xlrag.limiter
    assert limiter.active == 0 and limiter.queued == 0
