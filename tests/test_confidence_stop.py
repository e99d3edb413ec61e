"""Where a model's draft stops: the drafter's own probability of each token, as the target has kept such tokens, and
what a longer cycle costs (``ds4spec.policy.confidence``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.confidence import EDGES, PRIOR, REMEMBERED, ConfidenceCalibration, takes_next
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import GatedPolicy
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.rules import load_rulebook
from ds4spec.policy.trigger_learning import TriggerLearning
from ds4spec.policy.triggers import TriggerPolicy

# A pass over n tokens in plain steps: the F32 pair on a 2-core AMD EPYC (memory-bound), and the Q4_K_M target on a
# 2-core CPU (compute-bound).
MEMORY_BOUND = VerifyProfile({1: 1.0, 2: 1.15, 3: 1.27, 4: 1.52, 6: 1.68, 8: 1.89, 12: 2.19, 16: 2.57}, "measured")
COMPUTE_BOUND = VerifyProfile({1: 1.0, 2: 1.90, 3: 2.66, 4: 3.33, 6: 4.80, 8: 7.48, 12: 9.32, 16: 9.27}, "measured")
STEP = 0.2  # seconds
ALPHA = 0.7  # the policy's figure for the tokens after the next
RATE = 1.5 / 0.2  # tokens a second the policy expects of its cycles: 1.5 a plain step
DRAFTED_TOKEN = 0.01  # seconds of the drafter's forward pass, 0.05 plain steps (SmolLM2 beside the F32 target)


def _costs(profile: VerifyProfile) -> CycleCosts:
    """Cycles measured as a verify pass and the drafter's passes, one a drafted token."""
    costs = CycleCosts(profile)
    costs.observe(0, STEP)
    for k in range(1, 9):
        costs.observe(k, STEP * profile.ratio(k) + DRAFTED_TOKEN * k)
    return costs


def _takes(costs: CycleCosts, confidences: list[float], aligned: int, *, wanted: int = 8, alpha: float = ALPHA) -> bool:
    return takes_next(ConfidenceCalibration(), costs, confidences, aligned, wanted, alpha, RATE)


def test_before_any_draft_a_token_is_judged_kept_as_the_default_drafter_s_were_and_the_surer_the_likelier() -> None:
    calibration = ConfidenceCalibration()
    figures = [calibration.acceptance(c) for c in (0.1, 0.4, 0.6, 0.75, 0.85, 0.92, 0.99)]
    assert figures == list(PRIOR) and figures == sorted(figures)


def test_what_the_target_kept_moves_the_figure_of_tokens_that_sure_and_no_other() -> None:
    calibration = ConfidenceCalibration()
    for _ in range(40):
        calibration.observe([0.97, 0.4], held=1, verified=2)  # the sure token kept, the unsure one not
    assert calibration.acceptance(0.97) > PRIOR[-1]
    assert calibration.acceptance(0.4) < 0.1
    assert calibration.acceptance(0.6) == pytest.approx(PRIOR[EDGES.index(0.5) + 1])


def test_only_tokens_inside_the_verified_draft_are_judged() -> None:
    """A draft wholly kept says nothing of the drafter's tokens the aligner cut; a rejected token ends the count."""
    whole, cut = ConfidenceCalibration(), ConfidenceCalibration()
    whole.observe([0.6, 0.6, 0.4, 0.4], held=2, verified=2)
    cut.observe([0.6, 0.6, 0.6, 0.4], held=1, verified=4)
    assert whole.acceptance(0.4) == pytest.approx(PRIOR[1])  # never verified
    assert whole.acceptance(0.6) > PRIOR[2]
    assert cut.acceptance(0.6) < PRIOR[2]  # one kept, one rejected; the third came after the rejection
    assert cut.acceptance(0.4) == pytest.approx(PRIOR[1])


