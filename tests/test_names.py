"""One name per concept (issue #35): the IR mode is ``mode`` everywhere (never ``policy``), the
languages of sources are ``relevant_langs`` (never ``langs``), and ``-k`` is the passages shown
(``eval retrieval``'s ranking depth is ``--depth``), index health is ``complete``
and ``notes`` on retrievals and answers alike. xlrag 0.1.0 never shipped the old names, so
none is accepted (issue #54; ``tests/test_no_aliases.py`` keeps them from coming back); the CLI
cases are in the CLI tests."""

from __future__ import annotations

import pytest

from xlrag.errors import UnknownArgumentError
from xlrag.schema import Hit, Passage

PASSAGE = Passage(id="d1#0", doc_id="d1", lang="en", text="Ceuta is a Spanish city on the north coast of Africa.")


def _hit(**mode) -> Hit:
    return Hit(passage=PASSAGE, score=1.0, raw_score=1.0, rank=1, store="en", **mode)


def test_a_hit_names_its_ir_mode_mode():
    hit = _hit(mode="qlang")
    assert hit.mode == "qlang" and "policy" not in Hit.model_fields
    assert hit.model_dump()["mode"] == "qlang" and "policy" not in hit.model_dump()
    assert not hasattr(hit, "policy")


def test_the_json_doors_carry_mode_only():
    from xlrag.indexes.langchain import hit_to_document
    from xlrag.indexes.llamaindex import hit_to_node
    from xlrag.server.models import HitOut

    hit = _hit(mode="en_only")
    out = HitOut.of(hit).model_dump()
    assert out["mode"] == "en_only" and "policy" not in out
    doc, node = hit_to_document(hit).metadata, hit_to_node(hit).node.metadata
    assert doc["mode"] == node["mode"] == "en_only"
    assert "policy" not in doc and "policy" not in node


def test_the_retriever_takes_mode(xquad_index, embedder):
    from xlrag import open_retriever
    from xlrag.config import XlragConfig
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    stores = LanguageStores.open(xquad_index, embedder.name, embedder.dim)
    r = CrossLingualRetriever(stores, embedder, mode="all")
    assert r.policy.name == "all"
    with pytest.raises(TypeError, match="policy"):
        CrossLingualRetriever(stores, embedder, policy="en_only")
    cfg = XlragConfig(index_dir=xquad_index)
    with pytest.raises(UnknownArgumentError, match=r"unexpected keyword argument 'policy'"):
        open_retriever(xquad_index, cfg, policy="qlang", embedder=embedder)
    r.close()


def test_the_languages_of_sources_are_relevant_langs():
    from pydantic import ValidationError

    from xlrag.config import AgentConfig, AgentRule
    from xlrag.perspectives.models import PerspectivesInput
    from xlrag.server.models import PerspectivesRequest

    assert AgentRule(names=["Ceuta"], relevant_langs=["es", "ar"]).relevant_langs == ["es", "ar"]
    with pytest.raises(ValidationError, match="langs"):
        AgentConfig.model_validate({"rules": [{"names": ["Ceuta"], "langs": ["es", "ar"]}]})
    with pytest.raises(ValidationError, match="langs"):
        PerspectivesInput(question="Ceuta?", langs=["es"])
    with pytest.raises(ValidationError, match="langs"):
        PerspectivesRequest(question="Ceuta?", langs=["es"])
    for model in (AgentRule, PerspectivesInput, PerspectivesRequest):
        assert "langs" not in model.model_fields


def test_index_health_is_complete_and_notes_on_retrievals_and_answers():
    from xlrag.schema import GroundedAnswer, Retrieval
    from xlrag.server.models import AnswerOut

    assert {"complete", "notes"} <= Retrieval.model_fields.keys() & GroundedAnswer.model_fields.keys()
    assert not {"index_complete", "retrieval_notes"} & GroundedAnswer.model_fields.keys()
    fields = {"question": "q", "lang": "en", "format": "citation", "mode": "qlang", "model": "m"}
    answer = GroundedAnswer(**fields, complete=False, notes=["the ar store was not searched"], answer="a")
    assert not hasattr(answer, "index_complete") and not hasattr(answer, "retrieval_notes")
    out = AnswerOut.of(answer).model_dump()
    assert (out["complete"], out["notes"]) == (False, ["the ar store was not searched"])
    assert not {"index_complete", "retrieval_notes"} & out.keys()


