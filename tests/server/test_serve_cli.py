"""`xlrag serve`: refuses to start unsafely (one-line errors), and stops gracefully on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.clitools import error_line, run
from tests.server.conftest import QUESTION, free_port, wait_until_up


def test_serve_without_a_key_fails_with_a_one_line_fix(xquad_index, monkeypatch):
    monkeypatch.delenv("XLRAG_API_KEY", raising=False)
    line = error_line(run("serve", "--index-dir", xquad_index))
    assert "XLRAG_API_KEY" in line and "--no-auth" in line
    monkeypatch.setenv("XLRAG_API_KEY", "short")
    assert "at least 16" in error_line(run("serve", "--index-dir", xquad_index))


def test_no_auth_binds_loopback_only(xquad_index, monkeypatch):
    monkeypatch.delenv("XLRAG_API_KEY", raising=False)
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        line = error_line(run("serve", "--index-dir", xquad_index, "--no-auth", "--host", host))
        assert "127.0.0.1 only" in line and host in line


def test_a_missing_index_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XLRAG_API_KEY", "k" * 32)
    assert "is not an xlrag index" in error_line(run("serve", "--index-dir", tmp_path / "nothing"))


def test_serve_answers_then_stops_gracefully_on_sigterm(xquad_index, tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLRAG_")}
    xlrag = Path(sys.executable).with_name("xlrag")
    # cwd: no xlrag.yaml of the repository's is read
    proc = subprocess.Popen([str(xlrag), "serve", "--index-dir", str(xquad_index), "--no-auth", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(proc, url)
        hits = httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION, "k": 1}, timeout=60).json()["hits"]
        assert hits[0]["doc_id"] == "xquad-00-es"
        # DNS rebinding (issue #52): the name a rebinding page's browser sends is refused, the
        # names a user opens the page by are not
        rebound = httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION, "k": 1}, timeout=60,
                             headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 400 and rebound.json()["error"]["type"] == "host_not_allowed"
        assert httpx.get(f"{url}/", headers={"Host": f"localhost:{port}"}, timeout=60).status_code == 200
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # a graceful shutdown that kept its promise exits 0 (uvicorn alone would re-raise the signal: 143)
    assert proc.returncode == 0, output
    assert "xlrag server ready" in output and "xlrag server stopped" in output
    assert output.index("xlrag server stopped") < output.index("Application shutdown complete")
    assert "Traceback" not in output


def test_serve_options_default_to_the_server_limits():
    """The CLI's defaults are ServerLimits' (one owner: a changed default cannot drift)."""
    import typer

    from xlrag.cli import app
    from xlrag.server.guards import ServerLimits

    command = typer.main.get_command(app).commands["serve"]
    defaults = {p.name: p.default for p in command.params}
    for name in ("max_concurrent", "max_queue", "max_body_bytes", "grace_seconds"):
        assert defaults[name] == ServerLimits.model_fields[name].default, name
