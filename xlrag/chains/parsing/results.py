"""Result models of the reply parsers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class MCParse(BaseModel):
    """Outcome of reading a multiple-choice reply."""

    index: int | None = None
    option: str | None = None
    status: Literal["ok", "unparseable", "ambiguous"]
    # How the choice was recognised: "header-letter", "header-name", "header-alias",
    # "letter", "name" or "alias". None unless status == "ok".
    method: str | None = None
    reason: str | None = None


class CitationParse(BaseModel):
    """Outcome of reading a reply in the Cited Documents / Answer / Explanation format.

    `cited` and `inline` keep out-of-range numbers (they are also listed in `invalid`) so that
    citation metrics can penalise them instead of silently dropping them.
    """

    cited: list[int] = Field(default_factory=list)
    inline: list[int] = Field(default_factory=list)
    answer: str | None = None
    explanation: str | None = None
    invalid: list[int] = Field(default_factory=list)
    truncated: bool = False  # the reply reads as cut off anywhere (its last section unfinished)
    answer_cut: bool = False  # the reply ends inside the answer line, unfinished ("<do", "Police 999,")
    missing: list[str] = Field(default_factory=list)
    status: Literal["ok", "partial", "unparseable"]
