"""Fuzzing the real server: random bytes and random JSON never crash it, and stdout carries protocol only.

Random bytes get a fresh server per example (they may leave it inside a body that swallows what follows);
random JSON messages are well framed, so one server takes them all, each followed by a probe it must answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_client import Server, frame, parse_frames, run_session

PIECES = [b"Content-Length: ", b"content-length:", b"Content-Type: x", b"\r\n", b"\r\n\r\n", b"\n", b"0", b"12",
          b"2", b"99999999", b"-1", b":", b"{", b"}", b"\xff\xfe", b"\x00",
          b'{"jsonrpc":"2.0","id":1,"method":"stats"}', b'{"jsonrpc":"2.0","id":2,"method":"initialize"}']

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from(["\ud800", "<|im_end|>", "<|fim_prefix|>", "\x00", "é" * 3]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)

# Methods that end the session (exit, shutdown) are tested on their own; here the server must stay up.
methods = st.sampled_from(["initialize", "complete", "chat", "cancel", "$/cancelRequest", "stats", "frobnicate",
                           "", "rpc.discover", "Complete"])
small_tokens = st.sampled_from([1, 2, 4, 0, -1, 10**9, 2.5, True, "3", None])
complete_params = st.fixed_dictionaries({}, optional={
    "prefix": st.text(max_size=30) | json_values, "suffix": st.text(max_size=10) | st.none() | json_values,
    "max_tokens": small_tokens, "stop": st.lists(st.text(max_size=3), max_size=2) | json_values,
    "stop_at": st.sampled_from(["line", "block", None, "word", 3]), "stream": st.booleans() | json_values,
    "document": st.sampled_from(["a", "b", None, 1]), "language": json_values,
})
chat_params = st.fixed_dictionaries({}, optional={
    "messages": st.lists(st.fixed_dictionaries({}, optional={
        "role": st.sampled_from(["user", "system", "assistant", "robot", 1]),
        "content": st.text(max_size=20) | json_values,
    }), max_size=3) | json_values,
    "max_tokens": small_tokens,
})
messages = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", None, 2]),
    "id": st.integers(-5, 10**12) | st.text(max_size=5) | st.sampled_from([None, True, 1.5, [], {}]),
    "method": methods | json_values,
    "params": complete_params | chat_params | st.fixed_dictionaries({"id": json_values}) | json_values,
    "result": json_values,
})

# Mostly valid requests reach the deep paths: generations, stop_at, cancel and supersede, ids in flight.
small_ids = st.integers(0, 12)
good_complete = st.fixed_dictionaries({"prefix": st.text(max_size=30)}, optional={
    "suffix": st.text(max_size=10), "max_tokens": st.integers(1, 4), "stop": st.lists(st.text(min_size=1, max_size=2),
                                                                                     max_size=2),
    "stop_at": st.sampled_from(["line", "block", None]), "stream": st.booleans(), "document": st.sampled_from("ab"),
})
good_chat = st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "system", "assistant"]), "content": st.text(max_size=20)}), min_size=1,
    max_size=3)}, optional={"max_tokens": st.integers(1, 4)})
requests = st.one_of(
    st.builds(lambda i, p: {"jsonrpc": "2.0", "id": i, "method": "complete", "params": p}, small_ids, good_complete),
    st.builds(lambda i, p: {"jsonrpc": "2.0", "id": i, "method": "chat", "params": p}, small_ids, good_chat),
    st.builds(lambda i, t, m: {"jsonrpc": "2.0", **({"id": i} if i is not None else {}), "method": m,
                               "params": {"id": t}},
              small_ids | st.none(), small_ids, st.sampled_from(["cancel", "$/cancelRequest"])),
)


def _keeps_the_session(message: Any) -> bool:
    return not (isinstance(message, dict) and message.get("method") in ("exit", "shutdown"))


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[Server]:
    srv = Server(tiny_bpe_gguf, "--max-tokens", "4")
    srv.call("initialize")
    yield srv
    try:
        stats = srv.response(srv.request("stats", rid="final-stats"))["result"]
        assert stats["generations"] > 0, "no random request reached the engine"
        assert srv.finish() == 0
        assert "Traceback" not in srv.stderr_text(), srv.stderr_text()
    finally:
        srv.kill()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(message=(requests | requests | messages | json_values).filter(_keeps_the_session))
def test_random_json_messages_are_answered_and_the_server_keeps_serving(server: Server, message: Any) -> None:
    try:
        body = json.dumps(message).encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        body = repr(message).encode("utf-8", "replace")
    server.send_raw(frame(body))
    server.fuzz_probes = getattr(server, "fuzz_probes", 0) + 1
    rid = server.request("stats", rid=f"probe-{server.fuzz_probes}")  # ids random messages cannot take
    probe = server.response(rid, timeout=30)  # answered only if the server read, survived and kept step
    assert "result" in probe, probe
    assert server.proc.poll() is None
    assert not server.violations, server.violations


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES) | st.binary(max_size=40), max_size=24))
def test_random_bytes_never_crash_the_server_nor_reach_stdout_unframed(tiny_bpe_gguf: Path,
                                                                       pieces: list[bytes]) -> None:
    proc = run_session(tiny_bpe_gguf, b"".join(pieces))
    assert proc.returncode in (0, 1), proc.stderr  # 1: an "exit" without "shutdown", which random bytes may form
    for msg in parse_frames(proc.stdout):  # raises on any byte that is not part of a protocol frame
        assert "method" not in msg or msg["method"] == "partial"
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
