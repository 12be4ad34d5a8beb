"""The server hands on the Query it admitted: ``/v1/ask``, ``/v1/chat`` and ``/v1/perspectives``
search the very Query ``admit_question`` validated (marked here with an id no request can set), not one
made again from the request's fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.perspectives.conftest import QUESTION as CONTESTED
from tests.perspectives.conftest import ByPrompt
from tests.perspectives.test_view import DISAGREE
from tests.server.conftest import QUESTION, SPANISH, scripted
from xlrag.chains.pipeline import Pipeline
from xlrag.schema import Query, Retrieval


@pytest.fixture
def searched(monkeypatch) -> list[Retrieval]:
    """Every retrieval the pipeline makes, on the event loop or off it."""
    seen: list[Retrieval] = []
    retrieve, aretrieve = Pipeline.retrieve, Pipeline.aretrieve

    def sync(self: Pipeline, *args: Any, **kwargs: Any) -> Retrieval:
        seen.append(retrieve(self, *args, **kwargs))
        return seen[-1]

    async def on_loop(self: Pipeline, *args: Any, **kwargs: Any) -> Retrieval:
        seen.append(await aretrieve(self, *args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(Pipeline, "retrieve", sync)
    monkeypatch.setattr(Pipeline, "aretrieve", on_loop)
    return seen


def _marked(client: Any, monkeypatch: pytest.MonkeyPatch, mark: str) -> list[Query]:
    """The queries the server admits, each given the id ``mark``."""
    admitted: list[Query] = []
    admit = client.server.admit_question

    def marking(*args: Any, **kwargs: Any) -> Query:
        admitted.append(admit(*args, **kwargs).model_copy(update={"id": mark}))
        return admitted[-1]

    monkeypatch.setattr(client.server, "admit_question", marking)
    return admitted


@pytest.mark.parametrize("stream", [False, True])
def test_ask_searches_the_admitted_query(serve, searched, monkeypatch, stream):
    client = serve(scripted(SPANISH, repeat=True))
    admitted = _marked(client, monkeypatch, "admitted-ask")
    body = {"question": QUESTION, "lang": "es", "mode": "qlang", "stream": stream}
    r = client.post("/v1/ask", json=body)
    assert r.status_code == 200, r.text
    assert len(admitted) == 1 and searched
    # the agent's retrieval carries the admitted Query: its id, its language, its question
    first = searched[0]
    assert first.query.id == "admitted-ask" and first.query.lang == "es" and first.query.question == QUESTION
    assert first.hits and {h.lang for h in first.hits} == {"es"}


def test_perspectives_search_the_admitted_query(serve, searched, monkeypatch):
    client = serve(ByPrompt(answers=DISAGREE))
    admitted = _marked(client, monkeypatch, "admitted-view")
    r = client.post("/v1/perspectives", json={"question": CONTESTED, "relevant_langs": ["en", "ru", "es"]})
    assert r.status_code == 200, r.text
    assert len(admitted) == 1
    # each language's store search and its agent's: the admitted Query, pointed at the store
    assert searched and all(s.query.id == "admitted-view" for s in searched)
    assert {s.query.target_lang for s in searched} == {"en", "ru", "es"}


def test_chat_searches_the_admitted_query_and_a_follow_up_keeps_its_id(serve, searched, monkeypatch):
    client = serve(scripted(SPANISH, repeat=True))
    admitted = _marked(client, monkeypatch, "admitted-chat")
    first = client.post("/v1/chat", json={"question": QUESTION, "lang": "es", "mode": "qlang",
                                                 "stream": False})
    assert first.status_code == 200, first.text
    assert len(admitted) == 1 and searched
    assert searched[0].query.id == "admitted-chat" and searched[0].query.question == QUESTION
    searched.clear()
    # the next turn goes through the checkpoint (the Query is one of the types it rebuilds); a
    # follow-up is condensed into another question, which is searched with the admitted id
    follow = client.post("/v1/chat", json={"question": "¿Y cuántos puntos?", "lang": "es", "stream": False,
                                           "session_id": first.json()["session_id"]})
    assert follow.status_code == 200, follow.text
    assert len(admitted) == 2 and searched and all(s.query.id == "admitted-chat" for s in searched)
    assert all(s.query.lang == "es" for s in searched)
