import json

import pytest

from tests.conftest import DATA, TEST_DATA
from xlrag.errors import CorpusError, CorpusRowError
from xlrag.indexes.corpus import FieldMap, load_corpus

BAD = TEST_DATA / "bad"


def test_vendored_corpora_load():
    travel = load_corpus(DATA / "travel" / "corpus.jsonl")
    assert len(travel.documents) == 191
    assert {d.lang for d in travel.documents} == {"ar", "en"}
    xquad = load_corpus(DATA / "xquad" / "corpus.jsonl")
    assert {d.lang for d in xquad.documents} == {"ar", "de", "en", "es", "ru", "zh"}
    assert xquad.documents[0].metadata["parallel_id"].startswith("xquad-")


@pytest.mark.parametrize("name", ["corpus.csv", "corpus.parquet"])
def test_csv_and_parquet(name):
    loaded = load_corpus(BAD / name)
    assert len(loaded.documents) == 6
    assert sorted(d.lang for d in loaded.documents) == ["ar"] * 3 + ["en"] * 3
    assert all(d.title for d in loaded.documents)


def test_field_mapping(tmp_path):
    f = tmp_path / "c.jsonl"
    rows = [{"uid": "a", "body": "Berlin ist die Hauptstadt Deutschlands.", "country": "DE", "city": "Berlin"},
            {"uid": "b", "body": "Paris est la capitale de la France.", "country": "FR", "city": "Paris"}]
    f.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    fields = FieldMap.parse("id=uid,text=body,lang=,title=,metadata=country|city")
    loaded = load_corpus(f, fields)
    assert [d.id for d in loaded.documents] == ["a", "b"]
    assert [d.lang for d in loaded.documents] == ["de", "fr"]  # detected
    assert loaded.documents[0].metadata["country"] == "DE" and loaded.documents[0].metadata["lang_detected"]
    with pytest.raises(CorpusError, match="bad field mapping"):
        FieldMap.parse("body")


def test_malformed_json_names_file_and_line():
    with pytest.raises(CorpusRowError) as e:
        load_corpus(BAD / "bad_json.jsonl")
    assert e.value.line == 4 and "bad_json.jsonl:4" in str(e.value) and "--skip-bad" in str(e.value)


def test_skip_bad_reports_count():
    loaded = load_corpus(BAD / "bad_json.jsonl", skip_bad=True)
    assert len(loaded.documents) == 4 and len(loaded.skipped) == 1
    assert loaded.skipped[0].line == 4


def test_missing_text_and_unknown_lang():
    with pytest.raises(CorpusRowError, match=r"missing_text.jsonl:2: missing text field"):
        load_corpus(BAD / "missing_text.jsonl")
    with pytest.raises(CorpusRowError, match=r"unknown_lang.jsonl:3: unknown language code 'xx-notalang'"):
        load_corpus(BAD / "unknown_lang.jsonl")


def test_missing_file():
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(BAD / "nope.jsonl")


def test_language_detected_when_missing():
    loaded = load_corpus(BAD / "nolang.jsonl")
    assert sorted(d.lang for d in loaded.documents) == ["ar", "ar", "de", "en"]
    assert loaded.detected == 4


def test_nonstandard_codes_keep_script():
    docs = load_corpus(BAD / "zh_codes.jsonl").documents
    assert [d.lang for d in docs] == ["zh", "zh", "he"]
    assert [d.metadata.get("script") for d in docs] == ["Hans", "Hant", None]
    assert docs[0].metadata["lang_original"] == "zhs"


def test_duplicate_ids(tmp_path):
    f = tmp_path / "dup.jsonl"
    f.write_text('{"id": "1", "text": "Hello there.", "lang": "en"}\n{"id": "1", "text": "Again.", "lang": "en"}\n')
    with pytest.raises(CorpusRowError, match="duplicate id '1' \\(first on line 1\\)"):
        load_corpus(f)


ROW = '{"id": "d1", "text": "Ceuta es una ciudad autónoma española.", "lang": "es"}\n'


@pytest.mark.parametrize(("name", "data"), [
    ("bom.jsonl", b"\xef\xbb\xbf" + ROW.encode()),
    ("utf16.jsonl", ROW.encode("utf-16")),  # with its BOM, as Windows tools write it
    ("bom.csv", b"\xef\xbb\xbfid,text,lang\nd1,Ceuta es una ciudad aut\xc3\xb3noma espa\xc3\xb1ola.,es\n"),
])
def test_bom_and_utf16_corpora_are_read(tmp_path, name, data):
    f = tmp_path / name
    f.write_bytes(data)
    (doc,) = load_corpus(f).documents
    assert (doc.id, doc.lang) == ("d1", "es") and doc.text.startswith("Ceuta es una ciudad autónoma")


