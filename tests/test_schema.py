"""The carriers of xlrag.schema hold what they say: a Retrieval is a model, its hits a field."""

from xlrag.schema import Hit, Passage, Retrieval, make_query


def _retrieval() -> Retrieval:
    hits = [Hit(passage=Passage(id=f"p{i}", doc_id=f"d{i}", lang="en", text=f"passage {i}"), score=1.0 / i,
                raw_score=0.5, rank=i, store="en", mode="qlang") for i in (1, 2)]
    return Retrieval(query=make_query("who?", lang="en", id="q1"), mode="qlang", hits=hits)


def test_a_retrieval_is_a_model_not_its_hits():
    r = _retrieval()
    # pydantic's own iteration: (field, value) pairs, so a caller that meant the hits fails at once
    assert list(r) != r.hits and dict(r)["hits"] == r.hits
    assert [h.id for h in r.hits] == ["p1", "p2"]
    assert not {"__iter__", "__getitem__", "__len__", "__bool__"} & set(vars(Retrieval))
    assert not any(hasattr(Retrieval, name) for name in ("__getitem__", "__len__", "__bool__"))
    # an empty retrieval is still a retrieval (its notes say why it is empty): never falsy
    assert bool(Retrieval(query=make_query("who?", lang="en"), mode="qlang"))
