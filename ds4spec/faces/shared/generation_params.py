"""What a generation request asks for, checked before any work starts: shared by the editor and HTTP servers.

A wrong value raises ``ParamError`` naming the parameter; each face turns it into its own error (a JSON-RPC
``INVALID_PARAMS``, an HTTP 400). Parameters a face does not know are ignored by both, so that a newer client
can talk to an older server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ds4spec.backend.prompt import ChatMessage
from ds4spec.core.messages import ToolSpec

ROLES = ("system", "user", "assistant")
MAX_TOKENS_LIMIT = 1_000_000
MAX_STOP_STRINGS = 16


class ParamError(ValueError):
    """A parameter that cannot be used; ``param`` names it (``messages[2].content``), or None for the request."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class Generation:
    """What every generation request shares: the budget, stop strings, streaming, and per-request sampling.

    A None sampling value means the server's own setting (its flags, config file or environment)."""

    max_tokens: int | None
    stop: tuple[str, ...] | None
    stream: bool
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None

    def sampling_overrides(self) -> dict[str, Any]:
        given = {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}
        return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True, slots=True)
class CompleteParams:
    prefix: str
    suffix: str | None  # given: fill in the middle
    language: str | None  # picks the trigger rules (a name, fence tag or file name); the model sees only text
    document: str | None  # a newer complete for the same document supersedes an older one
    stop_at: str | None  # "line", "block" or None
    generation: Generation


@dataclass(frozen=True, slots=True)
class ChatParams:
    messages: tuple[ChatMessage, ...]
    generation: Generation
    tools: tuple[ToolSpec, ...] = ()  # functions the model may call (the HTTP API's ``tools``)
    opening: str = ""  # what the answer opens with, already written (a call ``tool_choice`` forces, a JSON object)
    stop_at: str | None = None  # "json": the answer ends with its JSON value (the HTTP API's ``response_format``)


def messages_param(raw: Any, parse: Callable[[Any, int], ChatMessage] | None = None) -> tuple[ChatMessage, ...]:
    """``messages``, each read by ``parse`` (``message_param`` unless given)."""
    if not isinstance(raw, list) or not raw:
        raise ParamError("messages must be a non-empty array of {role, content} objects", "messages")
    return tuple((parse or message_param)(item, i) for i, item in enumerate(raw))


def message_param(item: Any, i: int, roles: tuple[str, ...] = ROLES) -> ChatMessage:
    """``messages[i]``: an object with one of ``roles`` and a text content."""
    if not isinstance(item, dict):
        raise ParamError(f"messages[{i}] must be an object with role and content", f"messages[{i}]")
    role = item.get("role")
    if role not in roles:
        raise ParamError(f"messages[{i}].role must be one of {', '.join(roles)}, got {role!r}", f"messages[{i}].role")
    return ChatMessage(role, text_param(item, "content", where=f"messages[{i}]."))


def max_tokens_param(params: Mapping[str, Any], name: str = "max_tokens") -> int | None:
    value = params.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or not 1 <= value <= MAX_TOKENS_LIMIT):
        raise ParamError(f"{name} must be an integer from 1 to {MAX_TOKENS_LIMIT}, got {value!r}", name)
    return value


def stop_param(params: Mapping[str, Any]) -> tuple[str, ...] | None:
    stop = params.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        stop = [stop]
    if (not isinstance(stop, list) or len(stop) > MAX_STOP_STRINGS
            or not all(isinstance(s, str) and s and encodable(s) for s in stop)):
        raise ParamError(f"stop must be a string or a list of at most {MAX_STOP_STRINGS} non-empty strings", "stop")
    return tuple(stop)


def bool_param(params: Mapping[str, Any], name: str, default: bool) -> bool:
    value = params.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ParamError(f"{name} must be true or false", name)
    return value


def text_param(params: Mapping[str, Any], name: str, where: str = "") -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise ParamError(f"{where}{name} must be a string", f"{where}{name}")
    if not encodable(value):
        raise ParamError(f"{where}{name} holds a lone surrogate escape; it is not Unicode text", f"{where}{name}")
    return value


def optional_text_param(params: Mapping[str, Any], name: str) -> str | None:
    if params.get(name) is None:
        return None
    return text_param(params, name)


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
