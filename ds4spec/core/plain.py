"""Plain decoding: the target alone, one token per forward pass. The baseline everything is measured against.

It yields the same event stream as speculative decoding, and both commit tokens through ``OutputStream``,
so both end at exactly the same place (end of generation, stop string, token budget).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ds4spec.core.contracts import Target, Tokenizer
from ds4spec.core.events import Event, Finished, FinishReason, Provenance, TextChunk
from ds4spec.core.sampling import Sampler, SamplingSettings
from ds4spec.core.stats import GenerationStats
from ds4spec.core.textstream import TextAssembler


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    prompt_tokens: Sequence[int]
    max_tokens: int = 256
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    stop: Sequence[str] = ()


def prepare_context(target: Target, prompt: Sequence[int]) -> list[int]:
    """Rolls the context back to the longest prefix it shares with ``prompt``; returns the tokens to feed.

    A context that already starts with part of the prompt (a chat's previous turns) keeps that part.
    """
    target.resync()
    held = target.tokens
    common = 0
    for a, b in zip(held, prompt, strict=False):
        if a != b:
            break
        common += 1
    common = min(common, len(prompt) - 1)  # always evaluate at least the last token to get its logits
    target.rollback(common)
    return list(prompt[common:])


class OutputStream:
    """Commits tokens one at a time and says when generation must end, as plain decoding defines it."""

    def __init__(self, tokenizer: Tokenizer, request: GenerationRequest, stats: GenerationStats) -> None:
        self._tok = tokenizer
        self._max = request.max_tokens
        self._text = TextAssembler(request.stop)
        self.stats = stats
        self.tokens: list[int] = []

    def ends_at(self, token: int) -> bool:
        """Whether committing ``token`` surely ends the answer (a stop string aside)."""
        return self._tok.is_eog(token) or len(self.tokens) + 1 >= self._max

    def commit(self, token: int, provenance: Provenance) -> tuple[TextChunk | None, FinishReason | None]:
        """Commits ``token``; returns the text it releases and the finish reason if generation ends here."""
        if self._tok.is_eog(token):
            return None, FinishReason.EOG
        self.tokens.append(token)
        self.stats.committed_tokens += 1
        released = self._text.feed(self._tok.piece(token))
        chunk = TextChunk(released.text, provenance) if released.text else None
        if released.stopped:
            return chunk, FinishReason.STOP
        if len(self.tokens) >= self._max:
            return chunk, FinishReason.LENGTH
        return chunk, None

    def finish(self, reason: FinishReason, clock: Clock) -> Iterator[Event]:
        """The held-back tail (unless cancelled: it was never shown) and the one ``Finished`` event."""
        if reason is not FinishReason.CANCELLED:
            tail = self._text.finish()
            if tail.text:
                yield TextChunk(tail.text, Provenance.TARGET)
        self.stats.prompt_seconds, self.stats.generation_seconds = clock.split()
        yield Finished(reason, self.stats, tuple(self.tokens))


class Clock:
    """Prompt time and generation time, split at the moment the prompt's logits are in."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.prompt_done: float | None = None

    def mark_prompt_done(self) -> None:
        self.prompt_done = time.perf_counter()

    def split(self) -> tuple[float, float]:
        now = time.perf_counter()
        if self.prompt_done is None:
            return now - self.start, 0.0
        return self.prompt_done - self.start, now - self.prompt_done


class Generation:
    """What one generation holds, plain or speculative: its sampler, statistics, output and clock."""

    def __init__(self, target: Target, request: GenerationRequest) -> None:
        self.request = request
        self.sampler = Sampler(request.sampling)
        self.stats = GenerationStats(prompt_tokens=len(request.prompt_tokens), seed=self.sampler.seed)
        self.out = OutputStream(target.tokenizer, request, self.stats)
        self.clock = Clock()

    def read_prompt(self, target: Target, cancelled: Callable[[], bool]) -> np.ndarray | None:
        """Reads what the context does not hold yet of the prompt; the logits after it, or None when cancelled."""
        logits = target.read_prompt(prepare_context(target, self.request.prompt_tokens), cancelled)
        if logits is not None:
            self.clock.mark_prompt_done()
        return logits


def generate_plain(
    target: Target, request: GenerationRequest, *, cancelled: Callable[[], bool] = lambda: False
) -> Iterator[Event]:
    """Yields committed text as it is generated, then one ``Finished``.

    Ctrl-C while llama.cpp computes ends the generation with ``CANCELLED`` and the statistics so far; text
    held back as a possible stop-string prefix is then dropped, as it was never shown.
    """
    generation = Generation(target, request)
    try:
        reason = yield from _decode_loop(target, generation, cancelled)
    except KeyboardInterrupt:
        reason = FinishReason.CANCELLED
    yield from generation.out.finish(reason, generation.clock)


def _decode_loop(target: Target, generation: Generation, cancelled: Callable[[], bool]
                 ) -> Generator[Event, None, FinishReason]:
    request, sampler, out = generation.request, generation.sampler, generation.out
    logits = generation.read_prompt(target, cancelled)
    if logits is None:
        return FinishReason.CANCELLED
    while True:
        if cancelled():
            return FinishReason.CANCELLED
        token = sampler.choose(logits, target.recent_tokens(request.sampling.repeat_last_n))
        # On a GPU the next pass runs while this token is committed and shown (``Target.launches_ahead``).
        ahead = launch_ahead(target, out, token)
        chunk, reason = out.commit(token, Provenance.TARGET)
        if chunk:
            yield chunk
        if reason:
            if ahead:
                take_back(target)
            return reason
        if target.n_past >= target.n_ctx:
            return FinishReason.CONTEXT
        logits = (target.span_rows() if ahead else target.eval_span_view([token]))[0]  # chosen from before the next
        out.stats.target_forward_passes += 1


def launch_ahead(target: Target, out: OutputStream, token: int) -> bool:
    """Starts the plain step after ``token`` before it is committed, where the target may and the token cannot end
    the answer by itself (an end-of-generation token, the budget, the context); a stop string it may complete is
    ``take_back``'s."""
    if target.launches_ahead == "never" or out.ends_at(token) or target.n_past + 1 >= target.n_ctx:
        return False
    target.launch([token])
    return True


def take_back(target: Target) -> None:
    """Forgets a step launched ahead for a token that ended the answer: the context holds what was committed."""
    target.rollback(target.n_past - 1)
