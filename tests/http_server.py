"""The real ``ds4spec serve --http`` in a child process, on a free port, for tests that talk to it over a socket."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"serving the OpenAI API on (http://\S+)/v1")


class HttpServer:
    """``base`` is ``http://127.0.0.1:PORT``; ``url`` the API's root (``.../v1``). Port 0: the OS picks one."""

    def __init__(self, target: Path | str | None, *extra: str, draft: str | None = "none", threads: int | None = 1,
                 env: dict[str, str] | None = None, wait_ready: bool = True) -> None:
        """None for ``target``, ``draft`` or ``threads`` leaves the flag out: the server's default applies. One
        thread by default: llama.cpp's workers spin while they wait, and a busy 2-core machine has none to spare."""
        argv = [sys.executable, "-m", "ds4spec", "serve", "--http", "127.0.0.1:0",
                *(["--target", str(target)] if target is not None else []),
                *(["--draft", draft] if draft is not None else []),
                *(["--threads", str(threads)] if threads is not None else []), *extra]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=ROOT, env={**os.environ, **(env or {})})
        self._stderr: list[str] = []
        self._found = threading.Event()
        self.base = ""
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        if not self._found.wait(60):
            self.kill()
            raise AssertionError(f"the server did not say where it listens: {self.stderr_text()}")
        self.url = self.base + "/v1"
        if wait_ready:
            self.wait_ready()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            text = line.decode("utf-8", "replace")
            self._stderr.append(text)
            match = _LISTENING.search(text)
            if match and not self._found.is_set():
                self.base = match.group(1)
                self._found.set()

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while httpx.get(self.base + "/health").status_code != 200:
            assert time.monotonic() < deadline, f"the server never became ready: {self.stderr_text()}"
            time.sleep(0.05)

    def health(self) -> dict[str, Any]:
        return httpx.get(self.base + "/health").json()  # type: ignore[no-any-return]

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, json=body, timeout=60, **kwargs)

    def wait_idle(self, timeout: float = 30) -> None:
        """Until nothing runs and nothing waits: what a freed server looks like."""
        deadline = time.monotonic() + timeout
        while (state := self.health())["running"] or state["queued"]:
            assert time.monotonic() < deadline, f"the server is still busy: {state}"
            time.sleep(0.02)

    def stderr_text(self) -> str:
        """All the server wrote on stderr once it has ended; what has been read so far while it runs."""
        if self.proc.poll() is not None:
            self._stderr_reader.join(30)  # the pipe's last lines arrive after the exit that wait() reports
        return "".join(self._stderr)

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def sse_data(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of a server-sent event stream, JSON-decoded, ``[DONE]`` kept as the string."""
    import json

    out: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out
