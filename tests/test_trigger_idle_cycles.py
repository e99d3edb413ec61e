"""Where lookup alone is asked and nothing it could draft pays, the triggers skip the syntax event and decide as before;
where no gain could win back the model's read of its prompt, they skip pricing each length with it.

Lexing the current line for its event was most of the triggers' own cost a cycle: on an H200 their loop took 0.33 to
0.38 ms a cycle on HumanEval against lookup alone's 0.20 to 0.22, neither drafting. The oracle is the policy that
always looks the event up: fed the same text and the same verdicts, both must decide every cycle alike.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from ds4spec.core.drafting import DraftContext
from ds4spec.core.events import NO_DRAFT_PAYS
from ds4spec.policy.probing import PROBE_SHARE
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.policy.syntax import SyntaxTracker
from ds4spec.policy.trigger_learning import EventModel, TriggerLearning
from ds4spec.policy.triggers import TriggerPolicy

# A pass over n tokens in plain steps: an H200 (run 40), a 2-core AVX-512 CPU with Q4_K_M, F16 there, and no profile
# measured (lengths not yet measured are estimated from a prior cost per token).
H200 = VerifyProfile({1: 1.0, 2: 2.15, 3: 2.17, 5: 2.38, 9: 2.92, 17: 3.91, 33: 4.90, 65: 8.64}, "measured")
COMPUTE_BOUND = VerifyProfile({1: 1.0, 2: 1.96, 3: 2.61, 5: 4.51, 17: 5.98, 65: 19.0}, "measured")
MEMORY_BOUND = VerifyProfile({1: 1.0, 2: 1.13, 3: 1.21, 5: 1.42, 17: 2.5, 65: 7.4}, "measured")
PRIOR = VerifyProfile.prior()

PROMPT = b'''import os


def read_config(path: str) -> dict[str, str]:
    """Reads KEY=VALUE lines, skipping comments and blank lines."""
    config = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config
'''
NEW_CODE = b'''def merge(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    # later keys win, as the shell would have it
    merged = dict(base)
    for name, value in extra.items():
        if value:
            merged[name] = value
    return merged


def render(config: dict[str, str]) -> str:
    return "\\n".join(f"{k}={v}" for k, v in sorted(config.items()))
'''


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> RuleBook:
    return load_rulebook(user_dir=tmp_path_factory.mktemp("no-user-rules"))


class AlwaysLooksUp(TriggerPolicy):
    """The oracle: the syntax event looked up every cycle."""

    def _lookup_idle(self) -> bool:
        return False


def _answers(seed: int) -> list[list[tuple[bytes, bool]]]:
    """Three answers, each new code and copies of the prompt in turn: (text, whether it copies)."""
    rng = random.Random(seed)
    answers = []
    for _ in range(3):
        pieces = []
        for copies in rng.sample([True, False, False, True, False], 5):
            source = PROMPT if copies else NEW_CODE
            start = rng.randrange(0, len(source) - 120)
            pieces.append((source[start : start + rng.randrange(60, 120)], copies))
        answers.append(pieces)
    return answers


def _replay(policy: TriggerPolicy, profile: VerifyProfile, seed: int) -> list[tuple[int, str]]:
    """Decisions over the answers, a token being 4 bytes: a draft while copying accepted whole, elsewhere each token
    with an even chance, until the first rejected."""
    rng = random.Random(seed)
    decisions = []
    for answer in _answers(seed):
        policy.begin(DraftContext(text=PROMPT))
        text = b"".join(piece for piece, _ in answer)
        copying = b"".join(bytes([c]) * len(piece) for piece, c in answer)
        at = 0
        policy.observe(0, 0, 0, 1.0, "none")
        while at < len(text):
            k = policy.draft_length()
            decisions.append((k, policy.source))
            accepted = k if copying[at] else next((i for i in range(k) if rng.random() < 0.5), k)
            policy.observe(k, k, accepted, profile.ratio(k) if k else 1.0, "lookup" if k else "none")
            policy.extend(text[at : at + 4 * (accepted + 1)])
            at += 4 * (accepted + 1)
    return decisions


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("profile", [H200, COMPUTE_BOUND, MEMORY_BOUND, PRIOR],
                         ids=["h200", "compute-bound", "memory-bound", "prior"])
def test_skipping_the_syntax_event_changes_no_decision(
        book: RuleBook, profile: VerifyProfile, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up = 0
    event = SyntaxTracker.event

    def counted(tracker: SyntaxTracker) -> tuple:
        nonlocal looked_up
        looked_up += 1
        return event(tracker)

    monkeypatch.setattr(SyntaxTracker, "event", counted)
    oracle = _replay(AlwaysLooksUp(book, "python", 64, ("lookup",), TriggerLearning(profile)), profile, seed)
    always = looked_up
    looked_up = 0
    policy = TriggerPolicy(book, "python", 64, ("lookup",), TriggerLearning(profile))
    assert _replay(policy, profile, seed) == oracle
    assert any(k for k, _ in oracle)  # the copies are drafted
    if profile in (H200, COMPUTE_BOUND):  # where a rejected draft is dear, new code is written without a lookup
        assert looked_up < 0.8 * always, (looked_up, always)


def test_the_skipped_cycles_are_counted_as_no_draft_pays(book: RuleBook) -> None:
    policy = TriggerPolicy(book, "python", 64, ("lookup",), TriggerLearning(H200))
    _replay(policy, H200, 0)
    policy.begin(DraftContext(text=PROMPT))
    policy.extend(NEW_CODE[:40])
    assert policy.draft_length() == 0 and policy.event == NO_DRAFT_PAYS and policy.source == "any"


@pytest.mark.parametrize("sources", [("lookup", "model"), ("model",)])
def test_the_event_is_looked_up_wherever_a_model_may_be_asked(book: RuleBook, sources: tuple[str, ...]) -> None:
    policy = TriggerPolicy(book, "python", 64, sources, TriggerLearning(H200))
    policy.begin(DraftContext(text=PROMPT))
    policy.observe(0, 0, 0, 1.0, "none")
    for _ in range(50):
        policy.extend(b"x = 1")
        policy.draft_length()
        assert policy.event != NO_DRAFT_PAYS
        policy.observe(0, 0, 0, 1.0, "none")


def test_lookup_alones_probes_are_spaced_across_events_not_per_event(book: RuleBook) -> None:
    """One clock an answer: on code, where the text ends at five events in turn, a clock each probed five times as
    often as a rejected probe's cost allows."""
    policy = TriggerPolicy(book, "python", 16, ("lookup",), TriggerLearning(COMPUTE_BOUND))
    policy.begin(DraftContext(text=b""))
    policy.observe(0, 0, 0, 1.0, "none")
    places = [b"def total(xs):\n    # the sum of ", b'def total(xs):\n    name = "tot', b"def total(xs):\n    n = ("]
    drafted_at = []
    for cycle in range(600):
        policy.tracker.begin(places[cycle % len(places)])
        k = policy.draft_length()
        if k:
            drafted_at.append(cycle)
        policy.observe(k, k, 0, COMPUTE_BOUND.ratio(k), "lookup" if k else "none")
    gap = (COMPUTE_BOUND.ratio(1) - 1) / PROBE_SHARE
    lulls = [b - a for a, b in itertools.pairwise(drafted_at) if b > a + 1]
    assert len(lulls) >= 3 and min(lulls) >= gap, drafted_at


