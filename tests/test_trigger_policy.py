"""Triggers adapt per event: where drafts are accepted the length climbs, where they are not it goes to 0.

The policy is driven directly with cycles whose cost and acceptance follow a simple machine (a plain step costs 1,
a cycle drafting k tokens 1 + 0.3 k, each drafted token accepted with a per-event probability), then end to end
on a tiny real model with a drafter that is right in one kind of place and wrong elsewhere.
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from spec_helpers import run_plain, run_spec

from ds4spec.backend.prompt import ChatMessage
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import CHECKED, NO_DRAFT, Draft, DraftContext, Drafter
from ds4spec.core.events import NO_DRAFT_PAYS, NOTHING_TO_DRAFT, Finished
from ds4spec.core.plain import GenerationRequest
from ds4spec.core.stats import EventCounts
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.policy.acceptance import expected_tokens
from ds4spec.policy.copying import QUOTE_PRIOR, SHORT_COPY_PRIOR
from ds4spec.policy.cycle_costs import OPTIMISTIC_ALPHA
from ds4spec.policy.gate import GatedPolicy
from ds4spec.policy.probing import FIRST_PROBE_AFTER, PROBE_SHARE
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.reading import ANSWER_PRIOR, ReadingCosts
from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.policy.syntax import SyntaxTracker
from ds4spec.policy.trigger_learning import TriggerLearning
from ds4spec.policy.triggers import FIRST_TRY_SHORT, TriggerPolicy

# Two places in Python code, as the tracker sees them: inside a comment (rule: 6 tokens) and inside a string
# (rule: 4 tokens).
COMMENT = b"def total(xs):\n    # the sum of "
STRING = b'def total(xs):\n    name = "tot'
PRIOR = {"python.comment": 6, "python.string": 4}
PRIOR_CODE = 2  # a code line's rule


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> RuleBook:
    return load_rulebook(user_dir=tmp_path_factory.mktemp("no-user-rules"))


def _at(policy: TriggerPolicy, text: bytes) -> int:
    """The length the policy drafts when the text ends at ``text``'s end (in the same generation)."""
    policy.tracker.begin(text)
    return policy.draft_length()


def _accepted(rng: random.Random, k: int, p: float) -> int:
    """Each drafted token accepted with probability p, until the first rejection."""
    n = 0
    while n < k and rng.random() < p:
        n += 1
    return n


@dataclass
class Machine:
    """Cycles of a simple machine: each place's drafts accepted token by token with its probability."""

    acceptance: dict[bytes, float]
    cost_per_token: float = 0.3
    seed: int = 0
    chosen: dict[bytes, list[int]] = field(default_factory=dict)

    def run(self, policy: TriggerPolicy, cycles: int) -> None:
        rng = random.Random(self.seed)
        places = list(self.acceptance)
        for _ in range(cycles):
            place = rng.choice(places)
            k = _at(policy, place)
            self.chosen.setdefault(place, []).append(k)
            accepted = _accepted(rng, k, self.acceptance[place])
            policy.observe(k, k, accepted, 1.0 + self.cost_per_token * k, "model" if k else "none")

    def late(self, place: bytes, n: int = 100) -> list[int]:
        """The last ``n`` lengths chosen at ``place``."""
        return self.chosen[place][-n:]


def test_the_first_cycle_is_a_plain_step_and_then_the_rule_is_tried(book: RuleBook) -> None:
    policy = TriggerPolicy(book, "python", 16, ("model",))
    assert _at(policy, COMMENT) == 0 and policy.event == "python.comment"  # measures the yardstick
    policy.observe(0, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT) == PRIOR["python.comment"]
    assert _at(policy, STRING) == PRIOR["python.string"] and policy.event == "python.string"
    short = TriggerPolicy(book, "python", 3, ("model",), policy.learning)
    assert _at(short, COMMENT) == 3  # never more than --draft-max


def test_a_zero_draft_maximum_never_drafts(book: RuleBook) -> None:
    policy = TriggerPolicy(book, "python", 0, ("model",))
    policy.observe(0, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT) == 0


def test_well_accepted_events_climb_above_their_rule_and_hopeless_ones_stop(book: RuleBook) -> None:
    machine = Machine({COMMENT: 0.95, STRING: 0.1})
    machine.run(TriggerPolicy(book, "python", 16, ("model",)), 600)
    good, bad = machine.late(COMMENT), machine.late(STRING)
    assert statistics.median(good) > PRIOR["python.comment"], good
    assert min(good) >= PRIOR["python.comment"]
    probes = [k for k in machine.chosen[STRING][50:] if k]
    assert len(probes) <= 0.05 * len(machine.chosen[STRING][50:]), probes  # only rare probes
    assert set(probes) <= {1} and statistics.median(bad) == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_adaptation_does_not_hang_on_one_lucky_or_unlucky_run(book: RuleBook, seed: int) -> None:
    machine = Machine({COMMENT: 0.95, STRING: 0.1}, seed=seed)
    machine.run(TriggerPolicy(book, "python", 16, ("model",)), 600)
    assert statistics.median(machine.late(COMMENT)) > PRIOR["python.comment"]
    assert sum(1 for k in machine.late(STRING) if k) <= 5


def test_each_event_follows_its_own_acceptance(book: RuleBook) -> None:
    """The string event's fate does not hold the comment event back, and the other way round: the other events'
    figure stands in only for what an event's own drafts have not shown (``ds4spec.policy.pooling``)."""
    hopeless = Machine({COMMENT: 0.95, STRING: 0.1})
    hopeless.run(TriggerPolicy(book, "python", 16, ("model",)), 600)
    good = Machine({COMMENT: 0.95, STRING: 0.95})
    good.run(TriggerPolicy(book, "python", 16, ("model",)), 600)
    assert statistics.median(good.late(STRING)) > PRIOR["python.string"]
    assert statistics.median(hopeless.late(STRING)) == 0
    assert statistics.median(hopeless.late(COMMENT)) > PRIOR["python.comment"]
    assert statistics.median(good.late(COMMENT)) > PRIOR["python.comment"]
    both_bad = Machine({COMMENT: 0.1, STRING: 0.95})
    both_bad.run(TriggerPolicy(book, "python", 16, ("model",)), 600)
    assert statistics.median(both_bad.late(COMMENT)) == 0
    assert statistics.median(both_bad.late(STRING)) > PRIOR["python.string"]


def test_costly_verification_keeps_even_a_good_event_near_its_rule_or_below(book: RuleBook) -> None:
    """Each drafted token costs a whole plain step: a length of 16 would need near-perfect acceptance."""
    machine = Machine({COMMENT: 0.7}, cost_per_token=1.0)
    machine.run(TriggerPolicy(book, "python", 16, ("model",)), 300)
    assert statistics.median(machine.late(COMMENT)) <= PRIOR["python.comment"]


def test_what_was_learned_carries_over_to_the_next_generation(book: RuleBook) -> None:
    learning = TriggerLearning()
    machine = Machine({COMMENT: 0.95, STRING: 0.1})
    machine.run(TriggerPolicy(book, "python", 16, ("model",), learning), 600)
    following = TriggerPolicy(book, "python", 16, ("model",), learning)
    # No plain step to measure first, and no prior to retry: the lengths the first generation settled on.
    assert _at(following, COMMENT) in set(machine.late(COMMENT, 20)) - {0}
    assert _at(following, STRING) == 0
    fresh = TriggerPolicy(book, "python", 16, ("model",))
    assert _at(fresh, COMMENT) == 0  # a new learning starts from nothing


def test_an_undrafted_prose_rule_is_only_probed_with_back_off(book: RuleBook) -> None:
    policy = TriggerPolicy(book, "markdown", 16, ("model",))
    policy.observe(0, 0, 0, 1.0, "none")
    prose = b"The tracker reads the text as it "
    drafted_at = []
    for cycle in range(200):
        k = _at(policy, prose)
        assert policy.event == "markdown.prose"
        if k:
            drafted_at.append(cycle)
        policy.observe(k, k, 0, 1.0 + 0.3 * k, "model" if k else "none")
    gaps = [b - a for a, b in itertools.pairwise(drafted_at)]
    assert drafted_at and drafted_at[0] >= 7  # the rule says 0: the first probe waits
    assert gaps == sorted(gaps) and gaps[-1] > 2 * gaps[0]  # probes grow rarer


def test_a_dear_model_is_probed_only_as_often_as_a_small_share_of_the_time_allows(book: RuleBook) -> None:
    """Measured on the F16 pair's prose: SmolLM2's probes cost 1.7 to 3.8 plain steps each and were mostly rejected;
    probed every 8, 16, 32 cycles of each answer, they cost the triggers 6% against lookup alone."""
    from ds4spec.policy.probing import PROBE_SHARE

    policy = TriggerPolicy(book, "markdown", 16, ("lookup", "model"))
    policy.observe(0, 0, 0, 1.0, "none")
    prose = b"The tracker reads the text as it "
    drafted_at = []
    for cycle in range(600):
        k = _at(policy, prose)
        if k:
            drafted_at.append(cycle)
        policy.observe(k, k, 0, 3.0 if k else 1.0, policy.source if k else "none")
    gaps = [b - a for a, b in itertools.pairwise(drafted_at)]
    assert drafted_at and all(gap >= 2 / PROBE_SHARE for gap in gaps), drafted_at


