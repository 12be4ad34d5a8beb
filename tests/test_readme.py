"""Every code block of README.md, run as written or checked against the code.

The README is read top to bottom in one scratch folder, as a reader would follow it:

* a ``json`` block titled ``title="FILE"`` is written to FILE (every line must be JSON);
* a ``python`` block is executed;
* a ``yaml`` block is an ``xlrag.yaml``: it must validate as an ``XlragConfig`` whose providers exist;
* in a ``bash`` block, each ``xlrag ...`` line runs for real (the typer app in-process, the real
  local model, the real indexes), except the commands that cannot run in a test: those needing a
  vendor API, and the few in ``NOT_RUN`` (each says why and where it is tested for real). Those,
  and the lines that set up a machine (``make``, ``source``, ``pip install``, ``export``, ``git
  clone``), are checked instead: the make target exists, the virtualenv is the Makefile's, each
  ``xlrag[extra]`` is declared in pyproject.toml, each command and option exists in the typer app.
  ``make demo`` also leaves what it builds, the demo index, where the Makefile builds it.

Inline commands (```` `xlrag ask --llm ...` ````, ```` `pip install 'xlrag[openai]'` ````) are checked
the same way. A block or a line with no handler fails the test, so a new kind of block cannot go
untested. Names are read from the README, the Makefile, pyproject.toml and the typer app, never
written here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"

SHELL = {"bash", "sh", "shell"}
# xlrag commands that run too long, or never stop, to run here; each is run for real elsewhere
NOT_RUN = {
    ("eval", "run"): "a seed study is hundreds of model calls (tests/evals/test_*_study.py run the studies on samples)",
    ("eval", "calibrate"):
        "every catalogue model votes on 502 items (tests/evals/test_calibration.py runs it on a few)",
    ("serve",): "a server runs until it is stopped (tests/server/ runs its app)",
}
# what an interactive command reads from stdin: the README says "/help inside"
STDIN = {("chat",): "/help\n"}
ELLIPSIS = {"...", "…"}
INLINE = "an inline mention: its names are checked"


class ReadmeError(AssertionError):
    pass


# -- reading the README ------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    line: int
    kind: str  # write | python | config | make | source | pip | export | clone | xlrag
    text: str
    args: tuple[str, ...] = ()
    title: str | None = None
    run: bool = True  # an xlrag command run for real, or only checked
    why: str = ""


def _markdown(text: str):
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").parse(text)


def _shell_lines(code: str, first: int) -> list[tuple[int, str]]:
    """(README line, command) for each command of a shell block, continuation lines joined."""
    out, pending, start = [], "", first
    for n, raw in enumerate(code.splitlines(), first):
        if not pending:
            start = n
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = pending + raw
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((start, line))
    return out


def classify(line: int, command: str, *, inline: bool = False) -> Step:
    tokens = shlex.split(command, comments=True)
    if inline:
        tokens = [t for t in tokens if t not in ELLIPSIS]
    if not tokens:
        raise ReadmeError(f"README.md:{line}: nothing to run in {command!r}")
    if {"|", "&&", "||", ";", ">", "<"} & set(tokens) or "=" in tokens[0]:
        raise ReadmeError(f"README.md:{line}: no handler for {command!r} (pipes, chains, redirections and "
                          "variable prefixes are not supported); write it as one command a line or extend "
                          "tests/test_readme.py")
    head, args = tokens[0], tuple(tokens[1:])
    if head == "xlrag":
        try:
            path = command_path(args)
        except ReadmeError as e:
            raise ReadmeError(f"README.md:{line}: {command.strip()}\n  {e}") from None
        why = INLINE if inline else ""
        why = why or NOT_RUN.get(path, "") or vendor_needed(args)
        return Step(line, "xlrag", command, args, run=not why, why=why)
    if head == "make":
        return Step(line, "make", command, args)
    if head == "source":
        return Step(line, "source", command, args)
    if head == "pip" or tokens[:3] == ["python", "-m", "pip"]:
        return Step(line, "pip", command, tuple(tokens[tokens.index("install") + 1:]) if "install" in tokens else ())
    if head == "export":
        return Step(line, "export", command, args)
    if tokens[:2] == ["git", "clone"]:
        return Step(line, "clone", command, args[1:])
    raise ReadmeError(f"README.md:{line}: no handler for the command {command!r}; run it or check it in "
                      "tests/test_readme.py")


def plan(markdown: str) -> list[Step]:
    """Every block and inline command of the README as a step, in reading order."""
    steps = []
    for tok in _markdown(markdown):
        if tok.type == "fence":
            lang, _, attrs = tok.info.strip().partition(" ")
            title = m[1] if (m := re.search(r'title="([^"]+)"', attrs)) else None
            first = tok.map[0] + 2  # the block's first line, 1-based
            if lang == "json":
                if not title:
                    raise ReadmeError(f"README.md:{first - 1}: a json block needs title=\"FILE\" to be written "
                                      "and read by the commands after it")
                steps.append(Step(first, "write", tok.content, title=title))
            elif lang == "python":
                steps.append(Step(first, "python", tok.content))
            elif lang == "yaml":
                steps.append(Step(first, "config", tok.content))
            elif lang in SHELL:
                steps += [classify(n, cmd) for n, cmd in _shell_lines(tok.content, first)]
            else:
                raise ReadmeError(f"README.md:{first - 1}: no handler for a ```{lang or '(no language)'} block; "
                                  "run it or check it in tests/test_readme.py")
        elif tok.type == "inline":
            for child in tok.children or []:
                if child.type == "code_inline" and re.match(r"(xlrag|pip install|make) ", child.content):
                    steps.append(classify(tok.map[0] + 1, child.content, inline=True))
    return steps


# -- what the commands name: the Makefile, pyproject.toml, the typer app -----------------------


def makefile() -> tuple[dict[str, list[str]], dict[str, str]]:
    """The Makefile's targets with their recipe lines, and its ``NAME ?= value`` defaults."""
    targets: dict[str, list[str]] = {}
    defaults: dict[str, str] = {}
    current = None
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t") and current is not None:
            targets[current].append(line.strip())
        elif m := re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*\?=\s*(.*)", line):
            defaults[m[1]] = m[2].strip()
        elif m := re.match(r"([^\s:#=][^:=]*?)\s*:(?!=)", line):
            current = m[1]
            targets.setdefault(current, [])
        elif line.strip() and not line.startswith("#"):
            current = None
    return targets, defaults


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 685 / PEP 503


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _cli():
    import typer.main

    from xlrag.cli import app

    root = typer.main.get_command(app)
    return root, root.context_class(root, info_name="xlrag", **root.context_settings)


