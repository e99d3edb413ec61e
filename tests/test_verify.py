"""The verifier's verdicts: the chunked argmax for a greedy sampler gives the row-by-row rule's verdict."""

from __future__ import annotations

import numpy as np
import pytest

from ds4spec.core.sampling import Sampler, SamplingSettings
from ds4spec.core.verify import GREEDY_CHUNK, Verdict, verify_draft, verify_greedy


def _rows(rng: np.random.Generator, n: int, vocab: int = 50) -> np.ndarray:
    """Logits with many exact ties (small integers), where the lowest tied id must win as in ``np.argmax``."""
    return rng.integers(0, 6, size=(n, vocab)).astype(np.float32)


def _row_by_row(rows: np.ndarray, draft: list[int]) -> Verdict:
    greedy = Sampler(SamplingSettings())
    return verify_draft(rows, draft, lambda row, i: greedy.choose(row))


@pytest.mark.parametrize("length", [0, 1, GREEDY_CHUNK - 2, GREEDY_CHUNK - 1, GREEDY_CHUNK, GREEDY_CHUNK + 1,
                                    2 * GREEDY_CHUNK - 1, 2 * GREEDY_CHUNK, 40])
def test_a_chunked_greedy_verdict_equals_the_row_by_row_one_at_every_rejection_point(length: int) -> None:
    rng = np.random.default_rng(length)
    for trial in range(60):
        rows = _rows(rng, length + 1)
        own = rows.argmax(axis=1).tolist()
        # Agree with the target for a random prefix, then disagree (or agree to the end: the bonus row).
        agree = int(rng.integers(0, length + 1))
        draft = own[:agree] + [(t + 1) % rows.shape[1] for t in own[agree:length]]
        assert verify_greedy(rows, draft) == _row_by_row(rows, draft), (trial, agree)


def test_a_chunked_greedy_verdict_refuses_rows_that_do_not_match_the_draft() -> None:
    with pytest.raises(ValueError, match="3 rows of logits for a draft of 1 tokens"):
        verify_greedy(np.zeros((3, 4), dtype=np.float32), [1])


@pytest.mark.parametrize(("settings", "argmax_only"), [
    (SamplingSettings(), True),
    (SamplingSettings(repeat_penalty=1.3, repeat_last_n=0), True),
    (SamplingSettings(repeat_penalty=1.3), False),
    (SamplingSettings(temperature=0.7), False),
])
def test_only_a_greedy_sampler_without_a_repeat_penalty_is_a_rows_argmax(
        settings: SamplingSettings, argmax_only: bool) -> None:
    assert Sampler(settings).argmax_only is argmax_only
