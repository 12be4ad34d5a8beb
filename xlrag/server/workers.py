"""``xlrag serve --workers N``: N server processes answering on one socket.

The parent binds the address once and starts N worker processes (``spawn``: no state of the
parent's is shared by accident); each builds its own app from one :class:`WorkerSpec` (the
config, the keys, the hosts, the limits) and runs it in the same graceful uvicorn server as a
single-process ``serve`` (:mod:`xlrag.server.process`), accepting connections from the shared
socket: the kernel hands each new connection to one worker, and a kept-alive connection stays
with its worker.

The spec reaches each worker pickled through the pipe that starts the process, not through
an environment variable or a file: the API keys are never written anywhere a worker's
environment or the disk would show them to another process.

uvicorn's own ``--workers`` supervisor is not used: its workers run a plain ``uvicorn.Server``,
which would neither begin :class:`~xlrag.server.drain.Drain` on SIGTERM (running answers would
not be told at the grace deadline, new ones would not get 503 ``shutting_down``) nor exit 0
after a graceful stop. This supervisor does less than uvicorn's (no restart of a dead worker):

* SIGTERM or Ctrl-C: every worker gets SIGTERM once and drains as one ``serve`` process does;
  the parent exits 0 once they all exited 0. A second Ctrl-C reaches the workers from the
  terminal and quits them at once.
* a worker that cannot start (a missing index, say) stops the others and its one-line error is
  the parent's; a worker that dies while serving stops the others gracefully and the parent
  fails, saying so. A dead worker is a bug or an out-of-memory kill to see, not to hide: the
  process manager that started ``serve`` (systemd, Kubernetes) restarts it whole.
* a worker whose parent is gone (killed with SIGKILL) drains and exits on its own, rather than
  serve on unsupervised.

What N workers change for clients (``docs/how-to/server.md``): the limits hold per worker, and
chat sessions live in the memory of the worker that made them.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xlrag.config import XlragConfig
from xlrag.errors import ConfigError, XlragError
from xlrag.server.guards import ServerLimits

__all__ = ["STARTUP_FAILURE", "WorkerSpec", "bind_socket", "serve_workers"]

log = logging.getLogger("xlrag.server")

#: A worker's exit code when it could not start (uvicorn's own code for it).
STARTUP_FAILURE = 3
_READY = "ready"


class WorkerSpec(BaseModel):
    """Everything a worker builds its app from; resolved and checked by the parent first."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    config: XlragConfig
    api_keys: tuple[str, ...] | None = Field(repr=False, description="None: --no-auth")
    allowed_hosts: tuple[str, ...] | None = Field(None, description="None: any (with a key)")
    limits: ServerLimits
    log_level: str = "info"


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening address, bound once by the parent and shared by every worker."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({e.strerror}): pick a free --port, or stop the "
                          f"process that holds it") from None
    sock.set_inheritable(True)
    return sock


