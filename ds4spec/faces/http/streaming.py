"""Answering a queued job: waiting for its turn, server-sent events, and a client that goes away.

A disconnect is noticed by a watcher on the ASGI ``receive`` channel, from the moment the job is queued, and by
the event stream's own end (Starlette cancels it when the client is gone); either withdraws the job, so that a
queued one leaves the queue at once and a running one stops within one speculative cycle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request

from ds4spec.faces.http.errors import ApiError
from ds4spec.faces.http.jobs import HttpJob, Item, Started
from ds4spec.faces.http.replies import Answer
from ds4spec.faces.http.scheduler import Scheduler
from ds4spec.faces.http.tool_calls import CallHolder
from ds4spec.faces.shared.generating import Outcome


def watch_disconnect(request: Request, gone: Callable[[], None]) -> asyncio.Task[None]:
    """A task that calls ``gone`` when the client closes the connection; cancel it once the answer is sent."""

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                gone()
                return

    return asyncio.create_task(watch())


async def wait_turn(job: HttpJob) -> None:
    """Waits until the job runs; raises the ``ApiError`` it got instead (a shutdown, a withdrawal)."""
    item = await job.channel.get()
    if isinstance(item, ApiError):
        raise item
    if not isinstance(item, Started):
        raise RuntimeError(f"a job's channel began with {item!r}, not Started")


async def outcome(job: HttpJob) -> Outcome:
    """The job's outcome, for a request that does not stream (it gets no pieces of text)."""
    while True:
        item = await job.channel.get()
        if isinstance(item, ApiError):
            raise item
        if isinstance(item, Outcome):
            return item


async def events(answer: Answer, job: HttpJob, scheduler: Scheduler, watcher: asyncio.Task[None]) -> AsyncIterator[str]:
    """The job's answer as server-sent events: OpenAI's chunks, then ``data: [DONE]``. An error after the stream
    began (the status line is sent by then) is one ``data: {"error": ...}`` event, as OpenAI sends it."""
    done = False
    holder = CallHolder() if answer.reply.tools else None
    try:
        yield _data(answer.first_chunk())
        # What the request wrote for the model: a forced call's opening (held, as any call is), a JSON answer's "{".
        opening = answer.reply.opening
        if text := holder.feed(opening) if holder else opening:
            yield _data(answer.text_chunk(text))
        while True:
            item: Item = await job.channel.get()
            if isinstance(item, str):
                text = holder.feed(item) if holder else item
                if text:
                    yield _data(answer.text_chunk(text))
            elif isinstance(item, Outcome):
                done = True
                called = answer.calls(item)
                if holder and (rest := holder.rest(called)):
                    yield _data(answer.text_chunk(rest))
                if called:
                    yield _data(answer.calls_chunk(called))
                yield _data(answer.last_chunk(item, called))
                if answer.reply.include_usage:
                    yield _data(answer.usage_chunk(item))
                yield "data: [DONE]\n\n"
                return
            elif isinstance(item, ApiError):
                done = True
                yield _data(item.body())
                return
    finally:
        watcher.cancel()
        if not done:
            scheduler.withdraw(job)  # the client went away mid-stream


def _data(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n"
