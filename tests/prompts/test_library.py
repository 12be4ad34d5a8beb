"""The prompt library: shipped translations, fallback, overrides, chat messages."""

from __future__ import annotations

import pytest

from xlrag.errors import ConfigError, EmptyQueryError, UnknownLanguageError
from xlrag.evals import testbed
from xlrag.formats import PROMPT_LAYOUTS
from xlrag.languages import display_name, native_name, normalize_code
from xlrag.prompts import (
    CHOICE_HEADER,
    CITED_HEADER,
    ROLES,
    PromptLibrary,
    format_options,
    placeholders,
)
from xlrag.prompts.library import UNKNOWN_LANGUAGE

# Every shipped prompt file, read from the package: the parametrized checks below hold for a file
# as soon as it is added.
TRANSLATED = tuple(PromptLibrary().languages())
# The many-language test bed is the one owner of the languages xlrag must serve (issue #51):
# its files' codes, as the test bed names them (zh-Hans, zh-Hant).
TESTBED = tuple(testbed.languages())
# Languages with no prompt file, outside the test bed: what the fallback serves.
WITHOUT_FILE = (("eu", "euskara"), ("yo", "Èdè Yorùbá"))


@pytest.fixture
def lib() -> PromptLibrary:
    return PromptLibrary()


def test_every_testbed_language_has_its_own_prompts(lib):
    assert len(TESTBED) >= 56, TESTBED  # the test bed itself is complete
    missing = sorted({normalize_code(code) for code in TESTBED} - set(lib.languages()))
    assert not missing, f"write xlrag/prompts/<lang>.yaml for: {', '.join(missing)}"
    assert all(lib.has_translation(code) for code in TESTBED)
    assert not any(lib.has_translation(code) for code, _ in WITHOUT_FILE)


@pytest.mark.parametrize("lang", TESTBED)
def test_testbed_language_renders_every_role_from_its_file(lib, lang):
    """Each test bed code as a user gives it (zh-Hant too): every role from the language's own
    file, every placeholder English has, the language named natively, no fallback note."""
    code = normalize_code(lang)
    assert lib.note(lang) is None
    for role in ROLES:
        assert lib.source(role, lang) == f"file:{code}", role
        assert placeholders(lib.get(role, lang)) == placeholders(lib.get(role, "en")), role
    assert native_name(lang) in lib.render("answer_language", lang)
    assert native_name(lang) in lib.render("condense", lang, history="", question="")
    for role in ("language_repair", "citation_repair", "extract_repair"):
        assert native_name(lang) in lib.render(role, lang), role


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_role_is_written(lib, lang):
    for role in ROLES:
        assert lib.source(role, lang) == f"file:{lang}"
        # English's explanation opener alone is empty on purpose (en.yaml says why)
        assert lib.get(role, lang).strip() or (role, lang) == ("explanation_opener", "en")


@pytest.mark.parametrize("lang", TRANSLATED)
def test_placeholders_match_english(lib, lang):
    for role in ROLES:
        assert placeholders(lib.get(role, lang)) == placeholders(lib.get(role, "en")), role


@pytest.mark.parametrize("lang", TRANSLATED)
def test_citation_headers_stay_english(lib, lang):
    template = lib.get("citation_format", lang)
    for literal in ("Cited Documents:", "Explanation:", "{answer_header}", "<doc0>", "<doc1>"):
        assert literal in template
    lines = lib.render("citation_format", lang, answer_header="Answer:").splitlines()
    # The format block itself starts each line with a header the parser can find.
    assert [ln.split(":")[0] for ln in lines[-3:]] == ["Cited Documents", "Answer", "Explanation"]


@pytest.mark.parametrize("lang", TRANSLATED)
def test_answer_language_keeps_the_parameter(lib, lang):
    assert "{language}" in lib.get("answer_language", lang)
    assert native_name(lang) in lib.render("answer_language", lang)


def test_answer_language_renders_native_name(lib):
    assert "العربية" in lib.render("answer_language", "ar")
    assert lib.render("answer_language", "sw").startswith("Jibu kwa Kiswahili, pamoja na maelezo.")
    assert lib.render("answer_language", "de", language="Englisch").startswith(
        "Antworte auf Englisch, auch in der Erklärung."
    )