def _orphaned(parent: int) -> None:
    """SIGTERM to this worker once its parent is gone (killed with SIGKILL, say): it drains and
    exits rather than serve on, unsupervised, from the socket it shares."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def _worker(spec: WorkerSpec, sock: socket.socket, report: Connection, parent: int) -> None:
    """One worker process: build the app, tell the parent, serve until SIGTERM."""
    import uvicorn

    from xlrag.server.app import create_app
    from xlrag.server.process import graceful_server, log_to_stderr, uvicorn_options, warm

    log_to_stderr(spec.log_level)
    try:
        app = create_app(spec.config, api_key=list(spec.api_keys) if spec.api_keys is not None else None,
                         no_auth=spec.api_keys is None, limits=spec.limits,
                         allowed_hosts=list(spec.allowed_hosts) if spec.allowed_hosts is not None else None)
        warm(app)
    except XlragError as e:
        report.send(str(e))
        sys.exit(STARTUP_FAILURE)
    server = graceful_server(uvicorn.Config(app, **uvicorn_options(spec.limits, spec.log_level)),
                             app.state.xlrag.drain, spec.limits.grace_seconds)
    report.send(_READY)
    threading.Thread(target=_orphaned, args=(parent,), name="xlrag-orphan-watch", daemon=True).start()
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)


class _Supervisor:
    def __init__(self, spec: WorkerSpec, sock: socket.socket, workers: int):
        self.spec, self.sock, self.workers = spec, sock, workers
        self.procs: list[Any] = []
        self.reports: dict[Connection, Any] = {}
        self.stopping = False
        self.ready: set[int] = set()
        self.failure: str | None = None

    def start(self) -> None:
        """The first worker; each next one once the one before is ready (:meth:`_read`): the
        workers open the index one at a time (see :func:`_worker`)."""
        self._spawn()

    def _spawn(self) -> None:
        if self.stopping or len(self.procs) >= self.workers:
            return
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(self.spec, self.sock, child_end, os.getpid()),
                           name="xlrag-worker", daemon=False)
        proc.start()
        child_end.close()
        self.procs.append(proc)
        self.reports[parent_end] = proc

    def stop(self, sig: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        """SIGTERM to every worker, once: each drains. (On Ctrl-C the terminal has sent the
        workers SIGINT too; a second SIGINT from here would make uvicorn quit without the grace.)"""
        if self.stopping:
            return
        self.stopping = True
        for proc in self.procs:
            if proc.exitcode is None:
                os.kill(proc.pid, signal.SIGTERM)

    def _read(self, conn: Connection) -> None:
        proc = self.reports.pop(conn)
        try:
            message = conn.recv()
        except EOFError:  # exited before it said anything: its exit code tells
            return
        if message == _READY:
            self.ready.add(proc.pid)
            log.info("worker %d ready", proc.pid)
            self._spawn()
        elif self.failure is None:
            self.failure = message
            self.stop()

    def _ended(self, proc: Any) -> None:
        """A worker exited without being told to: the server stops, saying why."""
        for conn, owner in list(self.reports.items()):
            if owner is proc and conn.poll():
                self._read(conn)  # its one-line error, if it could not start
        if self.stopping:
            return
        when = "while serving" if proc.pid in self.ready else "before it started"
        how = f"was killed by signal {-proc.exitcode}" if proc.exitcode < 0 else f"exited with code {proc.exitcode}"
        self.failure = (f"worker {proc.pid} {how} {when} (its log is above); the other "
                        f"workers were stopped gracefully: fix what the log says and start the server again")
        self.stop()

    def run(self) -> None:
        while any(p.exitcode is None for p in self.procs):
            ended = wait([*self.reports, *(p.sentinel for p in self.procs if p.exitcode is None)], timeout=0.5)
            for item in ended:
                if item in self.reports:
                    self._read(item)  # type: ignore[arg-type]
            for proc in self.procs:
                if proc.exitcode is not None and not self.stopping:
                    self._ended(proc)
        for proc in self.procs:
            proc.join()
        if self.failure is None:
            bad = [f"{p.pid} (exit code {p.exitcode})" for p in self.procs if p.exitcode != 0]
            if bad:
                self.failure = f"worker(s) {', '.join(bad)} did not stop cleanly; their log is above"
        if self.failure is not None:
            raise XlragError(self.failure)


def serve_workers(spec: WorkerSpec, sock: socket.socket, workers: int) -> None:
    """Run ``workers`` processes on ``sock`` until SIGTERM or Ctrl-C; returns once all have
    stopped gracefully, raises with the first worker's one-line error otherwise."""
    supervisor = _Supervisor(spec, sock, workers)
    log.info("xlrag supervisor %d: %d workers on one socket", os.getpid(), workers)
    # before any worker starts: a signal during the start must not leave one unsupervised
    previous = {sig: signal.signal(sig, supervisor.stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        supervisor.start()
        supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    log.info("xlrag supervisor %d: all workers stopped", os.getpid())
