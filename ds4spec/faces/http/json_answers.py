"""``response_format``: an answer asked for as JSON.

``json_object`` opens the answer with ``{`` and ends it once that object is whole; ``json_schema`` also gives the
model the schema in the system message. ds4spec does not constrain what the model writes (llama-server compiles the
schema into a grammar), so the object is the model's to write right; what it adds after the object never reaches the
client. ``text`` is the default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ds4spec.core.messages import ChatMessage
from ds4spec.faces.http.tool_params import check_json
from ds4spec.faces.shared.generation_params import ParamError

SCHEMA_INSTRUCTION = "Answer with one JSON object that follows this JSON Schema, and nothing else:\n"


@dataclass(frozen=True, slots=True)
class JsonAnswer:
    opening: str = ""  # what the answer opens with
    stop_at: str | None = None  # "json": the answer ends with the object
    instruction: str = ""  # for the system message


def response_format_param(body: Mapping[str, Any]) -> JsonAnswer:
    raw = body.get("response_format")
    kind = raw.get("type") if isinstance(raw, dict) else None
    if raw is None or kind == "text":
        return JsonAnswer()
    if kind == "json_object":
        return JsonAnswer("{", "json")
    spec = raw.get("json_schema") if isinstance(raw, dict) else None
    if kind == "json_schema" and isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
        check_json(spec["schema"], "response_format.json_schema.schema")
        schema = json.dumps(spec["schema"], ensure_ascii=False)
        return JsonAnswer("{", "json", SCHEMA_INSTRUCTION + schema)
    raise ParamError('response_format must be {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", '
                     '"json_schema": {"name": ..., "schema": {...}}}', "response_format")


def with_instruction(messages: tuple[ChatMessage, ...], instruction: str) -> tuple[ChatMessage, ...]:
    """The conversation with ``instruction`` at the end of its system message (a new one when it has none)."""
    if not instruction:
        return messages
    if messages and messages[0].role == "system":
        first = messages[0]
        return (ChatMessage("system", f"{first.content}\n\n{instruction}".lstrip()), *messages[1:])
    return (ChatMessage("system", instruction), *messages)
