"""One engine, many clients: the FIFO queue, its bound, clients that go away, and the end on SIGTERM.

The never-ending tiny model generates for seconds when asked for thousands of tokens, so a disconnect or a
signal lands in the middle of a generation, and "freed within a cycle" is measurably shorter than the rest of it.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from http_server import HttpServer, sse_data
from tinymodel import build_tiny_gguf

LONG = 8000  # tokens: about 7 s on the never-ending model, so a disconnect comes long before the end
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def never_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("never") / "never.gguf", never_ends=True)


@pytest.fixture(scope="module")
def long_server(never_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(never_gguf, "--ctx", "8192", "--max-queue", "2")
    yield srv
    srv.kill()


def hang_up_later(server: HttpServer, body: dict[str, Any], path: str = "/v1/chat/completions") -> socket.socket:
    """A client that sends a request and will close the connection without reading the answer."""
    address = urlsplit(server.base)
    sock = socket.create_connection((address.hostname, address.port))
    data = json.dumps(body).encode()
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {address.netloc}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def wait_for(server: HttpServer, running: bool, queued: int, timeout: float = 10) -> float:
    """Seconds until /health reports this; fails after ``timeout``."""
    start = time.monotonic()
    while (state := server.health())["running"] != running or state["queued"] != queued:
        assert time.monotonic() - start < timeout, f"still {state}"
        time.sleep(0.01)
    return time.monotonic() - start


def open_stream(server: HttpServer, stack: Any) -> Iterator[str]:
    """A long streamed chat, read up to its first piece of text: it is generating from now on. Keep the lines:
    dropping them closes the connection."""
    body = {"messages": HELLO, "max_tokens": LONG, "stream": True}
    response = stack.enter_context(httpx.stream("POST", server.url + "/chat/completions", json=body, timeout=60))
    lines = response.iter_lines()
    for line in lines:
        if '"content":"' in line and '"content":""' not in line:
            break
    return lines


def test_a_client_that_disconnects_mid_stream_frees_the_server_within_a_cycle(long_server: HttpServer) -> None:
    from contextlib import ExitStack

    with ExitStack() as stack:
        lines = open_stream(long_server, stack)
        assert long_server.health()["running"]
    del lines
    freed_in = wait_for(long_server, running=False, queued=0)
    assert freed_in < 2.0, f"the generation went on for {freed_in:.1f} s after its client left"
    assert long_server.post("/completions", {"prompt": "x", "max_tokens": 3}).status_code == 200


def test_a_queued_client_that_disconnects_leaves_the_queue_at_once(long_server: HttpServer) -> None:
    from contextlib import ExitStack

    with ExitStack() as stack:
        lines = open_stream(long_server, stack)
        waiting = hang_up_later(long_server, {"messages": HELLO, "max_tokens": 5})
        wait_for(long_server, running=True, queued=1)
        waiting.close()
        assert wait_for(long_server, running=True, queued=0) < 2.0
    del lines
    wait_for(long_server, running=False, queued=0)


def test_a_full_queue_is_a_429_and_the_queue_drains_after(long_server: HttpServer) -> None:
    from contextlib import ExitStack

    with ExitStack() as stack:
        lines = open_stream(long_server, stack)
        waiting = [hang_up_later(long_server, {"messages": HELLO, "max_tokens": 5}) for _ in range(2)]
        wait_for(long_server, running=True, queued=2)
        refused = long_server.post("/chat/completions", {"messages": HELLO, "max_tokens": 5})
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "queue_full"
        assert refused.headers["retry-after"] == "1"
        for sock in waiting:
            sock.close()
    del lines
    wait_for(long_server, running=False, queued=0)


def test_with_no_queue_a_request_runs_when_none_is_and_is_refused_while_one_is(never_gguf: Path) -> None:
    """``--max-queue 0``: nobody waits. It was a 429 for every request, the server idle."""
    from contextlib import ExitStack

    srv = HttpServer(never_gguf, "--ctx", "8192", "--max-queue", "0")
    try:
        assert srv.post("/chat/completions", {"messages": HELLO, "max_tokens": 3}).status_code == 200
        with ExitStack() as stack:
            lines = open_stream(srv, stack)
            refused = srv.post("/chat/completions", {"messages": HELLO, "max_tokens": 3})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["message"] == "another request is running for the model; try again later"
        del lines
        wait_for(srv, running=False, queued=0)
        assert srv.post("/completions", {"prompt": "x", "max_tokens": 3}).status_code == 200
    finally:
        srv.kill()


def test_four_concurrent_clients_get_the_answers_each_gets_alone(tiny_models: dict[str, Path]) -> None:
    # Speculating with a drafter of the other tokenizer family, as ds4spec does with the real pair; every cycle drafts,
    # since what the policies would make of two random tiny models depends on the machine's timings.
    srv = HttpServer(tiny_models["bpe"], "--warmup", "0", "--draft-fixed", "--draft-max", "3",
                     draft=str(tiny_models["spm"]))
    prompts = ["def add(a, b):\n", "class Stack:\n", "import os\n\n", "for i in range(10):\n"]
    try:
        def ask(prompt: str) -> dict[str, Any]:
            return srv.post("/completions", {"prompt": prompt, "max_tokens": 48}).json()  # type: ignore[no-any-return]

        alone = [ask(p) for p in prompts]
        together: list[dict[str, Any]] = [{} for _ in prompts]
        threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, ask(prompts[i])))
                   for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert [a["choices"][0]["text"] for a in together] == [a["choices"][0]["text"] for a in alone]
        assert all(a["choices"][0]["text"] for a in alone)
        assert sum(a["ds4spec"]["drafted_tokens"] for a in alone + together) > 0  # it did speculate
    finally:
        srv.kill()


def test_sigterm_answers_the_running_stream_refuses_the_queued_request_and_exits(never_gguf: Path) -> None:
    srv = HttpServer(never_gguf, "--ctx", "8192")
    queued: list[httpx.Response] = []
    try:
        body = {"messages": HELLO, "max_tokens": LONG, "stream": True}
        with httpx.stream("POST", srv.url + "/chat/completions", json=body, timeout=60) as response:
            lines = response.iter_lines()
            next(line for line in lines if '"content":"' in line and '"content":""' not in line)
            waiter = threading.Thread(target=lambda: queued.append(srv.post("/completions", {"prompt": "x"})))
            waiter.start()
            wait_for(srv, running=True, queued=1)
            start = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            rest = sse_data(_Lines(lines))
            waiter.join(30)
        assert time.monotonic() - start < 5
        assert rest[-1] == "[DONE]"
        last = rest[-2]
        assert last["choices"][0]["finish_reason"] == "length" and last["ds4spec"]["finish_reason"] == "cancelled"
        assert 0 < last["ds4spec"]["committed_tokens"] < LONG
        assert queued[0].status_code == 503 and queued[0].json()["error"]["code"] == "shutting_down"
        assert srv.proc.wait(30) == 0
    finally:
        srv.kill()


class _Lines:
    """The rest of an already opened stream, shaped for ``sse_data``."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines

    def iter_lines(self) -> Iterator[str]:
        return self._lines
