"""A model's acceptance at a syntax event starts from its figure at the other events and follows its own drafts.

The triggers learn the model's acceptance per event; an event seen once or twice is judged by the other events'
figure (``ds4spec.policy.pooling``), not by a fixed one half that one rejection halves.
"""

from __future__ import annotations

import pytest
from measured_profiles import F32_PROFILE

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.acceptance import LATER_TOKENS_PRIOR, AcceptanceModel
from ds4spec.policy.pooling import (
    POOL_WEIGHT,
    AcceptancePool,
    PooledAcceptance,
    SplitAcceptance,
)
from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.policy.trigger_learning import TriggerLearning
from ds4spec.policy.triggers import TriggerPolicy

CODE = b"def total(xs):\n    return sum(x for x in "
COMMENT = b"def total(xs):\n    # the sum of "
STRING = b"def total(xs):\n    name = 'ab"
NEWLINE = b"def total(xs):\n    total = 0\n"


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> RuleBook:
    return load_rulebook(user_dir=tmp_path_factory.mktemp("no-user-rules"))


def _events(*names: str) -> tuple[AcceptancePool, list[PooledAcceptance]]:
    pool = AcceptancePool()
    return pool, [PooledAcceptance(pool) for _ in names]


def test_with_no_drafts_anywhere_an_event_has_the_prior() -> None:
    _, (event,) = _events("code")
    assert event.alpha == pytest.approx(AcceptanceModel().alpha)


def test_a_new_event_starts_from_the_model_s_figure_at_the_other_events() -> None:
    _, (code, comment) = _events("code", "comment")
    for _ in range(20):
        code.observe(5, 4)  # 4 of 5 accepted: alpha 0.8 at code lines
    assert comment.alpha == pytest.approx(code.alpha, abs=0.05)
    assert comment.alpha > 0.7


def test_an_event_s_own_rejection_is_counted_once() -> None:
    """Its own evidence is left out of the figure it is drawn toward: one rejected first draft, with nothing seen
    elsewhere, gives what the fixed prior gave (1 accepted of 3 trials), not less."""
    _, (event,) = _events("comment")
    event.observe(2, 0)
    alone = AcceptanceModel()
    alone.observe(2, 0)
    assert event.alpha == pytest.approx(alone.alpha, abs=0.01)  # the prior alone decays there


def test_one_rejection_at_a_new_event_leaves_it_near_the_model_s_figure_elsewhere() -> None:
    _, (code, comment) = _events("code", "comment")
    for _ in range(20):
        code.observe(5, 4)
    comment.observe(2, 0)
    assert comment.alpha == pytest.approx(code.alpha * POOL_WEIGHT / (1 + POOL_WEIGHT), abs=0.02)
    assert comment.alpha > 0.5  # the fixed prior put it at 0.33


def test_an_event_s_own_drafts_take_over_as_they_come() -> None:
    _, (code, string) = _events("code", "string")
    for _ in range(20):
        code.observe(5, 4)
        string.observe(3, 0)
    assert string.alpha < 0.1 and code.alpha > 0.75


def test_a_retired_event_leaves_the_pool() -> None:
    pool, (code, comment) = _events("code", "comment")
    for _ in range(20):
        code.observe(5, 0)
    code.retire()
    assert comment.alpha == pytest.approx(AcceptanceModel().alpha)
    assert pool.alpha_without(0.0, 0.0) == pytest.approx(AcceptanceModel().alpha)


def test_an_event_that_carries_evidence_into_a_new_generation_goes_by_it_alone() -> None:
    """Pooling is for events whose evidence is all of this answer: one that learned in earlier answers goes by what
    it learned there, as with the fixed prior (pooled there too, learned policies asked the model at more places and
    ran slower)."""
    _, (code, comment, string) = _events("code", "comment", "string")
    for _ in range(20):
        code.observe(5, 4)
    comment.observe(2, 1)
    pooled = comment.alpha
    alone = AcceptanceModel()
    alone.observe(2, 1)
    for event in (code, comment, string):
        event.carry_over(6.0)
    assert code.own.evidence[1] == pytest.approx(6.0)  # lightened, so that new evidence moves it quickly
    assert comment.alpha == pytest.approx(alone.alpha) and comment.alpha < pooled - 0.1
    assert code.alpha > 0.75
    assert string.alpha == pytest.approx(string.pool.alpha_without(0.0, 0.0))  # still nothing of its own
    code.observe(3, 0)
    assert code.alpha < 0.7


