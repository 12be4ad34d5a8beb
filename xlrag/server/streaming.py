"""Server-sent events for ``POST /v1/chat``.

A stream is, in order::

    event: token    data: {"text": "...", "attempt": 0}      (zero or more)
    event: answer   data: ChatResponse                        (the final, checked answer)
    event: done     data: {"session_id": "...", "seconds": 1.2}

or ends with ``event: error  data: {"error": {"type", "message"}}`` instead of ``answer``
and ``done``. Only the answering model's tokens are sent (the condense, translation and
judge calls are tagged not to stream). A repair that regenerates streams again with
``attempt`` 1, 2; the ``answer`` event is what the checks passed, which after a repair
(a translation, post-hoc citations) differs from the tokens. ``: ping`` comments keep
the connection open while a request waits in the queue or the model reads its prompt.

The graph runs in a task of its own feeding a queue, so a client that disconnects
cancels it (and frees its generation slot) without the stream ever being driven from
two tasks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import Any

from xlrag.errors import XlragError
from xlrag.server.errors import ApiError, error_payload, internal_error, xlrag_status
from xlrag.server.models import AnswerOut, ChatResponse, DoneEvent, TokenEvent

__all__ = ["EVENTS", "chat_events", "chat_response", "frame", "with_pings"]

log = logging.getLogger("xlrag.server")

EVENTS = ("token", "answer", "done", "error")
PING = ": ping\n\n"

Emit = Callable[[str, Any], Awaitable[None]]


def frame(event: str, data: Any) -> str:
    """One SSE event; ``data`` is a pydantic model or plain JSON data, on one line."""
    text = data.model_dump_json() if hasattr(data, "model_dump_json") else json.dumps(data, ensure_ascii=False)
    return f"event: {event}\ndata: {text}\n\n"


async def with_pings(produce: Callable[[Emit], Awaitable[None]], every: float) -> AsyncIterator[str]:
    """The frames ``produce`` emits, with a ping comment after each ``every`` seconds of silence."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def emit(event: str, data: Any) -> None:
        queue.put_nowait(frame(event, data))

    async def run() -> None:
        try:
            await produce(emit)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # produce reports what it expects; this is a bug
            queue.put_nowait(frame("error", internal_error("chat stream", e)))
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run())
    getter: asyncio.Task | None = None
    try:
        while True:
            getter = getter or asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter}, timeout=every)
            if not done:
                yield PING
                continue
            item, getter = getter.result(), None
            if item is None:
                break
            yield item
    finally:
        # the client left (or the stream ended): stop the graph, free its slot
        for t in (task, getter):
            if t is not None and not t.done():
                t.cancel()
                with suppress(asyncio.CancelledError):
                    await t


def chat_response(session_id: str, out: dict[str, Any]) -> ChatResponse:
    turns = out.get("turns") or []
    return ChatResponse(session_id=session_id, turn=len(turns), answer=AnswerOut.of(out["answer"]),
                        trace=out["trace"], sources=list(turns[-1].sources) if turns else [])


async def chat_events(server: Any, session_id: str, inputs: dict[str, Any], emit: Emit) -> None:
    """Run one chat turn for ``session_id``, emitting token, answer and done (or error)."""
    from xlrag.agents.chat import ChatToken, achat_turn

    t0 = time.perf_counter()
    final: dict[str, Any] | None = None
    try:
        async with server.sessions.turn(session_id), server.limiter.slot():
            async for item in achat_turn(server.chat, inputs, server.sessions.config(session_id)):
                if isinstance(item, ChatToken):
                    await emit("token", TokenEvent(text=item.text, attempt=item.attempt))
                else:
                    final = item
            if final is None:
                raise RuntimeError("the chat graph ended without an answer")
            response = chat_response(session_id, final)
            await server.sessions.compact(session_id)
    except ApiError as e:
        await emit("error", error_payload(e.type, e.message))
        return
    except XlragError as e:
        status, kind = xlrag_status(e)
        if status >= 500:
            log.error("chat stream: %s: %s", type(e).__name__, e)
        await emit("error", error_payload(kind, str(e)))
        return
    await emit("answer", response)
    await emit("done", DoneEvent(session_id=session_id, seconds=round(time.perf_counter() - t0, 3)))
