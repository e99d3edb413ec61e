"""OpenAI's function calling, on the way out: the calls a model wrote in its answer, read out of its text.

Qwen's and Hermes' templates ask for each call as ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
Qwen2.5-Coder often writes the same object in a JSON code block instead, or as the whole answer, then sometimes in
the doubled braces of the template's own example (llama.cpp's server reads the first three). An answer that ends in
such blocks, each one a call to an offered function, is answered as ``tool_calls``, with the text before them as the
content. Any other answer stays text, as the model wrote it: a block cut off by ``max_tokens``, or JSON that names no
offered function.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ds4spec.core.messages import ToolCall

FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule; it also keeps markup out of a name
_TAG, _FENCE = "<tool_call>", "```json"
# A tagged call's closing tag may be missing at the very end: Qwen ends a call it was given the opening of without it.
_BLOCK = re.compile(r"\s*(?:<tool_call>(.*?)(?:</tool_call>|\Z)|```json[ \t]*\n(.*?)\n[ \t]*```)\s*", re.DOTALL)
_CALL_START = re.compile(r'\s*\{\s*"name"')
_OPENINGS = ('{"name"', '{{"name"')  # how a call's object begins, in single or doubled braces
_VISIBLE = re.compile(rf"(?:\s*\S){{0,{max(map(len, _OPENINGS))}}}")  # enough of a text to compare with them


@dataclass(frozen=True, slots=True)
class Called:
    start: int  # where the calls begin in the answer's text
    content: str | None  # the text before them; None when it is blank
    calls: tuple[ToolCall, ...]


def read_calls(text: str, names: Collection[str]) -> Called | None:
    """The calls to the functions ``names`` that end ``text``, or None when it does not end in calls alone."""
    bare = _bare_call(text, names)
    if bare is not None:
        return Called(0, None, (bare,))
    for marker in re.finditer(f"{re.escape(_TAG)}|{re.escape(_FENCE)}", text):
        calls = _calls_from(text, marker.start(), names)
        if calls:
            content = text[:marker.start()]
            return Called(marker.start(), content if content.strip() else None, calls)
    return None


def _calls_from(text: str, at: int, names: Collection[str]) -> tuple[ToolCall, ...]:
    calls = []
    while at < len(text):
        block = _BLOCK.match(text, at)
        call = _call(block.group(1) or block.group(2) or "", names) if block else None
        if block is None or call is None:
            return ()
        calls.append(call)
        at = block.end()
    return tuple(calls)


def _bare_call(text: str, names: Collection[str]) -> ToolCall | None:
    """A whole answer that is a call's object, in single braces or the doubled ones of Qwen's template example."""
    body = text.strip()
    doubled = body.startswith("{{") and body.endswith("}}")
    return _call(body, names) or (_call(body[1:-1], names) if doubled else None)


def _call(body: str, names: Collection[str]) -> ToolCall | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # a model may write anything, brackets 10,000 deep too
        return None
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments: Any = value.get("arguments", value.get("parameters", {}))
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(f"call_{secrets.token_hex(12)}", value["name"], arguments)


def call_opening(name: str | None) -> str:
    """The start of a call to ``name`` (to any function: None), for the model to go on with."""
    if name is None:
        return f'{_TAG}\n{{"name": "'
    return f'{_TAG}\n{{"name": "{name}", "arguments":'


def forces_calls(template: str | None) -> bool:
    """Whether a model's template asks for calls as the blocks ``call_opening`` starts."""
    return _TAG in (template or "")


def as_openai(calls: tuple[ToolCall, ...], *, indexed: bool = False) -> list[dict[str, Any]]:
    """The calls as OpenAI writes them in a message, or in a streamed delta (``indexed``)."""
    return [{**({"index": i} if indexed else {}), "id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}} for i, c in enumerate(calls)]


class CallHolder:
    """A streamed answer's text, sent as it comes except from where a call may begin: from there it is held until
    the text shows it is no call, or the answer ends and ``read_calls`` decides."""

    def __init__(self) -> None:
        self.text = ""
        self.sent = 0  # how much of ``text`` has been sent

    def feed(self, piece: str) -> str:
        """What may be sent now, with ``piece`` added to the answer."""
        self.text += piece
        if self.sent == 0 and _may_open_bare_call(self.text):
            return ""
        start = self.sent
        while True:
            marker = _first_marker(self.text, start)
            if marker is None or not self._no_call_at(marker):
                break
            start = marker + 1  # a JSON block that is not a call: it goes out as text
        end = len(self.text) - _partial_marker(self.text) if marker is None else marker
        out, self.sent = self.text[self.sent:end], max(self.sent, end)
        return out

    def rest(self, called: Called | None) -> str:
        """What is still to be sent as text at the end: up to the calls, or all of it."""
        end = len(self.text) if called is None else called.start
        return self.text[self.sent:end]

    def _no_call_at(self, at: int) -> bool:
        """Whether the block at ``at`` cannot be a call: only a JSON block can show that before it ends."""
        if self.text.startswith(_TAG, at):
            return False
        line_end = self.text.find("\n", at)
        if line_end < 0:
            return False
        opening = _OPENINGS[0]
        squeezed = _visible_head(self.text, line_end + 1)[:len(opening)]
        if len(squeezed) < len(opening):
            return not opening.startswith(squeezed)
        return not _CALL_START.match(self.text, line_end + 1)


def _may_open_bare_call(text: str) -> bool:
    squeezed = _visible_head(text)
    return any(opening.startswith(squeezed[:len(opening)]) for opening in _OPENINGS)


def _visible_head(text: str, start: int = 0) -> str:
    """The first characters from ``start`` that are not white space, as many as ``_OPENINGS`` need: read up to
    there only, since a held answer is asked again at each piece."""
    head = _VISIBLE.match(text, start)  # it always matches, an empty text too
    return re.sub(r"\s+", "", head.group() if head else "")


def _first_marker(text: str, start: int) -> int | None:
    found = [i for i in (text.find(_TAG, start), text.find(_FENCE, start)) if i >= 0]
    return min(found) if found else None


def _partial_marker(text: str) -> int:
    """How many characters at the end of ``text`` may be the start of a marker."""
    for n in range(min(len(_TAG) - 1, len(text)), 0, -1):
        if _TAG.startswith(text[-n:]) or _FENCE.startswith(text[-n:]):
            return n
    return 0
