"""The command line's surface, walked from typer's command tree so it cannot drift: one meaning
per short flag, group helps that name their commands, config-filled defaults that say so, and
the demo's closing commands, which must parse."""

from __future__ import annotations

import os
import re
import shlex
from collections import defaultdict
from pathlib import Path

import pytest
import typer

from tests.clitools import error_line, run
from xlrag.cli import app
from xlrag.config import XlragConfig

ROOT = typer.main.get_command(app)


# typer (0.29) carries its own copy of click: groups and options are told apart by what they have
def _is_group(cmd) -> bool:
    return hasattr(cmd, "commands")


def _tree(cmd=ROOT, path: tuple[str, ...] = ()):
    yield path, cmd
    if _is_group(cmd):
        for name, sub in cmd.commands.items():
            yield from _tree(sub, (*path, name))


def _options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option"]


def test_the_walk_sees_every_command():
    paths = {" ".join(p) for p, _ in _tree()}
    assert {"ask", "retrieve", "demo", "eval", "eval retrieval", "eval run", "eval judge", "prompts show",
            "models list"} <= paths
    assert len(paths) >= 22


def test_every_short_flag_has_a_long_form_and_one_meaning():
    long_names: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for path, cmd in _tree():
        for opt in _options(cmd):
            names = [*opt.opts, *opt.secondary_opts]
            longs = [n for n in names if n.startswith("--")]
            for short in (n for n in names if not n.startswith("--")):
                assert longs, f"xlrag {' '.join(path)}: {short} has no long form"
                long_names[short].add(longs[0])
                where[short].append(" ".join(path))
    drift = {s: sorted(n) for s, n in long_names.items() if len(n) > 1}
    assert not drift, f"short flags with several meanings: {drift}"
    # the ones that drifted before: -k had no long form, -o meant --options in ask and --out elsewhere
    # -k is the passages shown; eval retrieval's ranking depth is --depth (and no -k)
    assert long_names["-k"] == {"--top-k"} and {"retrieve", "ask", "demo"} <= set(where["-k"])
    assert "eval retrieval" not in where["-k"]
    assert long_names["-o"] == {"--out"} and {"retrieve", "eval run", "eval judge"} <= set(where["-o"])


def test_ask_takes_option_only():
    ask = ROOT.commands["ask"]
    ctx = ask.make_context("ask", ["--option", "España", "--option", "Marruecos", "-f", "mc", "¿Quién?"])
    assert ctx.params["options"] == ["España", "Marruecos"]
    names = [n for o in _options(ask) for n in o.opts]
    assert "-o" not in names and "--options" not in names  # 0.1.0 never shipped the old name


def test_each_group_help_names_its_commands_and_no_other():
    top = set(ROOT.commands)
    groups = [(p, c) for p, c in _tree() if _is_group(c)]
    assert len(groups) >= 4
    for path, group in groups:
        words = set(re.findall(r"[a-z]+", (group.help or "").lower()))
        missing = set(group.commands) - words
        assert not missing, f"xlrag {' '.join(path)} help does not name {sorted(missing)}: {group.help}"
        if path:  # `prompts` once promised a `check` it does not have (check is a top-level command)
            stray = (top - set(group.commands) - {path[-1]}) & words
            assert not stray, f"xlrag {' '.join(path)} help names {sorted(stray)}, not its commands"


def test_a_switch_shows_no_value_and_an_option_its_type():
    switches = 0
    for path, cmd in _tree():
        if _is_group(cmd):
            continue
        out = run(*path, "--help").output
        assert "Usage:" in out and "No such command" not in out, out
        assert "<bool>" not in out, f"xlrag {' '.join(path)} --help"
        switches += sum(1 for o in _options(cmd) if o.is_flag and not o.hidden)
    assert switches > 20
    assert re.search(r"--index-dir\s+-i\s+<path>", run("retrieve", "--help").output)


_FROM_CONFIG = re.compile(r"\(default: ([\w.]+) from config, ([^)]*)\)")
# the options filled from the config when left out
_CONFIG_FILLED = {"--index-dir", "--mode", "--top-k", "--depth", "--fusion", "--embedder", "--llm", "--chunk-size"}


def _setting(path: str):
    value = XlragConfig()
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_options_filled_from_the_config_say_where_and_show_its_default(monkeypatch):
    for key in [k for k in os.environ if k.upper().startswith("XLRAG_")]:
        monkeypatch.delenv(key)
    seen = 0
    for path, cmd in _tree():
        for opt in _options(cmd):
            if opt.default is not None or not set(opt.opts) & _CONFIG_FILLED:
                continue
            found = _FROM_CONFIG.search(opt.help or "")
            assert found, f"xlrag {' '.join(path)} {opt.opts}: no '(default: ... from config, ...)' in {opt.help!r}"
            setting, shown = found.groups()
            assert shown == str(_setting(setting)), (path, opt.opts, setting)
            seen += 1
    assert seen >= 20


def test_eval_retrieval_requires_its_inputs_and_says_why_its_k_is_20():
    params = {p.name: p for p in ROOT.commands["eval"].commands["retrieval"].params}
    assert params["queries"].required and params["qrels"].required
    assert {"fusion", "config"} <= set(params)
    res = run("eval", "retrieval", "--qrels", "q.jsonl")
    assert res.exit_code == 2 and "Missing option '--queries'" in res.output
    helptext = run("eval", "retrieval", "-h").output
    assert "retrieval.retrieve_k from config, 20" in helptext and "retrieve_k deep" in " ".join(helptext.split())


def test_demo_refuses_an_index_of_your_own(xquad_index):
    from xlrag.indexes.store import LanguageStores

    before = LanguageStores.open(xquad_index).counts()
    line = error_line(run("demo", "-i", xquad_index, "--answers", "0"))
    assert "holds an index of your own" in line and " -i " in line
    assert LanguageStores.open(xquad_index).counts() == before  # nothing added


def _parse(args: list[str]):
    """Parse ``args`` down the tree as the CLI would, without running the command: the context
    of the command reached."""
    cmd, ctx = ROOT, ROOT.make_context("xlrag", list(args))
    while _is_group(cmd):
        name, cmd, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        ctx = cmd.make_context(name, rest, parent=ctx)
    return ctx


@pytest.mark.parametrize("index_dir,config", [(".xlrag-index", None), ("elsewhere/ix", "my.yaml")])
def test_the_demos_next_commands_parse(index_dir, config):
    from xlrag.cli.demo import next_commands

    lines = next_commands(Path(index_dir), Path(".xlrag-index"), Path(config) if config else None)
    commands = [shlex.split(x) for x in lines]
    assert all(c[0] == "xlrag" for c in commands if c[0] != "source")
    parsed = [_parse(c[1:]) for c in commands if c[0] == "xlrag"]
    assert {c.command_path.split(" ", 1)[1] for c in parsed} >= {"ask", "chat", "retrieve", "eval retrieval"}
    for ctx in parsed:
        given = ctx.params.get("index_dir")
        assert given == (None if index_dir == ".xlrag-index" else Path(index_dir))
        assert ctx.params.get("config") == (Path(config) if config else None)
