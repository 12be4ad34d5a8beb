"""Server-sent events for ``POST /v1/chat`` and ``POST /v1/ask`` (with ``"stream": true``).

A stream is, in order::

    event: token    data: {"text": "...", "attempt": 0}      (zero or more)
    event: answer   data: ChatResponse or AskResponse         (the final, checked answer)
    event: done     data: {"session_id": "..." or null, "seconds": 1.2}

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
from contextlib import asynccontextmanager, suppress
from typing import Any

from xlrag.errors import XlragError
from xlrag.server.drain import Drain
from xlrag.server.errors import ApiError, error_payload, internal_error, xlrag_error
from xlrag.server.guards import Reservation
from xlrag.server.models import AnswerOut, AskResponse, ChatResponse, DoneEvent, TokenEvent

__all__ = ["EVENTS", "ask_events", "ask_response", "chat_events", "chat_response", "chat_turn", "frame", "with_pings"]

log = logging.getLogger("xlrag.server")

EVENTS = ("token", "answer", "done", "error")  # the only event names a stream sends
TOKEN, ANSWER, DONE, ERROR = EVENTS
PING = ": ping\n\n"

Emit = Callable[[str, Any], Awaitable[None]]


def frame(event: str, data: Any) -> str:
    """One SSE event; ``data`` is a pydantic model or plain JSON data, on one line."""
    if event not in EVENTS:
        raise ValueError(f"unknown SSE event {event!r}; the events are {', '.join(EVENTS)}")
    text = data.model_dump_json() if hasattr(data, "model_dump_json") else json.dumps(data, ensure_ascii=False)
    return f"event: {event}\ndata: {text}\n\n"


async def with_pings(produce: Callable[[Emit], Awaitable[None]], every: float,
                     where: str = "chat stream", drain: Drain | None = None) -> AsyncIterator[str]:
    """The frames ``produce`` emits, with a ping comment after each ``every`` seconds of silence.
    ``where`` names the stream in the log of an unexpected failure. Once ``drain`` begins, a
    stream still running at its deadline ends with an ``error`` event (``shutting_down``)."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def emit(event: str, data: Any) -> None:
        queue.put_nowait(frame(event, data))

    async def run() -> None:
        try:
            await produce(emit)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # produce reports what it expects; this is a bug
            queue.put_nowait(frame(ERROR, internal_error(where, e)))
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run())
    getter: asyncio.Task | None = None
    draining = asyncio.ensure_future(drain.started()) if drain is not None else None
    try:
        while True:
            getter = getter or asyncio.ensure_future(queue.get())
            left = drain.remaining() if drain is not None else None
            if drain is not None and left is not None and left <= 0:
                yield frame(ERROR, drain.cut())
                break
            waiting = {getter} if draining is None or draining.done() else {getter, draining}
            done, _ = await asyncio.wait(waiting, timeout=every if left is None else min(every, left),
                                         return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                if not done:
                    yield PING
                continue
            item, getter = getter.result(), None
            if item is None:
                break
            yield item
    finally:
        # the client left (or the stream ended): stop the graph, free its slot
        for t in (task, getter, draining):
            if t is not None and not t.done():
                t.cancel()
                with suppress(asyncio.CancelledError):
                    await t


def chat_response(session_id: str, out: dict[str, Any]) -> ChatResponse:
    turns = out.get("turns") or []
    return ChatResponse(session_id=session_id, turn=len(turns), answer=AnswerOut.of(out["answer"]),
                        trace=out["trace"], sources=list(turns[-1].sources) if turns else [])


def ask_response(out: dict[str, Any]) -> AskResponse:
    return AskResponse(answer=AnswerOut.of(out["answer"]), trace=out["trace"])


async def _tokens(emit: Emit, items: AsyncIterator[Any], graph: str) -> dict[str, Any]:
    """Emit each token of a graph's stream; the graph's output, which comes last."""
    from xlrag.chains.state import AnswerToken

    final: dict[str, Any] | None = None
    async for item in items:
        if isinstance(item, AnswerToken):
            await emit(TOKEN, TokenEvent(text=item.text, attempt=item.attempt))
        else:
            final = item
    if final is None:
        raise RuntimeError(f"the {graph} graph ended without an answer")
    return final


async def _answered(emit: Emit, run: Callable[[], Awaitable[Any]], session_id: str | None, where: str,
                    public: Callable[[Any], Any]) -> None:
    """``run`` (which emits the tokens), then its answer (as ``public`` shows it) and done, or
    the error it raised."""
    t0 = time.perf_counter()
    try:
        response = await run()
    except ApiError as e:
        await emit(ERROR, error_payload(e.type, e.message))
        return
    except XlragError as e:
        await emit(ERROR, xlrag_error(e, where)[1])
        return
    await emit(ANSWER, public(response))
    await emit(DONE, DoneEvent(session_id=session_id, seconds=round(time.perf_counter() - t0, 3)))


@asynccontextmanager
async def chat_turn(server: Any, session_id: str, owner: str, new: bool, reservation: Reservation
                    ) -> AsyncIterator[None]:
    """One turn of ``session_id`` with a generation slot. The session's own queue comes first,
    so no slot is held while an earlier turn of the same session runs; a first turn (``new``)
    becomes a session only once it has run to the end. The queue place is given back however
    the turn ends."""
    try:
        async with server.sessions.turn(session_id, owner, new=new), server.limiter.slot(reservation):
            yield
    finally:
        reservation.release()


async def chat_events(server: Any, session_id: str, owner: str, new: bool, inputs: dict[str, Any],
                      reservation: Reservation, emit: Emit) -> None:
    """Run one chat turn for ``session_id``, emitting token, answer and done (or error)."""
    from xlrag.agents.chat import achat_turn

    async def turn() -> ChatResponse:
        async with chat_turn(server, session_id, owner, new, reservation):
            final = await _tokens(emit, achat_turn(server.chat, inputs, server.sessions.config(session_id)), "chat")
            response = chat_response(session_id, final)
            await server.sessions.compact(session_id)
        return response

    await _answered(emit, turn, session_id, "chat stream", server.public)


async def ask_events(server: Any, inputs: dict[str, Any], reservation: Reservation, emit: Emit) -> None:
    """Answer one question with the agent, emitting token, answer and done (or error)."""
    from xlrag.agents.chat import aagent_run

    async def run() -> AskResponse:
        async with server.limiter.slot(reservation):
            return ask_response(await _tokens(emit, aagent_run(server.agent, inputs), "agent"))

    await _answered(emit, run, None, "ask stream", server.public)
