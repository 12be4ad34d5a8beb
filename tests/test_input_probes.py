"""Issue #32's probes of the files and values a user hands xlrag, run as a user runs them (real
`xlrag` processes, real files): text that cannot be encoded, inputs too big to echo, YAML
nested 500 deep, a document of a million characters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

XLRAG = [str(Path(sys.executable).parent / "xlrag")]
ENV = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
GOOD = '{"id": "a", "lang": "en", "text": "Ceuta is a Spanish city on the north coast of Africa."}\n'
LAST = '{"id": "c", "lang": "en", "text": "Melilla is another Spanish city in North Africa."}\n'


def _xlrag(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*XLRAG, *map(str, args)], env={**ENV, **(env or {})}, capture_output=True, text=True,
                          timeout=600)


def _one_line_error(res: subprocess.CompletedProcess, *words: str) -> str:
    assert res.returncode == 2, res.stderr[-800:]
    # a transient progress bar (eval judge's) leaves an empty line off a terminal
    err = res.stderr.lstrip("\n")
    assert err.startswith("error: ") and err.count("\n") == 1, res.stderr[-800:]
    assert "Traceback" not in err
    for w in words:
        assert w in err, err[:800]
    return err


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("probes")
    (folder / "c.jsonl").write_text(GOOD + LAST, encoding="utf-8")
    res = _xlrag("index", "--corpus", folder / "c.jsonl", "--index-dir", folder / "ix")
    assert res.returncode == 0, res.stderr[-800:]
    return folder / "ix"


@pytest.mark.parametrize(("row", "reason"), [
    # a broken emoji from a JSON export: half a surrogate pair, escaped
    (b'{"id": "b", "lang": "en", "text": "broken \\ud83d emoji"}\n',
     "field 'text' holds a lone surrogate \\ud83d at character 8"),
    (b'{"id": "b", "lang": "en", "text": "caf' + b'\xe9"}\n', "not UTF-8 text (byte 0xe9 at column 39)"),
], ids=["lone-surrogate", "invalid-utf8"])
def test_text_that_cannot_be_encoded_is_a_row_error_of_xlrag_index(tmp_path, row, reason):
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(GOOD.encode() + row + LAST.encode())
    ix = tmp_path / "ix"
    # without --skip-bad: one line naming FILE:LINE and what to do; nothing written
    res = _xlrag("index", "--corpus", corpus, "--index-dir", ix)
    _one_line_error(res, f"{corpus}:2: {reason}", "pass --skip-bad")
    assert "Traceback" not in res.stderr and not ix.exists()
    # with --skip-bad: the row is reported and skipped, the rest indexed, the index complete
    res = _xlrag("index", "--corpus", corpus, "--index-dir", ix, "--skip-bad")
    assert res.returncode == 0, res.stderr[-800:]
    assert f"skipped: {corpus}:2: {reason}" in res.stderr
    assert "2 passages" in res.stdout and "1 bad rows skipped" in res.stdout
    assert json.loads((ix / "xlrag-index.json").read_text(encoding="utf-8"))["status"] == "complete"


def test_eval_items_that_cannot_be_encoded_are_one_line_errors(tmp_path):
    """eval judge --in reads its items with the same JSONL reader as a corpus."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "1", "question": "Where is Ceuta?", "gold": "Spain", "answer": "Spain \\udc00", '
                     '"lang": "en"}\n', encoding="utf-8")
    _one_line_error(_xlrag("eval", "judge", "--in", items, "--out", tmp_path / "v.jsonl"),
                    f"{items}:1: field 'answer' holds a lone surrogate \\udc00")
    items.write_bytes(b'{"id": "1", "question": "Where is Ceuta?", "gold": "Spain", "answer": "Espa\xf1a", '
                      b'"lang": "en"}\n')
    _one_line_error(_xlrag("eval", "judge", "--in", items, "--out", tmp_path / "v.jsonl"),
                    f"{items}:1: not UTF-8 text (byte 0xf1")


