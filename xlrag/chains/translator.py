"""The LLM-backed ``Translator`` for the ``translate`` IR mode.

It renders the localized translation prompt of the *target* language, so the
instruction is in the language the model must write, and caches every
translation (queries repeat a lot in evaluation runs).
"""

from __future__ import annotations

from typing import Any

from xlrag.config import LLMConfig
from xlrag.errors import ProviderError
from xlrag.indexes.translate import CachedTranslator
from xlrag.languages import native_name, normalize_code
from xlrag.prompts import PromptLibrary
from xlrag.registry import register

__all__ = ["LLMTranslator", "build_translator"]


def _first_line(text: str) -> str:
    # Base models keep going after the translation (a new "Question:", a second
    # translation); the first non-empty line is the translation itself.
    for line in text.strip().splitlines():
        line = line.strip().strip('"“”«»')
        if line:
            return line
    return ""


class LLMTranslator:
    def __init__(self, llm: Any, prompts: PromptLibrary | None = None):
        self.llm = llm
        self.prompts = prompts or PromptLibrary()

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        src, tgt = normalize_code(source_lang), normalize_code(target_lang)
        if src == tgt:
            return text
        prompt = self.prompts.render("translation", tgt, source_language=native_name(src),
                                     target_language=native_name(tgt), text=text)
        reply = self.llm.invoke([("user", prompt)])
        out = _first_line(getattr(reply, "content", reply) if not isinstance(reply, str) else reply)
        if not out:
            raise ProviderError(f"the LLM returned no translation of {text[:60]!r} into {tgt}")
        return out


@register("translator", "llm")
def _llm_translator(cfg: LLMConfig | None = None, prompts: PromptLibrary | None = None) -> CachedTranslator:
    from xlrag.chains.llms import build_llm

    return CachedTranslator(LLMTranslator(build_llm(cfg or LLMConfig()), prompts))


def build_translator(cfg: LLMConfig | None = None, prompts: PromptLibrary | None = None) -> CachedTranslator:
    from xlrag.registry import create

    return create("translator", "llm", cfg, prompts)
