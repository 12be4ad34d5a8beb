"""No aliases for names that never shipped (#54): xlrag 0.1.0 is its first release, so every
name has one spelling and one home. An old name kept "for one release" would be a second
contract to document, test and remove; this file fails when one comes back, by reading the
package's source (no import of the code it judges) and the signatures of the public doors."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "xlrag"

# the shims the 0.1.0 tree once had, by the name of the helper that made each
SHIM_CALLS = {"renamed", "renamed_keys", "moved_keys", "moved", "warn_attribution_moved"}
# names retired before 0.1.0: none may come back as a parameter of a public door
RETIRED = {"policy", "k_retrieve", "attributor", "langs", "perspectives", "retries", "question_lang",
           "index_complete", "retrieval_notes", "text", "query_id"}
# the forwarding modules that once answered for a name's old home
FORWARDERS = ("agents/trace.py", "chains/parsing/markers.py")


def _sources() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in sorted(PACKAGE.rglob("*.py"))]


SOURCES = _sources()


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"


def test_no_shim_is_called_or_defined():
    found = []
    for path, tree in SOURCES:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in SHIM_CALLS:
                    found.append(f"{_where(path, node)} calls {name}()")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in SHIM_CALLS:
                found.append(f"{_where(path, node)} defines {node.name}()")
    assert not found, found


def test_a_module_level_getattr_only_loads_a_packages_own_public_names():
    """``__getattr__`` at module level is the lazy loader of a package's ``__all__``
    (``xlrag._lazy.lazy_exports``), never a table that forwards an old name."""
    found = []
    for path, tree in SOURCES:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__getattr__":
                found.append(f"{_where(path, node)} defines __getattr__")
            elif isinstance(node, ast.Assign):
                targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
                if any(getattr(t, "id", None) == "__getattr__" for t in targets):
                    call = node.value
                    if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "lazy_exports"):
                        found.append(f"{_where(path, node)} assigns __getattr__ from something other than lazy_exports")
    assert not found, found


@pytest.mark.parametrize("package", ["xlrag", "xlrag.agents", "xlrag.checks", "xlrag.evals", "xlrag.perspectives"])
def test_every_lazy_name_is_public(package):
    import importlib

    module = importlib.import_module(package)
    assert set(module._LAZY) <= set(module.__all__), sorted(set(module._LAZY) - set(module.__all__))


def test_no_forwarding_module_is_left():
    assert not [f for f in FORWARDERS if (PACKAGE / f).exists()]
    # nor another: a module of imports and ``__all__`` only, re-exporting another module's names
    found = []
    for path, tree in SOURCES:
        if path.name == "__init__.py":
            continue
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom)) and
                   not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        rest = [n for n in body if n not in imports and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
                and not (isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets))]
        if imports and not rest:
            found.append(str(path.relative_to(PACKAGE.parent)))
    assert not found, found


def test_no_policy_key_beside_mode_in_any_record():
    """The IR mode is ``mode`` in every Document, node and JSON record; ``"policy"`` beside it
    was the old name."""
    found = []
    for path, tree in SOURCES:
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if "policy" in keys:
                    found.append(_where(path, node))
            elif isinstance(node, ast.Call) and any(k.arg == "policy" for k in node.keywords):
                callee = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if callee != "RetrievalPlan":  # a plan's own field: the policy that made it
                    found.append(f"{_where(path, node)} {callee}(policy=...)")
    assert not found, found


def test_no_deprecated_field_or_warning():
    """No pydantic field or computed field marked ``deprecated``, and no deprecation warning class:
    a deprecation is for a name that shipped."""
    found = []
    for path, tree in SOURCES:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(k.arg == "deprecated" for k in node.keywords):
                found.append(_where(path, node))
            elif isinstance(node, ast.ClassDef) and "Deprecation" in node.name:
                found.append(f"{_where(path, node)} class {node.name}")
            elif isinstance(node, ast.Attribute) and node.attr in ("DeprecationWarning", "FutureWarning"):
                found.append(_where(path, node))
            elif isinstance(node, ast.Name) and node.id in ("DeprecationWarning", "FutureWarning"):
                found.append(_where(path, node))
    assert not found, found


def _doors():
    import xlrag
    from xlrag.agents.graph import XlragAgent
    from xlrag.agents.tools import ToolCallingAgent
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain
    from xlrag.indexes.retriever import CrossLingualRetriever

    return {
        "xlrag.open_retriever": xlrag.open_retriever,
        "CrossLingualRetriever": CrossLingualRetriever.__init__,
        "CrossLingualRetriever.from_config": CrossLingualRetriever.from_config,
        "CrossLingualRetriever.retrieve": CrossLingualRetriever.retrieve,
        "CrossLingualRetriever.aretrieve": CrossLingualRetriever.aretrieve,
        "Pipeline.create": Pipeline.create,
        "Pipeline.from_config": Pipeline.from_config,
        "GroundedChain.from_config": GroundedChain.from_config,
        "XlragAgent": XlragAgent.__init__,
        "ToolCallingAgent": ToolCallingAgent.__init__,
    }


def test_the_public_doors_take_no_retired_name():
    found = {name: sorted(set(inspect.signature(fn).parameters) & RETIRED) for name, fn in _doors().items()}
    assert not {name: params for name, params in found.items() if params}, found


def test_no_retired_attribute_on_the_records():
    from xlrag.agents.build import Stack
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain
    from xlrag.schema import GroundedAnswer, Hit, Query
    from xlrag.trace import Trace

    retired = {Hit: {"policy"}, Query: {"text"}, GroundedAnswer: {"index_complete", "retrieval_notes"},
               Trace: {"question_lang"}, Pipeline: {"attributor", "check"}, GroundedChain: {"attributor"},
               Stack: {"perspectives"}}
    found = {cls.__name__: sorted(n for n in names if hasattr(cls, n) or n in getattr(cls, "model_fields", {}))
             for cls, names in retired.items()}
    assert not {k: v for k, v in found.items() if v}, found


def test_no_hidden_cli_option():
    """A hidden option was an old flag's name kept working; every option is in the help."""
    import typer

    from xlrag.cli import app

    def walk(cmd, path):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    hidden = [(" ".join(path), p.name) for path, cmd in walk(typer.main.get_command(app), ["xlrag"])
              for p in cmd.params if getattr(p, "hidden", False)]
    assert not hidden, hidden
