"""Triggers: the syntax event at the end of the text chooses the draft length and the drafter source.

Each cycle the tracker names the event (``python.newline``, ``markdown.prose``, ...). Its rule gives the prior: the
length to try first and which drafter to ask (lookup, model, or hybrid: lookup when it has a match, else the model).
Data then moves it: the policy keeps ``alpha`` (the chance a drafted token is accepted given the ones before were)
per event for the model (drawn toward its figure at the other events while the event's own drafts are few and all of
this answer: ``ds4spec.policy.pooling``), and for lookup once for all events, with per event how often lookup has a
match at all; and per source and length the measured wall time of whole cycles (shared by all events: a cycle's cost
does not depend on the syntax). Whether lookup's copy is right depends on whether the answer copies its input (an
edited file, a quoted passage), which holds across the syntax of one answer; learned per event, its acceptance was
split into small samples and its drafts stayed short (measured on the F16 pair's edits: 2.39x against 3.34x for
lookup alone, whose one gate learned from all its drafts). What does matter is whether the text is copying its
prompt at the moment: lookup's acceptance is learned apart there (``ds4spec.policy.copying``). A lookup miss costs
nothing, so where lookup and the model compete, lookup is worth its match rate times its rate when it matches, plus
a plain step's rate the rest of the time. It drafts the length with the best expected rate ``E(k) / cost(k)``
(``ds4spec.policy.cycle_costs``: the machine's verify profile gives every length's cost; without one it climbs one
length above the longest it measured while that one is the best), goes down to 0 where no length beats a plain step,
and probes again with back-off so that an event that starts to pay is noticed (per event; lookup alone, whose figure
is one for all events, on one clock an answer). Where lookup alone is asked and nothing it could draft pays at any
event, the event is not looked up at all (``NO_DRAFT_PAYS``). A model that waits its turn must first read the text
it has not seen (``ds4spec.policy.reading``): what lookup or the target wrote since it last drafted is charged to
the cycle that asks it (in prose, by share), the prompt's first read to the share of the answer that cycle is
expected to write; and while the prompt is unread no cycle asks it unless what its drafts won a token after earlier
answers' reads (``ReadGains``), over the answer's tokens left, pays for that read. Where a rule says not to draft
(prose), a model whose drafts pay even at the acceptance such text gets is tried there at once. What it learns lives
in ``TriggerLearning`` (``ds4spec.policy.trigger_learning``), which an engine keeps across generations: a chat's
tenth answer starts from what the first nine taught. A model's draft stops short of the length chosen where, by the
drafter's own probability of its next tokens, going on would not pay (``ds4spec.policy.confidence``). A model's
first drafted token and its later ones are kept at different rates, and learned apart (``SplitAcceptance``). Where
lookup's match outside a long copy is the best draft in code (not in its comments) and the model pays there too,
lookup's draft goes out only if the model's first bytes agree, the model's own otherwise (``CHECKED``,
``_model_checks_copy``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import CHECKED, DraftContext
from ds4spec.core.events import NO_DRAFT_PAYS, NOTHING_TO_DRAFT
from ds4spec.policy.acceptance import Acceptance, expected_tokens
from ds4spec.policy.confidence import takes_next
from ds4spec.policy.copying import CopyWatch
from ds4spec.policy.cycle_costs import OPTIMISTIC_ALPHA, best_length, candidate_lengths
from ds4spec.policy.probing import ProbeBackoff
from ds4spec.policy.reading import UnreadText
from ds4spec.policy.rules import Family, RuleBook
from ds4spec.policy.syntax import SyntaxTracker, code_event
from ds4spec.policy.trigger_learning import SOURCES, EventModel, TriggerLearning

# A lookup miss, in plain steps: the step, and the search and bookkeeping around it. Counted as a plain step alone, a
# lookup that almost never matches at an event would still win there by a hair over plain decoding (its misses are
# plain steps) and keep a model that pays from being asked again.
LOOKUP_MISS = 1.02
LOOKUP_EVIDENCE = 1  # lookup drafts in this generation before what they taught sets the length of first tries
FIRST_TRY_SHORT = 2  # lookup's first try in an answer where earlier answers say its copies are wrong
# Such a try is blind, and is made only where a wrong one costs at most this (in plain steps: the verify profile's
# pass over it). On HumanEval with the Q4_K_M target (a pass over 3 tokens: 2.6 steps) blind tries at four events
# cost 5% of 26-token answers. While the text is seen in a long copy (``ds4spec.policy.copying``), a first try is no
# guess.
BLIND_TRY_STEPS = 1.5
# A model's first try that must read the prompt is made where the answer's tokens left are expected to win this many
# times what a rejected try loses. At even odds, the default pair's SmolLM2 (2-core AVX-512), whose drafts were
# estimated to win 0.1 plain steps a token, bet a read of 3 to 5 plain steps on answers after a long one, and the
# answers after such reads won 0.07 a token (-0.05 in short answers, 0.18 in long ones: run 70); on the F16 pair a
# first line's try is expected to win about ten times what it risks.
BET_ODDS = 2.0
# Before a cycle of lookup's is measured its cost is the profile's pass, and a gain over plain smaller than this is
# within that estimate's error: on AVX2 kernels the default pair's lookup cycles cost 5 to 8% more than the pass over
# their tokens (1.96 to 2.01 plain steps against 1.85 to 1.86).
UNMEASURED_MARGIN = 0.1
# The acceptance a model is assumed to get where its event's rule says not to draft (free prose, which a small drafter
# of another family guesses poorly): SmolLM2's on the F16 pair's prose, 35% in run 50 and 43% in run 52.
UNDRAFTED_ALPHA = 0.35


# Where an answer's code is words (a docstring's are copied as the file is; see ``CopyWatch.reworded``).
REWORDING_EVENTS = frozenset({"comment"})
# Events whose text is words, not code: the model's drafts there are pooled apart from its drafts at code events
# (``TriggerLearning.pools``). SmolLM2 on unseen HumanEval prompts (F32 pair, drafting 4 tokens at every event, run
# 80): first tokens kept 0.51 of the time at comments, 0.69 at code lines, 0.92 after a newline or an operator.
WORDS_EVENTS = frozenset({"comment", "docstring"})
# Lookup's first tokens kept at least this often where the text is (a short copy's prior is 0.9): its drafts go out
# unchecked by the model (``TriggerPolicy._model_checks_copy``).
CHECK_SPARED = 0.95
CHECK_TOKENS = 2  # of the model's own, a check's cost: ` ==` then ` string` against lookup's ` == string[::-1]`
_CHOICE_SOURCES = {"lookup": ("lookup",), "model": ("model",), "hybrid": ("lookup", "model")}


class TriggerPolicy(DraftPolicy):
    charges_reading = True

    def __init__(self, book: RuleBook, language: str | None, draft_max: int, sources: tuple[str, ...] = SOURCES,
                 learning: TriggerLearning | None = None) -> None:
        self.draft_max = draft_max
        self.tracker = SyntaxTracker(book, language)
        self.sources = tuple(s for s in sources if s in SOURCES)  # none: every cycle is a plain step
        self.learning = learning or TriggerLearning()
        self.candidates = candidate_lengths(draft_max)
        self._current: EventModel | None = None
        self._asked = "any"
        self.unread = UnreadText(self.learning.reading)  # what the model has not read of the prompt and the answer
        self._read = 0.0  # seconds the drafter spent reading before this cycle's draft
        self.copies = CopyWatch(self.learning.lookup)
        self._rate_bound: tuple[object, float] = (None, 0.0)  # lookup's best rate, with what it was computed from
        # The model's best rate at this cycle's event, the bar its draft's next tokens must clear (``takes_next``):
        # asked before each of the draft's tokens, and unchanged until the cycle is observed (20 us a token).
        self._stop_rate: float | None = None

    def begin(self, context: DraftContext) -> None:
        # A chat answer is written from nothing; a completion continues its prompt text.
        self.tracker.begin(context.text if context.text is not None else b"")
        self.learning.new_generation()
        self.copies.begin(context)
        self.unread.begin(context)

    def extend(self, committed: bytes) -> None:
        self.copies.extend(committed)
        self.tracker.extend(committed)
        self.unread.extend(committed)

    def observe_reading(self, seconds: float) -> None:
        self._read = seconds

    def draft_length(self) -> int:
        self._stop_rate = None
        self.unread.asked()
        self.copies.look(prose=self.tracker.family_in_force.prose)  # inside a fence, the fenced language's
        if self._lookup_idle():
            self.event, self._current, self._asked, self.source = NO_DRAFT_PAYS, None, "any", "any"
            return 0
        family, event = self.tracker.event()
        if self.copies.copy == "short" and not family.prose and event in REWORDING_EVENTS:
            self.copies.reworded(code_event(family, self.copies.matched_line().decode("utf-8", "ignore")) != event)
        self.event = f"{family.name}.{event}"
        model = self._current = self.learning.model(self.event, family.rule(event), self._pool_kind(family, event))
        k, self.source = self._choose(model)
        if k:
            self.copies.drafting()
        self._asked = self.source
        return k

    def _lookup_probe_waste(self) -> float:
        """What a rejected probe of lookup loses (a probe drafts the shortest candidate); ``_lookup_idle`` counts its
        clock with the same figure as ``_choose``, or the two would probe at different cycles."""
        return self.learning.costs.tables["lookup"].steps_lost(self.candidates[0])

    def _probe_clock(self, model: EventModel) -> ProbeBackoff:
        """When to probe again: lookup alone on one clock an answer (its figure is one for all events), else the
        event's, which both sources share."""
        return self.learning.lookup_probing if self.sources == ("lookup",) else model.probing

    def _lookup_idle(self) -> bool:
        """Whether this cycle drafts nothing at whatever syntax event the text ends in, which then is not looked up
        (lexing the current line is most of what a cycle costs here: on an H200, the triggers' loop took 0.33 to 0.38
        ms a cycle on HumanEval against lookup alone's 0.20 to 0.22, both drafting nothing, 7% of a 2.2 ms step).
        So it holds only where ``_choose`` would say 0 at every event: lookup is the only source, the text copies
        nothing of the prompt, no length pays by lookup's figure (an event's best) nor up to any rule's length (a
        first try), a short blind try is ruled out, and lookup's probe is not due; this cycle is then counted on
        lookup's probe clock, as ``_choose`` would count it."""
        learning = self.learning
        plain = learning.costs.plain_step()
        if (self.sources != ("lookup",) or self.copies.copy != "none"
                or plain is None or self.draft_max <= 0 or learning.costs.plain_is_stale()):
            return False
        if self._lookup_could_draft(1.0 / plain):
            return False
        waste = self._lookup_probe_waste()
        if learning.lookup_probing.due_next(waste):
            return False
        learning.lookup_probing.due(waste)
        return True

    def _lookup_could_draft(self, floor: float) -> bool:
        """Whether lookup could be asked to draft at any event of the family in force: an event's best or a first try
        up to a rule's length beats ``floor``, or a short blind try is possible. The best rate is kept while lookup's
        costs and figure stand (recomputed each cycle, it took a third of an idle cycle's time, 0.03 ms), and computed
        in the order the checks stop at, so that no length's cost is estimated earlier than without it (an estimate
        is made from the plain step of its moment)."""
        learning = self.learning
        table = learning.costs.tables["lookup"]
        family = self.tracker.family_in_force
        blind = learning.lookup_drafts < LOOKUP_EVIDENCE
        key = (table.version, self.copies.figure().alpha, family.name, blind)
        if self._rate_bound[0] == key:
            return self._rate_bound[1] > floor
        bound = self._best_when_drafted(None, "lookup")[1]
        if bound > floor:
            return True
        for k in {min(rule.length, self.draft_max) for rule in family.events.values() if rule.length > 0}:
            best, rate = self._lookup_best_up_to(k)
            if self._priced_blind(best, rate / floor):
                rate = 0.0  # not tried at that length (``_first_try``)
            if rate > floor or (blind and table.profile.ratio(min(k, FIRST_TRY_SHORT)) <= BLIND_TRY_STEPS):
                return True
            bound = max(bound, rate)
        self._rate_bound = (key, bound)
        return False

    @staticmethod
    def _pool_kind(family: Family, event: str) -> str:
        """Whether the model's drafts at ``event`` are pooled with its drafts at words or at code."""
        return "words" if family.prose or event in WORDS_EVENTS else "code"

    def pass_over(self) -> None:
        """No syntax event is looked up (lexing the line is most of a cycle's cost here): the cycle is counted as one
        with nothing to draft, and nothing learned is charged to an event."""
        self.event, self._current, self._asked = NOTHING_TO_DRAFT, None, "any"

    def _choose(self, model: EventModel) -> tuple[int, str]:
        plain = self.learning.costs.plain_step()
        if plain is None or self.draft_max <= 0 or self.learning.costs.plain_is_stale():
            return 0, "any"  # the first cycle measures a plain step: the yardstick for everything else
        allowed = [s for s in _CHOICE_SOURCES[model.rule.drafter] if s in self.sources] or list(self.sources)
        # A model whose read of the prompt would not pay is not asked here, nor probed (below): the probe goes to no
        # source, as a model's probe charged that read would hardly ever be due. Handed to lookup instead, the probes
        # drafted the default pair's HumanEval code lines, 16 tokens with 3 kept, where lookup alone drafted none.
        blocked = "model" in allowed and not self._prompt_read_pays(model, plain)
        probed = allowed
        allowed = [s for s in allowed if not (blocked and s == "model")]
        if not allowed:
            return 0, "any"
        best_rate, best = 1.0 / plain, (0, "any")
        # While the text copies its prompt, lookup's figure is the copy's, whatever the event: it is known here
        # before lookup was asked here (measured on the F16 pair's prose: lookup alone drafted the answers' quotes
        # at 1.07x, while the triggers, whose prose rule says 0, never asked it there and ran at 1.02x).
        in_copy = self.copies.copy != "none"
        # So is the model's, where it has drafted at other events (``ds4spec.policy.pooling``) and the rule drafts
        # here (where it says not to, a first try judges the model by such text's acceptance): untried here and
        # judged only by its first try once no source here pays, it was never asked at a code line where lookup's
        # rare matches paid a plain step's rate and 5% more (unseen HumanEval prompts, F32 pair: 10 passes for a
        # 14-token answer against SmolLM2 alone's 6).
        seen_elsewhere = self.learning.pools[model.kind][0].trials > 0 and model.rule.length > 0
        for source in (s for s in allowed if model.attempts[s] or (s == "lookup" and in_copy)
                       or (s == "model" and seen_elsewhere)):
            if model.attempts[source] or source == "model":
                k, rate = self._best_length(model, source)
            else:
                k, rate = self._first_copy_draft(model)
            if rate > best_rate:
                best_rate, best = rate, (k, source)
        untried = [s for s in allowed if model.attempts[s] == 0]
        if "model" in untried and not self._model_could_pay(model, min(model.rule.length, self.draft_max), plain):
            untried.remove("model")  # its read of what it has not seen costs more than a whole accepted draft wins
        if model.rule.length > 0 and untried and best[0] == 0:
            # The rule's prior, tried first, where no source tried here pays yet. Where one does, trying another
            # costs what that one would have won, and more for a model that must first read all the text copied
            # since it last drafted (measured on the F16 pair's edits: a second a try, 4 s of 11).
            k = self._first_try(min(model.rule.length, self.draft_max), untried, plain)
            if k:
                return k, self._ask(untried)
        if model.rule.length == 0 and best[0] == 0 and "model" in allowed and not model.attempts["model"]:
            k = self._model_against_the_rule(plain)
            if k:
                return k, "model"
        if best[0] > 0:
            # Only the best source: with "any", a model would be asked for the length that suits lookup
            # whenever lookup has no match (measured on edits: 18% of the time drafting, against 0% for lookup).
            # But where the model is the best and lookup, when it matches, would be better still, lookup is asked
            # first at the model's length: its misses cost nothing, and its matches teach this event that the
            # text is being copied (measured on the F16 pair: after HumanEval taught that the model pays on code
            # lines, the edits' code lines went on asking it, and catching it up on lookup's copies took 22% of
            # the time; triggers 2.60x against lookup's 3.45x).
            self._probe_clock(model).reset()
            k, source = best
            if source == "model" and "lookup" in allowed and self._lookup_would_win(model, best_rate):
                return k, "any"
            if source == "lookup" and "model" in allowed and self.copies.copy == "none" and (
                    model.attempts["model"] or seen_elsewhere):
                k_any = self._model_after_lookup(model, k, best_rate, plain)
                if k_any:
                    return k_any, "any"
            if source == "lookup" and "model" in allowed and self._model_checks_copy(model, k, plain):
                return k, CHECKED
            return k, self._ask([source])
        source = max(probed, key=lambda s: self._promise(model, s))
        if source not in allowed:
            return 0, "any"
        k = self.candidates[0]
        # A model's probe always costs its cycle; lookup's costs nothing without a match, its pass with one. Counted as
        # free, lookup was probed every 8, 16, 32 cycles of each answer where its figure said no, which plain steps
        # teach as well in a copy of the prompt, and elsewhere its matches are mostly wrong (``LookupGate``).
        if source == "model":
            waste = (self.learning.costs.tables[source].cost(k) + self._reading(k, whole=True)) / plain - 1
        else:
            waste = self._lookup_probe_waste()
        if self._probe_clock(model).due(waste):
            return k, self._ask([source])
        return 0, "any"

    def _reading(self, tokens: float, whole: bool = False) -> float:
        """Seconds of the model's read charged to a cycle expected to write ``tokens``: all of reading what was
        committed since it last read, and of the prompt's first read the share of the answer's tokens left that
        the cycle writes (that read serves every later draft of the answer). Until an answer's length is known (a
        ``ds4spec complete``, a chat's first answer), as many tokens are expected to come as were written, and at
        least ``ANSWER_PRIOR`` (``ds4spec.policy.reading``): a first read is charged a large share early in an answer
        (measured on HumanEval with the default pair: one at the answer's fifth token read the prompt for 0.45 s, 18
        plain steps, for a draft of 2 tokens) and spread more thinly as a long answer shows itself.

        In prose (markdown outside a fence) what was committed since is charged by that share too, unless ``whole``
        (a probe's loss): it was written a token or two a cycle, not copied by the hundred bytes as an edited file
        is, and once asked the model drafts on. Charged whole, every cycle the model was not asked made asking it
        dearer, and one lookup match in a prose answer kept it out for the rest of the answer (F16 pair, run 52:
        asked again after 35 cycles, it would have read 1.1 plain steps of text).

        While the answer copies its prompt outside prose (an edited file, ``ds4spec.policy.copying``), the prompt's read
        is charged whole: lookup drafts the copy, and the read serves the few drafts the model makes where the copy
        breaks. Charged by share, the F16 pair's model was asked at an edit's first renamed name, where lookup resumes
        the copy, and read the prompt with its file for 250 to 530 ms, 1.5 to 3 plain steps, for a draft of about 10
        tokens (run 66). A prose answer's quote is short, and the model writes the rest of the answer."""
        prose, copying = self.copies.prose, self.copies.copy != "none"
        return self.unread.charge(tokens, spread=prose and not whole, shared=prose or not copying)

    def _model_could_pay(self, model: EventModel, k: int, plain: float) -> bool:
        """Whether a model's first try here could beat a plain step: a draft of ``k`` tokens all accepted, charged
        its verify pass, its drafted tokens (at the cost measured at load, until cycles that drafted are measured),
        all it must read of what was committed since it last read, and of its first read of the prompt the share
        that the tokens it writes carry (``_reading``: that read serves every later draft of the answer); where it
        must read first, also with its tokens accepted as the load-time check assumes (``OPTIMISTIC_ALPHA``), so
        that the read is won back over the rest of the answer at that acceptance.

        Charged the whole read instead, the F16 pair's SmolLM2 was never tried on HumanEval on a 2-core AVX2
        machine (the read of a 348-byte prompt: 0.62 s, 4 plain steps), where alone it ran at 1.21x, 77%
        accepted, and the triggers at 0.96x. Judged with every drafted token accepted alone, the default pair's
        SmolLM2 was tried on the same machine's files: its cycles there, reads of the file included, took 0.44 s
        each (7 plain steps), and the triggers ran at 1.34x against lookup's 1.46x.

        And the try is a bet at ``BET_ODDS``: what the answer's tokens left would win (``_model_gain``: as answers
        measured it after the model's reads, and until then at the acceptance the event's figure expects of a draft's
        tokens, drawn toward the model's other events', a prior of 0.8 before any; whether a first token holds is what
        the try finds out) must exceed twice what a rejected try loses, its whole read included. Without it the default
        pair's SmolLM2 was tried at HumanEval answers' first lines on a 2-core AVX-512 FP16 machine, where at 90%
        acceptance it would have written them 2 to 17% faster, and a rejected try's cycle took 6 to 9.5 plain steps
        (reads of 3.4 to 7.2): the triggers ran at 0.93x and 0.94x (run 66). Won at 90%, the bet let a 4-token try
        through on the same machine by a hair (7.74 plain steps to win against 7.65; at 0.8, 0.9): rejected, 7.25 plain
        steps, the runs at 0.92x and 0.94x (run 68). At even odds, answers after a long one still bet their reads there
        (run 70, ``BET_ODDS``). On the F16 pair a first line's try would win about 12 steps for 1.5."""
        cycle = self._model_cycle(k)
        if (k + 1) / (cycle + self._reading(k + 1)) <= 1.0 / plain:
            return False
        tokens = expected_tokens(OPTIMISTIC_ALPHA, k)
        read = self._reading(tokens)
        if not read:
            return True
        rate = tokens / (cycle + read)
        if rate <= 1.0 / plain:
            return False
        left = max(self.learning.reading.tokens_left(), tokens)
        return left * self._model_gain(model, k, plain) > BET_ODDS * self._rejected_try_steps(k, plain)

    def _prompt_read_pays(self, model: EventModel, plain: float) -> bool:
        """Whether asking the model here, which would make it read the prompt first (and what was written since), is
        expected to win that read back over the answer's tokens left (``_model_gain``). An answer that has gone on
        past the length answers have had is expected to go on about as long again.

        Charged by share alone (``_reading``), the default pair's SmolLM2 read 12 of 15 unseen HumanEval prompts,
        for 2.5 to 8 plain steps each, and its cycles lost 10 plain steps in all: the triggers at 0.97x, lookup alone
        at 1.00x (2-core AVX-512, run 70; 0.85x on five of them in run 69)."""
        read = self.unread.cost() / plain if self.unread.prompt else 0.0
        if not read:
            return True
        written = self.learning.reading.written
        left = max(self.learning.reading.tokens_left(), float(written))
        if left * self._model_gain_bound(model, plain) <= read:
            return False
        k = self._best_when_drafted(model, "model")[0]
        return left * self._model_gain(model, k, plain) > read

    def _model_gain_bound(self, model: EventModel, plain: float) -> float:
        """At least ``_model_gain`` at any length: its estimate at the best rate with no read charged (remembered while
        the costs stand). Where even that does not win the read back, no length is priced with its read: replayed
        offline with a read of 20 plain steps, the policy's decision took 0.017 ms a cycle instead of 0.041 on prose
        answers and 0.071 instead of 0.079 on HumanEval's (medians; the triggers' whole loop, 0.26 and 0.4 ms in a
        bench run on the default pair, runs at about half speed beside llama.cpp's spinning worker thread)."""
        table = self.learning.costs.tables["model"]
        rate = table.best(model.acceptance.alpha, tuple(table.ranked_lengths(self.draft_max)))[1]
        return self._gain_at(rate, plain)

    def _model_gain(self, model: EventModel, k: int, plain: float) -> float:
        """Plain steps the model's drafts are expected to win a token of the answer, once it read the prompt: as
        answers measured it where this family's text is (``ReadGains``), estimated until then as if it drafted
        every token left at ``k`` tokens a cycle, at the event's acceptance."""
        return self._gain_at(self._model_rate(model.acceptance.alpha, k), plain)

    def _gain_at(self, rate: float, plain: float) -> float:
        """``_model_gain`` where the model's drafts write ``rate`` tokens a second."""
        return self.learning.reading.gains.per_token(self._family(), 1 - 1 / (rate * plain))

    def _model_against_the_rule(self, plain: float) -> int:
        """The length of a model's first try where the rule says not to draft: the one of the short lengths that pays
        best at the acceptance such text gets (``UNDRAFTED_ALPHA``), its read charged by share as for any first try;
        none where none pays, or where a rejected try would lose more than ``BLIND_TRY_STEPS`` plain steps with all it
        must read (a prompt holding a file: the model reads it, then lookup drafts the copy). Where a pass over a few
        tokens costs about one step (a memory-bound target) even that acceptance pays: measured on the F16 pair's
        prose, SmolLM2 alone ran at 1.30x and the triggers at 1.09x, whose first answer drafted nothing while the
        probe's clock waited for a read that grew with every token written (run 52)."""
        best, best_rate = 0, 1.0 / plain
        for k in (n for n in self.candidates if n <= FIRST_TRY_SHORT):
            rate = self._model_rate(UNDRAFTED_ALPHA, k)
            if rate > best_rate:
                best, best_rate = k, rate
        if not best:
            return 0
        return best if self._rejected_try_steps(best, plain) <= BLIND_TRY_STEPS else 0

    def _rejected_try_steps(self, k: int, plain: float) -> float:
        """Plain steps a model's rejected first try of ``k`` tokens loses: its cycle and all it must read first, less
        the plain step it replaces."""
        return (self._model_cycle(k) + self.unread.cost()) / plain - 1

    def _model_rate(self, alpha: float, k: int, first: float | None = None) -> float:
        """Tokens a second of a model's cycle drafting ``k`` tokens at acceptance ``alpha`` (``first`` for the first
        token where given apart), its read charged."""
        tokens = expected_tokens(alpha, k, first)
        return tokens / (self._model_cycle(k) + self._reading(tokens))

    def _model_cycle(self, k: int) -> float:
        """Seconds of a model's cycle drafting ``k`` tokens, its read aside: as measured, with its drafted tokens at the
        cost the check measured at load until cycles that drafted are measured."""
        table = self.learning.costs.tables["model"]
        return table.cost(k) + (0.0 if table.drafts_measured else k * self.learning.model_token_seconds)

    def _lookup_would_win(self, model: EventModel, rate: float) -> bool:
        """Whether lookup's drafts in this answer, where it has a match, are expected to beat ``rate`` here."""
        evidence = self.learning.lookup_drafts >= LOOKUP_EVIDENCE  # lookup drafted in this answer
        return evidence and model.attempts["lookup"] > 0 and self._best_when_drafted(model, "lookup")[1] > rate

    def _model_after_lookup(self, model: EventModel, k: int, alone: float, plain: float) -> int:
        """Where lookup alone is the best source here (expected rate ``alone`` at ``k`` tokens) and the text copies
        nothing of the prompt, the length at which asking lookup first and the model when it has no match (``any``)
        is expected to do better, or 0: each miss of lookup's alone is a plain step. Judged at lookup's length and the
        model's own best one, each source at its own figure and cost, lookup matching as often as it has here.
        Measured on unseen HumanEval prompts (F32 pair, one fresh policy each): at comment lines lookup, asked alone by
        a hair's better figure, found nothing in 20 of one answer's cycles, all plain steps where SmolLM2 was accepted
        half the time; the answer took 66 target passes against SmolLM2 alone's 52. Over sixteen such prompts in
        same-run A/B runs the triggers ran at 1.58x and 1.59x with it, 1.60x and 1.61x without: within runs' spread,
        as few cycles are decided here once the model's reads are charged right (``ReadText``)."""
        p = model.matches.alpha
        lookup_alpha, acceptance = self._figure(model, "lookup").alpha, model.acceptance
        table = self.learning.costs.tables["lookup"]
        best, best_rate = 0, alone
        for n in sorted({k, self._best_when_drafted(model, "model")[0]}):
            model_rate = self._model_rate(acceptance.alpha, n, acceptance.first)
            rate = p * expected_tokens(lookup_alpha, n) / table.cost(n) + (1 - p) * model_rate
            if rate > best_rate:
                best, best_rate = n, rate
        return best

    def _first_try(self, k: int, untried: list[str], plain: float) -> int:
        """The length of lookup's first draft at an event: the rule's, but no longer than what lookup's drafts say
        pays, and where nothing does, none once it drafted in this answer (its copies of new code are wrong: on
        HumanEval with the Q4_K_M target, first tries of 2 to 6 tokens at five events cost 6% of the time), and a
        short one before (this answer may copy its input where the earlier ones did not) where a wrong one is cheap;
        but the rule's length while the text is seen in a long copy (a short one may be a quote: its first try is
        as long as its own figure says). Before lookup has drafted at all (a ``ds4spec complete``, a session's
        first answer) its figure is the prior, judged the same way: tried at the rule's length there, lookup's blind
        first tries ran unseen HumanEval prompts one a process at 0.84x to 1.02x of plain, 0.93x over three (a pass
        over 3 tokens: 2.7 plain steps). Nor is a length whose gain is within the profile's error tried while no
        cycle of lookup's is measured, where a wrong try is dear (``_priced_blind``). A model's first try keeps the
        rule's length: what it is worth depends on the event."""
        learning = self.learning
        if untried != ["lookup"]:
            return k
        table = learning.costs.tables["lookup"]
        best, rate = self._lookup_best_up_to(k)
        if rate > 1.0 / plain and not self._priced_blind(best, rate * plain):
            return min(k, best)
        # What earlier answers taught (or the prior) says no, but this one may copy its input: where the text shows
        # it doing so, the rule's length; else, before lookup drafted in this answer, a short try finds out where a
        # wrong one is cheap.
        if self.copies.copy == "long":
            return k
        if learning.lookup_drafts >= LOOKUP_EVIDENCE:
            return 0
        short = min(k, FIRST_TRY_SHORT)
        return short if table.profile.ratio(short) <= BLIND_TRY_STEPS else 0

    def _priced_blind(self, k: int, gain: float) -> bool:
        """Whether a try of lookup's ``k`` tokens outside a copy of the prompt, expected to write ``gain`` times a
        plain step's tokens, is priced by the verify profile alone (no cycle of lookup's measured yet), would lose more
        than ``BLIND_TRY_STEPS`` if wrong, and gains less than that estimate's error (``UNMEASURED_MARGIN``). With AVX2
        kernels on a 2-core CPU (default pair, HumanEval) lookup's prior (0.5) made 3 tokens pay by 1% (1.88 tokens
        for a pass of 1.86 steps); rejected in two runs of three, the triggers ran at 0.98x against lookup alone's
        1.00x. What earlier answers taught (their copies right) gains far more, and is tried."""
        table = self.learning.costs.tables["lookup"]
        return (not table.drafts_measured and self.copies.copy == "none" and table.profile.ratio(k) > BLIND_TRY_STEPS
                and gain < 1 + UNMEASURED_MARGIN)

    def _first_copy_draft(self, model: EventModel) -> tuple[int, float]:
        """Lookup's first draft at an event while the text copies its prompt, and its rate: the length the copy's
        figure (the one lookup alone drafts by) says pays best; in prose no longer than a first try (the rule's
        length, and a short try where the rule says 0: a prose rule cannot know that the answer is quoting). The
        copy's figure is the same at every event, and a short copy's prices the risk that the copy ends. Capped at the
        rule's length in long copies, each of an edited file's events began at its rule's 2 to 4 tokens: in a
        session's first answer (every ``ds4spec complete``) the triggers took 18 to 25 passes for an edit's 128
        tokens against lookup alone's 15 to 17 (default pair, 2-core AVX-512: 1.56x against 1.77x). Capped in short
        copies, where a pass over 2 tokens costs 3 plain steps (an H200) no first try at a code line's 2 tokens
        paid, and the triggers waited through copied lines in plain steps (run 47, the default pair's edits: 26
        cycles for an answer that lookup alone wrote in 13)."""
        if not (self.copies.prose or self.copies.rewording):
            return self._lookup_best_up_to(self.draft_max)
        return self._lookup_best_up_to(min(self.draft_max, max(model.rule.length, FIRST_TRY_SHORT)))

    def _lookup_best_up_to(self, longest: int) -> tuple[int, float]:
        """Of lookup's lengths up to ``longest``, the one with the best expected rate by the figure for where the
        text is (a copy of the prompt or not), and that rate."""
        table = self.learning.costs.tables["lookup"]
        figure = self.copies.figure()
        return best_length(table, figure.alpha, [n for n in table.ranked_lengths(longest) if n <= longest],
                           first=figure.first)

    def _model_checks_copy(self, model: EventModel, k: int, plain: float) -> bool:
        """Whether lookup's draft of ``k`` tokens here goes out only where the model's first bytes agree (``CHECKED``):
        outside a long copy of the prompt, in code but its comments, until lookup's first tokens here have shown
        themselves right (``CHECK_SPARED``), where the model's own drafts pay at this event, and where the check (the
        model's read of what it has not seen, and a token or two of its own) costs less than lookup's first token is
        expected to lose when wrong: its pass, and the model's draft that could have gone out instead, about a step.
        Where the model has yet to read an edited file (an edit's first lines), that read alone costs more."""
        if self.copies.copy == "long" or self.copies.prose or self.tracker.family_in_force.prose:
            return False
        if self.event.rpartition(".")[2] in REWORDING_EVENTS:
            # A comment rewords the prompt in words neither source knows: turned down there, lookup's drafts became
            # the model's, rejected as often (run 79, while one pool held every event). With comments pooled apart
            # (run 80), checking them too was level: 478 target passes against 477 on HumanEval/10 to /29 (run 81).
            return False
        figure = self.copies.figure()
        first = figure.alpha if figure.first is None else figure.first
        if first >= CHECK_SPARED:
            return False
        check = self.unread.cost() + CHECK_TOKENS * self.learning.model_token_seconds
        loss = (1 - first) * (self.learning.costs.tables["lookup"].steps_lost(k) + 1) * plain
        return check < loss and self._best_when_drafted(model, "model")[1] > 1.0 / plain

    @staticmethod
    def _ask(sources: list[str]) -> str:
        """One source when one is named; ``any`` (both untried) lets a hybrid try lookup, then the model."""
        return sources[0] if len(sources) == 1 else "any"

    def _figure(self, model: EventModel | None, source: str) -> Acceptance:
        """The acceptance of ``source``'s drafts here: lookup's by where the text is (a copy or not; in a short copy a
        draft's first token learned apart), a model's the event's (a draft's first token learned apart too)."""
        if source == "lookup":
            return self.copies.figure()
        assert model is not None, "a model's acceptance is an event's"
        return model.acceptance

    def _promise(self, model: EventModel, source: str) -> float:
        """What a probe of ``source`` here may find: its first token's acceptance, lookup's only where it has
        matches."""
        figure = self._figure(model, source)
        alpha = figure.alpha if figure.first is None else figure.first
        return alpha * model.matches.alpha if source == "lookup" and "model" in self.sources else alpha

    def _best_length(self, model: EventModel, source: str) -> tuple[int, float]:
        """The length with the best expected rate and that rate, lookup's counting its misses as plain steps where
        the model competes (alone, a lookup miss is just the plain step there would have been), except in a copy of
        the prompt, where lookup has a match."""
        k, rate = self._best_when_drafted(model, source)
        plain = self.learning.costs.plain_step()
        if source == "lookup" and "model" in self.sources and plain and self.copies.copy == "none":
            p = model.matches.alpha
            rate = p * rate + (1 - p) / (LOOKUP_MISS * plain)
        return k, rate

    def _best_when_drafted(self, model: EventModel | None, source: str) -> tuple[int, float]:
        """The measured length with the best expected rate; while the longest measured one is the best, the next
        longer one (as the gate climbs: an estimate with the prior cost per token would never try it)."""
        table = self.learning.costs.tables[source]
        figure = self._figure(model, source)
        alpha, first = figure.alpha, figure.first
        extra = self._reading if source == "model" else None
        if table.profile.measured:  # every length's cost is known well enough: no need to climb
            return best_length(table, alpha, table.ranked_lengths(self.draft_max), extra, first)
        measured = [k for k in self.candidates if table.measured(k)]
        if not measured:  # this source's cycles so far offered nothing to measure: the shortest, as estimated
            return best_length(table, alpha, self.candidates[:1], extra, first)
        k, rate = best_length(table, alpha, measured, extra, first)
        longer = [n for n in self.candidates if n > k]
        return (longer[0] if k == measured[-1] and longer else k), rate

    def takes_next(self, confidences: Sequence[float], aligned: int, wanted: int) -> bool:
        model, plain = self._current, self.learning.costs.plain_step()
        if model is None or plain is None:
            return True
        if self._stop_rate is None:
            self._stop_rate = max(self._best_when_drafted(model, "model")[1], 1.0 / plain)
        table = self.learning.costs.tables["model"]
        return takes_next(self.learning.confidence, table, confidences, aligned, wanted, model.acceptance.alpha,
                          self._stop_rate)

    def observe_confidences(self, confidences: Sequence[float], held: int, verified: int) -> None:
        self.learning.confidence.observe(confidences, held, verified)

    def plain_step_seconds(self) -> float | None:
        return self.learning.costs.plain_step()

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float,
                source: str = "") -> None:
        costs = self.learning.costs
        read, self._read = self._read, 0.0
        self.learning.reading.wrote(accepted + 1)
        won = 0.0  # plain steps the model's draft won this cycle, where it drafted
        if drafted and source in SOURCES:
            # The pass was over the drafted tokens, maybe fewer; a model's read is charged by what it read.
            if source == "model":
                costs.observe(source, drafted, cycle_seconds - read, drafted * self.learning.model_token_seconds)
            elif self._asked == CHECKED:  # the model read (and agreed): lookup's draft, its cycle the check's too
                self.unread.read(read)
                costs.observe(source, drafted, cycle_seconds - read)
            else:
                costs.observe(source, drafted, cycle_seconds)
            self._learn(source, drafted, accepted)
            if source == "model":
                won = self._model_read(accepted + 1, cycle_seconds, read)
        elif requested and "model" in self.sources and self._asked != "lookup":
            # The model ran and offered nothing usable: for this event a draft whose first token was rejected,
            # priced as one (a whole cycle of the length asked). Its time is no measure of a cycle of any length
            # (the drafter's call and a plain step): learned as one of the length asked, a blank line's empty draft
            # of 15 tokens made such a cycle cost 1.43 plain steps (a pass over 16 tokens alone costs 4.19), and the
            # default pair's SmolLM2 was asked for 15 tokens at every event of HumanEval (0.84x; run 67).
            self._learn("model", 1, 0)
            won = self._model_read(1, cycle_seconds, read)
        else:
            costs.observe_plain(cycle_seconds)  # a plain step, or a lookup miss (which costs nothing)
        self.learning.reading.gains.wrote(accepted + 1, won)
        # Lookup, when asked (alone, or first for ``any`` or ``checked``), had a draft or not: once a cycle. A draft the
        # model's check turned down counts as none: there lookup's matches are no use, and the model is asked alone.
        lookup_asked = requested and self._asked != "model" and "lookup" in self.sources
        self._matched(lookup_asked, bool(drafted) and source == "lookup")

    def _model_read(self, tokens: int, cycle_seconds: float, read: float) -> float:
        """The model read what it had not seen (``read`` seconds of the cycle) and its cycle wrote ``tokens``: the
        plain steps that cycle won, its read of the prompt aside (what it won is weighed against that read,
        ``ReadGains``)."""
        if self.unread.read(read):
            self.learning.reading.gains.read_prompt(self._family())
            cycle_seconds -= read
        plain = self.learning.costs.plain_step()
        return tokens - cycle_seconds / plain if plain else 0.0

    def _family(self) -> str:
        return self.event.partition(".")[0]

    def _learn(self, source: str, drafted: int, accepted: int) -> None:
        model = self._current
        if model is None:
            return
        model.attempts[source] += 1
        if source == "lookup":
            self.copies.figure().observe(drafted, accepted)
            self.learning.lookup_drafts += 1
        else:
            model.acceptance.observe(drafted, accepted)

    def _matched(self, asked: bool, found: bool) -> None:
        """Counts whether lookup, asked here, had a draft (an event where it never has one goes to the model). With
        no model to prefer, a miss is no try: the rule's length is tried again at the next match, as lookup alone
        would (counted, misses in HumanEval's code kept lookup from the edits' code lines)."""
        if asked and self._current is not None:
            self._current.matches.observe(1, int(found))
            self._current.attempts["lookup"] += not found and "model" in self.sources
