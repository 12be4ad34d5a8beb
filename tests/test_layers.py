"""The package's floors: no import circles, and no import up a floor.

A room is one of xlrag's folders (``agents/``, ``chains/``, ...) or one of its top-level
modules (``config.py``; ``xlrag/__init__.py`` is the room ``xlrag``). :data:`FLOORS` orders the
rooms, top floor first, as ``docs/explanation/architecture.md`` draws them; a room may import
only rooms on floors below its own (the review of 2026-11-26 found two folders importing up:
perspectives→agents and checks→chains, both hidden in lazy imports).

What counts as an import: every ``import``/``from`` anywhere in a file (module level, inside a
function, under ``if TYPE_CHECKING``: a type a signature names is part of the room's
contract, annotations are resolved at run time by pydantic and typer, and a TYPE_CHECKING
import is the usual hiding place of a circle), and every string that is exactly the name of
an xlrag module (``importlib.import_module("xlrag.x.y")``, a lazy-export table): an import by
name is still an import. The known names that point up are listed in :data:`NAMED_UP`, each
with its reason, and the test fails when the list and the code differ either way.
"""

from __future__ import annotations

import ast
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "xlrag"
# the owners of names, formats and settings: they import only each other
GROUND = {"xlrag._lazy", "xlrag.config", "xlrag.config_sections", "xlrag.detect", "xlrag.errors", "xlrag.formats",
          "xlrag.jsonl",
          "xlrag.outputs",
          "xlrag.languages", "xlrag.modes", "xlrag.queries", "xlrag.registry", "xlrag.schema", "xlrag.text",
          "xlrag.validate", "xlrag.yamlio", "xlrag.cachedb"}

# top floor first; rooms on one floor do not import each other (but the ground floor's owners
# do: the circle test keeps them apart)
FLOORS: list[tuple[str, set[str]]] = [
    ("command line", {"cli"}),
    ("evaluation harness", {"evals"}),
    ("server", {"server"}),
    ("package door (lazy names)", {"xlrag"}),
    ("drivers", {"agents"}),
    ("views", {"perspectives"}),
    ("judges", {"judges"}),
    ("the pipeline", {"chains"}),
    ("the answer's record, the retrieval demo", {"trace", "demo"}),
    ("runtime checks", {"checks"}),
    ("retrieval and indexing", {"indexes"}),
    ("prompts", {"prompts"}),
    ("data and tools", {"borderlines", "locking", "pages", "steps"}),
    ("ground", {m.removeprefix("xlrag.") for m in GROUND}),
]

# names of modules above the room that names them, and why each is allowed
NAMED_UP: dict[str, set[str]] = {
    # the plug-in table: a built-in provider registers itself in its own module, which the
    # registry imports by name on the first lookup of its kind (config validates names there)
    "xlrag.registry": {"xlrag.chains.context", "xlrag.chains.llms", "xlrag.chains.reranker", "xlrag.chains.translator",
                       "xlrag.indexes.embedders", "xlrag.indexes.fusion", "xlrag.indexes.policies",
                       "xlrag.indexes.rerank"},
}


def _modules(root: Path) -> dict[str, Path]:
    return {".".join(f.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): f
            for f in root.rglob("*.py")}


def _graph(root: Path = ROOT, *, names: bool = False) -> dict[str, set[str]]:
    """Module -> the xlrag modules it imports, at any depth in the file (lazy imports and
    TYPE_CHECKING imports count); with ``names``, the modules its strings name instead."""
    mods = _modules(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for name, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if names:
                found = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlrag"):
                found = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names if a.name.startswith("xlrag")]
            else:
                continue
            # a package importing its own modules is how it re-exports them, not a circle
            graph[name].update(t for t in found if t in mods and t != name and t != "xlrag"
                               and not t.startswith(name + "."))
    return {m: graph[m] for m in mods}


