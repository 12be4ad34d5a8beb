"""Small text helpers shared by the prompt library, the chains and the translator."""

from __future__ import annotations

__all__ = ["ECHO_LIMIT", "capped", "first_line", "strip_controls"]

# What an error message echoes of a user's input, at most: a 60 KB language code or a 100 KB
# XLRAG_* value is named by its start, not printed whole.
ECHO_LIMIT = 60


def first_line(text: str, strip: str = "") -> str:
    """The first non-empty line of ``text``, stripped of white space and ``strip`` characters."""
    for line in text.splitlines():
        line = line.strip().strip(strip).strip() if strip else line.strip()
        if line:
            return line
    return ""


def capped(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` as an error message echoes it: at most ``limit`` characters, cut with an
    ellipsis (its length said) when longer."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit])[: limit - 1] + f"… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# C0 and C1 control characters but tab and newline: corpus or model text must not move the
# cursor, clear the screen or open an escape sequence on a terminal, nor carry them into a page
_CONTROLS = dict.fromkeys([*(c for c in range(0x20) if c not in (0x09, 0x0A)), 0x7F, *range(0x80, 0xA0)])


def strip_controls(text: str) -> str:
    """``text`` without control characters (tab and newline kept): what every rendering of
    corpus or model text for a terminal or a page shows."""
    return text.translate(_CONTROLS)
