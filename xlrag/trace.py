"""What the agent did for one answer: returned with every answer, shown by ``/trace``.

A record with no behaviour, so it stands low: the agent writes it, and the perspectives view
and the server's models read it without standing on the agent."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from xlrag.checks.substance import SubstanceCheck

__all__ = ["CHECKS", "CheckResult", "Repair", "RepairStep", "Spent", "Timing", "ToolStep", "Trace"]

FormCheck = Literal["language", "citations", "attribution"]
Check = FormCheck | SubstanceCheck
CHECKS: tuple[str, ...] = (*get_args(FormCheck), *get_args(SubstanceCheck))


class Repair(StrEnum):
    """The repairs, in the order the agent tries them (see :func:`xlrag.agents.repair.plan_repair`)."""

    EXTRACT = "extract"
    QUOTE = "quote"
    REGENERATE_LANGUAGE = "regenerate_language"
    TRANSLATE = "translate"
    RECITE = "recite"
    POST_HOC = "post_hoc"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CheckResult(_Frozen):
    check: Check
    passed: bool
    detail: str
    attempt: int = Field(description="0: the first answer; n: after the n-th repair")


class RepairStep(_Frozen):
    repair: Repair
    attempt: int
    detail: str
    seconds: float


class Timing(_Frozen):
    step: str
    seconds: float
    tokens: int | None = Field(None, description="tokens the step's LLM calls read and wrote, where they report it")


class ToolStep(_Frozen):
    """One tool call of the tool-calling agent."""

    name: str
    args: dict
    result: str = Field(description="what the tool gave back, in short")


class Spent(_Frozen):
    """What the checks and repairs after the first answer cost, against the agent's budget
    (``agent.budget_seconds``, ``agent.budget_tokens``)."""

    seconds: float
    tokens: int
    budget_seconds: float | None
    budget_tokens: int | None
    exhausted: str | None = Field(None, description="what the budget stopped (a repair, a check), and why; "
                                                    "None when it was enough")


class Trace(_Frozen):
    question: str = Field(description="the question retrieved with (condensed, in a chat)")
    original_question: str | None = Field(None, description="the follow-up as typed, when it was condensed")
    lang: str = Field(description="the question's language")
    mode: str
    mode_reason: str
    retrieved_langs: dict[str, int] = Field(description="passages shown to the model, by language")
    checks: list[CheckResult]
    repairs: list[RepairStep]
    timings: list[Timing]
    unrepaired: list[str] = Field(default_factory=list, description="checks still failing after every repair")
    tool_calls: list[ToolStep] = Field(default_factory=list, description="the tool-calling agent's calls, in order")
    spent: Spent | None = Field(None, description="what the checks and repairs cost, and whether the budget ran out")
    notes: list[str] = Field(default_factory=list, description="what retrieval noted: a language code that names "
                                                             "none, detected instead; a store or channel not "
                                                             "searched")
    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.timings)