def room(module: str) -> str:
    """``xlrag.chains.parsing.mc`` -> ``chains``; ``xlrag.config`` -> ``config``; ``xlrag`` -> ``xlrag``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(floors: list[tuple[str, set[str]]]) -> dict[str, int]:
    """Room -> its floor, 0 for the ground, higher up the list is higher up the house."""
    return {r: len(floors) - 1 - i for i, (_, rooms) in enumerate(floors) for r in rooms}


def arrows_up(graph: dict[str, set[str]], floors: list[tuple[str, set[str]]]) -> list[str]:
    """Every import of a room on the same floor or higher (the ground floor's own excepted)."""
    level = floor_of(floors)
    out = []
    for source, targets in graph.items():
        for target in sorted(targets):
            a, b = room(source), room(target)
            if a == b or (level[a] == level[b] == 0):
                continue
            if level[b] >= level[a]:
                out.append(f"{source} -> {target} ({a} on floor {level[a]}, {b} on {level[b]})")
    return sorted(out)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles(_graph()) == []


def _script_graph(folder: Path) -> dict[str, set[str]]:
    """Script -> the scripts of ``folder`` it imports (they import each other by bare name, with
    the folder on ``sys.path``), at any depth in the file."""
    mods = {f.stem for f in folder.glob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m in mods:
        for node in ast.walk(ast.parse((folder / f"{m}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module.split(".")[0]]
            elif isinstance(node, ast.Import):
                found = [a.name.split(".")[0] for a in node.names]
            else:
                continue
            graph[m].update(t for t in found if t in mods and t != m)
    return graph


def test_no_import_circles_among_the_benchmarks():
    graph = _script_graph(ROOT.parent / "benchmarks")
    assert "channels" in graph["languages"]  # the finder reads their bare-name imports
    assert _cycles(graph) == []


def test_the_harness_is_on_top():
    # the product (the perspectives view, the server, the agent) stands without the evaluation harness
    for names in (False, True):
        users = {s for s, targets in _graph(names=names).items() for t in targets
                 if room(t) == "evals" and room(s) not in ("evals", "cli")}
        assert users == set(), users


def test_the_ground_floor_imports_nothing_above_it():
    graph = _graph()
    assert GROUND <= set(graph)
    up = {m: sorted(graph[m] - GROUND) for m in GROUND if graph[m] - GROUND}
    assert up == {}


# in-function imports of a ground-floor module that stay there, each with its reason: the ground
# floor imports only itself, so an import of it at a module's top can make no circle, and one
# left inside a function only hides what the module needs (the review of #54 counted 100)
GROUND_IMPORTS_IN_FUNCTIONS = {
    # the package door: ``import xlrag`` loads its table of lazy names and nothing else
    # (tests/test_public_api.py::test_import_is_light); the config is read on the first call
    ("xlrag", "xlrag.config"),
}


def ground_imports_in_functions(root: Path = ROOT, allowed: set[tuple[str, str]] = GROUND_IMPORTS_IN_FUNCTIONS
                                 ) -> list[str]:
    """``path:line: import`` for every import of a ground-floor module inside a function of a
    module off the ground floor (the ground floor's owners import each other as they need),
    but the ``allowed`` ones (module, ground module)."""
    out = []
    for module, path in _modules(root).items():
        if module in GROUND:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    targets = [node.module or ""]
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                else:
                    continue
                for target in targets:
                    if target in GROUND and (module, target) not in allowed:
                        out.append(f"{path.relative_to(root.parent).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(out))


def test_ground_floor_imports_sit_at_module_top():
    assert ground_imports_in_functions() == []
    # the allow-list names imports that are there
    found = {(x.split(":")[0], x.split(": ", 1)[1]) for x in ground_imports_in_functions(allowed=set())}
    assert found == {("xlrag/__init__.py", "from xlrag.config import load_config")}


def test_the_ground_import_check_sees_one_in_a_function(tmp_path):
    (tmp_path / "xlrag" / "checks").mkdir(parents=True)
    (tmp_path / "xlrag" / "checks" / "planted.py").write_text(
        "import os\n\n\ndef f():\n    import json\n\n    from xlrag.errors import ConfigError\n"
        "    return ConfigError, json, os\n", encoding="utf-8")
    (tmp_path / "xlrag" / "errors.py").write_text("def f():\n    from xlrag.text import capped\n    return capped\n",
                                                  encoding="utf-8")
    assert ground_imports_in_functions(tmp_path / "xlrag") == [
        "xlrag/checks/planted.py:7: from xlrag.errors import ConfigError"]


def test_the_circle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_every_room_is_on_one_floor():
    placed = [r for _, rooms in FLOORS for r in rooms]
    assert len(placed) == len(set(placed))
    assert {room(m) for m in _modules(ROOT)} == set(placed)


def test_no_import_goes_up_a_floor():
    assert arrows_up(_graph(), FLOORS) == []


def test_the_names_of_modules_up_a_floor_are_the_known_ones():
    found: dict[str, set[str]] = defaultdict(set)
    for line in arrows_up(_graph(names=True), FLOORS):
        source, target = line.split(" (")[0].split(" -> ")
        found[source].add(target)
    assert dict(found) == NAMED_UP


def test_the_floor_check_sees_an_arrow_up_in_a_graph():
    graph = {"xlrag.checks.attribution": {"xlrag.formats", "xlrag.chains.translator"},
             "xlrag.chains.translator": {"xlrag.checks.attribution"}, "xlrag.formats": {"xlrag.errors"},
             "xlrag.errors": {"xlrag.text"}, "xlrag.text": set()}
    assert arrows_up(graph, FLOORS) == [
        "xlrag.checks.attribution -> xlrag.chains.translator (checks on floor 4, chains on 6)"]


@pytest.mark.parametrize("planted", [
    "def f():\n    from xlrag.agents.graph import XlragAgent\n    return XlragAgent\n",  # lazy
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from xlrag.agents import graph\n",
    "import xlrag.agents.build\n",
])
def test_the_floor_check_fails_on_an_upward_import_planted_in_a_copy(tmp_path, planted):
    copy = tmp_path / "xlrag"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("data", "__pycache__", "*.yaml", "*.npz", "*.json"))
    assert arrows_up(_graph(copy), FLOORS) == []
    (copy / "checks" / "planted.py").write_text(planted, encoding="utf-8")
    (found,) = arrows_up(_graph(copy), FLOORS)
    assert found.startswith("xlrag.checks.planted -> xlrag.agents")
    assert "checks on floor 4, agents on 9" in found


def test_the_floor_check_sees_a_module_named_in_a_string(tmp_path):
    copy = tmp_path / "xlrag"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("data", "__pycache__", "*.yaml", "*.npz", "*.json"))
    (copy / "perspectives" / "planted.py").write_text(
        'import importlib\n\ndef f():\n    return importlib.import_module("xlrag.agents.graph")\n', encoding="utf-8")
    assert "xlrag.perspectives.planted -> xlrag.agents.graph (perspectives on floor 8, agents on 9)" in \
        arrows_up(_graph(copy, names=True), FLOORS)


def test_the_architecture_page_draws_these_floors():
    import re

    page = (ROOT.parent / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    table = page.split("| floor | rooms |", 1)[1].split("\n\n", 1)[0]
    drawn = []
    for row in table.splitlines()[2:]:
        names = re.findall(r"`([^`]+)`", row.split("|")[2])
        drawn.append({"xlrag" if n == "xlrag/__init__.py" else n.removesuffix("/").removesuffix(".py")
                      for n in names})
    assert drawn == [rooms for _, rooms in FLOORS]


# LangChain's private Runnable helpers: a Runnable of xlrag composes through the public API
# (RunnableLambda, RunnableGenerator, ...), so a LangChain release may change these freely
PRIVATE_LANGCHAIN = {"_call_with_config", "_acall_with_config", "_transform_stream_with_config",
                     "_atransform_stream_with_config", "_batch_with_config", "_abatch_with_config"}


def private_langchain_calls(root: Path) -> list[str]:
    return sorted(f"{name}: {node.attr}" for name, path in _modules(root).items()
                  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Attribute) and node.attr in PRIVATE_LANGCHAIN)


def test_runnables_compose_through_public_langchain_apis(tmp_path):
    assert private_langchain_calls(ROOT) == []
    (tmp_path / "xlrag").mkdir()
    (tmp_path / "xlrag" / "view.py").write_text("def invoke(self, x, c):\n"
                                                "    return self._call_with_config(self._run, x, c)\n")
    assert private_langchain_calls(tmp_path / "xlrag") == ["xlrag.view: _call_with_config"]


# Async written once (xlrag/steps.py): a sync method and its async twin may both have bodies of
# their own only where the work itself differs: the model's call and its streams, the
# retriever's search, the steps' two drivers, a study's blocking bridge over its async run.
TWO_BODIES = {
    "xlrag.agents.chat: _run/_arun", "xlrag.agents.chat_engine: XlragChatEngine.stream_chat/astream_chat",
    "xlrag.agents.chat_engine: XlragStreamingChatResponse._deltas/_adeltas",
    "xlrag.chains.local.runtime: LocalLlamaChat._stream/_astream", "xlrag.chains.pipeline: Pipeline.generate/agenerate",
    "xlrag.chains.pipeline: Pipeline.generate_stream/agenerate_stream",
    "xlrag.chains.pipeline: Pipeline.stream_answer/astream_answer", "xlrag.evals.studies.base: StudyRun.run/arun",
    "xlrag.indexes.retriever: CrossLingualRetriever.retrieve/aretrieve", "xlrag.steps: _do/_ado",
    "xlrag.steps: run/arun",
}


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return sum(n.end_lineno - n.lineno + 1 for n in body)


def twin_bodies(root: Path) -> set[str]:
    """``module: [Class.]f/af`` for every sync/async pair in one scope whose bodies both run
    over two lines (a one- or two-line body delegates)."""
    out = set()
    for module, path in _modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
            fns = {n.name: n for n in scope.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            for name, fn in fns.items():
                bare = name.lstrip("_")
                sync = name[: len(name) - len(bare)] + bare[1:]
                if (isinstance(fn, ast.AsyncFunctionDef) and bare.startswith("a") and sync in fns
                        and isinstance(fns[sync], ast.FunctionDef)
                        and min(_body_lines(fns[sync]), _body_lines(fn)) > 2):
                    owner = f"{scope.name}." if isinstance(scope, ast.ClassDef) else ""
                    out.add(f"{module}: {owner}{sync}/{name}")
    return out


def test_async_is_written_once(tmp_path):
    assert twin_bodies(ROOT) == TWO_BODIES
    (tmp_path / "xlrag").mkdir()
    (tmp_path / "xlrag" / "check.py").write_text(
        "class C:\n"
        "    def check(self, x):\n        y = x + 1\n        z = y * 2\n        return self.llm.invoke(z)\n"
        "    async def acheck(self, x):\n        y = x + 1\n        z = y * 2\n        return await "
        "self.llm.ainvoke(z)\n")
    assert twin_bodies(tmp_path / "xlrag") == {"xlrag.check: C.check/acheck"}
