"""An on-disk LLM call cache for experiments: SQLite, one row per (messages, model settings).

It plugs into LangChain's own cache hook (``BaseChatModel.cache``), so every call a
chain, a judge or a metric makes through ``invoke``/``ainvoke`` is looked up first. The
key is LangChain's: the exact serialised messages, and the model's identity with every
call parameter (provider, model, temperature, seed, max tokens, stop, bound options such as
a JSON schema). A rerun with the same settings therefore makes no model calls at all.

Values are stored as plain JSON (text, metadata, usage), not pickles or LangChain's
serialised objects, so opening a cache file from elsewhere cannot construct arbitrary
objects. ``hits`` and ``misses`` count lookups in this process: ``misses`` is the number of
real model calls.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, Generation

from xlrag.cachedb import open_cache

__all__ = ["SQLiteLLMCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    llm TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def _key(prompt: str, llm_string: str) -> str:
    return hashlib.sha256(f"{llm_string}\x00{prompt}".encode()).hexdigest()


def _encode(gens: RETURN_VAL_TYPE) -> str:
    out = []
    for g in gens:
        if isinstance(g, ChatGeneration):
            m = g.message
            out.append({"kind": "chat", "content": m.content, "response_metadata": m.response_metadata,
                        "usage_metadata": getattr(m, "usage_metadata", None),
                        "tool_calls": getattr(m, "tool_calls", []),
                        "generation_info": g.generation_info})
        else:
            out.append({"kind": "text", "text": g.text, "generation_info": g.generation_info})
    return json.dumps(out, ensure_ascii=False, default=str)


def _decode(value: str) -> list[Generation]:
    gens: list[Generation] = []
    for item in json.loads(value):
        if item["kind"] == "chat":
            msg = AIMessage(content=item["content"], response_metadata=item.get("response_metadata") or {},
                            usage_metadata=item.get("usage_metadata"), tool_calls=item.get("tool_calls") or [])
            gens.append(ChatGeneration(message=msg, generation_info=item.get("generation_info")))
        else:
            gens.append(Generation(text=item["text"], generation_info=item.get("generation_info")))
    return gens


class SQLiteLLMCache(BaseCache):
    """LangChain cache in one SQLite file; safe across threads and processes (WAL)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_cache(self.path, "the LLM reply cache", "PRAGMA journal_mode=WAL", _SCHEMA, timeout=60,
                              isolation_level=None)
        self.hits = 0
        self.misses = 0

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key = ?", (_key(prompt, llm_string),)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return _decode(row[0])

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        value = _encode(return_val)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls (key, llm, value, created) VALUES (?, ?, ?, ?)",
                             (_key(prompt, llm_string), llm_string[:2000], value, time.time()))

    def clear(self, **kwargs: Any) -> None:
        with self._lock:
            self._db.execute("DELETE FROM calls")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
