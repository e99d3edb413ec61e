"""Every bad request gets OpenAI's error object with the right status, and the server goes on serving."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import HttpServer
from starlette.testclient import TestClient

from ds4spec.engine.settings import Settings
from ds4spec.faces.http.app import MAX_BODY_BYTES, HttpOptions, build_app
from ds4spec.faces.http.scheduler import Scheduler

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "4", "--ctx", "64")
    yield srv
    srv.kill()


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"] and "Traceback" not in body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


BAD_CHATS = {
    "no messages": ({"model": "m"}, "messages"),
    "empty messages": ({"messages": []}, "messages"),
    "a message that is not an object": ({"messages": ["hi"]}, "messages[0]"),
    "an unknown role": ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    "an old function message": ({"messages": [{"role": "function", "content": "42"}]}, "messages[0].role"),
    "content that is not text": ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    "an image part": ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
                      "messages[0].content"),
    "n above 1": ({"messages": HELLO, "n": 2}, "n"),
    "log probabilities": ({"messages": HELLO, "logprobs": True}, "logprobs"),
    "top log probabilities": ({"messages": HELLO, "top_logprobs": 2}, "top_logprobs"),
    "a temperature above 2": ({"messages": HELLO, "temperature": 2.5}, "temperature"),
    "a negative top_p": ({"messages": HELLO, "top_p": -0.1}, "top_p"),
    "max_tokens of 0": ({"messages": HELLO, "max_tokens": 0}, "max_tokens"),
    "max_completion_tokens as text": ({"messages": HELLO, "max_completion_tokens": "9"}, "max_completion_tokens"),
    "a stop that is not text": ({"messages": HELLO, "stop": [1]}, "stop"),
    "a seed that is not an integer": ({"messages": HELLO, "seed": 1.5}, "seed"),
    "stream as text": ({"messages": HELLO, "stream": "yes"}, "stream"),
    "stream_options that are not an object": ({"messages": HELLO, "stream_options": 1}, "stream_options"),
    "a model that is not a string": ({"messages": HELLO, "model": 3}, "model"),
}


@pytest.mark.parametrize(("body", "param"), BAD_CHATS.values(), ids=BAD_CHATS.keys())
def test_a_bad_chat_parameter_is_a_400_that_names_it(server: HttpServer, body: dict[str, Any], param: str) -> None:
    error = error_of(server.post("/chat/completions", body), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == param


@pytest.mark.parametrize("body", [{}, {"prompt": 3}, {"prompt": ["a", "b"]}, {"prompt": "a", "suffix": 1},
                                  {"prompt": "a", "echo": True}, {"prompt": "a", "logprobs": 2}], ids=str)
def test_a_bad_completion_is_a_400(server: HttpServer, body: dict[str, Any]) -> None:
    error_of(server.post("/completions", body), 400)


@pytest.mark.parametrize("raw", [b"{", b"", b"\xff\xfe{", b"[" * 100_000, b"nul"], ids=["cut", "empty", "not utf-8",
                                                                                     "deep", "not json"])
def test_a_body_that_is_not_json_is_a_400(server: HttpServer, raw: bytes) -> None:
    response = httpx.post(server.url + "/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert "not valid JSON" in error_of(response, 400)["message"]


@pytest.mark.parametrize("raw", [b"[]", b"3", b'"text"', b"null"])
def test_a_body_that_is_not_an_object_is_a_400(server: HttpServer, raw: bytes) -> None:
    error_of(httpx.post(server.url + "/completions", content=raw), 400)


def test_a_prompt_longer_than_the_context_is_context_length_exceeded(server: HttpServer) -> None:
    long = [{"role": "user", "content": "word " * 200}]  # --ctx 64
    error = error_of(server.post("/chat/completions", {"messages": long}), 400)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error_of(server.post("/completions", {"prompt": "word " * 200}), 400)["param"] == "prompt"


def test_an_unknown_path_is_a_404_and_a_wrong_method_a_405(server: HttpServer) -> None:
    assert error_of(httpx.get(server.url + "/engines"), 404)["type"] == "not_found_error"
    assert error_of(httpx.post(server.base + "/chat/completions", json={}), 404)["code"] == "not_found"
    error_of(httpx.get(server.url + "/chat/completions"), 405)


def test_a_body_over_the_limit_is_a_413_and_the_server_goes_on(server: HttpServer) -> None:
    huge = b'{"prompt": "' + b"x" * MAX_BODY_BYTES + b'"}'
    assert error_of(httpx.post(server.url + "/completions", content=huge, timeout=60), 413)["code"] == \
        "request_too_large"

    def chunked() -> Iterator[bytes]:  # no Content-Length: the limit is counted as the body arrives
        yield from (huge[i:i + 65536] for i in range(0, len(huge), 65536))

    error_of(httpx.post(server.url + "/completions", content=chunked(), timeout=60), 413)
    assert server.post("/completions", {"prompt": "ok"}).status_code == 200


def test_with_a_key_every_api_route_wants_it_and_health_does_not(tiny_bpe_gguf: Path) -> None:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "2", env={"DS4SPEC_API_KEY": "s3cret"})
    try:
        assert httpx.get(srv.base + "/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            error = error_of(httpx.get(srv.url + "/models", headers=headers), 401)
            assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key"
            error_of(srv.post("/chat/completions", {"messages": HELLO}, headers=headers), 401)
        good = {"Authorization": "Bearer s3cret"}
        assert httpx.get(srv.url + "/models", headers=good).status_code == 200
        assert srv.post("/chat/completions", {"messages": HELLO}, headers=good).status_code == 200
    finally:
        srv.kill()


def test_a_model_that_fails_to_load_is_a_503_with_its_error_and_the_server_stays_up(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but not really")
    srv = HttpServer(broken, wait_ready=False)
    try:
        for _ in range(600):
            response = httpx.get(srv.base + "/health")
            if response.json()["error"]["code"] == "model_load_failed":
                break
            time.sleep(0.05)
        error = error_of(response, 503)
        assert error["type"] == "unavailable_error" and error["code"] == "model_load_failed"
        assert error_of(srv.post("/chat/completions", {"messages": HELLO}), 503)["code"] == "model_load_failed"
        assert httpx.get(srv.url + "/models").status_code == 200
    finally:
        srv.kill()


def test_while_the_models_load_generation_and_health_are_503() -> None:
    scheduler = Scheduler(Settings(), max_queued=1)  # never started: its models are still loading
    with TestClient(build_app(scheduler, HttpOptions("m", None))) as client:
        error = error_of(client.get("/health"), 503)
        assert error["code"] == "model_loading"
        assert error_of(client.post("/v1/chat/completions", json={"messages": HELLO}), 503)["code"] == "model_loading"
