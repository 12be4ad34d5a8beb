"""A panel of LLM judges with a majority vote (the XRAG protocol).

Each judge sees the question, the gold answer and the response, in the question's
language (the ``judge`` prompt role), writes a one-clause justification and then its
verdict as JSON. Providers that can hold a reply to a JSON schema are asked to (the
provider's profile says how: ``response_format`` for OpenAI-compatible servers, a
grammar for llama.cpp); the reply is parsed strictly either way. A reply that does not
parse is an ``invalid`` vote with its raw text: it is kept, never dropped, never guessed.

A panel may also hold the reference-based lexical judge (:mod:`xlrag.judges.lexical`),
which calls no model: ``{kind: lexical}`` beside the LLM judges' ``{provider: ...}``.
:func:`default_panel` is the offline panel the calibration chose
(:mod:`xlrag.evals.calibration`, ``benchmarks/results/judges.json``).

The panel's verdict is the majority of the valid votes; a tie is settled by the
configured rule. A response in the wrong language is incorrect whatever the judges say
(XRAG); :meth:`PanelVerdict.final` applies that, and reports keep both figures.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from xlrag.chains.profiles import structured_runnable
from xlrag.checks.attribution import _SENTENCE_END
from xlrag.checks.structured import message_text, parse_verdict
from xlrag.config import LLMConfig
from xlrag.judges.lexical import LEXICAL_KIND, LexicalJudge, LexicalJudgeConfig
from xlrag.prompts import PromptLibrary
from xlrag.steps import Call, Steps, Together, arun, run

__all__ = [
    "VERDICTS",
    "JudgeConfig",
    "JudgePanel",
    "JudgeReply",
    "JudgeVote",
    "PanelConfig",
    "PanelVerdict",
    "default_panel",
    "judge_reply_schema",
    "model_family",
    "parse_judge_reply",
]

Verdict = Literal["correct", "incorrect"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
Vote = Literal["correct", "incorrect", "invalid"]
TieBreak = Literal["incorrect", "correct", "first"]


class JudgeReply(BaseModel):
    """What a judge must write: the JSON schema handed to constrained decoders."""

    model_config = ConfigDict(extra="forbid")

    # justification first: a model that writes its reasons before the verdict judges better,
    # and constrained decoders emit properties in schema order. No maxLength: llama.cpp's
    # grammar for it is slow (3x per call on gemma-3-270m); see judge_reply_schema.
    justification: str
    verdict: Verdict


# One clause, held by the decoder: no sentence end before the last character (as the
# attribution check's justification) and no comma or semicolon in any script either. With
# the sentence bound alone Qwen2.5-Coder-1.5B still looped "..., وهي معلومات الإجابة، وهي ..."
# until max_tokens on 1 of 20 calibration items (0 of 20 with the clause bound, and 30%
# faster), and the 0.5B model "SI 厘米/秒²，SI 厘米/秒²是 ..." (hence the full-width comma).
# maxLength would bound it too, but llama.cpp's grammar for it is slow (over 3x per call).
_CLAUSE_BREAKS = ",，،、;；؛"
_ONE_CLAUSE = rf'^[^{_SENTENCE_END}{_CLAUSE_BREAKS}"\\\n\r\t]*[{_SENTENCE_END}]?$'


def judge_reply_schema() -> dict[str, Any]:
    """The JSON schema a constrained decoder holds a judge to: :class:`JudgeReply` with a
    justification of one clause. Without a bound the local judges ran on until max_tokens
    cut the reply (39 of 600 votes with no JSON at max_tokens 96); a character class costs
    llama.cpp's grammar nothing. Parsing stays lax: other providers are not held."""
    schema = JudgeReply.model_json_schema()
    schema["properties"]["justification"]["pattern"] = _ONE_CLAUSE
    return schema


class JudgeConfig(LLMConfig):
    """One LLM judge: any provider from the registry, with an optional display name."""

    kind: Literal["llm"] = Field("llm", description="an LLM judge (the default; lexical: no model)")
    name: str | None = Field(None, description="label in reports; default provider:model:seed")

    @property
    def label(self) -> str:
        return self.name or f"{self.provider}:{self.model or 'default'}:seed{self.seed}"

    def llm(self) -> LLMConfig:
        """The model settings alone."""
        return LLMConfig(**self.model_dump(exclude={"name", "kind"}))


