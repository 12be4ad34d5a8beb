"""The IR mode has one owner (xlrag.modes): every mode field is typed from it, and the
policies are keyed by it."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, ValidationError

from xlrag.indexes.policies import MODES
from xlrag.modes import AUTO, AgentMode, IRMode, Mode, parse_mode


def test_the_enum_and_the_policies_agree():
    assert list(MODES) == list(IRMode)
    for mode, cls in MODES.items():
        assert cls.name == mode and isinstance(cls.name, IRMode)


def test_parse_names_the_nearest_mode():
    assert parse_mode("qlang_en") is IRMode.QLANG_EN and parse_mode(IRMode.ALL) is IRMode.ALL
    assert parse_mode("auto", allow_auto=True) == AUTO
    with pytest.raises(ValueError, match=r"unknown IR mode 'balnced' \(did you mean 'balanced'\?\)"):
        parse_mode("balnced")
    with pytest.raises(ValueError, match="unknown IR mode 'auto'"):
        parse_mode("auto")
    with pytest.raises(ValueError, match="unknown IR mode 3"):
        parse_mode(3)


def _mode_fields(model: type[BaseModel]) -> dict[str, object]:
    hints = typing.get_type_hints(model, include_extras=True)
    return {name: hints[name] for name in model.model_fields if "mode" in name}


def _is_mode_type(annotation: object) -> bool:
    wanted = (Mode, AgentMode, Mode | None, AgentMode | None, list[Mode], list[Mode] | None)
    return any(annotation == w for w in wanted)


def test_every_mode_field_at_a_boundary_is_typed_from_the_one_owner():
    from xlrag.agents.routing import ModeChoice
    from xlrag.chains.rag import ChainInput
    from xlrag.config import AgentConfig, RetrievalConfig
    from xlrag.evals.experiment import ExperimentConfig
    from xlrag.evals.studies.bordirlines import BordIRlinesConfig
    from xlrag.server.models import AskRequest, ChatRequest, RetrieveRequest

    models = (RetrievalConfig, AgentConfig, ExperimentConfig, BordIRlinesConfig, ChainInput, ModeChoice,
              AskRequest, ChatRequest, RetrieveRequest)
    for model in models:
        fields = {n: a for n, a in _mode_fields(model).items() if n in ("mode", "modes", "default_mode",
                                                                      "generate_modes")}
        assert fields, model
        for name, annotation in fields.items():
            assert _is_mode_type(annotation), (model.__name__, name, annotation)


@pytest.mark.parametrize("build", [
    lambda v: __import__("xlrag.config", fromlist=["x"]).RetrievalConfig(mode=v),
    lambda v: __import__("xlrag.config", fromlist=["x"]).AgentConfig(default_mode=v),
    lambda v: __import__("xlrag.server.models", fromlist=["x"]).RetrieveRequest(question="q", mode=v),
    lambda v: __import__("xlrag.chains.rag", fromlist=["x"]).ChainInput(question="q", mode=v),
])
def test_one_message_everywhere(build):
    with pytest.raises(ValidationError, match=r"unknown IR mode 'qlng' \(did you mean 'qlang'\?\)"):
        build("qlng")
    assert build("qlang") is not None


def test_auto_only_where_the_agent_routes():
    from xlrag.config import AgentConfig, RetrievalConfig
    from xlrag.server.models import AskRequest, RetrieveRequest

    assert AgentConfig(mode="auto").mode == AUTO and AskRequest(question="q", mode="auto").mode == AUTO
    for build in (lambda: RetrievalConfig(mode="auto"), lambda: RetrieveRequest(question="q", mode="auto")):
        with pytest.raises(ValidationError, match="unknown IR mode 'auto'"):
            build()


def test_the_server_schema_lists_the_modes():
    from xlrag.server.models import RetrieveRequest

    schema = RetrieveRequest.model_json_schema()
    text = str(schema)
    assert all(m.value in text for m in IRMode)


def test_modes_serialise_as_plain_names():
    import json

    from xlrag.config import XlragConfig

    dumped = XlragConfig().model_dump(mode="json")
    assert dumped["retrieval"]["mode"] == "qlang_en" and type(dumped["retrieval"]["mode"]) is str
    assert json.dumps({"m": IRMode.NO_IR}) == '{"m": "no_ir"}'


@pytest.mark.parametrize("command", [["retrieve"], ["ask"], ["chat"], ["eval", "retrieval"]])
def test_the_cli_help_lists_the_modes_from_the_owner(command):
    from typer.testing import CliRunner

    from xlrag.cli import app

    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert all(m.value in result.output for m in IRMode), result.output
