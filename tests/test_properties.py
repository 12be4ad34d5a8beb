"""Property tests: whatever the input, only xlrag's typed errors come out.

The corpus loader reads files users did not write for xlrag; the reply parsers read
whatever a model says. Neither may crash with anything but an XlragError.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlrag.chains.parsing import find_markers, parse_citation, parse_mc, strip_markers
from xlrag.errors import XlragError
from xlrag.indexes.corpus import load_corpus

PROPERTY = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_DIR = Path(tempfile.mkdtemp(prefix="xlrag-props-"))


@pytest.fixture(scope="module")
def detector():
    from xlrag.detect import LinguaDetector

    return LinguaDetector(["en", "es", "ar", "zh"])


def _load(name: str, data: bytes, detector) -> None:
    path = _DIR / name
    path.write_bytes(data)
    try:
        load_corpus(path, detector=detector)
    except XlragError as e:
        assert "\n" not in str(e), str(e)  # one line, as the CLI prints it


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
fields = st.sampled_from(["id", "text", "lang", "title", "metadata", "extra"])
rows = st.dictionaries(fields, json_values | st.sampled_from(["en", "es", "zh-Hant", "iw", "xx", "", "Ceuta"]),
                       max_size=6)


@PROPERTY
@given(data=st.binary(max_size=300))
def test_corpus_loader_on_arbitrary_bytes(data, detector):
    _load("raw.jsonl", data, detector)


@PROPERTY
@given(lines=st.lists(rows | json_values, min_size=1, max_size=5))
def test_corpus_loader_on_arbitrary_json_rows(lines, detector):
    text = "\n".join(json.dumps(x, ensure_ascii=False) for x in lines)
    _load("rows.jsonl", text.encode("utf-8"), detector)


@PROPERTY
@given(text=st.text(max_size=300), encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]))
def test_corpus_loader_on_arbitrary_csv(text, encoding, detector):
    _load("rows.csv", ("id,text,lang,title\n" + text).encode(encoding, errors="surrogatepass"), detector)


replies = st.text(max_size=400) | st.lists(
    st.sampled_from(["Cited Documents:", "Answer:", "Chosen Option:", "Explanation:", "<doc0>", "<doc12>",
                     "[doc3]", "<doc", "Respuesta:", "Pregunta:", "A)", "B", "España", "\n", " ", "因为……",
                     "```", "**", "<|im_end|>", "1, 2", "ب"]) | st.text(max_size=12),
    max_size=30).map("".join)


@PROPERTY
@given(reply=replies, n_docs=st.integers(min_value=0, max_value=12))
def test_citation_parser_never_crashes(reply, n_docs):
    try:
        parsed = parse_citation(reply, n_docs)
    except XlragError:
        return
    assert all(n >= 0 for n in parsed.cited + parsed.inline)
    assert set(parsed.invalid) <= {n for n in parsed.cited + parsed.inline if n >= n_docs}
    find_markers(reply)
    strip_markers(reply)


@PROPERTY
@given(reply=replies, options=st.lists(st.text(min_size=1, max_size=15), min_size=2, max_size=5, unique=True))
def test_mc_parser_never_crashes_and_never_invents_an_option(reply, options):
    try:
        parsed = parse_mc(reply, options)
    except XlragError:
        return
    if parsed.status == "ok":
        assert parsed.index is not None and parsed.option == options[parsed.index]
    else:
        assert parsed.index is None and parsed.option is None
