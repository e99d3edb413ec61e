"""A model drafter's acceptance at one syntax event, drawn toward its acceptance at every event.

The triggers learn the model's acceptance per event, because it differs by event (a code line's next tokens are
easier to guess than a comment's words). But an event seen once or twice has almost no evidence of its own, and a
fixed prior of one half let one rejected draft end the model's turn there: measured on unseen HumanEval prompts with
the F32 pair (run 59, one ``ds4spec complete`` a prompt), the first comment line of an answer rejected the model's
first draft, its figure fell to 0.33, lookup's few matches (a fifth of them right) took the event over, and the
triggers ran at 1.50x against 1.72x for SmolLM2 alone, whose one figure rose with every other line it guessed. So an
event's figure starts from what the model gets at the other events of its kind, weighted as a few drafts, and follows
it while the event's own drafts are few; they move it away from there as they come. That holds while the event's
evidence is all of the current answer (``PooledAcceptance``). The kinds are words (comments, docstrings, prose) and
code, each with its pool (``ds4spec.policy.triggers.WORDS_EVENTS``): one pool for both let an answer's opening comment,
whose words the model guessed wrong, price it out of the code lines after it (run 79). A draft's first token and its
later ones are kept at different rates, and each has such a figure (``SplitAcceptance``).
"""

from __future__ import annotations

from collections.abc import Callable

from ds4spec.policy.acceptance import AcceptanceModel, DraftAcceptance

# The other events' figure weighs as this many trials in an event's: the weight the fixed prior had, so that an
# event's own drafts move it as fast as before.
POOL_WEIGHT = 2.0


class AcceptancePool:
    """The model's drafts at every event: a prior (one half unless given, two trials, as any acceptance's) and the
    sum of the events' own evidence, each decayed as its event learns."""

    def __init__(self, prior: float = 0.5) -> None:
        self._prior = AcceptanceModel(prior).evidence
        self._accepted = 0.0
        self._trials = 0.0

    @property
    def trials(self) -> float:
        """The events' own evidence, in trials (decayed): 0 before the model drafted anywhere."""
        return self._trials

    def add(self, accepted: float, trials: float) -> None:
        self._accepted += accepted
        self._trials += trials

    def alpha_without(self, accepted: float, trials: float) -> float:
        """The figure of every event but one, whose evidence is given: an event's own drafts are not counted twice
        (counted in its prior too, one rejected first draft took a new event's figure from 0.5 to 0.22)."""
        prior_accepted, prior_trials = self._prior
        return (prior_accepted + self._accepted - accepted) / max(prior_trials + self._trials - trials, 1e-9)


class PooledAcceptance:
    """An event's acceptance (``alpha``): its own drafts, and the other events' figure standing in for the drafts it
    has not seen, while all its evidence is of this generation. An event that brings evidence from earlier answers
    goes by that evidence alone, from the fixed prior, as before pooling: with policies learning across HumanEval's
    five bench prompts (F32 pair, run 59), pooling such events too asked the model at more places (drafts accepted
    53% against 71%) and ran at 1.35x and 1.58x against 1.39x and 1.71x in two runs, within runs' spread but no gain;
    the fresh policies' gain is what was measured."""

    def __init__(self, pool: AcceptancePool, weight: float = POOL_WEIGHT) -> None:
        self.pool = pool
        self.weight = weight
        self.own = AcceptanceModel(prior=0.0, weight=0.0)  # the event's drafts alone (its alpha is never read)
        self.alone = AcceptanceModel()  # the same drafts from the fixed prior, once evidence is carried over
        self.carried = False

    def observe(self, drafted: int, accepted: int) -> None:
        self._changing(lambda: self.own.observe(drafted, accepted))
        self.alone.observe(drafted, accepted)

    def carry_over(self, weight: float) -> None:
        """Lets the event's evidence weigh at most ``weight`` trials; once it holds any, the event goes by it."""
        self.carried = self.carried or self.own.evidence[1] > 0
        self._changing(lambda: self.own.carry_over(weight))
        self.alone.carry_over(weight)

    def retire(self) -> None:
        """The event is forgotten (its rule changed): its evidence leaves the pool."""
        accepted, trials = self.own.evidence
        self.pool.add(-accepted, -trials)
        self.own = AcceptanceModel(prior=0.0, weight=0.0)

    @property
    def alpha(self) -> float:
        if self.carried:
            return self.alone.alpha
        accepted, trials = self.own.evidence
        others = self.pool.alpha_without(accepted, trials)
        return min((accepted + others * self.weight) / (trials + self.weight), 0.999)

    def _changing(self, change: Callable[[], None]) -> None:
        before = self.own.evidence
        change()
        after = self.own.evidence
        self.pool.add(after[0] - before[0], after[1] - before[1])


class SplitAcceptance(DraftAcceptance):
    """A model's acceptance at one event as two figures, each pooled as above: of a draft's first token (``first``),
    and of each later token once the ones before it were kept (``alpha``). The first token follows the target's own,
    which the drafter did not foresee; the later ones continue a run it is on. Measured on unseen HumanEval prompts
    (F32 pair, SmolLM2, one fresh policy each): 0.60 to 0.73 of first tokens kept, 0.80 to 0.87 of later ones. With
    one figure for both, learned mostly from one-token drafts, an event whose first tokens were kept half the time was
    priced as if a second token would be too, and drafted one token a cycle for a whole 128-token answer (80 target
    passes against SmolLM2 alone's 54, which drafted two). The later tokens' pool starts from
    ``ds4spec.policy.acceptance.LATER_TOKENS_PRIOR``."""

    def __init__(self, first: AcceptancePool, later: AcceptancePool) -> None:
        self.pooled = (PooledAcceptance(first), PooledAcceptance(later))
        super().__init__(*self.pooled)

    def retire(self) -> None:
        for figure in self.pooled:
            figure.retire()
