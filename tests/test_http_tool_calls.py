"""Function calling over HTTP: what a request with tools may hold, and how the calls a model writes are read out of
its answer, whole or streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from engine_text import plain_engine
from http_fuzzing import check_answer, json_values
from http_server import HttpServer, sse_data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinymodel import build_tiny_gguf
from tool_helpers import TOOLS_TEMPLATE, WEATHER

from ds4spec.core.messages import ChatMessage, ToolCall
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.faces.http.json_answers import WITH_TOOLS
from ds4spec.faces.http.openai_params import Reply
from ds4spec.faces.http.replies import Answer
from ds4spec.faces.http.tool_calls import CallHolder, read_calls
from ds4spec.faces.shared.generating import Outcome

NAMES = ("get_weather", "read_file")
NESTED: dict[str, object] = {}
for _ in range(300):  # past any schema, short of the JSON reader's own limit
    NESTED = {"type": "object", "properties": {"x": NESTED}}
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'

ANSWERS = {  # an answer, and the (content, calls) it is read as; None: it stays text
    "a tagged call": (f"<tool_call>\n{CALL}\n</tool_call>", (None, [("get_weather", '{"city": "Paris"}')])),
    "a call in a JSON block, as Qwen2.5-Coder writes it":
        ('```json\n{\n  "name": "read_file",\n  "arguments": {"path": "a.py"}\n}\n```',
         (None, [("read_file", '{"path": "a.py"}')])),
    "words, then two calls": (f"Checking.\n<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n"
                              '{"name": "read_file", "arguments": {}}\n</tool_call>\n',
                              ("Checking.\n", [("get_weather", '{"city": "Paris"}'), ("read_file", "{}")])),
    "a JSON example, then a call": ('Like:\n```json\n{"name": "x"}\n```\nSo:\n```json\n' + CALL + "\n```",
                                    ('Like:\n```json\n{"name": "x"}\n```\nSo:\n', [("get_weather",
                                                                                     '{"city": "Paris"}')])),
    "a call as the whole answer": (f"{CALL}\n", (None, [("get_weather", '{"city": "Paris"}')])),
    "a call in the doubled braces of Qwen's template example": (
        '{{"name": "get_weather", "arguments": {"city": "Paris"}}}', (None, [("get_weather", '{"city": "Paris"}')])),
    "a JSON answer that is no call": ('{"name": "Ada", "age": 36}', None),
    "a function that was not offered": ('<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>', None),
    "JSON that is no call": ('```json\n{"city": "Paris"}\n```', None),
    "a call cut off by max_tokens": ('<tool_call>\n{"name": "get_weather", "argu', None),
    "a whole call whose closing tag the answer ended without": (f"<tool_call>\n{CALL}",
                                                                (None, [("get_weather", '{"city": "Paris"}')])),
    "a call, then more words": (f"<tool_call>\n{CALL}\n</tool_call>\nDone.", None),
    "no call at all": ("def add(a, b):\n    return a + b\n", None),
    "brackets nested past Python's recursion limit": ("<tool_call>\n" + "[" * 5000 + "]" * 5000, None),
}


def read(text: str) -> tuple[str | None, list[tuple[str, str]]] | None:
    called = read_calls(text, NAMES)
    return None if called is None else (called.content, [(c.name, c.arguments) for c in called.calls])


@pytest.mark.parametrize("case", ANSWERS)
def test_an_answer_is_read_as_calls_only_where_it_ends_in_calls_to_offered_functions(case: str) -> None:
    text, expected = ANSWERS[case]
    assert read(text) == expected


@pytest.mark.parametrize("case", ANSWERS)
@pytest.mark.parametrize("size", [1, 2, 5, 11])
def test_a_streamed_answer_sends_the_text_a_whole_one_has_and_never_a_call(case: str, size: int) -> None:
    text, expected = ANSWERS[case]
    holder = CallHolder()
    sent = [holder.feed(text[i:i + size]) for i in range(0, len(text), size)]
    called = read_calls(text, NAMES)
    whole_text = "".join(sent) + holder.rest(called)
    assert whole_text == (text if expected is None else expected[0] or "")


def test_text_that_shows_it_is_no_call_is_sent_before_the_answer_ends() -> None:
    holder = CallHolder()
    assert holder.feed("Here is the config:\n```js") == "Here is the config:\n"  # ```json may begin here
    assert holder.feed("on\n{\"city\": 1") == '```json\n{"city": 1'  # not {"name": a JSON example
    assert holder.feed('}\n```\n<tool_c') == "}\n```\n"


@pytest.mark.parametrize("reason", ["eog", "length"])
def test_an_answer_of_calls_is_a_message_with_tool_calls_and_no_content(reason: str) -> None:
    """OpenAI's shape: ``content`` null, each call with an id and its arguments as JSON text; the finish reason says
    ``tool_calls`` whatever ended the generation, since every call in it is whole."""
    answer = Answer(True, "m", Reply("m", False, False, False, tools=NAMES), None)
    message = answer.whole(Outcome(f"<tool_call>\n{CALL}\n</tool_call>", reason, GenerationStats()))["choices"][0]
    assert message["finish_reason"] == "tool_calls" and message["message"]["content"] is None
    [call] = message["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    text = answer.whole(Outcome("Sunny.", reason, GenerationStats()))["choices"][0]
    assert text["message"] == {"role": "assistant", "content": "Sunny."} and "tool_calls" not in text["message"]


# -- over HTTP, on a tiny model whose template takes tools ---------------------------------------------------------

@pytest.fixture(scope="module")
def tools_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("tools") / "tiny-tools.gguf", chat_template=TOOLS_TEMPLATE)


@pytest.fixture(scope="module")
def server(tools_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(tools_gguf, "--max-tokens", "8")
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def engine(tools_gguf: Path) -> Iterator[Engine]:
    with plain_engine(tools_gguf) as eng:
        yield eng


AGENT_TURNS = [  # as the OpenAI SDK sends a conversation back after a call: content null, then the tool's result
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                      "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 18}'},
]


def test_a_conversation_with_calls_and_results_is_the_engines_prompt(server: HttpServer, engine: Engine) -> None:
    answer = server.post("/chat/completions", {"messages": AGENT_TURNS, "tools": [WEATHER]})
    assert answer.status_code == 200, answer.text
    expected = engine.chat_prompt([
        ChatMessage("user", "Weather in Paris?"),
        ChatMessage("assistant", "", (ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
        ChatMessage("tool", '{"temp": 18}')], tools=[WEATHER])
    assert answer.json()["usage"]["prompt_tokens"] == len(expected.tokens)
    unoffered = server.post("/chat/completions", {"messages": AGENT_TURNS, "tools": [WEATHER], "tool_choice": "none"})
    assert unoffered.json()["usage"]["prompt_tokens"] < len(expected.tokens)  # "none": the tools are not offered


@pytest.mark.parametrize(("change", "param"), [
    ({"tools": {"name": "f"}}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "get weather"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "code_interpreter"}]}, "tools[0]"),
    ({"tools": [WEATHER], "tool_choice": "any"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": "get_weather"}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "read_file"}}]}}}, "tool_choice.allowed_tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "any", "tools": []}}},
     "tool_choice.allowed_tools"),
    ({"tools": [WEATHER, WEATHER]}, "tools"),
    ({"functions": [WEATHER["function"]]}, "functions"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": NESTED}}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": "\ud800"}}]},
     "tools[0].function.description"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": NESTED}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {
        "name": "f", "arguments": json.dumps(NESTED)}}]}]}, "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {
        "name": "f", "arguments": '{"city": "\ud800"}'}}]}]}, "messages[0].tool_calls[0].function.arguments"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "read_file"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "tool", "content": None}]}, "messages[0].content"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
])
def test_a_wrong_tool_request_is_a_400_naming_the_parameter(server: HttpServer, change: dict[str, object],
                                                            param: str) -> None:
    answer = post_escaped(server, {"messages": AGENT_TURNS, **change})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text


def post_escaped(server: HttpServer, body: object) -> httpx.Response:
    """The body in JSON's ASCII escapes, which carry lone surrogates as a careless client sends them."""
    return httpx.post(server.url + "/chat/completions", content=json.dumps(body).encode(), timeout=60,
                      headers={"content-type": "application/json"})


