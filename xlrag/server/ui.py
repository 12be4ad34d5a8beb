"""The web page at ``/``: ask, chat, open citations, compare perspectives (issue #34).

The page is three committed files in ``xlrag/server/static`` (HTML, one script, one style
sheet): no CDN, no font download, no Node toolchain. It talks to the same ``/v1`` API as any
client, with the key the user types into it, so the page itself is public and every call it
makes is checked like anyone else's. The endpoints added here are the few the page needs
that a plain HTTP client had no use for:

    GET  /v1/modes                the IR modes with their one-line descriptions
    POST /v1/translate            a passage put into the user's language, line by line (the server's translator)
    POST /v1/perspectives/report  a perspectives view through the existing renderer (Markdown or HTML)

Every page response carries a strict Content-Security-Policy: scripts and styles from this
server only, nothing inline, no other origin contacted. Whatever the corpus or the model
wrote reaches the page as JSON and is put into it as text, never as markup.
"""

from __future__ import annotations

import asyncio
import re
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from xlrag.chains.translator import PassageTranslation
from xlrag.languages import normalize_code
from xlrag.modes import AUTO, IRMode
from xlrag.perspectives.models import Perspectives
from xlrag.registry import available, get
from xlrag.server.errors import ApiError
from xlrag.server.models import ErrorResponse
from xlrag.text import capped

__all__ = ["CSP", "PAGE", "STATIC", "ModeOut", "ModesResponse", "ReportRequest", "TranslateRequest",
           "TranslateResponse", "install_ui"]

PAGE = "/"
STATIC = "/ui/"  # the page's script, style sheet and icon: public, like the page
# nothing inline (a script an attacker slips into corpus text has nowhere to run from), no
# other origin (offline by design, and nothing to exfiltrate to), no framing (clickjacking)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}
# a report holds corpus and model text: nothing in it runs, loads or frames, whatever opens it
REPORT_HEADERS = {"Content-Security-Policy": f"{CSP}; sandbox", "X-Content-Type-Options": "nosniff",
                  "Referrer-Policy": "no-referrer"}
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# A passage is translated a line (or a few sentences) a call, each call within the reply's token
# budget, so no size is too long for max_tokens; the cap bounds the calls one request makes (a
# passage the default splitter makes is under 1,000 characters).
MAX_TRANSLATE_CHARS = 4000
AUTO_DESCRIPTION = "the agent's rules choose the mode for each question (agent.rules, then agent.default_mode)"


def _static(name: str) -> bytes:
    return resources.files("xlrag.server").joinpath("static", name).read_bytes()


def _files() -> list[str]:
    return sorted(p.name for p in resources.files("xlrag.server").joinpath("static").iterdir()
                  if p.name != "index.html" and any(p.name.endswith(s) for s in _TYPES))


def _type(name: str) -> str:
    return next(t for suffix, t in _TYPES.items() if name.endswith(suffix))


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ModeOut(BaseModel):
    name: str
    description: str = Field(description="one line: what the mode searches")


class ModesResponse(BaseModel):
    modes: list[ModeOut] = Field(description="auto first, then every IR mode (xlrag.modes.IRMode) in its order")
    default: str = Field(description="the server's agent.mode: what a question without a mode gets")
    retrieval_default: str = Field(description="the server's retrieval.mode: what /v1/retrieve uses without one")
    max_question_chars: int = Field(description="longer questions are refused with 422 question_too_long")


class TranslateRequest(_In):
    text: str = Field(min_length=1, max_length=MAX_TRANSLATE_CHARS, description="the passage text")
    source_lang: str = Field(min_length=2, max_length=16, description="the passage's language (ISO 639)")
    target_lang: str = Field(min_length=2, max_length=16, description="the user's language (ISO 639)")


class TranslateResponse(BaseModel):
    text: str = Field(description=PassageTranslation.model_fields["text"].description)
    source_lang: str
    target_lang: str
    complete: bool = Field(description=PassageTranslation.model_fields["complete"].description)
    notes: list[str] = Field(description=PassageTranslation.model_fields["notes"].description)


class ReportRequest(_In):
    view: Perspectives = Field(description="a /v1/perspectives reply, as it came")
    format: Literal["markdown", "html"] = "markdown"


