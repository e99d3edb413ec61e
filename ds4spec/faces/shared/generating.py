"""One generation request run against the engine: the prompt, per-request sampling, stop strings, the outcome.

Shared by the editor server (``faces.server``) and the HTTP server (``faces.http``). ``cancelled`` is what the
engine polls once per speculative cycle (or plain step), and while the prompt is read at each node of llama.cpp's
graph, so a cancel, a client that went away, a shutdown or the end of an editor's line or block all stop generation
within one cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ds4spec.core.events import Finished, FinishReason, TextChunk
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.stats import GenerationStats
from ds4spec.engine.engine import Engine, Prompt
from ds4spec.faces.shared.generation_params import ChatParams, CompleteParams
from ds4spec.faces.shared.stopping import Stopper


@dataclass(frozen=True, slots=True)
class Outcome:
    text: str
    finish_reason: str  # eog, stop, length, context, or cancelled
    stats: GenerationStats
    tokens: tuple[int, ...] = ()  # the committed token ids (the engine's ``Finished.tokens``)

    @property
    def cancelled(self) -> bool:
        return self.finish_reason == FinishReason.CANCELLED.value


def build_prompt(engine: Engine, params: CompleteParams | ChatParams) -> Prompt:
    """The target tokens for ``params``; raises what the engine raises for a prompt it cannot use
    (``InputError``, ``ContextOverflow``, ``ModelError``)."""
    if isinstance(params, CompleteParams):
        return engine.completion_prompt(params.prefix, params.suffix, params.language)
    return engine.chat_prompt(params.messages, tools=params.tools, opening=params.opening)


def request_sampling(engine: Engine, params: CompleteParams | ChatParams) -> SamplingSettings:
    """The server's sampling settings with what the request names instead; raises ``ValueError`` when out of range."""
    sampling = dataclasses.replace(engine.settings.sampling(), **params.generation.sampling_overrides())
    sampling.validate()
    return sampling


def run_generation(engine: Engine, params: CompleteParams | ChatParams, cancelled: Callable[[], bool],
                   partial: Callable[[str], None], prompt: Prompt | None = None) -> Outcome:
    """Generates for ``params`` (from ``prompt`` when the caller built it already), calling ``partial`` with each
    newly final piece of text when the request streams."""
    if prompt is None:
        prompt = build_prompt(engine, params)
    if isinstance(params, CompleteParams):
        stopper = Stopper(params.stop_at, params.prefix[params.prefix.rfind("\n") + 1:])
    else:
        stopper = Stopper(params.stop_at, params.opening)
    gen = params.generation
    events = engine.generate(prompt, max_tokens=gen.max_tokens, stop=gen.stop,
                             sampling=request_sampling(engine, params),
                             cancelled=lambda: cancelled() or stopper.done)
    for event in events:
        if isinstance(event, TextChunk):
            text = stopper.feed(event.text)
            if text and gen.stream:
                partial(text)
        elif isinstance(event, Finished):
            reason = event.reason.value
            if stopper.done:
                reason = FinishReason.STOP.value  # the option ended at its line or block, not by a cancel
            return Outcome(stopper.text, reason, event.stats, event.tokens)
    raise RuntimeError("the generator ended without a Finished event")
