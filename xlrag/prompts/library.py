"""Localized prompt templates: one YAML file per language, the language a parameter.

``xlrag/prompts/<lang>.yaml`` maps each role to a ``str.format`` template. A
language without a file gets the English template with ``{language}`` filled in
with the language's *native* name, so even the fallback tells the model which
language to write in the way that language's own speakers name it. A code that names no
language (``"xx"``, ``"und"``) gets the English templates too, asking for the question's own
language: a bad code costs the user a note (:meth:`PromptLibrary.note`), never an answer.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from xlrag.errors import ConfigError, EmptyQueryError, UnknownLanguageError
from xlrag.formats import (
    ANSWER_HEADER,
    CHOICE_HEADER,
    CITED_HEADER,
    DEFAULT_LAYOUT,
    EXPLANATION_HEADER,
    OPTION_LETTERS,
    PROMPT_LAYOUTS,
    AnswerFormat,
    PromptLayout,
    check_option_count,
    document_line,
    parse_format,
)
from xlrag.languages import display_name, native_name, normalize_code
from xlrag.text import first_line
from xlrag.yamlio import load_yaml

__all__ = [
    "ANSWER_HEADER",
    "CHOICE_HEADER",
    "CITED_HEADER",
    "EXPLANATION_HEADER",
    "FALLBACK_LANGUAGE",
    "LABEL_ROLES",
    "ROLES",
    "UNKNOWN_LANGUAGE",
    "PromptLibrary",
    "format_documents",
    "format_options",
    "join_parts",
    "label_words",
    "language_name",
    "placeholders",
]

ROLES: tuple[str, ...] = (
    "system",
    "answer_language",
    "answer",
    "citation_format",
    "multiple_choice",
    "translation",
    "judge",
    "condense",
    "attribution",
    "language_repair",
    "citation_repair",
    "extract_repair",
    "explanation_opener",
    "question_label",
    "documents_label",
    "answer_label",
)
FALLBACK_LANGUAGE = "en"
#: What ``{language}`` says for a code that names no language: the English templates then ask
#: for the question's own language instead of naming one.
UNKNOWN_LANGUAGE = "the language of the question"


_PACKAGE = "xlrag.prompts"


def placeholders(template: str) -> set[str]:
    """The ``str.format`` field names ``template`` uses (``{language}`` → ``'language'``).

    Raises :class:`ConfigError` when the template is not valid format syntax.
    """
    names: set[str] = set()
    try:
        for _, field, spec, _ in string.Formatter().parse(template):
            if field is not None:
                names.add(field)
            if spec and "{" in spec:
                # A nested field in a format spec is still a value the caller must supply.
                names |= placeholders(spec)
    except ValueError as exc:
        raise ConfigError(
            f"prompt template is not valid str.format syntax ({exc}); "
            f"write literal braces as '{{{{' and '}}}}'"
        ) from None
    return names


def _code(lang: str) -> str | None:
    """``lang`` normalised (``'EN'`` → ``'en'``), or None for a code that names no language."""
    try:
        return normalize_code(lang)
    except UnknownLanguageError:
        return None


def language_name(lang: str) -> str:
    """What ``{language}`` says for ``lang``: its native name (the script kept: ``'zh-Hant'``
    → ``'中文（繁體）'``), or :data:`UNKNOWN_LANGUAGE` for a code that names no language."""
    return native_name(lang) if _code(lang) is not None else UNKNOWN_LANGUAGE


def format_options(options: Sequence[str]) -> str:
    """``['x', 'y']`` → ``'A) x\\nB) y'``."""
    check_option_count(len(options))
    return "\n".join(f"{OPTION_LETTERS[i]}) {str(opt).strip()}" for i, opt in enumerate(options))


def format_documents(documents: Sequence[str]) -> str:
    """``['x', 'y']`` → ``'<doc0> x\\n<doc1> y'``: the numbering the citation format cites."""
    return "\n".join(document_line(i, str(doc).strip()) for i, doc in enumerate(documents))


def join_parts(parts: Iterable[str], sep: str = "\n\n") -> str:
    """The prompt parts joined, leaving out empty ones: a role overridden with "" (such as
    ``answer_language`` in mRAG's variants without a language instruction) leaves no gap."""
    return sep.join(x for x in parts if x)


class PromptLibrary:
    """Every prompt role in every language, with per-instance overrides.

    Lookup order for ``(role, lang)``: an override for ``lang``, then the shipped
    ``<lang>.yaml``, then English (itself overridable). Overrides come from
    ``overrides_dir`` (``<lang>.yaml`` files with any subset of roles), then from
    ``overrides`` (``{lang: {role: template}}``), then from :meth:`set`; later ones win.
    """

    ROLES = ROLES

    def __init__(
        self,
        overrides_dir: Path | str | None = None,
        overrides: Mapping[str, Mapping[str, str]] | None = None,
    ):
        # Per instance, so two libraries with different overrides never share state.
        self._files: dict[str, dict[str, str]] = {}
        self._shipped: list[str] | None = None
        self._overrides: dict[str, dict[str, str]] = {}
        if overrides_dir is not None:
            self._load_overrides_dir(Path(overrides_dir))
        for lang, roles in (overrides or {}).items():
            self._add_overrides(lang, roles, where="overrides")

    # -- shipped files -------------------------------------------------------

    def languages(self) -> list[str]:
        """Codes of the languages with a written translation shipped in xlrag."""
        if self._shipped is None:
            root = resources.files(_PACKAGE)
            self._shipped = sorted(
                entry.name.removesuffix(".yaml")
                for entry in root.iterdir()
                if entry.is_file() and entry.name.endswith(".yaml")
            )
        return list(self._shipped)

    def has_translation(self, lang: str) -> bool:
        return _code(lang) in self.languages()

    def note(self, lang: str) -> str | None:
        """What a trace says when ``lang`` has no prompts of its own (None when it has a file or
        an override): the English templates are sent, asking for it by its native name, or for
        the question's language when the code names none."""
        code = _code(lang)
        if code is None:
            return (f"no prompts for the code {lang!r}, which names no language: English prompts, "
                    f"asking for an answer in {UNKNOWN_LANGUAGE}")
        if code == FALLBACK_LANGUAGE or code in self.languages() or code in self._overrides:
            return None
        return (f"no prompts written in {display_name(code)} ({code}): English prompts, asking for an "
                f"answer in {language_name(lang)}")

    def _file(self, code: str) -> dict[str, str]:
        if code not in self._files:
            if code not in self.languages():
                self._files[code] = {}
            else:
                resource = resources.files(_PACKAGE).joinpath(f"{code}.yaml")
                text = resource.read_text(encoding="utf-8")
                self._files[code] = self._parse(text, where=f"{_PACKAGE}/{code}.yaml")
        return self._files[code]

    def _english(self, role: str) -> str:
        try:
            return self._file(FALLBACK_LANGUAGE)[role]
        except KeyError:
            raise ConfigError(
                f"the shipped English prompts lack role {role!r}; reinstall xlrag"
            ) from None

    @staticmethod
    def _parse(text: str, where: str) -> dict[str, str]:
        data = load_yaml(text, where)
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"{where} must be a mapping of role: template, got {type(data).__name__}"
            )
        return data

    # -- overrides -----------------------------------------------------------

    def _load_overrides_dir(self, folder: Path) -> None:
        if not folder.is_dir():
            raise ConfigError(
                f"prompt overrides folder {folder} does not exist; create it with one "
                f"<lang>.yaml per language, or drop the overrides_dir setting"
            )
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            try:
                normalize_code(path.stem)
            except UnknownLanguageError:
                raise UnknownLanguageError(path.stem, where=str(path)) from None
            data = self._parse(path.read_text(encoding="utf-8"), where=str(path))
            self._add_overrides(path.stem, data, where=str(path))

    def _add_overrides(self, lang: str, roles: object, where: str) -> None:
        if not isinstance(roles, Mapping):
            raise ConfigError(
                f"{where}: overrides for {lang!r} must map role to template, "
                f"got {type(roles).__name__}"
            )
        for role, template in roles.items():
            self._set(role, lang, template, where=where)

    def set(self, role: str, lang: str, template: str) -> None:
        """Override ``role`` for ``lang`` in this library only.

        The template may use only the placeholders the English template of the role
        uses, since callers supply exactly those.
        """
        self._set(role, lang, template, where="PromptLibrary.set")

    def _set(self, given_role: object, lang: str, template: object, where: str) -> None:
        role = self._check_role(given_role)
        code = normalize_code(lang)
        if not isinstance(template, str):
            raise ConfigError(
                f"{where}: override of {role!r} for {code!r} must be a string, "
                f"got {type(template).__name__}"
            )
        allowed = placeholders(self._english(role))
        try:
            extra = placeholders(template) - allowed
        except ConfigError as exc:
            raise ConfigError(f"{where}: override of {role!r} for {code!r}: {exc}") from None
        if extra:
            shown = ", ".join("{" + name + "}" for name in sorted(extra))
            can = ", ".join("{" + name + "}" for name in sorted(allowed)) or "none"
            raise ConfigError(
                f"{where}: override of {role!r} for {code!r} uses unknown placeholder(s) "
                f"{shown}; this role accepts: {can}"
            )
        self._overrides.setdefault(code, {})[role] = template

    # -- lookup --------------------------------------------------------------

    @staticmethod
    def _check_role(role: object) -> str:
        if not isinstance(role, str) or role not in ROLES:
            raise ConfigError(f"unknown prompt role {role!r}; choose one of: {', '.join(ROLES)}")
        return role

    def _lookup(self, role: str, lang: str) -> tuple[str, str]:
        self._check_role(role)
        code = _code(lang)
        if code is not None:
            if role in self._overrides.get(code, {}):
                return "override", self._overrides[code][role]
            shipped = self._file(code)
            if role in shipped:
                return f"file:{code}", shipped[role]
        # An English override also reaches the languages that fall back to English.
        english = self._overrides.get(FALLBACK_LANGUAGE, {}).get(role)
        if english is None:
            english = self._english(role)
        return f"fallback:{FALLBACK_LANGUAGE}", english

    def get(self, role: str, lang: str) -> str:
        """The raw template of ``role`` for ``lang`` (``'zh-Hant'`` reads ``zh``)."""
        return self._lookup(role, lang)[1]

    def own(self, role: str, lang: str) -> str | None:
        """``role``'s template when ``lang`` has one of its own (an override or its file), None
        when it falls back to English's: for words that would pull a reply into English (an
        English override reaches the fallback languages through :meth:`get`, not here)."""
        source, template = self._lookup(role, lang)
        return None if source.startswith("fallback:") else template

    def source(self, role: str, lang: str) -> str:
        """Where :meth:`get` finds the template: ``'override'``, ``'file:<lang>'`` or ``'fallback:en'``."""
        return self._lookup(role, lang)[0]

    def render(self, role: str, lang: str, **values: str) -> str:
        """:meth:`get` formatted with ``values``; ``language`` defaults to ``lang``'s native name."""
        template = self.get(role, lang)
        if "language" not in values:
            # The raw code, not the normalised one, so 'zh-Hant' asks for Traditional script.
            values["language"] = language_name(lang)
        missing = sorted(placeholders(template) - values.keys())
        if missing:
            shown = ", ".join(f"{name}=..." for name in missing)
            raise ConfigError(
                f"prompt {role!r} for {_code(lang) or lang!r} needs a value for "
                f"{', '.join('{' + m + '}' for m in missing)}; pass render({role!r}, "
                f"{lang!r}, {shown})"
            )
        try:
            return template.format(**values)
        except (AttributeError, IndexError, KeyError, ValueError) as exc:
            raise ConfigError(
                f"prompt {role!r} for {_code(lang) or lang!r} could not be filled in ({exc}); "
                f"check the template's placeholders"
            ) from None

    # -- listing -------------------------------------------------------------

    def entries(self, lang: str) -> list[tuple[str, str, str]]:
        """``(role, source, template)`` for every role of ``lang``: what ``prompts show`` prints."""
        return [(role, *self._lookup(role, lang)) for role in ROLES]

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(lang, role, source, first line)`` for every shipped or overridden language."""
        langs = sorted(set(self.languages()) | set(self._overrides))
        return [
            (lang, role, source, first_line(template))
            for lang in langs
            for role, source, template in self.entries(lang)
        ]

    # -- chat messages ---------------------------------------------------------

    def build_messages(
        self,
        lang: str,
        question: str,
        documents: Sequence[str] | None = None,
        fmt: AnswerFormat | str = AnswerFormat.ANSWER,
        options: Sequence[str] | None = None,
        *,
        layout: PromptLayout = DEFAULT_LAYOUT,
    ) -> list[tuple[str, str]]:
        """``[("system", ...), ("user", ...)]`` asking for an answer in ``lang``.

        ``documents`` become ``<doc0>``, ``<doc1>``, … blocks (none: closed-book).
        ``fmt`` is ``'answer'`` (short answer), ``'mc'`` (letter of one of
        ``options``) or ``'citation'`` (cited documents, answer, explanation; with
        ``options`` the answer line is ``Chosen Option:``). The user turn ends with
        the header the reply should start with, so base models continue in format.

        ``layout`` (:data:`PromptLayout`): ``documents_first`` puts the format's instruction
        after the passages and the question; ``static_first`` puts everything that does not
        depend on the question (the format's instruction with the system prompt and the language
        instruction) in the system turn, so every question of a language and format starts with
        the same tokens and a local model re-reads only the passages and the question.
        """
        if layout not in PROMPT_LAYOUTS:
            raise ConfigError(f"unknown prompt layout {layout!r}; choose from: {', '.join(PROMPT_LAYOUTS)}")
        static_first = layout == "static_first"
        fmt = parse_format(fmt)
        if fmt == "mc" and not options:
            raise ConfigError("format 'mc' needs options; pass options=['...', '...']")
        if fmt == "answer" and options:
            raise ConfigError("options need format 'mc' or 'citation', not 'answer'")
        if not question or not question.strip():
            raise EmptyQueryError()

        instruction = ""  # the format's own instruction: the same for every question
        if fmt == "answer":
            instruction = self.render("answer", lang)
        elif fmt == "citation":
            header = CHOICE_HEADER if options else ANSWER_HEADER
            instruction = self.render("citation_format", lang, answer_header=header)
        system = join_parts([self.render("system", lang), self.render("answer_language", lang),
                             instruction if static_first else ""])
        parts: list[str] = []
        if documents:
            parts.append(f"{self.render('documents_label', lang)}:\n{format_documents(documents)}")
        parts.append(f"{self.render('question_label', lang)}: {question.strip()}")
        if options:
            parts.append(self.render("multiple_choice", lang, options=format_options(options)))
        if not static_first:
            parts.append(instruction)
        if fmt == "citation":
            # Said again last: the format's English headers pull small models into English
            # for the explanation (Russian questions: 2 of 2 explanations in English without it).
            parts.append(self.render("answer_language", lang))
            parts.append(CITED_HEADER)
        else:
            parts.append(f"{self.render('answer_label', lang)}:")
        return [("system", system), ("user", join_parts(parts))]


# Prompt roles whose values are labels a reply may contain (a model that starts the next
# "Question:" has finished its answer; "Respuesta:" introduces one).
LABEL_ROLES = ("question_label", "documents_label", "answer_label")


@cache
def label_words(role: str) -> tuple[str, ...]:
    """Every spelling of a label role across the shipped prompt files, longest first.

    Derived from ``xlrag/prompts/*.yaml`` (the prompts the models are actually sent),
    so adding a prompt language teaches the parser its labels too.
    """
    if role not in LABEL_ROLES:
        raise ConfigError(f"{role!r} is not a label role; use one of: {', '.join(LABEL_ROLES)}")
    lib = PromptLibrary()
    found = {lib.get(role, lang).strip() for lang in lib.languages()}
    return tuple(sorted((w for w in found if w), key=lambda w: (-len(w), w)))
