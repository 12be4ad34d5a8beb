"""A vendor stand-in over real HTTP: a stdlib server on 127.0.0.1 that records every
request and answers from recorded responses in the vendor's wire format.

Used by the embedder/reranker adapter tests and the chat-model adapter tests, which
point the vendors' real SDK clients at it with ``base_url``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Recorded", "Replay", "Route", "serve"]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


Route = Callable[[Any], tuple[int, Any]]


@dataclass
class Replay:
    """A vendor stand-in: ``routes`` maps a request path to ``body -> (status, json)``."""

    routes: dict[str, Route]
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def _handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            path = urlsplit(self.path).path
            replay.record(Recorded("POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
            route = replay.routes.get(path)
            if route is None:
                status, payload = 404, {"message": f"replay has no route for POST {path}"}
            else:
                status, payload = route(body)
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler


@contextmanager
def serve(routes: dict[str, Route]) -> Iterator[Replay]:
    replay = Replay(routes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    server.daemon_threads = True
    replay.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="llm-vendor-replay", daemon=True)
    thread.start()
    try:
        yield replay
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
