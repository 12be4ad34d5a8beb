"""The FastAPI application: ``create_app(config)`` and its endpoints.

One retriever and one chat model per server, shared by the agent (``/v1/ask``), the chat
(``/v1/chat``), the perspectives view (``/v1/perspectives``) and retrieval (``/v1/retrieve``).
``/v1/ask`` and ``/v1/chat`` answer with one JSON body or, with ``"stream": true`` in the
request, server-sent events (:mod:`xlrag.server.streaming`). Generations go through one
:class:`~xlrag.server.guards.GenerationLimiter`; retrieval alone does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response, StreamingResponse
from langchain_core.runnables import Runnable

from xlrag import __version__
from xlrag.agents.build import resolve_config
from xlrag.config import XlragConfig
from xlrag.errors import QuestionTooLongError
from xlrag.indexes.postprocess import fetch_k, postprocessed
from xlrag.modes import AUTO
from xlrag.perspectives.models import Perspectives
from xlrag.queries import check_question
from xlrag.schema import Query, make_query
from xlrag.server.docs_ui import install_docs
from xlrag.server.drain import Drain
from xlrag.server.errors import ApiError, CatchAllMiddleware, install_handlers
from xlrag.server.guards import (
    API_KEY_ENV,
    OPEN_PATHS,
    AuthMiddleware,
    BodyLimitMiddleware,
    GenerationLimiter,
    Reservation,
    ServerLimits,
    owner,
    resolve_api_keys,
)
from xlrag.server.hosts import HostGuardMiddleware, resolve_allowed_hosts
from xlrag.server.models import (
    AskRequest,
    AskResponse,
    ChatRequest,
    ChatResponse,
    DoneEvent,
    ErrorResponse,
    GenerationHealth,
    HealthResponse,
    IndexHealth,
    PerspectivesRequest,
    RetrieveRequest,
    RetrieveResponse,
    TokenEvent,
)
from xlrag.server.sessions import Sessions, memory_checkpointer
from xlrag.server.streaming import (
    EVENTS,
    ask_events,
    ask_response,
    chat_events,
    chat_response,
    chat_turn,
    with_pings,
)
from xlrag.server.ui import install_ui

if TYPE_CHECKING:
    from xlrag.indexes.retriever import CrossLingualRetriever

__all__ = ["XlragServer", "create_app"]

log = logging.getLogger("xlrag.server")

DESCRIPTION = f"""Cross-lingual RAG over one xlrag index: answers in the question's language with
`<docN>` citations, checked and repaired by the agent.

