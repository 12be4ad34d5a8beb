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


@pytest.mark.parametrize(("data", "message"), [
    (b'{"a": 1}\n{"q": "broken \\ud83d emoji"}\n', r"q\.jsonl:2: field 'q' holds a lone surrogate \\ud83d"),
    (b'{"a": 1}\n{"q": "caf\xe9"}\n', r"q\.jsonl:2: not UTF-8 text \(byte 0xe9 at column 11\); save the file as UTF-8"),
])
def test_text_that_cannot_be_encoded_is_named_by_its_line(tmp_path, data, message):
    """Queries, items, labels and territories are read by this one reader: a broken emoji or a
    byte that is not UTF-8 is a one-line error naming the line, not a traceback."""
    path = tmp_path / "q.jsonl"
    path.write_bytes(data)
    with pytest.raises(CorpusRowError, match=message) as e:
        list(read_objects(path, "queries"))
    assert "--skip-bad" not in str(e.value) and "\n" not in str(e.value)


def test_records_refuse_a_line_that_cannot_be_read(tmp_path):
    """The resume reader never cuts a file at a bad line that is not its last (#32: only a torn
    last line is repaired): bytes that are not UTF-8 are an error naming the line, the file kept."""
    import pytest

    from xlrag.errors import OutputPathError
    from xlrag.evals.run_folder import read_records

    path = tmp_path / "records.jsonl"
    raw = b'{"key": "1"}\n{"key": "\xff"}\n{"key": "3"}\n'
    path.write_bytes(raw)
    with pytest.raises(OutputPathError, match="2"):
        read_records(path, repair=True)
    assert path.read_bytes() == raw
