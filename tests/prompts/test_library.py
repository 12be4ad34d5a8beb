"""The prompt library: shipped translations, fallback, overrides, chat messages."""

from __future__ import annotations

import pytest

from xlrag.errors import ConfigError, EmptyQueryError, UnknownLanguageError
from xlrag.formats import PROMPT_LAYOUTS
from xlrag.languages import native_name
from xlrag.prompts import (
    CHOICE_HEADER,
    CITED_HEADER,
    ROLES,
    PromptLibrary,
    format_options,
    placeholders,
)

TRANSLATED = (
    "en", "ar", "zh", "de", "es", "fr", "it", "pt", "ru", "ja",
    "ko", "fi", "th", "hi", "tr", "vi", "id", "sw", "uk", "fa",
)  # fmt: skip


@pytest.fixture
def lib() -> PromptLibrary:
    return PromptLibrary()


def test_languages_are_the_twenty(lib):
    assert sorted(lib.languages()) == sorted(TRANSLATED)
    assert all(lib.has_translation(code) for code in TRANSLATED)
    assert not lib.has_translation("nl")


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


@pytest.mark.parametrize("lang", TRANSLATED)
def test_answer_language_is_written_in_its_language(lib, lang):
    from xlrag.detect import LinguaDetector

    # All 20 are among lingua's languages, so each is checked; none is skipped.
    text = lib.render("system", lang) + "\n" + lib.render("answer_language", lang)
    assert LinguaDetector().detect(text) == lang, text


@pytest.mark.parametrize("lang", TRANSLATED)
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


def test_condense_fallback_names_the_language():
    out = PromptLibrary().render("condense", "nl", history="User: Wie schreef Max Havelaar?", question="En wanneer?")
    assert "Write it in Nederlands, the user's language" in out
    assert out.endswith("Follow-up question: En wanneer?\nStandalone question:")


def test_sw_is_a_file_but_bn_and_nl_fall_back_to_english(lib):
    assert lib.source("system", "sw") == "file:sw"
    for code, name in (("bn", "বাংলা"), ("nl", "Nederlands")):
        assert lib.source("answer_language", code) == "fallback:en"
        assert lib.get("system", code) == lib.get("system", "en")
        assert (
            lib.render("answer_language", code)
            == f"Answer in {name}, the explanation included. Write named entities in {name}."
        )


def test_codes_are_normalised(lib):
    assert lib.source("system", "zh-Hant") == "file:zh"
    assert lib.get("answer", "zh-Hant") == lib.get("answer", "zh")
    # The script survives into the language name, so the model writes Traditional.
    assert "中文（繁體）" in lib.render("answer_language", "zh-Hant")
    assert lib.source("system", "iw") == "fallback:en"
    assert lib.render("answer_language", "iw") == "Answer in עברית, the explanation included. Write named entities in עברית."


def test_unknown_language_raises(lib):
    with pytest.raises(UnknownLanguageError):
        lib.get("system", "xx-not-a-language")


def test_unknown_role_lists_roles(lib):
    with pytest.raises(ConfigError, match="answer_language"):
        lib.get("sytem", "en")
    with pytest.raises(ConfigError):
        lib.set("nope", "en", "x")


def test_override_from_dict_wins():
    lib = PromptLibrary(
        overrides={"de": {"answer_label": "Lösung"}, "nl": {"question_label": "Vraag"}}
    )
    assert lib.get("answer_label", "de") == "Lösung"
    assert lib.source("answer_label", "de") == "override"
    assert lib.source("question_label", "de") == "file:de"
    assert lib.source("question_label", "nl") == "override"
    assert lib.source("system", "nl") == "fallback:en"
    assert ("nl", "question_label", "override", "Vraag") in lib.rows()


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
    assert lib.get("system", "nl") == "You are a legal assistant."
    assert lib.source("system", "nl") == "fallback:en"
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
    entries = lib.entries("bn")
    assert [role for role, _, _ in entries] == list(ROLES)
    assert {source for _, source, _ in entries} == {"fallback:en"}


def test_format_options():
    assert format_options(["Paris", "Lyon"]) == "A) Paris\nB) Lyon"
    with pytest.raises(ConfigError):
        format_options([str(i) for i in range(27)])


DOCS = ["Paris is the capital of France.", "Lyon is in France.", "Berlin is in Germany."]


def _doc_positions(text: str) -> list[int]:
    return [text.index(f"<doc{i}> {doc}") for i, doc in enumerate(DOCS)]


@pytest.mark.parametrize("lang", ["en", "de", "ar", "zh", "bn"])
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
@pytest.mark.parametrize("lang", ["en", "ar", "zh", "bn"])
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
