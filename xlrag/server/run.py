"""``serve``: check the key and the address, build the app, run uvicorn until SIGTERM/SIGINT.

uvicorn's shutdown is graceful: it stops accepting connections, lets running requests
finish for up to ``graceful_seconds``, then runs the app's lifespan exit (which closes
the retriever). Chat sessions live in memory and end with the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlrag.config import XlragConfig
from xlrag.errors import ConfigError

if TYPE_CHECKING:
    from xlrag.server.guards import ServerLimits

__all__ = ["LOCAL_HOSTS", "check_bind", "require_server", "serve"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


def check_bind(host: str, no_auth: bool) -> str:
    """The address to bind; without a key, only 127.0.0.1 is allowed."""
    if no_auth and host not in LOCAL_HOSTS:
        raise ConfigError(f"--no-auth serves 127.0.0.1 only, not {host}: drop --host, or set XLRAG_API_KEY and "
                          f"drop --no-auth to serve other machines")
    # localhost may resolve to a non-loopback or IPv6 address: bind the one meant
    return "127.0.0.1" if no_auth else host


def require_server() -> None:
    """FastAPI and uvicorn are the ``server`` extra: say so, rather than fail on an import."""
    from xlrag.registry import require

    require("fastapi", "server", "xlrag serve")
    require("uvicorn", "server", "xlrag serve")
    require("swagger_ui_bundle", "server", "xlrag serve")


def _log_to_stderr(level: str) -> None:
    """xlrag's own log lines (startup, shutdown, each internal error with its traceback) beside
    uvicorn's; the root logger is left alone, so libraries keep their own levels."""
    import logging

    logger = logging.getLogger("xlrag")
    if not any(getattr(h, "_xlrag_serve", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        handler._xlrag_serve = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    known = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
    logger.setLevel(level.upper() if level.upper() in known else "INFO")


def serve(config: XlragConfig, *, host: str = "127.0.0.1", port: int = 8000, no_auth: bool = False,
          api_key: str | None = None, limits: ServerLimits | None = None, log_level: str = "info",
          graceful_seconds: float = 30.0) -> None:
    """Run the server in the foreground until it is stopped."""
    require_server()
    import uvicorn

    from xlrag.server.app import create_app
    from xlrag.server.guards import resolve_api_key

    bind = check_bind(host, no_auth)
    resolve_api_key(api_key, no_auth)  # fail before loading anything

    _log_to_stderr(log_level)
    app = create_app(config, api_key=api_key, no_auth=no_auth, limits=limits)
    options: dict[str, Any] = {"host": bind, "port": port, "log_level": log_level,
                               "timeout_graceful_shutdown": graceful_seconds, "server_header": False}
    uvicorn.Server(uvicorn.Config(app, **options)).run()
