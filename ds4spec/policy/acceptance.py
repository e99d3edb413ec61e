"""What a policy learns of a drafter's acceptance: per token, given the ones before it were kept, and a draft's first
token apart (``DraftAcceptance``); and what a draft of k tokens is then expected to commit (``expected_tokens``)."""

from __future__ import annotations

from typing import Protocol

# A draft's later tokens are kept this often (once the ones before were) until drafts show otherwise: SmolLM2's on
# unseen HumanEval prompts with the F32 pair, 0.80 to 0.87, where its first tokens were kept 0.60 to 0.73
# (``DraftAcceptance``, ``ds4spec.policy.pooling.SplitAcceptance``). One-token drafts show nothing of it; from one
# half, as a first token's figure starts, an answer whose first tokens were kept about half the time drafted one token
# a cycle until a longer draft at a newline taught otherwise, 60 cycles in.
LATER_TOKENS_PRIOR = 0.8


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

    @property
    def first(self) -> float | None:
        """None: one figure for every token of a draft (``DraftAcceptance`` learns the first token's apart)."""
        return None

    @property
    def evidence(self) -> tuple[float, float]:
        """Accepted tokens and trials (decayed), the prior's included."""
        return self._accepted, self._trials

    def carry_over(self, weight: float) -> None:
        """Keeps alpha but lets it weigh at most ``weight`` trials, so that new evidence moves it quickly."""
        if self._trials > weight:
            scale = weight / self._trials
            self._accepted *= scale
            self._trials = weight


class Acceptance(Protocol):
    """What the gate learns of a drafter's acceptance: ``alpha`` per token given the ones before it were kept, and
    ``first``, the first token's, where it is learned apart (None: kept as often as the others)."""

    @property
    def alpha(self) -> float: ...

    @property
    def first(self) -> float | None: ...

    def observe(self, drafted: int, accepted: int) -> None: ...

    def carry_over(self, weight: float) -> None: ...


class TokenFigure(Protocol):
    """One acceptance figure: ``AcceptanceModel``, or one drawn toward other events' (``ds4spec.policy.pooling``)."""

    @property
    def alpha(self) -> float: ...

    def observe(self, drafted: int, accepted: int) -> None: ...

    def carry_over(self, weight: float) -> None: ...


class DraftAcceptance:
    """A drafter's acceptance as two figures: of a draft's first token (``first``), and of each later token once the
    ones before it were kept (``alpha``). The first token follows the target's own, which the drafter did not foresee;
    the later ones continue a run it is on. With one figure, learned mostly from drafts the confidence stop cut to one
    token, the gate priced a second token as if it were kept as rarely as a first one and drafted short: measured on
    unseen HumanEval prompts (F32 pair, SmolLM2 alone, one fresh policy each, same runs), 1.61x, 1.77x, 1.67x and
    1.79x with one figure against 1.82x, 1.88x, 1.75x and 1.90x with two. Each figure is an ``AcceptanceModel`` unless
    given (the triggers' are pooled across events: ``ds4spec.policy.pooling.SplitAcceptance``)."""

    def __init__(self, first_tokens: TokenFigure | None = None, later_tokens: TokenFigure | None = None) -> None:
        self.first_tokens = first_tokens or AcceptanceModel()
        self.later_tokens = later_tokens or AcceptanceModel(LATER_TOKENS_PRIOR)

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self.first_tokens.observe(1, min(accepted, 1))
        if accepted and drafted > 1:
            self.later_tokens.observe(drafted - 1, accepted - 1)

    def carry_over(self, weight: float) -> None:
        self.first_tokens.carry_over(weight)
        self.later_tokens.carry_over(weight)

    @property
    def first(self) -> float:
        return self.first_tokens.alpha

    @property
    def alpha(self) -> float:
        """The later tokens' figure, never below the first's: kept one-token drafts teach it nothing, and from a few
        unlucky longer ones it would otherwise hold the drafts at one token for good."""
        return max(self.later_tokens.alpha, self.first)


def expected_tokens(alpha: float, k: int, first: float | None = None) -> float:
    """Committed tokens per cycle for a draft of k tokens: accepted ones plus the target's own. Each token is kept
    with probability ``alpha`` once the ones before it were, the first with ``first`` where that is given apart."""
    if first is None:
        return float(k + 1) if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return 1.0 + first * (float(k) if alpha >= 1 else (1 - alpha ** k) / (1 - alpha))
