"""OpenAI's function calling, on the way in: ``tools``, ``tool_choice``, and the messages of a conversation with tools
(an assistant's ``tool_calls``, a ``tool`` message's result).

The model sees the tools and the calls through its own chat template; what it writes back is read by
``tool_calls``. ``tool_choice`` ``auto`` lets the model decide, ``none`` offers no tools, and ``required`` or a named
function opens the answer as a call (``call_opening``), which the model goes on with: ds4spec does not constrain
what the model writes, so a forced call is the model's to finish.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ds4spec.core.messages import ChatMessage, ToolCall, ToolSpec, json_value
from ds4spec.faces.http.tool_calls import FUNCTION_NAME, call_opening
from ds4spec.faces.shared.generation_params import ROLES, ParamError, encodable, message_param, text_param

# Deeper JSON is no function's schema or arguments; rendering it would exhaust the interpreter's recursion.
MAX_JSON_DEPTH = 64


@dataclass(frozen=True, slots=True)
class OfferedTools:
    tools: tuple[ToolSpec, ...] = ()
    opening: str = ""  # what the answer opens with, already written: a call ``tool_choice`` forces

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t["function"]["name"] for t in self.tools)


def tools_param(body: Mapping[str, Any]) -> OfferedTools:
    """The functions offered to the model (none when ``tool_choice`` is ``none``), and the call it forces."""
    for legacy in ("functions", "function_call"):
        if body.get(legacy) is not None:
            raise ParamError(f"{legacy} is OpenAI's deprecated form of function calling; send tools and tool_choice",
                             legacy)
    raw = body.get("tools")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ParamError("tools must be an array of {type: function, function: {name, ...}} objects", "tools")
    offered = OfferedTools(tuple(_tool(item, i) for i, item in enumerate(raw)))
    if len(set(offered.names)) < len(offered.names):
        raise ParamError("tools names a function twice", "tools")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        offered, choice = _allowed(offered, choice.get("allowed_tools"))
    if choice is None or choice == "auto":
        return offered
    if choice == "none":
        return OfferedTools()
    if not offered.tools:
        raise ParamError("tool_choice needs tools to choose from", "tool_choice")
    if choice == "required":  # with one function offered, a call to it: the model cannot name another
        only = offered.names[0] if len(offered.names) == 1 else None
        return dataclasses.replace(offered, opening=call_opening(only))
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if isinstance(choice, dict) and choice.get("type") == "function" and name in offered.names:
        return dataclasses.replace(offered, opening=call_opening(name))
    raise ParamError(f"tool_choice must be \"auto\", \"none\", \"required\" or "
                     f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}} naming an offered function; got "
                     f"{json.dumps(choice)}", "tool_choice")


def _allowed(offered: OfferedTools, allowed: Any) -> tuple[OfferedTools, str]:
    """OpenAI's ``allowed_tools`` choice: the offered functions it names, with its mode (``auto`` or ``required``)."""
    where = "tool_choice.allowed_tools"
    problem = ParamError(f'{where} must be {{"mode": "auto" or "required", "tools": [...]}} naming offered functions',
                         where)
    if not isinstance(allowed, dict) or allowed.get("mode") not in ("auto", "required"):
        raise problem
    names = set()
    for item in allowed.get("tools") if isinstance(allowed.get("tools"), list) else [None]:
        function = item.get("function") if isinstance(item, dict) else None
        names.add(function.get("name") if isinstance(function, dict) else None)
    if not names or not names <= set(offered.names):
        raise problem
    return OfferedTools(tuple(t for t in offered.tools if t["function"]["name"] in names)), allowed["mode"]


def _tool(item: Any, i: int) -> ToolSpec:
    where = f"tools[{i}]"
    if not isinstance(item, dict) or item.get("type") != "function" or not isinstance(item.get("function"), dict):
        raise ParamError(f"{where} must be an object with type \"function\" and a function object", where)
    function = item["function"]
    _name(function, f"{where}.function.")
    if function.get("description") is not None:
        text_param(function, "description", where=f"{where}.function.")
    if function.get("parameters") is not None and not isinstance(function["parameters"], dict):
        raise ParamError(f"{where}.function.parameters must be a JSON Schema object", f"{where}.function.parameters")
    check_json(item, where)
    return item


def check_json(value: Any, where: str) -> None:
    """No deeper than ``MAX_JSON_DEPTH``, and every string Unicode text (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ParamError(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels", where)
        if isinstance(item, str) and not encodable(item):
            raise ParamError(f"{where} holds a lone surrogate escape; it is not Unicode text", where)
        if isinstance(item, dict):
            stack += [(k, depth) for k in item] + [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]


def _name(function: Mapping[str, Any], where: str) -> str:
    name = function.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
        raise ParamError(f"{where}name must be 1 to 64 letters, digits, underscores or dashes, got {name!r}",
                         f"{where}name")
    return name


def chat_message(item: Any, i: int) -> ChatMessage:
    """``messages[i]`` of a chat that may use tools: an assistant's content may be null beside its tool calls."""
    if isinstance(item, dict) and item.get("role") == "assistant" and (item.get("tool_calls") or
                                                                       item.get("content") is None):
        content = "" if item.get("content") is None else text_param(item, "content", where=f"messages[{i}].")
        return ChatMessage("assistant", content, _calls(item.get("tool_calls"), f"messages[{i}].tool_calls"))
    return message_param(item, i, (*ROLES, "tool"))


def _calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ParamError(f"{where} must be an array of tool calls", where)
    calls = []
    for j, call in enumerate(raw):
        at = f"{where}[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise ParamError(f"{at} must be an object with an id and a function object", at)
        function = call["function"]
        arguments = function.get("arguments")
        if arguments is None:  # null is "not given", as for every other parameter
            arguments = "{}"
        if isinstance(arguments, dict):  # some clients send the object itself
            check_json(arguments, f"{at}.function.arguments")
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif isinstance(arguments, str):
            check_json(json_value(arguments), f"{at}.function.arguments")
        else:
            raise ParamError(f"{at}.function.arguments must be a JSON text", f"{at}.function.arguments")
        call_id = call.get("id", "")
        if not isinstance(call_id, str):
            raise ParamError(f"{at}.id must be a string", f"{at}.id")
        calls.append(ToolCall(call_id, _name(function, f"{at}.function."), arguments))
    return tuple(calls)
