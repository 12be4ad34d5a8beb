"""Inputs are validated at the boundary: wrong names, types and values give one typed line."""

from __future__ import annotations

import warnings

import pytest
from typer.testing import CliRunner

from xlrag.cli import app
from xlrag.config import check_environment, load_config
from xlrag.errors import (
    ConfigError,
    EmptyQueryError,
    InvalidArgumentError,
    XlragError,
    XlragWarning,
)
from xlrag.schema import Retrieval, make_query

runner = CliRunner()
QUESTION = "How many points did the Panthers defense surrender?"


def one_line_error(result) -> str:
    lines = [x for x in result.output.strip().splitlines() if x.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


def test_a_misspelled_keyword_names_the_right_one(retriever):
    with pytest.raises(TypeError, match=r"'target_lan'.*did you mean 'target_lang'"):
        retriever.prepare(QUESTION, target_lan="es")
    with pytest.raises(TypeError, match=r"'chanels'.*did you mean 'channels'"):
        retriever.retrieve(QUESTION, mode="swap_docs", chanels="dense")
    with pytest.raises(TypeError, match="did you mean 'relevant_langs'"):
        retriever.prepare(QUESTION, relevant_lang=["es"])


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_k_must_be_a_whole_number_of_at_least_one(retriever, k):
    with pytest.raises(InvalidArgumentError, match="k must be a whole number >= 1") as e:
        retriever.retrieve(make_query(QUESTION, lang="en"), k=k)
    assert "\n" not in str(e.value)


def test_k_is_checked_in_every_path(retriever):
    from xlrag.indexes.langchain import XlragLangChainRetriever
    from xlrag.indexes.llamaindex import XlragLlamaRetriever

    with pytest.raises(InvalidArgumentError):
        XlragLlamaRetriever(retriever, k=0)
    with pytest.raises(XlragError):
        XlragLangChainRetriever(retriever=retriever, k=0)
    with pytest.raises(ConfigError, match=r"retrieval\.k"):
        load_config(retrieval={"k": 0})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"text": 42}, "question must be the question as text, got int 42"),
    ({"text": "q", "relevant_langs": "es"}, "relevant_langs must be a list of language codes"),
    ({"text": "q", "lang": 3}, "lang must be a language code"),
])
def test_wrong_types_are_typed_one_line_errors(kwargs, message):
    text = kwargs.pop("text")
    with pytest.raises(InvalidArgumentError, match=message) as e:
        make_query(text, **kwargs)
    assert "\n" not in str(e.value) and "pydantic" not in str(e.value)
    with pytest.raises(EmptyQueryError):
        make_query("   ")


def test_results_carry_the_plans_notes_and_completeness(retriever):
    hits = retriever.retrieve(make_query("Kuinka monta pistettä Panthers päästi?", lang="fi"), mode="qlang")
    assert isinstance(hits, Retrieval) and hits.hits == [] and hits.complete and hits.query.lang == "fi"
    assert hits.notes == ["no 'fi' store in this index"]
    hits = retriever.retrieve(make_query(QUESTION, target_lang="fi", lang="en"), mode="swap_docs")
    assert any("'fi'" in n for n in hits.notes)
    hits = retriever.retrieve(make_query(QUESTION, lang="en"), mode="qlang", k=2)
    assert len(hits.hits) == 2 and hits.notes == [] and hits.complete


def test_a_half_built_index_says_so(retriever, xquad_index):
    stores = retriever.stores
    before = stores.manifest
    try:
        stores.manifest = before.model_copy(update={"status": "building"})
        assert retriever.retrieve(make_query(QUESTION, lang="en"), mode="qlang").complete is False
        res = runner.invoke(app, ["retrieve", "-i", str(xquad_index), "--mode", "qlang", "--lang", "fi", QUESTION])
        assert res.exit_code == 0
        assert "note: no 'fi' store in this index" in res.output
    finally:
        stores.manifest = before


def test_an_overlong_question_is_cut_to_the_window_with_a_warning(retriever):
    long_q = QUESTION + " " + "lorem ipsum dolor sit amet " * 400
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = retriever.retrieve(make_query(long_q, lang="en"), mode="qlang", k=1)
    assert hits.hits and any(issubclass(w.category, XlragWarning) and "512-token window" in str(w.message)
                        for w in caught)


