"""``response_format``: an answer asked for as JSON.

``json_object`` asks for an object in the system message, opens the answer with ``{`` and ends it once that object is
whole; ``json_schema`` gives the model the schema too. ds4spec does not constrain what the model writes (llama-server
compiles the schema into a grammar), so the object is the model's to write right; what it adds after the object never
reaches the client. Where tools are offered the format is for an answer in words: the answer is not opened, so that
the model may call instead (as OpenAI's API reads the two together). ``text`` is the default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ds4spec.core.messages import ChatMessage
from ds4spec.faces.http.tool_params import check_json
from ds4spec.faces.shared.generation_params import ParamError

OBJECT_INSTRUCTION = "Answer with one JSON object, and nothing else."
SCHEMA_INSTRUCTION = "Answer with one JSON object that follows this JSON Schema, and nothing else:\n"
WITH_TOOLS = "Unless you call a function: "


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    opening: str = ""  # what the answer opens with
    stop_at: str | None = None  # "json": the answer ends with the object
    instruction: str = ""  # for the system message


def response_format_param(body: Mapping[str, Any], tools: bool = False) -> JsonAnswer:
    """The JSON answer ``response_format`` asks for; with ``tools`` offered, one that may be a call instead."""
    raw = body.get("response_format")
    kind = raw.get("type") if isinstance(raw, dict) else None
    if raw is None or kind == "text":
        return JsonAnswer()
    spec = raw.get("json_schema") if isinstance(raw, dict) else None
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if kind == "json_object" or (kind == "json_schema" and isinstance(spec, dict) and schema is None):
        instruction = OBJECT_INSTRUCTION  # OpenAI's schema is optional: an object, then
    elif kind == "json_schema" and isinstance(schema, dict):
        check_json(schema, "response_format.json_schema.schema")
        instruction = SCHEMA_INSTRUCTION + json.dumps(schema, ensure_ascii=False)
    else:
        raise ParamError('response_format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                         '"json_schema": {"name": ..., "schema": {...}}}', "response_format")
    if tools:
        return JsonAnswer("", "json", WITH_TOOLS + instruction[0].lower() + instruction[1:])
    return JsonAnswer("{", "json", instruction)


def with_instruction(messages: tuple[ChatMessage, ...], instruction: str) -> tuple[ChatMessage, ...]:
    """The conversation with ``instruction`` at the end of its system message (a new one when it has none)."""
    if not instruction:
        return messages
    if messages and messages[0].role == "system":
        first = messages[0]
        return (ChatMessage("system", f"{first.content}\n\n{instruction}".lstrip()), *messages[1:])
    return (ChatMessage("system", instruction), *messages)