def test_the_question_is_question_on_a_query_too():
    from xlrag.chains.state import ChainInput
    from xlrag.schema import GroundedAnswer, Query, make_query

    q = make_query("¿Quién controla Ceuta?", lang="es", id="q1")
    assert q.question == "¿Quién controla Ceuta?" and "text" not in Query.model_fields
    assert {"question"} <= set(ChainInput.model_fields) & set(GroundedAnswer.model_fields) & set(Query.model_fields)
    assert not hasattr(q, "text")


def test_check_names_one_thing(xquad_index, embedder):
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.state import ChainInput
    from xlrag.config import LLMConfig, XlragConfig
    from xlrag.errors import ConfigError
    from xlrag.formats import AnswerFormat

    llm = build_llm(LLMConfig(model="gemma-3-270m"))  # loads on its first call, which none of these makes
    pipeline = Pipeline.from_config(XlragConfig(index_dir=xquad_index), fmt=AnswerFormat.MC, llm=llm)
    with pytest.raises(ConfigError, match="needs at least two options"):
        pipeline.validate_input(ChainInput(question="Ceuta?", options=["Spain"]))
    assert not hasattr(pipeline, "check") and not hasattr(pipeline, "attributor")


def test_a_trace_names_the_question_language_lang():
    import json

    from pydantic import ValidationError

    from xlrag.trace import Trace

    trace = Trace(question="¿Dónde está Ceuta?", lang="es", mode="qlang", mode_reason="given",
                  retrieved_langs={"es": 3}, checks=[], repairs=[], timings=[])
    dumped = trace.model_dump()
    assert dumped["lang"] == "es" and "question_lang" not in dumped
    assert Trace.model_validate_json(json.dumps(dumped)) == trace
    with pytest.raises(ValidationError, match="question_lang"):
        Trace.model_validate({**dumped, "question_lang": "es"})
    schema = Trace.model_json_schema(mode="serialization")  # what the server's OpenAPI shows
    assert {"question", "lang", "mode", "checks", "repairs"} <= set(schema["properties"])
    assert "question_lang" not in schema["properties"]


def test_a_piece_of_the_reply_is_an_answer_token_at_every_door():
    import xlrag.agents.chat as chat
    from xlrag.chains.state import AnswerToken

    assert not hasattr(chat, "ChatToken")
    first, more = AnswerToken(text="Ceuta "), AnswerToken(text="is Spanish")
    assert (first + more) == AnswerToken(text="Ceuta is Spanish")
    # a repair's reply starts over: added up, the stream ends with the reply shown last
    again = AnswerToken(text="Spain", attempt=1)
    assert (first + more + again) == again and (again + AnswerToken(text=".", attempt=1)).text == "Spain."


def test_attribution_is_the_llm_check_and_its_settings_are_under_answer():
    """*Attribution* is one thing, an LLM judging whether a passage supports the answer: every
    setting of it is under ``answer:``, and what cites by similarity is a citer."""
    from pydantic import ValidationError

    from xlrag.chains.grounding import PostHocCiter
    from xlrag.config import AgentConfig, XlragConfig

    assert not {n for n in AgentConfig.model_fields if "attribution" in n}
    with pytest.raises(ValidationError, match="attribution"):
        XlragConfig(agent={"attribution": True})
    assert XlragConfig().answer.attribution_check is False
    assert XlragConfig(answer={"attribution_check": True}).answer.attribution_check is True
    assert not any("attribut" in name for name in vars(PostHocCiter))