@pytest.mark.parametrize(("profile", "prompt", "answer", "tried"), [
    ("memory-bound", 100, None, True),  # a pass over 2 tokens 1.13 steps, the prompt read in half a step
    ("compute-bound", 100, None, False),  # a pass over 2 tokens 1.96 steps: at prose's acceptance nothing pays
    ("memory-bound", 2000, 2000.0, False),  # a file read in 10 steps: spread thin over a long answer, but a rejected
                                            # try loses it all
])
def test_where_the_prose_rule_says_none_a_model_that_pays_even_at_prose_s_acceptance_is_tried_at_once(
    book: RuleBook, profile: str, prompt: int, answer: float | None, tried: bool
) -> None:
    """Measured on the F16 pair's prose (run 52): SmolLM2 alone 1.30x at 43% accepted, the triggers 1.09x, their first
    answer drafting nothing while the probe's clock waited. Where even the acceptance a small drafter gets on prose
    pays and a wrong first try is cheap, the model is tried at the answer's first prose; elsewhere prose waits for a
    probe (``test_an_undrafted_prose_rule_is_only_probed_with_back_off``)."""
    read = ReadingCosts()
    read.observe(300, 1.5)  # reading costs a two-hundredth of a step a byte
    learning = TriggerLearning(MEMORY_BOUND if profile == "memory-bound" else COMPUTE_BOUND)
    learning.reading.costs = read
    learning.model_token_seconds = 0.05
    policy = TriggerPolicy(book, "markdown", 16, ("lookup", "model"), learning)
    policy.begin(DraftContext(messages=(ChatMessage("user", "x" * prompt),)))
    learning.reading.answer_tokens = answer
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(b"The")  # the answer's first token, written by that plain step
    k = _at(policy, b"The tracker reads the text as it ")
    assert policy.event == "markdown.prose"
    assert (0 < k <= FIRST_TRY_SHORT and policy.source == "model") if tried else k == 0


def _model_cycles(policy: TriggerPolicy, place: bytes, read: ReadingCosts, cycles: int) -> None:
    """Model drafts at ``place``, 90% accepted, each writing 10 bytes and reading them at the next draft."""
    rng = random.Random(0)
    for _ in range(cycles):
        k = _at(policy, place)
        seconds = read.cost(policy.unread.answer) if k else 0.0
        policy.observe_reading(seconds)
        policy.observe(k, k, _accepted(rng, k, 0.9), 1.0 + 0.3 * k + seconds, "model" if k else "none")
        policy.extend(b"0123456789")


def test_a_model_that_must_first_read_what_lookup_copied_is_not_asked_until_its_read_pays(book: RuleBook) -> None:
    """Measured on the F16 pair's edits: after lookup copied part of the file, SmolLM2's cycle cost 2.5 to 3.8 plain
    steps, most of it reading the copy, for 66% accepted. Its read is charged to the cycle that would ask it."""
    read = ReadingCosts()
    read.observe(10, 0.1 + 0.01 * 10)
    read.observe(1000, 0.1 + 0.01 * 1000)  # a read costs a tenth of a step and a hundredth per byte
    policy = TriggerPolicy(book, "python", 16, ("model",), TriggerLearning(SIMPLE_MACHINE))
    policy.learning.reading.costs = read
    policy.observe(0, 0, 0, 1.0, "none")
    _model_cycles(policy, COMMENT, read, 40)
    assert _at(policy, COMMENT) >= 4  # the model pays here, reading ten bytes a cycle
    policy.extend(b"x" * 400)  # lookup (or the target) wrote 400 bytes: reading them costs 4 steps
    assert _at(policy, COMMENT) == 0
    policy.observe(0, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT) == 0  # it waits: reading the copy costs what no draft here can win back


@pytest.mark.parametrize(("language", "place", "asked"), [
    ("python", COMMENT, False),  # code: what lookup copied, read whole (the test above)
    ("markdown", b"The tracker reads the text as it ", True),  # prose: written a token a cycle, read by share
])
def test_text_the_model_has_not_read_is_charged_whole_in_code_and_by_share_in_prose(
    book: RuleBook, language: str, place: bytes, asked: bool
) -> None:
    """Measured on the F16 pair's prose (run 52): charged whole, each cycle the model was not asked made asking it
    dearer, and after one match of lookup's it was never asked again in that answer; in an edited file the text it has
    not read is lookup's copy, hundreds of bytes at a time, and read whole it keeps the model out (above)."""
    read = ReadingCosts()
    read.observe(10, 0.1 + 0.01 * 10)
    read.observe(1000, 0.1 + 0.01 * 1000)  # a read costs a tenth of a step and a hundredth per byte
    policy = TriggerPolicy(book, language, 16, ("model",), TriggerLearning(MEMORY_BOUND))
    policy.learning.reading.costs = read
    policy.observe(0, 0, 0, 1.0, "none")
    _model_cycles(policy, place, read, 40)
    assert _at(policy, place) >= 4  # the model pays here
    policy.extend(b"x" * 1000)  # 1000 bytes it has not read: 10 steps, read whole
    assert (_at(policy, place) > 0) == asked


def test_the_prompt_s_first_read_is_charged_by_the_share_of_the_answer_a_draft_writes(book: RuleBook) -> None:
    """A completion whose prompt is long: that read serves the whole answer, so a long answer carries it and a short
    one does not."""
    read = ReadingCosts()
    read.observe(10, 0.1)
    read.observe(2000, 20.0)  # reading the prompt costs 20 plain steps
    asked = {}
    for answer_tokens in (2000.0, 20.0):
        learning = TriggerLearning()
        learning.reading.costs = read
        teacher = TriggerPolicy(book, "python", 16, ("model",), learning)
        teacher.observe(0, 0, 0, 1.0, "none")
        _model_cycles(teacher, COMMENT, read, 40)  # the model pays at this event
        policy = TriggerPolicy(book, "python", 16, ("model",), learning)
        policy.begin(DraftContext(text=b"#" * 2000))
        learning.reading.answer_tokens = answer_tokens
        policy.observe(0, 0, 0, 1.0, "none")
        asked[answer_tokens] = _at(policy, COMMENT)
    assert asked[2000.0] >= 4 and asked[20.0] == 0, asked


def test_before_any_answer_s_length_is_known_the_prompt_s_read_is_spread_over_as_many_tokens_as_were_written(
        book: RuleBook) -> None:
    """A `ds4spec complete`, or a chat's first answer: measured on HumanEval with the default pair, the model's first
    try at the answer's fifth token read the prompt for 18 plain steps and drafted 2 tokens. Early in an answer the
    read is charged as if the answer held ``ANSWER_PRIOR`` tokens; an answer that has gone on long is expected to go
    on, and carries it."""
    read = ReadingCosts()
    read.observe(300, 3.0)  # what the load-time check measured: reading costs a hundredth of a step a byte
    learning = TriggerLearning()
    learning.reading.costs = read
    policy = TriggerPolicy(book, "python", 16, ("model",), learning)
    policy.begin(DraftContext(text=b"#" * 2000))  # reading the prompt would cost 20 plain steps
    policy.observe(0, 0, 0, 1.0, "none")
    assert learning.reading.answer_tokens is None
    assert policy._reading(5) == pytest.approx(20.0 * 5 / (ANSWER_PRIOR - 1))  # at the answer's start
    for _ in range(1999):
        policy.observe(0, 0, 0, 1.0, "none")
    assert policy._reading(5) == pytest.approx(20.0 * 5 / 2000)  # two thousand tokens in, a tiny share


def _chat_turn(book: RuleBook, learning: TriggerLearning, messages: list[ChatMessage], answer: bytes) -> None:
    """A chat turn whose model is asked at its first cycle (reading the prompt in the time ``learning`` predicts) and
    again after ``answer`` was written."""
    policy = TriggerPolicy(book, "markdown", 16, ("model",), learning)
    policy.begin(DraftContext(messages=messages))
    for text in (b"", answer):
        policy.extend(text)
        policy.draft_length()
        seconds = learning.reading.costs.cost(policy.unread.total)
        policy.observe_reading(seconds)
        policy.observe(2, 2, 1, 1.0 + seconds, "model")


def test_a_chat_s_next_turn_charges_the_model_only_what_its_cache_does_not_hold(book: RuleBook) -> None:
    """A model drafter keeps the prefix a new prompt shares with what it read (a chat's earlier turns) and reads the
    rest. Charged every byte of the prompt, each turn priced the model's first read whole, and learned its few
    milliseconds as a read of every byte: the next reads were then priced at the average read (F32 pair: 0.15 to
    0.25 plain steps where a pass costs 0.05)."""
    question, answer, follow_up = "x" * 2000, "y" * 300, "z" * 40
    read = ReadingCosts()
    read.observe(10, 0.1 + 0.01 * 10)
    read.observe(1000, 0.1 + 0.01 * 1000)  # a read costs a tenth of a step and a hundredth per byte
    learning = TriggerLearning(MEMORY_BOUND)
    learning.reading.costs = read
    _chat_turn(book, learning, [ChatMessage("user", question)], answer.encode())
    turn = [ChatMessage("user", question), ChatMessage("assistant", answer), ChatMessage("user", follow_up)]
    second = TriggerPolicy(book, "markdown", 16, ("model",), learning)
    second.begin(DraftContext(messages=turn))
    assert second.unread.prompt == len(follow_up) + 1  # after the new line that joins the messages
    fresh = TriggerPolicy(book, "markdown", 16, ("model",), TriggerLearning(MEMORY_BOUND))
    fresh.begin(DraftContext(messages=turn))
    assert fresh.unread.prompt == len(question) + len(answer) + len(follow_up) + 2  # a new drafter reads it all
    _chat_turn(book, learning, turn, b"")
    assert read.cost(1000) == pytest.approx(0.1 + 0.01 * 1000, rel=0.01)  # its reads taught by the bytes read


