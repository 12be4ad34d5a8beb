"""One name per concept (issue #35): the IR mode is ``mode`` everywhere (never ``policy``), the
languages of sources are ``relevant_langs`` (never ``langs``), and ``-k`` is the passages shown
(``eval retrieval``'s ranking depth is ``--depth``), index health is ``complete``
and ``notes`` on retrievals and answers alike. Each old name works for one release with a
warning naming the new one, and giving both is an error; the CLI cases are in the CLI tests."""

from __future__ import annotations

import pytest

from xlrag.errors import ConfigError, XlragDeprecationWarning
from xlrag.schema import Hit, Passage

PASSAGE = Passage(id="d1#0", doc_id="d1", lang="en", text="Ceuta is a Spanish city on the north coast of Africa.")


def _hit(**mode) -> Hit:
    return Hit(passage=PASSAGE, score=1.0, raw_score=1.0, rank=1, store="en", **mode)


def test_a_hit_names_its_ir_mode_mode():
    hit = _hit(mode="qlang")
    assert hit.mode == "qlang" and "policy" not in Hit.model_fields
    assert hit.model_dump()["mode"] == "qlang" and "policy" not in hit.model_dump()
    with pytest.warns(XlragDeprecationWarning, match="'policy' is now called 'mode'"):
        assert _hit(policy="all").mode == "all"  # an old checkpoint's hit still loads
    with pytest.warns(XlragDeprecationWarning, match="'policy' is now called 'mode'"):
        assert hit.policy == "qlang"
    with pytest.raises(ValueError, match="give 'mode' only"):
        _hit(mode="qlang", policy="all")


def test_the_json_doors_carry_mode_and_the_old_key_for_one_release():
    from xlrag.indexes.langchain import hit_to_document
    from xlrag.indexes.llamaindex import hit_to_node
    from xlrag.server.models import HitOut

    hit = _hit(mode="en_only")
    out = HitOut.of(hit)
    assert (out.mode, out.model_dump()["policy"]) == ("en_only", "en_only")
    assert HitOut.model_json_schema()["properties"]["policy"].get("deprecated") is True
    assert hit_to_document(hit).metadata["mode"] == hit_to_node(hit).node.metadata["mode"] == "en_only"


def test_the_retriever_takes_mode(xquad_index, embedder):
    from xlrag import open_retriever
    from xlrag.config import XlragConfig
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    stores = LanguageStores.open(xquad_index, embedder.name, embedder.dim)
    assert CrossLingualRetriever(stores, embedder, mode="all").policy.name == "all"
    with pytest.warns(XlragDeprecationWarning, match="'policy' is now called 'mode'"):
        old = CrossLingualRetriever(stores, embedder, policy="en_only")
    assert old.policy.name == "en_only"
    with pytest.raises(ConfigError, match="give 'mode' only"):
        CrossLingualRetriever(stores, embedder, "all", policy="en_only")
    cfg = XlragConfig(index_dir=xquad_index)
    with pytest.warns(XlragDeprecationWarning, match="open_retriever: 'policy' is now called 'mode'"):
        r = open_retriever(xquad_index, cfg, policy="qlang", embedder=embedder)
    assert r.policy.name == "qlang"
    for x in (old, r):
        x.close()


def test_the_languages_of_sources_are_relevant_langs():
    from xlrag.config import AgentConfig, AgentRule
    from xlrag.perspectives.models import PerspectivesInput
    from xlrag.server.models import PerspectivesRequest

    assert AgentRule(names=["Ceuta"], relevant_langs=["es", "ar"]).relevant_langs == ["es", "ar"]
    with pytest.warns(XlragDeprecationWarning, match="agent.rules: 'langs' is now called 'relevant_langs'"):
        cfg = AgentConfig.model_validate({"rules": [{"names": ["Ceuta"], "langs": ["es", "ar"]}]})
    assert cfg.rules[0].relevant_langs == ["es", "ar"]
    with pytest.warns(XlragDeprecationWarning, match="'langs' is now called 'relevant_langs'"):
        assert PerspectivesInput(question="Ceuta?", langs=["es"]).relevant_langs == ["es"]
    with pytest.warns(XlragDeprecationWarning):
        assert PerspectivesRequest(question="Ceuta?", langs=["es"]).view_input()["relevant_langs"] == ["es"]
    with pytest.raises(ValueError, match="give 'relevant_langs' only"):
        PerspectivesInput(question="Ceuta?", langs=["es"], relevant_langs=["ar"])
    for model in (AgentRule, PerspectivesInput, PerspectivesRequest):
        assert "langs" not in model.model_fields


