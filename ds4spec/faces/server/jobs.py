"""One generation request (``complete`` or ``chat``) and how the worker runs it against the engine.

The job's ``cancel`` event is what the engine polls once per speculative cycle (or plain step), so a cancel,
a superseding request, a shutdown or the end of a line or block all stop generation within one cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ds4spec.core.events import Finished, FinishReason, TextChunk
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine
from ds4spec.faces.server.params import ChatParams, CompleteParams
from ds4spec.faces.server.rpc import RequestId
from ds4spec.faces.server.stopping import Stopper


@dataclass(eq=False, slots=True)
class Job:
    request_id: RequestId
    params: CompleteParams | ChatParams
    cancel: threading.Event = field(default_factory=threading.Event)
    why: str = "request cancelled"  # the error message when ``cancel`` is set: cancelled, superseded, shutdown

    @property
    def document(self) -> str | None:
        return self.params.document if isinstance(self.params, CompleteParams) else None

    def stop(self, why: str) -> None:
        self.why = why
        self.cancel.set()


@dataclass(frozen=True, slots=True)
class Outcome:
    text: str
    finish_reason: str  # eog, stop, length, context, or cancelled
    stats: GenerationStats

    @property
    def cancelled(self) -> bool:
        return self.finish_reason == FinishReason.CANCELLED.value


def run_job(engine: Engine, job: Job, partial: Callable[[str], None]) -> Outcome:
    """Generates for ``job``, calling ``partial`` with each newly final piece of text when it streams.

    Raises what the engine raises for a prompt it cannot use (``InputError``, ``ModelError``).
    """
    params = job.params
    if isinstance(params, CompleteParams):
        prompt = engine.completion_prompt(params.prefix, params.suffix, params.language)
        stopper = Stopper(params.stop_at, params.prefix[params.prefix.rfind("\n") + 1:])
    else:
        prompt = engine.chat_prompt(params.messages)
        stopper = Stopper(None)
    gen = params.generation
    events = engine.generate(prompt, max_tokens=gen.max_tokens, stop=gen.stop,
                             cancelled=lambda: job.cancel.is_set() or stopper.done)
    for event in events:
        if isinstance(event, TextChunk):
            text = stopper.feed(event.text)
            if text and gen.stream:
                partial(text)
        elif isinstance(event, Finished):
            reason = event.reason.value
            if stopper.done:
                reason = FinishReason.STOP.value  # the option ended at its line or block, not by a cancel
            return Outcome(stopper.text, reason, event.stats)
    raise RuntimeError("the generator ended without a Finished event")
