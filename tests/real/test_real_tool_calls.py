"""Function calling on the real default pair through real clients: simonw's ``llm`` runs the function Qwen2.5-Coder
calls, and through OpenAI's SDK the call comes whole and streamed, the speculative answer is plain greedy decoding's
(or differs at a proven near-tie), the call's result sent back is read as the model's template writes it, a call
``tool_choice`` names is made, and an answer asked for in a JSON schema parses as one.

The tests share one server; the last one ends it to load the target in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from http_server import HttpServer
from pydantic import BaseModel
from spec_helpers import assert_lossless

from ds4spec.core.events import Finished, FinishReason
from ds4spec.core.messages import ChatMessage
from ds4spec.core.plain import GenerationRequest
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings

CTX = 2048
MAX_TOKENS = 64
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city's name"}},
                   "required": ["city"]}}}


class Person(BaseModel):
    name: str
    age: int


QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    srv = HttpServer(None, "--ctx", str(CTX), draft=None, threads=None)  # the default pair, as a user starts it
    yield srv
    srv.kill()


def test_llm_runs_the_function_the_model_calls_and_sends_back_its_result(server: HttpServer, tmp_path: Path) -> None:
    """``llm --functions``: it reads the call from ds4spec's answer, runs the function, and sends the result back in a
    ``tool`` message that the server takes. Whether the 1.5B model then answers in words or calls again (up to the
    chain limit) is the model's choice; ``llm`` stops either way without a protocol error."""
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: ds4spec-local\n  model_name: qwen\n  api_base: {server.url}\n  supports_tools: true\n")
    function = ('def get_weather(city: str) -> str:\n    """The current weather in a city."""\n'
                "    return 'Sunny, 21 degrees C in ' + city\n")
    llm = Path(sys.executable).parent / "llm"
    proc = subprocess.run([str(llm), "-m", "ds4spec-local", "-o", "temperature", "0", "-o", "max_tokens",
                           str(MAX_TOKENS), "-s", "Once a tool has answered, reply to the user in one sentence.",
                           "--functions", function, "--tools-debug", "--chain-limit", "2", "--no-log",
                           QUESTION[0]["content"]],
                          env={**os.environ, "LLM_USER_PATH": str(tmp_path), "OPENAI_API_KEY": "unused"},
                          capture_output=True, text=True, timeout=600)
    said = proc.stdout + proc.stderr
    assert "Tool call: get_weather({'city': 'Paris'})\n  Sunny, 21 degrees C in Paris" in said, said
    assert proc.returncode == 0 or proc.stderr.strip().endswith("Chain limit of 2 exceeded."), said
    print(f"llm answered: {proc.stdout.strip()!r}")


def test_the_model_calls_the_offered_function_and_reads_its_result(server: HttpServer) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=600)
    whole = client.chat.completions.create(model="qwen", messages=QUESTION, tools=[WEATHER],  # type: ignore[arg-type,list-item]
                                           temperature=0, max_tokens=MAX_TOKENS, extra_body={"return_tokens": True})
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, choice.message
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]

    chunks = list(client.chat.completions.create(model="qwen", messages=QUESTION, tools=[WEATHER],  # type: ignore[arg-type,list-item]
                                                 temperature=0, max_tokens=MAX_TOKENS, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    [streamed] = [t for d in deltas for t in d.tool_calls or []]
    assert (streamed.function.name, streamed.function.arguments) == ("get_weather", call.function.arguments)  # type: ignore[union-attr]
    assert not "".join(d.content or "" for d in deltas) and chunks[-1].choices[0].finish_reason == "tool_calls"

    result = [*QUESTION, choice.message.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 18, "sky": "cloudy"}'}]
    after = client.chat.completions.create(model="qwen", messages=result, tools=[WEATHER], temperature=0,  # type: ignore[arg-type,list-item]
                                           max_tokens=MAX_TOKENS)
    assert after.choices[0].message.content or after.choices[0].message.tool_calls  # an answer of either kind

    forced = client.chat.completions.create(  # as instructor and LangChain's structured output ask for one function
        model="qwen", messages=[{"role": "user", "content": "Is it cold in Oslo?"}], tools=[WEATHER],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, max_tokens=MAX_TOKENS)
    [oslo] = forced.choices[0].message.tool_calls or []
    assert json.loads(oslo.function.arguments) == {"city": "Oslo"}  # type: ignore[union-attr]

    extracted = client.chat.completions.parse(  # response_format from a pydantic model: a json_schema
        model="qwen", messages=[{"role": "user", "content": "Ada Lovelace died at 36. Extract the person."}],
        response_format=Person, temperature=0, max_tokens=MAX_TOKENS)
    assert extracted.choices[0].message.parsed == Person(name="Ada Lovelace", age=36)
    statistics = (whole.model_extra or {})["ds4spec"]
    server.terminate()  # its models leave memory before the engine below loads the target again

    with Engine.load(Settings(draft="none", ctx=CTX)) as engine:
        prompt = engine.chat_prompt([ChatMessage("user", QUESTION[0]["content"])], tools=[WEATHER])
        assert after.usage is not None and whole.usage is not None
        assert whole.usage.prompt_tokens == len(prompt.tokens)
        plain = list(engine.generate(prompt, max_tokens=MAX_TOKENS))[-1]
        assert isinstance(plain, Finished)
        spec = Finished(FinishReason(statistics["finish_reason"]), GenerationStats(), tuple(statistics["tokens"]))
        flipped = assert_lossless(engine.target, GenerationRequest(prompt.tokens, MAX_TOKENS), plain, spec)
    print(f"{statistics['committed_tokens']} tokens, drafted {statistics['drafted_tokens']}, accepted "
          f"{statistics['accepted_tokens']}, drafter {statistics['drafter']}; "
          f"{'a proven near-tie flip' if flipped else 'identical to plain decoding'}")
