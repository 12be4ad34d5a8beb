"""DNS rebinding (issue #52): a ``--no-auth`` server answers requests that name it by a loopback
name, from no page but its own; a keyed server answers the names ``--allowed-hosts`` gives.
Real HTTP on 127.0.0.1 with the Host and Origin headers a rebinding page's browser sends."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.clitools import error_line, run
from tests.server.conftest import AUTH, QUESTION, SPANISH, config, running, scripted
from tests.server.test_api import assert_typed


@pytest.fixture
def keyless(retriever):
    from xlrag.server import create_app

    app = create_app(config(), llm=scripted(SPANISH, repeat=True), retriever=retriever, no_auth=True)
    with running(app) as url:
        yield url


def _port(url: str) -> int:
    return httpx.URL(url).port or 80


def test_a_keyless_server_refuses_a_rebinding_pages_host(keyless):
    port = _port(keyless)
    with httpx.Client(base_url=keyless, timeout=60) as client:
        # the probe: what a page at http://attacker.example:PORT/ sends once its name points here
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}",
                     f"localhost.attacker.example:{port}", "127.0.0.2", "0.0.0.0", f"[::ffff:7f00:1]:{port}"):
            for method, path in (("POST", "/v1/retrieve"), ("GET", "/"), ("GET", "/v1/health"),
                                 ("DELETE", "/v1/chat/x"), ("GET", "/ui/app.js")):
                r = client.request(method, path, json={"question": QUESTION} if method == "POST" else None,
                                   headers={"Host": host})
                err = assert_typed(r, 400, "host_not_allowed")
                assert "127.0.0.1, localhost, [::1]" in err["message"], err
        # a malformed Host is refused the same way, and a huge one is not echoed whole
        for host in ("localhost:notaport", "user@localhost", "a" * 5000):
            r = client.get("/v1/health", headers={"Host": host})
            assert_typed(r, 400, "host_not_allowed")
            assert len(r.text) < 700
        # the names a user opens it by, with or without the port, in any case
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "127.0.0.1",
                     "localhost"):
            r = client.post("/v1/retrieve", json={"question": QUESTION, "k": 1}, headers={"Host": host})
            assert r.status_code == 200, (host, r.text)


def test_a_keyless_server_answers_its_own_page_only(keyless):
    port = _port(keyless)
    body = {"question": QUESTION, "k": 1}
    with httpx.Client(base_url=keyless, timeout=60) as client:
        for host, origin in ((f"127.0.0.1:{port}", f"http://127.0.0.1:{port}"),
                             (f"localhost:{port}", f"http://localhost:{port}")):
            r = client.post("/v1/retrieve", json=body, headers={"Host": host, "Origin": origin})
            assert r.status_code == 200, r.text
        for origin in (f"http://attacker.example:{port}", f"http://localhost:{port + 1}", "null",
                       f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port}.attacker.example"):
            r = client.post("/v1/retrieve", json=body, headers={"Origin": origin})
            err = assert_typed(r, 403, "origin_not_allowed")
            assert "--no-auth" in err["message"]
        # another local page (another port) cannot delete a conversation or spend the model either
        assert_typed(client.delete("/v1/chat/x", headers={"Origin": f"http://localhost:{port + 1}"}), 403,
                     "origin_not_allowed")


def test_a_keyed_server_answers_the_allowed_hosts(retriever):
    from xlrag.server import create_app

    def app(**options: Any) -> Any:
        return create_app(config(), llm=scripted(SPANISH, repeat=True), retriever=retriever,
                          api_key=AUTH["Authorization"].split()[1], **options)

    with running(app(allowed_hosts="xlrag.example.org, *.internal,10.0.0.5")) as url, \
            httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
        for host in ("xlrag.example.org", "XLRAG.example.org:8443", "a.b.internal", "10.0.0.5:80"):
            assert client.get("/v1/modes", headers={"Host": host}).status_code == 200, host
        for host in ("example.org", "internal", "10.0.0.6", "127.0.0.1"):
            assert_typed(client.get("/v1/modes", headers={"Host": host}), 400, "host_not_allowed")
        # the key guards a keyed server's data: another origin is no reason to refuse
        assert client.get("/v1/modes", headers={"Host": "xlrag.example.org",
                                                "Origin": "https://app.example.com"}).status_code == 200
    # without the list, any name (as before)
    with running(app()) as url, httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
        assert client.get("/v1/modes", headers={"Host": "anything.example"}).status_code == 200


def test_bad_allowed_hosts_are_one_line_errors(xquad_index, monkeypatch):
    monkeypatch.delenv("XLRAG_API_KEY", raising=False)
    line = error_line(run("serve", "--index-dir", xquad_index, "--no-auth", "--allowed-hosts", "xlrag.example.org"))
    assert "--allowed-hosts is for a server with a key" in line and "127.0.0.1, localhost, ::1" in line
    monkeypatch.setenv("XLRAG_API_KEY", "k" * 32)
    for bad in ("http://xlrag.example.org/", "xlrag.example.org:80", "exa mple.org", "a..b"):
        line = error_line(run("serve", "--index-dir", xquad_index, "--allowed-hosts", bad))
        assert "--allowed-hosts" in line and "not a host name" in line, line


def test_create_app_refuses_bad_allowed_hosts_before_loading():
    from xlrag.errors import ConfigError
    from xlrag.server import create_app

    with pytest.raises(ConfigError, match="for a server with a key"):
        create_app(config(), no_auth=True, allowed_hosts=["example.org"])