def test_a_long_session_still_follows_a_drifting_drafter() -> None:
    calibration = ConfidenceCalibration()
    for _ in range(int(REMEMBERED) * 5):
        calibration.observe([0.97], held=1, verified=1)
    for _ in range(int(REMEMBERED)):
        calibration.observe([0.97], held=0, verified=1)
    assert calibration.acceptance(0.97) < 0.5


def test_a_sure_draft_goes_on() -> None:
    assert _takes(_costs(MEMORY_BOUND), [0.97] * 6, 5)


def test_a_draft_whose_first_token_is_doubtful_stops_at_once() -> None:
    """Its next tokens can win little: the whole draft stands on the first (a 15-token draft whose first token was
    wrong cost 2.3 plain steps for one token)."""
    assert not _takes(_costs(MEMORY_BOUND), [0.25, 0.6], 1)


def test_an_unsure_token_after_sure_ones_is_taken_where_a_wider_pass_is_nearly_free_and_not_where_it_is_dear() -> None:
    confidences = [0.97, 0.97, 0.97, 0.4]
    assert _takes(_costs(MEMORY_BOUND), confidences, 3)
    assert not _takes(_costs(COMPUTE_BOUND), confidences, 3)


def test_going_on_is_judged_over_the_tokens_after_the_next_too() -> None:
    """A sure token after an unsure one, where the pass over one more token costs a step in the profile's jump (3 to
    4 tokens: 1.27 to 1.52 plain steps) and later ones little: taken when the tokens after it are likely kept (the
    policy's figure), not when only the next one is counted."""
    confidences = [0.97, 0.35, 0.97]
    costs = _costs(MEMORY_BOUND)
    assert _takes(costs, confidences, 2, alpha=0.9)
    assert not _takes(costs, confidences, 2, alpha=0.0)
    assert not _takes(costs, confidences, 2, wanted=3, alpha=0.9)  # no room


def test_the_bar_a_longer_draft_must_clear_is_the_rate_the_policy_expects_of_its_cycles() -> None:
    """An unsure token is worth drafting where the policy's cycles bring tokens slowly, not where they are fast."""
    calibration, costs, confidences = ConfidenceCalibration(), _costs(MEMORY_BOUND), [0.97, 0.45]
    assert takes_next(calibration, costs, confidences, 1, 8, ALPHA, RATE)
    assert not takes_next(calibration, costs, confidences, 1, 8, ALPHA, 2 * RATE)


def test_the_first_token_is_always_taken() -> None:
    assert _takes(_costs(COMPUTE_BOUND), [0.01], 0)


def test_a_draft_that_gives_the_target_no_token_yet_goes_on() -> None:
    """Stopped there, it would leave nothing to verify (a model whose draft comes back empty is a miss: its time
    spent, its event's figure lowered)."""
    assert _takes(_costs(COMPUTE_BOUND), [0.97, 0.01], 0)


def test_the_gate_and_the_triggers_stop_by_what_they_learned(tmp_path: Path) -> None:
    """Both policies judge the next token by their own calibration and cycle costs, and learn from each draft's
    outcome: after the target rejected every unsure token, a draft no longer takes one."""
    gate = GatedPolicy(8, _costs(MEMORY_BOUND))
    learning = TriggerLearning(MEMORY_BOUND)
    learning.costs.observe_plain(STEP)
    learning.costs.tables["model"] = _costs(MEMORY_BOUND)
    triggers = TriggerPolicy(load_rulebook(user_dir=tmp_path), "python", 8, ("lookup", "model"), learning)
    triggers.begin(DraftContext(text=b"def total(xs):\n    return sum("))
    triggers.draft_length()  # the event the draft is made at
    confidences = [0.97, 0.97, 0.97, 0.6]
    for policy in (gate, triggers):
        assert policy.takes_next(confidences, aligned=3, wanted=8)
        for _ in range(30):
            policy.observe_confidences(confidences, held=3, verified=4)
        assert not policy.takes_next(confidences, aligned=3, wanted=8)
