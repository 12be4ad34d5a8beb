"""A real `chroma run` server on 127.0.0.1 for the tests that need one (the chromadb wheel ships
the CLI): started on a free port, stopped when the test module ends."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chroma_server(data: Path) -> Iterator[int]:
    """Serve ``data``; yields the port once the server accepts connections."""
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    assert chroma, "the chromadb wheel ships the chroma CLI"
    port = free_port()
    proc = subprocess.Popen([chroma, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)