def test_unknown_environment_variables_warn_with_the_nearest_and_never_abort(monkeypatch):
    with pytest.warns(XlragWarning, match="XLRAG_RETREIVAL__K ignored; did you mean XLRAG_RETRIEVAL__K"):
        assert check_environment({"XLRAG_RETREIVAL__K": "3"}) == ["XLRAG_RETREIVAL__K"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known names and a platform's own variables: not a word
        assert check_environment({"XLRAG_RETRIEVAL__K": "3", "XLRAG_CACHE_DIR": "/tmp", "XLRAG_LLM": "{}",
                                  "PATH": "/bin"}) == []
        # what Kubernetes injects into every pod for a Service named xlrag
        k8s = {"XLRAG_PORT": "tcp://10.0.0.7:8000", "XLRAG_SERVICE_HOST": "10.0.0.7", "XLRAG_SERVICE_PORT": "8000",
               "XLRAG_SERVICE_PORT_HTTP": "8000", "XLRAG_PORT_8000_TCP": "tcp://10.0.0.7:8000",
               "XLRAG_PORT_8000_TCP_PROTO": "tcp", "XLRAG_PORT_8000_TCP_PORT": "8000",
               "XLRAG_PORT_8000_TCP_ADDR": "10.0.0.7"}
        assert check_environment(k8s) == []
    # start-up goes on, the setting it meant is not applied, and the CLI says so in one line
    monkeypatch.setenv("XLRAG_RETREIVAL__K", "3")
    with pytest.warns(XlragWarning, match="XLRAG_RETREIVAL__K"):
        assert load_config().retrieval.k == 5
    res = runner.invoke(app, ["retrieve", "--index-dir", "/nonexistent-xlrag-index", "q"])
    assert "warning: unknown environment variable XLRAG_RETREIVAL__K ignored; did you mean " in res.output


def test_settings_the_local_embedder_ignores_are_errors(monkeypatch):
    monkeypatch.setenv("XLRAG_EMBEDDER__MODEL", "foo")
    with pytest.raises(ConfigError, match=r"local embedder .* takes no model"):
        load_config()
    monkeypatch.delenv("XLRAG_EMBEDDER__MODEL")
    with pytest.raises(ConfigError, match="takes no base_url"):
        load_config(embedder={"base_url": "http://127.0.0.1:9"})
    assert load_config(embedder={"name": "openai", "model": "text-embedding-3-small"}).embedder.model


def test_out_paths_are_checked_before_any_work(xquad_index, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "question": "Who won?", "lang": "en"}\n', encoding="utf-8")
    missing = tmp_path / "nope" / "out.jsonl"
    line = one_line_error(runner.invoke(app, ["retrieve", "-i", str(xquad_index), "--queries", str(queries),
                                              "--out", str(missing)]))
    assert "does not exist" in line
    line = one_line_error(runner.invoke(app, ["retrieve", "-i", str(xquad_index), "--queries", str(queries),
                                              "--out", str(tmp_path)]))
    assert "is a directory" in line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "question": "Who won?", "relevant_langs": "es"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    line = one_line_error(runner.invoke(app, ["retrieve", "-i", str(xquad_index), "--queries", str(bad),
                                              "--out", str(out)]))
    assert "relevant_langs must be a list" in line and "--skip-bad" not in line
    assert not list(tmp_path.glob("*.tmp")) and not out.exists()


@pytest.mark.parametrize("command", ["retrieve", "ask"])
def test_k_zero_on_the_command_line_is_an_error_not_the_default(xquad_index, command):
    line = one_line_error(runner.invoke(app, [command, "-i", str(xquad_index), "-k", "0", QUESTION]))
    assert "retrieval.k" in line and "greater than or equal to 1" in line


def test_ask_refuses_overlong_questions_and_single_options(xquad_index):
    line = one_line_error(runner.invoke(app, ["ask", "-i", str(xquad_index), "x" * 2001]))
    assert "over the limit of 2000" in line
    line = one_line_error(runner.invoke(app, ["ask", "-i", str(xquad_index), "-f", "mc", "--option", "España",
                                              "¿Quién controla Ceuta?"]))
    assert "at least two answer options" in line


def test_langchain_retriever_takes_per_call_k_mode_and_fields(retriever):
    from xlrag.indexes.langchain import XlragLangChainRetriever

    lc = XlragLangChainRetriever(retriever=retriever, mode="all", k=5)
    assert len(lc.invoke(QUESTION)) == 5
    docs = lc.invoke(QUESTION, k=1)
    assert len(docs) == 1
    docs = lc.invoke(QUESTION, k=3, mode="rel_langs", lang="en", relevant_langs=["ru"])
    assert {d.metadata["lang"] for d in docs} <= {"en", "ru"} and docs[0].metadata["mode"] == "rel_langs"
    with pytest.raises(TypeError, match="did you mean 'relevant_langs'"):
        lc.invoke(QUESTION, relevant_lang=["ru"])


def test_the_query_fields_travel_in_a_query_not_as_keywords(retriever):
    new = retriever.retrieve(make_query(QUESTION, lang="en"), mode="qlang", k=2)
    assert new.query.lang == "en"
    with pytest.raises(TypeError, match="lang"):
        retriever.retrieve(QUESTION, mode="qlang", lang="en", k=2)