function = st.fixed_dictionaries({"name": st.sampled_from(["get_weather", "f", "bad name"]) | json_values},
                                 optional={"description": json_values, "parameters": json_values})
tool = st.fixed_dictionaries({"type": st.sampled_from(["function", "other"]), "function": function | json_values})
call = st.fixed_dictionaries({"id": json_values, "function": st.fixed_dictionaries(
    {"name": st.sampled_from(["get_weather", "x y"]), "arguments": json_values | st.text(max_size=20)})})
tool_message = st.fixed_dictionaries({"role": st.sampled_from(["assistant", "tool", "user"])}, optional={
    "content": st.none() | st.text(max_size=20) | json_values, "tool_calls": st.lists(call, max_size=2) | json_values,
    "tool_call_id": json_values})
tool_body = st.fixed_dictionaries({"messages": st.lists(tool_message, min_size=1, max_size=3)}, optional={
    "tools": st.lists(tool, max_size=3) | json_values, "stream": st.booleans(), "max_tokens": st.just(2),
    "tool_choice": st.sampled_from(["auto", "none", "required"]) | st.fixed_dictionaries(
        {"type": st.just("function"), "function": st.fixed_dictionaries({"name": json_values}) | json_values})
    | json_values})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(body=tool_body)
def test_any_tool_request_gets_an_answer_and_the_server_goes_on(server: HttpServer, body: dict[str, object]) -> None:
    check_answer(post_escaped(server, body))
    assert server.health()["status"] == "ok"


READ_FILE = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
NAMED_OPENING = '<tool_call>\n{"name": "get_weather", "arguments":'