def _first_sentence(doc: str | None) -> str:
    # the docstring's reST roles and literals (:mod:`x`, ``k``) read as plain words on a page
    text = re.sub(r"(?::\w+:)?`+([^`]+)`+", r"\1", " ".join((doc or "").split()))
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def mode_descriptions() -> list[ModeOut]:
    """auto, then each IR mode with its policy's one-line description: the built-in modes in
    :class:`xlrag.modes.IRMode`'s order, then the plugins' (the registry's), the words each
    policy's own docstring."""
    builtin = [m.value for m in IRMode]
    names = [*builtin, *(m for m in available("mode") if m not in builtin)]
    return [ModeOut(name=AUTO, description=AUTO_DESCRIPTION),
            *(ModeOut(name=m, description=_first_sentence(get("mode", m).__doc__)) for m in names)]


def _server(request: Request) -> Any:
    return request.app.state.xlrag


Server = Annotated[Any, Depends(_server)]
router = APIRouter(prefix="/v1")
_ERR: dict[int | str, dict[str, Any]] = {401: {"model": ErrorResponse, "description": "missing or wrong API key"},
        422: {"model": ErrorResponse, "description": "invalid request"}}


@router.get("/modes", response_model=ModesResponse, responses=_ERR, summary="The IR modes, described")
async def modes(server: Server) -> ModesResponse:
    return ModesResponse(modes=mode_descriptions(), default=str(server.config.agent.mode),
                         retrieval_default=str(server.config.retrieval.mode),
                         max_question_chars=server.max_question_chars)


@router.post("/translate", response_model=TranslateResponse,
             responses={**_ERR, 503: {"model": ErrorResponse, "description": "busy"}},
             summary="Translate a passage into the user's language",
             description="With the server's translator (its LLM and the localized translation prompt), line "
                         "by line, a long line in pieces of whole sentences that fit the reply's token budget. "
                         "A piece whose reply is still cut at max_tokens stays in its own language: "
                         "`complete` is false and `notes` say which. Queues for a generation slot like an answer.")
async def translate(body: TranslateRequest, server: Server) -> TranslateResponse:
    from xlrag.chains.translator import translate_passage

    # an unknown code is xlrag's UnknownLanguageError: the handlers answer 422 unknown_language
    src, tgt = normalize_code(body.source_lang), normalize_code(body.target_lang)
    async with server.limiter.slot():
        out = await server.drain.bounded(
            asyncio.to_thread(translate_passage, server.pipeline.translator, body.text, src, tgt))
    return TranslateResponse(text=out.text, source_lang=src, target_lang=tgt, complete=out.complete, notes=out.notes)


@router.post("/perspectives/report", response_class=PlainTextResponse, responses=_ERR,
             summary="A perspectives view through xlrag's renderer",
             description="The view /v1/perspectives returned, as the Markdown report or the self-contained "
                         "HTML page of `xlrag ask --perspectives` (xlrag.perspectives.render). No model call.")
async def report(body: ReportRequest) -> Response:
    from xlrag.perspectives.render import to_html, to_markdown

    view = body.view
    if body.format == "html":
        # the renderer's page is its own document: sent to be saved, never shown inline here
        return HTMLResponse(to_html(view), headers={**REPORT_HEADERS, "Content-Disposition": "attachment; "
                                                                                          "filename=view.html"})
    # corpus and model text, escaped by the renderer; a browser that opens it anyway may neither
    # sniff it into HTML nor run anything in it
    return PlainTextResponse(to_markdown(view), media_type="text/markdown; charset=utf-8", headers=REPORT_HEADERS)


def install_ui(app: FastAPI) -> None:
    """The page at :data:`PAGE`, its assets under :data:`STATIC`, and the endpoints it needs."""
    names = _files()

    async def page() -> Response:
        return Response(_static("index.html"), media_type=_TYPES[".html"], headers=HEADERS)

    async def asset(name: str) -> Response:
        if name not in names:  # only the committed files: no path is ever read from the request
            raise ApiError(404, "not_found", f"no page asset {capped(name, 40)}")
        return Response(_static(name), media_type=_type(name), headers=HEADERS)

    # HEAD too: a link checker or a load balancer's probe asks for the page without its body
    app.add_api_route(PAGE, page, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_api_route(STATIC + "{name}", asset, methods=["GET", "HEAD"], include_in_schema=False)
    app.include_router(router)
