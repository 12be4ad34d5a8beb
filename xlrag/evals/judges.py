"""A panel of LLM judges with a majority vote (the XRAG protocol).

Each judge sees the question, the gold answer and the response, in the question's
language (the ``judge`` prompt role), writes a one-sentence justification and then its
verdict as JSON. Providers that can hold a reply to a JSON schema are asked to (the
provider's profile says how: ``response_format`` for OpenAI-compatible servers, a
grammar for llama.cpp); the reply is parsed strictly either way. A reply that does not
parse is an ``invalid`` vote with its raw text: it is kept, never dropped, never guessed.

The panel's verdict is the majority of the valid votes; a tie is settled by the
configured rule. A response in the wrong language is incorrect whatever the judges say
(XRAG); :meth:`PanelVerdict.final` applies that, and reports keep both figures.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xlrag.config import LLMConfig
from xlrag.checks.structured import message_text, parse_verdict, structured_runnable
from xlrag.prompts import PromptLibrary

__all__ = [
    "VERDICTS",
    "JudgeConfig",
    "JudgePanel",
    "JudgeReply",
    "JudgeVote",
    "PanelConfig",
    "PanelVerdict",
    "model_family",
    "parse_judge_reply",
]

Verdict = Literal["correct", "incorrect"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
Vote = Literal["correct", "incorrect", "invalid"]


class JudgeReply(BaseModel):
    """What a judge must write: the JSON schema handed to constrained decoders."""

    model_config = ConfigDict(extra="forbid")

    # justification first: a model that writes its reasons before the verdict judges better,
    # and constrained decoders emit properties in schema order. No maxLength: llama.cpp's
    # grammar for it is slow (3x per call on gemma-3-270m); max_tokens bounds the reply.
    justification: str
    verdict: Verdict


class JudgeConfig(LLMConfig):
    """One judge: any provider from the registry, with an optional display name."""

    name: str | None = Field(None, description="label in reports; default provider:model:seed")

    @property
    def label(self) -> str:
        return self.name or f"{self.provider}:{self.model or 'default'}:seed{self.seed}"


class PanelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judges: list[JudgeConfig] = Field(min_length=1)
    tie_break: Literal["incorrect", "correct", "first"] = Field(
        "incorrect", description="a tie is incorrect, correct, or the first valid judge's vote")

    @model_validator(mode="after")
    def _unique_labels(self) -> PanelConfig:
        labels = [j.label for j in self.judges]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"judges {dupes} are configured twice; give each a different seed, "
                             f"temperature or name so that their votes can be told apart")
        return self


class JudgeVote(BaseModel):
    judge: str
    verdict: Vote
    justification: str | None = None
    raw: str = ""
    reason: str | None = Field(None, description="why the vote is invalid")


class PanelVerdict(BaseModel):
    verdict: Vote = Field(description="majority of valid votes; invalid when there is none")
    votes: list[JudgeVote]
    counts: dict[str, int]
    tie: bool = False
    disagreement: bool = Field(False, description="the valid votes were not unanimous")

    def final(self, language_correct: bool | None) -> Vote:
        """The verdict with XRAG's rule: a reply in the wrong language is incorrect.
        ``None`` (a reply with no language, "308") leaves the verdict as it is."""
        if language_correct is False:
            return "incorrect"
        return self.verdict


def parse_judge_reply(raw: str) -> tuple[JudgeReply | None, str | None]:
    """The judge's reply as :class:`JudgeReply`, or ``(None, reason)`` (see :func:`~xlrag.checks.structured.parse_verdict`)."""
    return parse_verdict(raw, JudgeReply, "verdict")


def majority(votes: Sequence[JudgeVote], tie_break: str) -> tuple[Vote, bool]:
    valid = [v.verdict for v in votes if v.verdict != "invalid"]
    if not valid:
        return "invalid", False
    counts = Counter(valid)
    top = max(counts.values())
    leaders = [v for v in VERDICTS if counts[v] == top]
    if len(leaders) == 1:
        return leaders[0], False  # type: ignore[return-value]
    return (valid[0] if tie_break == "first" else tie_break), True  # type: ignore[return-value]


_FAMILIES = (
    ("qwen", "qwen"), ("gemma", "google"), ("gemini", "google"), ("llama", "llama"),
    ("mistral", "mistral"), ("mixtral", "mistral"), ("ministral", "mistral"), ("codestral", "mistral"),
    ("claude", "anthropic"), ("command", "cohere"), ("aya", "cohere"), ("gpt", "openai"),
    ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("phi", "phi"), ("deepseek", "deepseek"),
)