Every endpoint but `/v1/health` needs the server's key (`{API_KEY_ENV}`) as
`Authorization: Bearer KEY` or `X-API-Key: KEY`. Errors are `{{"error": {{"type", "message"}}}}`.
Chat sessions are issued by the server and belong to the key that made them. A server without a key
(`--no-auth`) answers requests for 127.0.0.1, localhost or [::1] from its own page only.
Generations run at most `max_concurrent` at a time in each worker process; a bounded queue waits
behind them and a full queue answers 503 with `Retry-After`."""

_ERROR_TEXT = {400: "a Host the server does not answer to (host_not_allowed)",
               401: "missing or wrong API key",
               403: "a non-local client, or a page of another origin, of a --no-auth server",
               404: "no such session (unknown_session: not issued here, another key's, or dropped)",
               413: "request body over the size limit",
               422: "invalid request: a malformed body, an unknown field, a question too long, an unknown language",
               500: "internal error (details in the server log, never in the reply)",
               503: "busy (the generation queue is full), the model provider is unavailable, or the index is "
                    "(gone or damaged; the message names no server path)"}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorResponse, "description": _ERROR_TEXT[c]} for c in codes}


class XlragServer:
    """What the endpoints share: the config, the model, the retriever, the graphs, the limits."""

    def __init__(self, config: XlragConfig, llm: Runnable | None, retriever: Any, limits: ServerLimits,
                 ping_every: float = 15.0):
        from xlrag.agents.build import Stack

        self.config, self.limits, self.ping_every = config, limits, ping_every
        # one stack for the agent and the chat: one model, one retriever, one translator;
        # auto: each request (or the agent's routing) names its mode, and /v1/retrieve needs the
        # retriever even when the agent answers closed-book
        self.stack = Stack.build(config, llm=llm, retriever=retriever, mode=AUTO)
        self.pipeline = self.stack.pipeline
        self.llm, self.retriever = self.pipeline.llm, self.pipeline.retriever
        self.agent = self.stack.agent()
        self.saver = memory_checkpointer()
        self.chat = self.stack.chat(self.saver)
        self.sessions = Sessions(self.chat, self.saver, config.agent.chat.retention_sessions)
        self.drain = Drain()
        self.limiter = GenerationLimiter(limits.max_concurrent, limits.max_queue, limits.queue_timeout, self.drain)
        # where the index lives, absolute (as given and resolved): never sent to a client (see
        # public()); a relative name such as "ix" is not a path to hide, and is a word in passages
        stores = getattr(self.retriever, "stores", None)
        dirs = {d for d in (config.index_dir, getattr(stores, "index_dir", None)) if d is not None}
        paths = {str(p) for d in dirs for p in (Path(d), Path(d).resolve()) if p.is_absolute() and len(p.parts) > 1}
        self._paths = sorted(paths, key=len, reverse=True)

    def public(self, model: Any) -> Any:
        """``model`` as JSON data with the server's index path replaced by ``<index_dir>``, and
        any absolute path in a note by ``<path>``: a retrieval note about a damaged file (an OS
        error's words) tells a client which store, never where the index is on this machine."""
        data = model.model_dump(mode="json") if hasattr(model, "model_dump") else model
        return _scrub(data, self._paths)

    @property
    def perspectives_view(self) -> Any:
        """The perspectives view over the server's stack, built on first use."""
        return self.stack.perspectives_view

    @property
    def max_question_chars(self) -> int:
        return self.limits.max_question_chars or self.config.retrieval.max_question_chars

    def admit_question(self, question: str, *, lang: str | None = None, relevant_langs: list[str] | None = None,
              target_lang: str | None = None) -> Query:
        """The request's question and languages as a :class:`Query`, refused before any work
        with a typed 422."""
        try:
            check_question(question, self.max_question_chars, setting=None)  # a client cannot raise it
        except QuestionTooLongError as e:
            raise ApiError(422, "question_too_long", str(e)) from None
        return make_query(question, lang=lang, relevant_langs=relevant_langs, target_lang=target_lang)

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        self.drain.bind(asyncio.get_running_loop())
        log.info("xlrag server ready: %d generation(s) at once, %d queued at most",
                 self.limits.max_concurrent, self.limits.max_queue)
        try:
            yield
        finally:
            # uvicorn has stopped taking requests and waited for the running ones
            self.pipeline.close()
            log.info("xlrag server stopped")


# the fields that carry xlrag's own messages about the index (not corpus or model text)
_NOTE_KEYS = frozenset({"notes", "note"})
# an absolute path in such a message, whole or cut short by the message's length cap
_ABSOLUTE = re.compile(r"(?<![\w.~/:-])/[^\s'\"()\[\]<>]+")


def _scrub(data: Any, paths: Sequence[str], note: bool = False) -> Any:
    """``data`` with the index's path replaced everywhere, and in notes any absolute path."""
    if isinstance(data, str):
        for p in paths:
            data = data.replace(p, "<index_dir>")
        return _ABSOLUTE.sub("<path>", data) if note else data
    if isinstance(data, dict):
        return {k: _scrub(v, paths, note or k in _NOTE_KEYS) for k, v in data.items()}
    if isinstance(data, list):
        return [_scrub(v, paths, note) for v in data]
    return data


def _server(request: Request) -> XlragServer:
    return request.app.state.xlrag


Server = Annotated[XlragServer, Depends(_server)]
router = APIRouter(prefix="/v1")


def _sse_doc(answer: type, description: str) -> dict[str, Any]:
    """The 200 response of an endpoint that may stream: each event's payload schema."""
    payloads = (TokenEvent, answer, DoneEvent, ErrorResponse)  # in the order of EVENTS
    events = {name: {"$ref": f"#/components/schemas/{model.__name__}"}
              for name, model in zip(EVENTS, payloads, strict=True)}
    return {"description": description,
            "content": {"text/event-stream": {"schema": {"type": "string"}, "x-events": events}}}


class _Stream(StreamingResponse):
    """An SSE response that gives back its place in the queue if it ends before its stream
    took a slot with it (a client gone before the first frame)."""

    def __init__(self, events: AsyncIterator[str], reservation: Reservation, headers: dict[str, str] | None = None):
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})})
        self.reservation = reservation

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.reservation.release()


@router.post("/ask", response_model=AskResponse, responses={
                 200: _sse_doc(AskResponse, "`stream: false` (default): one AskResponse. `stream: true`: server-sent "
                                            "events `token`*, `answer`, `done`, or `error` last (see x-events)."),
                 **_errors(401, 413, 422, 500, 503)},
             summary="Answer a question with the agent",
             description="Retrieve, answer with `<docN>` citations, verify the language and the citations, "
                         "repair what failed. The trace says what was done.")
