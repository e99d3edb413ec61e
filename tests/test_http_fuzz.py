"""Fuzzing the real HTTP server: malformed, random and oversized bodies on every route get an answer (a success or
OpenAI's error object, never a 500 and never a traceback), and the server goes on serving.

One server takes every example; after each, a probe must still be answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_fuzzing import check_answer, json_values
from http_server import HttpServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4spec.faces.http.app import MAX_BODY_BYTES

ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/v1/nope", "/"]

numbers = st.sampled_from([0, 1, 2, -1, 0.5, 2.5, 10**30, float("nan"), float("inf"), True, "1", None])
message = st.fixed_dictionaries({}, optional={
    "role": st.sampled_from(["user", "system", "assistant", "developer", "tool", "robot", 1]),
    "content": st.text(max_size=20) | json_values
    | st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]), "text": json_values})),
})
# Shaped like OpenAI requests, so that random values reach each parameter's check, and valid ones the model.
openai_body = st.fixed_dictionaries({}, optional={
    "model": json_values, "messages": st.lists(message, max_size=3) | json_values,
    "prompt": st.text(max_size=30) | json_values, "suffix": st.text(max_size=10) | json_values,
    "max_tokens": numbers, "max_completion_tokens": numbers, "temperature": numbers, "top_p": numbers,
    "seed": numbers | st.integers(), "n": numbers, "stop": st.lists(st.text(max_size=3), max_size=2) | json_values,
    "stream": st.booleans() | json_values, "stream_options": st.fixed_dictionaries({"include_usage": json_values}),
    "echo": json_values, "return_tokens": json_values,
})
ODD_BODIES = {"cut": b"{", "deep": b"[" * 50_000, "deep messages": b'{"messages": [' * 3000,
              "not utf-8": b"\xff\xfe\x00", "empty": b"", "null": b"null", "nan": b'{"temperature": NaN}'}


def encoded(value: Any) -> bytes:
    # ASCII escapes carry lone surrogates and NaN as a careless client would send them (Python's json reads both).
    return json.dumps(value).encode()


bodies = (openai_body.map(encoded) | json_values.map(encoded) | st.binary(max_size=200)
          | st.sampled_from(sorted(ODD_BODIES)).map(ODD_BODIES.__getitem__))


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "2", "--ctx", "64")
    yield srv
    srv.kill()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(route=st.sampled_from(ROUTES), method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]), body=bodies,
       content_type=st.sampled_from(["application/json", "text/plain", ""]))
def test_any_body_on_any_route_gets_an_answer_and_the_server_goes_on(server: HttpServer, route: str, method: str,
                                                                     body: bytes, content_type: str) -> None:
    response = httpx.request(method, server.base + route, content=body, headers={"content-type": content_type},
                             timeout=60)
    check_answer(response)
    assert httpx.get(server.base + "/health").status_code == 200


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.integers(1, 3 * MAX_BODY_BYTES), chunked=st.booleans())
def test_an_oversized_body_is_a_413_and_the_server_goes_on(server: HttpServer, extra: int, chunked: bool) -> None:
    data = b" " * (MAX_BODY_BYTES + extra)
    content: bytes | Iterator[bytes] = iter([data[i:i + 1 << 20] for i in range(0, len(data), 1 << 20)]) \
        if chunked else data
    response = httpx.post(server.base + "/v1/chat/completions", content=content, timeout=60)
    assert response.status_code == 413
    check_answer(response)
    assert httpx.get(server.base + "/health").status_code == 200
