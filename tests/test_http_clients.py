"""Real clients against ``ds4spec serve --http`` on a real socket: OpenAI's own Python SDK, and simonw's ``llm`` CLI
configured through ``extra-openai-models.yaml``, as their users point them at a local server.

The server wants a key (``DS4SPEC_API_KEY``), so each client also proves that it sends it as the server reads it.
Expected texts come from an ``Engine`` in this process on the same model.
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
from engine_text import chat_text, plain_engine, text_of
from http_server import HttpServer

from ds4spec.engine.engine import Engine

KEY = "s3cret-key"
QUESTION = [{"role": "user", "content": "Write a function that adds two numbers."}]


@pytest.fixture(scope="module")
def engine(tiny_bpe_gguf: Path) -> Iterator[Engine]:
    with plain_engine(tiny_bpe_gguf) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(tiny_bpe_gguf: Path) -> Iterator[HttpServer]:
    srv = HttpServer(tiny_bpe_gguf, "--max-tokens", "16", env={"DS4SPEC_API_KEY": KEY})
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def client(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0, timeout=60)


def complete_text(engine: Engine, prefix: str, suffix: str | None, max_tokens: int) -> str:
    return text_of(engine.complete(prefix, suffix, max_tokens=max_tokens))


def test_openai_lists_the_model(client: openai.OpenAI, tiny_bpe_gguf: Path) -> None:
    assert [m.id for m in client.models.list()] == [tiny_bpe_gguf.stem]


def test_openai_chat_answers_with_usage_and_ds4spec_statistics(client: openai.OpenAI, engine: Engine) -> None:
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, max_tokens=12)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == chat_text(engine, QUESTION, max_tokens=12)
    statistics = (answer.model_extra or {})["ds4spec"]  # the extra field an OpenAI client keeps and ignores
    assert answer.usage is not None and answer.usage.completion_tokens == statistics["committed_tokens"]


def test_openai_streams_a_chat_with_usage_at_the_end(client: openai.OpenAI, engine: Engine) -> None:
    stream = client.chat.completions.create(model="local", messages=QUESTION, max_tokens=12, stream=True,  # type: ignore[arg-type]
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == chat_text(engine, QUESTION, max_tokens=12) and len([c for c in chunks if c.choices]) > 2
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_openai_completions_fill_in_the_middle_streamed_or_not(client: openai.OpenAI, engine: Engine) -> None:
    prefix, suffix = "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
    whole = client.completions.create(model="local", prompt=prefix, suffix=suffix, max_tokens=10)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="local", prompt=prefix, suffix=suffix, max_tokens=10, stream=True))
    assert whole.choices[0].text == streamed == complete_text(engine, prefix, suffix, 10)


def test_openai_stop_string_ends_the_answer(client: openai.OpenAI, engine: Engine) -> None:
    full = complete_text(engine, "import os\n", None, 30)
    stop = full[6:9]
    answer = client.completions.create(model="local", prompt="import os\n", max_tokens=30, stop=[stop])
    assert answer.choices[0].text == full[:full.index(stop)] and answer.choices[0].finish_reason == "stop"


def test_openai_raises_the_servers_errors(client: openai.OpenAI, server: HttpServer) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="local", messages=QUESTION, temperature=3)  # type: ignore[arg-type]
    assert bad.value.status_code == 400 and bad.value.body["param"] == "temperature"  # type: ignore[index]
    wrong = openai.OpenAI(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="local", input="text")


def test_llm_cli_answers_a_prompt_through_extra_openai_models(server: HttpServer, engine: Engine,
                                                              tmp_path: Path) -> None:
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: ds4spec-local\n  model_name: qwen\n  api_base: {server.url}\n  api_key_name: ds4spec\n")
    (tmp_path / "keys.json").write_text(json.dumps({"ds4spec": KEY}))
    llm = Path(sys.executable).parent / "llm"
    prompt = QUESTION[0]["content"]
    proc = subprocess.run([str(llm), "-m", "ds4spec-local", "-o", "max_tokens", "12", "-o", "temperature", "0",
                           "--no-log", prompt], env={**os.environ, "LLM_USER_PATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == chat_text(engine, QUESTION, max_tokens=12) + "\n"
