"""One rule for every count of passages (#35): ``xlrag.validate`` owns the bounds (1 to
``MAX_K``) and the defaults; every field takes them through ``k_field`` and every argument
through ``check_k``. Before, k was checked in 20 places with 5 ceilings (none, 100, 50, 20, 10)
and 3 defaults."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from annotated_types import Ge, Le
from typer.testing import CliRunner

from xlrag.config import AnswerConfig
from xlrag.errors import InvalidArgumentError, XlragError
from xlrag.validate import DEFAULT_K, DEFAULT_RETRIEVE_K, MAX_K, check_k

ROOT = Path(__file__).resolve().parents[1] / "xlrag"
COUNTS = {"k", "retrieve_k"}
# fields named k that are not inputs: what a run or a plan did, read back, never asked for
OUTPUTS = {"xlrag.indexes.policies.RetrievalPlan", "xlrag.server.models.RetrieveResponse"}


def _fields() -> dict[str, ast.expr | None]:
    """``module.Class.field`` -> the value of every class-level ``k``/``retrieve_k`` annotation."""
    out = {}
    for f in ROOT.rglob("*.py"):
        module = ".".join(f.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        for cls in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(cls, ast.ClassDef):
                for node in cls.body:
                    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                            and node.target.id in COUNTS:
                        out[f"{module}.{cls.name}.{node.target.id}"] = node.value
    return out


def test_every_count_field_is_declared_by_the_one_rule():
    fields = _fields()
    inputs = {name: value for name, value in fields.items() if name.rsplit(".", 1)[0] not in OUTPUTS}
    assert len(inputs) >= 6  # config (2), studies (2), server, pipeline; experiments embed the config's
    loose = [name for name, value in inputs.items()
             if not (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "k_field")]
    assert loose == []


@pytest.mark.parametrize("owner", [
    "xlrag.config.RetrievalConfig", "xlrag.server.models.RetrieveRequest", "xlrag.evals.experiment.ExperimentConfig",
    "xlrag.evals.studies.attribution.AttributionConfig", "xlrag.evals.studies.bordirlines.BordIRlinesConfig",
    "xlrag.chains.pipeline.Pipeline",
])
def test_each_field_has_the_one_ceiling_and_the_one_default(owner):
    import importlib

    module, name = owner.rsplit(".", 1)
    model = getattr(importlib.import_module(module), name)
    for field in COUNTS & set(model.model_fields):
        info = model.model_fields[field]
        assert Ge(1) in info.metadata and Le(MAX_K) in info.metadata, (owner, field)
        assert info.default in (None, DEFAULT_K if field == "k" else DEFAULT_RETRIEVE_K), (owner, field)


def test_an_experiment_takes_its_counts_from_the_configs_retrieval_section():
    from xlrag.config import RetrievalConfig
    from xlrag.evals.experiment import ExperimentConfig

    assert ExperimentConfig.model_fields["retrieval"].annotation is RetrievalConfig
    assert not COUNTS & set(ExperimentConfig.model_fields)


def test_the_validator_takes_the_range_and_nothing_else():
    assert check_k(None) is None and check_k(1) == 1 and check_k(MAX_K) == MAX_K
    for bad in (0, -1, MAX_K + 1, 2.5, True, "3"):
        with pytest.raises(InvalidArgumentError, match=f"k must be a whole number >= 1 and <= {MAX_K}"):
            check_k(bad)


def test_the_config_and_the_experiments_refuse_past_the_ceiling():
    from xlrag.config import load_config
    from xlrag.errors import ConfigError
    from xlrag.evals.experiment import ExperimentConfig

    assert load_config(retrieval={"k": MAX_K, "retrieve_k": MAX_K}).retrieval.k == MAX_K
    with pytest.raises(ConfigError, match=r"retrieval\.k"):
        load_config(retrieval={"k": MAX_K + 1})
    with pytest.raises(ValueError, match="less than or equal to 100"):
        ExperimentConfig(name="x", datasets=[{"name": "xquad"}], retrieval={"k": MAX_K + 1})


def test_every_argument_path_refuses_past_the_ceiling(retriever, xquad_index):
    from xlrag import open_retriever
    from xlrag.chains.pipeline import Pipeline
    from xlrag.evals.retrieval import hit_at, metric_names
    from xlrag.evals.retrieval_run import rank_queries
    from xlrag.indexes.langchain import XlragLangChainRetriever
    from xlrag.indexes.llamaindex import XlragLlamaRetriever
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.schema import make_query

    over = MAX_K + 1
    calls = [
        lambda: CrossLingualRetriever(retriever.stores, retriever.embedder, k=over),
        lambda: CrossLingualRetriever(retriever.stores, retriever.embedder, retrieve_k=over),
        lambda: retriever.retrieve(make_query("Who?", lang="en"), k=over),
        lambda: open_retriever(xquad_index, k=over),
        lambda: XlragLangChainRetriever(retriever=retriever, k=over),
        lambda: XlragLangChainRetriever(retriever=retriever).invoke("Who?", k=over),
        lambda: XlragLlamaRetriever(retriever, k=over),
        lambda: Pipeline.create(retriever, answer=AnswerConfig(post_hoc_citations=False), llm=None, k=over),
        lambda: rank_queries(retriever, [], k=over),
        lambda: metric_names(over),
        lambda: hit_at(["a"], {"a": 1}, over),
    ]
    for call in calls:
        with pytest.raises(XlragError, match=f"<= {MAX_K}"):
            call()


@pytest.mark.parametrize("command", [["retrieve"], ["ask"], ["eval", "retrieval", "--queries", "q", "--qrels", "r"]])
def test_every_k_option_of_the_command_line_refuses_past_the_ceiling(xquad_index, command):
    from xlrag.cli import app

    option = "--depth" if command[0] == "eval" else "-k"
    result = CliRunner().invoke(app, [*command, "-i", str(xquad_index), option, str(MAX_K + 1),
                                      *(["Who?"] if command[0] != "eval" else [])])
    assert result.exit_code == 2 and str(MAX_K) in result.output, result.output