def resolve(args: tuple[str, ...]):
    """The click command ``xlrag ARGS`` names, its context, its path and the arguments left."""
    cmd, ctx = _cli()
    path: list[str] = []
    rest = list(args)
    while hasattr(cmd, "get_command") and rest:
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            known = ", ".join(cmd.list_commands(ctx))
            raise ReadmeError(f"no command 'xlrag {' '.join([*path, rest[0]])}'; the app has: {known}")
        path.append(rest.pop(0))
        cmd, ctx = sub, sub.context_class(sub, info_name=path[-1], parent=ctx, **sub.context_settings)
    if hasattr(cmd, "get_command"):
        raise ReadmeError(f"'xlrag {' '.join(path)}' is a group: name one of its commands")
    return cmd, ctx, tuple(path), rest


def command_path(args: tuple[str, ...]) -> tuple[str, ...]:
    return resolve(tuple(a for a in args if a not in ELLIPSIS))[2]


def check_xlrag(step: Step) -> None:
    """The command and every option it names exist. A command line of a block is parsed whole by
    click (types, required options, values) without running it, and one that is not run must
    name input files the repository has: nothing before it in the README made them."""
    cmd, ctx, path, rest = resolve(step.args)
    options = {o for p in cmd.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    for token in rest:
        name = token.split("=", 1)[0]
        if name.startswith("-") and name not in {"-", "--"} and name not in options:
            raise ReadmeError(f"'xlrag {' '.join(path)}' has no option {name}; it has: {', '.join(sorted(options))}")
    if step.why == INLINE:
        return
    try:
        params = cmd.make_context(path[-1], list(rest), parent=ctx.parent).params
    except Exception as e:  # click's usage errors: a missing value, a bad type
        raise ReadmeError(f"'xlrag {' '.join(path)}' does not parse: {e}") from None
    if not step.run:
        for p in cmd.params:
            value = params.get(p.name)
            if p.param_type_name == "argument" and isinstance(value, Path) and not (ROOT / value).exists():
                raise ReadmeError(f"'xlrag {' '.join(path)}' reads {value}, which the repository lacks")


def vendor_needed(args: tuple[str, ...]) -> str:
    """Why a command needs a vendor API ('' when it runs offline): an --llm or --embedder other
    than the config's default offline one."""
    from xlrag.config import EmbedderConfig, LLMConfig

    offline = {"--llm": LLMConfig().provider, "--embedder": EmbedderConfig().name}
    for i, token in enumerate(args[:-1]):
        if token in offline and args[i + 1].split(":", 1)[0] != offline[token]:
            return f"{token} {args[i + 1]} needs a vendor API"
    return ""


def _config_index_dir() -> str:
    from xlrag.config import XlragConfig

    return str(XlragConfig.model_fields["index_dir"].default)


def demo_index_dir() -> Path:
    """Where ``make demo`` builds the demo index: its recipe's ``xlrag demo`` line, parsed by the
    typer app (so the command's own default applies when the recipe gives none)."""
    targets, _ = makefile()
    for line in targets.get("demo", []):
        tokens = shlex.split(line)
        for i, token in enumerate(tokens[:-1]):
            if Path(token).name == "xlrag" and tokens[i + 1] == "demo":
                cmd, ctx, path, rest = resolve(tuple(tokens[i + 1:]))
                params = cmd.make_context(path[-1], rest, parent=ctx.parent).params
                [name] = [p.name for p in cmd.params if "--index-dir" in p.opts]
                # no --index-dir: the demo builds where every command looks, the config's index_dir
                return Path(params[name] if params[name] is not None else _config_index_dir())
    raise ReadmeError("make demo runs no `xlrag demo`; tell tests/test_readme.py what it builds")


# -- checking a step ---------------------------------------------------------------------------


def check(step: Step) -> None:
    """What can be verified without running anything; raises ReadmeError naming the README line."""
    try:
        _check(step)
    except ReadmeError as e:
        raise ReadmeError(f"README.md:{step.line}: {step.text.strip()}\n  {e}") from None


def _check(step: Step) -> None:
    if step.kind == "write":
        for n, row in enumerate(step.text.splitlines(), step.line):
            try:
                json.loads(row)
            except json.JSONDecodeError as e:
                raise ReadmeError(f"line {n} of {step.title} is not JSON: {e}") from None
    elif step.kind == "python":
        compile(step.text, "README.md", "exec")
    elif step.kind == "config":
        check_config(step.text)
    elif step.kind == "make":
        targets, _ = makefile()
        for target in step.args or ("all",):
            if target not in targets:
                raise ReadmeError(f"the Makefile has no target {target!r}")
    elif step.kind == "source":
        _, defaults = makefile()
        expected = f"{defaults.get('VENV', '.venv')}/bin/activate"
        if step.args != (expected,):
            raise ReadmeError(f"the Makefile's virtualenv is activated with `source {expected}`")
    elif step.kind == "pip":
        check_pip(step.args)
    elif step.kind == "export":
        check_export(step.args)
    elif step.kind == "clone":
        if not step.args or not re.match(r"(https://|git@)\S+", step.args[0]):
            raise ReadmeError("git clone needs a repository URL")
    elif step.kind == "xlrag":
        check_xlrag(step)
    else:
        raise ReadmeError(f"no check for a step of kind {step.kind!r}")


def check_config(text: str) -> None:
    import yaml

    from xlrag.config import XlragConfig
    from xlrag.registry import available

    cfg = XlragConfig(**yaml.safe_load(text))
    for kind, name in (("llm", cfg.llm.provider), ("embedder", cfg.embedder.name), ("reranker", cfg.rerank.name)):
        if name not in available(kind):
            raise ReadmeError(f"no {kind} provider {name!r}; registered: {', '.join(available(kind))}")


def check_pip(args: tuple[str, ...]) -> None:
    project = pyproject()
    extras = {_normal(e) for e in project["optional-dependencies"]}
    declared = {_normal(re.match(r"[A-Za-z0-9._-]+", d)[0])
                for deps in (project["dependencies"], *project["optional-dependencies"].values()) for d in deps}
    reqs = [a for a in args if not a.startswith("-")]
    if not reqs:
        raise ReadmeError("pip install names nothing to install")
    for req in reqs:
        m = re.fullmatch(r"(xlrag|\.)(?:\[([^\]]*)\])?", req)
        if m:
            for extra in filter(None, (m[2] or "").split(",")):
                if _normal(extra.strip()) not in extras:
                    raise ReadmeError(f"pyproject.toml declares no extra {extra!r}; "
                                      f"it has: {', '.join(sorted(extras))}")
        elif _normal(re.match(r"[A-Za-z0-9._-]+", req)[0]) not in declared:
            raise ReadmeError(f"{req!r} is neither xlrag nor one of its declared dependencies")


def check_export(args: tuple[str, ...]) -> None:
    from xlrag.config import check_environment

    for arg in args:
        name = arg.split("=", 1)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            known = name.startswith("XLRAG_") and not check_environment({name: "x"})
        source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "xlrag").rglob("*.py"))
        if not known and f'"{name}"' not in source:
            raise ReadmeError(f"xlrag reads no environment variable {name}")


