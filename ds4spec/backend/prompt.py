"""Turning user text into target tokens: plain completion, fill-in-the-middle, and chat.

User text is always tokenized with special-token parsing off, so text such as ``<|im_end|>`` in a file or
a message stays text and can never act as a control token. Only the template's own markup is parsed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jinja2
import jinja2.sandbox

from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.core.messages import ChatMessage, ToolSpec, split_rendered
from ds4spec.errors import InputError, ModelError

DEFAULT_CURSOR_MARKER = "<CURSOR>"


def completion_tokens(tok: LlamaTokenizer, text: str) -> list[int]:
    """The prompt for continuing ``text`` as it is (BOS added when the model wants one)."""
    return tok.tokenize(text.encode("utf-8"), add_special=True, parse_special=False)


def fim_tokens(tok: LlamaTokenizer, prefix: str, suffix: str) -> list[int]:
    """Prefix-suffix-middle prompt: the model writes what goes between ``prefix`` and ``suffix``."""
    fim = tok.fim_tokens()
    if fim is None:
        raise ModelError("this model has no fill-in-the-middle tokens; use it without --fim")
    head = [tok.bos] if tok.add_bos and tok.bos >= 0 else []
    return [
        *head,
        fim.prefix,
        *tok.tokenize(prefix.encode("utf-8")),
        fim.suffix,
        *tok.tokenize(suffix.encode("utf-8")),
        fim.middle,
    ]


def split_at_cursor(text: str, marker: str = DEFAULT_CURSOR_MARKER) -> tuple[str, str]:
    count = text.count(marker)
    if count != 1:
        raise InputError(f"--fim needs exactly one cursor marker {marker!r} in the input, found {count}")
    prefix, suffix = text.split(marker)
    return prefix, suffix


def chat_tokens(
    tok: LlamaTokenizer, template: str | None, messages: Sequence[ChatMessage], *, bos: str = "", eos: str = "",
    tools: Sequence[ToolSpec] = (),
) -> list[int]:
    """Renders ``messages`` (and the ``tools`` the model may call) with the model's own chat template and tokenizes
    the result.

    The rendered markup is tokenized with special tokens parsed, every content as plain text (``split_rendered``).
    """
    if not template:
        raise ModelError("this model has no chat template in its GGUF metadata")
    if tools and "tools" not in template:
        raise ModelError("this model's chat template takes no tools: it cannot be offered functions to call")

    def plain(text: str) -> bool:
        data = text.encode("utf-8")
        return tok.tokenize(data, parse_special=True) == tok.tokenize(data, parse_special=False)

    pieces, rest = split_rendered(messages, lambda keyed, specs: _render(template, keyed, specs, bos=bos, eos=eos),
                                  tools=tools, plain=plain)
    out: list[int] = []
    for before, content in pieces:
        out += tok.tokenize(before.encode("utf-8"), parse_special=True)
        out += tok.tokenize(content.encode("utf-8"), parse_special=False)
    out += tok.tokenize(rest.encode("utf-8"), parse_special=True)
    if tok.add_bos and tok.bos >= 0 and (not out or out[0] != tok.bos):
        out.insert(0, tok.bos)
    return out


def _render(template: str, messages: list[dict[str, Any]], tools: list[Any], *, bos: str, eos: str) -> str:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson

    def raise_exception(message: str) -> None:
        raise ModelError(f"the chat template refused the conversation: {message}")

    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template).render(
            messages=messages, tools=tools or None, add_generation_prompt=True, bos_token=bos, eos_token=eos
        )
    except jinja2.TemplateError as exc:
        raise ModelError(f"the model's chat template does not render: {exc}") from exc


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """JSON as the models were trained to read it (Hugging Face's filter): Jinja's own escapes ``<`` and ``>`` for
    HTML and sorts the keys."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
