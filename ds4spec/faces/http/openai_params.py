"""OpenAI request bodies, checked, into the generation params the editor server uses too.

Parameters ds4spec does not know are ignored, as OpenAI-compatible servers do (``parallel_tool_calls`` among
them). A request that names no ``temperature`` gets the server's (``--temperature``, 0:
greedy, unlike OpenAI's 1); none of ``max_tokens`` and ``max_completion_tokens`` gets ``--max-tokens`` (256).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ds4spec.core.sampling import MAX_SEED, RANDOM_SEED
from ds4spec.faces.http.errors import ApiError, bad_request
from ds4spec.faces.http.json_answers import response_format_param, with_instruction
from ds4spec.faces.http.tool_params import chat_message, tools_param
from ds4spec.faces.shared.generation_params import (
    ChatParams,
    CompleteParams,
    Generation,
    ParamError,
    bool_param,
    max_tokens_param,
    messages_param,
    stop_param,
    text_param,
)


@dataclass(frozen=True, slots=True)
class Reply:
    """How to answer, apart from what to generate: the model name to echo and what to add to the answer."""

    model: str | None
    stream: bool
    include_usage: bool  # stream_options.include_usage: one more chunk with the usage counts
    return_tokens: bool  # llama-server's extension: the committed token ids, under "ds4spec"
    tools: tuple[str, ...] = ()  # the names of the functions offered: calls to them are read out of the answer
    opening: str = ""  # what the answer opens with before the model's text (a forced call, a JSON object's brace)
    forces_call: bool = False  # the opening is a call ``tool_choice`` forces


def chat_request(body: Mapping[str, Any]) -> tuple[ChatParams, Reply]:
    try:
        messages = messages_param(_plain_messages(body.get("messages")), chat_message)
        offered = tools_param(body)
        answer = response_format_param(body, tools=bool(offered.tools))
        generation, reply = _generation(body)
    except ParamError as err:
        raise bad_request(str(err), err.param) from None
    # A forced call opens the answer; the format is then for a later answer in words, as OpenAI reads the two.
    opening, stop_at = (offered.opening, None) if offered.opening else (answer.opening, answer.stop_at)
    params = ChatParams(with_instruction(messages, answer.instruction), generation, offered.tools, opening, stop_at)
    return params, dataclasses.replace(reply, tools=offered.names, opening=opening, forces_call=bool(offered.opening))


def completion_request(body: Mapping[str, Any]) -> tuple[CompleteParams, Reply]:
    try:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]  # a batch of one prompt; longer batches need n > 1 in effect
        prefix = text_param({"prompt": prompt}, "prompt")
        suffix = None if body.get("suffix") is None else text_param(body, "suffix")
        generation, reply = _generation(body)
    except ParamError as err:
        raise bad_request(str(err), err.param) from None
    if body.get("echo") is True:
        raise bad_request("echo is not supported", "echo")
    return CompleteParams(prefix, suffix, None, None, None, generation), reply


def _plain_messages(raw: Any) -> Any:
    """OpenAI's newer shapes in the editor protocol's terms: ``developer`` is the system role, and content given
    as a list of text parts is their text. Anything else is left for ``messages_param`` to refuse."""
    if not isinstance(raw, list):
        return raw
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            item = dict(item)
            if item.get("role") == "developer":
                item["role"] = "system"
            if isinstance(item.get("content"), list):
                item["content"] = _text_of_parts(item["content"], i)
        out.append(item)
    return out


def _text_of_parts(parts: list[Any], i: int) -> str:
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ParamError(f"messages[{i}].content[{j}] must be a text part; images, audio and files are not "
                             "supported", f"messages[{i}].content")
        texts.append(part["text"])
    return "".join(texts)


def _generation(body: Mapping[str, Any]) -> tuple[Generation, Reply]:
    n = body.get("n")  # null is "not given", as for every other parameter
    if (n is not None and n != 1) or isinstance(n, bool):
        raise ParamError("only n = 1 is supported", "n")
    for name in ("logprobs", "top_logprobs"):
        # Answered with ``"logprobs": null``, a client that asked for them failed on reading them, with no word why.
        if body.get(name) not in (None, False, 0):
            raise ParamError(f"{name} is not supported: the answer carries no log probabilities", name)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ParamError("model must be a string", "model")
    stream = bool_param(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ParamError("stream_options must be an object", "stream_options")
    include_usage = bool_param(options or {}, "include_usage", False)
    max_tokens = max_tokens_param(body, "max_completion_tokens") or max_tokens_param(body)
    generation = Generation(max_tokens, stop_param(body), stream, temperature=_temperature(body),
                            top_p=_top_p(body), seed=_seed(body))
    return generation, Reply(model, stream, include_usage, bool_param(body, "return_tokens", False))


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value)
                                                                             and low <= value <= high):
        raise ParamError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}", name)
    return float(value)


def _temperature(body: Mapping[str, Any]) -> float | None:
    return _number(body, "temperature", 0.0, 2.0)


def _top_p(body: Mapping[str, Any]) -> float | None:
    top_p = _number(body, "top_p", 0.0, 1.0)
    # OpenAI allows 0; the sampler's nucleus needs a positive mass, and the smallest keeps the likeliest token.
    return None if top_p is None else max(top_p, 1e-9)


def _seed(body: Mapping[str, Any]) -> int | None:
    seed = body.get("seed")
    if seed is None or seed == RANDOM_SEED:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ParamError(f"seed must be an integer from 0 to {MAX_SEED}, or -1 for a random one; got {seed!r}", "seed")
    return seed


def check_body(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body
