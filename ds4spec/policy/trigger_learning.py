"""What the triggers learn (``ds4spec.policy.triggers``), kept by an engine across generations: whole cycles' costs
per drafter source and length, and per syntax event the sources' acceptance and when to probe them again.

An event's model figure is drawn toward the model's figure at the other events of its kind (``POOL_KINDS``: words or
code; ``ds4spec.policy.pooling``); lookup's acceptance is one for every event (``LookupAcceptance``), with per event
how often lookup has a match at all.
"""

from __future__ import annotations

from ds4spec.policy.acceptance import LATER_TOKENS_PRIOR, AcceptanceModel
from ds4spec.policy.confidence import ConfidenceCalibration
from ds4spec.policy.copying import LookupAcceptance
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import CARRIED_TRIALS
from ds4spec.policy.pooling import AcceptancePool, SplitAcceptance
from ds4spec.policy.probing import ProbeBackoff
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.reading import ModelReading
from ds4spec.policy.rules import Rule

SOURCES = ("lookup", "model")
POOL_KINDS = ("words", "code")  # the kinds of event whose model drafts are pooled (``TriggerLearning.pools``)


class SourceCosts:
    """Whole-cycle seconds per draft length for each drafter source; a plain step is the same for all."""

    def __init__(self, profile: VerifyProfile | None = None) -> None:
        self.tables = {source: CycleCosts(profile) for source in SOURCES}

    def plain_step(self) -> float | None:
        return self.tables[SOURCES[0]].plain_step()

    def plain_is_stale(self) -> bool:
        return any(table.plain_is_stale() for table in self.tables.values())

    def new_generation(self) -> None:
        for table in self.tables.values():
            table.new_generation()

    def observe_plain(self, seconds: float) -> None:
        for table in self.tables.values():
            table.observe(0, seconds)

    def observe(self, source: str, k: int, seconds: float, drafting: float = 0.0) -> None:
        """A cycle of ``source`` drafting ``k`` tokens took ``seconds`` (``CycleCosts.observe``)."""
        self.tables[source].observe(k, seconds, drafting)
        for name, table in self.tables.items():
            table.generation_started()
            if k and name != source:
                table.aftermath_begins()  # the plain steps after it are no measure of a plain step here either


class EventModel:
    """What is known of one event: acceptance per source, and when to probe again while it does not pay."""

    def __init__(self, rule: Rule, kind: str, first: AcceptancePool, later: AcceptancePool) -> None:
        self.rule = rule
        self.kind = kind  # words or code: the events whose drafts this one's figure is drawn toward
        # The model's drafts here, first tokens and later ones apart (each drawn toward the others' while all new).
        self.acceptance = SplitAcceptance(first, later)
        self.matches = AcceptanceModel()  # how often lookup, asked here, had a draft at all
        self.attempts = dict.fromkeys(SOURCES, 0)  # cycles that asked each source for a draft
        self.probing = ProbeBackoff()

    def new_generation(self) -> None:
        """Keeps what was learned, lightly held (``CARRIED_TRIALS``), and watches the event closely again."""
        self.acceptance.carry_over(CARRIED_TRIALS)
        self.matches.carry_over(CARRIED_TRIALS)
        self.probing.reset()


class TriggerLearning:
    """Costs and per-event models, kept by an engine across generations (reset when its drafter changes)."""

    def __init__(self, profile: VerifyProfile | None = None, reading: ModelReading | None = None) -> None:
        self.costs = SourceCosts(profile)  # the model's cycles without its reads
        self.reading = reading or ModelReading()  # the model's reads of text it had not seen, and what it holds
        self.events: dict[str, EventModel] = {}
        # The model's drafts at every event of a kind, words or code (``ds4spec.policy.pooling``): their first tokens,
        # and the later ones. One pool for both, an answer's first comment line, whose words the model guessed wrong
        # three times, priced it out of the code lines after it, which went by in plain steps (run 79: HumanEval/19 in
        # 126 target passes, against 60 in the runs whose model drafted there).
        self.pools = {kind: (AcceptancePool(), AcceptancePool(LATER_TOKENS_PRIOR)) for kind in POOL_KINDS}
        self.lookup = LookupAcceptance()  # lookup's drafts, at every event
        self.lookup_drafts = 0  # in this generation
        # When to probe lookup alone again where its figure says no: one clock an answer, as its figure is one for
        # every event (a clock per event probed it at each event in turn: on code, five events, five times as often).
        self.lookup_probing = ProbeBackoff()
        self.model_token_seconds = 0.0  # a model's drafted token, as measured at load (0: not measured)
        self.confidence = ConfidenceCalibration()  # where the model's drafts stop

    def new_generation(self) -> None:
        self.reading.new_generation()
        self.costs.new_generation()
        self.lookup.carry_over()
        self.lookup_drafts = 0
        self.lookup_probing.reset()
        for model in self.events.values():
            model.new_generation()

    def model(self, key: str, rule: Rule, kind: str) -> EventModel:
        """The event ``key``'s model, drawn toward the model's drafts at the events of its ``kind`` (``POOL_KINDS``)."""
        if key not in self.events or self.events[key].rule != rule:
            if key in self.events:
                self.events[key].acceptance.retire()
            self.events[key] = EventModel(rule, kind, *self.pools[kind])
        return self.events[key]