def _judge_kind(value: Any) -> str:
    # a judge without `kind` is an LLM judge, as every panel was before the lexical one
    kind = value.get("kind", "llm") if isinstance(value, dict) else getattr(value, "kind", "llm")
    return kind if isinstance(kind, str) else "llm"


AnyJudge = Annotated[
    Annotated[JudgeConfig, Tag("llm")] | Annotated[LexicalJudgeConfig, Tag(LEXICAL_KIND)],
    Discriminator(_judge_kind),
]


class PanelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judges: list[AnyJudge] = Field(min_length=1)
    tie_break: TieBreak = Field(
        "incorrect", description="a tie is incorrect, correct, or the first valid judge's vote")

    @model_validator(mode="after")
    def _unique_labels(self) -> PanelConfig:
        labels = [j.label for j in self.judges]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"judges {dupes} are configured twice; give each a different seed, "
                             f"temperature or name so that their votes can be told apart")
        return self

    @property
    def labels(self) -> list[str]:
        return [j.label for j in self.judges]

    @property
    def llm_judges(self) -> list[JudgeConfig]:
        """The judges that call a model (the lexical judge does not)."""
        return [j for j in self.judges if isinstance(j, JudgeConfig)]


def default_panel() -> PanelConfig:
    """The offline panel the calibration chose (``xlrag eval calibrate``; the measurement and
    the reason are in benchmarks/results/judges.json, and a test holds the two equal)."""
    return PanelConfig.model_validate(_DEFAULT_PANEL)


# benchmarks/results/judges.json, "chosen": the lexical judge alone. On 376 items of known
# truth in 6 languages it was right on 0.960 (0.93 to 0.99 per language), missing mostly
# correct answers in another script; every local LLM judge was near chance (Qwen2.5-Coder-1.5B
# 0.54, kappa 0.19: it calls the echoed question correct), and each panel adding one scored lower.
_DEFAULT_PANEL: dict[str, Any] = {"judges": [{"kind": LEXICAL_KIND}], "tie_break": "incorrect"}


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
    """The judge's reply as :class:`JudgeReply`, or ``(None, reason)``
    (see :func:`~xlrag.checks.structured.parse_verdict`)."""
    return parse_verdict(raw, JudgeReply, "verdict")


