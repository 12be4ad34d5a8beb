"""Text helpers shared by the parsers: sentence terminators, where a reply ends."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from xlrag.formats import words_pattern
from xlrag.prompts.library import label_words

# Sentence terminators. The "spaced" ones only end a sentence before whitespace (so "3.5",
# "U.S.A" and URLs survive); the others end a sentence wherever they occur because the
# scripts that use them (CJK, Arabic, Devanagari, Urdu) do not put spaces after them.
_TERM_SPACED = ".!?…"
_TERM_CLOSED = "。！？؟।॥۔"
SENTENCE_FINAL = frozenset(_TERM_SPACED + _TERM_CLOSED)
# Characters that may trail a terminator and still belong to the sentence.
_CLOSERS = "\"'”’»)]}）」』】*_"

# Prompt labels (see xlrag/prompts/*.yaml) plus common chat-template turn tokens. A line that
# starts with one of these after the reply has begun means the model is writing the next
# prompt, so parsing stops there.
# The prompt-file labels come from the prompt library itself (one owner: xlrag.formats); the
# rest are chat-template roles and spellings no shipped prompt uses but models write.
_QUESTION_LABELS = (
    words_pattern((*label_words("question_label"), *label_words("documents_label")))
    + r"|query|q|user|human|instructions?|context|input|options?|passages?|問題"
)
_STOP_LINE_RE = re.compile(
    rf"^[ \t]*(?:\*\*|__|#+[ \t]*)?(?:{_QUESTION_LABELS})[ \t]*\d*[ \t]*(?:\*\*|__)?[ \t]*[:：]",
    re.IGNORECASE | re.MULTILINE,
)
_TURN_TOKEN_RE = re.compile(
    r"<end_of_turn>|<start_of_turn>|<\|im_end\|>|<\|im_start\|>|<\|endoftext\|>|<\|eot_id\|>"
    r"|<\|end\|>|</s>|<eos>"
)


def _is_word(ch: str) -> bool:
    # Letters, digits and combining marks: Devanagari vowel signs are marks, and must not
    # count as a word boundary inside "भारतीय".
    return ch == "_" or unicodedata.category(ch)[0] in "LNM"


def _dedupe(items: Iterable[int]) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _cut_at_echo(text: str) -> tuple[str, bool]:
    """Drop everything from a chat turn token or an echoed prompt line onwards.

    A prompt label only counts once the reply has started (some base models open by echoing
    the current question, which the callers handle themselves).
    """
    cut = len(text)
    turn = _TURN_TOKEN_RE.search(text)
    if turn:
        cut = turn.start()
    first = len(text) - len(text.lstrip())
    for m in _STOP_LINE_RE.finditer(text, first + 1, cut):
        if text[first : m.start()].strip():
            cut = m.start()
            break
    return text[:cut], cut < len(text)