def model_family(cfg: LLMConfig) -> str | None:
    """The model family of ``cfg`` (qwen, google, openai, ...), for the self-preference check."""
    name = cfg.model
    if cfg.model_path is not None:
        name = cfg.model_path.name
    if name is None:
        if cfg.provider == "local":
            from xlrag.chains.local.catalogue import DEFAULT_ENTRY

            name = DEFAULT_ENTRY
        else:
            from xlrag.chains.llms import DEFAULT_MODELS

            name = DEFAULT_MODELS.get(cfg.provider)
    low = (name or "").lower()
    for key, family in _FAMILIES:
        if re.search(rf"(?<![a-z]){key}", low):
            return family
    return None


class JudgePanel:
    """N judges and the vote. ``notes`` says what a reader of the scores must know."""

    def __init__(self, config: PanelConfig, prompts: PromptLibrary | None = None,
                 generator: LLMConfig | None = None, llms: Sequence[Any] | None = None):
        self.config = config
        self.prompts = prompts or PromptLibrary()
        if llms is not None and len(llms) != len(config.judges):
            raise ValueError(f"{len(llms)} models for {len(config.judges)} judges")
        self._llms = list(llms) if llms is not None else None
        self.notes = self._notes(generator)

    def _notes(self, generator: LLMConfig | None) -> list[str]:
        notes = []
        models = {(j.provider, j.model, str(j.model_path)) for j in self.config.judges}
        if len(models) == 1 and len(self.config.judges) > 1:
            j = self.config.judges[0]
            notes.append(f"all {len(self.config.judges)} judges are one model ({j.provider}:{j.model or 'default'}) "
                         f"under different seeds, temperatures or names: their votes are not independent, "
                         f"and agreement between them overstates reliability")
        if generator is not None:
            fam = model_family(generator)
            same = [j.label for j in self.config.judges if fam and model_family(j) == fam]
            if same:
                notes.append(f"judges {same} are from the generator's model family ({fam}): "
                             f"LLM judges tend to prefer their own family's answers (self-preference)")
        return notes

    @property
    def labels(self) -> list[str]:
        return [j.label for j in self.config.judges]

    def models(self) -> list[Any]:
        if self._llms is None:
            from xlrag.chains.llms import build_llm

            self._llms = [build_llm(LLMConfig(**j.model_dump(exclude={"name"}))) for j in self.config.judges]
        return self._llms

    def messages(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> list[tuple[str, str]]:
        golds = [gold] if isinstance(gold, str) else list(gold)
        text = self.prompts.render("judge", lang, question=question.strip(),
                                   gold=" | ".join(g.strip() for g in golds), response=response.strip())
        return [("user", text)]

    def _runnable(self, llm: Any) -> Any:
        # judges are tagged so that streaming surfaces never show their tokens
        return structured_runnable(llm, JudgeReply.model_json_schema(), "verdict", ["xlrag:judge", "nostream"])

    def _vote(self, label: str, raw: str | None, error: str | None) -> JudgeVote:
        if error is not None:
            return JudgeVote(judge=label, verdict="invalid", raw=raw or "", reason=error)
        reply, reason = parse_judge_reply(raw or "")
        if reply is None:
            return JudgeVote(judge=label, verdict="invalid", raw=raw or "", reason=reason)
        return JudgeVote(judge=label, verdict=reply.verdict, justification=reply.justification, raw=raw or "")

    def _verdict(self, votes: list[JudgeVote]) -> PanelVerdict:
        verdict, tie = majority(votes, self.config.tie_break)
        valid = {v.verdict for v in votes if v.verdict != "invalid"}
        return PanelVerdict(verdict=verdict, votes=votes, tie=tie, disagreement=len(valid) > 1,
                            counts=dict(Counter(v.verdict for v in votes)))

    def judge(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> PanelVerdict:
        msgs = self.messages(question, gold, response, lang)
        votes = []
        for label, llm in zip(self.labels, self.models(), strict=True):
            try:
                raw, error = message_text(self._runnable(llm).invoke(msgs)), None
            except Exception as e:  # a failed judge is an invalid vote with its reason, not a crash
                raw, error = "", f"{type(e).__name__}: {e}"
            votes.append(self._vote(label, raw, error))
        return self._verdict(votes)

    async def ajudge(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> PanelVerdict:
        msgs = self.messages(question, gold, response, lang)

        async def one(label: str, llm: Any) -> JudgeVote:
            try:
                return self._vote(label, message_text(await self._runnable(llm).ainvoke(msgs)), None)
            except Exception as e:
                return self._vote(label, "", f"{type(e).__name__}: {e}")

        votes = await asyncio.gather(*(one(x, m) for x, m in zip(self.labels, self.models(), strict=True)))
        return self._verdict(list(votes))

