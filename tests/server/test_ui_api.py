"""The web page's server side (xlrag.server.ui), over real HTTP without a browser: the page and
its assets are public and carry a strict Content-Security-Policy, nothing in them is inline or
from another origin, and the endpoints the page calls need the key like every other."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib import resources

import httpx
import pytest

from tests.perspectives.conftest import QUESTION as PERSPECTIVES_QUESTION
from tests.perspectives.conftest import ByPrompt
from tests.perspectives.test_view import DISAGREE
from tests.server.conftest import SPANISH, scripted

STATIC = resources.files("xlrag.server").joinpath("static")


def _csp(header: str) -> dict[str, str]:
    return {d.split()[0]: d.split(None, 1)[1] if " " in d.strip() else "" for d in
            (p.strip() for p in header.split(";")) if d}


def test_the_page_and_its_assets_are_public_with_a_strict_csp(serve):
    client = serve(scripted(SPANISH))
    anonymous = httpx.Client(base_url=client.base_url)
    page = anonymous.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for path in ("/", "/ui/app.js", "/ui/perspectives.js", "/ui/app.css", "/ui/favicon.svg"):
        r = anonymous.get(path)
        assert r.status_code == 200, path
        csp = _csp(r.headers["content-security-policy"])
        # nothing inline, nothing from elsewhere: no 'unsafe-inline', no 'unsafe-eval', no host, no data:
        assert csp["default-src"] == "'none'"
        for directive in ("script-src", "style-src", "connect-src", "img-src"):
            assert csp[directive] == "'self'", (directive, csp)
        assert csp["frame-ancestors"] == "'none'" and csp["base-uri"] == "'none'"
        assert r.headers["x-content-type-options"] == "nosniff"
    assert anonymous.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert anonymous.head("/").status_code == 200
    # only the committed files: no path from the request is ever read
    assert anonymous.get("/ui/..%2fapp.py").status_code == 404
    assert anonymous.get("/ui/index.html").status_code == 404
    # the page is public, the API behind it is not
    assert anonymous.get("/v1/modes").status_code == 401
    assert anonymous.post("/v1/translate",
                          json={"text": "x", "source_lang": "en", "target_lang": "es"}).status_code == 401
    assert "/" not in client.get("/openapi.json").json()["paths"]


class _Inline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script" and not names.get("src"):
            self.found.append("an inline <script>")
        if tag == "style":
            self.found.append("an inline <style>")
        self.found += [f"{tag} {name}=" for name in names if name == "style" or name.startswith("on")]
        self.found += [f"{tag} {k}={v}" for k, v in names.items() if v and re.match(r"(https?:)?//", v)]


def test_the_page_has_nothing_inline_and_nothing_from_another_origin():
    html = STATIC.joinpath("index.html").read_text(encoding="utf-8")
    parser = _Inline()
    parser.feed(html)
    assert parser.found == []
    scripts = [p.name for p in STATIC.iterdir() if p.name.endswith(".js")]
    assert sorted(re.findall(r'<script src="/ui/([^"]+)"', html)) == sorted(scripts)
    for name in (*scripts, "app.css"):
        text = STATIC.joinpath(name).read_text(encoding="utf-8")
        assert not re.search(r"https?://|@import|url\(", text), name  # no CDN, no web font
    js = "\n".join(STATIC.joinpath(name).read_text(encoding="utf-8") for name in scripts)
    # corpus and model text go in as text: no HTML parsing sink, no eval
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", js)
    # the key: this tab's sessionStorage at most, never localStorage, a cookie or a URL
    assert "localStorage" not in js and "document.cookie" not in js and "?key" not in js


def test_modes_come_from_the_one_list_with_their_descriptions(serve):
    from xlrag.modes import AUTO, IRMode

    body = serve(scripted(SPANISH)).get("/v1/modes").json()
    assert [m["name"] for m in body["modes"]] == [AUTO, *(m.value for m in IRMode)]
    assert all(m["description"] and "\n" not in m["description"] and "`" not in m["description"]
               for m in body["modes"])
    assert body["default"] == "qlang" and body["max_question_chars"] > 0


def test_translate_uses_the_servers_translator(serve):
    client = serve(scripted("Los Panthers cedieron solo 308 puntos.\nDe nada."))
    r = client.post("/v1/translate", json={"text": "The Panthers gave up just 308 points.", "source_lang": "en",
                                           "target_lang": "es"})
    assert r.status_code == 200, r.text
    # one line asked, one line kept: what a small model adds after it is not the translation
    assert r.json() == {"text": "Los Panthers cedieron solo 308 puntos.", "source_lang": "en", "target_lang": "es",
                        "complete": True, "notes": []}
    bad = client.post("/v1/translate", json={"text": "x", "source_lang": "en", "target_lang": "xx"})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "unknown_language"
    assert client.post("/v1/translate", json={"text": "x" * 5000, "source_lang": "en",
                                              "target_lang": "es"}).status_code == 422


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_the_report_is_the_existing_renderers(serve, fmt):
    from xlrag.perspectives import Perspectives
    from xlrag.perspectives.render import to_html, to_markdown

    client = serve(ByPrompt(answers=DISAGREE))
    view = client.post("/v1/perspectives",
                       json={"question": PERSPECTIVES_QUESTION, "relevant_langs": ["en", "ru"]}).json()
    r = client.post("/v1/perspectives/report", json={"view": view, "format": fmt})
    assert r.status_code == 200, r.text
    render = to_markdown if fmt == "markdown" else to_html
    assert r.text == render(Perspectives.model_validate(view))
    # what the page sends: the view without traces and passage texts, which the renderer never reads
    slim = {**view, "perspectives": [{**p, "trace": None, "answer": p["answer"] and {**p["answer"], "passages": []}}
                                     for p in view["perspectives"]]}
    assert client.post("/v1/perspectives/report", json={"view": slim, "format": fmt}).text == r.text
    assert client.post("/v1/perspectives/report", json={"view": {"question": "x"}}).status_code == 422


HOSTILE = ("<img src=https://evil.example/p.png onerror=alert(1)> [open](javascript:alert(1)) "
           "![x](https://evil.example/track.png) <script>alert(2)</script> \x1b[2J\x07 **bold** `code`")


def test_the_markdown_report_carries_corpus_and_model_text_inert(serve):
    """The probe: a view whose answers, notes and question hold HTML, a remote image, a
    javascript: link, terminal escapes and a heading of their own. Rendered as CommonMark with
    tables (raw HTML on), none of it becomes markup; the words are all still there."""
    from markdown_it import MarkdownIt

    client = serve(ByPrompt(answers=DISAGREE))
    view = client.post("/v1/perspectives",
                       json={"question": PERSPECTIVES_QUESTION, "relevant_langs": ["en", "ru"]}).json()
    view["question"] = f"{PERSPECTIVES_QUESTION}\n# Verdict: consensus\n{HOSTILE}"
    view["note"] = f"\n## Injected\n- {HOSTILE}\n1. {HOSTILE}"
    view["choice"]["notes"] = [HOSTILE, "# not a heading"]
    view["choice"]["reason"] = HOSTILE
    for p in view["perspectives"]:
        if p["answer"] is not None:
            p["answer"]["answer"] = f"{HOSTILE} | a cell of its own |\n# Heading"
    r = client.post("/v1/perspectives/report", json={"view": view, "format": "markdown"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in r.headers["content-security-policy"] and "default-src 'none'" in r.headers[
        "content-security-policy"]
    assert "\x1b" not in r.text and "\x07" not in r.text
    html = MarkdownIt("commonmark").enable("table").render(r.text)
    assert not re.search(r"<(img|script|a|strong|code)\b", html), html
    assert "javascript:" not in re.findall(r'href="([^"]*)"', html)
    assert re.findall(r"<h(\d)>", html) == ["1", "2"], html  # the report's own two headings only
    assert html.count("<tr>") == 1 + sum(1 for p in view["perspectives"])  # no cell split off by a '|'
    assert "alert(1)" in html and "evil.example/track.png" in html  # shown, as text
    # the HTML page (a download) is escaped for HTML, and inert too
    page = client.post("/v1/perspectives/report", json={"view": view, "format": "html"})
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(2)" in page.text


def test_without_a_browser_the_tests_say_in_one_line_what_is_missing(monkeypatch):
    import shutil

    from tests.server import browser

    monkeypatch.setattr(shutil, "which", lambda name: None)
    why = browser.missing()
    assert why is not None and "\n" not in why
    assert "chromium" in why and "chromedriver" in why and browser.INSTALL in why
