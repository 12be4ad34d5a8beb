"""Chat sessions of one server process: issued by the server, owned by a key, one turn at a time.

What a session guarantees (docs/how-to/server.md says the same to users):

* its id is issued by the server (:meth:`Sessions.new_id`, 128 random bits): a client never
  names a session into being; an id the server did not issue, or no longer holds, is a 404;
* it belongs to the key that made it: with another key it is a 404 too, as if it did not exist;
* its turns run one at a time, in the order they came;
* it exists once a turn of it has run to the end: a request refused (queue full, shutting
  down), timed out in the queue or failed creates no session and evicts none;
* it lasts until it is deleted, the process stops, or it is the least recently used of more
  than ``keep`` sessions (then it is dropped; a session with a turn running or waiting never is).

The chat graph keeps each session's turns in a LangGraph checkpointer (here in memory,
restricted to xlrag's own types). Left alone, that store grows with every step of every turn
of every session, so after each turn the session is *compacted* to one checkpoint holding just
its turns.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from xlrag.server.errors import ApiError
from xlrag.text import capped

__all__ = ["Sessions", "memory_checkpointer"]


def memory_checkpointer() -> Any:
    """An in-memory checkpointer that rebuilds xlrag's own types and nothing else."""
    from langgraph.checkpoint.memory import InMemorySaver

    from xlrag.agents.chat import strict_serde

    return InMemorySaver(serde=strict_serde())


@dataclass
class _Entry:
    owner: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting for the lock: such a session is never dropped
    live: bool = False  # a turn of it has run to the end: only then is it a session
    gone: bool = False  # deleted or never made: whoever waited for its lock finds no session


class Sessions:
    def __init__(self, graph: Any, saver: Any, keep: int):
        self.graph, self.saver, self.keep = graph, saver, keep
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @staticmethod
    def config(session_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": session_id}}

    @staticmethod
    def new_id() -> str:
        """A fresh session id: unguessable, so holding it is what reaching the session takes
        (besides the key)."""
        return secrets.token_hex(16)

    def __contains__(self, session_id: str) -> bool:
        entry = self._entries.get(session_id)
        return entry is not None and entry.live

    def __len__(self) -> int:
        return sum(1 for e in self._entries.values() if e.live)

    def _unknown(self, session_id: str) -> ApiError:
        return ApiError(404, "unknown_session", f"no session {capped(session_id, 40)} on this server: sessions are "
                        "issued by the server (send no session_id to start one; its id comes back in the reply), "
                        "belong to the key that made them, live in the server process that made them (one of "
                        "serve --workers N), and end when it stops or drops the least recently used")

    def _entry(self, session_id: str, owner: str) -> _Entry:
        entry = self._entries.get(session_id)
        # another key's session is answered as no session: its existence is not told either
        if entry is None or entry.gone or entry.owner != owner:
            raise self._unknown(session_id)
        return entry

    def check(self, session_id: str, owner: str) -> None:
        """404 now unless ``session_id`` is a session of ``owner``'s (or the first turn of one is
        running): a stream is refused before its 200, not told after."""
        self._entry(session_id, owner)

    @asynccontextmanager
    async def turn(self, session_id: str, owner: str, *, new: bool = False) -> AsyncIterator[None]:
        """Hold ``session_id`` for one turn: a second request for it waits its turn. ``new``: the
        first turn of a session the server just issued; it becomes a session only if the turn
        ends without an error, and only then may it push the least recently used one out."""
        if new:
            if session_id in self._entries:
                raise ValueError(f"session id {session_id!r} is already in use")
            entry = self._entries[session_id] = _Entry(owner)
        else:
            entry = self._entry(session_id, owner)
            self._entries.move_to_end(session_id)
        entry.users += 1
        ran = False
        try:
            async with entry.lock:
                if entry.gone:  # deleted, or its first turn failed, while this one waited
                    raise self._unknown(session_id)
                yield
                ran = True
        finally:
            entry.users -= 1
            held = self._entries.get(session_id) is entry
            if ran and not entry.live and held:
                entry.live = True
                self._entries.move_to_end(session_id)
            elif not entry.live and not entry.gone:
                # a first turn that never ran to the end leaves nothing behind: no session (a
                # follow-up already waiting for it gets the 404), and no partial checkpoint
                entry.gone = True
                if held:
                    del self._entries[session_id]
                await self.saver.adelete_thread(session_id)
            if ran:
                await self._evict()

    async def compact(self, session_id: str) -> int:
        """Rewrite the session as one checkpoint of its turns; returns how many it keeps."""
        cfg = self.config(session_id)
        snapshot = await self.graph.aget_state(cfg)
        turns = list(snapshot.values.get("turns") or [])
        await self.saver.adelete_thread(session_id)
        if turns:
            # as if the chat's last node had written them: the next turn starts from START
            await self.graph.aupdate_state(cfg, {"turns": turns}, as_node="remember")
        return len(turns)

    async def delete(self, session_id: str, owner: str) -> None:
        """Forget ``session_id`` (404 unless it is ``owner``'s), once a turn running in it ends."""
        entry = self._entry(session_id, owner)
        async with entry.lock:
            if entry.gone:
                raise self._unknown(session_id)
            entry.gone = True
            self._entries.pop(session_id, None)
            await self.saver.adelete_thread(session_id)

    async def _evict(self) -> None:
        idle = [s for s, e in self._entries.items() if e.live and e.users == 0]  # oldest first
        for session_id in idle[: max(0, len(self) - self.keep)]:
            entry = self._entries.pop(session_id)
            entry.gone = True
            await self.saver.adelete_thread(session_id)
