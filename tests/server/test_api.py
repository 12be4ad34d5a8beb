"""The HTTP API over real HTTP on 127.0.0.1: keys, limits, typed errors, retrieval, health, OpenAPI."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import AUTH, KEY, QUESTION, SPANISH, scripted

TRACEBACK_MARKS = ("Traceback", 'File "', "line ", ".py")


def assert_typed(response: httpx.Response, status: int, kind: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and body["error"]["type"] == kind, body
    assert body["error"]["message"]
    assert not any(mark in response.text for mark in TRACEBACK_MARKS), response.text
    return body["error"]


def test_requests_without_the_right_key_get_401(serve):
    client = serve(scripted(SPANISH, repeat=True))
    body = {"question": QUESTION}
    with httpx.Client(base_url=str(client.base_url), timeout=60) as bare:
        for headers in ({}, {"Authorization": "Bearer wrong-key-0123456789"}, {"X-API-Key": KEY[:-1]},
                        {"Authorization": f"Basic {KEY}"}):
            err = assert_typed(bare.post("/v1/ask", json=body, headers=headers), 401, "unauthorized")
            assert "XLRAG_API_KEY" in err["message"]
        assert bare.post("/v1/ask", json=body).headers["www-authenticate"] == "Bearer"
        # unknown paths too: nothing is told to a client without the key
        assert_typed(bare.get("/v1/nothing"), 401, "unauthorized")
        assert bare.post("/v1/retrieve", json=body, headers={"X-API-Key": KEY}).status_code == 200
        assert bare.post("/v1/retrieve", json=body, headers={"Authorization": f"bearer {KEY}"}).status_code == 200
        assert bare.get("/v1/health").status_code == 200  # probes need no key
        assert bare.get("/openapi.json").status_code == 200


def test_an_oversized_body_gets_413_declared_or_chunked(serve):
    client = serve(scripted(SPANISH, repeat=True), limits=_limits(max_body_bytes=4096))
    big = {"question": QUESTION, "lang": "es", "relevant_langs": ["es"] * 2000}
    assert_typed(client.post("/v1/retrieve", json=big), 413, "body_too_large")

    def chunks():  # no Content-Length: the server must count what arrives
        yield b'{"question": "' + QUESTION.encode() + b'", "lang": "'
        for _ in range(40):
            yield b"x" * 1024
        yield b'"}'

    response = client.post("/v1/retrieve", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    assert_typed(response, 413, "body_too_large")
    # a body under the limit, chunked as well, goes through
    small = client.post("/v1/retrieve", content=iter([b'{"question": "', QUESTION.encode(), b'"}']),
                        headers={"Content-Type": "application/json"})
    assert small.status_code == 200, small.text


def _limits(**kw):
    from xlrag.server import ServerLimits

    return ServerLimits(**kw)


@pytest.mark.parametrize(("content", "field"), [
    (b'{"question": ', "body"),                                   # not JSON
    (b'{"lang": "es"}', "question"),                              # missing field
    (b'{"question": "hola", "sesion_id": "a"}', "sesion_id"),     # unknown field
    (b'{"question": ["hola"]}', "question"),                      # wrong type
    (b'{"question": "hola", "mode": "balanc"}', "mode"),          # unknown mode
    (b'[1, 2]', "body"),
])
def test_a_malformed_body_gets_a_typed_422_without_traceback(serve, content, field):
    client = serve(scripted(SPANISH, repeat=True))
    for path in ("/v1/ask", "/v1/chat", "/v1/retrieve"):
        response = client.post(path, content=content, headers={"Content-Type": "application/json"})
        err = assert_typed(response, 422, "invalid_request")
        assert any(field in [str(x) for x in d["loc"]] for d in err["details"]), err
        assert field in err["message"]
    if field == "mode":
        assert "did you mean 'balanced'" in err["message"]


def test_request_content_errors_are_typed(serve):
    client = serve(scripted(SPANISH, repeat=True), limits=_limits(max_question_chars=60))
    err = assert_typed(client.post("/v1/ask", json={"question": "¿" + "a" * 70 + "?"}), 422, "question_too_long")
    assert "72 characters" in err["message"] and "limit of 60" in err["message"]
    assert err["message"].endswith("; shorten it")  # a client cannot raise the server's setting
    # the question's language only decides what to detect: a code naming none is detected, with a note
    res = client.post("/v1/retrieve", json={"question": QUESTION, "lang": "klingon"})
    assert res.status_code == 200 and any("'klingon' names no language" in n for n in res.json()["notes"])
    # a store's language names what to search: an unknown one stays a typed 422
    err = assert_typed(client.post("/v1/retrieve", json={"question": QUESTION, "mode": "oracle_lang",
                                                         "target_lang": "klingon"}), 422, "unknown_language")
    assert "ISO 639" in err["message"]
    assert_typed(client.post("/v1/ask", json={"question": "   "}), 422, "empty_query")
    assert_typed(client.get("/v1/nothing"), 404, "not_found")
    assert_typed(client.get("/v1/ask"), 405, "method_not_allowed")
    assert_typed(client.delete("/v1/chat/never-seen"), 404, "unknown_session")


def test_a_failing_model_is_a_generic_500_and_the_log_has_the_details(serve, caplog):
    client = serve(scripted())  # no replies: the first model call fails inside LangChain
    with caplog.at_level("ERROR", logger="xlrag.server"):
        err = assert_typed(client.post("/v1/ask", json={"question": QUESTION}), 500, "internal_error")
    request_id = err["message"].split("request id ")[1].split(")")[0]
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback stays on the server


def test_retrieve_returns_hits(serve, retriever):
    client = serve(scripted())  # retrieval never calls the model
    response = client.post("/v1/retrieve", json={"question": QUESTION, "k": 2})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["mode"] == "qlang" and data["k"] == 2 and data["lang"] == "es" and data["complete"] is True
    assert [h["rank"] for h in data["hits"]] == [1, 2]
    assert data["hits"][0]["doc_id"] == "xquad-00-es" and "308" in data["hits"][0]["text"]
    assert {h["lang"] for h in data["hits"]} == {"es"}
    direct = retriever.retrieve(QUESTION, mode="qlang", k=2)
    assert [h["id"] for h in data["hits"]] == [h.id for h in direct.hits]
    other = client.post("/v1/retrieve", json={"question": QUESTION, "mode": "rel_langs",
                                              "relevant_langs": ["de", "zh"], "k": 4}).json()
    assert {"de", "zh"} <= {h["lang"] for h in other["hits"]}


def test_health_works_without_generation(serve):
    llm = scripted()  # any model call would fail: health must not make one
    client = serve(llm)
    bare = httpx.get(client.base_url.join("/v1/health"), timeout=60)  # no key
    assert bare.status_code == 200
    data = bare.json()
    assert data["status"] == "ok"
    assert data["index"]["languages"] == ["ar", "de", "en", "es", "ru", "zh"]
    assert all(n == 6 for n in data["index"]["passages"].values())
    assert data["generation"] == {"active": 0, "queued": 0, "max_concurrent": 1, "max_queue": 16}


def test_openapi_documents_the_endpoints_models_and_key(serve):
    client = serve(scripted())
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"/v1/ask", "/v1/chat", "/v1/retrieve", "/v1/health", "/v1/chat/{session_id}"} <= set(paths)
    ref = "#/components/schemas/"
    ok = {p: paths[p]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
          for p in ("/v1/ask", "/v1/chat", "/v1/retrieve")}
    assert ok == {"/v1/ask": ref + "AskResponse", "/v1/chat": ref + "ChatResponse",
                  "/v1/retrieve": ref + "RetrieveResponse"}
    for p in ("/v1/ask", "/v1/chat", "/v1/retrieve"):
        op = paths[p]["post"]
        assert op["description"] and op["security"] == [{"bearer": []}, {"apiKey": []}]
        assert op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"] == ref + "ErrorResponse"
        assert {"401", "413", "503"} <= set(op["responses"])
    assert "security" not in paths["/v1/health"]["get"]
    events = paths["/v1/chat"]["post"]["responses"]["200"]["content"]["text/event-stream"]["x-events"]
    assert list(events) == ["token", "answer", "done", "error"]
    assert {"TokenEvent", "DoneEvent", "Trace", "ErrorResponse"} <= set(spec["components"]["schemas"])
    assert spec["components"]["schemas"]["AskRequest"]["additionalProperties"] is False
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "apiKey"}


def test_without_a_key_the_app_refuses_to_start_and_no_auth_answers_loopback_only(retriever, monkeypatch):
    from tests.server.conftest import config, running
    from xlrag.errors import ConfigError
    from xlrag.server import create_app

    monkeypatch.delenv("XLRAG_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"XLRAG_API_KEY.*--no-auth"):
        create_app(config(), llm=scripted(), retriever=retriever)
    with pytest.raises(ConfigError, match="at least 16"):
        create_app(config(), llm=scripted(), retriever=retriever, api_key="short")
    monkeypatch.setenv("XLRAG_API_KEY", KEY)
    with running(create_app(config(), llm=scripted(), retriever=retriever)) as url:
        assert httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION}, headers=AUTH).status_code == 200
    with running(create_app(config(), llm=scripted(), retriever=retriever, no_auth=True)) as url:
        assert httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION}).status_code == 200
        assert "security" not in httpx.get(f"{url}/openapi.json").json()["paths"]["/v1/ask"]["post"]


def test_an_answer_only_post_hoc_citations_support_is_not_verified(serve):
    # the model never cites, even when asked again: xlrag attributes citations by similarity,
    # shows them as post hoc, and the answer is not verified (the trace says citations failed)
    uncited = SPANISH.replace("<doc0>", "").replace("Según , la", "La")
    client = serve(scripted(uncited, repeat=True))
    body = client.post("/v1/ask", json={"question": QUESTION}).json()
    answer, trace = body["answer"], body["trace"]
    assert answer["citations"] and all(c["source"] == "post_hoc" for c in answer["citations"])
    assert answer["verified"] is False and "post_hoc_citations" in answer["flags"]
    assert "citations" in trace["unrepaired"]
    assert not [c for c in trace["checks"] if c["check"] == "citations" and c["passed"]]
    cited = serve(scripted(SPANISH, repeat=True)).post("/v1/ask", json={"question": QUESTION}).json()
    assert cited["answer"]["verified"] is True


def test_health_when_the_index_vanishes_names_no_server_path(xquad_index, embedder, tmp_path):
    import shutil

    from tests.server.conftest import config, running
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.server import create_app

    index = tmp_path / "moved-index"
    shutil.copytree(xquad_index, index)
    retriever = CrossLingualRetriever(LanguageStores.open(index, embedder.name, embedder.dim), embedder, "qlang_en")
    app = create_app(config(), llm=scripted(SPANISH), retriever=retriever, api_key=KEY)
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/v1/health").status_code == 200
        shutil.rmtree(index)
        res = client.get("/v1/health")
        assert res.status_code == 503, res.text
        error = res.json()["error"]
        assert error["type"] == "index_unavailable" and "request id" in error["message"]
        assert str(tmp_path) not in res.text and "moved-index" not in res.text
        ask = client.post("/v1/ask", json={"question": QUESTION}, headers=AUTH)
        assert ask.status_code == 503 and str(tmp_path) not in ask.text
    retriever.close()


@pytest.mark.parametrize("bad", [{"k": True}, {"k": "3"}, {"k": 2.0}, {"question": 7}, {"stream": "yes"}])
def test_request_types_are_strict(serve, bad):
    client = serve(scripted(SPANISH, repeat=True))
    res = client.post("/v1/ask", json={"question": QUESTION, **bad})
    assert res.status_code == 422, res.text
    assert res.json()["error"]["type"] == "invalid_request"
    field = next(iter(bad))
    assert any(d["loc"][-1] == field for d in res.json()["error"]["details"])
    res = client.post("/v1/retrieve", json={"question": QUESTION, **({"k": bad["k"]} if "k" in bad else {})})
    assert res.status_code == (422 if "k" in bad else 200), res.text


def test_docs_page_loads_nothing_from_outside(serve):
    import re

    client = serve(scripted(SPANISH))
    page = httpx.get(f"{client.base_url}/docs")  # no key: the docs are public
    assert page.status_code == 200 and "swagger-ui" in page.text
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and not [u for u in urls if "://" in u or u.startswith("//")], urls
    for url in urls:
        assert httpx.get(f"{client.base_url}{url}").status_code == 200, url
    assert httpx.get(f"{client.base_url}/docs-assets/swagger-ui-bundle.js").headers["content-type"].startswith(
        ("application/javascript", "text/javascript"))
    assert httpx.get(f"{client.base_url}/v1/ask").status_code == 401  # the prefix opened nothing else
