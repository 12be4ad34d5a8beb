"""Replies held to a JSON schema, from any xlrag LLM, and parsed strictly.

The provider's profile says how a reply is held to a schema (``response_format`` for
OpenAI-compatible servers, a grammar for llama.cpp; nothing for the others, where the
prompt alone asks for JSON). Either way the reply is parsed strictly: a JSON object that
validates, found alone, in a code fence or after free text; never a keyword guess.

Used by the attribution check, the judge panel (:mod:`xlrag.judges.panel`) and the Ragas
adapter (:mod:`xlrag.evals.ragas_adapter`). Holding a model to a schema is the provider's
business, so it lives with the profiles (:func:`xlrag.chains.profiles.structured_runnable`):
a check is handed its runnable and only parses here (checks stand below chains).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["json_objects", "message_text", "parse_verdict"]

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def json_objects(text: str, model: type[M], what: str) -> tuple[list[M], str]:
    """Every JSON object in ``text`` that validates as ``model``, and why the last other failed.

    ``what`` names the schema in that reason ("JSON does not match the verdict schema: ...").
    The inside of an object that validated is not searched again.
    """
    candidates = [m.group(1) for m in _FENCE.finditer(text)] or [text]
    found: list[M] = []
    last_error = "no JSON object"
    decoder = json.JSONDecoder()
    for chunk in candidates:
        resume = 0
        for start in (i for i, ch in enumerate(chunk) if ch == "{"):
            if start < resume:
                continue
            try:
                obj, end = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            try:
                found.append(model.model_validate(obj))
            except ValidationError as e:
                last_error = f"JSON does not match the {what} schema: {e.errors()[0]['msg']}"
            else:
                resume = end
    return found, last_error


def message_text(message: Any) -> str:
    """The text of a chat model's reply, whatever its content shape."""
    content = getattr(message, "content", message)
    if isinstance(content, list):  # content blocks (Anthropic)
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def parse_verdict(raw: str, model: type[M], what: str) -> tuple[M | None, str | None]:
    """A verdict reply (a model with a ``verdict`` field) as ``model``, or ``(None, reason)``.

    Accepts the JSON object alone, in a code fence, or after free text; several objects that
    disagree are invalid. No keyword matching: a reply with no valid JSON is not a vote.
    """
    text = raw.strip()
    if not text:
        return None, "empty reply"
    found, last_error = json_objects(text, model, what)
    if not found:
        return None, last_error
    if len({r.verdict for r in found}) > 1:  # type: ignore[attr-defined]
        return None, "the reply holds conflicting verdicts"
    return found[-1], None