@pytest.mark.parametrize(("prompt", "answer", "token_steps", "tried"), [
    (100, 25, 0.0, True),  # reading costs 1 plain step: a fully accepted draft carries its share
    (2000, 25, 0.0, False),  # 20 steps, over answers of 25 tokens: its share is more than the draft wins
    (2000, 10_000, 0.0, True),  # the same read over long answers: a tiny part of a step
    (100, 25, 0.5, False),  # each drafted token costs half a step (measured at load): only a draft all accepted pays
])
def test_a_model_s_first_try_at_an_event_is_charged_its_draft_and_its_share_of_the_read(
    book: RuleBook, prompt: int, answer: float, token_steps: float, tried: bool
) -> None:
    """Where the model was never asked, its first try must be able to win back, fully accepted, its drafting and
    its share of the prompt's read (which serves the rest of the answer), and that read also at the acceptance the
    load-time check assumes. Charged the whole read, the F16 pair's
    SmolLM2 was never tried on HumanEval on a 2-core AVX2 machine (a 348-byte prompt read in 4 plain steps), where
    alone it ran at 1.21x and the triggers at 0.96x."""
    read = ReadingCosts()
    read.observe(300, 3.0)
    learning = TriggerLearning(SIMPLE_MACHINE)
    learning.reading.costs = read
    learning.model_token_seconds = token_steps
    policy = TriggerPolicy(book, "python", 16, ("model",), learning)
    policy.begin(DraftContext(text=b"#" * prompt))
    learning.reading.answer_tokens = answer
    policy.observe(0, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT) == (PRIOR["python.comment"] if tried else 0)


# -- which drafter source to ask ---------------------------------------------------------------------------


@dataclass
class HybridMachine:
    """A hybrid drafter: lookup when it has a match (only at some places), else the model."""

    lookup: dict[bytes, float | None]  # None: lookup finds nothing there
    model: dict[bytes, float]
    asked: dict[bytes, list[str]] = field(default_factory=dict)

    def run(self, policy: TriggerPolicy, cycles: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        for _ in range(cycles):
            place = rng.choice(list(self.model))
            k = _at(policy, place)
            if not k:
                policy.observe(0, 0, 0, 1.0, "none")
                continue
            self.asked.setdefault(place, []).append(policy.source)
            p_lookup = self.lookup[place]
            # Checked, lookup's draft goes out where its first token is right (the model writes the same).
            checked_right = policy.source == CHECKED and p_lookup is not None and rng.random() < p_lookup
            if checked_right:
                policy.observe(k, k, 1 + _accepted(rng, k - 1, p_lookup), 1.0 + 0.3 * k, "lookup")
            elif policy.source in ("any", "lookup") and p_lookup is not None:
                policy.observe(k, k, _accepted(rng, k, p_lookup), 1.0 + 0.3 * k, "lookup")
            elif policy.source in ("any", "model", CHECKED):  # the model costs its own forward passes too
                policy.observe(k, k, _accepted(rng, k, self.model[place]), 1.0 + 0.5 * k, "model")
            else:
                policy.observe(k, 0, 0, 1.0, "none")  # asked lookup only, and it had nothing


def test_without_a_model_lookup_misses_do_not_keep_lookup_from_its_matches(book: RuleBook) -> None:
    """Code that lookup cannot copy (a new function) must not stop it where it can (an edited file)."""
    policy = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(MEMORY_BOUND))
    policy.observe(0, 0, 0, 1.0, "none")
    for _ in range(100):  # a new function: nothing to copy
        k = _at(policy, COMMENT)
        policy.observe(k, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT) > 0 and policy.source == "lookup"


# Verify profiles, a pass over n tokens in plain steps: memory-bound (F16 here) and compute-bound (Q4_K_M on 2 cores).
# The simple machine's own curve (a pass over a pending token and k drafted ones: 1 + 0.3 k plain steps), measured.
SIMPLE_MACHINE = VerifyProfile({1: 1.0, 2: 1.3, 3: 1.6, 5: 2.2, 17: 5.8, 65: 20.2}, "measured")
MEMORY_BOUND = VerifyProfile({1: 1.0, 2: 1.13, 3: 1.21, 5: 1.42, 17: 2.5, 65: 7.4}, "measured")
COMPUTE_BOUND = VerifyProfile({1: 1.0, 2: 1.96, 3: 2.61, 5: 4.51, 17: 5.98, 65: 19.0}, "measured")


def _lookup_rejected_in_new_code(book: RuleBook, cycles: int,
                                 profile: VerifyProfile = MEMORY_BOUND) -> TriggerLearning:
    """What a first answer of new code teaches: ``cycles`` at a comment, lookup's every draft there rejected (where a
    wrong blind try is dear, no first try is made: its probes are the drafts, after 32, 96 and 224 cycles)."""
    learning = TriggerLearning(profile)
    first = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    first.begin(DraftContext(text=b""))
    first.observe(0, 0, 0, 1.0, "none")
    for _ in range(cycles):
        k = _at(first, COMMENT)
        first.observe(k, k, 0, 1.0 + 0.3 * k, "lookup" if k else "none")
    return learning


def test_a_new_generation_keeps_what_an_event_taught_but_lets_new_evidence_move_it(book: RuleBook) -> None:
    """After HumanEval taught that lookup fails in new code, an edited file's code lines must win it back soon."""
    learning = _lookup_rejected_in_new_code(book, 60)
    low = learning.lookup.fresh.alpha
    assert low < 0.2 and learning.lookup_probing.probe_after > FIRST_PROBE_AFTER
    second = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    second.begin(DraftContext(text=b""))
    assert learning.lookup.fresh.alpha == pytest.approx(low)
    assert learning.lookup_probing.probe_after == FIRST_PROBE_AFTER
    for _ in range(3):
        learning.lookup.fresh.observe(4, 4)  # a copied file: accepted
    assert learning.lookup.fresh.alpha > 0.6


def test_what_lookup_drafts_teach_at_one_event_sets_its_lengths_at_every_event(book: RuleBook) -> None:
    """Whether lookup's copy is right depends on whether the answer copies its input, not on the syntax: an edited
    file's comments, copied right, let its first string draft long at once, not climb from the rule's 4 tokens."""
    policy = TriggerPolicy(book, "python", 64, ("lookup",))
    policy.observe(0, 0, 0, 1.0, "none")
    rng = random.Random(0)
    for _ in range(60):
        k = _at(policy, COMMENT)
        if k:
            policy.observe(k, k, _accepted(rng, k, 0.99), 1.0 + 0.1 * k, "lookup")
        else:
            policy.observe(0, 0, 0, 1.0, "none")
    assert policy.learning.lookup.fresh.alpha > 0.95
    first = _at(policy, STRING)
    assert first == PRIOR["python.string"]  # an event's first try: its rule
    policy.observe(first, first, first, 1.0 + 0.1 * first, "lookup")
    assert _at(policy, STRING) >= 12 and policy.source == "lookup"


@pytest.mark.parametrize(("profile", "tries"), [(COMPUTE_BOUND, False), (MEMORY_BOUND, True)],
                         ids=["compute-bound", "memory-bound"])
def test_before_lookup_has_drafted_its_first_try_is_judged_by_its_prior(
    book: RuleBook, profile: VerifyProfile, tries: bool
) -> None:
    """A ``ds4spec complete`` is a session's first answer: nothing taught yet. Tried at the rule's length there,
    lookup's blind first tries ran unseen HumanEval prompts one a process at 0.84x to 1.02x of plain, 0.93x over
    three (Q4_K_M on a 2-core AVX-512 machine: a pass over 3 tokens costs 2.7 plain steps). Where its prior pays (a
    flat verify curve) it is tried, no longer than the rule. In a long copy of the prompt its first draft at an
    event is as long as the copy's figure says pays, past the rule's length: an edit's first answer began each event
    at its rule's 2 to 4 tokens, 18 to 25 passes for 128 tokens against lookup alone's 15 to 17."""
    policy = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(profile))
    policy.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + EDITED_FILE.decode()),)))
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(b"def total(xs):\n")  # new code: nothing of it occurs in the prompt
    k = _at(policy, COMMENT)
    assert (0 < k <= PRIOR["python.comment"]) if tries else k == 0
    copying = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(profile))
    copying.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + EDITED_FILE.decode()),)))
    copying.observe(0, 0, 0, 1.0, "none")
    copying.extend(EDITED_FILE[:COPIED_LONG])
    k = _at(copying, COMMENT)
    assert copying.copies.copy == "long" and copying.source == "lookup"
    assert k == copying._lookup_best_up_to(16)[0] > PRIOR["python.comment"]


# The default pair on a 2-core CPU with AVX2 kernels (run 67): a pass over 4 tokens costs 1.85 plain steps, so
# lookup's prior (0.5) makes a first try of 3 tokens pay by a hair.
AVX2_RUN67 = VerifyProfile({1: 1.0, 2: 1.54, 3: 1.86, 4: 1.85, 6: 2.83, 8: 3.83, 12: 4.68, 16: 4.45, 24: 7.21,
                            32: 8.26, 48: 12.19, 64: 15.89}, "measured")
# The same pair on the machine's own AVX-512 FP16 kernels (run 67).
AVX512_RUN67 = VerifyProfile({1: 1.0, 2: 1.64, 3: 1.98, 4: 1.76, 6: 2.67, 8: 3.53, 12: 4.00, 16: 4.19, 24: 6.10,
                              32: 7.01, 48: 10.06, 64: 12.83}, "measured")


