"""Each method's parameters, checked and typed before any work starts.

A wrong parameter is an ``INVALID_PARAMS`` error that names it; parameters a method does not know are
ignored, so that a newer client can talk to an older server. The checks themselves are shared with the HTTP
server (``faces.shared.generation_params``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ds4spec.faces.server.rpc import INVALID_PARAMS, RequestId, RpcError
from ds4spec.faces.shared.generation_params import (
    ChatParams,
    CompleteParams,
    Generation,
    ParamError,
    bool_param,
    max_tokens_param,
    messages_param,
    optional_text_param,
    stop_param,
    text_param,
)

STOP_AT = ("line", "block")
_T = TypeVar("_T")


def complete_params(params: dict[str, Any]) -> CompleteParams:
    def parse() -> CompleteParams:
        stop_at = optional_text_param(params, "stop_at")
        if stop_at is not None and stop_at not in STOP_AT:
            raise ParamError(f"stop_at must be one of {', '.join(STOP_AT)} or null, got {stop_at!r}")
        return CompleteParams(
            prefix=text_param(params, "prefix"),
            suffix=optional_text_param(params, "suffix"),
            language=optional_text_param(params, "language"),
            document=optional_text_param(params, "document"),
            stop_at=stop_at,
            generation=_generation(params),
        )

    return _checked(parse)


def chat_params(params: dict[str, Any]) -> ChatParams:
    return _checked(lambda: ChatParams(messages_param(params.get("messages")), _generation(params)))


def cancel_target(params: dict[str, Any]) -> RequestId:
    if "id" not in params:
        raise _invalid("cancel needs the id of the request to cancel")
    rid = params["id"]
    if not (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))):
        raise _invalid("id must be an integer or a string")
    return rid  # type: ignore[no-any-return]


def _generation(params: dict[str, Any]) -> Generation:
    return Generation(max_tokens_param(params), stop_param(params), bool_param(params, "stream", True))


def _checked(parse: Callable[[], _T]) -> _T:
    try:
        return parse()
    except ParamError as err:
        raise _invalid(str(err)) from None


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)
