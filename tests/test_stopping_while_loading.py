"""A face told to stop while its models load leaves at once, with a clean exit code and one line saying so.

The target is a named pipe nobody writes: llama.cpp's load blocks in opening it for as long as the test runs, as a
load from a slow disk would for minutes. Before, the HTTP server answered SIGTERM 30 s later with exit code 1 and
"the generation did not stop in time", an editor that quit left the editor server waiting as long, and the chat
gave the terminal back on Ctrl-Q but its process stayed until the load ended.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pexpect
import pytest
from http_server import HttpServer
from server_client import Server

STOPPED = "ds4spec: stopped while the models were loading"
PROMPT = "def add(a, b):\n"


@pytest.fixture
def endless_load(tmp_path: Path) -> Path:
    pipe = tmp_path / "never-written.gguf"
    os.mkfifo(pipe)
    return pipe


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_the_http_server_stopped_while_loading_exits_at_once(endless_load: Path, sig: int, code: int) -> None:
    srv = HttpServer(endless_load, wait_ready=False)
    try:
        loading = httpx.get(srv.base + "/health")
        assert loading.status_code == 503 and loading.json()["error"]["code"] == "model_loading"
        start = time.monotonic()
        assert srv.terminate(sig, timeout=20) == code
        assert time.monotonic() - start < 5
        assert STOPPED in srv.stderr_text()
        assert "did not stop in time" not in srv.stderr_text() and "Traceback" not in srv.stderr_text()
    finally:
        srv.kill()


def test_the_editor_server_left_while_loading_answers_what_waited_and_exits_at_once(endless_load: Path) -> None:
    srv = Server(endless_load)
    try:
        waiting = srv.request("complete", {"prefix": PROMPT, "max_tokens": 8})
        start = time.monotonic()
        assert srv.finish(timeout=20) == 0
        assert time.monotonic() - start < 5
        assert srv.response(waiting)["error"]["message"] == "the server is shutting down"
        assert STOPPED in srv.stderr_text() and "did not stop in time" not in srv.stderr_text()
    finally:
        srv.kill()


def test_the_chat_quit_while_loading_exits_at_once(endless_load: Path, tmp_path: Path) -> None:
    env = {**os.environ, "DS4SPEC_HOME": str(tmp_path / "home"), "TERM": "xterm-256color"}
    chat = pexpect.spawn(sys.executable, ["-m", "ds4spec", "chat", "--target", str(endless_load), "--draft", "none"],
                         env=env, timeout=60, dimensions=(30, 100))
    try:
        chat.expect_exact("loading the models")
        chat.sendcontrol("q")
        start = time.monotonic()
        chat.expect(pexpect.EOF, timeout=20)
        assert time.monotonic() - start < 5
        chat.close()
        assert chat.exitstatus == 0
        assert STOPPED in chat.before.decode("utf-8", "replace")
    finally:
        chat.terminate(force=True)
