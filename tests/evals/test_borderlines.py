"""The BorderLines loader: the shipped excerpt, and the conversion of an upstream folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlrag.borderlines import EXCERPT, Territory, load_territories, read_upstream
from xlrag.errors import CorpusError, CorpusRowError, InvalidArgumentError

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "data" / "borderlines"


def test_the_shipped_excerpt_loads_and_maps_options_back():
    ts = load_territories()
    assert len(ts) == 13 and all(isinstance(t, Territory) for t in ts)
    taiwan = next(t for t in ts if t.territory == "Taiwan")
    assert set(taiwan.langs) == {"zh-Hans", "zh-Hant"}
    for t in ts:  # every option list is in the order of the claimants, so a position names a claimant
        for q in t.queries.values():
            assert len(q.choices) == len(t.claimants)
        assert t.claimant(len(t.claimants) - 1) == t.claimants[-1]
    with pytest.raises(InvalidArgumentError, match="did you mean 'Crimea'"):
        load_territories(names=["Crimae"])


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="needs the upstream BorderLines folder in ../shared")
def test_reading_upstream_reproduces_the_excerpt():
    excerpt = load_territories()
    assert read_upstream(UPSTREAM, [t.territory for t in excerpt]) == (excerpt, [])
    everything = load_territories(UPSTREAM)
    assert len(everything) == 251
    # claimants whose language has no query are left out of their MQS, and said so
    _, skipped = read_upstream(UPSTREAM)
    assert "Chagos Archipelago: Mauritius (mfe: no query)" in skipped


def test_bad_territory_files_fail_with_the_line(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_text(EXCERPT.read_text(encoding="utf-8").splitlines()[0] + "\n"
                   + '{"territory": "X", "claimants": ["A", "B"], "claimant_langs": {"C": "es"}}\n', encoding="utf-8")
    with pytest.raises(CorpusRowError, match=r"t.jsonl:2.*'C', which is not one of the claimants"):
        load_territories(bad)
    with pytest.raises(CorpusError, match="not a BorderLines folder"):
        load_territories(tmp_path)
