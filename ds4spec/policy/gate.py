"""How far to draft: measured cycle costs and acceptance, turned into the draft length with the best rate.

A verify pass over several tokens costs more than one plain step on a CPU (measured on this project's
2-core machines with Qwen2.5-Coder-1.5B Q4_K_M: spans of 2, 4, 8, 16 and 64 tokens cost 1.8, 3.4, 7.5, 8.8
and 26.5 plain steps; ``ds4spec.policy.profile``), and a model drafter costs time too, so a draft pays only
when enough of it is accepted.

The gate measures the wall time of whole cycles for each draft length k (drafting, aligning, verifying,
rolling back and bookkeeping: everything a cycle costs), and ``alpha``, the probability that a drafted
token is accepted given the ones before it were. A draft of k tokens then yields ``E(k) = 1 + alpha + ...
+ alpha^k`` committed tokens per cycle (the accepted ones plus the target's own), so the expected rate is
``E(k) / cycle_cost(k)``; k = 0 is a plain step, ``E(0) = 1``. A draft's first token is kept less often than its
later ones (it follows the target's own token, which the drafter did not foresee), so the gate learns the first
token's figure apart (``DraftAcceptance``) and ``E(k) = 1 + first * (1 + alpha + ... + alpha^(k-1))``. The policy
measures a plain step first, then a draft of one token. With the machine's measured verify profile it then knows
every length's cost and drafts the best one; without, it climbs to the next longer length only while the longest
one tried is the best. It stops drafting where no length beats a plain step, and probes again now and then (with
back-off) so that it notices when the drafter becomes useful.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import DraftContext
from ds4spec.policy.acceptance import Acceptance, DraftAcceptance, expected_tokens
from ds4spec.policy.confidence import ConfidenceCalibration, takes_next
from ds4spec.policy.cycle_costs import OPTIMISTIC_ALPHA, CycleCosts, best_length, candidate_lengths
from ds4spec.policy.probing import ProbeBackoff
from ds4spec.policy.reading import ModelReading, UnreadText

# A new prompt may be another kind of text: what earlier generations taught of acceptance weighs this many drafts
# at most. Measured: after the edit workload (alpha 0.97), the gate with lookup spent 17 drafts of 7 tokens, none
# accepted, on the first prose answer (0.49x); triggers, after HumanEval, left lookup out of the edits' code lines.
CARRIED_TRIALS = 6.0


class FixedLength(DraftPolicy):
    """Always the same length (benchmark sweeps, ``bench --fixed``)."""

    def __init__(self, draft_max: int) -> None:
        self.draft_max = draft_max

    def draft_length(self) -> int:
        return self.draft_max


class GatedPolicy(DraftPolicy):
    """The length with the best expected rate, 0 where drafting does not pay (module docstring).

    Where a model may be asked (``model_misses``, unless the gate asks lookup alone), it waits its turn and reads what
    it has not seen before it drafts (``ds4spec.policy.reading``): its cycles are measured without those reads, and
    each length is charged what it must read, the prompt's first read by the share of the answer the draft writes. A
    hybrid drafter (``lookup_alone``) is asked for lookup alone where the model's read makes its draft not pay: a lookup
    miss costs nothing, and a match is often a copy of the prompt. Charged nothing of its reads but the prompt's, the
    default pair's SmolLM2 (2-core AVX-512, where the cost check let it draft) read each HumanEval prompt for 0.35 to
    1.1 s (10 to 30 plain steps) to draft a token or two an answer: the gate ran at 0.83x to 0.90x of plain on code
    and 0.84x on edits, and with the hybrid drafter at 0.91x and 1.12x (lookup alone: about 1.8x on edits)."""

    def __init__(self, draft_max: int, costs: CycleCosts | None = None, acceptance: Acceptance | None = None,
                 source: str = "any", *, model_misses: bool = False,
                 confidence: ConfidenceCalibration | None = None, lookup_alone: bool = False,
                 model_acceptance: Acceptance | None = None, reading: ModelReading | None = None,
                 model_token_seconds: float = 0.0) -> None:
        self.draft_max = draft_max
        self.asks = source  # a hybrid drafter whose model cannot pay here is asked for lookup only
        self.source = source  # this cycle's: lookup alone where the model's read does not pay (``lookup_alone``)
        # Whether a draft that came back empty was the work of a model (caught up, ran, offered nothing usable): a
        # cycle that cost that work. A lookup miss costs nothing, and such a cycle is a plain step.
        self.model_misses = model_misses
        self.charges_reading = model_misses and source != "lookup"
        self.lookup_alone = lookup_alone and self.charges_reading
        self.costs = costs or CycleCosts()
        self.acceptance: Acceptance = acceptance or DraftAcceptance()
        # A hybrid's drafts are learned apart by source (``acceptance`` then lookup's): its copies are kept far more
        # often than the model's guesses, and a figure learned from both priced the model's drafts at lookup's.
        self.model_acceptance: Acceptance = (model_acceptance or DraftAcceptance()) if self.lookup_alone \
            else self.acceptance
        self.confidence = confidence or ConfidenceCalibration()  # where a model's draft stops
        self.candidates = candidate_lengths(draft_max)
        self.reading = reading or ModelReading()
        self.unread = UnreadText(self.reading)
        self.model_token_seconds = model_token_seconds  # a model's drafted token, measured at load (0: not measured)
        self._read = 0.0  # seconds the drafter spent reading before this cycle's draft
        self._probing = ProbeBackoff()

    def begin(self, context: DraftContext) -> None:
        self._carry_over()
        self.costs.new_generation()
        if self.charges_reading:  # what a model has read matters only where one is asked
            self.reading.new_generation()
            self.unread.begin(context)

    def _carry_over(self) -> None:
        """Keeps what earlier generations taught of acceptance, lightly held (``CARRIED_TRIALS``)."""
        self.acceptance.carry_over(CARRIED_TRIALS)
        if self.model_acceptance is not self.acceptance:
            self.model_acceptance.carry_over(CARRIED_TRIALS)

    def extend(self, committed: bytes) -> None:
        if self.charges_reading:
            self.unread.extend(committed)

    def observe_reading(self, seconds: float) -> None:
        self._read = seconds

    def expected_rate(self, k: int, extra: Callable[[float], float] | None = None,
                      figure: Acceptance | None = None) -> float:
        figure = figure or self.acceptance
        tokens = expected_tokens(figure.alpha, k, figure.first)
        return tokens / (self.costs.cost(k) + (extra(tokens) if extra and k else 0.0))

    def draft_length(self) -> int:
        self.source = self.asks
        if self.charges_reading:
            self.unread.asked()
        if not self.costs.measured(0):
            return 0  # the first cycle measures a plain step: the yardstick for everything else
        if self.costs.plain_is_stale():
            return 0
        measured = [k for k in self.candidates if self.costs.measured(k)]
        if not measured:
            return self._first_try()
        if self.lookup_alone:
            best = self._hybrid(measured)
        else:
            best = self._best(measured, self.acceptance, self.unread.charge if self.charges_reading else None)
        if best > 0:
            self._probing.reset()
            # Climb: while the longest length tried is the best, try the next longer one (once).
            longer = [k for k in self.candidates if k > best and not self.costs.measured(k)]
            if best == measured[-1] and longer and not self.costs.profile.measured:
                return longer[0]
            return best
        k = self.candidates[0]  # some length was measured, so there are candidates
        return k if self._probing.due(self._probe_waste(k)) else 0

    def _best(self, measured: list[int], figure: Acceptance, extra: Callable[[float], float] | None) -> int:
        """The length with the best expected rate at acceptance ``figure``, each charged ``extra`` (the model's read),
        if it beats a plain step; else 0."""
        if self.costs.profile.measured:  # every length's cost is known well enough: no need to climb
            k, rate = best_length(self.costs, figure.alpha, self.costs.ranked_lengths(self.draft_max), extra,
                                  figure.first)
            return k if rate > self.expected_rate(0) else 0
        return max([0, *measured], key=lambda k: (self.expected_rate(k, extra, figure), -k))

    def _hybrid(self, measured: list[int]) -> int:
        """A hybrid drafter's length and source: lookup, then the model where lookup has no match (``any``), where the
        model's draft pays with its read charged; else lookup alone, whose miss is a plain step."""
        by_lookup = self._best(measured, self.acceptance, None)
        by_model = self._best(measured, self.model_acceptance, self.unread.charge)
        self.source = "any" if by_model else "lookup"
        return max(by_lookup, by_model)

    def _first_try(self) -> int:
        """The first draft, before any length was measured: the shortest, unless the model must first read more than
        a draft could win back even at the acceptance the cost check gives the benefit of (``_model_could_pay``);
        then lookup alone where there is lookup, else none."""
        k = self.candidates[0] if self.candidates else 0
        if not k or not self.charges_reading or self._model_could_pay():
            return k
        if self.lookup_alone:
            self.source = "lookup"
            return k
        return 0

    def _model_could_pay(self) -> bool:
        """Whether some length could beat a plain step at ``OPTIMISTIC_ALPHA``, charged its verify pass (measured or
        the profile's), its drafted tokens at the cost measured at load, and its read (``UnreadText.charge``)."""
        floor = 1.0 / self.costs.cost(0)
        for k in self.costs.ranked_lengths(self.draft_max):
            tokens = expected_tokens(OPTIMISTIC_ALPHA, k)
            cycle = self.costs.cost(k) + (0.0 if self.costs.measured(k) else k * self.model_token_seconds)
            if tokens / (cycle + self.unread.charge(tokens)) > floor:
                return True
        return False

    def _probe_waste(self, k: int) -> float:
        """The plain steps a rejected probe of ``k`` tokens loses: none for lookup, whose probe without a match is a
        plain step and with one is often a copy that pays; a model's probe always costs its cycle, and all it must
        read first."""
        if not self.model_misses or self.source == "lookup":
            return 0.0
        return self.costs.steps_lost(k) + self.unread.cost() / self.costs.cost(0)

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float,
                source: str = "") -> None:
        read, self._read = self._read, 0.0
        if self.charges_reading:
            self.reading.wrote(accepted + 1)
        # A cycle costs what its verify pass over the drafted tokens costs (a draft may come shorter than asked).
        # One whose model drafter offered nothing won nothing: it is a rejected draft, priced as one (a whole cycle
        # of the length asked). Its time measures no cycle: counted as a plain step it would make the yardstick
        # dearer and drafting look cheap (measured: a drafter whose catch-ups took 20 ms was asked 13 times in 96
        # tokens of a target stepping in 0.1 ms), and as a cycle of the length asked it made long drafts look
        # cheap (the triggers, run 67: 15 tokens at 1.43 plain steps, against 4.19 for the pass over them alone).
        missed = not drafted and requested and self.model_misses and self.source != "lookup"
        if self.charges_reading and (missed or (drafted and source == "model")):
            cycle_seconds -= read  # charged apart, by what it read
            self.unread.read(read)
        if missed:
            self.model_acceptance.observe(1, 0)
            return
        self.costs.observe(drafted, cycle_seconds, drafted * self.model_token_seconds)
        if drafted:
            (self.model_acceptance if source == "model" else self.acceptance).observe(drafted, accepted)

    def takes_next(self, confidences: Sequence[float], aligned: int, wanted: int) -> bool:
        figure = self.model_acceptance  # asked of a model's drafts only
        alpha = figure.alpha
        ranked = tuple(self.costs.ranked_lengths(self.draft_max))
        rate = max(self.costs.best(alpha, ranked, figure.first)[1], self.expected_rate(0))
        return takes_next(self.confidence, self.costs, confidences, aligned, wanted, alpha, rate)

    def observe_confidences(self, confidences: Sequence[float], held: int, verified: int) -> None:
        self.confidence.observe(confidences, held, verified)

    def plain_step_seconds(self) -> float | None:
        return self.costs.plain_step()
