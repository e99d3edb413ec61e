"""Function calling on the real default pair through OpenAI's SDK: Qwen2.5-Coder asked about the weather calls the
offered function, whole and streamed, and the speculative answer is plain greedy decoding's (or differs at a proven
near-tie); the call's result sent back is read as the model's template writes it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from http_server import HttpServer
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
QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    srv = HttpServer(None, "--ctx", str(CTX), draft=None, threads=None)  # the default pair, as a user starts it
    yield srv
    srv.kill()


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