async def ask(body: AskRequest, server: Server) -> Any:
    # the Query admitted is the one searched: the agent does not make it again
    inputs = {**body.agent_input(), "query": server.admit_question(
        body.question, lang=body.lang, relevant_langs=body.relevant_langs, target_lang=body.target_lang)}
    if not body.stream:
        async with server.limiter.slot():
            return server.public(ask_response(await server.drain.bounded(server.agent.ainvoke(inputs))))
    # a full queue is a 503 now, not a 200 whose stream starts with an error
    reservation = server.limiter.reserve()
    return _Stream(with_pings(partial(ask_events, server, inputs, reservation), server.ping_every,
                              "ask stream", server.drain), reservation)


_CHAT_DOC = _sse_doc(ChatResponse, "`stream: true` (default): server-sent events `token`*, `answer`, `done`, or "
                                   "`error` last (see x-events). `stream: false`: one ChatResponse. The session id "
                                   "is also in the `X-Session-Id` header.")


@router.post("/chat", response_model=ChatResponse,
             responses={200: _CHAT_DOC, **_errors(401, 404, 413, 422, 500, 503)},
             summary="One turn of a conversation, streamed",
             description="Follow-ups are condensed into a standalone question in the user's language. Without "
                         "`session_id` a new session starts: the server issues its id. A session belongs to the "
                         "key that made it, runs its turns one at a time, and exists once its first turn has run "
                         "to the end (a refused or failed request makes none and drops none); it lives in memory "
                         "until it is deleted, the server stops, or it is the least recently used beyond "
                         "`agent.chat.retention_sessions`.")
async def chat(body: ChatRequest, server: Server, request: Request) -> Any:
    admitted = server.admit_question(body.question, lang=body.lang)
    who = owner(request)
    new = body.session_id is None
    session_id = body.session_id if body.session_id is not None else server.sessions.new_id()
    if not new:
        server.sessions.check(session_id, who)  # 404 now, not a 200 whose stream says so
    inputs = {"question": body.question, "lang": body.lang, "mode": body.mode, "query": admitted}
    reservation = server.limiter.reserve()  # 503 now, before any session is touched
    if not body.stream:
        async with chat_turn(server, session_id, who, new, reservation):
            out = await server.drain.bounded(server.chat.ainvoke(inputs, server.sessions.config(session_id)))
            response = chat_response(session_id, out)
            await server.sessions.compact(session_id)
        return server.public(response)
    events = with_pings(partial(chat_events, server, session_id, who, new, inputs, reservation), server.ping_every,
                        "chat stream", server.drain)
    return _Stream(events, reservation, {"X-Session-Id": session_id})


@router.delete("/chat/{session_id}", status_code=204, responses=_errors(401, 404),
               summary="Forget a conversation",
               description="Only with the key that made it; another key's session is a 404, as if it did not exist.")
async def forget(session_id: str, server: Server, request: Request) -> Response:
    await server.sessions.delete(session_id, owner(request))
    return Response(status_code=204)


@router.post("/perspectives", response_model=Perspectives, responses=_errors(401, 413, 422, 500, 503),
             summary="Answer once per language of sources, side by side",
             description="The languages: `relevant_langs`, else an agent rule's or a disputed territory's (the user's "
                         "language first), else the best-ranked stores. Each language's store alone is searched "
                         "and answered from, in the question's language, by the agent (checked, repaired); every "
                         "pair of answers is compared (lexically, the LLM when unsure), and the verdict gives "
                         "the consensus groups and each disagreement with both sides' citations. Takes one "
                         "generation slot for all its answers.")
async def perspectives(body: PerspectivesRequest, server: Server) -> Any:
    inp = {**body.view_input(), "query": server.admit_question(body.question, lang=body.lang)}
    _searcher(server)
    # everything a bad request can be refused for, before it queues: a 422 now, not after the
    # answers ahead of it (up to queue_timeout)
    await asyncio.to_thread(server.perspectives_view.validate_input, inp)
    async with server.limiter.slot():
        return server.public(await server.drain.bounded(server.perspectives_view.ainvoke(inp)))


def _searcher(server: XlragServer) -> CrossLingualRetriever:
    """The server's retriever; a stack built without one (a closed-book pipeline) has no stores."""
    if server.retriever is None:
        raise ApiError(422, "no_index", "this server answers closed-book (mode no_ir): it has no language stores "
                                        "to search or compare")
    return server.retriever