def test_a_first_try_that_only_the_prior_and_the_profile_say_pays_is_made_only_where_a_wrong_one_is_cheap(
    book: RuleBook,
) -> None:
    """Before any cycle of lookup's is measured, its first try is priced by the verify profile and the prior alone,
    and a gain of 1% is within that estimate's error: on HumanEval with AVX2 kernels such 3-token tries at new code
    lines were rejected in two runs of three, where lookup's cycles cost 1.96 to 2.01 plain steps, not the profile's
    1.85 (triggers 0.98x, lookup alone 1.00x). Once its cycles are measured, its figure decides as before."""
    learning = TriggerLearning(AVX2_RUN67)
    policy = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    policy.begin(DraftContext(text=b""))
    policy.observe(0, 0, 0, 1.0, "none")
    best, rate = policy._lookup_best_up_to(PRIOR["python.string"])
    assert best == 3 and 1.0 < rate < 1.02  # the prior says 3 tokens pay, by a hair
    assert _at(policy, STRING) == 0
    learning.costs.observe("lookup", 3, 1.85)  # an earlier answer's copy: a cycle as dear as the profile says
    second = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    second.begin(DraftContext(text=b""))
    assert _at(second, STRING) == 3 and second.source == "lookup"


# Run 47's H200 (default pair): a pass over 2 tokens costs about 3 plain steps, over 16 tokens 4.3.
H200_RUN47 = VerifyProfile({1: 1.0, 2: 2.94, 3: 3.02, 4: 3.06, 6: 3.33, 8: 3.40, 12: 4.47, 16: 4.30, 24: 6.09, 32: 6.30,
                      48: 7.49, 64: 10.89}, "measured")


@pytest.mark.parametrize("profile", [H200_RUN47, MEMORY_BOUND], ids=["h200", "memory-bound"])
def test_a_short_copys_first_draft_outside_prose_is_as_long_as_its_figure_says_pays(
    book: RuleBook, profile: VerifyProfile
) -> None:
    """Outside prose a short copy's figure (``SHORT_COPY_PRIOR``, held as several drafts) prices the risk that the
    copy ends, and lookup alone drafts by it. Capped at the rule's length (a code line's 2 tokens), the first try
    in a short copy could not pay where a pass over 2 tokens costs 3 plain steps: on an H200 the triggers waited 11
    plain steps through a copied line that lookup alone drafted at 15 tokens, 14 accepted (run 47, the default
    pair's edits: 26 cycles for 128 tokens against lookup alone's 13)."""
    policy = TriggerPolicy(book, "python", 64, ("lookup",), TriggerLearning(profile))
    policy.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + EDITED_FILE.decode()),)))
    policy.observe(0, 0, 0, 1.0, "none")
    answer = b"def total(xs):\n" + EDITED_FILE[EDITED_FILE.index(b"    return") :][:18]
    policy.extend(answer)
    k = _at(policy, answer)
    assert policy.copies.copy == "short" and policy.event == "python.code" and policy.source == "lookup"
    assert k == policy._lookup_best_up_to(64)[0] > PRIOR_CODE


def test_where_earlier_answers_say_lookup_copies_wrong_its_first_try_in_a_new_answer_is_short(
    book: RuleBook,
) -> None:
    """HumanEval's answers are about 26 tokens: one rejected first try of the rule's 6 tokens (a comment) costs 3.5
    plain steps there. A new answer may still copy its input, so lookup is tried, but short (blind, where a pass
    over 3 tokens costs little more than a step)."""
    learning = _lookup_rejected_in_new_code(book, 30)
    second = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    second.begin(DraftContext(text=b""))
    assert _at(second, STRING) == FIRST_TRY_SHORT < PRIOR["python.string"]
    second.observe(FIRST_TRY_SHORT, FIRST_TRY_SHORT, 0, 1.6, "lookup")
    learning.events.pop("python.string")  # another untried event, after this answer's own evidence: not tried
    assert _at(second, STRING) == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_event_asks_the_source_that_pays_there(book: RuleBook, seed: int) -> None:
    """Seed 0 starts the string event with an unlucky model draft: lookup's misses there must still count
    against lookup, or it would be asked (and probed) there forever."""
    machine = HybridMachine(lookup={COMMENT: 0.95, STRING: None}, model={COMMENT: 0.1, STRING: 0.9})
    machine.run(TriggerPolicy(book, "python", 16, ("lookup", "model")), 600, seed)
    # Lookup first; the model, whose figure here is the other events' while it has never drafted here, would take a
    # miss (there is none here), or check lookup's draft while lookup's figure dips below ``CHECK_SPARED``.
    assert set(machine.asked[COMMENT][-50:]) <= {"lookup", "any", CHECKED}
    assert machine.asked[COMMENT][-50:].count(CHECKED) <= 10
    # Lookup has no match at the string: the model drafts, asked alone or after lookup (whose misses cost nothing).
    assert set(machine.asked[STRING][-50:]) <= {"model", "any"}


@pytest.mark.parametrize(("model_runs", "asked"), [
    ([(5, 0)] * 4 + [(5, 1)] * 3, "any"),  # the model's first tokens: 0.43 (later ones no better)
    ([(5, 0)] * 19 + [(5, 1)], "lookup"),  # 0.05
])
def test_where_lookup_pays_best_but_often_finds_nothing_a_model_that_pays_takes_its_misses(
    book: RuleBook, model_runs: list[tuple[int, int]], asked: str
) -> None:
    """At a comment where lookup has a match seven times in ten and is then right 60% of the time, it is the best
    source, but each miss asked of it alone is a plain step: a model accepted 43% of the time there beats one, and
    drafts instead (``any``). Measured on unseen HumanEval prompts (F32 pair): lookup asked alone at comment lines found
    nothing in 20 of one answer's cycles, where SmolLM2 was accepted half the time. A model accepted 5% of the time
    does not pay, and lookup is asked alone."""
    policy = TriggerPolicy(book, "python", 16, ("lookup", "model"), TriggerLearning(MEMORY_BOUND))
    policy.observe(0, 0, 0, 1.0, "none")
    _at(policy, COMMENT)
    event = policy._current
    assert event is not None
    for _ in range(10):
        for k in (1, 2, 3, 4):
            policy.learning.costs.observe("lookup", k, 1.0 + 0.1 * k)
            policy.learning.costs.observe("model", k, 1.0 + 0.1 * k)
        policy.learning.costs.observe_plain(1.0)
        for run in ((5, 1), (5, 2)):  # lookup's drafts: 0.6
            policy.learning.lookup.fresh.observe(*run)
        for found in (1, 1, 1, 0, 1, 1, 0, 1, 1, 0):  # lookup had a match seven times in ten
            event.matches.observe(1, found)
        for run in model_runs:
            event.acceptance.observe(*run)
    event.attempts.update(lookup=30, model=30)
    assert _at(policy, COMMENT) > 0 and policy.source == asked


@pytest.mark.parametrize(("lookup_right", "asked"), [(True, {"any", "lookup"}), (False, {"model"})])
def test_where_the_model_pays_lookup_is_asked_first_if_its_matches_pay_more(
    book: RuleBook, lookup_right: bool, asked: set[str]
) -> None:
    """An event where the model pays (HumanEval's code lines) in an answer that copies its input (an edit): lookup,
    right elsewhere in this answer, is asked first at the model's length, so that its misses cost nothing and its
    matches show that this event is copied too (or alone, where its rate when it matches, times how often it has
    matched here, beats the model's). Where lookup's drafts are wrong, the model alone is asked."""
    policy = TriggerPolicy(book, "python", 16, ("lookup", "model"))
    policy.observe(0, 0, 0, 1.0, "none")
    assert _at(policy, COMMENT)  # the rule's first try at the comment: both untried, so lookup, else the model
    policy.observe(6, 6, 6, 1.0 + 0.5 * 6, "model")  # lookup had no match; the model's draft was right
    for _ in range(20):
        k = _at(policy, COMMENT)
        assert k > 0 and policy.source == "model"
        policy.observe(k, k, k - 1 if k > 1 else k, 1.0 + 0.5 * k, "model")  # the model pays here
    for _ in range(10):  # lookup's drafts at other places of the answer
        policy.learning.lookup.fresh.observe(12, 12 if lookup_right else 0)
        policy.learning.costs.observe("lookup", 12, 1.0 + 0.3 * 12)
    assert _at(policy, COMMENT) > 0 and policy.source in asked


def test_a_rule_naming_one_source_asks_only_that_one(book: RuleBook, tmp_path: Path) -> None:
    rules = tmp_path / "python.toml"
    rules.write_text('[family]\nname = "python"\n[events]\ncomment = { length = 5, drafter = "lookup" }\n'
                     'string = { length = 3, drafter = "model" }\n')
    custom = load_rulebook([rules], user_dir=tmp_path / "none")
    policy = TriggerPolicy(custom, "python", 16, ("lookup", "model"), TriggerLearning(MEMORY_BOUND))
    policy.observe(0, 0, 0, 1.0, "none")
    assert 0 < _at(policy, COMMENT) <= 5 and policy.source == "lookup"  # lookup's first try: no longer than the rule
    assert (_at(policy, STRING), policy.source) == (3, "model")
    model_only = TriggerPolicy(custom, "python", 16, ("model",), policy.learning)
    assert _at(model_only, COMMENT) == 5 and model_only.source == "model"  # the drafter has no lookup: its own


# -- end to end on a tiny real model ---------------------------------------------------------------------

PROMPTS = [
    b"def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n",
    b"import os\nimport sys\nimport os\n",
    b"class Node:\n    def __init__(self, value):\n        self.value = value\n",
    b"x = [1, 2, 3]\ny = [1, 2, 3]\nz = [",
]


