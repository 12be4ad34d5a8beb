"""The HTTP server: ``xlrag serve --index-dir D`` or ``create_app(config)`` under any ASGI server.

    POST /v1/ask       the agent: answer, citations, trace (JSON)
    POST /v1/chat      a conversation turn: server-sent events, or JSON with "stream": false
    DELETE /v1/chat/ID forget a conversation
    POST /v1/retrieve  passages for a question and IR mode
    GET  /v1/health    up, index languages, generation load (no key needed)
    GET  /             the web page: ask, chat, open citations, compare perspectives (no key to load it)

Needs the ``server`` extra (FastAPI, uvicorn): ``pip install 'xlrag[server]'``.
"""

from __future__ import annotations

from xlrag._lazy import lazy_exports

__all__ = ["ServerLimits", "create_app", "serve"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ServerLimits": "xlrag.server.guards",
    "create_app": "xlrag.server.app",
    "serve": "xlrag.server.run",
}, __all__)
