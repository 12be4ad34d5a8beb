"""The LLM-backed ``Translator`` for the ``translate`` IR mode.

It renders the localized translation prompt of the *target* language, so the
instruction is in the language the model must write, and caches every
translation (queries repeat a lot in evaluation runs).
"""

from __future__ import annotations

import logging
from typing import Any

from xlrag.chains.profiles import profile_for
from xlrag.config import LLMConfig
from xlrag.errors import TranslationCutOffError
from xlrag.indexes.translate import CachedTranslator
from xlrag.languages import native_name, normalize_code
from xlrag.prompts import PromptLibrary
from xlrag.registry import register
from xlrag.text import first_line

__all__ = ["LLMTranslator"]

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
            raise TranslationCutOffError(text, tgt, getattr(self.llm, "max_tokens", None))
        # Base models keep going after the translation (a new "Question:", a second
        # translation); the first non-empty line is the translation itself.
        out = first_line(content, strip='"“”«»')
        if not any(ch.isalnum() for ch in out):
            # Searching with "." would retrieve noise; searching with the untranslated
            # query still works through the multilingual embedder.
            log.warning("no usable %s translation of %r from the LLM; searching with the original", tgt, text[:60])
            return text
        return out


@register("translator", "llm")
def _llm_translator(cfg: LLMConfig | None = None, prompts: PromptLibrary | None = None) -> CachedTranslator:
    # The model loads on the first translation, so a retriever that never uses the
    # translate mode never pays for it.
    return CachedTranslator(LLMTranslator(prompts=prompts, config=cfg or LLMConfig()))
