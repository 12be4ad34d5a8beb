import pytest

from xlrag.indexes.fusion import fuse
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
