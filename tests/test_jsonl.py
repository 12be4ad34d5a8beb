"""The one JSONL reader: line numbers, blank lines, and errors that name the line."""

from __future__ import annotations

import pytest

from xlrag.errors import CorpusError, CorpusRowError
from xlrag.jsonl import read_objects


def test_objects_with_their_line_numbers(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"a": 1}\n\n  \n{"a": 2}\n', encoding="utf-8")
    assert list(read_objects(path, "queries")) == [(1, {"a": 1}), (4, {"a": 2})]


@pytest.mark.parametrize(("text", "message"), [('{"a": 1}\n{"a": \n', r"q\.jsonl:2: invalid JSON"),
                                               ('{"a": 1}\n[1, 2]\n', r"q\.jsonl:2: .*JSON object, not a JSON list")])
def test_bad_lines_are_named(tmp_path, text, message):
    path = tmp_path / "q.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusRowError, match=message):
        list(read_objects(path, "queries"))


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match=r"queries file .* does not exist"):
        list(read_objects(tmp_path / "nope.jsonl", "queries"))
    with pytest.raises(CorpusError, match="is a directory"):
        list(read_objects(tmp_path, "queries"))
