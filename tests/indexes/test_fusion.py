import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlrag.indexes.fusion import LEXICAL_TIE, fuse, fuse_channels, tier_ranks
from xlrag.indexes.store import StoreResult
from xlrag.schema import Passage


def res(store, scores):
    return StoreResult(store=store, query_text="q",
                       passages=[Passage(id=f"{store}{i}", doc_id=f"{store}{i}", text="t", lang=store)
                                 for i in range(len(scores))],
                       scores=scores)


# Same-language store: uniformly high cosine, no standout. Cross-language store:
# lower cosine overall, but one passage clearly above the rest (the relevant one).
SAME = res("ar", [0.86, 0.855, 0.85, 0.85, 0.845, 0.84])
CROSS = res("en", [0.82, 0.74, 0.73, 0.73, 0.72, 0.72])


def ids(fused):
    return [f.passage.id for f in fused]


def test_raw_score_buries_cross_language_evidence():
    assert "en0" not in ids(fuse([SAME, CROSS], "score", 5))


@pytest.mark.parametrize("method", ["zscore", "minmax", "rrf", "interleave"])
def test_per_store_fusions_surface_it(method):
    top = ids(fuse([SAME, CROSS], method, 5))
    assert "en0" in top[:2]


def test_interleave_alternates_with_best_store_first():
    assert ids(fuse([SAME, CROSS], "interleave", 4)) == ["ar0", "en0", "ar1", "en1"]


def test_single_store_order_is_the_cosine_order():
    for method in ("score", "zscore", "minmax", "rrf", "interleave"):
        assert ids(fuse([SAME], method, 6)) == [f"ar{i}" for i in range(6)]


def test_shares_are_exact_and_deficits_refilled():
    short = res("de", [0.9])  # only one passage in this store
    out = fuse([SAME, CROSS, short], "score", 6, {"ar": 2, "en": 2, "de": 2})
    stores = [f.store for f in out]
    assert stores.count("de") == 1 and len(out) == 6
    assert stores.count("ar") + stores.count("en") == 5


def test_fused_scores_keep_raw_cosine():
    out = fuse([SAME, CROSS], "zscore", 3)
    assert all(0 < f.raw_score <= 1 for f in out)


def test_unknown_fusion():
    from xlrag.errors import XlragError

    with pytest.raises(XlragError, match="unknown fusion 'magic'"):
        fuse([SAME], "magic", 3)


def test_fusion_methods_have_one_owner():
    import typing

    from xlrag.cli.retrieving import retrieve
    from xlrag.config import RetrievalConfig
    from xlrag.errors import ConfigError
    from xlrag.registry import available

    names = available("fusion")
    assert names == ["interleave", "minmax", "rrf", "score", "zscore"]
    for name in names:
        assert RetrievalConfig(fusion=name).fusion == name
    with pytest.raises(ValueError, match="unknown fusion 'magic'; choose one of: interleave"):
        RetrievalConfig(fusion="magic")
    from xlrag.config import load_config

    with pytest.raises(ConfigError, match="unknown fusion"):
        load_config(retrieval={"fusion": "magic"})
    help_text = typing.get_type_hints(retrieve, include_extras=True)["fusion"].__metadata__[0].help
    listed = help_text.split(": ", 1)[1].split(" (default")[0]
    assert sorted(x.strip() for x in listed.split(",")) == names


# -- channels inside one store: ties in one channel are no evidence -------------------------



def test_tied_scores_share_a_rank_and_the_next_rank_counts_them():
    assert tier_ranks({"a": 2.0, "b": 2.0, "c": 1.0}, 0.0) == {"a": 1, "b": 1, "c": 3}
    assert tier_ranks({"a": 9.0, "b": 8.9, "c": 3.0}, 0.05) == {"a": 1, "b": 1, "c": 3}
    assert tier_ranks({}, 0.1) == {}


def test_template_pages_tied_on_common_words_keep_the_dense_order():
    # eight pages that differ by a name the analyzer failed to match: BM25 scores them on the
    # template's words alone, a near-tie that length normalisation orders; dense finds the page
    dense = {f"p{i}": 0.9 - 0.01 * i for i in range(8)}
    lexical = {f"p{i}": 1.30 + 0.001 * ((i * 5) % 8) for i in range(8)}  # another order, within 1%
    fused = fuse_channels("fi", "q", dense, lexical, 8, hybrid=True)
    assert fused.ids == list(dense)


def test_a_distinctive_lexical_match_still_lifts_its_page():
    dense = {f"p{i}": 0.9 - 0.01 * i for i in range(8)}
    lexical = {f"p{i}": 1.3 for i in range(8)} | {"p3": 4.1}  # the name matched on p3 only
    fused = fuse_channels("fi", "q", dense, lexical, 8, hybrid=True)
    assert fused.ids.index("p3") < list(dense).index("p3")


scores = st.floats(min_value=0.01, max_value=50, allow_nan=False)


@given(st.lists(scores, min_size=1, max_size=12), st.floats(min_value=0.0, max_value=0.5))
def test_tier_ranks_are_competition_ranks_in_score_order(values, tie):
    s = {f"p{i}": v for i, v in enumerate(values)}
    ranks = tier_ranks(s, tie)
    ordered = sorted(s, key=lambda p: -s[p])
    assert ranks[ordered[0]] == 1
    for better, worse in itertools.pairwise(ordered):
        assert ranks[better] <= ranks[worse]  # never ranked above a higher score
    assert all(1 <= r <= len(s) for r in ranks.values())


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=2, max_size=10, unique=True),
       st.floats(min_value=0.1, max_value=40), st.data())
def test_lexical_scores_within_the_tie_never_reorder_dense(cosines, top, data):
    dense = dict(sorted(((f"p{i}", c) for i, c in enumerate(cosines)), key=lambda kv: -kv[1]))
    spread = data.draw(st.lists(st.floats(min_value=0, max_value=LEXICAL_TIE * top * 0.999),
                                min_size=len(dense), max_size=len(dense)))
    spread[data.draw(st.integers(0, len(spread) - 1))] = 0.0  # the top lexical score is ``top``
    lexical = {pid: top - d for pid, d in zip(dense, spread, strict=True)}
    assert fuse_channels("xx", "q", dense, lexical, len(dense), hybrid=True).ids == list(dense)
