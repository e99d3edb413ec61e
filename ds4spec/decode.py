"""Plain decoding: the target alone, one token per forward pass. The baseline everything is measured against.

It yields the same event stream as speculative decoding will, so every face works with both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

from ds4spec.events import Event, Finished, FinishReason, Provenance, TextChunk
from ds4spec.sampling import Sampler, SamplingSettings
from ds4spec.stats import GenerationStats
from ds4spec.target import LlamaTarget
from ds4spec.textstream import TextAssembler


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    prompt_tokens: Sequence[int]
    max_tokens: int = 256
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    stop: Sequence[str] = ()


def prepare_context(target: LlamaTarget, prompt: Sequence[int]) -> list[int]:
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


def generate_plain(
    target: LlamaTarget, request: GenerationRequest, *, cancelled: Callable[[], bool] = lambda: False
) -> Iterator[Event]:
    """Yields committed text as it is generated, then one ``Finished``.

    Ctrl-C while llama.cpp computes ends the generation with ``CANCELLED`` and the statistics so far; text
    held back as a possible stop-string prefix is then dropped, as it was never shown.
    """
    sampler = Sampler(request.sampling)
    stats = GenerationStats(prompt_tokens=len(request.prompt_tokens), seed=sampler.seed)
    text = TextAssembler(request.stop)
    clock = _Clock()
    committed: list[int] = []
    try:
        reason = yield from _decode_loop(target, request, sampler, text, stats, committed, cancelled, clock)
    except KeyboardInterrupt:
        reason = FinishReason.CANCELLED
    if reason is not FinishReason.CANCELLED:
        tail = text.finish()
        if tail.text:
            yield TextChunk(tail.text, Provenance.TARGET)
    stats.prompt_seconds, stats.generation_seconds = clock.split()
    yield Finished(reason, stats, tuple(committed))


class _Clock:
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


def _decode_loop(
    target: LlamaTarget,
    request: GenerationRequest,
    sampler: Sampler,
    text: TextAssembler,
    stats: GenerationStats,
    committed: list[int],
    cancelled: Callable[[], bool],
    clock: _Clock,
) -> Generator[Event, None, FinishReason]:
    logits = target.eval_prompt(prepare_context(target, request.prompt_tokens))
    clock.mark_prompt_done()
    while True:
        if stats.committed_tokens >= request.max_tokens:
            return FinishReason.LENGTH
        if cancelled():
            return FinishReason.CANCELLED
        token = sampler.choose(logits, target.recent_tokens(request.sampling.repeat_last_n))
        if target.tokenizer.is_eog(token):
            return FinishReason.EOG
        stats.committed_tokens += 1
        committed.append(token)
        released = text.feed(target.tokenizer.piece(token))
        if released.text:
            yield TextChunk(released.text, Provenance.TARGET)
        if released.stopped:
            return FinishReason.STOP
        if stats.committed_tokens >= request.max_tokens:
            return FinishReason.LENGTH
        if target.n_past >= target.n_ctx:
            return FinishReason.CONTEXT
        logits = target.eval_span([token])[0]
        stats.target_forward_passes += 1
