"""Function calling over HTTP: what a request with tools may hold, and how the calls a model writes are read out of
its answer, whole or streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_text import plain_engine
from http_server import HttpServer
from test_chat_tools import TOOLS_TEMPLATE, WEATHER
from tinymodel import build_tiny_gguf

from ds4spec.core.messages import ChatMessage, ToolCall
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.faces.http.openai_params import Reply
from ds4spec.faces.http.replies import Answer
from ds4spec.faces.http.tool_calls import CallHolder, read_calls
from ds4spec.faces.shared.generating import Outcome

NAMES = ("get_weather", "read_file")
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
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "read_file"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "tool", "content": None}]}, "messages[0].content"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
])
def test_a_wrong_tool_request_is_a_400_naming_the_parameter(server: HttpServer, change: dict[str, object],
                                                            param: str) -> None:
    answer = server.post("/chat/completions", {"messages": AGENT_TURNS, **change})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text


@pytest.mark.parametrize(("choice", "opening"), [
    ("required", '<tool_call>\n{"name": "'),
    ({"type": "function", "function": {"name": "get_weather"}}, '<tool_call>\n{"name": "get_weather", "arguments":'),
])
def test_a_forced_call_opens_the_answer_for_the_model_to_go_on_with(server: HttpServer, engine: Engine,
                                                                     choice: object, opening: str) -> None:
    """``tool_choice`` ``required`` or a named function: the assistant's turn opens as a call, in the prompt and in
    the answer (this tiny model then writes no JSON, so the answer stays text)."""
    answer = server.post("/chat/completions", {"messages": AGENT_TURNS[:1], "tools": [WEATHER], "tool_choice": choice})
    assert answer.status_code == 200, answer.text
    expected = engine.chat_prompt([ChatMessage("user", "Weather in Paris?")], tools=[WEATHER], opening=opening)
    assert answer.json()["usage"]["prompt_tokens"] == len(expected.tokens)
    assert answer.json()["choices"][0]["message"]["content"].startswith(opening)


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