class RightInCodeDrafter(Drafter):
    """Follows the text with its own tracker: proposes the target's own future text where the event is ``code``
    and confident nonsense everywhere else (strings, comments, line starts, operators...)."""

    name = "right-in-code"

    def __init__(self, book: RuleBook, future: bytes) -> None:
        self.book = book
        self.future = future
        self.offset = 0
        self.tracker = SyntaxTracker(book, "python")

    def begin(self, context: DraftContext) -> None:
        self.offset = 0
        self.tracker.begin(context.text or b"")

    def extend(self, committed: bytes) -> None:
        self.offset += len(committed)
        self.tracker.extend(committed)

    def propose(self, max_tokens: int) -> Draft:
        if self.tracker.event()[1] != "code":
            return Draft(b" nonsense" * max_tokens, "model", max_tokens)
        rest = self.future[self.offset : self.offset + 16 * max_tokens]
        return Draft(rest, "model", max_tokens) if rest else NO_DRAFT


class MeteredTriggerPolicy(TriggerPolicy):
    """Charges each cycle by the simple machine instead of the wall clock.

    The tiny model's cycles last half a millisecond and a shared 2-core machine adds spikes of a third of a
    second, so measured times would decide this test more than acceptance does; a real target's costs look
    like this (verifying k tokens costs 0.3 k plain steps more, drafting them 0.1 k).
    """

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float,
                source: str = "") -> None:
        super().observe(requested, drafted, accepted, 1.0 + 0.3 * drafted + 0.1 * requested, source)


def _add(totals: dict[str, EventCounts], spec: Finished) -> None:
    for event, counts in spec.stats.events.items():
        totals.setdefault(event, EventCounts()).merge(counts)


def test_end_to_end_drafting_stays_where_it_is_accepted_and_stops_elsewhere(
    book: RuleBook, tiny_bpe_gguf: Path
) -> None:
    learning = TriggerLearning()  # kept across generations, as an engine keeps it
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=1024, n_gpu_layers=0)) as target:
        rounds: list[dict[str, EventCounts]] = []
        for _ in range(2):
            totals: dict[str, EventCounts] = {}
            for prompt in PROMPTS:
                request = GenerationRequest(target.tokenizer.tokenize(prompt, add_special=True), max_tokens=160)
                plain = run_plain(target, request)
                drafter = RightInCodeDrafter(book, target.tokenizer.detokenize(plain.tokens))
                policy = MeteredTriggerPolicy(book, "python", 16, drafter.sources, learning)
                spec, _, guarded = run_spec(target, drafter, request, prompt, policy=policy)
                assert spec.tokens == plain.tokens and spec.reason == plain.reason
                assert guarded.failures.total == 0
                _add(totals, spec)
            rounds.append(totals)
    first, second = rounds
    code = second.pop("python.code")
    # Not every code draft is right: the drafter follows the text with a tracker of its own, and where it names
    # another event it writes nonsense (0.85 of drafted tokens kept, over longer drafts, once a draft's first token and
    # its later ones are learned apart; 0.94 before, in 142 cycles against 111).
    assert code.acceptance_rate > 0.8 and code.verify_passes_with_draft >= 50, code
    assert len(second) >= 3, "the gibberish of the tiny model holds other events too"
    elsewhere = EventCounts()
    for event, counts in second.items():
        assert counts.verify_passes_with_draft <= 1 + counts.cycles // 10, (event, counts)  # a probe or so
        elsewhere.merge(counts)
    assert elsewhere.accepted_tokens == 0 and elsewhere.cycles >= 80  # enough cycles there to show it stopped
    assert elsewhere.verify_passes_with_draft <= 0.1 * elsewhere.cycles, second
    before = sum(c.verify_passes_with_draft for e, c in first.items() if e != "python.code")
    assert before > elsewhere.verify_passes_with_draft  # the first round still tried the rules' priors


# -- the engine --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(book: RuleBook, tiny_bpe_gguf: Path) -> Iterator[Engine]:
    target = LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=1024, n_gpu_layers=0))
    settings = Settings(draft="lookup", warmup=0, max_tokens=64, language="python")
    with Engine.assemble(settings, target, GuardedDrafter(LookupDrafter()), book) as engine:
        yield engine


def test_the_engine_uses_triggers_in_the_prompts_language_and_learns_across_generations(engine: Engine) -> None:
    completion = engine.completion_prompt("def f(x):\n    return x\n\n\ndef f(x):\n")
    chat = engine.chat_prompt([])
    first, second = engine.policy(completion), engine.policy(chat)
    assert isinstance(first, TriggerPolicy) and isinstance(second, TriggerPolicy)
    assert first.tracker.family.name == "python" and second.tracker.family.name == "markdown"
    assert first.learning is second.learning
    assert first.sources == ("lookup",)


def test_an_engine_generation_reports_statistics_per_event(engine: Engine) -> None:
    events = list(engine.complete("import os\nimport sys\nimport os\nimport sys\n"))
    finished = events[-1]
    assert isinstance(finished, Finished)
    stats = finished.stats
    # Cycles in which lookup had no match weigh no length, and are counted as such (``NOTHING_TO_DRAFT``), as are
    # those in which none of its drafts could pay at any event (``NO_DRAFT_PAYS``).
    unlooked = (NOTHING_TO_DRAFT, NO_DRAFT_PAYS)
    assert stats.events and all(name.startswith("python.") or name in unlooked for name in stats.events)
    assert sum(c.cycles for c in stats.events.values()) == stats.target_forward_passes
    assert sum(c.drafted_tokens for c in stats.events.values()) == stats.drafted_tokens


def test_an_engine_generation_with_triggers_reports_its_speed_over_the_plain_rate(engine: Engine) -> None:
    """``--stats`` gives the speed over the plain step the policy measured, for the triggers as for the gate."""
    finished = list(engine.complete("import os\nimport sys\nimport os\nimport sys\n"))[-1]
    assert isinstance(finished, Finished)
    assert finished.stats.plain_step_seconds > 0
    assert finished.stats.speedup_over_plain > 0


def test_an_engine_without_rules_uses_one_gate(engine: Engine) -> None:
    ungated = Engine.assemble(engine.settings, engine.target, engine.drafter, None)
    assert isinstance(ungated.policy(engine.completion_prompt("x = 1\n")), GatedPolicy)


def test_where_a_wrong_blind_try_is_dear_lookup_waits_until_the_answer_is_seen_copying(book: RuleBook) -> None:
    """On a compute-bound target a rejected 2-token try costs 1.6 plain steps (HumanEval, Q4_K_M: blind first tries
    at four events cost 5% of 26-token answers). Once the answer's last 16 bytes occur in the prompt, it copies its
    input, and lookup is tried (at the length that lookup's acceptance while copying says pays best)."""
    from ds4spec.policy.copying import COPY_WINDOW

    learning = _lookup_rejected_in_new_code(book, 250, COMPUTE_BOUND)
    prompt = b"Rename total to grand_total in:\n" + STRING + b'al"\n    return sum(xs)\n'
    second = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    second.begin(DraftContext(text=prompt))
    second.extend(b"\ndef f(a, b):\n    z = 1")  # new code: no 16 bytes of it occur before
    assert _at(second, STRING) == 0
    second.extend(STRING[: COPY_WINDOW - 1])  # 15 bytes of a copy: not yet evidence
    assert _at(second, STRING) == 0
    second.extend(STRING[COPY_WINDOW - 1 : COPY_WINDOW])
    assert 0 < _at(second, STRING) == second._lookup_best_up_to(16)[0] and second.source == "lookup"
    second.extend(b"\n    z = 2" * 8)  # new text again, past where a copy is resumed: no first try is made
    learning.events.pop("python.string")
    assert _at(second, STRING) == 0


def test_an_answer_that_repeats_its_own_text_is_not_copying_its_input(book: RuleBook) -> None:
    """Lookup's drafts where an answer repeats itself were right with alpha 0.61 to 0.74, against 0.96 in a copy of
    the prompt (scripts/lookup_replay.py): no grounds for a first try on a compute-bound target."""
    learning = _lookup_rejected_in_new_code(book, 250, COMPUTE_BOUND)
    second = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    second.begin(DraftContext(messages=(ChatMessage("user", "write two tests"),)))
    line = b"    assert total([1, 2]) == 3\n"
    second.extend(line)
    assert _at(second, STRING) == 0
    second.extend(line[:16])
    assert _at(second, STRING) == 0 and second.copies.copy == "none"


# An edited file as a chat prompt has it: what an answer that copies its input repeats.
COPIED = 28  # the bytes up to the docstring's text: a short copy
EDITED_FILE = (b'def grand_total(xs):\n    """The sum of the prices in xs, each rounded to cents, with the tax of the'
               b' region added."""\n    return round(sum(xs) * 1.2, 2)\n')
COPIED_LONG = EDITED_FILE.index(b"the tax")  # a long copy (ds4spec.policy.copying.LONG_COPY)


def _copying_policy(book: RuleBook, profile: VerifyProfile = COMPUTE_BOUND, copied: int = COPIED) -> TriggerPolicy:
    """A second answer, after one where lookup's every draft was rejected, that has copied its prompt up to
    ``copied`` bytes, seen as a policy sees it, a cycle at a time (cycles that drafted: they teach nothing here)."""
    learning = _lookup_rejected_in_new_code(book, 250, profile)
    policy = TriggerPolicy(book, "python", 16, ("lookup",), learning)
    policy.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + EDITED_FILE.decode()),)))
    for at in range(0, copied, 8):
        policy.extend(EDITED_FILE[at : min(at + 8, copied)])
        policy.copies.look()
        policy.copies.drafting()
    return policy