@pytest.mark.parametrize(("tools", "choice", "opening"), [
    ([WEATHER, READ_FILE], "required", '<tool_call>\n{"name": "'),
    ([WEATHER], "required", NAMED_OPENING),  # the one function offered: the model cannot name another
    ([WEATHER, READ_FILE], {"type": "function", "function": {"name": "get_weather"}}, NAMED_OPENING),
])
def test_a_forced_call_opens_the_answer_for_the_model_to_go_on_with(server: HttpServer, engine: Engine,
                                                                     tools: list[dict[str, object]], choice: object,
                                                                     opening: str) -> None:
    """``tool_choice`` ``required`` or a named function: the assistant's turn opens as a call, in the prompt and in
    the answer (this tiny model then writes no JSON, so the answer stays text)."""
    answer = server.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": tools, "tool_choice": choice})
    assert answer.status_code == 200, answer.text
    expected = engine.chat_prompt([ChatMessage("user", "Weather in Paris?")], tools=tools, opening=opening)
    assert answer.json()["usage"]["prompt_tokens"] == len(expected.tokens)
    assert answer.json()["choices"][0]["message"]["content"].startswith(opening)


@pytest.mark.parametrize(("choice", "offered"), [
    ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "read_file"}}]}}, [READ_FILE]),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "get_weather"}}]}}, [WEATHER]),
])
def test_allowed_tools_offers_only_the_functions_it_names(server: HttpServer, engine: Engine, choice: object,
                                                          offered: list[dict[str, object]]) -> None:
    answer = server.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": [WEATHER, READ_FILE],
                                               "tool_choice": choice}).json()
    forced = NAMED_OPENING if offered == [WEATHER] else ""
    expected = engine.chat_prompt([ChatMessage("user", "Weather in Paris?")], tools=offered, opening=forced)
    assert answer["usage"]["prompt_tokens"] == len(expected.tokens)


def test_a_json_format_beside_tools_leaves_the_answer_open_for_a_call(server: HttpServer, engine: Engine) -> None:
    """OpenAI's reading: the format is for an answer in words; the model may still call, so nothing opens it."""
    body = {"messages": AGENT_TURNS[:1], "tools": [WEATHER], "response_format": {"type": "json_object"}}
    answer = server.post("/chat/completions", body).json()
    told = [ChatMessage("system", WITH_TOOLS + "answer with one JSON object, and nothing else."),
            ChatMessage("user", "Weather in Paris?")]
    assert answer["usage"]["prompt_tokens"] == len(engine.chat_prompt(told, tools=[WEATHER]).tokens)
    forced = server.post("/chat/completions", {**body, "tool_choice": "required"}).json()  # the call opens it
    opened = engine.chat_prompt(told, tools=[WEATHER], opening=NAMED_OPENING)
    assert forced["usage"]["prompt_tokens"] == len(opened.tokens)


def test_null_arguments_are_arguments_not_given(server: HttpServer) -> None:
    turns = json.loads(json.dumps(AGENT_TURNS))
    turns[1]["tool_calls"][0]["function"]["arguments"] = None
    as_null = server.post("/chat/completions", {"messages": turns, "tools": [WEATHER]})
    turns[1]["tool_calls"][0]["function"]["arguments"] = "{}"
    as_empty = server.post("/chat/completions", {"messages": turns, "tools": [WEATHER]})
    assert as_null.status_code == 200 and as_null.json()["usage"] == as_empty.json()["usage"]


def test_a_stream_that_may_be_calls_opens_with_null_content(server: HttpServer) -> None:
    """As OpenAI's and llama-server's streams do; an empty string made the SDKs see text before the calls."""
    with_tools = server.post("/chat/completions", {"messages": AGENT_TURNS, "tools": [WEATHER], "stream": True})
    without = server.post("/chat/completions", {"messages": AGENT_TURNS[:1], "stream": True})
    assert sse_data(with_tools)[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert sse_data(without)[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_tools_for_a_model_whose_template_takes_none_are_a_400(tiny_bpe_gguf: Path) -> None:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "4")
    try:
        answer = srv.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": [WEATHER]})
        assert answer.status_code == 400 and "takes no tools" in answer.json()["error"]["message"]
        forced = srv.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": [WEATHER],
                                                "tool_choice": "required"})
        assert forced.status_code == 400 and forced.json()["error"]["param"] == "tool_choice"
        plain = srv.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": []})
        assert plain.status_code == 200, plain.text  # an empty list offers nothing
    finally:
        srv.kill()


def test_the_arguments_of_a_call_may_come_as_an_object(server: HttpServer) -> None:
    """Some clients send a call's arguments as the object itself, not as OpenAI's JSON text."""
    turns = json.loads(json.dumps(AGENT_TURNS))
    turns[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    as_object = server.post("/chat/completions", {"messages": turns, "tools": [WEATHER]}).json()
    as_text = server.post("/chat/completions", {"messages": AGENT_TURNS, "tools": [WEATHER]}).json()
    assert as_object["usage"]["prompt_tokens"] == as_text["usage"]["prompt_tokens"]
    assert as_object["choices"][0]["message"] == as_text["choices"][0]["message"]
