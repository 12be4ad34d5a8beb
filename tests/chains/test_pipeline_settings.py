"""The pipeline holds its settings (#54): the config's ``answer:`` section whole, and the two
retrieval limits it reads, never a copy of each answer setting in a field and a parameter of its
own. A new answer setting is then its field in ``AnswerConfig`` and its use: these tests fail when
one is copied into ``Pipeline`` again, or does not reach it from a config."""

from __future__ import annotations

import inspect

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from xlrag.chains.pipeline import Pipeline
from xlrag.config import AnswerConfig, LLMConfig, XlragConfig
from xlrag.errors import ConfigError

# a value unlike the default for each answer setting that is not a switch (a new one must be added)
NOT_DEFAULT = {"attribution_checker": LLMConfig(model="gemma-3-270m"), "format": "mc"}


def _fake() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]))


def test_create_takes_the_parts_and_the_answer_section_not_each_setting():
    params = inspect.signature(Pipeline.create).parameters
    assert len(params) <= 10, list(params)
    assert params["answer"].annotation in (AnswerConfig | None, "AnswerConfig | None")
    assert not set(AnswerConfig.model_fields) & set(params), "an answer setting copied into create()"
    assert not set(AnswerConfig.model_fields) & set(Pipeline.model_fields), "an answer setting copied into Pipeline"
    assert Pipeline.model_fields["answer_config"].annotation is AnswerConfig


def _changed(name: str, field) -> object:
    if field.annotation is bool:
        return not field.default
    assert name in NOT_DEFAULT, f"answer.{name}: add a value unlike its default to NOT_DEFAULT"
    return NOT_DEFAULT[name]


@pytest.mark.parametrize("name", list(AnswerConfig.model_fields))
def test_every_answer_setting_in_the_config_reaches_the_pipeline(name):
    value = _changed(name, AnswerConfig.model_fields[name])
    cfg = XlragConfig(answer={name: value})
    pipeline = Pipeline.from_config(cfg, llm=_fake(), mode="no_ir")
    assert getattr(pipeline.answer_config, name) == value
    assert pipeline.answer_config == cfg.answer
    assert Pipeline.from_config(XlragConfig(), llm=_fake(), mode="no_ir").answer_config == AnswerConfig()


def test_the_answer_section_shapes_what_the_pipeline_does():
    from xlrag.chains.postprocess import ATTRIBUTION_RERANK

    plain = Pipeline.from_config(XlragConfig(), llm=_fake(), mode="no_ir")
    reranked = Pipeline.from_config(XlragConfig(answer={"attribution_rerank": True}), llm=_fake(), mode="no_ir")
    assert plain.postprocessor(ATTRIBUTION_RERANK) is None and plain.attribution is None
    assert reranked.postprocessor(ATTRIBUTION_RERANK) is not None and reranked.attribution is not None
    # from parts: a setting that needs a part says which
    with pytest.raises(ConfigError, match="AttributionReranker"):
        Pipeline.create(None, _fake(), answer=AnswerConfig(attribution_rerank=True))


def test_the_retrieval_limits_come_from_the_config():
    cfg = XlragConfig(retrieval={"k": 3, "max_question_chars": 500})
    pipeline = Pipeline.from_config(cfg, llm=_fake(), mode="no_ir")
    assert (pipeline.k, pipeline.max_question_chars) == (3, 500)
    built = Pipeline.create(None, _fake(), k=2)
    assert (built.k, built.max_question_chars, built.answer_config) == (2, None, AnswerConfig())
