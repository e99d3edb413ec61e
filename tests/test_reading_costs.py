"""A model drafter's reads of text it has not seen, fitted as a fixed part plus a part per byte."""

from __future__ import annotations

import pytest

from ds4spec.policy.reading import (
    ANSWER_PRIOR,
    ANSWER_WEIGHT,
    GAIN_DECAY,
    GAIN_PRIOR_TOKENS,
    ModelReading,
    ReadGains,
    ReadingCosts,
    shared_prefix,
)


def test_nothing_read_yet_costs_nothing() -> None:
    assert ReadingCosts().cost(5000) == 0.0


def test_reads_of_several_sizes_give_the_fixed_part_and_the_part_per_byte() -> None:
    reading = ReadingCosts()
    for nbytes in (8, 20, 400, 12, 1800, 30, 250):
        reading.observe(nbytes, 0.009 + 0.0006 * nbytes)  # one forward pass, and the text it reads
    fixed, per_byte = reading.fit()
    assert fixed == pytest.approx(0.009) and per_byte == pytest.approx(0.0006)
    assert reading.cost(1000) == pytest.approx(0.609)


def test_reads_of_one_size_give_a_cost_in_proportion_to_the_bytes() -> None:
    reading = ReadingCosts()
    reading.observe(100, 0.05)
    assert reading.fit() == (0.0, pytest.approx(0.0005))
    empty = ReadingCosts()
    empty.observe(0, 0.01)
    assert empty.fit() == (pytest.approx(0.01), 0.0)


def test_recent_reads_weigh_most() -> None:
    reading = ReadingCosts()
    for _ in range(20):
        reading.observe(100, 0.10)
    for _ in range(20):
        reading.observe(100, 0.02)  # the machine got faster
    assert reading.cost(100) < 0.03


def test_a_read_far_above_the_fit_counts_as_a_stall_unless_the_next_one_is_dear_too() -> None:
    """One read stalled 100 ms (the drafter catching up with a few bytes in a tenth of a millisecond) must not price
    every later read: the policy would stop asking the drafter for the rest of the answer. Two in a row are a
    drafter that got dear (a longer text, a busier machine): the second is learned whole."""
    reading = ReadingCosts()
    for _ in range(3):
        reading.observe(10, 0.0001)
    reading.observe(10, 0.1)  # stalled
    assert reading.cost(10) < 0.0003
    reading.observe(10, 0.0001)
    assert reading.cost(10) < 0.0003
    reading.observe(10, 0.1)
    reading.observe(10, 0.1)  # dear twice: learned
    assert reading.cost(10) > 0.01  # a hundred times the cheap reads


@pytest.mark.parametrize(("a", "b", "shared"), [
    (b"", b"abc", 0), (b"abc", b"abc", 3), (b"abcdef", b"abcxyz", 3), (b"abc", b"abcdef", 3), (b"xbc", b"abc", 0),
])
def test_shared_prefix_is_the_longest_common_start(a: bytes, b: bytes, shared: int) -> None:
    assert shared_prefix(a, b) == shared == shared_prefix(b, a)


def _answer(gains: ReadGains, family: str | None, cycles: list[tuple[int, float]]) -> None:
    """One answer whose model read the prompt at the first cycle (where ``family`` names its text) and whose cycles
    wrote (tokens, plain steps won)."""
    if family is not None:
        gains.read_prompt(family)
    for tokens, won in cycles:
        gains.wrote(tokens, won)
    gains.new_generation()


def test_what_a_model_won_a_token_after_reading_a_prompt_is_measured_per_family_of_text() -> None:
    gains = ReadGains()
    assert gains.per_token("python", 0.3) == pytest.approx(0.3)  # nothing measured: the policy's estimate
    _answer(gains, "python", [(3, 1.5)] + [(1, 0.0)] * 22)  # one model cycle in a 25-token answer
    measured = 1.5 / 25
    assert gains.per_token("python", 0.3) == pytest.approx(
        (1.5 + 0.3 * GAIN_PRIOR_TOKENS * GAIN_DECAY) / (25 + GAIN_PRIOR_TOKENS * GAIN_DECAY))
    for _ in range(10):
        _answer(gains, "python", [(3, 1.5)] + [(1, 0.0)] * 22)
    assert gains.per_token("python", 0.3) == pytest.approx(measured, abs=0.005)  # the estimate faded
    assert gains.per_token("markdown", 0.3) == pytest.approx(0.3)  # prose's is its own


def test_an_answer_whose_model_never_read_its_prompt_teaches_nothing() -> None:
    gains = ReadGains()
    _answer(gains, None, [(1, 0.0)] * 40)
    assert gains.per_token("python", 0.25) == pytest.approx(0.25)


def test_recent_answers_weigh_most_in_what_reads_won() -> None:
    gains = ReadGains()
    for _ in range(10):
        _answer(gains, "python", [(4, 3.0)] * 10)  # 0.75 a token
    for _ in range(10):
        _answer(gains, "python", [(4, -1.0)] * 10)  # the drafts now lose
    assert gains.per_token("python", 0.75) < 0


def test_one_answer_s_length_moves_the_length_expected_of_the_next_from_the_prior_a_little() -> None:
    """HumanEval's answers run from 7 tokens to past 128: taken as the next one's length, one long answer had the
    next bet a read of its prompt that a short answer could not win back."""
    reading = ModelReading()
    assert reading.tokens_left() == ANSWER_PRIOR  # nothing known: the prior
    reading.wrote(128)
    reading.new_generation()
    assert reading.answer_tokens == pytest.approx(ANSWER_PRIOR + ANSWER_WEIGHT * (128 - ANSWER_PRIOR))
    for _ in range(20):
        reading.wrote(20)
        reading.new_generation()
    assert reading.tokens_left() == pytest.approx(20, abs=0.1)  # answers that keep their length teach it
