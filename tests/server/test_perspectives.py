"""``POST /v1/perspectives`` over HTTP: the real uvicorn app on the XQuAD index, the model
scripted by prompt (tests/perspectives/conftest.py)."""

from __future__ import annotations

import pytest

from tests.perspectives.conftest import QUESTION, ByPrompt
from tests.perspectives.test_view import DISAGREE


def test_perspectives_returns_the_view_with_both_sides(serve):
    from xlrag.perspectives import Perspectives

    llm = ByPrompt(answers=DISAGREE)
    client = serve(llm)
    r = client.post("/v1/perspectives", json={"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    assert r.status_code == 200, r.text
    view = Perspectives.model_validate(r.json())  # the same model as the Python API's
    assert view.status == "disagreement" and [p.lang for p in view.perspectives] == ["en", "ru", "es"]
    assert {s.lang for d in view.disagreements for s in d.sides} == {"en", "ru", "es"}
    assert all(c.valid for d in view.disagreements for s in d.sides for c in s.citations)
    # 2 other calls: the Russian side's support check translates its answer and question (#51)
    assert view.costs.answers == 3 and llm.calls == {"answer": 3, "other": 2}
    assert "/v1/perspectives" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize(("body", "status", "kind", "words"), [
    ({"question": QUESTION, "relevant_langs": ["en", "xx"]}, 422, "unknown_language", "unknown language code 'xx'"),
    ({"question": QUESTION, "relevant_langs": ["en", "fi"]}, 422, "language_not_indexed", "no 'fi' store"),
    ({"question": QUESTION, "relevant_langs": ["en", "ru", "es", "de"], "max_langs": 3}, 422, "invalid_argument",
     "max_langs=3"),
    ({"question": QUESTION, "relevant_langs": []}, 422, "invalid_request", "relevant_langs"),
    ({"question": QUESTION, "languages": ["en"]}, 422, "invalid_request", "languages"),
    ({"question": QUESTION, "max_langs": "2"}, 422, "invalid_request", "max_langs"),
    ({"question": ""}, 422, "invalid_request", "question"),
])
def test_bad_requests_get_a_typed_422_and_no_model_call(serve, body, status, kind, words):
    llm = ByPrompt(answers=DISAGREE)
    client = serve(llm)
    r = client.post("/v1/perspectives", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == kind and words in error["message"] and "\n" not in error["message"]
    assert llm.calls == {}


def test_perspectives_need_the_key(serve):
    client = serve(ByPrompt(answers=DISAGREE))
    r = client.post("/v1/perspectives", json={"question": QUESTION}, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
