"""Where a model's draft stops: the drafter's own probability of each token says how likely the target keeps it.

A policy chooses a draft's length before the drafter writes a word, from one acceptance figure per event; the
drafter then knows more. Measured on twelve HumanEval prompts tuning never saw (F32 pair, SmolLM2 drafting 8 tokens
every cycle, 538 tokens), the share of its tokens the target kept, of those whose tokens before were kept, rose with
SmolLM2's probability of them: 0.26 under 0.3, 0.47 from 0.3 to 0.5, 0.68 from 0.5 to 0.7, 0.81 from 0.8 to 0.9, 0.94
from 0.95 on; about the probability itself. Drafts of as many tokens as the policy asked for lost most of theirs to
one unsure token (a 15-token draft whose first token was wrong cost 2.3 plain steps for one token). So a draft goes on
only while the tokens it is expected to keep by going on come faster than the policy expects its cycles to bring
tokens: per second of what going on adds to the cycle, as the policy measured cycles drafting that many to cost.
Compared with the rate of the cycle itself instead, a sure draft's rate set a bar its next tokens rarely cleared, and
fresh policies on unseen prompts drafted comments in pieces (0.47 tokens kept a pass against 0.64 without a stop).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

EDGES = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)  # bins of the drafter's probability
# A bin's acceptance before any is seen: SmolLM2's, the default drafter's, on those twelve prompts (0.65 from 0.7 to
# 0.8 made 0.72, between its neighbours). A fresh policy (one `ds4spec complete`) learns little in one answer, and each
# bin's middle would put the middle bins a tenth below what that drafter's tokens get; another drafter's are learned.
PRIOR = (0.26, 0.47, 0.68, 0.72, 0.81, 0.91, 0.94)
PRIOR_TOKENS = 4.0  # the prior counts as this many tokens
LOOKAHEAD = 64  # the most drafter tokens ahead a draft's going on is judged over
REMEMBERED = 200.0  # a bin's tokens past this weigh less and less: a long session's drafter may drift


class CycleCosts(Protocol):
    """Seconds a cycle drafting ``k`` tokens costs (``ds4spec.policy.cycle_costs.CycleCosts``)."""

    def cost(self, k: int) -> float: ...


class ConfidenceCalibration:
    """The share of a model drafter's tokens the target keeps, by the drafter's probability of them (given that
    the draft's tokens before were kept); kept by a policy's memory across generations."""

    def __init__(self) -> None:
        self._kept = [0.0] * len(PRIOR)
        self._seen = [0.0] * len(PRIOR)

    def acceptance(self, confidence: float) -> float:
        b = bisect_right(EDGES, confidence)
        return (PRIOR_TOKENS * PRIOR[b] + self._kept[b]) / (PRIOR_TOKENS + self._seen[b])

    def observe(self, confidences: Sequence[float], held: int, verified: int) -> None:
        """The first ``held`` tokens were kept; the next one, if it was verified, was not."""
        for i, confidence in enumerate(confidences[: min(verified, held + 1)]):
            b = bisect_right(EDGES, confidence)
            if self._seen[b] >= REMEMBERED:
                self._kept[b] *= REMEMBERED / (self._seen[b] + 1)
                self._seen[b] *= REMEMBERED / (self._seen[b] + 1)
            self._seen[b] += 1
            self._kept[b] += i < held


def takes_next(calibration: ConfidenceCalibration, costs: CycleCosts, confidences: Sequence[float], aligned: int,
               wanted: int, alpha: float, rate: float) -> bool:
    """Whether a draft whose drafter tokens so far had ``confidences`` (the next one's last), giving ``aligned`` of
    the ``wanted`` target tokens, should go on: whether the tokens going on is expected to keep (in target tokens,
    at the draft's own ratio so far) come at more than ``rate`` a second of what it adds to the cycle (``costs``),
    ``rate`` being what the policy expects of its cycles (a longer draft pays where its extra tokens come faster
    than the policy's tokens come anyway). Going on may stop after the next token or after any of the tokens it
    leaves room for, which are expected kept at ``alpha`` each (the policy's figure): judged by the next token alone,
    an unsure token between sure ones ended drafts that would have paid."""
    *taken, confidence = confidences
    if not taken or not aligned:  # stopping now would leave nothing to verify: the drafter's work so far lost
        return True
    kept = 1.0
    for c in taken:
        kept *= calibration.acceptance(c)
    per_token = aligned / len(taken)
    base = costs.cost(aligned)
    more, chance = 0.0, kept * calibration.acceptance(confidence)
    for j in range(1, min(LOOKAHEAD, max(1, math.ceil((wanted - aligned) / per_token))) + 1):
        more += chance
        chance *= alpha
        if per_token * more >= rate * (_cost_at(costs, aligned + per_token * j) - base):
            return True
    return False


def _cost_at(costs: CycleCosts, n: float) -> float:
    """A cycle's cost for a fractional count of drafted tokens, between the whole counts either side."""
    low = math.floor(n)
    share = n - low
    return costs.cost(low) if not share else (1 - share) * costs.cost(low) + share * costs.cost(low + 1)
