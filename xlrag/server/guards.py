"""What stands between a request and the model: the API key, the body size, the queue.

* :class:`AuthMiddleware` checks ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` in
  constant time before anything reads the body. ``/v1/health`` and the API docs are open.
  Without a key (``--no-auth``) only loopback clients are answered.
* :class:`BodyLimitMiddleware` counts the bytes actually received, so a chunked upload
  without ``Content-Length`` is cut off at the limit too (413).
* :class:`GenerationLimiter` lets ``max_concurrent`` generations run (a local llama.cpp
  model answers one call at a time); up to ``max_queue`` more wait, at most
  ``queue_timeout`` seconds; beyond that the answer is 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xlrag.errors import ConfigError
from xlrag.server.drain import DEFAULT_GRACE_SECONDS, Drain
from xlrag.server.errors import ApiError, error_response

__all__ = ["API_KEY_ENV", "OPEN_PATHS", "AuthMiddleware", "BodyLimitMiddleware", "GenerationLimiter",
           "ServerLimits", "resolve_api_key"]

API_KEY_ENV = "XLRAG_API_KEY"
MIN_KEY_CHARS = 16
# "/": the web page (xlrag.server.ui), which asks its user for the key before any call it makes
OPEN_PATHS = frozenset({"/v1/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/"})
# the docs page's scripts and styles (xlrag.server.docs_ui.ASSETS) and the web page's
# (xlrag.server.ui.STATIC): public, like the pages
OPEN_PREFIXES = ("/docs-assets/", "/ui/")
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class ServerLimits(BaseModel):
    """The server's limits; each has a command-line option of the same name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(65_536, ge=256, description="request bodies larger than this get 413")
    max_question_chars: int | None = Field(
        None, ge=1, description="longer questions get 422 question_too_long; None: the config's "
                                "retrieval.max_question_chars")
    max_concurrent: int = Field(1, ge=1, description="generations at once (a local model answers one at a time)")
    max_queue: int = Field(16, ge=0, description="requests waiting for a generation slot; more get 503")
    queue_timeout: float = Field(300.0, gt=0, description="seconds a request may wait for a slot before 503")
    grace_seconds: float = Field(DEFAULT_GRACE_SECONDS, gt=0, description=(
        "on SIGTERM, seconds running answers may take to finish (no new one starts); a stream still "
        "running then gets an error event"))


def resolve_api_key(api_key: str | None, no_auth: bool) -> str | None:
    """The key requests must carry: ``api_key``, else ``$XLRAG_API_KEY``; None with ``no_auth``."""
    if no_auth:
        return None
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    key = key.strip()
    if not key:
        raise ConfigError(
            f"no API key: set {API_KEY_ENV} (e.g. export {API_KEY_ENV}=$(python -c "
            f"'import secrets; print(secrets.token_urlsafe(32))')) and send it as 'Authorization: Bearer KEY', "
            f"or pass --no-auth to serve 127.0.0.1 only, without a key")
    if len(key) < MIN_KEY_CHARS:
        raise ConfigError(f"{API_KEY_ENV} is {len(key)} characters long; use at least {MIN_KEY_CHARS} random "
                          f"characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return key


def _presented(headers: Headers) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key")


class AuthMiddleware:
    """401 for a missing or wrong key, before the request body is read."""

    def __init__(self, app: ASGIApp, api_key: str | None):
        self.app = app
        self._key = api_key.encode("utf-8") if api_key is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["path"].startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self._key is None:
            client = (scope.get("client") or ("", 0))[0]
            if client not in LOOPBACK:
                # --no-auth is for one machine: a proxy or a changed bind must not open it up
                response = error_response(403, "forbidden", "this server runs without an API key (--no-auth) "
                                          "and answers local clients only")
                await response(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        given = _presented(Headers(scope=scope))
        # compare_digest: the time taken does not tell how much of a guess was right
        if given is None or not secrets.compare_digest(given.encode("utf-8"), self._key):
            why = "missing" if given is None else "wrong"
            response = error_response(
                401, "unauthorized", f"API key {why}: send the server's {API_KEY_ENV} as "
                "'Authorization: Bearer KEY' or 'X-API-Key: KEY'", headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _BodyTooLarge(HTTPException):
    # an HTTPException: FastAPI re-raises it from its body reading, and the handler for
    # HTTPException turns it into the typed 413
    def __init__(self, limit: int):
        super().__init__(413, f"the request body is over the limit of {limit} bytes; send less "
                              f"(or start the server with a larger --max-body-bytes)")


class BodyLimitMiddleware:
    """413 once a request body passes ``limit`` bytes, declared or not."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            # refused unread: the connection is closed after the answer
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _BodyTooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        exc = _BodyTooLarge(self.limit)
        await error_response(413, "body_too_large", str(exc.detail), headers={"Connection": "close"})(
            scope, receive, send)


class GenerationLimiter:
    """At most ``max_concurrent`` generations; a bounded, timed queue behind them."""

    def __init__(self, max_concurrent: int, max_queue: int, queue_timeout: float, drain: Drain | None = None):
        self.max_concurrent, self.max_queue, self.queue_timeout = max_concurrent, max_queue, queue_timeout
        self.drain = drain
        self._slots = asyncio.Semaphore(max_concurrent)
        self.active = 0
        self.queued = 0

    def _busy(self, why: str) -> ApiError:
        return ApiError(503, "overloaded", f"{why}; retry later",
                        headers={"Retry-After": str(max(1, round(self.queue_timeout / 10)))})

    def refuse_when_full(self) -> None:
        """503 now if a new request could not even queue (a stream checks before it starts), or
        if the server is shutting down."""
        if self.drain is not None and self.drain.draining:
            raise self.drain.refusal()
        if self._slots.locked() and self.queued >= self.max_queue:
            raise self._busy(f"{self.active} generation(s) running and {self.queued} waiting, the most this "
                             f"server queues")

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.refuse_when_full()
        self.queued += 1
        try:
            # asyncio.timeout, not wait_for: no inner task whose acquired slot a cancelled
            # client (a dropped stream) could leak
            async with asyncio.timeout(self.queue_timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise self._busy(f"no generation slot came free within {self.queue_timeout:g} s") from None
        finally:
            self.queued -= 1
        if self.drain is not None and self.drain.draining:
            # queued before the signal: the slot came free, but no new answer starts now
            self._slots.release()
            raise self.drain.refusal()
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._slots.release()
