"""benchmarks/request_fingerprint.py tells a request that changed from passages that changed."""

from __future__ import annotations

from tests.evals.benchmarks import load_benchmark


def _row(arm: str, qid: str, passages: list[str], digest: str, texts: list[str] | None = None) -> dict:
    return {"arm": arm, "id": qid, "lang": "en", "passages": passages, "texts": texts or passages, "digest": digest}


def test_a_changed_prompt_over_the_same_passages_is_told_apart_from_other_passages():
    compare = load_benchmark("request_fingerprint").compare
    theirs = {"commit": "abc", "rows": [_row("chain/now", "q1", ["d1", "d2"], "x1"),
                                        _row("chain/now", "q2", ["d3"], "x2"),
                                        _row("chain/now", "q3", ["d4"], "x3"),
                                        _row("chain/now", "q4", ["d5"], "x4"),
                                        _row("chain/now", "q5", ["d6"], "x5", texts=["part 1"])]}
    ours = [_row("chain/now", "q1", ["d1", "d2"], "x1"),  # the same request
            _row("chain/now", "q2", ["d3"], "y2"),  # the same passages, another prompt
            _row("chain/now", "q3", ["d9"], "y3"),  # other passages
            _row("chain/now", "q5", ["d6"], "y5", texts=["part 2"]),  # another part of the same page
            _row("chain/k5", "q1", ["d1"], "z1")]  # not in theirs
    out = compare(ours, theirs)
    assert out["against"] == "abc"
    assert out["arms"]["chain/now"] == {"n": 4, "differ": ["q2", "q3", "q5"], "passages_differ": ["q3", "q5"]}
    assert out["arms"]["chain/k5"] == {"n": 1, "differ": ["q1"], "passages_differ": ["q1"]}
    assert out["missing"] == [str(("chain/now", "q4"))]


def test_demo_rows_are_compared_by_format_language_and_mode():
    compare = load_benchmark("request_fingerprint").compare
    row = {"format": "citation", "lang": "ar", "mode": "qlang", "passages": ["d1"], "digest": "x"}
    out = compare([row], {"commit": "abc", "rows": [{**row, "digest": "y"}]})
    assert out["arms"]["citation"] == {"n": 1, "differ": [("citation", "ar", "qlang")], "passages_differ": []}
