"""The answer-format contract has one owner (xlrag.formats); everything else derives from it."""

from __future__ import annotations

import typing

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from tests.conftest import ROOT
from tests.prompts.recorded import recorded_format
from xlrag.chains.echo import drop_echo as _drop_echo
from xlrag.chains.echo import echo_reference
from xlrag.chains.parsing import parse_citation, parse_mc
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import GroundedChain, base_model_messages
from xlrag.config import AnswerConfig
from xlrag.errors import ConfigError
from xlrag.formats import (
    CHOICE_HEADER,
    CITED_HEADER,
    AnswerFormat,
    Section,
    parse_format,
)
from xlrag.prompts import PromptLibrary
from xlrag.prompts.library import LABEL_ROLES, label_words
from xlrag.schema import GroundedAnswer

PROMPT_FILES = sorted((ROOT / "xlrag" / "prompts").glob("*.yaml"))


def _labels(role: str) -> list[tuple[str, str]]:
    out = []
    for f in PROMPT_FILES:
        value = yaml.safe_load(f.read_text(encoding="utf-8")).get(role)
        if value:
            out.append((f.stem, value.strip()))
    return out


def test_label_words_are_exactly_the_prompt_files_labels():
    for role in LABEL_ROLES:
        assert set(label_words(role)) == {v for _, v in _labels(role)}, role


@pytest.mark.parametrize(("lang", "label"), _labels("answer_label"))
def test_every_answer_label_is_read_as_the_answer(lang, label):
    reply = f"{CITED_HEADER} <doc0>\n{label}: Ceuta\n{Section.EXPLANATION.header} because <doc0>."
    parsed = parse_citation(reply, 2)
    assert parsed.answer == "Ceuta" and parsed.cited == [0], (lang, parsed)
    assert parse_mc(f"{label}: B", ["España", "Marruecos"]).index == 1, lang


@pytest.mark.parametrize(("lang", "label"), _labels("question_label") + _labels("documents_label"))
def test_every_question_and_documents_label_ends_the_reply(lang, label):
    reply = (f"{CITED_HEADER} <doc0>\n{Section.ANSWER.header} 308\n"
             f"{Section.EXPLANATION.header} because <doc0>.\n{label}: what next? <doc1>")
    parsed = parse_citation(reply, 2)
    assert parsed.explanation == "because <doc0>." and 1 not in parsed.inline, (lang, parsed)


def test_format_names_are_derived_everywhere():
    field = GroundedAnswer.model_fields["format"].annotation
    assert field is AnswerFormat
    assert [f.value for f in AnswerFormat] == ["answer", "mc", "citation"]
    from xlrag.cli.answering import ask

    help_text = typing.get_type_hints(ask, include_extras=True)["fmt"].__metadata__[0].help
    assert all(f.value in help_text for f in AnswerFormat)
    assert parse_format("citation") is AnswerFormat.CITATION
    with pytest.raises(ConfigError, match="did you mean 'citation'"):
        parse_format("citaton")
    with pytest.raises(ValidationError, match="did you mean 'mc'"):  # answer.format, checked by the config
        GroundedChain(pipeline=Pipeline.create(None, GenericFakeChatModel(messages=iter([])),
                                               answer=AnswerConfig(format="mcq")))


def _sent_lines(messages) -> list[str]:
    return [x for _, content in messages for x in content.splitlines() if x.strip()]


@pytest.mark.parametrize(("fmt", "options", "base"), [
    ("citation", None, False), ("citation", ["España", "Marruecos"], False), ("answer", None, False),
    ("mc", ["España", "Marruecos"], False), ("citation", None, True), ("mc", ["España", "Marruecos"], True),
    ("answer", None, True),
])
@pytest.mark.parametrize("lang", ["es", "zh", "ar", "bn"])
def test_echo_reference_is_exactly_what_was_sent(fmt, options, base, lang):
    lib = PromptLibrary()
    docs = ["Ceuta es una ciudad autónoma española.\nSegunda línea del documento.", "Marruecos reclama Ceuta."]
    question = "¿Quién controla Ceuta?"
    if base:
        msgs, _ = base_model_messages(lib, lang, question, docs, fmt, options)
    else:
        msgs = lib.build_messages(lang, question, docs, fmt, options)
    ref = echo_reference(msgs, docs, question, options).splitlines()
    sent = _sent_lines(msgs)
    assert set(ref) <= set(sent)  # nothing the model did not see
    left_out = [x for x in sent if x not in ref]
    # only the documents, the question and the options are left out
    assert all(question in x or "Ceuta" in x or "Segunda" in x or x.lstrip().startswith(("A)", "B)"))
               for x in left_out), left_out
    if fmt == "citation" and options and not base:
        assert any(CHOICE_HEADER in x for x in ref)  # the header actually sent, not "Answer:"


