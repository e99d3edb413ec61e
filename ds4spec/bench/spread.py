"""How far a workload's speedup could move with other answers: a bootstrap over its answers.

A row's speedup is its tokens over its seconds against plain's, over a handful of answers; on the machines measured
here single answers move by 5 to 20% from minute to minute with the same target passes, and one disturbed answer
moves a row of five by several percent (run 77: one prose answer at 0.63 of plain's in one of its two runs). The
interval says how much of a row's distance from 1.0 (or from a peer) the answers themselves support: the answers are
drawn again with replacement, each drawing's speedup computed as the row's is, and the middle ``LEVEL`` of them kept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0  # the same answers give the same interval, run after run


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer's tokens and seconds, plain's and the mode's, of the same prompt in the same run."""

    plain_tokens: int
    plain_seconds: float
    tokens: int
    seconds: float


def speedup(answers: Sequence[Answer]) -> float | None:
    """The mode's tokens a second over plain's, over ``answers``; None where either took no time."""
    plain_seconds = sum(a.plain_seconds for a in answers)
    seconds = sum(a.seconds for a in answers)
    plain_tokens = sum(a.plain_tokens for a in answers)
    if plain_seconds <= 0 or seconds <= 0 or plain_tokens <= 0:
        return None
    return (sum(a.tokens for a in answers) / seconds) / (plain_tokens / plain_seconds)


def speedup_interval(answers: Sequence[Answer], level: float = LEVEL, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float] | None:
    """The middle ``level`` of the speedups of ``resamples`` drawings of as many answers with replacement; None with
    fewer than two answers (one answer's run says nothing of the spread)."""
    if len(answers) < 2:
        return None
    rng = random.Random(seed)
    drawn = sorted(s for _ in range(resamples)
                   if (s := speedup([answers[rng.randrange(len(answers))] for _ in answers])) is not None)
    if not drawn:
        return None
    cut = int((1 - level) / 2 * len(drawn))
    return drawn[cut], drawn[len(drawn) - 1 - cut]


def format_interval(interval: object, missing: str = "") -> str:
    """``low-high`` to two places, as the tables print a range; ``missing`` where there is none."""
    if not isinstance(interval, list | tuple) or len(interval) != 2:
        return missing
    return f"{interval[0]:.2f}-{interval[1]:.2f}"