def _lingua_knows(lang: str) -> bool:
    from lingua import IsoCode639_1

    return hasattr(IsoCode639_1, lang.upper())


# lingua has no model for these; their prompts are checked by script instead (below)
NO_LINGUA = tuple(lang for lang in TRANSLATED if not _lingua_knows(lang))


def test_lingua_lacks_only_the_languages_checked_by_script():
    assert set(NO_LINGUA) <= {"ht", "km", "ky", "lo", "mg", "my", "ne", "tg", "ti", "uz"}, NO_LINGUA


@pytest.mark.parametrize("lang", [x for x in TRANSLATED if x not in NO_LINGUA])
def test_answer_language_is_written_in_its_language(lib, lang):
    from xlrag.detect import LinguaDetector

    text = lib.render("system", lang) + "\n" + lib.render("answer_language", lang)
    assert LinguaDetector().detect(text) == lang, text


@pytest.mark.parametrize("lang", [x for x in TRANSLATED if x not in NO_LINGUA])
def test_condense_and_attribution_are_written_in_their_language(lib, lang):
    from xlrag.detect import LinguaDetector

    condense = lib.render("condense", lang, history="", question="")
    attribution = lib.render("attribution", lang, question="", answer="", passage="")
    assert LinguaDetector().detect(condense) == lang, condense
    assert LinguaDetector().detect(attribution) == lang, attribution
    # peers condense follow-ups into English; ours names the user's language in its own words
    assert native_name(lang) in condense
    for verdict in ("attributable", "not_attributable"):
        assert f'"verdict": "{verdict}"' in attribution


# what every role is rendered with in the checks below
VALUES = {"condense": {"history": "", "question": ""}, "attribution": {"question": "", "answer": "", "passage": ""},
          "judge": {"question": "", "gold": "", "response": ""}, "multiple_choice": {"options": ""},
          "translation": {"source_language": "", "target_language": "", "text": ""},
          "citation_format": {"answer_header": "Answer:"}}


@pytest.mark.parametrize("lang", NO_LINGUA)
def test_prompts_lingua_cannot_read_are_in_their_own_script(lib, lang):
    import langcodes

    from xlrag.checks.language import foreign_script
    from xlrag.checks.lexical import dominant_script

    latin = langcodes.get(lang).maximize().script == "Latn"
    for role in ROLES:
        text = lib.render(role, lang, **VALUES.get(role, {}))
        # a script of the language's own (foreign_script lets Latin through: checked apart)
        assert foreign_script(text, lang) is None, (role, text)
        assert (dominant_script(text) == "LATIN") == latin, (role, text)


@pytest.mark.parametrize("lang", [x for x in TRANSLATED if x != "en"])
def test_no_sentence_role_is_left_in_english(lib, lang):
    """A role copied from English (the fallback's text) would pass every placeholder check: at most
    half a role's letters may be in English's words (its JSON keys and kept headers reach 0.43 in
    Chinese's citation format, whose own words are few letters). Labels and the opener are single
    words that languages may share."""
    import re

    def words(text: str) -> list[str]:
        return re.findall(r"[^\W\d_]+", text.lower())

    for role in ROLES:
        if role.endswith("_label") or role == "explanation_opener":
            continue
        mine = words(lib.render(role, lang, **VALUES.get(role, {})))
        english = set(words(lib.render(role, "en", **VALUES.get(role, {}))))
        # weighed by letters: a CJK run is one "word" however long
        share = sum(len(w) for w in mine if w in english) / sum(len(w) for w in mine)
        assert share < 0.5, (role, round(share, 2))


def test_condense_fallback_names_the_language():
    out = PromptLibrary().render("condense", "eu", history="User: Nork margotu zuen Gernika?", question="Eta noiz?")
    assert "Write it in euskara, the user's language" in out
    assert out.endswith("Follow-up question: Eta noiz?\nStandalone question:")


def test_sw_is_a_file_but_languages_without_one_fall_back_to_english(lib):
    assert lib.source("system", "sw") == "file:sw"
    for code, name in WITHOUT_FILE:
        assert lib.source("answer_language", code) == "fallback:en"
        assert lib.get("system", code) == lib.get("system", "en")
        assert (
            lib.render("answer_language", code)
            == f"Answer in {name}, the explanation included. Write named entities in {name}."
        )
        # the trace's note says which prompts were sent, and asking for which language
        assert lib.note(code) == (f"no prompts written in {display_name(code)} ({code}): English prompts, "
                                  f"asking for an answer in {name}")


