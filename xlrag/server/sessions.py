"""Chat sessions of one server process: one turn at a time per session, and bounded memory.

The chat graph keeps each session's turns in a LangGraph checkpointer (here in memory,
restricted to xlrag's own types). Left alone, that store grows with every step of every
turn of every session, so after each turn the session is *compacted* to one checkpoint
holding just its turns, and past ``keep`` sessions the least recently used is dropped.
Sessions end with the process.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Sessions", "memory_checkpointer"]


def memory_checkpointer() -> Any:
    """An in-memory checkpointer that rebuilds xlrag's own types and nothing else."""
    from langgraph.checkpoint.memory import InMemorySaver

    from xlrag.agents.chat import strict_serde

    return InMemorySaver(serde=strict_serde())


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting for the lock: such a session is never dropped


class Sessions:
    def __init__(self, graph: Any, saver: Any, keep: int):
        self.graph, self.saver, self.keep = graph, saver, keep
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    @staticmethod
    def config(session_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": session_id}}

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def turn(self, session_id: str) -> AsyncIterator[None]:
        """Hold ``session_id`` for one turn: a second request for it waits its turn."""
        entry = self._entries.get(session_id)
        if entry is None:
            entry = self._entries[session_id] = _Entry()
        self._entries.move_to_end(session_id)
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
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

    async def delete(self, session_id: str) -> bool:
        entry = self._entries.get(session_id)
        if entry is None:
            return False
        async with entry.lock:
            await self.saver.adelete_thread(session_id)
        if entry.users == 0:
            self._entries.pop(session_id, None)
        return True

    async def _evict(self) -> None:
        idle = [s for s, e in self._entries.items() if e.users == 0]  # oldest first
        for session_id in idle[: max(0, len(self._entries) - self.keep)]:
            del self._entries[session_id]
            await self.saver.adelete_thread(session_id)