# -- the fast tests: every block has a handler and every name exists --------------------------


def test_every_block_has_a_handler_and_every_name_exists():
    steps = plan(README.read_text(encoding="utf-8"))
    kinds = {s.kind for s in steps}
    assert {"write", "python", "xlrag", "make"} <= kinds  # the README still shows each kind of block
    for step in steps:
        check(step)


def test_readme_links_resolve():
    for tok in _markdown(README.read_text(encoding="utf-8")):
        for child in tok.children or []:
            href = child.attrs.get("href", "") if child.type == "link_open" else ""
            if href and not re.match(r"[a-z]+:|#", href):
                assert (ROOT / href.split("#")[0]).exists(), f"README.md:{tok.map[0] + 1}: {href} does not exist"


@pytest.mark.parametrize("block", [
    "```ruby\nputs 1\n```",
    "```\nxlrag ask q\n```",
    "```json\n{}\n```",
    "```bash\nrm -rf build\n```",
    "```bash\nxlrag ask q | head\n```",
])
def test_a_block_without_a_handler_fails(block):
    with pytest.raises(ReadmeError, match=r"no handler|needs title"):
        plan(f"# x\n\n{block}\n")


@pytest.mark.parametrize(("line", "error"), [
    ("xlrag ask --no-such-option q", "has no option --no-such-option"),
    ("xlrag frobnicate", "no command 'xlrag frobnicate'"),
    ("xlrag eval", "is a group"),
    ("pip install 'xlrag[no-such-extra]'", "no extra 'no-such-extra'"),
    ("make no-such-target", "no target 'no-such-target'"),
    ("source venv/bin/activate", "activated with"),
    ("export NO_SUCH_VARIABLE=1", "no environment variable"),
    ("xlrag eval run experiments/no-such-study.yaml --out x", "the repository lacks"),
])
def test_a_wrong_name_fails(line, error):
    with pytest.raises(ReadmeError, match=re.escape(error)):
        for step in plan(f"```bash\n{line}\n```\n"):
            check(step)


