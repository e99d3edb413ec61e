"""Each method's parameters, checked and typed before any work starts.

A wrong parameter is an ``INVALID_PARAMS`` error that names it; parameters a method does not know are
ignored, so that a newer client can talk to an older server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ds4spec.backend.prompt import ChatMessage
from ds4spec.faces.server.rpc import INVALID_PARAMS, RequestId, RpcError

STOP_AT = ("line", "block")
ROLES = ("system", "user", "assistant")
MAX_TOKENS_LIMIT = 1_000_000
MAX_STOP_STRINGS = 16


@dataclass(frozen=True, slots=True)
class Generation:
    """What ``complete`` and ``chat`` share: the budget, stop strings, and whether to stream partials."""

    max_tokens: int | None
    stop: tuple[str, ...] | None
    stream: bool


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


def complete_params(params: dict[str, Any]) -> CompleteParams:
    stop_at = _opt_str(params, "stop_at")
    if stop_at is not None and stop_at not in STOP_AT:
        raise _invalid(f"stop_at must be one of {', '.join(STOP_AT)} or null, got {stop_at!r}")
    return CompleteParams(
        prefix=_text(params, "prefix"),
        suffix=_opt_str(params, "suffix"),
        language=_opt_str(params, "language"),
        document=_opt_str(params, "document"),
        stop_at=stop_at,
        generation=_generation(params),
    )


def chat_params(params: dict[str, Any]) -> ChatParams:
    raw = params.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _invalid("messages must be a non-empty array of {role, content} objects")
    messages = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _invalid(f"messages[{i}] must be an object with role and content")
        role = item.get("role")
        if role not in ROLES:
            raise _invalid(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        messages.append(ChatMessage(role, _text(item, "content", where=f"messages[{i}].")))
    return ChatParams(tuple(messages), _generation(params))


def cancel_target(params: dict[str, Any]) -> RequestId:
    if "id" not in params:
        raise _invalid("cancel needs the id of the request to cancel")
    rid = params["id"]
    if not (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))):
        raise _invalid("id must be an integer or a string")
    return rid  # type: ignore[no-any-return]


def _generation(params: dict[str, Any]) -> Generation:
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or not 1 <= max_tokens <= MAX_TOKENS_LIMIT):
        raise _invalid(f"max_tokens must be an integer from 1 to {MAX_TOKENS_LIMIT}, got {max_tokens!r}")
    stop = params.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if (not isinstance(stop, list) or len(stop) > MAX_STOP_STRINGS
                or not all(isinstance(s, str) and s and _encodable(s) for s in stop)):
            raise _invalid(f"stop must be a list of at most {MAX_STOP_STRINGS} non-empty strings")
        stop = tuple(stop)
    stream = params.get("stream", True)
    if not isinstance(stream, bool):
        raise _invalid("stream must be true or false")
    return Generation(max_tokens, stop, stream)


def _text(params: dict[str, Any], name: str, where: str = "") -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise _invalid(f"{where}{name} must be a string")
    if not _encodable(value):
        raise _invalid(f"{where}{name} holds a lone surrogate escape; it is not Unicode text")
    return value


def _opt_str(params: dict[str, Any], name: str) -> str | None:
    if params.get(name) is None:
        return None
    return _text(params, name)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)