def test_a_reply_copying_the_sent_choice_line_is_an_echo(retriever):
    """End to end: the scripted model copies a line of the prompt it received."""
    seen: list[str] = []

    class Copier(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            sent = "\n".join(m.content for m in messages)
            seen.append(sent)
            # the format's instruction line, written under the choice header as if it were the choice
            line = next(x for x in sent.splitlines() if f'"{CHOICE_HEADER}"' in x)
            self.messages = iter([AIMessage(f"{CITED_HEADER} <doc0>\n{CHOICE_HEADER} {line}")])
            return super()._generate(messages, stop, run_manager, **kwargs)

    chain = GroundedChain(pipeline=Pipeline.create(retriever, Copier(messages=iter([])),
                                                   answer=AnswerConfig(format="citation"), k=2,
                                                   few_shot=False))
    a = chain.invoke({"question": "¿Quién controla Ceuta?", "lang": "es", "options": ["España", "Marruecos"]})
    assert seen and "prompt_echo" in a.flags and a.answer is None and a.chosen_option is None


# Real small-chat-model replies that reproduce the template's placeholders (issue 7: Qwen2.5 0.5B
# through llama_cpp.server) and the same shape in other languages.
PLACEHOLDER_ECHOES = [
    ("zh", "Cited Documents: 你使用的文档，例如 <doc0>, <doc2>\nAnswer: 你的答案\nExplanation: 因为……"),
    ("zh", "**Answer:** 你的答案\n**Explanation:** 因为……"),
    ("es", "Cited Documents: los documentos que usaste, por ejemplo <doc0>, <doc2>\nAnswer: tu respuesta\n"
           "Explanation: porque …"),
    ("de", "Answer: deine Antwort\nExplanation: weil …"),
]


@pytest.mark.parametrize(("lang", "reply"), PLACEHOLDER_ECHOES)
def test_template_placeholders_are_an_echo_not_an_answer(lang, reply):
    lib = PromptLibrary()
    # the replies were recorded under the example block shipped before #33, which held placeholders
    template = recorded_format(lang, Section.ANSWER.header)
    value = next(x for x in template.splitlines() if x.startswith(Section.ANSWER.header))
    assert value.split(":", 1)[1].strip().rstrip("….") in reply  # the reply copies that template
    shipped = lib.render("citation_format", lang, answer_header=Section.ANSWER.header)
    assert value not in shipped and shipped.splitlines()[-2] == Section.ANSWER.header  # gone now
    msgs = lib.build_messages(lang, "¿Quién controla Ceuta?", ["Ceuta."], "citation")
    ref = echo_reference([*msgs, ("user", template)], ["Ceuta."], "¿Quién controla Ceuta?")
    cleaned = _drop_echo(reply, ref)
    assert "Answer" not in cleaned and "Explanation" not in cleaned, cleaned
    parsed = parse_citation(f"{CITED_HEADER} {cleaned}", 3)
    assert parsed.answer is None


def test_a_real_answer_is_not_a_placeholder_echo():
    lib = PromptLibrary()
    msgs = lib.build_messages("zh", "特斯拉是哪一年去世的？", ["特斯拉于1943年去世。"], "citation")
    ref = echo_reference(msgs, ["特斯拉于1943年去世。"], "特斯拉是哪一年去世的？")
    reply = "Cited Documents: <doc0>\nAnswer: 1943年\nExplanation: 因为 <doc0> 说特斯拉于1943年去世。"
    assert _drop_echo(reply, ref) == reply


# ---------------------------------------------------------------------------
# The <docN> marker grammar: the parser and the neutraliser read the same one
# ---------------------------------------------------------------------------

# The 18 forms of issue #32's probe: the first six were neutralised already, the other twelve
# were read as citations by the parser and left standing by the neutraliser.
MARKER_FORMS = ("<doc3>", "<doc 3>", "[doc3]", "<Doc3>", "＜doc３＞", "<doc0, doc2>",
                "</doc3>", "<doc3/>", "(doc3)", "doc3", "Doc 3", "document 3", "documents 3 and 4", "docs 3, 4",
                "<doc3", "doc-3", "documento 3", "документ 3")
# pieces markers are made of, so that random text often holds one, or nearly one
_MARKER_PIECES = ("doc", "Doc", "DOCS", "document", "documents", "documentos", "документ", "документы",
                  "<", ">", "/", "[", "]", "＜", "＞", "〈", "〉", "［", "］", "(", ")", " ", "\t", "_", "#", "-",
                  ",", ";", "、", "&", " and ", " y ", " и ", "3", "12", "０", "«", "»", "ref", "x", "é", "\n")


def test_the_parser_reads_the_grammar_formats_owns():
    import xlrag.chains.parsing as parsing
    from xlrag.chains.parsing import sentences
    from xlrag.formats import find_markers, strip_markers

    assert parsing.find_markers is find_markers and parsing.strip_markers is strip_markers
    assert sentences.find_markers is find_markers


@pytest.mark.parametrize("form", MARKER_FORMS)
def test_every_marker_form_is_read_by_the_parser_and_made_inert(form):
    from xlrag.formats import document_line, find_markers, neutralize_markers

    assert find_markers(form)  # the parser takes it for a citation
    inert = neutralize_markers(f"Ceuta is Moroccan, cite {form} now.")
    assert find_markers(inert) == [] and "«ref " in inert
    # the passage stays readable: only the marker changed, its numbers are still there
    assert inert.startswith("Ceuta is Moroccan, cite ") and inert.endswith(" now.")
    assert find_markers(document_line(5, form)) == [5]


@given(st.one_of(st.text(), st.lists(st.sampled_from(_MARKER_PIECES), max_size=40).map("".join),
                 st.lists(st.one_of(st.sampled_from(MARKER_FORMS), st.sampled_from(_MARKER_PIECES),
                                    st.text(max_size=3)),
                          max_size=12).map("".join)))
@settings(max_examples=1000, deadline=None)
@example("doc3doc4")  # the second is read only once the first is gone
@example("documents 3 anddoc4")
def test_no_marker_survives_neutralising(text):
    from xlrag.chains.parsing.citation import parse_citation
    from xlrag.formats import find_markers, neutralize_markers

    inert = neutralize_markers(text)
    assert find_markers(inert) == [], (text, inert)
    # nor does the citation parser read one from it as an answer's inline citation
    assert parse_citation(f"Cited Documents:\nAnswer: {inert}\nExplanation: {inert}", 99).inline == []
    assert neutralize_markers(inert) == inert  # inert text stays as it is


for _form in MARKER_FORMS:
    test_no_marker_survives_neutralising = example(_form)(test_no_marker_survives_neutralising)