def test_lookup_while_the_text_copies_is_judged_apart_from_its_drafts_in_new_text(book: RuleBook) -> None:
    """Replayed over the target's answers to 51 prompts (scripts/lookup_replay.py), lookup's drafts were right with
    alpha 0.96 while the text copied its prompt, in edits and code generation alike, and 0.45 elsewhere in code
    generation. An answer of new code that taught lookup fails must not keep it from an edited file's copy, nor the
    copy's success make it draft in new code."""
    policy = _copying_policy(book, MEMORY_BOUND, COPIED_LONG)
    low = policy.learning.lookup.fresh.alpha
    assert low < 0.2
    k = _at(policy, COMMENT)
    assert k > 0 and policy.source == "lookup" and policy.copies.copy == "long"
    for _ in range(5):
        policy.observe(k, k, k, 1.0 + 0.3 * k, "lookup")
        k = _at(policy, COMMENT)
    assert k >= 8 and policy.learning.lookup.copying.alpha > 0.9
    assert policy.learning.lookup.fresh.alpha == pytest.approx(low)
    policy.extend(b"\n    z = f(a, b)" * 5)  # new code, past where the copy would be resumed
    assert _at(policy, COMMENT) == 0


@pytest.mark.parametrize("profile", [MEMORY_BOUND, COMPUTE_BOUND], ids=["memory-bound", "compute-bound"])
def test_a_short_copy_is_drafted_by_its_own_figure_however_sure_long_copies_were(
    book: RuleBook, profile: VerifyProfile
) -> None:
    """A prose answer quoting a few words of its question copies its prompt too, but the replay put such short copies
    at alpha 0.64 to 0.75 (0.90 on edits), against 0.95 to 0.98 in long ones. Learned as one, the edits' long
    copies sent prose quotes 16-token drafts (Q4_K_M: 1 token accepted, then 0 of 9). A short copy's first draft is
    as long as its prior says; one rejected at its first token lowers that token's figure, not the later ones' (the
    copy broke where it began: ``ds4spec.policy.copying``), and a few such stop its drafts."""
    policy = _copying_policy(book, profile, COPIED_LONG)
    for _ in range(10):
        policy.learning.lookup.copying.observe(16, 16)  # long copies, all right
    long_k = _at(policy, COMMENT)
    policy.observe(long_k, long_k, long_k, 1.0 + 0.3 * long_k, "lookup")
    quote = TriggerPolicy(book, "python", 16, ("lookup",), policy.learning)
    quote.begin(DraftContext(messages=(ChatMessage("user", "Rename total in:\n" + EDITED_FILE.decode()),)))
    quote.extend(EDITED_FILE[:COPIED])
    k = _at(quote, EDITED_FILE[:COPIED])
    assert quote.copies.copy == "short" and 0 < k < long_k == 16
    figure = quote.learning.lookup.short_copy
    quote.observe(k, k, 0, 1.0 + 0.3 * k, "lookup")
    assert figure.first < SHORT_COPY_PRIOR == figure.alpha
    assert _at(quote, EDITED_FILE[:COPIED]) <= k
    rejected = 1
    while (k := _at(quote, EDITED_FILE[:COPIED])) and rejected < 10:
        quote.observe(k, k, 0, 1.0 + 0.3 * k, "lookup")
        rejected += 1
    assert k == 0 and rejected <= 4
    assert quote.learning.lookup.copying.alpha > 0.95  # untouched by the quote


QUESTION = "Why does the cache keep the oldest entries when the limit is reached?"


QUOTING_ANSWER = b"Because it must keep the oldest entries when the limit is reached"
QUOTE_AT = QUOTING_ANSWER.index(b"keep")  # "keep the oldest entries when the limit is reached": from the question


def _quoting(book: RuleBook, profile: VerifyProfile) -> TriggerPolicy:
    """A prose answer to QUESTION, 20 bytes into its quote of it, after a plain step that timed the yardstick; the
    model's tokens cost half a step each, so that at prose's poor acceptance it is not worth a try there."""
    learning = TriggerLearning(profile)
    learning.model_token_seconds = 0.5
    policy = TriggerPolicy(book, "markdown", 16, ("lookup", "model"), learning)
    policy.begin(DraftContext(messages=(ChatMessage("user", QUESTION),)))
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(QUOTING_ANSWER[:QUOTE_AT])
    assert _at(policy, QUOTING_ANSWER[:QUOTE_AT]) == 0 and policy.copies.copy == "none"
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(QUOTING_ANSWER[QUOTE_AT : QUOTE_AT + 20])
    return policy


def test_a_prose_answer_quoting_its_question_is_drafted_by_lookup_though_the_prose_rule_says_none(
    book: RuleBook,
) -> None:
    """Markdown prose starts undrafted, and probes ask the model. On the F16 pair's prose, lookup alone drafted the
    answers' quotes of their questions (1.07x) while the triggers never asked it there (1.02x). In a copy, lookup's
    figure is the copy's at any event: on a memory-bound target its first draft at the event is a short try, and
    once a quote's drafts are accepted it drafts longer ones."""
    policy = _quoting(book, MEMORY_BOUND)
    k = _at(policy, QUOTING_ANSWER[: QUOTE_AT + 20])
    assert policy.event == "markdown.prose" and policy.copies.copy == "short"
    assert 0 < k <= FIRST_TRY_SHORT and policy.source == "lookup"
    policy.observe(k, k, k, 1.0 + 0.3 * k, "lookup")
    policy.extend(QUOTING_ANSWER[QUOTE_AT + 20 : QUOTE_AT + 28])
    assert _at(policy, QUOTING_ANSWER[: QUOTE_AT + 28]) > k and policy.source == "lookup"
    policy.extend(b" (an LRU would not).")
    for _ in range(3):
        policy.learning.lookup.fresh_prose.observe(4, 0)  # lookup's drafts in prose out of copies: wrong
    assert _at(policy, b"(an LRU would not).") == 0 and policy.copies.copy == "none"
    assert policy.learning.lookup.quote.alpha > 0.8  # the quote's figure is its own
    assert policy.learning.lookup.short_copy.alpha == SHORT_COPY_PRIOR  # and not the edits' short copies'


def test_lookup_s_figure_in_prose_outside_copies_is_its_own_not_the_edits(book: RuleBook) -> None:
    """Outside copies, lookup's drafts in the edits' code go on with the file and are right; in prose they are matches
    of common words. Carried from the edits, that figure had the F16 pair's triggers ask lookup for 9 tokens at a
    time through a prose answer, in place of a model that paid there (run 52)."""
    learning = TriggerLearning(MEMORY_BOUND)
    for _ in range(10):
        learning.lookup.fresh.observe(16, 15)  # the edits' code, outside copies: right
    policy = TriggerPolicy(book, "markdown", 16, ("lookup", "model"), learning)
    policy.begin(DraftContext(messages=(ChatMessage("user", QUESTION),)))
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(b"Locking is a way to ")
    _at(policy, b"Locking is a way to ")
    assert policy.event == "markdown.prose" and policy.copies.copy == "none"
    assert policy.copies.figure() is learning.lookup.fresh_prose
    assert policy.copies.figure().alpha == pytest.approx(0.5)  # the prior, not the edits' 0.9
    policy.observe(2, 2, 0, 1.3, "lookup")  # its draft here rejected
    assert learning.lookup.fresh_prose.alpha < 0.5 and learning.lookup.fresh.alpha > 0.9


def test_on_a_compute_bound_target_a_quote_is_drafted_only_once_plain_steps_show_it_going_on(book: RuleBook) -> None:
    """A quote's first drafts are right 64 to 75% of the time (the replay), and on a compute-bound target (a pass over
    2 tokens at 1.6 to 2 plain steps) no length pays at that: at the edits' prior of 0.9 the default pair's triggers
    drafted prose quotes at 22 to 38% accepted and ran at 0.91x and 0.96x, lookup alone at 1.01x. Plain steps that
    write what the quote says next teach its figure, and then it is drafted."""
    policy = _quoting(book, COMPUTE_BOUND)
    at = QUOTE_AT + 20
    assert _at(policy, QUOTING_ANSWER[:at]) == 0 and policy.copies.copy == "short"
    assert policy.copies.figure().alpha == pytest.approx(QUOTE_PRIOR)
    plain_steps = 0
    while (k := _at(policy, QUOTING_ANSWER[:at])) == 0 and at < len(QUOTING_ANSWER):
        policy.observe(0, 0, 0, 1.0, "none")
        policy.extend(QUOTING_ANSWER[at : at + 2])  # the target goes on with the quote
        at, plain_steps = at + 2, plain_steps + 1
    assert k > 0 and policy.source == "lookup" and 2 <= plain_steps <= 5


NOTES = "Explain this line of the notes: the cache keeps the oldest entries when the limit is reached, because it"\
        " evicts only on writes."
QUOTED_AT_LENGTH = b'The notes say "the cache keeps the oldest entries when the limit is reached, because it evicts'


def test_a_long_quote_in_prose_is_drafted_by_the_quotes_figure_not_by_the_edits_long_copies(book: RuleBook) -> None:
    """An edited file's long copy goes on; a prose answer's quote ends where its own words resume, however long it
    was. At the edits' long-copy figure (0.999), the default pair's triggers sent the end of a 64-byte quote a
    26-token draft, rejected at its first token (Q4_K_M, AVX-512: about 14 plain steps lost)."""
    learning = TriggerLearning(COMPUTE_BOUND)
    for _ in range(10):
        learning.lookup.copying.observe(16, 16)  # the edits before: long copies, all right
    policy = TriggerPolicy(book, "markdown", 64, ("lookup",), learning)
    policy.begin(DraftContext(messages=(ChatMessage("user", NOTES),)))
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(QUOTED_AT_LENGTH)
    k = _at(policy, QUOTED_AT_LENGTH)
    assert policy.event == "markdown.prose" and policy.copies.copy == "long"
    assert k == 0 and policy.copies.figure() is learning.lookup.quote  # on this target no length pays at 0.7