def test_what_is_run_and_what_is_checked():
    steps = {s.text.split("#")[0].strip(): s for s in plan(
        "```bash\nxlrag ask --llm openai:gpt-4o-mini q\nxlrag ask --llm local q\nxlrag serve --index-dir ix\n"
        "xlrag index --embedder cohere --corpus c.jsonl\n```\n")}
    assert not steps["xlrag ask --llm openai:gpt-4o-mini q"].run
    assert steps["xlrag ask --llm local q"].run
    assert not steps["xlrag serve --index-dir ix"].run
    assert "vendor" in steps["xlrag index --embedder cohere --corpus c.jsonl"].why


def test_the_demo_index_is_where_make_demo_builds_it():
    targets, _ = makefile()
    recipe = " ".join(targets["demo"])
    cmd, _, _, _ = resolve(("demo",))
    [default] = [p.default for p in cmd.params if "--index-dir" in p.opts]
    expected = re.search(r"xlrag demo .*--index-dir (\S+)", recipe)
    assert demo_index_dir() == Path(expected[1] if expected else default or _config_index_dir())


# -- the slow test: the README, run ------------------------------------------------------------


def index_dir_of(args: tuple[str, ...]) -> str | None:
    """The ``--index-dir`` a command line names, as the typer app parses it (None: not named)."""
    cmd, ctx, path, rest = resolve(args)
    value = cmd.make_context(path[-1], list(rest), parent=ctx.parent).params.get("index_dir")
    return None if value is None else str(value)


