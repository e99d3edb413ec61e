"""What the policies know about one drafter on one target, kept across generations, and each generation's policy.

An engine holds one per drafter (a new drafter starts afresh), and so does each of ``ds4spec bench``'s modes:
the bench measures the policy users get. It starts from the target's verify profile and the drafter's
measured source costs (``ds4spec.policy.costs``): a source that could not pay here is never asked, and with no
source left every cycle is a plain step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ds4spec.core.contracts import DraftPolicy, Proposer
from ds4spec.core.early_launch import EarlyLaunch
from ds4spec.policy.acceptance import DraftAcceptance
from ds4spec.policy.confidence import ConfidenceCalibration
from ds4spec.policy.copying import LookupAcceptance, LookupGate
from ds4spec.policy.costs import SourceCost, cached_source_costs, source_costs
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import FixedLength, GatedPolicy
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.reading import ModelReading
from ds4spec.policy.rules import RuleBook
from ds4spec.policy.trigger_learning import TriggerLearning
from ds4spec.policy.triggers import TriggerPolicy


@dataclass(slots=True)
class PolicyMemory:
    profile: VerifyProfile
    drafter_sources: tuple[str, ...]  # what the drafter offers
    costs: tuple[SourceCost, ...] = ()  # measured per source; a source not listed may be asked
    learning: TriggerLearning = field(init=False)  # what triggers learned: per event, per source
    gate_costs: CycleCosts = field(init=False)  # what the gate learned
    gate_acceptance: DraftAcceptance = field(default_factory=DraftAcceptance)
    gate_lookup: LookupAcceptance = field(default_factory=LookupAcceptance)  # the gate's, for lookup alone
    gate_confidence: ConfidenceCalibration = field(default_factory=ConfidenceCalibration)  # where its drafts stop
    early_launch: EarlyLaunch = field(default_factory=EarlyLaunch)  # the loop's, for every policy made here
    reading: ModelReading = field(default_factory=ModelReading)  # the model's reads, whichever policy asks it

    def __post_init__(self) -> None:
        self.learning = TriggerLearning(self.profile, self.reading)
        self.gate_costs = CycleCosts(self.profile)
        for c in self.costs:  # the read measured at load: the fit's first point, until reads in use replace it
            if c.source == "model" and c.read_seconds is not None:
                self.reading.costs.observe(c.read_bytes, c.read_seconds)
            if c.source == "model" and c.seconds_per_token is not None:
                self.learning.model_token_seconds = c.seconds_per_token

    @classmethod
    def measure(cls, drafter: Proposer, profile: VerifyProfile, draft_max: int, *,
                check: bool = True, cache_key: str | None = None) -> PolicyMemory:
        """A fresh memory for ``drafter``, its sources' costs measured now (a fraction of a second for a small
        model; the target must be idle), or within the hour for ``cache_key`` (``cached_source_costs``); with
        ``check`` off, nothing is measured and every source may be asked."""
        if not check:
            costs: tuple[SourceCost, ...] = ()
        elif cache_key is None:
            costs = tuple(source_costs(drafter, profile, draft_max))
        else:
            costs = tuple(cached_source_costs(drafter, profile, draft_max, cache_key))
        return cls(profile, drafter.sources, costs)

    @property
    def sources(self) -> tuple[str, ...]:
        """The drafter's sources worth asking."""
        unaffordable = {c.source for c in self.costs if not c.affordable}
        return tuple(s for s in self.drafter_sources if s not in unaffordable)

    def policy(self, rules: RuleBook | None, language: str | None, draft_max: int) -> DraftPolicy:
        """Triggers for ``language`` with ``rules``, else the gate; both learn across generations."""
        policy = self._policy(rules, language, draft_max)
        policy.early_launch = self.early_launch
        return policy

    def _policy(self, rules: RuleBook | None, language: str | None, draft_max: int) -> DraftPolicy:
        sources = self.sources
        if not sources:
            return FixedLength(0)
        if rules is not None:
            return TriggerPolicy(rules, language, draft_max, sources, self.learning)
        source = "any" if sources == self.drafter_sources else sources[0]
        if sources == ("lookup",):
            return LookupGate(draft_max, self.gate_costs, self.gate_lookup, source)
        if source == "any" and "lookup" in sources:  # a hybrid: each source's drafts learned apart
            return LookupGate(draft_max, self.gate_costs, self.gate_lookup, source,
                              model_acceptance=self.gate_acceptance, confidence=self.gate_confidence,
                              reading=self.reading, model_token_seconds=self.learning.model_token_seconds)
        return GatedPolicy(draft_max, self.gate_costs, self.gate_acceptance, source=source,
                           model_misses="model" in sources, confidence=self.gate_confidence, reading=self.reading,
                           model_token_seconds=self.learning.model_token_seconds)