def test_index_health_is_complete_and_notes_on_retrievals_and_answers():
    from xlrag.schema import GroundedAnswer, Retrieval
    from xlrag.server.models import AnswerOut

    assert {"complete", "notes"} <= Retrieval.model_fields.keys() & GroundedAnswer.model_fields.keys()
    assert not {"index_complete", "retrieval_notes"} & GroundedAnswer.model_fields.keys()
    fields = {"question": "q", "lang": "en", "format": "citation", "mode": "qlang", "model": "m"}
    with pytest.warns(XlragDeprecationWarning, match="'index_complete' is now called 'complete'"):
        old = GroundedAnswer(**fields, index_complete=False, answer="a")  # an old record still loads
    assert old.complete is False
    answer = GroundedAnswer(**fields, complete=False, notes=["the ar store was not searched"], answer="a")
    with pytest.warns(XlragDeprecationWarning, match="'retrieval_notes' is now called 'notes'"):
        assert answer.retrieval_notes == ["the ar store was not searched"]
    with pytest.raises(ValueError, match="give 'complete' only"):
        GroundedAnswer(**fields, complete=True, index_complete=False)
    out = AnswerOut.of(answer).model_dump()
    assert (out["complete"], out["notes"]) == (False, ["the ar store was not searched"])
    assert (out["index_complete"], out["retrieval_notes"]) == (False, out["notes"])  # the old keys, one release
    schema = AnswerOut.model_json_schema()["properties"]
    assert schema["index_complete"].get("deprecated") is True and schema["retrieval_notes"].get("deprecated") is True


def test_the_question_is_question_on_a_query_too():
    from xlrag.chains.state import ChainInput
    from xlrag.schema import GroundedAnswer, Query, make_query

    q = make_query("¿Quién controla Ceuta?", lang="es", id="q1")
    assert q.question == "¿Quién controla Ceuta?" and "text" not in Query.model_fields
    assert {"question"} <= set(ChainInput.model_fields) & set(GroundedAnswer.model_fields) & set(Query.model_fields)
    with pytest.warns(XlragDeprecationWarning, match="Query: 'text' is now called 'question'"):
        assert Query(text="Ceuta?").question == "Ceuta?"
    with pytest.warns(XlragDeprecationWarning, match="Query: 'text' is now called 'question'"):
        assert q.text == q.question
    with pytest.raises(ValueError, match="give 'question' only"):
        Query(text="a", question="b")


def test_check_names_one_thing_and_the_old_method_names_still_work(xquad_index, embedder):
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.state import ChainInput
    from xlrag.config import LLMConfig, XlragConfig
    from xlrag.formats import AnswerFormat

    llm = build_llm(LLMConfig(model="gemma-3-270m"))  # loads on its first call, which none of these makes
    pipeline = Pipeline.from_config(XlragConfig(index_dir=xquad_index), fmt=AnswerFormat.MC, llm=llm)
    with pytest.raises(ConfigError, match="needs at least two options"):
        pipeline.validate_input(ChainInput(question="Ceuta?", options=["Spain"]))
    with pytest.warns(XlragDeprecationWarning, match="'check' is now called 'validate_input'"), \
            pytest.raises(ConfigError, match="needs at least two options"):
        pipeline.check(ChainInput(question="Ceuta?", options=["Spain"]))


def test_a_trace_names_the_question_language_lang_and_reads_its_old_key():
    import json

    from xlrag.trace import Trace

    trace = Trace(question="¿Dónde está Ceuta?", lang="es", mode="qlang", mode_reason="given",
                  retrieved_langs={"es": 3}, checks=[], repairs=[], timings=[])
    dumped = trace.model_dump()
    # the JSON keeps the old key beside the new one for one release, and reads back silently
    assert dumped["lang"] == dumped["question_lang"] == "es"
    assert Trace.model_validate_json(json.dumps(dumped)) == trace
    old = {k: v for k, v in dumped.items() if k != "lang"}
    with pytest.warns(XlragDeprecationWarning, match="'question_lang' is now called 'lang'"):
        assert Trace.model_validate(old) == trace  # a record written before the rename
    with pytest.warns(DeprecationWarning, match="Trace.question_lang is now Trace.lang"):
        assert trace.question_lang == "es"
    with pytest.raises(ValueError, match="give 'lang' only"):
        Trace.model_validate({**dumped, "question_lang": "en"})


