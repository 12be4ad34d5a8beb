"""Graceful shutdown that keeps its promise: running generations finish, nothing is cut silently.

On SIGTERM (or the first Ctrl-C) :meth:`Drain.begin` starts the grace period:

* no new generation starts: a request that would queue, or was queued, gets 503
  ``shutting_down``, and ``/v1/health`` answers 503 so a load balancer stops routing here;
* running generations go on until the deadline (``grace_seconds`` after the signal, less
  :data:`MARGIN` for the last events to reach the client);
* at the deadline a stream still running gets a typed ``error`` event (``shutting_down``)
  before it closes, and a plain request a 503 of the same type.

uvicorn's own shutdown timeout is the grace plus :data:`CLOSE_SECONDS`: every stream has been told
and let go at the deadline, and a machine too busy to close its connections within :data:`MARGIN`
still gets time before uvicorn cancels them (a cancelled stream is a traceback in the log, and
its client may miss the closing frame). The process is gone at most ``grace + CLOSE_SECONDS``
after the signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from xlrag.server.errors import ApiError, error_payload

__all__ = ["CLOSE_SECONDS", "DEFAULT_GRACE_SECONDS", "MARGIN", "SHUTTING_DOWN", "Drain"]

T = TypeVar("T")

#: The default grace: longer than the longest answer measured with the default local model on
#: two CPU cores (40-230 s a chat turn, issue #23), so SIGTERM never cuts a running answer.
DEFAULT_GRACE_SECONDS = 300.0
#: Seconds before the end of the grace when streams are told and closed, so that the error
#: event reaches the client before uvicorn closes the connection.
MARGIN = 2.0
#: Seconds uvicorn waits after the grace before it cancels what is still open. Under load (a
#: full test run on 2 cores) closing a cut stream took longer than MARGIN alone.
CLOSE_SECONDS = 5.0
SHUTTING_DOWN = "shutting_down"


class Drain:
    """The server's shutdown state; :meth:`bind` it to the serving event loop at start-up."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started: asyncio.Event | None = None
        self.deadline: float | None = None  # loop.time() at which running work is cut
        self.grace: float | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._started = loop, asyncio.Event()

    @property
    def draining(self) -> bool:
        return self.deadline is not None

    def begin(self, grace: float) -> None:
        """Start the grace period. Safe from a signal handler: the event loop is woken through
        ``call_soon_threadsafe``."""
        if self._loop is None or self._started is None or self.draining:
            return
        self.grace = grace
        self.deadline = self._loop.time() + max(0.0, grace - MARGIN)
        self._loop.call_soon_threadsafe(self._started.set)

    def remaining(self) -> float | None:
        """Seconds left before the cut (None: not draining)."""
        if self.deadline is None or self._loop is None:
            return None
        return self.deadline - self._loop.time()

    async def started(self) -> None:
        """Returns once the grace period has begun."""
        if self._started is None:
            await asyncio.Event().wait()  # never: an unbound drain never begins
            return
        await self._started.wait()

    def refusal(self) -> ApiError:
        """What a request that would start a generation gets once the drain has begun."""
        return ApiError(503, SHUTTING_DOWN, "the server is shutting down and starts no new answers; retry "
                        "against another instance, or once it is back", headers={"Retry-After": "5"})

    def cut(self) -> dict[str, Any]:
        """The error payload of work still running at the deadline."""
        return error_payload(SHUTTING_DOWN, f"the server is shutting down: this answer was still running when "
                                            f"its grace period ({self.grace:g} s) ended; ask again")

    async def bounded(self, work: Awaitable[T]) -> T:
        """``work``'s result; if the drain begins and its deadline passes first, ``work`` is
        cancelled and the request gets a 503 ``shutting_down``."""
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self.started())
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                left = self.remaining() or 0.0
                done, _ = await asyncio.wait({task}, timeout=max(0.0, left))
                if task not in done:
                    raise ApiError(503, SHUTTING_DOWN, self.cut()["error"]["message"])
            return task.result()
        finally:
            for t in (task, watcher):
                if not t.done():
                    t.cancel()
