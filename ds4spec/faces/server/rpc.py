"""JSON-RPC 2.0 messages: parsing a body into a request, and building responses, errors and notifications.

Error codes are JSON-RPC's own, LSP's ``RequestCancelled``, and three server errors of ours; each error
message is one line a user can read, as everywhere in ds4spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000  # too many requests waiting
MODEL_ERROR = -32001  # a model is missing, failed to load, or lacks what the method needs (FIM, chat template)
INPUT_ERROR = -32002  # the text cannot be used as it is (for example, longer than the context)
REQUEST_CANCELLED = -32800  # as in LSP: cancelled, superseded, or dropped at shutdown

RequestId = int | str | None


class RpcError(Exception):
    """An error to answer with; ``request_id`` is set when the failing message's id is known."""

    def __init__(self, code: int, message: str, data: Any = None, request_id: RequestId = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Request:
    """A request (answered) or, when ``notification``, a notification (never answered)."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    id: RequestId = None
    notification: bool = False


def parse(body: bytes) -> Request | None:
    """The request in ``body``, or None for a message to ignore (a response; a notification with bad params).

    Anything else that is wrong raises ``RpcError``, with the id when the message had a valid one.
    """
    try:
        msg = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: the message is not UTF-8 (byte {exc.start})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {_first_line(exc)}") from None
    if isinstance(msg, list):
        raise RpcError(INVALID_REQUEST, "batches are not supported; send one message per frame")
    if not isinstance(msg, dict):
        raise RpcError(INVALID_REQUEST, f"a message is a JSON object, not {_json_type(msg)}")
    has_id = "id" in msg
    rid = msg.get("id")
    if has_id and not _valid_id(rid):
        raise RpcError(INVALID_REQUEST, f"an id is an integer or a string, not {_json_type(rid)}")
    if msg.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'the message lacks "jsonrpc": "2.0"', request_id=rid)
    method = msg.get("method")
    if method is None and has_id and ("result" in msg or "error" in msg):
        return None  # a response: the server sends no requests, so there is nothing to match it with
    if not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "the message has no method name", request_id=rid)
    params = msg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        if not has_id:
            return None  # a notification is never answered, not even with an error
        raise RpcError(INVALID_PARAMS, f"params of {method} must be an object, not {_json_type(params)}",
                       request_id=rid)
    return Request(method, params, rid, notification=not has_id)


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def encode(message: dict[str, Any]) -> bytes:
    # "replace": a lone surrogate that came in as a JSON escape must not make the outgoing bytes invalid UTF-8.
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


def result(request_id: RequestId, value: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: RequestId, err: RpcError) -> bytes:
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        body["data"] = err.data
    return encode({"jsonrpc": "2.0", "id": request_id, "error": body})


def notification(method: str, params: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "method": method, "params": params})
