"""Typed JSON errors: every failure is ``{"error": {"type": ..., "message": ...}}``.

xlrag's own errors (:class:`xlrag.errors.XlragError`) are written for users, so their
message is sent as it is; anything else is a bug or an outage, logged here with a request
id and answered with a generic message, never a traceback.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xlrag.errors import (
    DiskFullError,
    IndexCorruptError,
    IndexDirError,
    IndexNotFoundError,
    PolicyError,
    ProviderError,
    XlragError,
)
from xlrag.server.models import ErrorResponse
from xlrag.text import capped

__all__ = ["ApiError", "CatchAllMiddleware", "error_payload", "error_response", "install_handlers", "xlrag_status"]

log = logging.getLogger("xlrag.server")

ERROR_TYPES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type",
               422: "invalid_request", 500: "internal_error", 503: "overloaded"}


class ApiError(Exception):
    """An error the server answers itself (busy, question too long, unknown session)."""

    def __init__(self, status: int, type: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.type, self.message, self.headers = status, type, message, headers or {}


def error_payload(type: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return ErrorResponse.make(type, message, details).model_dump(exclude_none=True)


def error_response(status: int, type: str, message: str, *, details: list[dict[str, Any]] | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_payload(type, message, details), status_code=status, headers=headers)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name.removesuffix("Error")).lower() or "error"


def xlrag_status(e: XlragError) -> tuple[int, str]:
    """HTTP status and error type of one of xlrag's own errors."""
    if isinstance(e, ProviderError):
        return 503, "provider_unavailable"  # the model's API failed after its retries: try again later
    if isinstance(e, (ValueError, TypeError, PolicyError)):
        return 422, _snake(type(e).__name__)  # the request's content: an empty question, an unknown language...
    if isinstance(e, IndexDirError):
        return 503, "index_unavailable"  # the server's index: gone, damaged, locked; readiness probes see 503
    return 500, _snake(type(e).__name__)  # the server's configuration


# What an index failure means, in words that hold none of the server's paths (its message does):
# enough for a probe's reader to know whether to restore the folder, rebuild it, or free space.
_INDEX_REASONS: tuple[tuple[type[IndexDirError], str], ...] = (
    (IndexNotFoundError, "not found: the index folder was moved or removed, or holds no index"),
    (IndexCorruptError, "damaged: check it with 'xlrag check' or rebuild it"),
    (DiskFullError, "its disk is full"),
)


def xlrag_error(e: XlragError, where: str) -> tuple[int, dict[str, Any]]:
    """Status and payload for one of xlrag's errors. The client's own mistakes (422) are told
    as they are; the server's (its index, its config: messages that hold its file paths) are
    logged under a request id and told only by kind, so no client, keyless /v1/health
    included, learns the server's paths."""
    status, kind = xlrag_status(e)
    if status == 422 or isinstance(e, ProviderError):
        return status, error_payload(kind, str(e))
    rid = uuid.uuid4().hex[:12]
    log.error("request %s (%s): %s: %s", rid, where, type(e).__name__, e)
    what = "the server's index is unavailable" if kind == "index_unavailable" else "the server is misconfigured"
    reason = next((f"{why}; " for cls, why in _INDEX_REASONS if isinstance(e, cls)), "")
    return status, error_payload(kind, f"{what} ({reason}{type(e).__name__}, request id {rid}); the server log "
                                       f"has the details")


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    # loc, msg and type only: the offending input is the client's own, and pydantic's ctx
    # may hold exception objects
    return [{"loc": [x if isinstance(x, int) else str(x) for x in e.get("loc", ())],
             "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()]


def install_handlers(app: FastAPI) -> None:
    """Route every error FastAPI and xlrag raise to the one JSON shape."""

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        kind = ERROR_TYPES.get(exc.status_code, "error")
        # the path as the client sent it, capped: a megabyte of URL is not echoed back
        path = capped(request.url.path, 80)
        if exc.status_code == 404:
            message = f"no such endpoint: {capped(request.method, 20)} {path}; /docs lists them"
        elif exc.status_code == 405:
            message = f"{capped(request.method, 20)} is not allowed on {path}; /docs lists the methods"
        elif exc.status_code >= 500:
            message = "internal error"
        else:
            message = str(exc.detail)
        return error_response(exc.status_code, kind, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        parts = [f"{'.'.join(str(x) for x in d['loc'])}: {d['msg']}" for d in details[:5]]
        more = f" (and {len(details) - 5} more)" if len(details) > 5 else ""
        return error_response(422, "invalid_request", "; ".join(parts) + more, details=details)

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.type, exc.message, headers=exc.headers)

    @app.exception_handler(XlragError)
    async def _xlrag(request: Request, exc: XlragError) -> JSONResponse:
        status, payload = xlrag_error(exc, f"{request.method} {request.url.path}")
        return JSONResponse(payload, status_code=status)


def internal_error(where: str, exc: BaseException) -> dict[str, Any]:
    """Log ``exc`` with its traceback under a fresh request id; the payload names only the id."""
    rid = uuid.uuid4().hex[:12]
    log.error("request %s (%s) failed", rid, where, exc_info=(type(exc), exc, exc.__traceback__))
    return error_payload("internal_error", f"internal error (request id {rid}); the server log has the details")


class CatchAllMiddleware:
    """Outermost: an exception nothing else handled becomes a logged, generic 500.

    Starlette's own last-resort handler would answer too, but then re-raise for the
    server to log a second time; this answers once and logs once, with a request id."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as e:
            payload = internal_error(f"{scope.get('method')} {scope.get('path')}", e)
            if not started:  # else the response is half sent: all that is left is to close it
                await JSONResponse(payload, status_code=500)(scope, receive, send)
