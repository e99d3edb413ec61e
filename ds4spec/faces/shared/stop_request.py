"""Ctrl-C as a request to stop, for the faces that read a generation on the main thread (repl, complete).

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when Ctrl-C arrives: between
storing an answer's chunk and showing it (stored, never shown), or just after a session write opened its
transaction. Inside a ``StopRequest`` the first Ctrl-C only sets a flag, which the engine asks as its
``cancelled`` before each cycle, and while a prompt is read at each node of llama.cpp's graph, so the generation
ends at a clean point and reports its statistics. A second Ctrl-C raises ``KeyboardInterrupt`` as usual: a way out
of a model stuck in one long computation.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class StopRequest:
    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def __call__(self) -> bool:
        return self.requested

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            self._previous = signal.signal(signal.SIGINT, self._on_ctrl_c)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._installed:
            # None: the old handler was not set from Python; Python's own is the sane one to put back.
            signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.default_int_handler)
            self._installed = False

    def _on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
