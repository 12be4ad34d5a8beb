"""AIS attribution (XOR-AttriQA): does one passage, on its own, support the answer?

Each passage is checked separately (the ``attribution`` prompt role): the model writes a
one-sentence justification and then its verdict as JSON, ``attributable`` or
``not_attributable``. As with the judges (:mod:`xlrag.judges.panel`), providers that can hold
a reply to a JSON schema are asked to (a grammar for llama.cpp, ``response_format`` for
OpenAI-compatible servers), the reply is parsed strictly either way, and one that does not
parse is an ``invalid`` vote with its raw text and reason: kept, never guessed.

The answer is attributable when at least one passage supports it. Two settings, as in
XOR-AttriQA: ``in_language`` shows each passage in its own language with the prompt in the
question's language; ``in_english`` translates the question, the answer and the passages
into English first and uses the English prompt.

Used by the agent's verify step and by evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from xlrag.checks.structured import message_text, parse_verdict
from xlrag.errors import ConfigError, EmptyQueryError, InvalidArgumentError
from xlrag.formats import strip_markers
from xlrag.indexes.translate import Translator
from xlrag.languages import normalize_code
from xlrag.prompts import PromptLibrary
from xlrag.schema import Hit, Passage
from xlrag.steps import Call, Steps, Together, arun, run

__all__ = [
    "ATTRIBUTION_VERDICTS",
    "SETTINGS",
    "AttributionChecker",
    "AttributionReply",
    "AttributionResult",
    "PassageVote",
    "Setting",
    "any_attributable",
    "parse_attribution_reply",
    "reply_schema",
]

Setting = Literal["in_language", "in_english"]
SETTINGS: tuple[str, ...] = get_args(Setting)
AttributionVerdict = Literal["attributable", "not_attributable"]
ATTRIBUTION_VERDICTS: tuple[str, ...] = get_args(AttributionVerdict)
Vote = Literal["attributable", "not_attributable", "invalid"]

_ENGLISH = "en"
_TAGS = ["xlrag:attribution", "nostream"]  # never shown by streaming surfaces
_SENTENCE_END = ".!?。！？؟।"
# One sentence, held by the decoder: after a sentence end only the closing quote may follow
# (quotes, backslashes and control characters excluded so that the string stays plain JSON).
# Without it Qwen2.5-Coder-1.5B at temperature 0 repeats its Arabic justification until
# max_tokens and the reply holds no JSON at all. A character class costs llama.cpp's grammar
# nothing, unlike maxLength (see judges.py). Parsing stays lax: other providers are not held.
_ONE_SENTENCE = rf'^[^{_SENTENCE_END}"\\\n\r\t]*[{_SENTENCE_END}]?$'


class AttributionReply(BaseModel):
    """What the model must write: the JSON schema handed to constrained decoders."""

    model_config = ConfigDict(extra="forbid")

    # justification first, as for the judges: reasons before the verdict, in schema order
    justification: str
    verdict: AttributionVerdict


class PassageVote(BaseModel):
    """The verdict on one passage."""

    passage_id: str
    lang: str = Field(description="the passage's own language")
    verdict: Vote
    justification: str | None = None
    raw: str = ""
    reason: str | None = Field(None, description="why the vote is invalid")


class AttributionResult(BaseModel):
    """The votes on every checked passage and what they add up to."""

    question: str
    answer: str
    lang: str = Field(description="the question's language")
    setting: Setting
    prompt_lang: str = Field(description="language of the prompt the model saw")
    question_shown: str = Field(description="the question as shown to the model (translated for in_english)")
    answer_shown: str = Field(description="the answer as shown to the model, markers stripped")
    votes: list[PassageVote]
    attributable: bool | None = Field(
        description="some passage supports the answer (any_attributable); None when an invalid vote leaves it "
                    "open, or no passage was given")

    @property
    def supporting(self) -> list[str]:
        """Ids of the passages that support the answer."""
        return [v.passage_id for v in self.votes if v.verdict == "attributable"]


def any_attributable(votes: Iterable[str | None]) -> bool | None:
    """Whether some passage supports the answer, from the votes on each: True when one says
    ``attributable``, False when every one says ``not_attributable``, else None. An invalid (or
    missing) vote could have been either, so it never counts as "not"."""
    votes = list(votes)
    if "attributable" in votes:
        return True
    return False if all(v == "not_attributable" for v in votes) else None


def reply_schema() -> dict[str, Any]:
    """The JSON schema a constrained decoder holds the reply to: :class:`AttributionReply`
    with a justification of one sentence."""
    schema = AttributionReply.model_json_schema()
    schema["properties"]["justification"]["pattern"] = _ONE_SENTENCE
    return schema


def parse_attribution_reply(raw: str) -> tuple[AttributionReply | None, str | None]:
    """The reply as :class:`AttributionReply`, or ``(None, reason)``
    (see :func:`~xlrag.checks.structured.parse_verdict`)."""
    return parse_verdict(raw, AttributionReply, "attribution")


def _passages(passages: Sequence[Passage | Hit]) -> list[Passage]:
    if isinstance(passages, (str, Passage, Hit)) or not isinstance(passages, Sequence):
        raise InvalidArgumentError("passages", "a list of xlrag Passage or Hit objects", passages)
    out = []
    for p in passages:
        if isinstance(p, Hit):
            p = p.passage
        if not isinstance(p, Passage):
            raise InvalidArgumentError("each passage", "an xlrag Passage or Hit", p)
        out.append(p)
    return out


def _one_line(text: str) -> str:
    # LLMTranslator keeps the first line of the reply (base models run on after it), so a
    # passage with line breaks would lose everything after its first line.
    return " ".join(text.split())


class AttributionChecker:
    """Checks an answer against passages, one LLM call per passage.

    ``llm`` is any xlrag chat model (``build_llm``). What a check cannot make on its own
    floor is handed to it by its builder (:func:`xlrag.chains.checkers.attribution_checker`,
    which every xlrag stack uses): ``runnable``, ``llm`` held to the reply schema by its
    provider (default: ``llm`` as it is; the prompt alone asks for JSON), and ``translator``
    (any object with ``translate(text, source_lang, target_lang)``), which the ``in_english``
    setting needs.
    """

    def __init__(self, llm: Any, prompts: PromptLibrary | None = None, translator: Translator | None = None,
                 *, runnable: Any = None):
        self.llm = llm
        self.prompts = prompts or PromptLibrary()
        self._translator = translator
        self._held = runnable

    @property
    def translator(self) -> Translator:
        if self._translator is None:
            raise ConfigError("the in_english setting translates, and this AttributionChecker has no translator: "
                              "build it with xlrag.chains.checkers.attribution_checker(llm), or pass translator=")
        return self._translator

    def _runnable(self) -> Any:
        return (self._held if self._held is not None else self.llm).with_config(tags=_TAGS)

    def _inputs(self, question: str, answer: str, lang: str, setting: str) -> tuple[str, str, str]:
        if setting not in SETTINGS:
            raise InvalidArgumentError("setting", f"one of {', '.join(SETTINGS)}", setting)
        if setting == "in_english":
            _ = self.translator  # no translator is a caller's error, not one invalid vote per passage
        if not isinstance(question, str) or not question.strip():
            raise EmptyQueryError("question")
        if not isinstance(answer, str) or not answer.strip():
            raise EmptyQueryError("answer to check")
        # the model sees one passage, unnumbered: a "<doc2>" in the answer would only confuse it
        return question.strip(), strip_markers(answer), normalize_code(lang)

    def messages(self, question: str, answer: str, passage: str, prompt_lang: str) -> list[tuple[str, str]]:
        """The one user turn asking about one passage, in ``prompt_lang``."""
        text = self.prompts.render("attribution", prompt_lang, question=question, answer=answer,
                                   passage=passage.strip())
        return [("user", text)]

    @staticmethod
    def _vote(passage: Passage, raw: str, error: str | None) -> PassageVote:
        if error is None:
            reply, error = parse_attribution_reply(raw)
            if reply is not None:
                return PassageVote(passage_id=passage.id, lang=passage.lang, verdict=reply.verdict,
                                   justification=reply.justification, raw=raw)
        return PassageVote(passage_id=passage.id, lang=passage.lang, verdict="invalid", raw=raw, reason=error)

    @staticmethod
    def _result(question: str, answer: str, lang: str, setting: Setting, shown: tuple[str, str],
                votes: list[PassageVote]) -> AttributionResult:
        attributable = any_attributable(v.verdict for v in votes) if votes else None
        return AttributionResult(
            question=question, answer=answer, lang=lang, setting=setting,
            prompt_lang=_ENGLISH if setting == "in_english" else lang,
            question_shown=shown[0], answer_shown=shown[1], votes=votes, attributable=attributable)

    def check(self, question: str, answer: str, passages: Sequence[Passage | Hit], lang: str,
              setting: Setting = "in_language") -> AttributionResult:
        """Is ``answer`` (to ``question``, asked in ``lang``) supported by one of ``passages``?"""
        return run(self._check(question, answer, passages, lang, setting))

    async def acheck(self, question: str, answer: str, passages: Sequence[Passage | Hit], lang: str,
                     setting: Setting = "in_language") -> AttributionResult:
        """:meth:`check` without blocking the event loop; the passages are checked concurrently."""
        return await arun(self._check(question, answer, passages, lang, setting))

    def _translate(self, text: str, source: str) -> Call:
        # the translator contract is synchronous (any MT system fits it): on a loop, a thread
        return Call(self.translator.translate, (text, source, _ENGLISH))

    def _check(self, question: str, answer: str, passages: Sequence[Passage | Hit], lang: str,
               setting: Setting) -> Steps[AttributionResult]:
        q, a, code = self._inputs(question, answer, lang, setting)
        items = _passages(passages)
        shown, error = (q, a), None
        if setting == "in_english":
            try:
                shown = tuple((yield Together([self._translate(q, code), self._translate(a, code)])))
            except Exception as e:  # every vote is invalid with the reason, as a failed call would be
                error = f"translating the question and answer failed: {type(e).__name__}: {e}"
        votes = yield Together([self._vote_on(p, shown, code, setting, error) for p in items])
        return self._result(question, answer, code, setting, shown, votes)

    def _vote_on(self, p: Passage, shown: tuple[str, str], code: str, setting: Setting,
                 error: str | None) -> Steps[PassageVote]:
        if error is not None:
            return self._vote(p, "", error)
        try:
            text = (yield self._translate(_one_line(p.text), p.lang)) if setting == "in_english" else p.text
            messages = self.messages(*shown, text, _ENGLISH if setting == "in_english" else code)
            runnable = self._runnable()
            reply = yield Call(runnable.invoke, (messages,), runnable.ainvoke)
        except Exception as e:  # a failed call is an invalid vote with its reason, not a crash
            return self._vote(p, "", f"{type(e).__name__}: {e}")
        return self._vote(p, message_text(reply), None)
