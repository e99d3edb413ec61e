"""The HTTP server on the real default pair, speculating as it does by default: a chat streamed through OpenAI's SDK
equals plain greedy decoding of the same conversation by the engine, or first differs at a proven near-tie.

Both sides decode from a fresh context (the server's first request, the engine's first generation): a context
kept from an earlier request flips near-ties of its own. A speculative verify pass computes several tokens with
other kernels than a one-token step, so a difference is allowed only where ``assert_lossless`` proves the
target's two computations disagree by more than the margin between the two tokens.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from engine_text import chat_messages
from http_server import HttpServer
from spec_helpers import assert_lossless

from ds4spec.core.events import Finished, FinishReason
from ds4spec.core.plain import GenerationRequest
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings

MAX_TOKENS = 96
CTX = 2048
CODE = '''def total_price(items, tax):
    result = 0
    for item in items:
        result += item.price * item.quantity
    return result * (1 + tax)
'''
# An edit: the answer copies most of the code, so the default triggers draft by lookup as well as with SmolLM2.
CONVERSATION = [
    {"role": "system", "content": "You are a careful Python programmer. Answer with code only."},
    {"role": "user", "content": f"Add type hints to this function:\n\n```python\n{CODE}```"},
]


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    srv = HttpServer(None, "--ctx", str(CTX), draft=None, threads=None)  # the default pair, as a user starts it
    yield srv
    srv.kill()


def test_a_streamed_chat_through_openai_equals_plain_greedy_decoding(server: HttpServer) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=600)
    stream = client.chat.completions.create(model="qwen", messages=CONVERSATION, max_tokens=MAX_TOKENS,  # type: ignore[arg-type]
                                            temperature=0, stream=True, extra_body={"return_tokens": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    statistics = (chunks[-1].model_extra or {})["ds4spec"]
    server.terminate()  # its models leave memory before the engine below loads the target again

    with Engine.load(Settings(draft="none", ctx=CTX)) as engine:
        prompt = engine.chat_prompt(chat_messages(CONVERSATION))
        plain = list(engine.generate(prompt, max_tokens=MAX_TOKENS))[-1]
        assert isinstance(plain, Finished)
        spec = Finished(FinishReason(statistics["finish_reason"]), GenerationStats(), tuple(statistics["tokens"]))
        request = GenerationRequest(prompt.tokens, MAX_TOKENS)
        flipped = assert_lossless(engine.target, request, plain, spec)
        if not flipped:
            assert text == engine.target.tokenizer.detokenize(list(plain.tokens)).decode("utf-8")
    print(f"{statistics['committed_tokens']} tokens, drafted {statistics['drafted_tokens']}, accepted "
          f"{statistics['accepted_tokens']}, {statistics['tokens_per_second']} tokens/s, drafter "
          f"{statistics['drafter']}; {'a proven near-tie flip' if flipped else 'identical to plain decoding'}")
    assert statistics["drafter"] is not None and statistics["drafted_tokens"] > 0  # it did speculate
    assert statistics["committed_tokens"] == len(statistics["tokens"]) > 0
