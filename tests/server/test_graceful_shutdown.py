"""SIGTERM keeps the server's promise (issue #23): running answers finish within the grace, a
stream still running at its deadline is told so by a typed ``error`` event, nothing new starts,
and the process exits 0.

Real processes and real signals: ``xlrag.server.run.serve`` in a subprocess, answering through
the real OpenAI SDK from a stand-in on 127.0.0.1 that streams its reply slowly (one word every
0.2 s), so the timing of the signal against the answer is known.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import QUESTION, free_port, iter_sse_events, serving

REPLY = ("Cited Documents: <doc0>\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
         "Explanation: Según <doc0>, la defensa solo permitió 308 puntos en toda la temporada.")
WORD_SECONDS = 0.2


@contextmanager
def slow_openai(words: int) -> Iterator[str]:
    """An OpenAI-compatible /v1/chat/completions that streams the first ``words`` words of a
    cited Spanish reply, one every WORD_SECONDS (or answers at once when not streamed)."""
    pieces = [w + " " for w in REPLY.split(" ")]
    pieces = (pieces * (words // len(pieces) + 1))[:words]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            base = {"id": "c1", "created": 1, "model": body["model"]}
            if not body.get("stream"):
                data = json.dumps({**base, "object": "chat.completion", "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": REPLY}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for piece in pieces:
                    chunk = {**base, "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(WORD_SECONDS)
                end = {**base, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # xlrag cancelled the answer
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


SERVE = """
import sys
from xlrag.config import XlragConfig
from xlrag.server.guards import ServerLimits
from xlrag.server.run import serve
cfg = XlragConfig(index_dir=sys.argv[1], llm={{"provider": "openai", "model": "gpt-4o-mini", "base_url": sys.argv[2]}},
                  agent={{"mode": "qlang_en"}})
serve(cfg, port=int(sys.argv[3]), no_auth=True, limits=ServerLimits(grace_seconds={grace}))
"""


@contextmanager
def server(index: Path, llm_url: str, grace: float, cwd: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLRAG_")}
    env.update({"OPENAI_API_KEY": "sk-test-drain", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    proc = subprocess.Popen([sys.executable, "-c", SERVE.format(grace=grace), str(index), llm_url, str(port)],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with serving(proc, f"http://127.0.0.1:{port}") as running:
        yield running


def _stream_then_sigterm(proc: subprocess.Popen, url: str, after_tokens: int) -> tuple[list, float]:
    """Stream an answer; send SIGTERM once ``after_tokens`` tokens have come. The events, and
    the seconds from the signal to the stream's end."""
    events, signalled = [], None
    with httpx.Client(timeout=120) as client, client.stream(
            "POST", f"{url}/v1/ask", json={"question": QUESTION, "stream": True}) as response:
        assert response.status_code == 200
        for event in iter_sse_events(response):
            events.append(event)
            if signalled is None and sum(name == "token" for name, _ in events) >= after_tokens:
                proc.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
    assert signalled is not None, events
    return events, time.monotonic() - signalled


@pytest.mark.slow
def test_sigterm_lets_a_running_answer_finish_and_exits_0(xquad_index, tmp_path):
    words = len(REPLY.split(" "))  # about 5 s of streaming
    with slow_openai(words) as llm_url, server(xquad_index, llm_url, grace=60, cwd=tmp_path) as (proc, url):
        events, _ = _stream_then_sigterm(proc, url, after_tokens=3)
        output = proc.communicate(timeout=90)[0]
    names = [name for name, _ in events]
    assert names[-2:] == ["answer", "done"], names  # the whole answer, after the signal
    assert "".join(d["text"] for n, d in events if n == "token").strip() == REPLY.strip()
    assert events[-2][1]["answer"]["answer"].startswith("La defensa de los Panthers")
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "xlrag server stopped" in output


@pytest.mark.slow
def test_a_stream_still_running_at_the_deadline_gets_an_error_event(xquad_index, tmp_path):
    grace = 4.0
    with slow_openai(words=400) as llm_url, server(xquad_index, llm_url, grace=grace, cwd=tmp_path) as (proc, url):
        events, seconds = _stream_then_sigterm(proc, url, after_tokens=2)
        # a second client arriving during the drain: turned away, never started
        try:
            late = httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, timeout=10)
            assert late.status_code == 503 and late.json()["error"]["type"] == "shutting_down"
        except httpx.TransportError:
            pass  # or uvicorn had already closed its listening socket: refused, equally never started
        output = proc.communicate(timeout=60)[0]
    name, data = events[-1]
    assert name == "error" and data["error"]["type"] == "shutting_down", events[-3:]
    assert "grace period (4 s)" in data["error"]["message"]
    assert "answer" not in [n for n, _ in events]
    assert seconds < grace + 3  # cut at the deadline, not at the end of the 80 s answer
    assert proc.returncode == 0, output
    assert "Traceback" not in output
