"""`xlrag serve`: the HTTP API over one index (FastAPI + uvicorn)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from xlrag.cli._app import ConfigOpt, ExplanationOpt, IndexDirOpt, LLMOpt, _config, _fail, app, warn
from xlrag.errors import XlragError


@app.command()
def serve(
    index_dir: IndexDirOpt = None,
    host: Annotated[str, typer.Option("--host", help="address to bind (--no-auth: 127.0.0.1 only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="port to listen on")] = 8000,
    no_auth: Annotated[bool, typer.Option("--no-auth", help=(
        "serve without an API key, on 127.0.0.1 only, to requests that name it 127.0.0.1, localhost or [::1] "
        "from its own page"))] = False,
    allowed_hosts: Annotated[str | None, typer.Option("--allowed-hosts", help=(
        "with a key: the host names the server answers to, separated by commas (e.g. "
        "xlrag.example.org,*.example.org,10.0.0.5); default any. --no-auth: loopback names only"))] = None,
    llm: LLMOpt = None,
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help=(
        "server processes on the one address, each loading the index and the model; the limits below hold "
        "per worker, and a chat session lives in the worker that made it"))] = 1,
    max_concurrent: Annotated[int, typer.Option(min=1, help="generations at once, per worker")] = 1,
    max_queue: Annotated[int, typer.Option(min=0, help=(
        "requests waiting for a generation, per worker; more get 503"))] = 16,
    max_body_bytes: Annotated[int, typer.Option(min=256, help="larger request bodies get 413")] = 65_536,
    grace_seconds: Annotated[float, typer.Option(min=1, help=(
        "on SIGTERM, seconds running answers may take to finish; no new one starts, and a stream still "
        "running then gets an error event (the default is over the longest answer measured on 2 cores)"))
    ] = 300.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level: debug, info, warning, error")] = "info",
    explanation: ExplanationOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Serve /v1/ask, /v1/chat (streamed), /v1/retrieve and /v1/health; the key comes from XLRAG_API_KEY."""
    from xlrag.server.run import check_bind, require_server
    from xlrag.server.run import serve as run

    try:
        require_server()
        from xlrag.server.guards import ServerLimits, resolve_api_keys
        from xlrag.server.hosts import resolve_allowed_hosts

        # the key and the address first: a server that would refuse to start fails in a blink
        check_bind(host, no_auth)
        resolve_api_keys(None, no_auth)
        resolve_allowed_hosts(allowed_hosts, no_auth)
        if no_auth and os.environ.get("XLRAG_API_KEY"):
            warn("--no-auth: XLRAG_API_KEY is set but not asked for; local clients need no key")
        if workers > 1:
            warn(f"--workers {workers}: each worker keeps its own chat sessions, so a /v1/chat follow-up that "
                 "reaches another worker gets 404 unknown_session; serve chat with --workers 1, or run "
                 "single-worker servers behind a proxy with sticky sessions")
        cfg = _config(config, index_dir=index_dir, llm=llm, explanation=explanation)
        limits = ServerLimits(max_concurrent=max_concurrent, max_queue=max_queue, max_body_bytes=max_body_bytes,
                              grace_seconds=grace_seconds)
        run(cfg, host=host, port=port, no_auth=no_auth, limits=limits, log_level=log_level,
            allowed_hosts=allowed_hosts, workers=workers)
    except XlragError as e:
        _fail(e)