def _measured_plain_step(policy: TriggerPolicy) -> None:
    policy.begin(DraftContext(text=b""))
    policy.tracker.begin(CODE)
    assert policy.draft_length() == 0  # the first cycle measures a plain step
    policy.observe(0, 0, 0, 1.0, "none")


def test_the_triggers_judge_a_model_s_first_draft_at_an_event_by_its_drafts_at_the_others_of_its_kind(
    book: RuleBook
) -> None:
    """Code lines' drafts, all accepted, carry to a string's first draft; a comment's words are judged apart."""
    policy = TriggerPolicy(book, "python", 16, ("model",))
    _measured_plain_step(policy)
    for _ in range(30):
        policy.tracker.begin(CODE)
        k = policy.draft_length()
        assert policy.event == "python.code" and k > 0
        policy.observe(k, k, k, 1.0 + 0.05 * k, "model")  # every code line's draft accepted whole
    policy.tracker.begin(STRING)
    policy.draft_length()
    assert policy.event == "python.string" and policy._current is not None
    assert policy._current.acceptance.alpha > 0.9 and policy._current.acceptance.first > 0.9
    policy.tracker.begin(COMMENT)
    policy.draft_length()
    assert policy.event == "python.comment" and policy._current is not None
    assert policy._current.acceptance.first == pytest.approx(AcceptanceModel().alpha)


@pytest.mark.parametrize("kinds", ["apart", "pooled together"])
def test_a_model_s_rejected_words_do_not_price_it_out_of_the_code_lines(book: RuleBook, kinds: str) -> None:
    """Run 79, HumanEval/19 (F32 pair, a fresh policy): the model's first drafts, in the answer's opening comment, were
    rejected at their first token three times in four; pooled with them, the code lines after it were priced at a third
    of first tokens kept, and the dictionary that followed went by in plain steps (126 target passes, against 60 where
    the model drafted there). Pooled apart, a code line is judged by the model's prior, and the model asked."""
    learning = TriggerLearning(F32_PROFILE)
    for nbytes in (40, 200, 400):  # the model's reads (a plain step is a second here): 0.1 s and 2 ms a byte
        learning.reading.costs.observe(nbytes, 0.1 + 0.002 * nbytes)
    policy = TriggerPolicy(book, "python", 16, ("lookup", "model"), learning)
    if kinds == "pooled together":
        policy._pool_kind = lambda family, event: "code"  # type: ignore[method-assign]
    _measured_plain_step(policy)
    policy.tracker.begin(COMMENT)
    assert policy.draft_length() > 0 and policy.source in ("model", "any")
    policy.observe_reading(0.15)
    policy.observe(6, 1, 0, 1.6, "model")  # a token of the model's, rejected: a cycle of 1.6 plain steps
    assert policy._current is not None and policy.event == "python.comment"
    for drafted, accepted in ((2, 1), (1, 0), (1, 0)):  # its next drafts in the comment's words
        policy._current.acceptance.observe(drafted, accepted)
    policy.extend(b"    # Create a dictionary")
    asked = []
    for text in (NEWLINE, STRING, CODE):
        policy.extend(b"code ")  # the model, not asked, has this to read before its next draft
        policy.tracker.begin(text)
        k = policy.draft_length()
        asked.append(policy.source if k else "none")
        policy.observe(k, 0, 0, 1.0, "none")  # no source heard from: the next place's choice is its own
    model_asked = [source in ("model", "any") for source in asked]
    assert model_asked == [kinds == "apart"] * 3, asked


