"""The package's floors: no import circles, and the contract owners at the bottom import
nothing above them (the review of 2026-11-25 found three circles and two arrows up)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "xlrag"
# the owners of names, formats and settings: they import only each other
GROUND = {"xlrag._lazy", "xlrag.config", "xlrag.detect", "xlrag.errors", "xlrag.formats", "xlrag.jsonl",
          "xlrag.outputs",
          "xlrag.languages", "xlrag.modes", "xlrag.queries", "xlrag.registry", "xlrag.schema", "xlrag.text",
          "xlrag.validate", "xlrag.yamlio", "xlrag.cachedb"}


def _graph() -> dict[str, set[str]]:
    """Module -> the xlrag modules it imports, at any depth in the file (lazy imports count)."""
    mods = {}
    for f in ROOT.rglob("*.py"):
        name = ".".join(f.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = f
    graph: dict[str, set[str]] = defaultdict(set)
    for name, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlrag"):
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


def test_the_ground_floor_imports_nothing_above_it():
    graph = _graph()
    assert GROUND <= set(graph)
    up = {m: sorted(graph[m] - GROUND) for m in GROUND if graph[m] - GROUND}
    assert up == {}


def test_the_circle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
