"""One server process: its log lines, its uvicorn settings, and the graceful uvicorn server it
runs, whether it is the whole of ``xlrag serve`` or one of its ``--workers``."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from xlrag.schema import make_query

if TYPE_CHECKING:
    from xlrag.server.drain import Drain
    from xlrag.server.guards import ServerLimits

__all__ = ["graceful_server", "log_to_stderr", "uvicorn_options", "warm"]


def log_to_stderr(level: str) -> None:
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


def uvicorn_options(limits: ServerLimits, log_level: str) -> dict[str, Any]:
    """uvicorn's settings for one server process (the address is bound by the caller)."""
    from xlrag.server.drain import CLOSE_SECONDS

    return {"log_level": log_level, "timeout_graceful_shutdown": limits.grace_seconds + CLOSE_SECONDS,
            "server_header": False}


def graceful_server(config: Any, drain: Drain, grace: float) -> Any:
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


def warm(app: Any) -> None:
    """Open the index and search every store once, before the first request: what a retrieval
    loads on first use (the embedder, each store's vectors and lexical index) is loaded here, so
    no request waits for it. It does not make two workers answer alike: over local Chroma files
    each process re-inserts the vectors written since Chroma's last sync into its own HNSW graph,
    and approximate search can find other neighbours in each (``docs/explanation/scale.md``)."""
    retriever = app.state.xlrag.retriever
    if getattr(retriever, "stores", None) is None:
        return
    retriever.stores.counts()
    retriever.retrieve(make_query("warm up"), mode="all", k=1)
