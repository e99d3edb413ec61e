"""One HTTP request's generation: its cancel flag, and the channel that carries its events from the worker thread
to the event loop that answers the client.

The worker puts ``Started`` when the job leaves the queue, each streamed piece of text, then exactly one of an
``Outcome`` or an ``ApiError``. ``cancel`` is what the engine polls once per speculative cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field

from ds4spec.engine.engine import Prompt
from ds4spec.faces.http.errors import ApiError
from ds4spec.faces.shared.generating import Outcome
from ds4spec.faces.shared.generation_params import ChatParams, CompleteParams


@dataclass(frozen=True, slots=True)
class Started:
    """The job left the queue: the model is generating for it now."""


Item = Started | str | Outcome | ApiError


class Channel:
    """Thread-safe into one event loop: the worker ``put``s, the request's coroutine ``get``s."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[Item] = asyncio.Queue()

    def put(self, item: Item) -> None:
        # A closed loop means the server is gone, and nobody waits for the item.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def get(self) -> Item:
        return await self._queue.get()


@dataclass(eq=False, slots=True)
class HttpJob:
    params: CompleteParams | ChatParams
    prompt: Prompt
    channel: Channel
    cancel: threading.Event = field(default_factory=threading.Event)

    def cancelled(self) -> bool:
        return self.cancel.is_set()
