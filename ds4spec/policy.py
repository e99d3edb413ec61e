"""How far to draft: measured costs and acceptance turned into the draft length with the best expected rate.

A verify pass over L tokens costs more than one plain step on a CPU (field notes, section 4: 5 tokens cost
1.7 steps), so a draft pays only when enough of it is accepted. The gate estimates, from what it has
measured in this generation:

- ``verify_cost(L)``: seconds of one target forward pass over L tokens (L = 1 is a plain step);
- ``draft_cost(k)``: seconds the drafter and the aligner spend proposing k target tokens;
- ``alpha``: the probability that a drafted token is accepted, given the ones before it were.

With acceptance alpha, a draft of k tokens yields ``E(k) = 1 + alpha + ... + alpha^k`` committed tokens per
cycle (the accepted ones plus the target's own), so the expected rate is ``E(k) / (draft_cost(k) +
verify_cost(k + 1))``. The policy drafts the k in 0..draft_max that maximises it; k = 0 is plain decoding.
When it has stopped drafting it still probes now and then (with back-off), so that it notices when the
drafter becomes useful again, at a bounded cost.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

# Field notes, section 4: each extra token of a verify pass costs about a quarter of a plain step on a CPU.
PRIOR_EXTRA_TOKEN_COST = 0.25
EMA = 0.2  # weight of a new measurement


def _ema(old: float | None, new: float) -> float:
    return new if old is None else (1 - EMA) * old + EMA * new


class CostModel:
    def __init__(self) -> None:
        self._verify: dict[int, float] = {}
        self._draft_per_token: float | None = None

    def observe_verify(self, span: int, seconds: float) -> None:
        self._verify[span] = _ema(self._verify.get(span), seconds)

    def observe_draft(self, requested: int, seconds: float) -> None:
        if requested > 0:
            self._draft_per_token = _ema(self._draft_per_token, seconds / requested)

    @property
    def measured(self) -> bool:
        return bool(self._verify)

    def verify_cost(self, span: int) -> float:
        if span in self._verify:
            return self._verify[span]
        if not self._verify:
            return 1.0 + PRIOR_EXTRA_TOKEN_COST * (span - 1)  # in units of a plain step, until measured
        lengths = sorted(self._verify)
        below = [n for n in lengths if n < span]
        above = [n for n in lengths if n > span]
        if below and above:  # interpolate between the nearest measured lengths
            a, b = below[-1], above[0]
            ca, cb = self._verify[a], self._verify[b]
            return ca + (cb - ca) * (span - a) / (b - a)
        nearest = below[-1] if below else above[0]
        base = self._verify[nearest]
        step = self._verify.get(1, base / (1 + PRIOR_EXTRA_TOKEN_COST * (nearest - 1)))
        return max(base + PRIOR_EXTRA_TOKEN_COST * step * (span - nearest), step)

    def plain_step_cost(self) -> float:
        return self.verify_cost(1)

    def draft_cost(self, k: int) -> float:
        return 0.0 if k == 0 or self._draft_per_token is None else self._draft_per_token * k


class AcceptanceModel:
    """alpha, the per-token acceptance probability, with a weak prior and a slow decay toward recent data."""

    DECAY = 0.97

    def __init__(self, prior: float = 0.5, weight: float = 2.0) -> None:
        self._accepted = prior * weight
        self._trials = weight

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        self._accepted = self._accepted * self.DECAY + accepted
        # Each accepted token was a success; a rejection ends the run and counts as one failure.
        self._trials = self._trials * self.DECAY + accepted + (1 if accepted < drafted else 0)

    @property
    def alpha(self) -> float:
        return min(self._accepted / self._trials, 0.999)


def expected_tokens(alpha: float, k: int) -> float:
    """Committed tokens per cycle for a draft of k tokens: accepted ones plus the target's own."""
    return float(k + 1) if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


class DraftPolicy(ABC):
    """Decides the draft length of each cycle and learns from its outcome."""

    draft_max: int

    @abstractmethod
    def draft_length(self) -> int:
        """Target tokens to draft this cycle; 0 means a plain step."""

    def observe(  # noqa: B027 - a fixed policy learns nothing
        self, requested: int, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float
    ) -> None:
        """The outcome of a cycle: ``requested`` tokens asked of the drafter, ``drafted`` of them aligned and
        verified, ``accepted`` kept."""


class FixedLength(DraftPolicy):
    """Always the same length (benchmark sweeps; ``--gate off``)."""

    def __init__(self, draft_max: int) -> None:
        self.draft_max = draft_max

    def draft_length(self) -> int:
        return self.draft_max


class GatedPolicy(DraftPolicy):
    """The length with the best expected rate, 0 where drafting does not pay (module docstring)."""

    PROBE_LENGTH = 2
    FIRST_PROBE_AFTER = 8
    MAX_PROBE_INTERVAL = 256

    def __init__(self, draft_max: int, costs: CostModel | None = None, acceptance: AcceptanceModel | None = None):
        self.draft_max = draft_max
        self.costs = costs or CostModel()
        self.acceptance = acceptance or AcceptanceModel()
        self._idle = 0
        self._probe_after = self.FIRST_PROBE_AFTER

    def expected_rate(self, k: int) -> float:
        cost = self.costs.draft_cost(k) + self.costs.verify_cost(k + 1)
        return expected_tokens(self.acceptance.alpha, k) / cost if cost > 0 else math.inf

    def best_length(self) -> int:
        rates = [self.expected_rate(k) for k in range(self.draft_max + 1)]
        best = max(range(len(rates)), key=lambda k: (rates[k], -k))
        return best if rates[best] > rates[0] else 0

    def draft_length(self) -> int:
        k = self.best_length()
        if k > 0:
            return k
        self._idle += 1
        if self.draft_max > 0 and self._idle >= self._probe_after:
            self._idle = 0
            self._probe_after = min(self._probe_after * 2, self.MAX_PROBE_INTERVAL)
            return min(self.PROBE_LENGTH, self.draft_max)
        return 0

    def observe(
        self, requested: int, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float
    ) -> None:
        self.costs.observe_verify(drafted + 1, verify_seconds)
        if requested:
            self.costs.observe_draft(requested, draft_seconds)
        if drafted:
            self.acceptance.observe(drafted, accepted)
            if accepted:
                self._probe_after = self.FIRST_PROBE_AFTER
