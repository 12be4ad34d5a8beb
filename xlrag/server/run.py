"""``serve``: check the key and the address, build the app, run uvicorn until SIGTERM/SIGINT.

The shutdown is graceful (:mod:`xlrag.server.drain`): on the signal uvicorn stops accepting
connections and the app starts no new answer, while running ones get ``limits.grace_seconds``
to finish (a stream cut at the deadline is told so); then the app's lifespan exit closes the
retriever and the process exits 0. A second Ctrl-C quits at once. Chat sessions live in
memory and end with the process.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from xlrag.config import XlragConfig
from xlrag.errors import ConfigError

if TYPE_CHECKING:
    from xlrag.server.drain import Drain
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


def _graceful_server(config: Any, drain: Drain, grace: float) -> Any:
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """uvicorn's server, telling the app when the grace period starts, and exiting 0 after
        a shutdown that kept its promise (uvicorn re-raises the signal once it has shut down,
        so the process would end 'killed by SIGTERM', exit 143)."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            drain.begin(grace)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return GracefulServer(config)


def serve(config: XlragConfig, *, host: str = "127.0.0.1", port: int = 8000, no_auth: bool = False,
          api_key: str | None = None, limits: ServerLimits | None = None, log_level: str = "info",
          allowed_hosts: str | list[str] | None = None) -> None:
    """Run the server in the foreground until it is stopped (SIGTERM or Ctrl-C: gracefully)."""
    require_server()
    import uvicorn

    from xlrag.server.app import create_app
    from xlrag.server.drain import CLOSE_SECONDS
    from xlrag.server.guards import ServerLimits, resolve_api_keys
    from xlrag.server.hosts import resolve_allowed_hosts

    bind = check_bind(host, no_auth)
    resolve_api_keys(api_key, no_auth)  # fail before loading anything
    resolve_allowed_hosts(allowed_hosts, no_auth)

    _log_to_stderr(log_level)
    limits = limits or ServerLimits()
    app = create_app(config, api_key=api_key, no_auth=no_auth, limits=limits, allowed_hosts=allowed_hosts)
    options: dict[str, Any] = {"host": bind, "port": port, "log_level": log_level,
                               "timeout_graceful_shutdown": limits.grace_seconds + CLOSE_SECONDS, "server_header": False}
    _graceful_server(uvicorn.Config(app, **options), app.state.xlrag.drain, limits.grace_seconds).run()
