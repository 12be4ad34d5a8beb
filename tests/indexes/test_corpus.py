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
    with pytest.raises(CorpusRowError, match=r"missing_text.jsonl:2: missing or empty text"):
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