def test_undecodable_and_unreadable_corpora_are_one_line_errors(tmp_path):
    f = tmp_path / "latin1.jsonl"
    f.write_bytes('{"id": "d1", "text": "caf\xe9", "lang": "fr"}\n'.encode("latin-1"))
    # one row's bytes, named by its line: the other rows may still be read (--skip-bad)
    with pytest.raises(CorpusRowError, match=r"latin1.jsonl:1: not UTF-8 text \(byte 0xe9 at column 26\); "
                                             r"save the file as UTF-8") as e:
        load_corpus(f)
    assert "\n" not in str(e.value)
    # Tests run as root, where permissions are not enforced; a file whose read fails at the
    # OS level takes the same path (/proc/self/mem reads fail with EIO at offset 0).
    g = tmp_path / "unreadable.jsonl"
    g.symlink_to("/proc/self/mem")
    with pytest.raises(CorpusError, match=r"cannot read corpus file .*unreadable.jsonl"):
        load_corpus(g)


def test_text_of_the_wrong_type_is_named(tmp_path):
    f = tmp_path / "num.jsonl"
    f.write_text('{"id": "d1", "text": 12345, "lang": "en"}\n', encoding="utf-8")
    with pytest.raises(CorpusRowError, match="text field 'text' must be a string, got int"):
        load_corpus(f)


def test_skip_bad_hint_only_where_it_helps(tmp_path):
    with pytest.raises(CorpusRowError, match="pass --skip-bad"):
        load_corpus(BAD / "bad_json.jsonl")
    loaded = load_corpus(BAD / "bad_json.jsonl", skip_bad=True)
    assert "--skip-bad" not in str(loaded.skipped[0]) and "bad_json.jsonl:4" in str(loaded.skipped[0])


def test_text_that_cannot_be_encoded_is_a_skippable_row(tmp_path):
    """A lone surrogate (a broken emoji's JSON escape) or bytes that are not UTF-8, in JSONL and
    in CSV (and in a CSV's metadata JSON): each a row error naming its line, skipped with
    --skip-bad; the good rows are read."""
    good = '{"id": "a", "lang": "en", "text": "Ceuta is a Spanish city."}\n'
    cases = {
        "sur.jsonl": (good + '{"id": "b", "lang": "en", "text": "broken \\ud83d emoji"}\n').encode(),
        "meta.jsonl": (good
                       + '{"id": "b", "lang": "en", "text": "ok", "metadata": {"t": ["x", "\\udc00"]}}\n').encode(),
        "bytes.jsonl": good.encode() + b'{"id": "b", "lang": "en", "text": "bad \xff byte"}\n',
        "bytes.csv": b"id,lang,text\na,en,Ceuta is a Spanish city.\nb,en,bad \xff byte\n",
        "meta.csv": b'id,lang,text,metadata\na,en,Ceuta is a Spanish city.,\nb,en,ok,"{""t"": ""\\ud800""}"\n',
    }
    reasons = {"sur.jsonl": "field 'text' holds a lone surrogate \\ud83d at character 8",
               "meta.jsonl": "field 'metadata.t[1]' holds a lone surrogate \\udc00",
               "bytes.jsonl": "not UTF-8 text (byte 0xff",
               "bytes.csv": "not UTF-8 text (byte 0xff",
               "meta.csv": "field 'metadata.t' holds a lone surrogate \\ud800"}
    for name, data in cases.items():
        f = tmp_path / name
        f.write_bytes(data)
        with pytest.raises(CorpusRowError) as e:
            load_corpus(f)
        assert e.value.line == (3 if name.endswith(".csv") else 2), (name, str(e.value))
        assert reasons[name] in str(e.value) and "--skip-bad" in str(e.value), (name, str(e.value))
        loaded = load_corpus(f, skip_bad=True)
        assert [d.id for d in loaded.documents] == ["a"] and [s.line for s in loaded.skipped] == [e.value.line]
    # a valid pair is a character like any other
    f = tmp_path / "pair.jsonl"
    f.write_text('{"id": "a", "lang": "en", "text": "an emoji \\ud83d\\ude00 whole"}\n', encoding="utf-8")
    assert load_corpus(f).documents[0].text == "an emoji \U0001f600 whole"


def test_clumsy_corpus_messages_say_what_happened_and_what_to_do(tmp_path):
    with pytest.raises(CorpusError, match=r"is a directory, not a file; pass the corpus file itself"):
        load_corpus(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"holds no rows; write one JSON object per line"):
        load_corpus(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"all 1 rows were skipped as malformed \(the first: line 1, missing text "
                                          r"field 'text'\); fix them and index again"):
        load_corpus(bad, skip_bad=True)
    odd = tmp_path / "corpus"
    odd.write_text("x", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"unsupported format '\(no extension\)'; save it as .jsonl, .csv"):
        load_corpus(odd)
