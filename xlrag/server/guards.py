"""What stands between a request and the model: the API key, the body size, the queue.

* :class:`AuthMiddleware` checks ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` in
  constant time before anything reads the body, and tells the endpoints which key it was (its
  :func:`owner` fingerprint: a chat session belongs to the key that made it). ``/v1/health`` and
  the API docs are open. Without a key (``--no-auth``) only loopback clients are answered.
* :class:`BodyLimitMiddleware` counts the bytes actually received, so a chunked upload
  without ``Content-Length`` is cut off at the limit too (413).
* :class:`GenerationLimiter` lets ``max_concurrent`` generations run (a local llama.cpp
  model answers one call at a time); up to ``max_queue`` more wait, at most
  ``queue_timeout`` seconds; beyond that the answer is 503 with ``Retry-After``. The limiter
  is one process's: under ``serve --workers N`` each worker has its own, so the server as a
  whole runs up to N times as many, and a request is refused when its own worker is full. A stream
  takes its place in the queue (:meth:`GenerationLimiter.reserve`) before its 200 is sent, so
  a burst of streams is refused with 503s, not answered 200 and then told it was refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xlrag.errors import ConfigError
from xlrag.server.drain import DEFAULT_GRACE_SECONDS, Drain
from xlrag.server.errors import ApiError, error_response

__all__ = ["API_KEY_ENV", "OPEN_PATHS", "AuthMiddleware", "BodyLimitMiddleware", "GenerationLimiter",
           "Reservation", "ServerLimits", "owner", "resolve_api_keys"]

API_KEY_ENV = "XLRAG_API_KEY"
MIN_KEY_CHARS = 16
# "/": the web page (xlrag.server.ui), which asks its user for the key before any call it makes
OPEN_PATHS = frozenset({"/v1/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/"})
# the docs page's scripts and styles (xlrag.server.docs_ui.ASSETS) and the web page's
# (xlrag.server.ui.STATIC): public, like the pages
OPEN_PREFIXES = ("/docs-assets/", "/ui/")
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class ServerLimits(BaseModel):
    """The limits of one server process; each has a command-line option of the same name. Under
    ``serve --workers N`` every worker holds them on its own (:mod:`xlrag.server.workers`)."""

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


def resolve_api_keys(api_key: str | Sequence[str] | None, no_auth: bool) -> tuple[str, ...] | None:
    """The keys requests may carry: ``api_key``, else ``$XLRAG_API_KEY``; None with ``no_auth``.
    Several keys (a list, or one string with commas) give each client its own: a chat session
    belongs to the key that made it."""
    if no_auth:
        return None
    given = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    parts = given.split(",") if isinstance(given, str) else list(given)
    keys = tuple(dict.fromkeys(k.strip() for k in parts if k.strip()))
    if not keys:
        raise ConfigError(
            f"no API key: set {API_KEY_ENV} (e.g. export {API_KEY_ENV}=$(python -c "
            f"'import secrets; print(secrets.token_urlsafe(32))')) and send it as 'Authorization: Bearer KEY', "
            f"or pass --no-auth to serve 127.0.0.1 only, without a key")
    for n, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_CHARS:
            which = f"{API_KEY_ENV}" if len(keys) == 1 else f"key {n} of {API_KEY_ENV} (keys are separated by commas)"
            raise ConfigError(f"{which} is {len(key)} characters long; use at least {MIN_KEY_CHARS} random "
                              f"characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return keys


#: The owner of what a --no-auth server's one local user makes.
LOCAL_OWNER = "local"
_OWNER = "xlrag_owner"  # the request state's name for it


def fingerprint(key: str) -> str:
    """What identifies a key inside the server (its sessions' owner) without keeping the key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def owner(scope_or_request: object) -> str:
    """The fingerprint of the key the request came with (:data:`LOCAL_OWNER` without keys), as
    :class:`AuthMiddleware` found it."""
    state = getattr(scope_or_request, "scope", scope_or_request)["state"]  # type: ignore[index]
    return state[_OWNER]


def _presented(headers: Headers) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key")


class AuthMiddleware:
    """401 for a missing or wrong key, before the request body is read."""

    def __init__(self, app: ASGIApp, api_keys: Sequence[str] | None):
        self.app = app
        self._keys = [(k.encode("utf-8"), fingerprint(k)) for k in api_keys] if api_keys is not None else None

    def _match(self, given: str) -> str | None:
        """The fingerprint of the key ``given`` is, or None. Every key is compared, in constant
        time (compare_digest), so the time taken tells neither how much of a guess was right
        nor which key it came near."""
        raw, found = given.encode("utf-8"), None
        for key, fp in self._keys or ():
            if secrets.compare_digest(raw, key):
                found = fp
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["path"].startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self._keys is None:
            client = (scope.get("client") or ("", 0))[0]
            if client not in LOOPBACK:
                # --no-auth is for one machine: a proxy or a changed bind must not open it up
                response = error_response(403, "forbidden", "this server runs without an API key (--no-auth) "
                                          "and answers local clients only")
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})[_OWNER] = LOCAL_OWNER
            await self.app(scope, receive, send)
            return
        given = _presented(Headers(scope=scope))
        found = self._match(given) if given is not None else None
        if found is None:
            why = "missing" if given is None else "wrong"
            response = error_response(
                401, "unauthorized", f"API key {why}: send the server's {API_KEY_ENV} as "
                "'Authorization: Bearer KEY' or 'X-API-Key: KEY'", headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[_OWNER] = found
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


class Reservation:
    """A place in the generation queue, taken before a stream's 200 is sent: the stream then
    waits for its slot with it. Released once, whichever comes first: the slot taken, or the
    response ending without it (a client gone before its stream began)."""

    def __init__(self, limiter: GenerationLimiter):
        self._limiter: GenerationLimiter | None = limiter

    def release(self) -> None:
        if self._limiter is not None:
            self._limiter.queued -= 1
            self._limiter = None


class GenerationLimiter:
    """At most ``max_concurrent`` generations; a bounded, timed queue behind them."""

    def __init__(self, max_concurrent: int, max_queue: int, queue_timeout: float, drain: Drain | None = None):
        self.max_concurrent, self.max_queue, self.queue_timeout = max_concurrent, max_queue, queue_timeout
        self.drain = drain
        self._slots = asyncio.Semaphore(max_concurrent)
        self.active = 0
        self.queued = 0  # waiting for a slot, or holding a Reservation for one

    def _busy(self, why: str) -> ApiError:
        return ApiError(503, "overloaded", f"{why}; retry later",
                        headers={"Retry-After": str(max(1, round(self.queue_timeout / 10)))})

    def refuse_when_full(self) -> None:
        """503 now if a new request could not even queue, or if the server is shutting down."""
        if self.drain is not None and self.drain.draining:
            raise self.drain.refusal()
        # every request that holds or awaits a slot is counted: those whose stream has not yet
        # reached the queue too, so a burst cannot all pass this check before any of them queues
        if self.active + self.queued >= self.max_concurrent + self.max_queue:
            raise self._busy(f"{self.active} generation(s) running and {self.queued} waiting, the most this "
                             f"server queues")

    def reserve(self) -> Reservation:
        """A place in the queue now, or 503 now: what a stream takes before it answers 200."""
        self.refuse_when_full()
        self.queued += 1
        return Reservation(self)

    @asynccontextmanager
    async def slot(self, reservation: Reservation | None = None) -> AsyncIterator[None]:
        """One generation slot, waited for in the queue (``reservation``: the place taken for it
        by :meth:`reserve`; None: one is taken now, or 503)."""
        held = reservation if reservation is not None else self.reserve()
        try:
            # asyncio.timeout, not wait_for: no inner task whose acquired slot a cancelled
            # client (a dropped stream) could leak
            async with asyncio.timeout(self.queue_timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise self._busy(f"no generation slot came free within {self.queue_timeout:g} s") from None
        finally:
            held.release()
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
