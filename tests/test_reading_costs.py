"""A model drafter's reads of text it has not seen, fitted as a fixed part plus a part per byte."""

from __future__ import annotations

import pytest

from ds4spec.policy.reading import ReadingCosts, shared_prefix


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


@pytest.mark.parametrize(("a", "b", "shared"), [
    (b"", b"abc", 0), (b"abc", b"abc", 3), (b"abcdef", b"abcxyz", 3), (b"abc", b"abcdef", 3), (b"xbc", b"abc", 0),
])
def test_shared_prefix_is_the_longest_common_start(a: bytes, b: bytes, shared: int) -> None:
    assert shared_prefix(a, b) == shared == shared_prefix(b, a)
