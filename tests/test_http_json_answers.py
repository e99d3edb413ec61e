"""``response_format``: an answer asked for as JSON opens with ``{`` (the schema, when given, in the system message)
and ends with its object; a wrong format is a 400 naming it. Against the real server with a tiny real model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_text import chat_messages, plain_engine
from http_server import HttpServer, sse_data

from ds4spec.engine.engine import Engine
from ds4spec.faces.http.json_answers import OBJECT_INSTRUCTION, SCHEMA_INSTRUCTION

QUESTION = [{"role": "system", "content": "You extract data."}, {"role": "user", "content": "Ada was 36. As JSON."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with plain_engine(tiny_bpe_gguf) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "8")
    yield srv
    srv.kill()


def test_a_json_object_answer_is_asked_for_and_opens_with_a_brace(server: HttpServer, engine: Engine) -> None:
    body = {"messages": QUESTION, "response_format": {"type": "json_object"}}
    answer = server.post("/chat/completions", body).json()
    assert answer["choices"][0]["message"]["content"].startswith("{")
    told = [{"role": "system", "content": f"You extract data.\n\n{OBJECT_INSTRUCTION}"}, QUESTION[1]]
    assert answer["usage"]["prompt_tokens"] == len(engine.chat_prompt(chat_messages(told), opening="{").tokens)
    events = sse_data(server.post("/chat/completions", {**body, "stream": True}))
    pieces = [e["choices"][0]["delta"].get("content") for e in events[:-1] if e["choices"]]
    assert pieces[1] == "{" and "".join(p or "" for p in pieces) == answer["choices"][0]["message"]["content"]


def test_a_json_schema_reaches_the_model_in_the_system_message(server: HttpServer, engine: Engine) -> None:
    body = {"messages": QUESTION, "response_format": {"type": "json_schema",
                                                      "json_schema": {"name": "person", "schema": PERSON}}}
    answer = server.post("/chat/completions", body).json()
    told = [{"role": "system", "content": f"You extract data.\n\n{SCHEMA_INSTRUCTION}{json_text(PERSON)}"},
            QUESTION[1]]
    assert answer["usage"]["prompt_tokens"] == len(engine.chat_prompt(chat_messages(told), opening="{").tokens)
    assert answer["choices"][0]["message"]["content"].startswith("{")


def test_a_text_format_is_a_plain_answer(server: HttpServer, engine: Engine) -> None:
    answer = server.post("/chat/completions", {"messages": QUESTION, "response_format": {"type": "text"}}).json()
    assert answer["usage"]["prompt_tokens"] == len(engine.chat_prompt(chat_messages(QUESTION)).tokens)


def json_text(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


NESTED: dict[str, object] = {}
for _ in range(100):
    NESTED = {"type": "array", "items": NESTED}


@pytest.mark.parametrize("change", [
    {"response_format": "json"},
    {"response_format": {"type": "xml"}},
    {"response_format": {"type": "json_schema"}},  # its json_schema object may leave the schema out, not itself
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "{}"}}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": NESTED}}},
])
def test_a_wrong_response_format_is_a_400_naming_it(server: HttpServer, change: dict[str, object]) -> None:
    answer = server.post("/chat/completions", {"messages": QUESTION, **change})
    assert answer.status_code == 400 and answer.json()["error"]["param"].startswith("response_format"), answer.text