def test_where_lookup_s_rare_matches_barely_pay_a_model_accepted_elsewhere_is_asked(book: RuleBook) -> None:
    """At a code line the model has not drafted, lookup's one match taught the event that lookup pays a little; the
    model, accepted after newlines, is judged by that figure and asked, not left untried while lookup pays at all."""
    policy = TriggerPolicy(book, "python", 16)
    policy.tracker.begin(NEWLINE)
    assert policy.draft_length() == 0
    policy.observe(0, 0, 0, 1.0, "none")
    for _ in range(12):
        policy.tracker.begin(NEWLINE)
        k = policy.draft_length()
        assert k > 0
        policy.observe(k, k, k, 1.0 + 0.05 * k, "model")  # a memory-bound target: a pass over k costs about a step
    policy.tracker.begin(CODE)
    k = policy.draft_length()
    assert policy.event == "python.code" and k > 0
    policy.observe(k, 2, 1, 1.05, "lookup")  # lookup had a match here, half right
    asked: list[str] = []
    for _ in range(6):
        policy.tracker.begin(CODE)
        k = policy.draft_length()
        asked.append(policy.source if k else "none")
        policy.observe(k, 0, 0, 1.0, "none")  # lookup has no match, and the model is not heard from
    assert asked[0] in ("model", "any") and "lookup" not in asked, asked  # at once, and lookup only where it matches


# -- first tokens and later ones ----------------------------------------------------------------------------


def _split() -> SplitAcceptance:
    return SplitAcceptance(AcceptancePool(), AcceptancePool(LATER_TOKENS_PRIOR))


def test_a_draft_s_first_token_and_its_later_ones_are_learned_apart() -> None:
    """Half the drafts lose their first token, the rest are kept whole: a first token is kept half the time, a later
    one (once the ones before were kept) almost always. One figure for both would say 0.77."""
    event = _split()
    for _ in range(10):
        event.observe(3, 0)
        event.observe(3, 3)
    assert event.first == pytest.approx(0.5, abs=0.05)
    assert event.alpha > 0.9


def test_later_tokens_not_yet_seen_are_taken_to_be_kept_as_a_model_s_were() -> None:
    """One-token drafts show nothing of the later tokens: their figure stays at the prior, SmolLM2's measured one,
    while the first tokens' follows the drafts."""
    event = _split()
    for _ in range(10):
        event.observe(1, 1)
        event.observe(1, 0)
    assert event.alpha == pytest.approx(LATER_TOKENS_PRIOR) and event.first == pytest.approx(0.5, abs=0.05)


def test_kept_one_token_drafts_leave_the_later_figure_no_lower_than_the_first_s() -> None:
    """Three unlucky longer drafts put the later tokens' figure at a third; one-token drafts, all kept since, teach it
    nothing: without the floor the event would stay at one token a draft for good."""
    event = _split()
    for _ in range(3):
        event.observe(3, 1)
    assert event.later_tokens.alpha < 0.4
    for _ in range(20):
        event.observe(1, 1)
    assert event.alpha == event.first > 0.8


@pytest.mark.parametrize(("runs", "longer"), [
    ([(1, 0)] * 3 + [(2, 2)], True),  # first tokens kept a quarter of the time, later ones always (one figure: 0.4)
    ([(1, 0)] * 3 + [(2, 1)], False),  # a later token no more often than a first
])
def test_where_a_model_s_first_tokens_are_often_wrong_but_its_runs_are_right_it_drafts_more_than_one(
    book: RuleBook, runs: list[tuple[int, int]], longer: bool
) -> None:
    """Measured on unseen HumanEval prompts (F32 pair, SmolLM2, one fresh policy each): 0.60 of first tokens kept,
    0.80 of later ones, in an answer whose one figure per event fell to about one half: the triggers drafted one token
    a cycle for 128 tokens (80 target passes, against 54 for SmolLM2 alone drafting two). Judged by one figure (0.4
    here) one token a draft would pay best; it does where later tokens are kept no more often than first ones."""
    policy = TriggerPolicy(book, "python", 16, ("model",), TriggerLearning(F32_PROFILE))
    policy.tracker.begin(CODE)
    assert policy.draft_length() == 0
    policy.observe(0, 0, 0, 1.0, "none")
    for k in (1, 2, 3, 4, 6, 8):
        for _ in range(3):
            policy.learning.costs.observe("model", k, F32_PROFILE.ratio(k) + 0.05 * k)
    policy.tracker.begin(CODE)
    policy.draft_length()
    event = policy._current
    assert event is not None
    for _ in range(10):
        for run in runs:
            event.acceptance.observe(*run)
    policy.tracker.begin(CODE)
    k = policy.draft_length()
    assert policy.source == "model"
    assert k > 1 if longer else k == 1
