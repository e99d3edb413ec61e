"""A strict test client for ``ds4spec serve --stdio``: spawns the real server and reads its stdout frame by frame.

Every byte the server writes must belong to a well-formed frame holding a JSON-RPC 2.0 response or
notification; anything else fails the test that reads it (``violations``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[1]


def frame(message: Any) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_frames(data: bytes) -> list[dict[str, Any]]:
    """Every message in ``data``, which must be nothing but whole protocol frames; raises ``ValueError``."""
    out: list[dict[str, Any]] = []
    stream = _Bytes(data)
    while (msg := read_message(stream)) is not None:
        out.append(msg)
    return out


def read_message(stream: BinaryIO | _Bytes) -> dict[str, Any] | None:
    """One message, strictly as the server must write it; None at a clean end of stream."""
    header = stream.readline()
    if not header:
        return None
    if not header.startswith(b"Content-Length: ") or not header.endswith(b"\r\n"):
        raise ValueError(f"not a Content-Length header: {header[:80]!r}")
    length = int(header[len(b"Content-Length: "):-2])
    if stream.readline() != b"\r\n":
        raise ValueError("the header block does not end with an empty line")
    body = stream.read(length)
    if len(body) != length:
        raise ValueError(f"the stream ended inside a body ({len(body)} of {length} bytes)")
    msg = json.loads(body.decode("utf-8"))
    check_message(msg)
    return msg  # type: ignore[no-any-return]


def check_message(msg: Any) -> None:
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise ValueError(f"not a JSON-RPC 2.0 message: {msg!r}")
    if "method" in msg:
        if set(msg) != {"jsonrpc", "method", "params"} or "id" in msg:
            raise ValueError(f"a server notification has method and params only: {msg!r}")
        return
    if "id" not in msg or ("result" in msg) == ("error" in msg):
        raise ValueError(f"a response has an id and exactly one of result and error: {msg!r}")
    if "error" in msg:
        err = msg["error"]
        if not isinstance(err.get("code"), int) or not isinstance(err.get("message"), str):
            raise ValueError(f"an error has an integer code and a message: {msg!r}")
        if "\n" in err["message"]:
            raise ValueError(f"an error message is one line: {msg!r}")


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def readline(self) -> bytes:
        end = self._data.find(b"\n", self._pos)
        end = len(self._data) if end < 0 else end + 1
        line, self._pos = self._data[self._pos:end], end
        return line

    def read(self, n: int) -> bytes:
        chunk, self._pos = self._data[self._pos:self._pos + n], min(self._pos + n, len(self._data))
        return chunk


def server_command(target: Path | str, *extra: str, verbose: bool = False) -> list[str]:
    head = [sys.executable, "-m", "ds4spec", *(["-v"] if verbose else [])]
    # One thread: llama.cpp's workers spin while they wait, and on a busy 2-core machine two spinning
    # servers (or a server beside the test's own engine) slow each other down many times over.
    return [*head, "serve", "--stdio", "--target", str(target), "--draft", "none", "--threads", "1", *extra]


class Server:
    """The real server over pipes. ``request`` sends and returns the id; ``response`` waits for its answer."""

    def __init__(self, target: Path | str, *extra: str, verbose: bool = False) -> None:
        env = {**os.environ, **({"DS4SPEC_LLAMA_LOG": "1"} if verbose else {})}
        self.proc = subprocess.Popen(server_command(target, *extra, verbose=verbose), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []  # in arrival order
        self.violations: list[str] = []
        self._next_id = 0
        self._ended = False
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=lambda: self._stderr.append(self.proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        self._stderr_reader.start()

    def _read(self) -> None:
        try:
            while (msg := read_message(self.proc.stdout)) is not None:  # type: ignore[arg-type]
                self._inbox.put(msg)
        except (ValueError, UnicodeDecodeError) as exc:
            self.violations.append(str(exc))
        self._inbox.put(None)

    # -- sending ----------------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def send(self, message: Any) -> None:
        self.send_raw(frame(message))

    def request(self, method: str, params: dict[str, Any] | None = None, *, rid: Any = None) -> Any:
        if rid is None:
            self._next_id += 1
            rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    # -- receiving --------------------------------------------------------------------------------------

    def next_message(self, timeout: float = 30.0) -> dict[str, Any] | None:
        """The next message, or None once stdout has ended; ``queue.Empty`` after ``timeout`` seconds."""
        if self._ended:
            return None
        msg = self._inbox.get(timeout=timeout)
        if msg is None:
            self._ended = True
        else:
            self.received.append(msg)
        return msg

    def response(self, rid: Any, timeout: float = 30.0) -> dict[str, Any]:
        """Waits for the response to ``rid`` (messages before it are kept in ``received``)."""
        for msg in self.received:
            if "method" not in msg and msg.get("id") == rid:
                return msg
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next_message(max(deadline - time.monotonic(), 0.01))
            if msg is None:
                raise AssertionError(f"the server closed stdout before answering {rid!r}: {self.stderr_text()}")
            if "method" not in msg and msg.get("id") == rid:
                return msg

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def partials(self, rid: Any) -> list[str]:
        return [m["params"]["text"] for m in self.received if m.get("method") == "partial" and m["params"]["id"] == rid]

    # -- ending -----------------------------------------------------------------------------------------

    def close_stdin(self) -> None:
        if not self.proc.stdin.closed:  # type: ignore[union-attr]
            self.proc.stdin.close()  # type: ignore[union-attr]

    def finish(self, timeout: float = 30.0) -> int:
        """Closes stdin, drains stdout, and returns the exit code; fails on any non-protocol byte."""
        self.close_stdin()
        code = self.proc.wait(timeout)
        while self.next_message(timeout) is not None:
            pass
        assert not self.violations, self.violations
        return code

    def stderr_text(self) -> str:
        """All the server wrote on stderr once it has ended; what has been read so far while it runs."""
        if self.proc.poll() is not None:
            # The reader thread sees the end of the pipe after the exit that wait() reports; without the join a
            # fast exit read as an empty stderr (CI, stop 46).
            self._stderr_reader.join(30)
        return b"".join(self._stderr).decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_session(target: Path | str, data: bytes, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Feeds ``data`` to a fresh server and waits for it to end at the end of input."""
    return subprocess.run(server_command(target, *extra), input=data, capture_output=True, timeout=timeout, cwd=ROOT)


def messages_by_id(messages: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in messages if "method" not in m}