@dataclass
class Run:
    folder: Path
    request: pytest.FixtureRequest
    log: list[str] = field(default_factory=list)
    own_indexes: set[str] = field(default_factory=set)  # the indexes the README's own commands build
    verified_asks: int = 0

    def step(self, step: Step) -> None:
        check(step)
        where = f"README.md:{step.line}: {step.text.strip()}"
        if step.kind == "write":
            (self.folder / step.title).write_text(step.text, encoding="utf-8")
        elif step.kind == "python":
            code = compile("\n" * (step.line - 1) + step.text, str(README), "exec")  # tracebacks name README lines
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, {"__name__": "__readme__"})  # the README's own code
            self.log.append(f"{where}\n{out.getvalue()}")
        elif step.kind == "make" and "demo" in step.args:
            # what `make demo` leaves behind, where it leaves it; built once per session
            target = self.folder / demo_index_dir()
            if not target.exists():
                assert not target.is_absolute() or target.is_relative_to(self.folder), \
                    f"{where}: the demo index is built outside the scratch folder ({target}); update this test"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(self.request.getfixturevalue("demo_index"), target_is_directory=True)
        elif step.kind == "xlrag" and step.run:
            from typer.testing import CliRunner

            from xlrag.cli import app

            path = command_path(step.args)
            result = CliRunner().invoke(app, list(step.args), input=STDIN.get(path))
            detail = result.output + (f"\n{result.exc_info[1]!r}" if result.exception and
                                      not isinstance(result.exception, SystemExit) else "")
            assert result.exit_code == 0, f"{where}\nexit {result.exit_code}\n{detail}"
            if path == ("index",) and (built := index_dir_of(step.args)):
                self.own_indexes.add(built)  # an index of the default folder is the demo's, not the reader's
            if path == ("ask",):  # the README promises a cited answer
                assert re.search(r"<doc\d+>", result.output), f"{where}\nno <docN> citation:\n{result.output}"
                if index_dir_of(step.args) in self.own_indexes:
                    # and over the corpus it has the reader write, one the checks pass (#33): the
                    # first answer a newcomer reads of their own data is not shown as unverified
                    assert "not verified" not in result.output, f"{where}\nshown as not verified:\n{result.output}"
                    self.verified_asks += 1
            self.log.append(f"{where}\n{result.output}")


@pytest.mark.slow
def test_readme_runs_as_written(tmp_path, monkeypatch, request):
    for name in list(os.environ):
        if name.startswith("XLRAG_") and name != "XLRAG_CACHE_DIR":  # the model cache stays shared
            monkeypatch.delenv(name)
    # one llama.cpp thread: on a shared 2-core machine more threads wait on each other
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    run = Run(tmp_path, request)
    steps = plan(README.read_text(encoding="utf-8"))
    for step in steps:
        run.step(step)
    assert sum(s.kind == "xlrag" and s.run for s in steps) >= 5, "the README's commands were not run"
    assert run.verified_asks >= 1, "no README question over the reader's own corpus was asked"
