"""``serve``: check the key and the address, build the app, run uvicorn until SIGTERM/SIGINT.

The shutdown is graceful (:mod:`xlrag.server.drain`): on the signal uvicorn stops accepting
connections and the app starts no new answer, while running ones get ``limits.grace_seconds``
to finish (a stream cut at the deadline is told so); then the app's lifespan exit closes the
retriever and the process exits 0. A second Ctrl-C quits at once. Chat sessions live in
memory and end with the process.

``workers`` > 1 runs that server in as many processes on one socket (:mod:`xlrag.server.workers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlrag.config import XlragConfig
from xlrag.errors import ConfigError
from xlrag.registry import require
from xlrag.server.process import graceful_server, log_to_stderr, uvicorn_options, warm

if TYPE_CHECKING:
    from xlrag.server.guards import ServerLimits

__all__ = ["LOCAL_HOSTS", "check_bind", "require_server", "serve"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


def check_bind(host: str, no_auth: bool) -> str:
    """The address to bind; without a key, only 127.0.0.1 is allowed."""
    if no_auth and host not in LOCAL_HOSTS:
        raise ConfigError(f"--no-auth serves 127.0.0.1 only, not {host}: drop --host, or set XLRAG_API_KEY and "
                          f"drop --no-auth to serve other machines")
    # localhost may resolve to a non-loopback or IPv6 address: bind the one meant
    return "127.0.0.1" if no_auth else host


def require_server() -> None:
    """FastAPI and uvicorn are the ``server`` extra: say so, rather than fail on an import."""
    require("fastapi", "server", "xlrag serve")
    require("uvicorn", "server", "xlrag serve")
    require("swagger_ui_bundle", "server", "xlrag serve")


def serve(config: XlragConfig, *, host: str = "127.0.0.1", port: int = 8000, no_auth: bool = False,
          api_key: str | None = None, limits: ServerLimits | None = None, log_level: str = "info",
          allowed_hosts: str | list[str] | None = None, workers: int = 1) -> None:
    """Run the server in the foreground until it is stopped (SIGTERM or Ctrl-C: gracefully);
    ``workers`` processes, each with its own ``limits``, on one socket."""
    require_server()
    import uvicorn

    from xlrag.server.guards import ServerLimits, resolve_api_keys
    from xlrag.server.hosts import resolve_allowed_hosts

    if workers < 1:
        raise ConfigError(f"--workers {workers}: a server needs at least 1 worker process")
    bind = check_bind(host, no_auth)
    keys = resolve_api_keys(api_key, no_auth)  # fail before loading anything
    resolve_allowed_hosts(allowed_hosts, no_auth)

    log_to_stderr(log_level)
    limits = limits or ServerLimits()
    if workers > 1:
        from xlrag.server.workers import WorkerSpec, bind_socket, serve_workers

        # the hosts as given, not as resolved: each worker's create_app resolves them again
        given = allowed_hosts.split(",") if isinstance(allowed_hosts, str) else allowed_hosts
        spec = WorkerSpec(config=config, api_keys=keys, limits=limits, log_level=log_level,
                          allowed_hosts=tuple(h for h in given or () if h.strip()) or None)
        serve_workers(spec, bind_socket(bind, port), workers)
        return
    from xlrag.server.app import create_app

    app = create_app(config, api_key=api_key, no_auth=no_auth, limits=limits, allowed_hosts=allowed_hosts)
    warm(app)
    options = {"host": bind, "port": port, **uvicorn_options(limits, log_level)}
    graceful_server(uvicorn.Config(app, **options), app.state.xlrag.drain, limits.grace_seconds).run()