def test_a_piece_of_the_reply_is_an_answer_token_at_every_door():
    import xlrag.agents.chat as chat
    from xlrag.chains.state import AnswerToken

    with pytest.warns(XlragDeprecationWarning, match="use xlrag.chains.state.AnswerToken"):
        assert chat.ChatToken is AnswerToken
    assert "ChatToken" not in chat.__all__
    first, more = AnswerToken(text="Ceuta "), AnswerToken(text="is Spanish")
    assert (first + more) == AnswerToken(text="Ceuta is Spanish")
    # a repair's reply starts over: added up, the stream ends with the reply shown last
    again = AnswerToken(text="Spain", attempt=1)
    assert (first + more + again) == again and (again + AnswerToken(text=".", attempt=1)).text == "Spain."


def test_the_trace_schema_lists_its_fields_whatever_the_old_key_added_to_its_json():
    from xlrag.trace import Trace

    schema = Trace.model_json_schema(mode="serialization")  # what the server's OpenAPI shows
    assert {"question", "lang", "mode", "checks", "repairs"} <= set(schema["properties"])
    assert schema["properties"]["question_lang"]["deprecated"] is True


def test_attribution_is_the_llm_check_and_its_settings_are_under_answer(tmp_path):
    """*Attribution* is one thing, an LLM judging whether a passage supports the answer: every
    setting of it is under ``answer:``, and what cites by similarity is a citer."""
    from xlrag.config import AgentConfig, XlragConfig, load_config

    assert {n for n in AgentConfig.model_fields if "attribution" in n} == {"attribution"}  # the old name only
    with pytest.warns(XlragDeprecationWarning, match=r"agent\.attribution is now answer\.attribution_check"):
        cfg = XlragConfig(agent={"attribution": True})
    assert cfg.answer.attribution_check is True and cfg.agent.attribution is None
    # the same through a YAML file, and an agent section given as a model
    (tmp_path / "x.yaml").write_text("agent:\n  attribution: true\n")
    with pytest.warns(XlragDeprecationWarning):
        assert load_config(tmp_path / "x.yaml").answer.attribution_check is True
    with pytest.warns(XlragDeprecationWarning):
        assert XlragConfig(agent=AgentConfig(attribution=True)).answer.attribution_check is True
    # the old name and the new one disagreeing is an error, never a silent choice
    with pytest.warns(XlragDeprecationWarning), pytest.raises(ValueError, match=r"give answer\.attribution_check only"):
        XlragConfig(agent={"attribution": True}, answer={"attribution_check": False})
    assert XlragConfig().answer.attribution_check is False
    # a section swapped in without validation (model_copy) is moved by the builders' resolve_config,
    # never dropped silently
    from xlrag.config import resolve_config

    with pytest.warns(XlragDeprecationWarning):
        swapped = XlragConfig().model_copy(update={"agent": AgentConfig(attribution=True)})
    with pytest.warns(XlragDeprecationWarning, match=r"agent\.attribution is now answer\.attribution_check"):
        assert resolve_config(swapped).answer.attribution_check is True
    unvalidated = XlragConfig().model_copy(update={"agent": AgentConfig().model_copy(update={"attribution": True})})
    with pytest.warns(XlragDeprecationWarning):
        assert resolve_config(unvalidated).answer.attribution_check is True


def test_the_similarity_citer_is_post_hoc_citer_and_its_old_names_still_work():
    import xlrag.chains.grounding as grounding
    from xlrag.chains.grounding import PostHocCiter

    with pytest.warns(XlragDeprecationWarning, match="use xlrag.chains.grounding.PostHocCiter"):
        assert grounding.PostHocAttributor is PostHocCiter
    assert "PostHocAttributor" not in grounding.__all__
    assert not any("attribut" in name for name in vars(PostHocCiter) if name != "attribute")
