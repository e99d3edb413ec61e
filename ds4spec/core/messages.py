"""A chat message: what a conversation, a chat prompt and a chat drafter share."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ds4spec.errors import ModelError

# A tool's definition: OpenAI's ``{"type": "function", "function": {"name", "description", "parameters"}}``, as
# chat templates take it (Hugging Face passes them on unchanged too).
ToolSpec = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function the assistant asked for: ``arguments`` is JSON text, as OpenAI's API carries it."""

    id: str
    name: str
    arguments: str

    def arguments_value(self) -> Any:
        """The arguments as a template wants them: the JSON's value, or the text itself when it is not JSON."""
        return json_value(self.arguments)


def json_value(text: str) -> Any:
    """The value ``text`` holds as JSON, or ``text`` itself where it is not JSON (or nests past the recursion limit)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system, user, assistant or tool (a tool's result)
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant's requests to call tools


Render = Callable[[list[dict[str, Any]], list[Any]], str]


def split_rendered(messages: Sequence[ChatMessage], render: Render, *, tools: Sequence[ToolSpec] = (),
                   plain: Callable[[str], bool] | None = None) -> tuple[list[tuple[str, str]], str]:
    """A conversation rendered by a chat template (``render(messages, tools)``), split into what the template
    wrote and what the users wrote: (markup before each piece of user text, that text) pairs, then the markup after
    the last.

    The template renders unique sentinels in place of the contents, so that the markup may be tokenized with
    special tokens parsed while no content ever is: a message holding ``<|im_end|>`` stays text. The strings inside
    tool definitions and tool calls, which templates write as JSON, are replaced the same way where ``plain`` says
    they would not tokenize as plain text (elsewhere a template may compare them, as ``type == "function"``); a
    template writes such a sentinel inside a JSON string, so it stands for the string's JSON escape.
    """
    run = uuid.uuid4().hex
    contents = {f"\x00ds4spec-{run}-{i}\x00": m.content for i, m in enumerate(messages) if m.content}
    keys = iter(contents)
    leaves: dict[str, str] = {}

    def keyed(value: Any) -> Any:
        if isinstance(value, str):
            if plain is None or plain(value):
                return value
            key = f"ds4spec{run}j{len(leaves)}z"  # letters and digits only: JSON writes it as it is
            leaves[key] = json.dumps(value, ensure_ascii=False)[1:-1]
            return key
        if isinstance(value, Mapping):
            return {keyed(k): keyed(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [keyed(v) for v in value]
        return value

    def message(m: ChatMessage) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m.role, "content": next(keys) if m.content else ""}
        if m.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": keyed(c.name), "arguments": keyed(c.arguments_value())}}
                                 for c in m.tool_calls]
        return out

    rest = render([message(m) for m in messages], [keyed(t) for t in tools])
    pieces: list[tuple[str, str]] = []
    expected = iter(contents)
    start = 0
    for found in re.finditer(f"\x00ds4spec-{run}-\\d+\x00|ds4spec{run}j\\d+z", rest):
        sentinel = found.group()
        if sentinel in leaves:
            text = leaves[sentinel]
        elif sentinel == next(expected, None):
            text = contents[sentinel]
        else:
            raise ModelError("the chat template dropped, repeated or reordered a message; it cannot be used safely")
        pieces.append((rest[start:found.start()], text))
        start = found.end()
    if next(expected, None) is not None:
        raise ModelError("the chat template dropped or altered a message; it cannot be used safely")
    return pieces, rest[start:]


def as_text_messages(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> tuple[ChatMessage, ...]:
    """The conversation with its tools, calls and tool results written into the messages' text, for a drafter: its
    own template may know no tools.

    The tools are listed by name, parameters and description, not as the JSON the target reads: a call repeats a
    function's name from that JSON and then goes its own way, and lookup, copying on from the name, drew a draft of 12
    to 14 tokens rejected at its first token in 6 of 8 answers that called a function (the default pair: 0.91x of
    plain decoding over 16 answers, 1.00x with the list)."""
    out = [_with_calls(m) for m in messages]
    if tools:
        system = "Functions you may call:\n" + "\n".join(_listed(t) for t in tools)
        if out and out[0].role == "system":
            out[0] = ChatMessage("system", f"{out[0].content}\n\n{system}")
        else:
            out.insert(0, ChatMessage("system", system))
    return tuple(out)


def _listed(tool: ToolSpec) -> str:
    function = tool.get("function") or {}
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    names = ", ".join(properties) if isinstance(properties, Mapping) else ""
    description = function.get("description") or ""
    return f"- {function.get('name')}({names}){': ' + description if description else ''}"


def _with_calls(m: ChatMessage) -> ChatMessage:
    if m.role == "tool":
        return ChatMessage("user", f"<tool_response>\n{m.content}\n</tool_response>")
    if not m.tool_calls:
        return m
    calls = "".join(
        f'\n<tool_call>\n{{"name": "{c.name}", "arguments": {json.dumps(c.arguments_value(), ensure_ascii=False)}}}'
        "\n</tool_call>" for c in m.tool_calls)
    return ChatMessage(m.role, (m.content + calls).lstrip("\n"))
