"""The one thread that owns a server's engine: it loads the models, then runs queued jobs one at a time, in order.

Shared by the editor server (``faces.server``) and the HTTP server (``faces.http``), which differ in what a job is
and how it is answered. The server queues jobs and takes them off the queue under ``lock``; the worker hands each
job to ``run``, which generates and returns how to deliver its answer. The delivery runs with the lock held as
the job leaves ``running``, so that a client holding an answer never sees its job still running.

A server told to stop while the models load leaves without waiting for them: llama.cpp's load cannot be
interrupted, and one from a slow disk (or a named pipe nobody writes) would hold the process for as long as it
takes (the HTTP server used to answer SIGTERM 14 s later on the default pair, or 30 s and a false "did not stop in
time" on a load that never ends).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Generic, TypeVar

from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error

J = TypeVar("J")
Delivery = Callable[[], None]


def _nothing() -> None:
    return None


class Closed(Enum):
    """How a worker's ``close`` ended: the models freed, or why the process must leave without freeing them."""

    FREED = "the models were freed"
    LOADING = "stopped while the models were loading"
    STUCK = "the generation did not stop in time; exiting without freeing the models"


class EngineWorker(Generic[J]):
    def __init__(self, settings: Settings, run: Callable[[J], Delivery], *,
                 crashed: Callable[[J], Delivery] = lambda job: _nothing,
                 loaded: Callable[[Engine], None] = lambda engine: None,
                 after_load: Callable[[], None] = _nothing) -> None:
        """``crashed`` answers a job whose ``run`` raised; ``loaded`` reads what the server needs from the new engine
        (on the worker: the server's other threads never touch llama.cpp while it loads), and a ``Ds4Error`` it
        raises is a load error; ``after_load`` runs once loading ended, well or not."""
        self.lock = threading.Condition()
        self.queue: deque[J] = deque()
        self.running: J | None = None
        self.engine: Engine | None = None
        self.load_error: str | None = None
        self.loaded = False  # loading ended: ``engine`` is set, or ``load_error`` says why not
        self.stopping = False
        self._settings = settings
        self._run = run
        self._crashed = crashed
        self._on_loaded = loaded
        self._after_load = after_load
        self._thread = threading.Thread(target=self._work, name="ds4spec-generation", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 30.0) -> Closed:
        """Ends the worker once the queue is empty, then frees the models (the server has stopped the running job
        first, and answered the queued ones); while the models still load, or when the worker does not stop within
        ``timeout``, it returns at once, and the process must leave without freeing anything (``os._exit``)."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
            if not self.loaded:
                return Closed.LOADING
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                return Closed.STUCK
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        return Closed.FREED

    def _work(self) -> None:
        self._load()
        while True:
            with self.lock:
                self.lock.wait_for(lambda: self.queue or self.stopping)
                if not self.queue:
                    return
                job = self.running = self.queue.popleft()
            delivery = self._crashed(job)
            try:
                delivery = self._run(job)
            finally:
                with self.lock:
                    self.running = None
                    delivery()
                    self.lock.notify_all()

    def _load(self) -> None:
        try:
            self.engine = Engine.load(self._settings)
            self._on_loaded(self.engine)
        except Ds4Error as err:
            self.load_error = str(err)
        except Exception as err:  # a failed load is answered, never a dead server
            self.load_error = f"the models failed to load: {type(err).__name__}: {err}"
        if self.load_error:
            print(f"ds4spec: error: {self.load_error}", file=sys.stderr, flush=True)
        with self.lock:
            self.loaded = True
        self._after_load()
