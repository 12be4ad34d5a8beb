"""Ragas metric prompts in the question's language, instructions included, cached on disk.

Ragas 0.4's metric prompts (``ragas.prompt.metrics.base_prompt.BasePrompt``: an
``instruction``, few-shot ``examples`` as pydantic input/output pairs, and ``to_string``)
have ``adapt(language, llm, adapt_instruction=True)``. It translates every example string
in one structured call that must return exactly as many strings as it was given, and
leaves English the sentences ``to_string`` wraps around them ("Please return the output in
a JSON format...", "Now perform the same with the following input", the Example, Input and
Output labels). Here every one of those strings is translated, the framing included, one
string per call: a call cannot return the wrong number of strings (the way a small model
fails Ragas's batch), a failure costs one string, and translations already made are kept.
The JSON keys and schema stay as they are: they are the reply's format, not its language.

Translations form a translation memory (English string -> translation), one JSON file per
(language, Ragas version, LLM) under the xlrag cache directory::

    <cache>/ragas-prompts/<ragas version>/<language>/<LLM key>.json

A prompt whose strings are all in the memory is adapted without any LLM call; a string
Ragas changes is simply missing from it, and translated on first use.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, Field

from xlrag.checks.lexical import dominant_script, letter_script
from xlrag.languages import native_name, normalize_code
from xlrag.prompts import PromptLibrary

__all__ = [
    "FRAMING",
    "Translation",
    "TranslationMemory",
    "adapt_prompt",
    "implausible_translation",
    "prompt_cache_dir",
    "prompt_strings",
    "translation_request",
]

log = logging.getLogger(__name__)

FORMAT = "xlrag-ragas-prompts/1"

# The fixed English of ragas 0.4 BasePrompt.to_string, around the instruction and examples.
SCHEMA_LINE = ("Please return the output in a JSON format that complies with the following schema "
               "as specified in JSON Schema:")
QUOTES_LINE = "Do not use single quotes in your response but double quotes,properly escaped with a backslash."
NOW_LINE = "Now perform the same with the following input"
EXAMPLES, EXAMPLE, INPUT, OUTPUT = "EXAMPLES", "Example", "Input", "Output"
FRAMING: tuple[str, ...] = (SCHEMA_LINE, QUOTES_LINE, NOW_LINE, EXAMPLES, EXAMPLE, INPUT, OUTPUT)
_LABELS = frozenset({EXAMPLES, EXAMPLE, INPUT, OUTPUT})


def prompt_cache_dir() -> Path:
    """``ragas-prompts`` under the xlrag cache directory ($XLRAG_CACHE_DIR, else the
    platform's user cache; the one the local models are assembled under)."""
    from xlrag.chains.local.assembly import cache_dir

    return cache_dir().parent / "ragas-prompts"


class Translation(BaseModel):
    """The reply schema of one translation call."""

    translation: str = Field(min_length=1)


def translation_request(text: str, lang: str, prompts: PromptLibrary | None = None,
                        json_hint: bool = False) -> str:
    """The prompt that asks for ``text`` in ``lang``: xlrag's localized ``translation`` prompt
    (its instruction is in the target language). ``json_hint`` appends the reply's JSON shape,
    for models nothing else holds to it (a held model copies the hint into its translation)."""
    prompts = prompts or PromptLibrary()
    body = prompts.render("translation", lang, source_language=native_name("en"),
                          target_language=native_name(lang), text=text)
    return f'{body}\n\nJSON: {{"translation": "..."}}' if json_hint else body


def clean_translation(source: str, text: str) -> str:
    """The translation as it goes into a prompt: trimmed; a label without the colon or
    dashes the model may have copied from the prompt's layout."""
    out = text.strip()
    if source in _LABELS:
        out = out.strip(" \t-:：\"'“”«»")
    return out


def implausible_translation(source: str, translation: str, lang: str) -> str | None:
    """Why ``translation`` cannot be ``source`` in ``lang``, or None.

    Seen from Qwen2.5-Coder-1.5B adapting Ragas's prompts to Arabic: "Input" became "Please
    provide the text to be translated." (a reply to the request, not a translation) and
    "Output" became "Translation" (English). A prompt built from such strings asks the judging
    model something else, so they stay in English: far longer than the source, or without a
    letter of the language's script when that script is not Latin.
    """
    if len(translation) > 3 * len(source) + 15:
        return f"{len(translation)} characters for {len(source)}"
    script = dominant_script(native_name(lang))
    # any letter of the script will do: "JSON Schema" stays Latin inside a good translation
    if (script not in (None, "LATIN") and dominant_script(source) is not None
            and not any(letter_script(ch) == script for ch in translation if ch.isalpha())):
        return f"not written in the {script.title()} script"
    return None


class TranslationMemory:
    """English -> ``language`` translations of Ragas prompt strings, made by one LLM.

    Each translation is written as soon as it is made (atomically, under a file lock, merged
    with what other processes wrote), so an interrupted adaptation resumes where it stopped.
    """

    def __init__(self, language: str, ragas_version: str, llm_label: str, llm_key: str,
                 root: Path | None = None):
        self.language = normalize_code(language)
        self.ragas_version = ragas_version
        self.llm_label, self.llm_key = llm_label, llm_key
        base = Path(root) if root is not None else prompt_cache_dir()
        self.path = base / ragas_version / self.language / f"{llm_key}.json"
        self._lock = FileLock(str(self.path) + ".lock", timeout=60)
        self.translations: dict[str, str] = self._read()

    def _header(self) -> dict[str, str]:
        return {"format": FORMAT, "language": self.language, "ragas_version": self.ragas_version,
                "llm": self.llm_label, "llm_key": self.llm_key}

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("ignoring the unreadable Ragas prompt cache %s (%s); it will be rewritten", self.path, e)
            return {}
        header = self._header()
        if not isinstance(data, dict) or any(data.get(k) != v for k, v in header.items()) \
                or not isinstance(data.get("translations"), dict):
            log.warning("ignoring the Ragas prompt cache %s: it was written for another language, "
                        "Ragas version or LLM, or in another format; it will be rewritten", self.path)
            return {}
        return {str(k): str(v) for k, v in data["translations"].items()}

    def get(self, source: str) -> str | None:
        return self.translations.get(source)

    def put(self, source: str, translation: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            merged = {**self._read(), **self.translations, source: translation}
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({**self._header(), "translations": merged}, fh, ensure_ascii=False, indent=1)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        self.translations = merged


def prompt_strings(prompt: Any) -> list[str]:
    """Every string of ``prompt`` that a reader sees: the instruction, the framing, and each
    distinct string in its examples (JSON keys excluded), in order."""
    from ragas.prompt.utils import get_all_strings

    seen: dict[str, None] = {prompt.instruction: None}
    seen.update(dict.fromkeys(FRAMING))
    seen.update(dict.fromkeys(s for s in get_all_strings(prompt.examples) if s.strip()))
    return list(seen)


class _LocalizedPrompt:
    """Renders like the Ragas prompt it extends, with the framing in the prompt's language."""

    framing: dict[str, str]

    def to_string(self, data: Any) -> str:
        text = super().to_string(data)  # type: ignore[misc]
        instruction: str = self.instruction  # type: ignore[attr-defined]
        # the instruction is already translated; only what follows it holds the framing
        head, rest = (instruction, text[len(instruction):]) if text.startswith(instruction) else ("", text)
        f = self.framing
        for line in (SCHEMA_LINE, QUOTES_LINE, NOW_LINE):
            rest = rest.replace(line, f[line])
        rest = rest.replace(f"--------{EXAMPLES}-----------", f"--------{f[EXAMPLES]}-----------")
        rest = re.sub(rf"(?m)^{EXAMPLE} (\d+)$", lambda m: f"{f[EXAMPLE]} {m.group(1)}", rest)
        # "input:" before the row's own input is lower case in Ragas
        rest = re.sub(r"(?m)^(Input|input|Output): ",
                      lambda m: f"{f[INPUT] if m.group(1).lower() == 'input' else f[OUTPUT]}: ", rest)
        return head + rest


@functools.cache
def _localized_class(cls: type) -> type:
    return type(cls.__name__, (_LocalizedPrompt, cls), {"__module__": __name__})


async def adapt_prompt(prompt: Any, language: str, memory: TranslationMemory,
                       translate: Callable[[str], Awaitable[str | None]],
                       untranslated: list[str] | None = None) -> Any:
    """``prompt`` in ``language``: instruction, examples and framing translated.

    Strings missing from ``memory`` are translated with ``translate`` and stored as soon as
    each one is made. ``translate`` raises on failure (a prompt is never half-translated),
    or returns None to keep that string in English; such strings are appended to
    ``untranslated`` and asked for again next time. A translation
    :func:`implausible_translation` rejects is stored (the same model would say it again) but
    not used: that string stays English and is listed in ``untranslated`` too.
    """
    from ragas.prompt.utils import update_strings

    def usable(source: str, made: str) -> bool:
        why = implausible_translation(source, made, language)
        if why is not None:
            log.warning("keeping the Ragas string %r in English: its %s translation %r is %s",
                        source[:60], language, made[:60], why)
            if untranslated is not None:
                untranslated.append(source)
        return why is None

    missing = [s for s in prompt_strings(prompt) if memory.get(s) is None]
    for source in missing:  # in order, one call each; the caller bounds and times each call
        made = await translate(source)
        if made is None:
            if untranslated is not None:
                untranslated.append(source)
            continue
        # kept as the model said it, implausible or not: asking the same model again at
        # temperature 0 would pay for the same reply; the check below decides its use
        memory.put(source, clean_translation(source, made))
    table = {s: t if (t := memory.get(s)) is not None and usable(s, t) else s for s in prompt_strings(prompt)}

    prompt_class: type = type(prompt)
    adapted = _localized_class(prompt_class)()
    adapted.instruction = table[prompt.instruction]
    # update_strings replaces exact matches only, so the instruction and framing in the table
    # touch nothing in the examples
    adapted.examples = update_strings(copy.deepcopy(prompt.examples), list(table), list(table.values()))
    adapted.language = normalize_code(language)
    adapted.framing = {s: table[s] for s in FRAMING}
    return adapted