def test_a_first_try_that_a_length_not_yet_measured_would_pay_still_looks_the_event_up(book: RuleBook) -> None:
    """No profile measured: after earlier answers' copies were right, a dear first draft of 4 tokens at a comment,
    half accepted: its figure says the measured length does not pay, but a short first try at a string, estimated,
    does."""
    decisions = []
    for policy in (AlwaysLooksUp(book, "python", 64, ("lookup",), TriggerLearning(PRIOR)),
                   TriggerPolicy(book, "python", 64, ("lookup",), TriggerLearning(PRIOR))):
        for _ in range(5):
            policy.learning.lookup.fresh.observe(8, 8)
        policy.begin(DraftContext(text=b""))
        policy.observe(0, 0, 0, 1.0, "none")
        policy.tracker.begin(b"def total(xs):\n    # the sum of ")
        k = policy.draft_length()
        policy.observe(k, k, 2, 4.0, "lookup")
        policy.tracker.begin(b'def total(xs):\n    name = "tot')
        decisions.append((k, policy.draft_length(), policy.event))
    assert decisions[0] == decisions[1] == (4, 1, "python.string")


class PricesEveryRead(TriggerPolicy):
    """The oracle for the model's read: every length priced with it, each cycle the prompt is unread."""

    def _model_gain_bound(self, model: EventModel, plain: float) -> float:
        return math.inf


@pytest.mark.parametrize("read_steps", [0.5, 8.0, 40.0])
@pytest.mark.parametrize("profile", [COMPUTE_BOUND, MEMORY_BOUND], ids=["compute-bound", "memory-bound"])
def test_a_read_no_gain_could_win_back_is_not_priced_at_each_length_and_no_decision_changes(
        book: RuleBook, profile: VerifyProfile, read_steps: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the model's read of the prompt pays was priced at every length with the read charged, each cycle the
    prompt was unread: two fifths of the triggers' time a cycle where the cost check lets SmolLM2 draft and the
    answer never pays its read (HumanEval, the default pair). A bound on what any length could win decides first;
    fed the same text and verdicts, the policy decides as the one that prices every length, and prices fewer where
    the read is dear."""
    priced = 0
    best_when_drafted = TriggerPolicy._best_when_drafted

    def counted(policy: TriggerPolicy, model: EventModel | None, source: str) -> tuple[int, float]:
        nonlocal priced
        priced += source == "model"
        return best_when_drafted(policy, model, source)

    monkeypatch.setattr(TriggerPolicy, "_best_when_drafted", counted)
    decisions, counts = [], []
    for make in (PricesEveryRead, TriggerPolicy):
        priced = 0
        learning = TriggerLearning(profile)
        learning.model_token_seconds = 0.2
        learning.reading.costs.observe(len(PROMPT), read_steps)  # a plain step takes 1.0 here
        decisions.append(_replay(make(book, "python", 64, ("lookup", "model"), learning), profile, 0))
        counts.append(priced)
    assert decisions[0] == decisions[1]
    if read_steps >= 40.0:
        assert counts[1] < 0.5 * counts[0], counts


def test_lookups_best_rate_is_recomputed_once_its_costs_move(book: RuleBook) -> None:
    """The best rate lookup could draft at is kept from cycle to cycle; a measurement that makes a length cheap must
    end the skip at once (lookup's figure unchanged)."""
    policy = TriggerPolicy(book, "python", 64, ("lookup",), TriggerLearning(H200))
    _replay(policy, H200, 0)
    policy.begin(DraftContext(text=PROMPT))
    policy.extend(NEW_CODE[:40])
    assert policy.draft_length() == 0 and policy.event == NO_DRAFT_PAYS
    for _ in range(20):  # four drafted tokens come to cost half a plain step
        policy.learning.costs.tables["lookup"].observe(4, 0.5)
    assert policy.draft_length() > 0 and policy.event != NO_DRAFT_PAYS
