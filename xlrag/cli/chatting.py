"""`xlrag chat`: a REPL over the corpus, in the user's language, with sources and the agent's trace."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from xlrag.cli._app import (
    MODE_NAMES,
    ConfigOpt,
    ExplanationOpt,
    IndexDirOpt,
    LLMOpt,
    _config,
    _fail,
    app,
    config_default,
    echo,
    out,
    shown,
    terminal_text,
)
from xlrag.errors import ConfigError, XlragError
from xlrag.languages import normalize_code
from xlrag.modes import AUTO, parse_mode
from xlrag.validate import did_you_mean

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

HELP = """commands:
  /mode M      retrieve with IR mode M from now on (auto: the agent's rules)
  /lang L      take questions as language L (ISO 639-1; /lang auto: detect)
  /sources     the passages the last answer cites
  /trace       what the agent did for the last answer
  /reset       forget this session's turns
  /help        this list
  /quit        leave (Ctrl-D too)"""


def check_mode(mode: str) -> None:
    try:
        parse_mode(mode, allow_auto=True)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def sessions_db() -> Path:
    """Chat sessions live beside the model cache (``$XLRAG_CACHE_DIR``, else the user cache)."""
    from xlrag.chains.local.assembly import cache_dir

    return cache_dir().parent / "chat" / "sessions.sqlite"


class _Repl:
    def __init__(self, graph: Any, thread: str, saver: Any, retention: int, mode: str | None, lang: str | None):
        self.graph, self.thread, self.saver, self.retention = graph, thread, saver, retention
        self.mode, self.lang = mode, lang
        self.last: dict[str, Any] | None = None

    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread}}

    def command(self, line: str) -> bool:
        """Run a /command; False to leave."""
        from xlrag.cli.answering import print_trace

        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in ("quit", "exit", "q"):
            return False
        if name == "help":
            echo(HELP)
        elif name == "mode":
            try:
                check_mode(arg)
            except XlragError as e:
                echo(str(e))
            else:
                self.mode = None if arg == AUTO else arg
                echo(f"mode: {arg}")
        elif name == "lang":
            self.lang = None if arg in ("", "auto") else normalize_code(arg)
            echo(f"language: {self.lang or 'detected per question'}")
        elif name == "sources":
            self.sources()
        elif name == "trace":
            if self.last is None:
                echo("no answer yet")
            else:
                print_trace(self.last["trace"])
        elif name == "reset":
            if self.saver is not None and hasattr(self.saver, "delete_thread"):
                self.saver.delete_thread(self.thread)
            self.thread = f"{self.thread.split('#')[0]}#{uuid.uuid4().hex[:6]}" if self.saver is None else self.thread
            self.last = None
            echo("session cleared")
        else:
            known = ["mode", "lang", "sources", "trace", "reset", "help", "quit"]
            echo(f"unknown command /{name}{did_you_mean(name, known)}; /help lists them")
        return True

    def sources(self) -> None:
        if self.last is None or not self.last["turns"]:
            echo("no answer yet")
            return
        turn = self.last["turns"][-1]
        if not turn.sources:
            echo("the last answer cites no passage")
        for s in turn.sources:
            flat = " ".join(s.text.split())
            tag = "" if s.source == "model" else f" ({s.source})"
            out.print(f"[bold]<doc{s.marker}>[/] {shown(s.doc_id or '')} [{shown(s.lang or '?')}]{shown(tag)} "
                      f"{shown(flat[:160])}", highlight=False)

    def ask(self, question: str) -> str:
        """Stream the answer to ``question``; returns the streamed text."""
        from xlrag.agents.chat import chat_turn
        from xlrag.chains.state import AnswerToken

        inputs = {"question": question, "lang": self.lang, "mode": self.mode}
        streamed: list[str] = []
        final: dict[str, Any] | None = None
        for item in chat_turn(self.graph, inputs, self.config):
            if isinstance(item, AnswerToken):
                streamed.append(item.text)
                out.print(terminal_text(item.text), end="", markup=False, highlight=False)
            else:
                final = item
        if streamed:
            out.print()
        if final is None:
            echo("no answer")
            return ""
        self.last = final
        answer, trace = final["answer"], final["trace"]
        if trace.repairs:
            # what streamed was the first try: show what the repairs made of it
            out.print(f"[bold]answer[/] (after {', '.join(r.repair.value for r in trace.repairs)}): "
                      f"{shown(answer.answer or '—')}", highlight=False)
        else:
            out.print(f"[bold]answer:[/] {shown(answer.answer or '—')}", highlight=False)
        from xlrag.cli.answering import print_unverified

        print_unverified(answer)
        markers = " ".join(f"<doc{s.marker}>" for s in final["turns"][-1].sources)
        if markers:
            out.print(f"[dim]sources {shown(markers)} (/sources to read them)[/]", highlight=False)
        if self.saver is not None and hasattr(self.saver, "conn"):
            from xlrag.agents.chat import prune

            prune(self.saver, self.thread, self.retention)
        return "".join(streamed)


@app.command()
def chat(
    index_dir: IndexDirOpt = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="keep the conversation on disk under this "
                                                "name; the next `xlrag chat --session NAME` goes on from it")] = None,
    mode: Annotated[str | None, typer.Option(
        "--mode", "-m", help=f"IR mode: {MODE_NAMES}, or auto {config_default('agent.mode')}")] = None,
    lang: Annotated[str | None, typer.Option(help="the language you write in (detected if omitted)")] = None,
    llm: LLMOpt = None,
    db: Annotated[Path | None, typer.Option("--sessions-db", help="SQLite file of the sessions")] = None,
    explanation: ExplanationOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Chat with the corpus: answers in your language with <docN> sources; /help lists the commands."""
    from xlrag.agents.build import build_chat

    try:
        cfg = _config(config, index_dir=index_dir, llm=llm, explanation=explanation)
        if mode:
            check_mode(mode)
        saver = None
        if session:
            from xlrag.agents.chat import open_checkpointer

            saver = open_checkpointer(db or sessions_db())
        graph = build_chat(cfg, checkpointer=saver)
    except XlragError as e:
        _fail(e)
    repl = _Repl(graph, session or f"mem-{uuid.uuid4().hex[:8]}", saver, cfg.agent.chat.retention_sessions,
                 None if mode == AUTO else mode, lang)
    echo(f"xlrag chat · index {cfg.index_dir} · mode {cfg.agent.mode}" + (f" · session {session}" if session else "")
         + " · /help for commands")
    while True:
        try:
            line = input("> ").strip()
        except EOFError:
            break
        if not line:
            continue
        if line.startswith("/"):
            if not repl.command(line):
                break
            continue
        try:
            repl.ask(line)
        except XlragError as e:
            from xlrag.cli._app import warn

            warn(str(e), "error")
    if saver is not None:
        saver.conn.close()
