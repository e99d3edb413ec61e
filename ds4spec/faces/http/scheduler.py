"""The engine's one worker thread and the bounded FIFO queue in front of it.

One target, one generation at a time: requests wait in arrival order, at most ``max_queued`` of them (more get
429), and each streams in its turn. The worker loads the models first (until then every generation gets 503);
a load that fails keeps the server up, answering 503 with the load error. A job whose client went away is
taken off the queue at once, or stops within one speculative cycle when it runs. Every job gets exactly one
``Outcome`` or ``ApiError`` on its channel, the shutdown's included.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable

from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import ContextOverflow, Ds4Error, InputError, UsageError
from ds4spec.faces.http.errors import ApiError, bad_request, internal, queue_full, unavailable
from ds4spec.faces.http.jobs import HttpJob, Started
from ds4spec.faces.shared.engine_worker import Closed, EngineWorker
from ds4spec.faces.shared.generating import Outcome, run_generation

log = logging.getLogger("ds4spec.faces.http")

SHUTTING_DOWN = "the server is shutting down"


class Scheduler:
    def __init__(self, settings: Settings, max_queued: int) -> None:
        self.max_queued = max_queued
        self._worker: EngineWorker[HttpJob] = EngineWorker(settings, self._run, crashed=self._crashed)
        self._lock = self._worker.lock
        self._queue = self._worker.queue

    def start(self) -> None:
        self._worker.start()

    # -- the event loop's side --------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``loading``, ``ready``, ``failed`` (the load error is ``load_error``) or ``stopping``."""
        if self._worker.stopping:
            return "stopping"
        if not self._worker.loaded:
            return "loading"
        return "failed" if self._worker.engine is None else "ready"

    @property
    def load_error(self) -> str | None:
        return self._worker.load_error

    def engine(self) -> Engine:
        """The loaded engine, for building a prompt; a 503 while it loads, after a failed load, or at shutdown."""
        state = self.state
        if state == "loading":
            raise unavailable("the model is still loading; GET /health answers 200 once it is ready")
        if state == "stopping":
            raise unavailable(SHUTTING_DOWN, "shutting_down")
        if self._worker.engine is None:
            raise unavailable(f"the model failed to load: {self.load_error}", "model_load_failed")
        return self._worker.engine

    def submit(self, job: HttpJob) -> None:
        with self._lock:
            if self._worker.stopping:
                raise unavailable(SHUTTING_DOWN, "shutting_down")
            # The jobs ahead of this one: with ``--max-queue 0`` a request runs when none is, and none waits.
            if len(self._queue) + (self._worker.running is not None) > self.max_queued:
                raise queue_full(self.max_queued)
            self._queue.append(job)
            self._lock.notify_all()

    def withdraw(self, job: HttpJob) -> None:
        """The client went away: a queued job leaves the queue now, a running one stops within one cycle."""
        job.cancel.set()
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)
                # Nobody reads it, but the coroutine that waits on the channel must wake up and end.
                job.channel.put(ApiError(499, "the client closed the connection", code="client_closed"))
                log.debug("a queued request was withdrawn by its client")

    def counts(self) -> tuple[int, int]:
        """Jobs generating (0 or 1) and waiting."""
        with self._lock:
            return int(self._worker.running is not None), len(self._queue)

    # -- shutting down ----------------------------------------------------------------------------------

    def stop_all(self) -> None:
        """Refuses new jobs, answers the queued ones with 503, and stops the running one within one cycle (it is
        answered with its text so far)."""
        with self._lock:
            self._worker.stopping = True
            while self._queue:
                job = self._queue.popleft()
                job.cancel.set()
                job.channel.put(unavailable(SHUTTING_DOWN, "shutting_down"))
            if self._worker.running is not None:
                self._worker.running.cancel.set()
            self._lock.notify_all()

    def close(self, timeout: float = 30.0) -> Closed:
        """Stops everything and frees the models (``EngineWorker.close``)."""
        self.stop_all()
        return self._worker.close(timeout)

    # -- the worker's side ------------------------------------------------------------------------------

    def _run(self, job: HttpJob) -> Callable[[], None]:
        if job.cancelled():
            return lambda: None
        job.channel.put(Started())
        answer = self._answer(job)
        return lambda: job.channel.put(answer)

    @staticmethod
    def _crashed(job: HttpJob) -> Callable[[], None]:
        return lambda: job.channel.put(internal("internal error: the generation failed"))

    def _answer(self, job: HttpJob) -> Outcome | ApiError:
        engine = self._worker.engine
        assert engine is not None  # jobs are queued only once the engine is loaded
        try:
            return run_generation(engine, job.params, job.cancelled, job.channel.put, job.prompt)
        except ContextOverflow as err:
            return bad_request(str(err), "messages", "context_length_exceeded")
        except (InputError, UsageError, ValueError) as err:
            return bad_request(str(err))
        except Ds4Error as err:
            return ApiError(500, str(err), type="server_error", code="model_error")
        except Exception as err:  # a bug: answer it, log it, keep serving
            traceback.print_exc(file=sys.stderr)
            return internal(f"internal error: {type(err).__name__}: {err}")
