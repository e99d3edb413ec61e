"""A prompt read that stops within one node of llama.cpp's graph when asked, not at the end of its chunk.

A prompt is read in chunks of ``n_batch`` tokens, and a cancel (Ctrl-C, an editor's cancel, an HTTP client gone) was
heard between chunks only: on a CPU a 512-token chunk of a large model takes seconds to a minute. llama.cpp asks an
abort callback before each node of its graph (on the thread that called ``llama_decode``); while a prompt is read,
that callback asks ``cancelled``, and ``llama_decode`` returns 2 (aborted), the chunk's tokens not kept.

Only prompt reads get it: each call of the callback takes the interpreter's lock, about a microsecond, and a graph
has about a thousand nodes, a few percent of a one-token step but nothing beside a chunk's seconds. A
``KeyboardInterrupt`` that Python's own handler raises now lands in the callback: it is kept, the pass aborted, and
raised again once ``llama_decode`` has returned, so Ctrl-C still means what it meant, sooner.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from ds4spec.backend.runtime import llama_cpp

ABORTED = 2  # llama_decode's return code for a pass its abort callback stopped


class AbortablePasses:
    """While entered, every pass on ``ctx`` stops at its next graph node once ``cancelled`` says so."""

    def __init__(self, ctx: Any, cancelled: Callable[[], bool]) -> None:
        self._ctx = ctx
        self._cancelled = cancelled
        self.stopped = False
        self._error: BaseException | None = None
        self._callback = llama_cpp.ggml_abort_callback(self._asked)  # referenced for as long as llama.cpp holds it

    def _asked(self, _data: object) -> bool:
        try:
            if not self.stopped:
                self.stopped = bool(self._cancelled())
        except BaseException as exc:  # raised out of a ctypes callback, it would be printed and lost
            self._error, self.stopped = exc, True
        return self.stopped

    def raise_kept(self) -> None:
        """Raises what ``cancelled`` raised inside the callback (a ``KeyboardInterrupt``), if anything."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> AbortablePasses:
        llama_cpp.llama_set_abort_callback(self._ctx, self._callback, None)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        llama_cpp.llama_set_abort_callback(self._ctx, llama_cpp.ggml_abort_callback(), None)
