"""``ds4spec serve --stdio`` over pipes with tiny real models: every method, errors, cancel, supersede, the end.

Expected texts come from an ``Engine`` in this process on the same model, so the server is checked against
what the engine itself produces, not against recorded strings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_client import Server, frame, messages_by_id, parse_frames, run_session
from tinymodel import build_tiny_gguf

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.events import TextChunk
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.faces.shared.stopping import decide

PREFIX = "def fibonacci(n):\n"
LONG = 1500  # tokens: seconds of generation on the never-ending model, so a cancel lands in the middle


@pytest.fixture(scope="module")
def never_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("never") / "never.gguf", never_ends=True)


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with Engine.load(Settings(target=str(tiny_bpe_gguf), draft="none", threads=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[Server]:
    """One server for the tests that only ask and check answers."""
    srv = Server(tiny_bpe_gguf)
    yield srv
    try:
        assert srv.finish() == 0
    finally:
        srv.kill()


@pytest.fixture(scope="module")
def long_server(never_gguf: Path) -> Iterator[Server]:
    """A server on the never-ending model, shared by the tests that leave it idle."""
    srv = Server(never_gguf, "--ctx", "2048")
    srv.call("initialize")  # the models are loaded: from now on, a request starts generating at once
    yield srv
    srv.kill()


@pytest.fixture()
def own_long_server(never_gguf: Path) -> Iterator[Server]:
    """A server on the never-ending model for a test that ends it."""
    srv = Server(never_gguf, "--ctx", "2048")
    srv.call("initialize")
    yield srv
    srv.kill()


def expected(engine: Engine, prefix: str, suffix: str | None = None, **kwargs: Any) -> str:
    return "".join(e.text for e in engine.complete(prefix, suffix, **kwargs) if isinstance(e, TextChunk))


def error_of(msg: dict[str, Any], code: int) -> dict[str, Any]:
    assert "error" in msg and msg["error"]["code"] == code, msg
    return msg["error"]  # type: ignore[no-any-return]


def wait_for_partial(srv: Server, rid: Any) -> None:
    deadline = time.monotonic() + 30
    while not srv.partials(rid):
        assert time.monotonic() < deadline, "no partial result arrived"
        srv.next_message()


# -- the methods ------------------------------------------------------------------------------------------

def test_initialize_reports_the_protocol_version_models_and_capabilities(server: Server) -> None:
    result = server.call("initialize", {"processId": None, "clientInfo": {"name": "test"}})["result"]
    assert result["protocolVersion"] == "1.0"
    assert result["serverInfo"]["name"] == "ds4spec"
    assert result["models"] == {"target": "ds4spec-tiny-bpe-2x64-seed0", "drafter": None}
    caps = result["capabilities"]
    assert caps["complete"] == {"fim": True, "stopAt": ["line", "block"]}
    assert caps["chat"] is True and caps["cancel"] is True
    assert caps["partial"] == "partial" and caps["maxMessageBytes"] == 8 * 1024 * 1024


def test_complete_streams_partials_and_answers_with_the_engines_text(server: Server, engine: Engine) -> None:
    rid = server.request("complete", {"prefix": PREFIX, "max_tokens": 24, "language": "python"})
    result = server.response(rid)["result"]
    assert result["text"] == expected(engine, PREFIX, max_tokens=24) and result["text"]
    assert "".join(server.partials(rid)) == result["text"]
    assert result["finish_reason"] in ("length", "eog")
    assert 0 < result["stats"]["committed_tokens"] <= 24 and result["stats"]["prompt_tokens"] > 0


def test_a_suffix_makes_it_fill_in_the_middle(server: Server, engine: Engine) -> None:
    params = {"prefix": "def add(a, b):\n    ", "suffix": "\n\nprint(add(1, 2))\n", "max_tokens": 16}
    result = server.call("complete", params)["result"]
    assert result["text"] == expected(engine, params["prefix"], params["suffix"], max_tokens=16)
    assert result["text"] != expected(engine, params["prefix"], max_tokens=16)


def test_stream_false_sends_no_partials_and_stop_strings_end_the_text(server: Server, engine: Engine) -> None:
    full = expected(engine, PREFIX, max_tokens=40)
    stop = full[10:13]
    rid = server.request("complete", {"prefix": PREFIX, "max_tokens": 40, "stop": [stop], "stream": False})
    result = server.response(rid)["result"]
    assert server.partials(rid) == []
    assert result["text"] == full[:full.index(stop)] and result["finish_reason"] == "stop"


@pytest.mark.parametrize("mode", ["line", "block"])
def test_stop_at_ends_the_option_at_its_line_or_block(server: Server, engine: Engine, mode: str) -> None:
    prefixes = ["def f(x):\n", "class A:\n    def m(self):\n        ", "x = 1\ny = 2\n"]
    stopped = 0
    for prefix in prefixes:
        full = expected(engine, prefix, max_tokens=60)
        final, ends = decide(full, mode, prefix[prefix.rfind("\n") + 1:])
        rid = server.request("complete", {"prefix": prefix, "max_tokens": 60, "stop_at": mode})
        result = server.response(rid)["result"]
        assert result["text"] == full[:final]
        assert "".join(server.partials(rid)) == result["text"]
        if ends:
            stopped += 1
            assert result["finish_reason"] == "stop"
    assert stopped, "no prefix exercised the stop; pick others"


def test_chat_answers_with_the_engines_reply(server: Server, engine: Engine) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Explain <|im_end|>."}]
    rid = server.request("chat", {"messages": messages, "max_tokens": 20})
    result = server.response(rid)["result"]
    events = engine.chat([ChatMessage(**m) for m in messages], max_tokens=20)
    assert result["text"] == "".join(e.text for e in events if isinstance(e, TextChunk))
    assert "".join(server.partials(rid)) == result["text"]


def test_stats_add_up_the_generations(tiny_bpe_gguf: Path) -> None:
    srv = Server(tiny_bpe_gguf)
    try:
        first = srv.call("complete", {"prefix": PREFIX, "max_tokens": 5})["result"]["stats"]
        second = srv.call("complete", {"prefix": "import os\n", "max_tokens": 7})["result"]["stats"]
        stats = srv.call("stats")["result"]
        assert stats["requests"] == 3 and stats["generations"] == 2 and stats["loaded"] is True
        assert stats["committed_tokens"] == first["committed_tokens"] + second["committed_tokens"]
        assert stats["last"] == second
        assert stats["running"] is None and stats["queued"] == []
        assert stats["models"]["target"] == "ds4spec-tiny-bpe-2x64-seed0"
        assert srv.finish() == 0
    finally:
        srv.kill()


def test_speculating_server_answers_with_the_plain_text_and_cancels_within_a_cycle(engine: Engine,
                                                                                   tiny_bpe_gguf: Path,
                                                                                   never_gguf: Path) -> None:
    # Greedy speculation is lossless: a drafter (here the model itself, so drafts are accepted) must not
    # change a single character. A drafter as slow as its target cannot pay: only a fixed length asks it every cycle.
    prefix = PREFIX
    srv = Server(tiny_bpe_gguf, "--draft", str(tiny_bpe_gguf), "--warmup", "0", "--draft-fixed", "--draft-max", "4")
    try:
        assert srv.call("initialize")["result"]["models"]["drafter"] is not None
        result = srv.call("complete", {"prefix": prefix, "max_tokens": 40})["result"]
        assert result["text"] == expected(engine, prefix, max_tokens=40)
        assert result["stats"]["accepted_tokens"] > 0
        assert srv.finish() == 0
    finally:
        srv.kill()
    srv = Server(never_gguf, "--ctx", "2048", "--draft", str(never_gguf), "--warmup", "0")
    try:
        rid = srv.request("complete", {"prefix": PREFIX, "max_tokens": LONG})
        wait_for_partial(srv, rid)
        srv.request("cancel", {"id": rid})
        err = error_of(srv.response(rid), -32800)
        assert 0 < err["data"]["stats"]["committed_tokens"] < LONG
        assert srv.finish() == 0
    finally:
        srv.kill()


def test_serve_needs_a_transport(tiny_bpe_gguf: Path) -> None:
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "ds4spec", "serve", "--target", str(tiny_bpe_gguf)],
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip() == (
        "ds4spec: error: serve needs a transport: --stdio (editors) or --http [HOST:]PORT (OpenAI clients)")


# -- errors -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "params", "needle"), [
    ("complete", {}, "prefix must be a string"),
    ("complete", {"prefix": 3}, "prefix must be a string"),
    ("complete", {"prefix": "x", "suffix": []}, "suffix must be a string"),
    ("complete", {"prefix": "x", "max_tokens": 0}, "max_tokens"),
    ("complete", {"prefix": "x", "max_tokens": True}, "max_tokens"),
    ("complete", {"prefix": "x", "max_tokens": 2.5}, "max_tokens"),
    ("complete", {"prefix": "x", "stop": [""]}, "stop"),
    ("complete", {"prefix": "x", "stop": [1]}, "stop"),
    ("complete", {"prefix": "x", "stop_at": "word"}, "stop_at"),
    ("complete", {"prefix": "x", "stream": "yes"}, "stream"),
    ("complete", {"prefix": "\ud800"}, "surrogate"),
    ("chat", {"messages": []}, "messages"),
    ("chat", {"messages": [{"role": "robot", "content": "x"}]}, "role"),
    ("chat", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("chat", {"messages": ["hi"]}, "messages[0]"),
    ("cancel", {}, "id"),
    ("cancel", {"id": [1]}, "id"),
])
def test_invalid_params_are_named(server: Server, method: str, params: dict[str, Any], needle: str) -> None:
    err = error_of(server.call(method, params), -32602)
    assert needle in err["message"]


def test_malformed_messages_get_errors_and_the_server_keeps_serving(tiny_bpe_gguf: Path) -> None:
    bodies = [
        b"{not json",  # parse error
        b"\xff\xfe{}",  # not UTF-8
        b"[" * 100000,  # too deep to parse
        b"[]",  # a batch
        b"42",  # not an object
        b'{"id": 1, "method": "stats"}',  # no jsonrpc
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "stats"}',  # an id that is an object
        b'{"jsonrpc": "2.0", "id": 2}',  # no method
        b'{"jsonrpc": "2.0", "id": 3, "method": 7}',  # a method that is not a string
        b'{"jsonrpc": "2.0", "id": 4, "method": "stats", "params": [1]}',  # positional params
        b'{"jsonrpc": "2.0", "id": 5, "method": "frobnicate"}',  # unknown method
        b'{"jsonrpc": "2.0", "method": "frobnicate"}',  # unknown notification: ignored
        b'{"jsonrpc": "2.0", "method": "complete", "params": {"prefix": "x"}}',  # a notification: ignored
        b'{"jsonrpc": "2.0", "method": "cancel", "params": 5}',  # bad notification params: ignored
        b'{"jsonrpc": "2.0", "id": 9, "result": null}',  # a response from the client: ignored
    ]
    data = b"".join(frame(b) for b in bodies) + frame({"jsonrpc": "2.0", "id": "last", "method": "stats"})
    proc = run_session(tiny_bpe_gguf, data)
    assert proc.returncode == 0, proc.stderr
    messages = parse_frames(proc.stdout)
    answers = [(m["id"], m["error"]["code"] if "error" in m else "ok") for m in messages]
    assert answers == [(None, -32700), (None, -32700), (None, -32700), (None, -32600), (None, -32600),
                       (1, -32600), (None, -32600), (2, -32600), (3, -32600), (4, -32602), (5, -32601),
                       ("last", "ok")]
    assert messages[-1]["result"]["generations"] == 0


def test_an_id_already_in_flight_is_refused(long_server: Server) -> None:
    long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG}, rid="same")
    long_server.request("complete", {"prefix": PREFIX, "max_tokens": 3}, rid="same")
    refused = long_server.next_message()
    while refused is not None and "method" in refused:
        refused = long_server.next_message()
    assert refused is not None
    assert "already in flight" in error_of(refused, -32600)["message"]
    long_server.request("cancel", {"id": "same"})
    while (msg := long_server.next_message()) is not None and not ("error" in msg and msg["id"] == "same"
                                                                     and msg["error"]["code"] == -32800):
        pass
    assert msg is not None, "the first request was never answered"


def test_a_prompt_longer_than_the_context_is_an_input_error(tiny_bpe_gguf: Path) -> None:
    srv = Server(tiny_bpe_gguf, "--ctx", "256")
    try:
        err = error_of(srv.call("complete", {"prefix": "word " * 400}), -32002)
        assert "the context holds 256" in err["message"]
        assert "result" in srv.call("complete", {"prefix": "x", "max_tokens": 3})
        assert srv.finish() == 0
    finally:
        srv.kill()


def test_an_empty_prefix_without_a_start_token_is_an_input_error(server: Server) -> None:
    # The tiny BPE model adds no BOS, so "" is no tokens at all (found by the fuzz test).
    assert "prompt is empty" in error_of(server.call("complete", {"prefix": ""}), -32002)["message"]
    assert "result" in server.call("complete", {"prefix": "", "suffix": "x", "max_tokens": 2})  # FIM has tokens


def test_fim_on_a_model_without_fim_tokens_is_a_model_error(tmp_path: Path) -> None:
    srv = Server(build_tiny_gguf(tmp_path / "nofim.gguf", fim=False))
    try:
        assert srv.call("initialize")["result"]["capabilities"]["complete"]["fim"] is False
        err = error_of(srv.call("complete", {"prefix": "a", "suffix": "b"}), -32001)
        assert "fill-in-the-middle" in err["message"]
        assert srv.finish() == 0
    finally:
        srv.kill()


def test_a_model_that_fails_to_load_is_reported_and_the_server_keeps_serving(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    srv = Server(missing)
    try:
        err = error_of(srv.call("initialize"), -32001)
        assert "\n" not in err["message"] and err["message"]
        assert error_of(srv.call("complete", {"prefix": "x"}), -32001)["message"] == err["message"]
        assert srv.call("stats")["result"]["loaded"] is False
        assert srv.call("shutdown")["result"] is None
        srv.notify("exit")
        assert srv.finish() == 0
        assert "error" in srv.stderr_text()
    finally:
        srv.kill()


# -- cancel, supersede, several in flight ------------------------------------------------------------------

def test_cancel_stops_a_running_generation_within_a_cycle(long_server: Server) -> None:
    before = long_server.call("stats")["result"]["cancelled"]
    rid = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG, "document": "a.py"})
    wait_for_partial(long_server, rid)
    sent = time.monotonic()
    assert long_server.call("cancel", {"id": rid})["result"] == {"cancelled": True}
    err = error_of(long_server.response(rid), -32800)
    assert time.monotonic() - sent < 5
    assert err["message"] == "request cancelled"
    assert err["data"]["text"] == "".join(long_server.partials(rid))
    assert 0 < err["data"]["stats"]["committed_tokens"] < LONG
    assert long_server.call("cancel", {"id": rid})["result"] == {"cancelled": False}  # already answered
    assert long_server.call("cancel", {"id": "nobody"})["result"] == {"cancelled": False}
    assert long_server.call("stats")["result"]["cancelled"] == before + 1


def test_cancel_of_a_queued_request_answers_it_at_once(long_server: Server) -> None:
    running = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG})
    queued = long_server.request("complete", {"prefix": "import os\n", "max_tokens": 5})
    wait_for_partial(long_server, running)
    assert long_server.call("cancel", {"id": queued})["result"] == {"cancelled": True}
    err = error_of(long_server.response(queued), -32800)
    assert err["data"] == {"text": "", "stats": None}
    assert "error" not in messages_by_id(long_server.received).get(running, {}), "the running one goes on"
    long_server.notify("$/cancelRequest", {"id": running})  # LSP's notification cancels too
    error_of(long_server.response(running), -32800)


def test_a_newer_complete_for_the_same_document_supersedes_the_older(long_server: Server,
                                                                      never_gguf: Path) -> None:
    before = long_server.call("stats")["result"]["superseded"]
    old = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG, "document": "a.py"})
    wait_for_partial(long_server, old)
    waiting = long_server.request("complete", {"prefix": "x", "max_tokens": 5, "document": "b.py"})
    stale = long_server.request("complete", {"prefix": "y", "max_tokens": 5, "document": "b.py"})
    new = long_server.request("complete", {"prefix": PREFIX + "    ", "max_tokens": 5, "document": "a.py"})
    assert error_of(long_server.response(waiting), -32800)["message"] == f"superseded by request {stale}"
    assert error_of(long_server.response(old), -32800)["message"] == f"superseded by request {new}"
    assert long_server.response(stale)["result"]["stats"]["committed_tokens"] == 5
    assert long_server.response(new)["result"]["stats"]["committed_tokens"] == 5
    assert long_server.call("stats")["result"]["superseded"] == before + 2


def test_several_requests_in_flight_are_answered_in_turn(long_server: Server, never_gguf: Path) -> None:
    first = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG, "document": "a.py"})
    wait_for_partial(long_server, first)
    second = long_server.request("complete", {"prefix": "import os\n", "max_tokens": 6, "document": "b.py"})
    third = long_server.request("chat", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6})
    stats = long_server.call("stats")["result"]  # answered while the first generation runs
    assert stats["running"] == first and stats["queued"] == [second, third]
    assert first not in messages_by_id(long_server.received)
    long_server.request("cancel", {"id": first})
    error_of(long_server.response(first), -32800)
    with Engine.load(Settings(target=str(never_gguf), draft="none", ctx=2048, threads=1)) as eng:
        assert long_server.response(second)["result"]["text"] == expected(eng, "import os\n", max_tokens=6)
        events = eng.chat([ChatMessage("user", "hi")], max_tokens=6)
        assert long_server.response(third)["result"]["text"] == "".join(
            e.text for e in events if isinstance(e, TextChunk))
    order = [m["id"] for m in long_server.received if "method" not in m and m["id"] in (first, second, third)]
    assert order == [first, second, third]


# -- the end --------------------------------------------------------------------------------------------------

def test_shutdown_then_exit_ends_with_0_and_refuses_work_in_between(own_long_server: Server) -> None:
    long_server = own_long_server
    running = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG})
    wait_for_partial(long_server, running)
    bye = long_server.request("shutdown")
    assert long_server.response(bye)["result"] is None
    assert error_of(long_server.response(running), -32800)["message"] == "the server is shutting down"
    answered = [m.get("id") for m in long_server.received if "method" not in m]
    assert answered.index(running) < answered.index(bye), "shutdown answers after the work it stopped"
    assert "shutting down" in error_of(long_server.call("stats"), -32600)["message"]
    long_server.notify("exit")
    assert long_server.proc.wait(30) == 0
    assert long_server.finish() == 0


def test_exit_without_shutdown_ends_with_1(tiny_bpe_gguf: Path) -> None:
    proc = run_session(tiny_bpe_gguf, frame({"jsonrpc": "2.0", "method": "exit"}) + b"ignored after exit")
    assert proc.returncode == 1 and proc.stdout == b""


def test_the_end_of_input_mid_generation_shuts_down_cleanly(own_long_server: Server) -> None:
    long_server = own_long_server
    running = long_server.request("complete", {"prefix": PREFIX, "max_tokens": LONG})
    wait_for_partial(long_server, running)
    start = time.monotonic()
    long_server.close_stdin()
    assert long_server.proc.wait(30) == 0
    assert time.monotonic() - start < 10
    assert long_server.finish() == 0
    assert error_of(long_server.response(running), -32800)["message"] == "the server is shutting down"


def test_verbose_logs_never_reach_stdout(tiny_bpe_gguf: Path) -> None:
    srv = Server(tiny_bpe_gguf, verbose=True)
    try:
        assert "result" in srv.call("complete", {"prefix": PREFIX, "max_tokens": 8})
        assert srv.finish() == 0  # every byte on stdout was part of a frame
        assert "llama" in srv.stderr_text() and "ds4spec" in srv.stderr_text()
    finally:
        srv.kill()
