"""A stand-in for an OpenAI-compatible model server on 127.0.0.1, for a server run in its own
processes (``xlrag serve --workers N``), where a scripted LangChain model cannot be handed in:
the workers build their model from the config (``llm: {provider: openai, base_url: ...}``) and
talk to this one through the real OpenAI SDK.

Every call is answered with one fixed reply, after ``delay`` seconds and, with a ``gate``, only
once the gate is open: what a test or a benchmark needs to hold generations in flight. The
``benchmarks/load.py`` run uses it too, so its asks exercise the same path as the tests'.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPLY = ("Cited Documents: <doc0>\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
         "Explanation: Según <doc0>, la defensa solo permitió 308 puntos en toda la temporada.")


@dataclass
class StandIn:
    url: str  # the base URL an OpenAI client is given (ends in /v1)
    gate: threading.Event | None = None
    calls: int = 0
    waiting: int = 0  # calls held at the gate now
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def openai_standin(reply: str = REPLY, *, delay: float = 0.0, gate: threading.Event | None = None
                   ) -> Iterator[StandIn]:
    """A running stand-in; ``gate``: calls wait (up to 120 s) until it is set."""
    state = StandIn(url="", gate=gate)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with state.lock:
                state.calls += 1
                state.waiting += 1
            try:
                if gate is not None:
                    gate.wait(120)
                if delay:
                    time.sleep(delay)
            finally:
                with state.lock:
                    state.waiting -= 1
            base = {"id": "c1", "created": 1, "model": body.get("model", "stand-in")}
            if body.get("stream"):
                chunks = [{**base, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {"content": reply}, "finish_reason": None}]},
                          {**base, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
                data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self._send(data.encode(), "text/event-stream")
                return
            data = json.dumps({**base, "object": "chat.completion", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self._send(data, "application/json")

        def _send(self, data: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        if gate is not None:
            gate.set()  # no handler thread left waiting
        server.shutdown()
        server.server_close()


def standin_config(path: Path, index_dir: Path, standin: StandIn) -> Path:
    """An ``xlrag.yaml`` at ``path`` that answers with the stand-in over ``index_dir``."""
    path.write_text(f"index_dir: {json.dumps(str(index_dir))}\n"
                    f"llm:\n  provider: openai\n  model: gpt-4o-mini\n  base_url: {json.dumps(standin.url)}\n"
                    "agent:\n  mode: qlang_en\n", encoding="utf-8")
    return path


def standin_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a server process that talks to the stand-in (a dummy OpenAI key, no proxy)."""
    env = {k: v for k, v in env.items() if not k.startswith("XLRAG_")}
    env.update({"OPENAI_API_KEY": "sk-test-standin", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
                "ANONYMIZED_TELEMETRY": "False"})
    return env