def test_codes_are_normalised(lib):
    assert lib.source("system", "zh-Hant") == "file:zh"
    assert lib.get("answer", "zh-Hant") == lib.get("answer", "zh")
    # The script survives into the language name, so the model writes Traditional.
    assert "中文（繁體）" in lib.render("answer_language", "zh-Hant")
    assert lib.source("system", "iw") == "file:he"
    assert "עברית" in lib.render("answer_language", "iw")
    for code in ("EN", "en_US", "en-GB"):
        assert lib.source("system", code) == "file:en" and lib.note(code) is None


@pytest.mark.parametrize("code", ["xx", "und", "xx-not-a-language", "  "])
def test_a_code_naming_no_language_falls_back_with_a_note(lib, code):
    """Issue #51's bad input: never an exception; the English prompts ask for the question's own
    language, and the note says so."""
    assert not lib.has_translation(code)
    assert lib.source("system", code) == "fallback:en"
    assert lib.get("system", code) == lib.get("system", "en")
    assert lib.render("answer_language", code) == (f"Answer in {UNKNOWN_LANGUAGE}, the explanation included. "
                                                   f"Write named entities in {UNKNOWN_LANGUAGE}.")
    assert lib.own("explanation_opener", code) is None
    assert UNKNOWN_LANGUAGE in lib.note(code) and repr(code) in lib.note(code)
    (_, system), (_, user) = lib.build_messages(code, "Capital?", DOCS, fmt="citation")
    assert UNKNOWN_LANGUAGE in system + user and user.endswith(CITED_HEADER)
    # an override names the language it is for: a code naming none is a configuration error
    with pytest.raises(UnknownLanguageError):
        lib.set("system", code, "x")


def test_unknown_role_lists_roles(lib):
    with pytest.raises(ConfigError, match="answer_language"):
        lib.get("sytem", "en")
    with pytest.raises(ConfigError):
        lib.set("nope", "en", "x")


def test_override_from_dict_wins():
    lib = PromptLibrary(
        overrides={"de": {"answer_label": "Lösung"}, "eu": {"question_label": "Galdera"}}
    )
    assert lib.get("answer_label", "de") == "Lösung"
    assert lib.source("answer_label", "de") == "override"
    assert lib.source("question_label", "de") == "file:de"
    assert lib.source("question_label", "eu") == "override"
    assert lib.source("system", "eu") == "fallback:en"
    assert lib.note("eu") is None  # the user's own override: not a fallback to note
    assert ("eu", "question_label", "override", "Galdera") in lib.rows()


def test_override_from_folder_wins(tmp_path):
    (tmp_path / "fr.yaml").write_text(
        "system: |-\n  Tu es un expert juridique.\n", encoding="utf-8"
    )
    (tmp_path / "zh-Hant.yaml").write_text("answer: 請簡短回答。\n", encoding="utf-8")
    lib = PromptLibrary(overrides_dir=tmp_path)
    assert lib.render("system", "fr") == "Tu es un expert juridique."
    assert lib.source("system", "fr") == "override"
    assert lib.source("answer", "zh") == "override"
    assert lib.source("answer_label", "fr") == "file:fr"


def test_dict_overrides_win_over_folder(tmp_path):
    (tmp_path / "es.yaml").write_text("answer_label: Solución\n", encoding="utf-8")
    lib = PromptLibrary(overrides_dir=tmp_path, overrides={"es": {"answer_label": "Réplica"}})
    assert lib.get("answer_label", "es") == "Réplica"


