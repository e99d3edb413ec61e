"""The protocol's methods over one ``Engine``: quick ones answered at once, generations queued for one worker.

The reader thread calls ``handle`` for every request and never waits on a model, so ``cancel``, ``stats``
and a superseding ``complete`` act while a generation runs. The worker thread owns the engine: it loads the
models at start-up (``initialize`` is answered once they are loaded, or with the load error), then runs the
queued jobs one at a time. Every job is answered exactly once: with its result, or with a
``REQUEST_CANCELLED`` error carrying the text so far.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any

from ds4spec import __version__
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error, InputError, UsageError
from ds4spec.faces.server import PROTOCOL_VERSION, rpc
from ds4spec.faces.server.counters import Counters
from ds4spec.faces.server.framing import FrameWriter
from ds4spec.faces.server.jobs import Job, Outcome, run_job
from ds4spec.faces.server.params import STOP_AT, cancel_target, chat_params, complete_params
from ds4spec.faces.server.rpc import Request, RequestId, RpcError
from ds4spec.faces.shared.engine_worker import Closed, EngineWorker
from ds4spec.faces.shared.generation_params import CompleteParams

log = logging.getLogger("ds4spec.faces.server")

PARTIAL = "partial"  # the notification that streams a request's text: {"id": ..., "text": "..."}
MAX_QUEUED = 64


class Service:
    def __init__(self, settings: Settings, writer: FrameWriter, *, max_message_bytes: int) -> None:
        self._out = writer
        self._max_message_bytes = max_message_bytes
        self._identity: dict[str, Any] | None = None  # models and capabilities, set once they are loaded
        self._waiting_init: list[RequestId] = []
        self.shut_down = False  # ``shutdown`` was answered: only ``exit`` is accepted now
        self._counters = Counters()
        self._worker: EngineWorker[Job] = EngineWorker(settings, self._run, crashed=self._crashed,
                                                       loaded=self._identify, after_load=self._answer_init)
        self._cond = self._worker.lock
        self._queue = self._worker.queue
        self._methods: dict[str, Callable[[Request], Any]] = {
            "initialize": self._initialize,
            "complete": self._generate,
            "chat": self._generate,
            "cancel": self._cancel,
            "$/cancelRequest": self._cancel,
            "stats": self._stats,
            "shutdown": self._shutdown,
        }

    def start(self) -> None:
        self._worker.start()

    # -- the reader's side ------------------------------------------------------------------------------

    def handle(self, req: Request) -> None:
        """Answers ``req`` now, or queues it for the worker, which answers it later."""
        log.debug("request %r: %s", req.id, req.method)
        method = self._methods.get(req.method)
        if req.notification:
            if req.method in ("cancel", "$/cancelRequest"):
                self._quietly(req)
            return  # other notifications (an LSP client's "initialized", "$/setTrace", ...) are ignored
        self._counters.requests += 1
        if method is None:
            self._fail(req.id, RpcError(rpc.METHOD_NOT_FOUND, f"unknown method {req.method!r}"))
            return
        if self.shut_down:
            self._fail(req.id, RpcError(rpc.INVALID_REQUEST, "the server is shutting down; only exit is accepted"))
            return
        try:
            value = method(req)
        except RpcError as err:
            self._fail(req.id, err)
            return
        if value is not _LATER:
            self._reply(req.id, value)

    def _quietly(self, req: Request) -> None:
        with contextlib.suppress(RpcError):  # a notification gets no answer, not even an error
            self._cancel(req)

    def _initialize(self, req: Request) -> Any:
        with self._cond:
            if not self._worker.loaded:
                self._waiting_init.append(req.id)
                return _LATER
        return self._initialize_result()

    def _initialize_result(self) -> Any:
        if self._identity is None:
            raise RpcError(rpc.MODEL_ERROR, self._worker.load_error or "the models are not loaded")
        return {"protocolVersion": PROTOCOL_VERSION, "serverInfo": {"name": "ds4spec", "version": __version__},
                **self._identity}

    def _generate(self, req: Request) -> Any:
        params = complete_params(req.params) if req.method == "complete" else chat_params(req.params)
        if isinstance(params, CompleteParams):
            log.debug("complete %r: %s, %d characters before the cursor, %s after, document %r", req.id,
                      params.language or "no language", len(params.prefix),
                      "none" if params.suffix is None else len(params.suffix), params.document)
        job = Job(req.id, params)
        with self._cond:
            if any(j.request_id == req.id for j in self._in_flight()):
                raise RpcError(rpc.INVALID_REQUEST, f"request id {req.id!r} is already in flight")
            if len(self._queue) >= MAX_QUEUED:
                raise RpcError(rpc.SERVER_BUSY, f"{MAX_QUEUED} requests are already waiting; cancel some first")
            if job.document is not None:
                self._supersede(job)
            self._queue.append(job)
            self._cond.notify_all()
        return _LATER

    def _supersede(self, job: Job) -> None:
        """Called with the lock held: older completes of the same document stop (queued ones at once)."""
        why = f"superseded by request {job.request_id!r}"
        for old in [j for j in self._queue if j.document == job.document]:
            self._queue.remove(old)
            self._counters.superseded += 1
            self._answer_cancelled(old, why, None)
        running = self._worker.running
        if running is not None and running.document == job.document and not running.cancel.is_set():
            self._counters.superseded += 1
            running.stop(why)

    def _cancel(self, req: Request) -> Any:
        target = cancel_target(req.params)
        with self._cond:
            for job in self._queue:
                if job.request_id == target:
                    self._queue.remove(job)
                    self._counters.cancelled += 1
                    self._answer_cancelled(job, "request cancelled", None)
                    return {"cancelled": True}
            running = self._worker.running
            if running is not None and running.request_id == target and not running.cancel.is_set():
                self._counters.cancelled += 1
                running.stop("request cancelled")
                return {"cancelled": True}
        return {"cancelled": False}  # unknown, or already answered: too late to cancel

    def _stats(self, req: Request) -> Any:
        with self._cond:
            identity = self._identity or {}
            return {
                **self._counters.as_dict(),
                "loaded": identity != {},
                "models": identity.get("models", {"target": None, "drafter": None}),
                "running": self._worker.running.request_id if self._worker.running else None,
                "queued": [j.request_id for j in self._queue],
            }

    def _shutdown(self, req: Request) -> Any:
        self._stop_all("the server is shutting down")
        with self._cond:
            self._cond.wait_for(lambda: self._worker.running is None, timeout=30)
        self.shut_down = True
        return None

    # -- the worker's side ------------------------------------------------------------------------------

    def _identify(self, engine: Engine) -> None:
        tok = engine.target.tokenizer
        self._identity = {
            "models": {"target": engine.target_name, "drafter": engine.drafter_name},
            "capabilities": {
                "complete": {"fim": tok.fim_tokens() is not None, "stopAt": list(STOP_AT)},
                "chat": bool(engine.target.chat_template),
                "cancel": True,
                "partial": PARTIAL,
                "maxMessageBytes": self._max_message_bytes,
            },
        }

    def _answer_init(self) -> None:
        with self._cond:
            waiting, self._waiting_init = self._waiting_init, []
        for rid in waiting:
            try:
                self._reply(rid, self._initialize_result())
            except RpcError as err:
                self._fail(rid, err)

    def _crashed(self, job: Job) -> Callable[[], None]:
        answer = rpc.error(job.request_id, RpcError(rpc.INTERNAL_ERROR, "internal error: the job failed"))
        return lambda: self._out.write(answer)

    def _run(self, job: Job) -> Callable[[], None]:
        """Runs ``job``; its answer is written as it leaves the books, so that a client holding the answer never
        sees the job running in ``stats``, and ``shutdown`` answers only after it."""
        answer = self._answer(job)
        return lambda: self._out.write(answer)

    def _answer(self, job: Job) -> bytes:
        rid = job.request_id
        if job.cancel.is_set():
            return self._cancelled(job, job.why, None)
        engine = self._worker.engine
        if engine is None or self._identity is None:
            return rpc.error(rid, RpcError(rpc.MODEL_ERROR, self._worker.load_error or "the models are not loaded"))

        def partial(text: str) -> None:
            self._out.write(rpc.notification(PARTIAL, {"id": rid, "text": text}))

        try:
            outcome = run_job(engine, job, partial)
        except (InputError, UsageError) as err:
            return rpc.error(rid, RpcError(rpc.INPUT_ERROR, str(err)))
        except Ds4Error as err:
            return rpc.error(rid, RpcError(rpc.MODEL_ERROR, str(err)))
        except Exception as err:  # a bug: answer it and keep serving
            traceback.print_exc(file=sys.stderr)
            return rpc.error(rid, RpcError(rpc.INTERNAL_ERROR, f"internal error: {type(err).__name__}: {err}"))
        with self._cond:
            self._counters.add(outcome)
        if outcome.cancelled:
            return self._cancelled(job, job.why, outcome)
        return rpc.result(rid, {"text": outcome.text, "finish_reason": outcome.finish_reason,
                                "stats": outcome.stats.as_dict()})

    # -- shutting down ----------------------------------------------------------------------------------

    def _stop_all(self, why: str) -> None:
        with self._cond:
            while self._queue:
                self._answer_cancelled(self._queue.popleft(), why, None)
            if self._worker.running is not None:
                self._worker.running.stop(why)

    def close(self, timeout: float = 30.0) -> Closed:
        """Stops every job and the worker, then frees the models (``EngineWorker.close``)."""
        self._stop_all("the server is shutting down")
        return self._worker.close(timeout)

    # -- answers ----------------------------------------------------------------------------------------

    def _in_flight(self) -> list[Job]:
        return [*self._queue, *([self._worker.running] if self._worker.running else [])]

    def _answer_cancelled(self, job: Job, why: str, outcome: Outcome | None) -> None:
        self._out.write(self._cancelled(job, why, outcome))

    @staticmethod
    def _cancelled(job: Job, why: str, outcome: Outcome | None) -> bytes:
        data = {"text": outcome.text if outcome else "", "stats": outcome.stats.as_dict() if outcome else None}
        return rpc.error(job.request_id, RpcError(rpc.REQUEST_CANCELLED, why, data))

    def _reply(self, rid: RequestId, value: Any) -> None:
        self._out.write(rpc.result(rid, value))

    def _fail(self, rid: RequestId, err: RpcError) -> None:
        self._out.write(rpc.error(rid, err))


_LATER = object()  # a method's return value meaning "answered later, by the worker or the loader"