@pytest.mark.parametrize("copied", [COPIED, COPIED_LONG])
@pytest.mark.parametrize(("target_writes", "moves"), [(b"The", "up"), (b"This", "down")])
def test_a_plain_step_while_copying_teaches_lookup_what_the_copy_would_have_drafted(
    book: RuleBook, copied: int, target_writes: bytes, moves: str
) -> None:
    """The copy says ``The sum`` (or ``the tax``) comes next: the target writing it is a one-token draft of lookup's
    accepted, for free; writing something else, one rejected."""
    policy = _copying_policy(book, copied=copied)
    assert EDITED_FILE[copied : copied + 3].lower() == b"the"
    target_writes = target_writes if copied == COPIED else target_writes.lower()
    _at(policy, COMMENT)
    acceptance = policy.copies.figure()  # a short copy's, or a quote's: the comment rewords the docstring

    def first_kept() -> float:  # a short copy learns its first token's figure apart
        return acceptance.alpha if acceptance.first is None else acceptance.first

    while first_kept() >= 0.3:
        acceptance.observe(8, 0)  # drafts rejected at an edit: lookup is out
    before = first_kept()
    assert _at(policy, COMMENT) == 0
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(target_writes)
    after = first_kept()
    assert (after > before) if moves == "up" else (after < before)


def test_plain_steps_through_a_copy_bring_lookup_back_after_rejections_at_an_edit(book: RuleBook) -> None:
    """Two drafts rejected at an edited line (a new name) took lookup out on a compute-bound target, and probes after
    8, 16 and 32 cycles left the rest of a copied docstring to plain steps (Q4_K_M edits: 79 cycles for 95 tokens,
    lookup alone 16). The plain steps' own evidence brings it back within a few tokens."""
    policy = _copying_policy(book, copied=COPIED_LONG)
    at = COPIED_LONG
    for _ in range(8):
        if not (k := _at(policy, COMMENT)):
            break
        policy.observe(k, k, 0, 1.0 + 0.3 * k, "lookup")
        policy.extend(EDITED_FILE[at : at + 1])
        at += 1
    assert k == 0
    steps = 0
    while (k := _at(policy, COMMENT)) == 0 and steps < 20:
        policy.observe(0, 0, 0, 1.0, "none")
        policy.extend(EDITED_FILE[at : at + 3])  # a token of the copy
        at, steps = at + 3, steps + 1
    assert 0 < steps <= 2 and k > 0 and policy.source == "lookup"  # probes alone: after 6 steps


@pytest.mark.parametrize(("profile", "gap"), [
    (COMPUTE_BOUND, (COMPUTE_BOUND.ratio(1) - 1) / PROBE_SHARE),  # a rejected one-token probe loses 0.96 plain steps
    (MEMORY_BOUND, FIRST_PROBE_AFTER),  # 0.13: the short back-off
], ids=["compute-bound", "memory-bound"])
def test_the_triggers_probe_lookup_in_new_text_as_rarely_as_a_rejected_probe_is_dear(
        book: RuleBook, profile: VerifyProfile, gap: float) -> None:
    """Counted as costing nothing, lookup's probes where its figure says no came every 8, 16, 32 cycles of each answer
    (default pair, prose and HumanEval on a 2-core AVX-512 machine: one to four rejected one-token probes an answer,
    each 0.9 plain steps lost)."""
    policy = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(profile))
    policy.begin(DraftContext(text=b""))
    policy.observe(0, 0, 0, 1.0, "none")
    drafted_at = []
    for cycle in range(400):
        k = _at(policy, COMMENT)
        if k:
            drafted_at.append(cycle)
        policy.observe(k, k, 0, profile.ratio(k), "lookup" if k else "none")
    # Counted from the answer's start: where a wrong blind first try is dear, none comes before the first probe.
    lulls = [b - a for a, b in itertools.pairwise([-1, *drafted_at]) if b > a + 1]
    assert len(lulls) >= 3 and min(lulls) >= gap and lulls[0] < 2 * gap, drafted_at


def _model_pays_at_code_lines(book: RuleBook) -> TriggerLearning:
    """What an answer of new code teaches on a memory-bound target: the model's drafts at code lines kept 80% of the
    time (HumanEval, where it pays), lookup never asked there; its reads cost a two-hundredth of a step a byte."""
    learning = TriggerLearning(MEMORY_BOUND)
    learning.model_token_seconds = 0.05
    learning.reading.costs.observe(300, 1.5)
    first = TriggerPolicy(book, "python", 16, ("lookup", "model"), learning)
    first.begin(DraftContext(text=b"def total(xs):\n"))
    first.observe(0, 0, 0, 1.0, "none")
    rng = random.Random(1)
    for _ in range(40):
        k = _at(first, b"def total(xs):\n    return sum(x")
        first.observe(k, k, _accepted(rng, k, 0.8), 1.0 + 0.1 * k, "model" if k else "none")
    assert first.event == "python.code" and first.source == "model"
    return learning


def test_an_edit_s_answer_opening_with_its_prompt_s_fence_is_drafted_by_lookup_not_the_model(book: RuleBook) -> None:
    """An edit's answer opens with the fence of the file it repeats. Judged as new text until 16 bytes were written,
    the F16 pair's triggers asked the model there (taught on HumanEval that it pays at code lines), which first read
    the whole prompt with its file, 1.6 to 2.6 plain steps for a draft of 1 or 2 tokens, and again at the code after
    the renamed name, where lookup alone resumed the copy: edits 3.97x against lookup alone's 5.11x (run 66). There,
    the model's read of the prompt is charged whole: lookup drafts the copy, and the read would serve the model's
    few drafts where it breaks. A question with no code in it gets the model."""
    learning = _model_pays_at_code_lines(book)
    edit = TriggerPolicy(book, "markdown", 16, ("lookup", "model"), learning)
    prompt = "Rename grand_total to cents_total in:\n\n```python\n" + EDITED_FILE.decode() + "```"
    edit.begin(DraftContext(messages=(ChatMessage("user", prompt),)))
    edit.extend(b"```python\n")  # the answer's first tokens
    assert edit.draft_length() > 0 and edit.source == "lookup" and edit.copies.copy == "short"
    edit.observe(4, 4, 3, 1.2, "lookup")
    edit.extend(b"def cents")  # lookup's copy went on to the renamed name, where it broke
    assert edit.draft_length() > 0 and edit.event == "python.code"
    assert edit.source == "lookup" and edit.copies.copy == "resume"
    fresh = TriggerPolicy(book, "markdown", 16, ("lookup", "model"), learning)
    fresh.begin(DraftContext(messages=(ChatMessage("user", "Write a function that sums prices."),)))
    fresh.extend(b"```python\ndef cents")
    assert fresh.draft_length() > 0 and fresh.source == "model" and fresh.copies.copy == "none"


@pytest.mark.parametrize(("profile", "tried"), [
    (COMPUTE_BOUND, False),  # a pass over 6 tokens costs 4.6 steps: 90% accepted would win 1.5 steps of 40 tokens
    (MEMORY_BOUND, True),  # 1.5 steps: it would win 25
])
def test_a_model_s_first_try_that_must_read_the_prompt_is_a_bet_at_two_to_one(
    book: RuleBook, profile: VerifyProfile, tried: bool
) -> None:
    """Its share of the read won back, the first try must also win, if the model pays at the acceptance the load-time
    check assumes, more over the answer's tokens left than a rejected one loses with its whole read (here 3 plain
    steps). Measured on HumanEval with the default pair on a 2-core AVX-512 FP16 machine: tries that would have
    written the answer 2 to 17% faster at 90% took 6 to 9.5 plain steps each when rejected (triggers 0.93x and
    0.94x, run 66)."""
    read = ReadingCosts()
    read.observe(300, 3.0)
    learning = TriggerLearning(profile)
    learning.reading.costs = read
    policy = TriggerPolicy(book, "python", 16, ("model",), learning)
    policy.begin(DraftContext(text=b"#" * 300))
    learning.reading.answer_tokens = 40.0
    policy.observe(0, 0, 0, 1.0, "none")
    policy.tracker.begin(COMMENT)
    k = PRIOR["python.comment"]
    tokens = expected_tokens(OPTIMISTIC_ALPHA, k)
    assert tokens / (policy._model_cycle(k) + policy._reading(tokens)) > 1.0  # its share alone would let it try
    assert _at(policy, COMMENT) == (k if tried else 0)


@pytest.mark.parametrize(("read_steps", "answer", "tried"), [(5.0, 45.0, False), (1.0, 200.0, True)],
                         ids=["dear-read", "cheap-read-long-answer"])
def test_a_model_s_first_try_is_a_bet_won_at_the_acceptance_its_figure_expects(
    book: RuleBook, read_steps: float, answer: float, tried: bool
) -> None:
    """What the bet wins is counted at the acceptance the event's figure expects (a prior of 0.8 before any draft),
    not at the load-time check's 90%: counted at 90%, a 4-token try at a HumanEval line whose prompt took 5.8 plain
    steps to read won 7.74 steps against 7.65 to lose, and was made on the default pair (rejected: 7.25 plain steps,
    the runs at 0.92x and 0.94x; run 68). Where the read is cheap and the answer long, the try is still made."""
    read = ReadingCosts()
    read.observe(500, read_steps)
    learning = TriggerLearning(AVX512_RUN67)
    learning.reading.costs = read
    learning.model_token_seconds = 0.19  # SmolLM2's drafted token, in plain steps
    policy = TriggerPolicy(book, "python", 16, ("model",), learning)
    policy.begin(DraftContext(text=b"#" * 500))
    learning.reading.answer_tokens = answer
    policy.observe(0, 0, 0, 1.0, "none")
    policy.tracker.begin(STRING)
    k, left = PRIOR["python.string"], learning.reading.tokens_left()
    lost = policy._rejected_try_steps(k, 1.0)
    assert left * (1 - 1 / policy._model_rate(OPTIMISTIC_ALPHA, k)) > lost  # won at 90%, by a hair where dear
    assert _at(policy, STRING) == (k if tried else 0)


