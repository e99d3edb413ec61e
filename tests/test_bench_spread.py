"""The bench's 95% range: how far a row's speedup could move with other answers (a bootstrap over its answers)."""

from __future__ import annotations

import pytest

from ds4spec.bench.peer_runs import SystemRuns
from ds4spec.bench.peers import LLAMA_PLAIN, PeerResult
from ds4spec.bench.spread import Answer, format_interval, speedup, speedup_interval
from ds4spec.bench.systems import DS4SPEC_PLAIN, print_systems, system_rows


def answer(plain_seconds: float, seconds: float, tokens: int = 100) -> Answer:
    return Answer(tokens, plain_seconds, tokens, seconds)


def test_answers_that_all_ran_at_one_speed_give_a_range_of_that_speed_alone() -> None:
    answers = [answer(2.0, 2.5), answer(1.0, 1.25), answer(4.0, 5.0)]
    assert speedup(answers) == pytest.approx(0.8)
    low, high = speedup_interval(answers) or (0.0, 0.0)
    assert low == pytest.approx(0.8) and high == pytest.approx(0.8)


def test_one_disturbed_answer_of_ten_widens_the_range_below_and_the_row_stays_inside_it() -> None:
    """Nine answers level with plain's and one at 0.63 of it (a disturbed minute): the row reads below 1.0, and the
    range says the answers would as well support a row level with plain."""
    answers = [answer(1.0, 1.0) for _ in range(9)] + [answer(1.0, 1.0 / 0.63)]
    row = speedup(answers) or 0.0
    low, high = speedup_interval(answers) or (0.0, 0.0)
    assert low < row < 0.97 < high
    assert high == pytest.approx(1.0)


def test_the_same_answers_give_the_same_range_and_one_answer_gives_none() -> None:
    answers = [answer(1.0, s) for s in (0.9, 1.1, 1.0, 0.95, 1.2)]
    assert speedup_interval(answers) == speedup_interval(list(answers))
    assert speedup_interval(answers[:1]) is None
    assert speedup_interval([]) is None


def test_answers_of_different_lengths_weigh_by_their_time_as_the_row_does() -> None:
    """A row is its tokens over its seconds, so a long answer weighs more than a short one; a drawing of only the
    long answer gives its speed, of only the short one its own: the range spans the two."""
    long, short = Answer(128, 4.0, 128, 4.0), Answer(8, 0.25, 8, 0.5)
    low, high = speedup_interval([long, short]) or (0.0, 0.0)
    assert low == pytest.approx(0.5) and high == pytest.approx(1.0)
    assert low < (speedup([long, short]) or 0.0) < high


def test_the_systems_table_gives_each_speedup_over_llama_cpp_plain_its_range_over_the_prompts_both_ran(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A system "ahead" of llama.cpp plain by less than its answers' spread is shown as such: its range spans 1.0."""
    llama = SystemRuns(LLAMA_PLAIN, "llama.cpp", LLAMA_PLAIN)
    mine = SystemRuns("ds4spec triggers", "ds4spec", DS4SPEC_PLAIN)
    for i, (theirs, ours) in enumerate([(1.0, 0.95), (1.0, 1.05), (2.0, 2.02), (1.0, 0.99)]):
        key = ("humaneval", f"HumanEval/{i}")
        llama.results[key] = PeerResult((1,) * 32, theirs, 32, "stop")
        mine.results[key] = PeerResult((1,) * 32, ours, 32, "stop")
    rows = {r["system"]: r for r in system_rows([llama, mine], ["humaneval"])}
    low, high = rows["ds4spec triggers"]["speedup_vs_llama_plain_interval"]
    assert low < 1.0 < high and low <= rows["ds4spec triggers"]["speedup_vs_llama_plain"] <= high
    assert rows[LLAMA_PLAIN]["speedup_vs_llama_plain_interval"] is None
    print_systems(list(rows.values()))
    assert f"{low:.2f}-{high:.2f}" in capsys.readouterr().out


def test_a_range_prints_as_low_dash_high_and_a_missing_one_as_asked() -> None:
    assert format_interval([0.9412, 1.0251]) == "0.94-1.03"
    assert format_interval(None) == "" and format_interval(None, "-") == "-"
