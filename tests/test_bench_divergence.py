"""The bench's check of an answer that differs from plain's: the first token that differs, and whether the target
nearly tied there (kernels for other batch sizes round differently) or did not (a defect)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.bench.divergence import NEAR_TIE_LOGITS, Divergence, first_divergence
from ds4spec.core.plain import GenerationRequest, generate_plain

AT = 5  # where the answers below part


@pytest.fixture(scope="module")
def target(tiny_bpe_gguf: Path) -> Iterator[LlamaTarget]:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=256, n_gpu_layers=0)) as t:
        yield t


@pytest.fixture(scope="module")
def prompt(target: LlamaTarget) -> list[int]:
    return target.tokenizer.tokenize(b"def total(xs):\n    return")


@pytest.fixture(scope="module")
def plain(target: LlamaTarget, prompt: list[int]) -> tuple[int, ...]:
    target.reset()
    finished = list(generate_plain(target, GenerationRequest(prompt, 12)))[-1]
    tokens = finished.tokens  # type: ignore[union-attr]
    assert len(tokens) == 12
    return tokens


def _logits_at(target: LlamaTarget, context: list[int]) -> np.ndarray:
    target.reset()
    return target.eval_prompt(context).copy()


def test_the_same_answer_has_no_divergence(target: LlamaTarget, prompt: list[int], plain: tuple[int, ...]) -> None:
    assert first_divergence(target, prompt, plain, plain) is None


def test_the_gap_is_the_target_s_between_the_two_tokens_after_plain_s_common_text(
    target: LlamaTarget, prompt: list[int], plain: tuple[int, ...]
) -> None:
    logits = _logits_at(target, [*prompt, *plain[:AT]])
    runner_up = int(np.argsort(logits)[-2])
    other = (*plain[:AT], runner_up, *plain[AT + 1 :])
    divergence = first_divergence(target, prompt, plain, other)
    assert divergence is not None and divergence.at == AT
    assert divergence.gap == pytest.approx(abs(float(logits[plain[AT]]) - float(logits[runner_up])), abs=1e-4)


def test_a_token_the_target_did_not_nearly_choose_is_no_near_tie(
    target: LlamaTarget, prompt: list[int], plain: tuple[int, ...]
) -> None:
    logits = _logits_at(target, [*prompt, *plain[:AT]])
    unlikely = int(np.argmin(logits))
    assert float(logits[plain[AT]] - logits[unlikely]) > NEAR_TIE_LOGITS
    divergence = first_divergence(target, prompt, plain, (*plain[:AT], unlikely))
    assert divergence is not None and not divergence.near_tie and divergence.as_dict()["near_tie"] is False


def test_a_flip_within_the_margin_is_a_near_tie() -> None:
    assert Divergence(3, NEAR_TIE_LOGITS / 2).near_tie and not Divergence(3, 2 * NEAR_TIE_LOGITS).near_tie


def test_an_answer_that_stops_early_differs_at_its_end_and_is_no_near_tie(
    target: LlamaTarget, prompt: list[int], plain: tuple[int, ...]
) -> None:
    divergence = first_divergence(target, prompt, plain, plain[:AT])
    assert divergence is not None and divergence.at == AT and math.isinf(divergence.gap)
    assert divergence.as_dict() == {"at": AT, "gap": None, "near_tie": False}
