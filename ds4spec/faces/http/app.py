"""The routes: ``GET /health``, ``GET /v1/models`` (and ``/v1/models/{id}``), ``POST /v1/chat/completions`` and
``POST /v1/completions``.

Every error is OpenAI's error object with its status, a 404 for an unknown path and a 500 for a bug included;
a traceback goes to the server's stderr, never to the client. No route reads or writes a file.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ds4spec.errors import ContextOverflow, Ds4Error
from ds4spec.faces.http import streaming
from ds4spec.faces.http.errors import ApiError, bad_request, internal, not_found, too_large, unauthorized
from ds4spec.faces.http.jobs import Channel, HttpJob
from ds4spec.faces.http.openai_params import chat_request, check_body, completion_request
from ds4spec.faces.http.replies import Answer
from ds4spec.faces.http.scheduler import Scheduler
from ds4spec.faces.http.tool_calls import forces_calls
from ds4spec.faces.shared.generating import build_prompt, request_sampling

log = logging.getLogger("ds4spec.faces.http")

MAX_BODY_BYTES = 8 * 1024 * 1024  # as the editor protocol's frames: a buffer and a conversation fit many times
_DRAIN_LIMIT = 16 * MAX_BODY_BYTES  # an over-long body up to this is read and dropped, so the client hears 413


@dataclass(frozen=True, slots=True)
class HttpOptions:
    model_id: str  # what /v1/models lists; every model name a request gives maps to the loaded target
    api_key: str | None
    max_body_bytes: int = MAX_BODY_BYTES


def build_app(scheduler: Scheduler, options: HttpOptions) -> Starlette:
    routes = Routes(scheduler, options)
    app = Starlette(
        routes=[
            Route("/health", routes.health, methods=["GET"]),
            Route("/v1/models", routes.models, methods=["GET"]),
            Route("/v1/models/{model:path}", routes.model, methods=["GET"]),
            Route("/v1/chat/completions", routes.chat, methods=["POST"]),
            Route("/v1/completions", routes.completions, methods=["POST"]),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _bug},
    )
    # Starlette answers ``/v1/models/`` with a redirect to a URL built from the request's Host header: a 404 instead.
    app.router.redirect_slashes = False
    return app


class Routes:
    def __init__(self, scheduler: Scheduler, options: HttpOptions) -> None:
        self._scheduler = scheduler
        self._options = options
        self._created = int(time.time())

    async def health(self, request: Request) -> Response:
        state = self._scheduler.state
        if state != "ready":
            self._scheduler.engine()  # raises the 503 that says why
        running, waiting = self._scheduler.counts()
        return JSONResponse({"status": "ok", "running": running, "queued": waiting})

    async def models(self, request: Request) -> Response:
        self._check_key(request)
        return JSONResponse({"object": "list", "data": [self._model()]})

    async def model(self, request: Request) -> Response:
        """``GET /v1/models/{id}``: the loaded target under its id; any other id is a 404 (requests may name any
        model, but what is listed and retrieved is the one that answers them)."""
        self._check_key(request)
        name = request.path_params["model"]
        if not name:  # ``/v1/models/``: no such endpoint, as any path with a trailing slash
            raise not_found(request.url.path)
        if name != self._options.model_id:
            raise ApiError(404, f"no model {name!r} here; this server runs {self._options.model_id!r}",
                           param="model", code="model_not_found")
        return JSONResponse(self._model())

    def _model(self) -> dict[str, object]:
        return {"id": self._options.model_id, "object": "model", "created": self._created, "owned_by": "ds4spec"}

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        self._check_key(request)
        body = check_body(await self._read_json(request))
        params, reply = chat_request(body) if chat else completion_request(body)
        engine = self._scheduler.engine()
        if reply.forces_call and not forces_calls(engine.target.chat_template):
            raise bad_request("tool_choice can force a call only on a model whose chat template asks for calls in "
                              "<tool_call> blocks (Qwen's, Hermes'); use \"auto\"", "tool_choice")
        try:
            request_sampling(engine, params)
            prompt = await anyio.to_thread.run_sync(build_prompt, engine, params)
        except ContextOverflow as err:
            raise bad_request(str(err), "messages" if chat else "prompt", "context_length_exceeded") from None
        except (Ds4Error, ValueError) as err:  # no FIM tokens, no chat template, an empty prompt
            raise bad_request(str(err)) from None
        job = HttpJob(params, prompt, Channel(asyncio.get_running_loop()))
        self._scheduler.submit(job)
        watcher = streaming.watch_disconnect(request, lambda: self._scheduler.withdraw(job))
        drafter = engine.drafter_name if engine.speculating else None
        answer = Answer(chat, self._options.model_id, reply, drafter)
        try:
            await streaming.wait_turn(job)
            if reply.stream:
                stream = streaming.events(answer, job, self._scheduler, watcher)
                watcher = None  # the stream owns it now
                return StreamingResponse(stream, media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            return JSONResponse(answer.whole(await streaming.outcome(job)))
        finally:
            if watcher is not None:
                watcher.cancel()

    def _check_key(self, request: Request) -> None:
        key = self._options.api_key
        if key is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
            raise unauthorized()

    async def _read_json(self, request: Request) -> Any:
        limit = self._options.max_body_bytes
        declared = request.headers.get("content-length", "")
        over = declared.isdigit() and int(declared) > limit
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > _DRAIN_LIMIT:
                    break
                over = over or size > limit
                if not over:
                    chunks.append(chunk)
        except ClientDisconnect:
            raise ApiError(499, "the client closed the connection while sending", code="client_closed") from None
        if over or size > limit:
            raise too_large(limit)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, RecursionError) as err:
            raise bad_request(f"the request body is not valid JSON: {err}") from None


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return not_found(request.url.path).response()
    if exc.status_code == 405:
        return ApiError(405, f"{request.method} is not allowed on {request.url.path}",
                        code="method_not_allowed").response()
    return ApiError(exc.status_code, str(exc.detail)).response()


async def _bug(request: Request, exc: Exception) -> Response:
    log.error("a request failed", exc_info=exc)
    return internal(f"internal error: {type(exc).__name__}").response()
