"""The target backend's contract that speculative verification stands on: span, rollback, snapshot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ds4spec.backend.target import ContextFullError, LlamaTarget
from ds4spec.backend.target_options import TargetOptions

PROMPT = b"def add(a, b):\n    return a + b\n\n\ndef main():\n"
SPAN = b"    print(add(2, 3))\n"


def _options(**kw: object) -> TargetOptions:
    return TargetOptions(n_ctx=256, n_gpu_layers=0, **kw)  # type: ignore[arg-type]


def _fresh_span_logits(path: Path, prompt: list[int], span: list[int]) -> np.ndarray:
    with LlamaTarget(path, _options()) as fresh:
        fresh.eval_prompt(prompt)
        return fresh.eval_span(span)


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_eval_span_returns_one_row_of_logits_per_position(tiny_models: dict[str, Path], kind: str) -> None:
    with LlamaTarget(tiny_models[kind], _options()) as target:
        tokens = target.tokenizer.tokenize(PROMPT, add_special=True)
        logits = target.eval_span(tokens)
        assert logits.shape == (len(tokens), target.n_vocab)
        assert np.isfinite(logits).all()
        assert target.n_past == len(tokens)
        assert target.tokens == tokens


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_a_span_viewed_in_place_holds_the_rows_a_copied_span_holds(tiny_models: dict[str, Path], kind: str) -> None:
    """What verification reads without copying is the same pass's logits, row for row, in llama.cpp's own buffer."""
    with LlamaTarget(tiny_models[kind], _options()) as target:
        prompt = target.tokenizer.tokenize(PROMPT, add_special=True)
        span = target.tokenizer.tokenize(SPAN)
        target.eval_prompt(prompt)
        copied = target.eval_span(span)
        target.rollback(len(prompt))
        viewed = target.eval_span_view(span)
        assert viewed.shape == copied.shape and target.tokens == prompt + span
        np.testing.assert_array_equal(viewed, copied)
        assert not viewed.flags.owndata and viewed.flags.writeable  # no copy; an argmax copies a read-only array
        target.rollback(len(prompt))
        with pytest.raises(ValueError, match="at least one token"):
            target.eval_span_view([])


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_span_rows_match_token_by_token_evaluation(tiny_models: dict[str, Path], kind: str) -> None:
    """Row i of a span predicts the token after span[i], exactly as single-token steps do (up to kernels)."""
    with LlamaTarget(tiny_models[kind], _options()) as target:
        prompt = target.tokenizer.tokenize(PROMPT, add_special=True)
        span = target.tokenizer.tokenize(SPAN)
        target.eval_prompt(prompt)
        batched = target.eval_span(span)
        target.rollback(len(prompt))
        stepped = np.stack([target.eval_span([t])[0] for t in span])
    # Batched and single-token kernels differ in the last bits (field notes, section 3), never by more.
    np.testing.assert_allclose(batched, stepped, atol=1e-2, rtol=0)
    top2 = np.sort(stepped, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2e-2  # positions that are not near-ties
    assert (batched.argmax(axis=1) == stepped.argmax(axis=1))[clear].all()


@pytest.mark.parametrize("kind", ["bpe", "spm"])
@pytest.mark.parametrize("snapshots", [False, True], ids=["seq_rm", "snapshot"])
def test_rollback_then_reevaluation_equals_fresh_evaluation(
    tiny_models: dict[str, Path], kind: str, snapshots: bool
) -> None:
    path = tiny_models[kind]
    with LlamaTarget(path, _options(force_snapshots=snapshots)) as target:
        prompt = target.tokenizer.tokenize(PROMPT, add_special=True)
        span = target.tokenizer.tokenize(SPAN)
        wrong = target.tokenizer.tokenize(b"    raise SystemExit(1)\n")
        target.eval_prompt(prompt)
        target.checkpoint()
        target.eval_span(wrong)  # a rejected draft
        target.rollback(len(prompt))
        assert target.tokens == prompt
        again = target.eval_span(span)
    np.testing.assert_array_equal(again, _fresh_span_logits(path, prompt, span))


@pytest.mark.parametrize("snapshots", [False, True], ids=["seq_rm", "snapshot"])
def test_rollback_to_a_position_inside_the_prompt(tiny_bpe_gguf: Path, snapshots: bool) -> None:
    """Rolling back to any earlier position works, also one before the last checkpoint (replay from 0)."""
    with LlamaTarget(tiny_bpe_gguf, _options(force_snapshots=snapshots)) as target:
        prompt = target.tokenizer.tokenize(PROMPT)
        span = target.tokenizer.tokenize(SPAN)
        target.eval_prompt(prompt)
        target.checkpoint()
        target.eval_span(span)
        cut = len(prompt) // 2
        target.rollback(cut)
        assert target.n_past == cut
        again = target.eval_span(prompt[cut:])
    with LlamaTarget(tiny_bpe_gguf, _options()) as fresh:
        fresh.eval_prompt(prompt[:cut])
        expected = fresh.eval_span(prompt[cut:])
    np.testing.assert_array_equal(again, expected)


def test_rollback_refuses_positions_outside_the_context(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, _options()) as target:
        target.eval_prompt([1, 2, 3])
        with pytest.raises(ValueError):
            target.rollback(4)
        with pytest.raises(ValueError):
            target.rollback(-1)


def test_eval_beyond_the_context_is_refused_and_changes_nothing(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=32, n_gpu_layers=0, n_batch=32)) as target:
        # llama.cpp may round the context up; what counts is the size it reports.
        filled = [10 + i % 200 for i in range(target.n_ctx - 2)]
        target.eval_prompt(filled)
        with pytest.raises(ContextFullError):
            target.eval_span([5, 6, 7])
        assert target.n_past == len(filled)


def test_span_longer_than_a_batch_is_refused(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=128, n_gpu_layers=0, n_batch=8)) as target:
        with pytest.raises(ValueError, match="at most 8"):
            target.eval_span(list(range(10, 19)))
        logits = target.eval_prompt(list(range(10, 30)))  # prompts are fed in chunks of n_batch
        assert logits.shape == (target.n_vocab,)
        assert target.n_past == 20


def test_exposes_tokenizer_metadata_and_chat_template(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, _options()) as target:
        tok = target.tokenizer
        assert target.architecture == "llama"
        assert target.chat_template and "<|im_start|>" in target.chat_template
        im_end = tok.tokenize(b"<|im_end|>", parse_special=True)
        assert len(im_end) == 1 and tok.is_eog(im_end[0])
        assert len(tok.tokenize(b"<|im_end|>", parse_special=False)) > 1
        assert tok.eos in tok.eog_tokens() and im_end[0] in tok.eog_tokens()
        fim = tok.fim_tokens()
        assert fim is not None
        assert tok.detokenize([fim.prefix], special=True) == b"<|fim_prefix|>"
        text = "naïve → 日本語 🙂\n\tx = 1".encode()
        assert tok.detokenize(tok.tokenize(text)) == text


def test_model_without_fim_tokens_reports_none(tmp_path: Path) -> None:
    from tinymodel import build_tiny_gguf

    path = build_tiny_gguf(tmp_path / "nofim.gguf", fim=False)
    with LlamaTarget(path, _options()) as target:
        assert target.tokenizer.fim_tokens() is None
