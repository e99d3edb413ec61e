"""OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``, with the HTTP status it goes with.

The types are the ones llama-server answers with, so that clients written against it read ours the same way.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class ApiError(Exception):
    """An answer that is an error: raised anywhere below a route, rendered by ``app``'s handler."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        headers = {401: {"WWW-Authenticate": "Bearer"}, 429: {"Retry-After": str(RETRY_AFTER_S)}}.get(self.status)
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def unauthorized() -> ApiError:
    return ApiError(401, "a missing or wrong API key: send it as 'Authorization: Bearer KEY'",
                    type="authentication_error", code="invalid_api_key")


def not_found(path: str) -> ApiError:
    return ApiError(404, f"no such endpoint: {path}; see GET /v1/models, POST /v1/chat/completions and "
                    "POST /v1/completions", type="not_found_error", code="not_found")


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body exceeds the limit of {limit} bytes", code="request_too_large")


RETRY_AFTER_S = 1  # a 128-token answer on a 2-core CPU takes seconds; clients back off from there


def queue_full(limit: int) -> ApiError:
    waiting = f"{limit} requests are already waiting" if limit else "another request is running"
    return ApiError(429, f"{waiting} for the model; try again later", type="rate_limit_error", code="queue_full")


def unavailable(message: str, code: str = "model_loading") -> ApiError:
    return ApiError(503, message, type="unavailable_error", code=code)


def internal(message: str) -> ApiError:
    return ApiError(500, message, type="server_error", code="internal_error")
