"""The LLM-backed ``Translator`` for the ``translate`` IR mode, and whole passages line by line.

:class:`LLMTranslator` renders the localized translation prompt of the *target* language, so the
instruction is in the language the model must write, and caches every translation (queries
repeat a lot in evaluation runs). Its ``translate`` gives one line: what a search query is, and
all a base model's reply can be trusted for (it runs on past its translation).

:func:`translate_passage` translates a passage (its title line, then its text) whole, one line
at a time, and a line too long for one reply's token budget in pieces of whole sentences: a
small local model translates a line as well alone as inside the passage, and a base model could
not be cut back to the passage's end at all. What still cannot be translated whole (a reply cut
at ``max_tokens``) is kept in its own language and said so, never dropped and never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from xlrag.chains.profiles import profile_for
from xlrag.config import LLMConfig
from xlrag.errors import TranslationCutOffError
from xlrag.indexes.translate import CachedTranslator, Translator
from xlrag.languages import native_name, normalize_code
from xlrag.prompts import PromptLibrary
from xlrag.registry import register
from xlrag.text import first_line

__all__ = ["LLMTranslator", "PassageTranslation", "translate_passage"]

log = logging.getLogger(__name__)


class LLMTranslator:
    """Translates with a chat model; give ``llm`` or an ``LLMConfig`` to build one on first use."""

    def __init__(self, llm: Any = None, prompts: PromptLibrary | None = None, config: LLMConfig | None = None):
        self._llm = llm
        self._config = config
        self.prompts = prompts or PromptLibrary()

    @property
    def llm(self) -> Any:
        if self._llm is None:
            from xlrag.chains.llms import build_llm

            self._llm = build_llm(self._config or LLMConfig())
        return self._llm

    @property
    def max_tokens(self) -> int:
        """The reply's token budget: the model's ``max_tokens``, else the config's."""
        limit = getattr(self.llm, "max_tokens", None)
        return int(limit) if isinstance(limit, int) and limit > 0 else (self._config or LLMConfig()).max_tokens

    def count_tokens(self, text: str) -> int:
        """``text``'s tokens under a local model's own tokenizer; for another model, its UTF-8
        bytes over two, more than its tokens in any script (a Latin token is 4-5 bytes, a CJK
        or Thai one 3 or more): LangChain's counters for vendor models fetch a tokenizer from
        the network on first use, which an offline server must not wait for."""
        count = getattr(self.llm, "count_tokens", None)
        if callable(count):
            return int(count(text))
        return len(text.encode("utf-8")) // 2 + 1

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        src, tgt = normalize_code(source_lang), normalize_code(target_lang)
        if src == tgt:
            return text
        prompt = self.prompts.render("translation", tgt, source_language=native_name(src),
                                     target_language=native_name(tgt), text=text)
        reply = self.llm.invoke([("user", prompt)])
        content = getattr(reply, "content", reply) if not isinstance(reply, str) else reply
        # A base model runs on past its translation to max_tokens: only a reply stopped by the
        # limit before its first line ended has lost part of the translation.
        if profile_for(self.llm).cut_off(reply) and "\n" not in str(content).strip():
            raise TranslationCutOffError(text, tgt, self.max_tokens)
        # Base models keep going after the translation (a new "Question:", a second
        # translation); the first non-empty line is the translation itself, unless it only
        # announces it ("日本語訳：", "Translation:", seen from the default model on the test bed).
        out = first_line(_past_label(str(content), text), strip='"“”«»')
        if not any(ch.isalnum() for ch in out):
            # Searching with "." would retrieve noise; searching with the untranslated
            # query still works through the multilingual embedder.
            log.warning("no usable %s translation of %r from the LLM; searching with the original", tgt, text[:60])
            return text
        return out


_COLONS = (":", "：")


def _past_label(reply: str, source: str) -> str:
    """``reply`` without a first line that ends in a colon where ``source`` does not: a label
    the model put before its translation, when the translation follows it."""
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].rstrip().endswith(_COLONS) and not source.rstrip().endswith(_COLONS):
        return "\n".join(lines[1:])
    return reply


class PassageTranslation(BaseModel):
    """A passage in another language, line for line."""

    text: str = Field(description="the passage translated line by line; a piece that could not be translated "
                                  "whole stays in its own language, where it stood")
    complete: bool = Field(description="false when some of the text is left untranslated (notes say which)")
    notes: list[str] = Field(default_factory=list, description="what was left untranslated, and why")


def _budget(translator: Translator) -> tuple[Callable[[str], int], int] | None:
    """How to count a piece's tokens, and the most a piece may have, for an LLM translator
    (cached or not); None for another translator (an MT system has no reply budget to fit)."""
    inner = translator.inner if isinstance(translator, CachedTranslator) else translator
    if not isinstance(inner, LLMTranslator):
        return None
    # a translation takes up to about twice its source's tokens (TranslationCutOffError says so)
    return inner.count_tokens, max(8, inner.max_tokens // 2)


def _pieces(line: str, lang: str, fits: Callable[[str], bool]) -> list[str]:
    """``line`` as consecutive runs of whole sentences that each fit (a sentence that does not
    fit alone is a piece of its own)."""
    if fits(line):
        return [line]
    from xlrag.checks.sentences import split_sentences

    out: list[str] = []
    for sentence in split_sentences(line, lang):
        joined = f"{out[-1]} {sentence}" if out else sentence
        if out and fits(joined):
            out[-1] = joined
        else:
            out.append(sentence)
    return out or [line]


def translate_passage(translator: Translator, text: str, source_lang: str, target_lang: str) -> PassageTranslation:
    """``text`` in ``target_lang``: each line on its own (blank lines and lines without letters
    kept as they are), a line longer than one reply can hold in pieces of whole sentences. A
    piece whose reply is still cut at ``max_tokens`` stays untranslated and is noted."""
    src, tgt = normalize_code(source_lang), normalize_code(target_lang)
    if src == tgt:
        return PassageTranslation(text=text, complete=True)
    budget = _budget(translator)

    def fits(piece: str) -> bool:
        return budget is None or budget[0](piece) <= budget[1]

    lines, notes = [], []
    for n, line in enumerate(text.split("\n"), 1):
        if not any(ch.isalpha() for ch in line):
            lines.append(line)
            continue
        done = []
        for piece in _pieces(line.strip(), src, fits):
            try:
                done.append(translator.translate(piece, src, tgt))
            except TranslationCutOffError as e:
                done.append(piece)
                notes.append(f"line {n}: {e}; it is shown untranslated")
        lines.append(" ".join(done))
    return PassageTranslation(text="\n".join(lines), complete=not notes, notes=notes)


@register("translator", "llm")
def _llm_translator(cfg: LLMConfig | None = None, prompts: PromptLibrary | None = None) -> CachedTranslator:
    # The model loads on the first translation, so a retriever that never uses the
    # translate mode never pays for it.
    return CachedTranslator(LLMTranslator(prompts=prompts, config=cfg or LLMConfig()))
