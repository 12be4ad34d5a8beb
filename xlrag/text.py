"""Small text helpers shared by the prompt library, the chains and the translator."""

from __future__ import annotations

__all__ = ["first_line"]


def first_line(text: str, strip: str = "") -> str:
    """The first non-empty line of ``text``, stripped of white space and ``strip`` characters."""
    for line in text.splitlines():
        line = line.strip().strip(strip).strip() if strip else line.strip()
        if line:
            return line
    return ""
