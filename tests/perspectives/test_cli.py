"""`xlrag ask --perspectives`: one-line errors, the printed view, and the real local model end to end."""

from __future__ import annotations

import json

import pytest

from tests.clitools import error_line, run
from tests.perspectives.conftest import QUESTION, ByPrompt
from tests.perspectives.test_view import DISAGREE

GEMMA = "local:gemma-3-270m"


@pytest.mark.parametrize(("extra", "words"), [
    (["--relevant-langs", "en,xx"], "unknown language code 'xx' in relevant_langs"),
    (["--relevant-langs", "en,Spanish"], "did you mean 'es'?"),
    (["--relevant-langs", "en,fi"], "the index has no 'fi' store"),
    (["--relevant-langs", "en,es,de,ru", "--max-langs", "3"], "at most max_langs=3 languages"),
    (["--max-langs", "0"], "bad perspectives input max_langs"),
    (["--mode", "qlang"], "drop --mode (choose the languages with --relevant-langs)"),
    (["--format", "mc", "--option", "a", "--option", "b"], "--perspectives answers in the citation format"),
    (["--html", "/nonexistent-dir/x.html"], "the folder /nonexistent-dir does not exist"),
])
def test_bad_input_is_one_line(demo_index, extra, words):
    line = error_line(run("ask", QUESTION, "--index-dir", demo_index, "--llm", GEMMA, "--perspectives", *extra))
    assert words in line


def test_the_perspectives_options_need_perspectives(demo_index):
    line = error_line(run("ask", QUESTION, "--index-dir", demo_index, "--max-langs", "2"))
    assert "--max-langs and --html go with --perspectives" in line
    # --langs, never shipped: an unknown option
    old = run("ask", QUESTION, "--index-dir", demo_index, "--langs", "en,es")
    assert old.exit_code == 2, old.output
    assert "--langs" in old.output


def test_the_table_comes_first_then_the_verdict_with_both_sides(view, capsys):
    from xlrag.cli.perspectives import print_perspectives
    from xlrag.perspectives import to_html

    persp, _ = view(DISAGREE)
    result = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    print_perspectives(result)
    text = capsys.readouterr().out
    table, verdict = text.index("what each language's sources say"), text.index("verdict:")
    assert table < verdict and "the sources disagree" in text
    assert "Russian (ru)" in text and "24 points." in text and "xquad-00-ru" in text
    assert text.count("disagree (lexical") == 2 and "agree (en, es)" in text
    page = to_html(result)
    assert page.startswith("<!doctype html>") and "| Russian (ru) | 24 points." in page
    assert page.index("| language |") < page.index("Verdict: disagreement")


@pytest.mark.parametrize(("explanation", "env", "written"), [
    (None, {}, False),
    (True, {}, True),
    (None, {"XLRAG_AGENT__PERSPECTIVES__EXPLANATION": "true"}, True),
    (False, {"XLRAG_AGENT__PERSPECTIVES__EXPLANATION": "true"}, False),
])
def test_the_views_explanation_is_off_unless_asked_for(demo_index, monkeypatch, explanation, env, written):
    # the config `xlrag ask --perspectives [--explanation|--no-explanation]` builds its view from
    from xlrag.agents.build import Stack
    from xlrag.cli._app import _config
    from xlrag.cli.perspectives import view_config

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = view_config(_config(None, index_dir=demo_index, explanation=explanation), explanation)
    stack = Stack.build(cfg, llm=ByPrompt(answers={}), retriever=None)
    assert stack.perspectives_view.pipeline.answer_config.explanation is written


@pytest.mark.slow
def test_the_real_local_model_answers_each_language_and_compares(demo_index, monkeypatch, tmp_path):
    # gemma-3-270m, the fastest bundled model, over the demo index (XQuAD in six languages)
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "64")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    page = tmp_path / "view.html"
    result = run("ask", QUESTION, "--index-dir", demo_index, "--llm", GEMMA, "--perspectives",
                 "--relevant-langs", "en,es", "--json", "--html", page, "-k", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["lang"] == "en" and data["choice"]["source"] == "given"
    assert [p["lang"] for p in data["perspectives"]] == ["en", "es"]
    for p in data["perspectives"]:
        assert p["status"] in ("answered", "not_an_answer", "no_passages", "unverified")
        if p["answer"] is not None:
            # grounded in its own language's store only; every citation shown is one of those passages
            assert {h["passage"]["lang"] for h in p["answer"]["passages"]} == {p["lang"]}
            assert all(c["lang"] == p["lang"] for c in p["answer"]["citations"] if c["valid"])
            assert p["trace"]["mode"] == "oracle_lang" and p["trace"]["checks"]
            assert p["answer"]["explanation"] is None  # stopped at its header: the view does not show it
    answered = [p for p in data["perspectives"] if p["status"] == "answered"]
    costs = data["costs"]
    assert costs["answers"] == sum(p["answer"] is not None for p in data["perspectives"])
    assert costs["lexical_comparisons"] == len(data["pairs"]) == (1 if len(answered) == 2 else 0)
    assert costs["judge_calls"] == sum(p["method"] == "judge" for p in data["pairs"])
    assert data["status"] in ("consensus", "disagreement", "unsure", "single")
    assert (data["status"] == "single") == (len(answered) < 2)
    assert "Verdict:" in page.read_text(encoding="utf-8")


def test_the_html_page_carries_no_control_characters(view):
    """A model's (or a corpus's) escape sequences do not reach the page: html.escape leaves
    ESC, BEL and C1 controls as they are."""
    import re

    from xlrag.perspectives import to_html

    hostile = {**DISAGREE, "ru": ("24", "24 points.\x1b[2J\x07 \x9b31mred\x00")}
    persp, _ = view(hostile)
    result = persp.invoke({"question": QUESTION, "relevant_langs": ["en", "ru", "es"]})
    assert "\x1b" not in to_html.__globals__["to_markdown"](result)  # nor the Markdown report (issue #52)
    page = to_html(result)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", page), repr(page)
    assert "24 points.[2J 31mred" in page  # the words stay, only the controls go