def test_bad_override_folder(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        PromptLibrary(overrides_dir=tmp_path / "missing")
    (tmp_path / "de.yaml").write_text("- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="mapping"):
        PromptLibrary(overrides_dir=tmp_path)
    (tmp_path / "de.yaml").write_text("sytem: Hallo\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown prompt role"):
        PromptLibrary(overrides_dir=tmp_path)
    (tmp_path / "de.yaml").unlink()
    (tmp_path / "notalang.yaml").write_text("system: x\n", encoding="utf-8")
    with pytest.raises(UnknownLanguageError, match=r"notalang\.yaml"):
        PromptLibrary(overrides_dir=tmp_path)


def test_set_wins_and_is_per_instance(lib):
    lib.set("answer", "ja", "一言で答えてください。")
    assert lib.get("answer", "ja") == "一言で答えてください。"
    assert lib.source("answer", "ja") == "override"
    assert PromptLibrary().source("answer", "ja") == "file:ja"


def test_english_override_reaches_fallback_languages(lib):
    lib.set("system", "en", "You are a legal assistant.")
    assert lib.get("system", "eu") == "You are a legal assistant."
    assert lib.source("system", "eu") == "fallback:en"
    assert lib.get("system", "xx") == "You are a legal assistant."
    assert lib.get("system", "de") != "You are a legal assistant."


def test_bad_override_placeholder_rejected(lib):
    with pytest.raises(ConfigError, match=r"\{question\}"):
        lib.set("answer_language", "de", "Antworte auf {language}: {question}")
    with pytest.raises(ConfigError, match="placeholder"):
        PromptLibrary(overrides={"fr": {"system": "Tu es {role}."}})
    with pytest.raises(ConfigError, match=r"str\.format"):
        lib.set("system", "fr", "unbalanced { brace")
    with pytest.raises(ConfigError, match="string"):
        lib.set("system", "fr", 42)
    # Fewer placeholders than English is fine: the caller's extra values are ignored.
    lib.set("translation", "de", "Übersetze ins {target_language}:\n{text}")
    assert lib.render(
        "translation", "de", source_language="en", target_language="Deutsch", text="hi"
    )


def test_render_missing_value_names_it(lib):
    with pytest.raises(ConfigError, match=r"\{options\}"):
        lib.render("multiple_choice", "fr")
    out = lib.render(
        "translation", "en", source_language="English", target_language="Kiswahili", text="Hello"
    )
    assert out.startswith("Translate the following text from English into Kiswahili.")
    assert out.endswith("Hello")


def test_rows_cover_every_language_and_role(lib):
    rows = lib.rows()
    assert len(rows) == len(TRANSLATED) * len(ROLES)
    assert ("en", "answer_label", "file:en", "Answer") in rows
    assert all("\n" not in first for *_, first in rows)


def test_entries(lib):
    entries = lib.entries("eu")
    assert [role for role, _, _ in entries] == list(ROLES)
    assert {source for _, source, _ in entries} == {"fallback:en"}


def test_format_options():
    assert format_options(["Paris", "Lyon"]) == "A) Paris\nB) Lyon"
    with pytest.raises(ConfigError):
        format_options([str(i) for i in range(27)])


DOCS = ["Paris is the capital of France.", "Lyon is in France.", "Berlin is in Germany."]


def _doc_positions(text: str) -> list[int]:
    return [text.index(f"<doc{i}> {doc}") for i, doc in enumerate(DOCS)]


@pytest.mark.parametrize("lang", ["en", "de", "ar", "zh", "bn", "eu"])
def test_build_messages_answer(lib, lang):
    (role_s, system), (role_u, user) = lib.build_messages(lang, "Capital?", DOCS, fmt="answer",
                                                          layout="documents_first")
    assert (role_s, role_u) == ("system", "user")
    assert system.startswith(lib.render("system", lang))
    assert system.endswith(lib.render("answer_language", lang))
    positions = _doc_positions(user)
    assert positions == sorted(positions)
    assert user.startswith(lib.render("documents_label", lang) + ":\n<doc0> ")
    assert f"{lib.render('question_label', lang)}: Capital?" in user
    assert user.index("Capital?") < user.index(lib.render("answer", lang))
    assert user.endswith("\n\n" + lib.render("answer_label", lang) + ":")
    # static first: the instruction moves to the system turn, the rest stays as it was
    (_, system2), (_, user2) = lib.build_messages(lang, "Capital?", DOCS, fmt="answer", layout="static_first")
    assert system2 == system + "\n\n" + lib.render("answer", lang)
    assert user2 == user.replace("\n\n" + lib.render("answer", lang), "")


@pytest.mark.parametrize(("fmt", "options"), [("answer", None), ("citation", None), ("citation", ["x", "y"]),
                                              ("mc", ["x", "y"])])
@pytest.mark.parametrize("lang", ["en", "ar", "zh", "bn", "eu"])
def test_every_question_starts_with_the_same_tokens(lib, lang, fmt, options):
    """The static part (system, language and format instructions) comes first, byte for byte the
    same across questions and passages, so llama.cpp reuses its state (issue #33); what varies
    starts only in the user turn."""
    a = lib.build_messages(lang, "Capital?", DOCS, fmt=fmt, options=options, layout="static_first")
    b = lib.build_messages(lang, "Wer regiert?", ["x", "y"], fmt=fmt, options=options and ["p", "q", "r"],
                           layout="static_first")
    assert a[0] == b[0]
    if fmt == "citation":
        header = CHOICE_HEADER if options else "Answer:"
        assert lib.render("citation_format", lang, answer_header=header) in a[0][1]
        assert lib.render("citation_format", lang, answer_header=header) not in a[1][1]


def test_the_default_layout_has_one_owner(lib):
    import inspect

    from xlrag.chains.context import ContextSelector
    from xlrag.config import ContextConfig
    from xlrag.formats import DEFAULT_LAYOUT

    assert DEFAULT_LAYOUT in ("documents_first", "static_first")
    assert inspect.signature(lib.build_messages).parameters["layout"].default == DEFAULT_LAYOUT
    assert ContextConfig().layout == ContextSelector().layout == DEFAULT_LAYOUT
    assert lib.build_messages("en", "q", DOCS) == lib.build_messages("en", "q", DOCS, layout=DEFAULT_LAYOUT)


def test_build_messages_mc(lib):
    _, (_, user) = lib.build_messages("fr", "Capitale ?", DOCS, fmt="mc", options=["Paris", "Lyon"])
    positions = _doc_positions(user)
    assert positions == sorted(positions)
    assert "A) Paris\nB) Lyon" in user
    assert user.index("<doc2>") < user.index("A) Paris")
    assert user.endswith("Réponse:")
    with pytest.raises(ConfigError, match="options"):
        lib.build_messages("fr", "Capitale ?", DOCS, fmt="mc")


@pytest.mark.parametrize("layout", PROMPT_LAYOUTS)
def test_build_messages_citation(lib, layout):
    (_, system), (_, user) = lib.build_messages("ru", "Столица?", DOCS, fmt="citation", layout=layout)
    positions = _doc_positions(user)
    assert positions == sorted(positions)
    assert "\nAnswer:\n" in system + user  # the example line: the header alone, nothing to copy
    assert CHOICE_HEADER not in system + user
    assert user.endswith("\n\n" + CITED_HEADER)


@pytest.mark.parametrize("layout", PROMPT_LAYOUTS)
def test_build_messages_citation_with_options(lib, layout):
    (_, system), (_, user) = lib.build_messages(
        "hi", "राजधानी?", DOCS, fmt="citation", options=["Paris", "Lyon", "Berlin"], layout=layout
    )
    assert "A) Paris\nB) Lyon\nC) Berlin" in user
    assert "\nChosen Option:\n" in system + user
    assert "\nAnswer:" not in system + user
    assert user.endswith(CITED_HEADER)


@pytest.mark.parametrize("documents", [None, []])
def test_build_messages_closed_book(lib, documents):
    _, (_, user) = lib.build_messages("es", "¿Capital de Francia?", documents, fmt="answer")
    assert "<doc" not in user
    assert lib.render("documents_label", "es") not in user
    assert user.startswith("Pregunta: ¿Capital de Francia?")
    assert user.endswith("Respuesta:")


def test_build_messages_rejects_bad_input(lib):
    with pytest.raises(ConfigError, match="layout 'static'; choose from: documents_first, static_first"):
        lib.build_messages("en", "q", DOCS, layout="static")
    with pytest.raises(ConfigError, match="format"):
        lib.build_messages("en", "q", DOCS, fmt="essay")
    with pytest.raises(ConfigError, match="options"):
        lib.build_messages("en", "q", DOCS, fmt="answer", options=["a", "b"])
    with pytest.raises(EmptyQueryError):
        lib.build_messages("en", "  ", DOCS)