def _answers_asking_the_model_at_one_comment(book: RuleBook, learning: TriggerLearning, answers: int) -> list[bool]:
    """Answers of 25 tokens to a 300-byte prompt, each asking the model where the policy says so at its second cycle
    (a comment), whose draft then writes 3 tokens in a cycle of 1.5 plain steps (its read aside), the rest plain
    steps: whether each answer asked the model."""
    asked = []
    for answer in range(answers):
        policy = TriggerPolicy(book, "python", 16, ("model",), learning)
        policy.begin(DraftContext(text=bytes([ord("a") + answer]) * 300))  # a prompt the drafter has not read
        policy.observe(0, 0, 0, 1.0, "none")
        k = _at(policy, COMMENT)
        asked.append(k > 0)
        if k:
            seconds = learning.reading.costs.cost(policy.unread.total)
            policy.observe_reading(seconds)
            policy.observe(k, k, 2, 1.5 + seconds, "model")
        else:
            policy.observe(0, 0, 0, 1.0, "none")
        for _ in range(23):
            policy.observe(0, 0, 0, 1.0, "none")
    return asked


@pytest.mark.parametrize(("read_steps", "asked_at_last"), [(3.0, False), (0.3, True)],
                         ids=["dear-read", "cheap-read"])
def test_a_prompt_s_read_is_weighed_against_what_the_model_s_drafts_won_after_earlier_reads(
    book: RuleBook, read_steps: float, asked_at_last: bool
) -> None:
    """Where the model drafts once in an answer, its drafts win 1.5 plain steps of 25 tokens, however well that
    event's drafts pay (a memory-bound target): a read of the prompt costing 3 plain steps is not won back, and once
    answers measured that, the model is not asked to read the next prompt. Estimated from the event's figure, as if
    the model wrote every token left, the default pair's SmolLM2 read 12 of 15 unseen HumanEval prompts, for 2.5 to
    8 plain steps each (2-core AVX-512, run 70: the answers after those reads won 0.07 plain steps a token, -0.05 in
    the short ones; the F16 pair's, 0.2 to 0.6)."""
    read = ReadingCosts()
    read.observe(300, read_steps)
    learning = TriggerLearning(MEMORY_BOUND)
    learning.reading.costs = read
    asked = _answers_asking_the_model_at_one_comment(book, learning, 8)
    assert asked[0], asked  # what the event's figure estimates pays
    assert asked[-1] == asked_at_last, asked


def test_a_model_that_offers_nothing_teaches_a_miss_not_a_cheap_long_cycle(book: RuleBook) -> None:
    """A model asked for 15 tokens that offers none usable costs the target a plain step and the drafter its call:
    no measure of a cycle drafting 15. Learned as one, it priced such cycles at 1.43 plain steps where the pass over
    them alone costs 4.19, and the default pair's SmolLM2 was then asked for 15 tokens at every event of HumanEval
    (0.84x, run 67)."""
    policy = TriggerPolicy(book, "python", 16, ("model",), TriggerLearning(COMPUTE_BOUND))
    policy.observe(0, 0, 0, 1.0, "none")
    before = policy.learning.costs.tables["model"].cost(15)
    assert _at(policy, COMMENT) > 0
    policy.observe(15, 0, 0, 1.1, "none")
    table = policy.learning.costs.tables["model"]
    assert not table.measured(15) and table.cost(15) == pytest.approx(before)
    assert before >= COMPUTE_BOUND.ratio(15)  # at least the pass over them (a plain step: 1 second)
    event = policy.learning.events["python.comment"]
    assert event.attempts["model"] == 1 and event.acceptance.first < 0.5  # a draft whose first token was rejected


DOCUMENTED = (b'def longest(words):\n    """Find the longest word in the list, the first one on a tie."""\n'
              b'    # keep the first of equal lengths\n    best = ""\n    for word in words:\n')


@pytest.mark.parametrize(("answer", "rewording"), [
    (b"        # Find the longest word", True),  # the docstring's words in a comment: the answer's own sentence
    (b"        # keep the first of equal", False),  # the prompt's comment, copied
])
def test_a_comment_repeating_the_docstring_s_words_is_judged_as_a_quote_and_one_repeating_a_comment_as_a_copy(
    book: RuleBook, answer: bytes, rewording: bool
) -> None:
    """Unseen HumanEval answers' comments repeat a few words of their docstrings ("# Find the longest" after "Find
    the longest postfix") and go on in words of their own: judged as short copies, at the edits' 0.9, each drew a
    first draft of 11 to 15 tokens rejected at its first token (the replay of 56 answers, AMD EPYC profile:
    HumanEval/20 0.95x, /59 0.98x; 0.98x and 1.00x judged as quotes). A comment that repeats the prompt's comment
    copies it (HumanEval/38: a function's comment, then its code, 95 of 114 drafted tokens kept)."""
    policy = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(COMPUTE_BOUND))
    policy.begin(DraftContext(text=DOCUMENTED))
    policy.observe(0, 0, 0, 1.0, "none")  # a plain step: the yardstick
    policy.extend(answer)
    k = _at(policy, DOCUMENTED + answer)
    assert policy.event == "python.comment" and policy.copies.copy == "short"
    assert policy.copies.rewording is rewording
    if rewording:  # on a compute-bound target no length pays at a quote's 0.7
        assert policy.copies.figure() is policy.learning.lookup.quote and k == 0
    else:
        assert policy.copies.figure() is policy.learning.lookup.short_copy and k > PRIOR["python.comment"]


PALINDROME = (b"def is_palindrome(string: str) -> bool:\n    return string == string[::-1]\n\n\n"
              b"def make_palindrome(string: str) -> str:\n"
              b"    \"\"\" The shortest palindrome that begins with string. \"\"\"\n")
# HumanEval/10's answer (F32 pair, run 79): its last 16 bytes occur in the prompt, in another function's line.
NEW_CODE = b"    if not string:\n        return string"


HALF_KEPT = [(5, 0), (5, 2)]  # the model's first tokens kept half the time here, and its later ones


def _after_new_code(book: RuleBook, answer: bytes, model_runs: list[tuple[int, int]],
                    lookup_shown_right: bool = False) -> TriggerPolicy:
    """A memory-bound target's triggers, a completion of ``PALINDROME`` gone on with ``answer``, where every length
    has cost about a step and the model's drafts at the answer's last event went as ``model_runs`` (ten times)."""
    policy = TriggerPolicy(book, "python", 16, ("lookup", "model"), TriggerLearning(MEMORY_BOUND))
    policy.begin(DraftContext(text=PALINDROME))
    policy.observe(0, 0, 0, 1.0, "none")
    policy.extend(answer)
    assert _at(policy, PALINDROME + answer) >= 0 and policy.copies.copy == "short"
    event = policy._current
    assert event is not None
    for _ in range(10):
        for k in (1, 2, 3, 4, 6, 8):
            policy.learning.costs.observe("lookup", k, 1.0 + 0.1 * k)
            policy.learning.costs.observe("model", k, 1.0 + 0.1 * k)
        policy.learning.costs.observe_plain(1.0)
        for run in model_runs:
            event.acceptance.observe(*run)
        if lookup_shown_right:
            policy.learning.lookup.short_copy.observe(8, 8)
    event.attempts.update(lookup=10, model=10)
    return policy


@pytest.mark.parametrize(("model_runs", "lookup_shown_right", "asked"), [
    (HALF_KEPT, False, "checked"),
    ([(5, 0)] * 19 + [(5, 1)], False, "lookup"),  # the model does not pay here: no check is worth its cost
    (HALF_KEPT, True, "lookup"),  # this answer's short copies have been right: none to fear
], ids=["model-pays", "model-does-not-pay", "copies-shown-right"])
def test_in_new_code_a_short_copy_goes_out_only_where_a_model_that_pays_agrees(
    book: RuleBook, model_runs: list[tuple[int, int]], lookup_shown_right: bool, asked: str
) -> None:
    """On HumanEval prompts tuning never saw (F32 pair, run 79), 26 of the triggers' 31 lookup drafts on code and
    comment lines were rejected at their first token: an answer's `return string` went on with the `` == string[::-1]``
    of another function. Where the model pays, lookup's draft is checked against the model's first bytes first."""
    policy = _after_new_code(book, NEW_CODE, model_runs, lookup_shown_right)
    assert _at(policy, PALINDROME + NEW_CODE) > 0 and policy.source == asked


def test_a_comment_s_lookup_draft_is_not_checked(book: RuleBook) -> None:
    """A comment rewords the prompt in words neither source knows: turned down there, lookup's drafts became the
    model's, as often rejected (F32 pair, run 79, with one pool for every event, whose figure they then also dragged
    down at the code lines: HumanEval/19 in 126 target passes for 128 tokens, against 31 where the model drafted on)."""
    comment = NEW_CODE + b"\n\n    # The shortest palindrome that begins with"  # the docstring's words: a short copy
    policy = _after_new_code(book, comment, HALF_KEPT)
    assert _at(policy, PALINDROME + comment) > 0 and policy.event == "python.comment"
    assert policy.source in ("lookup", "any")
