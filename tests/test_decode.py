"""Plain decoding on tiny real llama.cpp models: greedy, sampling, stop strings, limits, UTF-8 chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.events import Finished, FinishReason, Provenance, TextChunk
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings

PROMPTS = [b"def fibonacci(n):\n", b"import os\n\nfor name in ", b"# Notes\n\n- caf\xc3\xa9 \xe2\x86\x92 "]


def _target(path: Path) -> LlamaTarget:
    return LlamaTarget(path, TargetOptions(n_ctx=512, n_gpu_layers=0))


def _run(target: LlamaTarget, prompt: bytes, **kw: object) -> tuple[list[TextChunk], Finished]:
    tokens = target.tokenizer.tokenize(prompt, add_special=True)
    events = list(generate_plain(target, GenerationRequest(tokens, **kw)))  # type: ignore[arg-type]
    chunks = [e for e in events if isinstance(e, TextChunk)]
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert all(isinstance(e, TextChunk) for e in events[:-1])
    return chunks, finished


def _text(chunks: list[TextChunk]) -> str:
    return "".join(c.text for c in chunks)


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_greedy_output_is_deterministic_and_reuses_no_stale_state(tiny_models: dict[str, Path], kind: str) -> None:
    with _target(tiny_models[kind]) as target:
        outs = [_text(_run(target, p, max_tokens=40)[0]) for p in PROMPTS]
        again = [_text(_run(target, p, max_tokens=40)[0]) for p in PROMPTS]
    with _target(tiny_models[kind]) as fresh:
        fresh_outs = [_text(_run(fresh, p, max_tokens=40)[0]) for p in PROMPTS]
    assert outs == again == fresh_outs
    assert all(outs)


def test_greedy_output_is_the_argmax_chain(tiny_bpe_gguf: Path) -> None:
    with _target(tiny_bpe_gguf) as target:
        chunks, finished = _run(target, PROMPTS[0], max_tokens=12)
        tokens = target.tokens
        prompt = target.tokenizer.tokenize(PROMPTS[0], add_special=True)
        generated = tokens[len(prompt) :]
        target.rollback(len(prompt) - 1)
        logits = target.eval_span(tokens[len(prompt) - 1 :])
    # The last committed token is never fed back (nothing needs its logits), so the context holds 11 of 12.
    assert len(generated) == 11
    assert list(logits.argmax(axis=1)[:-1]) == generated
    assert finished.stats.committed_tokens == 12
    assert all(c.provenance is Provenance.TARGET for c in chunks)


def test_max_tokens_ends_generation_with_length(tiny_bpe_gguf: Path) -> None:
    with _target(tiny_bpe_gguf) as target:
        _, finished = _run(target, PROMPTS[0], max_tokens=7)
    assert finished.reason is FinishReason.LENGTH
    assert finished.stats.committed_tokens == 7
    assert finished.stats.target_forward_passes == 6


def _longest_output_prompt(target: LlamaTarget) -> tuple[bytes, str]:
    """A prompt for which this random-weight model writes a long greedy answer."""
    best = max([*PROMPTS, b"x = [", b"class Node:\n    ", b"for i in range("],
               key=lambda p: len(_text(_run(target, p, max_tokens=60)[0])))
    return best, _text(_run(target, best, max_tokens=60)[0])


def test_stop_string_ends_output_exactly_where_it_starts(tiny_bpe_gguf: Path) -> None:
    with _target(tiny_bpe_gguf) as target:
        prompt, full = _longest_output_prompt(target)
        assert len(full) > 20
        stop = full[10:14]
        chunks, finished = _run(target, prompt, max_tokens=60, stop=[stop])
    assert finished.reason is FinishReason.STOP
    assert _text(chunks) == full[: full.find(stop)]


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_end_of_generation_token_ends_generation_and_is_not_output(
    tiny_models: dict[str, Path], kind: str
) -> None:
    with _target(tiny_models[kind]) as target:
        outcomes = [_run(target, p, max_tokens=200) for p in PROMPTS]
        tok = target.tokenizer
        ended = [(c, f) for c, f in outcomes if f.reason is FinishReason.EOG]
        assert ended, "expected at least one prompt to end with an end-of-generation token"
        for chunks, finished in ended:
            assert not any(tok.is_eog(t) for t in finished.tokens)
            assert _text(chunks) == tok.detokenize(finished.tokens).decode("utf-8", errors="replace")


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_streamed_chunks_are_whole_characters_and_add_up_to_the_decoded_bytes(
    tiny_models: dict[str, Path], kind: str
) -> None:
    split_characters = 0
    with _target(tiny_models[kind]) as target:
        for prompt in PROMPTS:
            chunks, finished = _run(target, prompt, max_tokens=80)
            raw = target.tokenizer.detokenize(finished.tokens)
            # Decoding token by token would turn every split character into U+FFFD; the stream must not.
            assert _text(chunks) == raw.decode("utf-8", errors="replace")
            split_characters += sum(_splits_a_character(target.tokenizer.piece(t)) for t in finished.tokens)
    assert split_characters > 0, "the test must see tokens that end inside a character"


def _splits_a_character(piece: bytes) -> bool:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_seeded_sampling_is_reproducible_and_differs_across_seeds(tiny_bpe_gguf: Path) -> None:
    def sample(seed: int) -> str:
        settings = SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        with _target(tiny_bpe_gguf) as target:
            return _text(_run(target, PROMPTS[0], max_tokens=30, sampling=settings)[0])

    assert sample(7) == sample(7)
    assert len({sample(s) for s in range(5)}) > 1


def test_generation_stops_when_the_context_is_full(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=64, n_gpu_layers=0, n_batch=64)) as target:
        prompt = target.tokenizer.tokenize(PROMPTS[0])
        events = list(generate_plain(target, GenerationRequest(prompt, max_tokens=10_000)))
        finished = events[-1]
        assert isinstance(finished, Finished)
        assert finished.reason in (FinishReason.CONTEXT, FinishReason.EOG)
        if finished.reason is FinishReason.CONTEXT:
            assert target.n_past == target.n_ctx


def test_a_stop_asked_during_a_long_prompt_ends_it_within_one_chunk(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0, n_batch=16)) as target:
        prompt = target.tokenizer.tokenize(PROMPTS[0] * 12, add_special=True)
        assert len(prompt) > 3 * 16
        # Asked before each chunk and at each node of one (``tests/test_abortable_prompt.py``): yes once two are in.
        events = list(generate_plain(target, GenerationRequest(prompt, max_tokens=10),
                                     cancelled=lambda: target.n_past >= 2 * 16))
        assert len(events) == 1 and isinstance(events[0], Finished)
        assert events[0].reason is FinishReason.CANCELLED and events[0].stats.committed_tokens == 0
        assert target.n_past == 2 * 16  # the rest of the prompt was never read