@router.post("/retrieve", response_model=RetrieveResponse, responses=_errors(401, 413, 422, 500, 503),
             summary="Retrieve passages with an IR mode",
             description="No generation, except the question's translation (the `translate` mode, and the "
                         "lexical channel's search of stores in other languages), which queues for a generation "
                         "slot like an answer.")
async def retrieve(body: RetrieveRequest, server: Server) -> RetrieveResponse:
    query = server.admit_question(body.question, lang=body.lang, relevant_langs=body.relevant_langs,
                         target_lang=body.target_lang)
    mode = body.mode or server.config.retrieval.mode
    k = body.k or server.config.retrieval.k
    searcher = _searcher(server)
    # the passages as an answer's prompt would get them: the pipeline's passage steps run too
    steps = server.pipeline.passage_steps
    call = searcher.aretrieve(query, mode=mode, k=fetch_k(steps, k, searcher.retrieve_k), channels=body.channels)
    queued = searcher.translates(mode, body.channels) or any(step.chooses for step in steps)
    # translations (and a reranker's model) run beside the generation model: they queue like an answer
    async with server.limiter.slot() if queued else contextlib.nullcontext():
        result = await asyncio.to_thread(postprocessed, await call, steps, k)
    return server.public(RetrieveResponse.of(body.question, result, k))


@router.get("/health", response_model=HealthResponse, responses=_errors(500, 503),
            summary="Is the server up? (no key needed, no generation)")
async def health(server: Server) -> HealthResponse:
    if server.drain.draining:  # a load balancer's probe: route new work elsewhere
        raise server.drain.refusal()
    stores = _searcher(server).stores
    counts = await asyncio.to_thread(stores.counts)
    lim = server.limiter
    return HealthResponse(
        status="ok", version=__version__,
        index=IndexHealth(languages=sorted(counts), passages=counts, complete=stores.complete),
        generation=GenerationHealth(active=lim.active, queued=lim.queued, max_concurrent=lim.max_concurrent,
                                    max_queue=lim.max_queue),
        worker=os.getpid())


def _openapi(app: FastAPI, secured: bool) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {})
    defs = components.setdefault("schemas", {})
    for model in (TokenEvent, DoneEvent, AskResponse, ChatResponse, ErrorResponse):  # the SSE events' payloads
        js = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs.update(js.pop("$defs", {}))
        defs.setdefault(model.__name__, js)
    if secured:
        components["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": f"the server's {API_KEY_ENV}"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                       "description": f"the server's {API_KEY_ENV}"}}
        for path, operations in schema.get("paths", {}).items():
            if path not in OPEN_PATHS:
                for op in operations.values():
                    op["security"] = [{"bearer": []}, {"apiKey": []}]
    app.openapi_schema = schema
    return schema


def create_app(config: XlragConfig | str | None = None, *, llm: Runnable | None = None, retriever: Any = None,
               api_key: str | Sequence[str] | None = None, no_auth: bool = False, limits: ServerLimits | None = None,
               allowed_hosts: Sequence[str] | str | None = None) -> FastAPI:
    """The HTTP API over one index (``config.index_dir``), ready for ``uvicorn.run(app)``.

    ``api_key`` (default ``$XLRAG_API_KEY``; several: a list, or commas) is required unless
    ``no_auth``, which answers loopback clients that name it ``127.0.0.1``, ``localhost`` or
    ``[::1]`` from no other origin than its own (DNS rebinding). ``allowed_hosts``: the names a
    keyed server answers to (``--allowed-hosts``; default any). ``llm`` and ``retriever``
    replace the ones the config would build; a retriever given here stays open when the app
    stops (its owner closes it).
    """
    cfg = resolve_config(config)
    keys = resolve_api_keys(api_key, no_auth)  # before anything loads: a missing key fails fast
    names = resolve_allowed_hosts(allowed_hosts, no_auth)
    limits = limits or ServerLimits()
    server = XlragServer(cfg, llm, retriever, limits)
    app = FastAPI(title="xlrag", version=__version__, description=DESCRIPTION, lifespan=server.lifespan,
                  docs_url=None, redoc_url=None)
    app.state.xlrag = server
    install_handlers(app)
    install_docs(app)
    install_ui(app)
    # added innermost first: CatchAll wraps HostGuard wraps Auth wraps BodyLimit wraps the routes
    app.add_middleware(BodyLimitMiddleware, limit=limits.max_body_bytes)
    app.add_middleware(AuthMiddleware, api_keys=keys)
    if names is not None:
        app.add_middleware(HostGuardMiddleware, allowed=names, same_origin=no_auth)
    app.add_middleware(CatchAllMiddleware)
    app.include_router(router)
    app.openapi = partial(_openapi, app, keys is not None)  # type: ignore[method-assign]
    return app