def test_huge_inputs_are_echoed_by_their_start_only(small_index):
    code, value = "x" * 60_000, "q" * 100_000
    for res, words in [
        (_xlrag("retrieve", "hello", "--index-dir", small_index, "--mode", "oracle_lang", "--target-lang", code),
         "unknown language code 'xxx"),
        (_xlrag("ask", "hello", "--index-dir", small_index, "--perspectives", "--relevant-langs", f"en,{code}"),
         "unknown language code 'xxx"),
        (_xlrag("info", env={"XLRAG_RETRIEVAL__MODE": value}), "unknown IR mode 'qqq"),
        (_xlrag("info", env={"XLRAG_INDEX_DIR": value}), "is not a usable path"),
        (_xlrag("info", env={"XLRAG_RETRIEVAL__FUSION": value}), "unknown fusion 'qqq"),
    ]:
        line = _one_line_error(res, words, "characters)")
        assert len(line) < 400, line[:800]


def test_the_echo_cap_is_one_helper_used_by_the_typed_errors():
    from xlrag.errors import InvalidArgumentError, LanguageNotIndexedError, UnknownLanguageError
    from xlrag.text import ECHO_LIMIT, capped
    from xlrag.validate import did_you_mean

    huge = "z" * 100_000
    assert capped("short") == "'short'" and capped(huge).endswith("… (100,000 characters)")
    assert len(capped(huge)) < ECHO_LIMIT + 30 and len(capped(list(range(10_000)))) == ECHO_LIMIT
    for err in (UnknownLanguageError(huge), LanguageNotIndexedError(huge, ["en"]),
                InvalidArgumentError("k", "x", huge)):
        assert capped(huge) in str(err) and len(str(err)) < 600
    assert did_you_mean(huge, ["zz"]) == ""


@pytest.mark.parametrize("kind", ["config", "experiment"])
def test_yaml_nested_500_deep_is_a_one_line_error(tmp_path, kind):
    deep = "[" * 500 + "]" * 500
    path = tmp_path / f"{kind}.yaml"
    if kind == "config":
        path.write_text(f"retrieval: {deep}\n", encoding="utf-8")
        res = _xlrag("info", "--config", path)
    else:
        path.write_text(f"name: deep\ndatasets: {deep}\n", encoding="utf-8")
        res = _xlrag("eval", "run", path, "--out", tmp_path / "run")
    _one_line_error(res, f"{path} is not valid YAML: lists or mappings nested more than 64 levels deep")
    assert "RecursionError" not in res.stderr


def _huge_corpus(path: Path) -> Path:
    # a million characters, mostly blanks between sentences, so that embedding stays cheap
    text = "\n".join(f"Sentence {i} says Ceuta is a Spanish city on the coast." + " " * 55_000 for i in range(20))
    path.write_text(json.dumps({"id": "huge-doc", "lang": "en", "text": text}) + "\n" + LAST, encoding="utf-8")
    return path


def test_a_huge_document_is_announced_once_with_its_id_and_size(tmp_path):
    corpus = _huge_corpus(tmp_path / "c.jsonl")
    res = _xlrag("index", "--corpus", corpus, "--index-dir", tmp_path / "ix")
    assert res.returncode == 0, res.stderr[-800:]
    assert res.stderr.count("warning: document 'huge-doc' is 1.1 million characters: splitting and embedding it "
                            "can take minutes") == 1, res.stderr[-800:]
    assert "'c'" not in res.stderr  # only the huge one


def test_progress_is_reported_while_a_huge_document_is_split_and_embedded(tmp_path, embedder):
    from xlrag.config import SplitterConfig
    from xlrag.indexes.corpus import load_corpus
    from xlrag.indexes.indexer import index_documents

    docs = load_corpus(_huge_corpus(tmp_path / "c.jsonl")).documents
    calls: list[tuple[int, int, str]] = []
    notices: list[str] = []
    report = index_documents(docs, tmp_path / "ix", embedder, SplitterConfig(), batch_size=2,
                             progress=lambda *a: calls.append(a), notice=notices.append)
    assert len(notices) == 1 and "'huge-doc'" in notices[0]
    splitting = [c for c in calls if c[2] == "splitting 'huge-doc'"]
    assert len(splitting) >= 5 and splitting[-1][0] == splitting[-1][1] == len(docs[0].text)
    assert [c[0] for c in splitting] == sorted(c[0] for c in splitting)
    embedding = [c for c in calls if c[2] == "en"]
    # one call per batch of two passages: the bar moves while the document is embedded
    assert len(embedding) == -(-report.added // 2) and embedding[-1][0] == report.added