def majority(votes: Sequence[JudgeVote], tie_break: TieBreak) -> tuple[Vote, bool]:
    valid = [v.verdict for v in votes if v.verdict != "invalid"]
    if not valid:
        return "invalid", False
    counts = Counter(valid)
    top = max(counts.values())
    leaders = [v for v in VERDICTS if counts[v] == top]
    if len(leaders) == 1:
        return leaders[0], False
    return (valid[0] if tie_break == "first" else tie_break), True


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
    """N judges and the vote. ``notes`` says what a reader of the scores must know.

    ``llms``: the models of the LLM judges, in their order (the lexical judge has none).
    """

    def __init__(self, config: PanelConfig, prompts: PromptLibrary | None = None,
                 generator: LLMConfig | None = None, llms: Sequence[Any] | None = None):
        self.config = config
        self.prompts = prompts or PromptLibrary()
        if llms is not None and len(llms) != len(config.llm_judges):
            raise ValueError(f"{len(llms)} models for {len(config.llm_judges)} LLM judges")
        self._llms = list(llms) if llms is not None else None
        self._lexical = {j.label: LexicalJudge(j) for j in config.judges if isinstance(j, LexicalJudgeConfig)}
        self.notes = self._notes(generator)

    def _notes(self, generator: LLMConfig | None) -> list[str]:
        notes = []
        llm_judges = self.config.llm_judges
        models = {(j.provider, j.model, str(j.model_path)) for j in llm_judges}
        if len(models) == 1 and len(llm_judges) > 1:
            j = llm_judges[0]
            notes.append(f"all {len(llm_judges)} LLM judges are one model ({j.provider}:{j.model or 'default'}) "
                         f"under different seeds, temperatures or names: their votes are not independent, "
                         f"and agreement between them overstates reliability")
        if generator is not None:
            fam = model_family(generator)
            same = [j.label for j in llm_judges if fam and model_family(j) == fam]
            if same:
                notes.append(f"judges {same} are from the generator's model family ({fam}): "
                             f"LLM judges tend to prefer their own family's answers (self-preference)")
        return notes

    @property
    def labels(self) -> list[str]:
        return self.config.labels

    def models(self) -> list[Any]:
        """The LLM judges' models, built on first use (the lexical judge needs none)."""
        if self._llms is None:
            from xlrag.chains.llms import build_llm

            self._llms = [build_llm(j.llm()) for j in self.config.llm_judges]
        return self._llms

    def messages(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> list[tuple[str, str]]:
        golds = [gold] if isinstance(gold, str) else list(gold)
        text = self.prompts.render("judge", lang, question=question.strip(),
                                   gold=" | ".join(g.strip() for g in golds), response=response.strip())
        return [("user", text)]

    def _runnable(self, llm: Any) -> Any:
        # judges are tagged so that streaming surfaces never show their tokens
        return structured_runnable(llm, judge_reply_schema(), "verdict", ["xlrag:judge", "nostream"])

    def _vote(self, label: str, raw: str | None, error: str | None) -> JudgeVote:
        if error is not None:
            return JudgeVote(judge=label, verdict="invalid", raw=raw or "", reason=error)
        reply, reason = parse_judge_reply(raw or "")
        if reply is None:
            return JudgeVote(judge=label, verdict="invalid", raw=raw or "", reason=reason)
        return JudgeVote(judge=label, verdict=reply.verdict, justification=reply.justification, raw=raw or "")

    def _lexical_vote(self, label: str, question: str, gold: str | Sequence[str], response: str,
                      lang: str) -> JudgeVote:
        golds = [gold] if isinstance(gold, str) else list(gold)
        correct, why = self._lexical[label].vote(question, golds, response, lang)
        return JudgeVote(judge=label, verdict="correct" if correct else "incorrect", justification=why)

    def _verdict(self, votes: list[JudgeVote]) -> PanelVerdict:
        verdict, tie = majority(votes, self.config.tie_break)
        valid = {v.verdict for v in votes if v.verdict != "invalid"}
        return PanelVerdict(verdict=verdict, votes=votes, tie=tie, disagreement=len(valid) > 1,
                            counts=dict(Counter(v.verdict for v in votes)))

    def _members(self) -> list[tuple[str, Any]]:
        """``(label, model or None)`` per judge, in the panel's order (None: the lexical judge)."""
        models = iter(self.models() if self.config.llm_judges else [])
        return [(j.label, None if j.label in self._lexical else next(models)) for j in self.config.judges]

    def judge(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> PanelVerdict:
        return run(self._judge(question, gold, response, lang))

    async def ajudge(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> PanelVerdict:
        """:meth:`judge` without blocking the event loop; the judges vote concurrently."""
        return await arun(self._judge(question, gold, response, lang))

    def _judge(self, question: str, gold: str | Sequence[str], response: str, lang: str) -> Steps[PanelVerdict]:
        msgs = self.messages(question, gold, response, lang)
        votes = yield Together([self._vote_of(label, llm, msgs, question, gold, response, lang)
                                for label, llm in self._members()])
        return self._verdict(votes)

    def _vote_of(self, label: str, llm: Any, msgs: Any, question: str, gold: str | Sequence[str], response: str,
                 lang: str) -> Steps[JudgeVote]:
        if llm is None:
            return self._lexical_vote(label, question, gold, response, lang)
        try:
            runnable = self._runnable(llm)
            reply = yield Call(runnable.invoke, (msgs,), runnable.ainvoke)
        except Exception as e:  # a failed judge is an invalid vote with its reason, not a crash
            return self._vote(label, "", f"{type(e).__name__}: {e}")
        return self._vote(label, message_text(reply), None)
