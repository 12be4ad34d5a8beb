"""Attribution reranking: the passage that supports the answer is cited first."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from xlrag.chains.attribution_rerank import AttributionReranker, rerank_citations
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import GroundedChain
from xlrag.config import AnswerConfig
from xlrag.schema import Citation, GroundedAnswer, Hit, Passage

PASSAGES = [Passage(id=f"p{i}", doc_id=f"d{i}", text=t, lang="en") for i, t in enumerate(
    ["Denver is a city in Colorado.", "Carolina lost Super Bowl 50.", "Denver won Super Bowl 50, 24-10."])]


def _answer(cited: list[int]) -> GroundedAnswer:
    hits = [Hit(passage=p, score=0, raw_score=0, rank=i + 1, store="en", mode="qlang") for i, p in enumerate(PASSAGES)]
    cites = [Citation(marker=m, passage_id=f"p{m}", doc_id=f"d{m}", lang="en", valid=True) for m in cited]
    return GroundedAnswer(question="Who won Super Bowl 50?", lang="en", format="citation", mode="qlang", model="m",
                          passages=hits, raw_output="", answer="Denver", citations=cites, flags=[])


def test_a_cited_supporting_passage_moves_to_the_front():
    out = rerank_citations(_answer([0, 2]), {"p2"})
    assert [c.passage_id for c in out.citations] == ["p2", "p0"] and out.flags == ["attribution_reranked"]
    assert all(c.source == "model" for c in out.citations)  # moved, still the model's own


def test_an_uncited_supporting_passage_is_added_first_as_the_rerankers():
    out = rerank_citations(_answer([0]), {"p1", "p2"})
    first = out.citations[0]
    # the retrieval order decides among uncited ones
    assert (first.passage_id, first.marker, first.source) == ("p1", 1, "attribution")
    assert [c.passage_id for c in out.citations[1:]] == ["p0"]


def test_nothing_supports_or_the_top_already_does():
    kept = rerank_citations(_answer([2, 0]), {"p2", "p0"})
    assert [c.passage_id for c in kept.citations] == ["p2", "p0"] and kept.flags == ["attribution_top_kept"]
    none = rerank_citations(_answer([0]), set())
    assert [c.passage_id for c in none.citations] == ["p0"] and none.flags == ["attribution_none"]


def test_the_chain_option_reranks_with_the_checkers_votes():
    from xlrag.checks.attribution import AttributionChecker

    votes = ['{"justification": "It says Denver is in Colorado.", "verdict": "not_attributable"}',
             '{"justification": "It is about Carolina.", "verdict": "not_attributable"}',
             '{"justification": "It says Denver won.", "verdict": "attributable"}']
    checker = AttributionChecker(GenericFakeChatModel(messages=iter([AIMessage(v) for v in votes])))
    reply = "Cited Documents: <doc0>\n\nAnswer: Denver <doc0>.\n\nExplanation: <doc0> names Denver."
    chain = GroundedChain(pipeline=Pipeline.create(None, GenericFakeChatModel(messages=iter([AIMessage(reply)])),
                                                   answer=AnswerConfig(format="citation"),
                                                   postprocessors=[AttributionReranker(checker)]))
    ans = chain.invoke({"question": "Who won Super Bowl 50?", "lang": "en", "passages": PASSAGES})
    assert [(c.passage_id, c.source) for c in ans.citations] == [("p2", "attribution"), ("p0", "model")]
    assert "attribution_reranked" in ans.flags
