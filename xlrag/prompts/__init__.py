"""Localized prompts as data: one YAML file per language, the language a parameter.

Example: ``PromptLibrary().render("answer_language", "sw")`` starts with
``'Jibu kwa Kiswahili.'``; for a language without a file, such as Basque, the
English template names the language natively (``'Answer in euskara, ...'``).
"""

from __future__ import annotations

from xlrag.prompts.library import (
    ANSWER_HEADER,
    CHOICE_HEADER,
    CITED_HEADER,
    EXPLANATION_HEADER,
    FALLBACK_LANGUAGE,
    ROLES,
    PromptLibrary,
    format_documents,
    format_options,
    join_parts,
    placeholders,
)

__all__ = [
    "ANSWER_HEADER",
    "CHOICE_HEADER",
    "CITED_HEADER",
    "EXPLANATION_HEADER",
    "FALLBACK_LANGUAGE",
    "ROLES",
    "PromptLibrary",
    "format_documents",
    "format_options",
    "join_parts",
    "placeholders",
]
