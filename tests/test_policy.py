"""The gate: draft lengths follow measured cycle costs and acceptance; useless drafts stop, useful ones grow."""

from __future__ import annotations

import random
import statistics
from itertools import pairwise

import pytest
from measured_profiles import F32_PROFILE

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.acceptance import LATER_TOKENS_PRIOR, AcceptanceModel, DraftAcceptance, expected_tokens
from ds4spec.policy.cycle_costs import (
    AFTERMATH_CYCLES,
    ESTIMATE_DRIFT,
    MEASURES_COUNTED,
    SHARED_SCALE_WEIGHT,
    CycleCosts,
    best_length,
    candidate_lengths,
)
from ds4spec.policy.gate import GatedPolicy
from ds4spec.policy.profile import VerifyProfile

STEP = 0.04  # seconds per plain step


def _simulate(policy: GatedPolicy, alpha: float, verify_per_token: float, cycles: int = 400) -> list[int]:
    """Feeds the policy cycles whose cost and acceptance follow a simple machine: returns the lengths chosen."""
    rng = random.Random(0)
    chosen = []
    for _ in range(cycles):
        k = policy.draft_length()
        chosen.append(k)
        accepted = 0  # each token is accepted with probability alpha, until the first rejection
        while accepted < k and rng.random() < alpha:
            accepted += 1
        policy.observe(k, k, accepted, STEP * (1 + verify_per_token * k))
    return chosen


def test_expected_tokens_counts_the_accepted_run_plus_the_own_token() -> None:
    assert expected_tokens(0.0, 8) == 1.0
    assert expected_tokens(1.0, 8) == 9.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-9


def test_a_first_token_kept_apart_from_the_later_ones_scales_their_run() -> None:
    """``1 + first (1 + alpha + ... + alpha^(k-1))``: the first token kept half the time, each later one (once the
    ones before were) 0.8 of the time; with ``first`` equal to ``alpha`` it is the one-figure count."""
    assert expected_tokens(0.8, 1, first=0.5) == pytest.approx(1.5)
    assert expected_tokens(0.8, 3, first=0.5) == pytest.approx(1 + 0.5 * (1 + 0.8 + 0.64))
    assert expected_tokens(1.0, 4, first=0.5) == pytest.approx(3.0)
    assert expected_tokens(0.6, 5, first=0.6) == pytest.approx(expected_tokens(0.6, 5))


def test_candidates_cover_short_and_long_drafts_up_to_the_maximum() -> None:
    assert candidate_lengths(16) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert candidate_lengths(5)[-1] == 5 and candidate_lengths(0) == []


def test_useless_drafts_stop_and_are_only_probed_with_back_off() -> None:
    chosen = _simulate(GatedPolicy(16), alpha=0.0, verify_per_token=0.5)
    drafting = [k for k in chosen[50:] if k]
    assert len(drafting) <= 6, drafting  # a few probes in 350 cycles
    assert all(k == 1 for k in drafting)


def test_well_accepted_cheap_drafts_grow_long() -> None:
    chosen = _simulate(GatedPolicy(16), alpha=1.0, verify_per_token=0.3)
    assert chosen[-1] == 16 and sum(k == 16 for k in chosen[-100:]) > 90


def test_costly_verification_keeps_drafts_short_or_off() -> None:
    """Acceptance 50% with each drafted token costing 0.6 of a step: no length beats a plain step
    (k = 1 yields 1.5 tokens for 1.6 steps)."""
    chosen = _simulate(GatedPolicy(16), alpha=0.5, verify_per_token=0.6)
    assert sum(1 for k in chosen[100:] if k) < 20


def test_cost_estimates_interpolate_between_measured_lengths() -> None:
    costs = CycleCosts()
    costs.observe(0, 1.0)
    costs.observe(4, 3.0)
    assert costs.cost(2) == 2.0 and costs.cost(8) > 3.0


def test_acceptance_follows_recent_outcomes() -> None:
    model = AcceptanceModel()
    for _ in range(100):
        model.observe(4, 4)
    high = model.alpha
    for _ in range(100):
        model.observe(4, 0)
    assert high > 0.95 and model.alpha < 0.25  # a memory of about 30 cycles


def test_a_new_generation_lets_new_evidence_move_acceptance_quickly() -> None:
    """After an edit session the gate must not spend long drafts on prose for long: a new prompt may be another
    kind of text, so what earlier generations taught weighs only a few drafts."""
    learned, carried = AcceptanceModel(), AcceptanceModel()
    for model in (learned, carried):
        for _ in range(200):
            model.observe(16, 16)
    GatedPolicy(64, acceptance=carried).begin(DraftContext(text=b"Write a poem."))
    assert carried.alpha == pytest.approx(learned.alpha)  # the estimate itself is kept
    for model in (learned, carried):
        for _ in range(3):
            model.observe(8, 0)
    assert learned.alpha > 0.9 and carried.alpha < 0.7


def test_a_plain_step_is_taken_now_and_then_so_its_cost_never_goes_stale() -> None:
    """A stall measured during a plain step would make drafts look cheap for as long as the gate drafts. A refresh
    right after a draft is that draft's aftermath, no measure of a plain step: the plain steps go on until one is."""
    from ds4spec.policy.cycle_costs import PLAIN_REFRESH

    policy = GatedPolicy(4)
    policy.observe(0, 0, 0, 1.0)
    plain_steps = 0
    for i in range(4 * PLAIN_REFRESH):
        k = policy.draft_length()
        plain_steps += k == 0
        policy.observe(k, k, k, 1.0 + 0.1 * k + (0.01 * i if k == 0 else 0.0))  # every draft pays
    assert 3 <= plain_steps <= 4 * (1 + AFTERMATH_CYCLES)
    assert policy.costs.plain_step() > 1.0  # refreshed: later plain steps cost more


def test_one_stall_moves_a_measured_cost_by_a_bounded_amount() -> None:
    costs = CycleCosts()
    costs.observe(0, 0.04)
    costs.observe(0, 0.3)  # the scheduler took the CPU away for a moment
    assert costs.plain_step() is not None and costs.plain_step() < 0.07


def test_a_stall_in_a_length_s_first_cycle_is_set_aside_and_a_dear_length_learned_at_its_second() -> None:
    """Taken whole, one 100 ms stall in the first cycle of 8 tokens (a target stepping in 1.3 ms) priced them at 80
    plain steps for a dozen cycles: the gate stopped drafting, and its probes, waiting for as many cycles as a
    rejected one was priced to lose, never came again in the answer. A length that is dear stays dear."""
    costs = CycleCosts(F32_PROFILE)
    costs.observe(0, STEP)
    estimate = costs.cost(8)
    costs.observe(8, 100 * STEP)  # stalled
    assert not costs.measured(8) and costs.cost(8) == pytest.approx(estimate)
    costs.observe(8, 1.1 * estimate)
    assert costs.cost(8) == pytest.approx(1.1 * estimate)
    costs.observe(4, 100 * STEP)
    costs.observe(4, 100 * STEP)  # again: a dear drafter, no stall
    assert costs.cost(4) == pytest.approx(100 * STEP)


def test_a_length_s_first_cycle_is_judged_beside_what_its_drafted_tokens_were_measured_to_cost() -> None:
    """A model that takes ten plain steps a token (a drafter on the CPU beside a target on a GPU) is no stall."""
    judged, alone = CycleCosts(F32_PROFILE), CycleCosts(F32_PROFILE)
    for costs in (judged, alone):
        costs.observe(0, STEP)
    dear = judged.cost(4) + 4 * 10 * STEP
    judged.observe(4, dear, drafting=4 * 10 * STEP)
    alone.observe(4, dear)
    assert judged.cost(4) == pytest.approx(dear)
    assert not alone.measured(4)  # judged by the pass alone, it looked like a stall


def test_the_first_plain_steps_settle_on_the_fastest_of_them() -> None:
    """The first step after a prompt is slow (measured on the F16 pair: 86 ms against 73): averaged in, it would
    set the yardstick dear for as long as a drafting policy takes no other plain step."""
    costs = CycleCosts()
    for seconds in (0.086, 0.073, 0.075):
        costs.observe(0, seconds)
    assert costs.plain_step() == pytest.approx(0.073)
    costs.observe(0, 0.085)  # settled: later steps move it by the usual average
    assert 0.073 < (costs.plain_step() or 0.0) < 0.077


def test_a_generations_first_cycle_does_not_count_as_a_plain_step() -> None:
    costs = CycleCosts()
    costs.observe(0, 0.040)
    costs.new_generation()
    costs.observe(0, 0.080)  # the first step after the next prompt
    costs.observe(0, 0.041)
    assert costs.plain_step() == pytest.approx(0.040)
    costs.new_generation()
    costs.observe(2, 0.070)  # a first cycle that drafts is a draft's cost: the plain steps after its aftermath count
    for _ in range(AFTERMATH_CYCLES):
        costs.observe(0, 0.040)
    costs.observe(0, 0.039)
    assert costs.plain_step() == pytest.approx(0.039)


def test_the_plain_steps_after_a_draft_are_charged_to_drafting_not_taken_for_plain_steps() -> None:
    """On a GPU the two single-token passes after a span run without a captured CUDA graph (H200: 3.3 and 3.5 ms
    against 2.0): a drafting cycle costs that much more, and a plain step does not."""
    costs = CycleCosts(CPU)
    for _ in range(4):
        costs.observe(0, 0.002)
    costs.observe(4, 0.006)
    costs.observe(0, 0.0033)
    costs.observe(0, 0.0035)
    assert costs.plain_step() == pytest.approx(0.002)
    assert costs.aftermath() == pytest.approx(0.0028)
    assert costs.cost(4) == pytest.approx(0.006 + 0.0028) and costs.cost(0) == pytest.approx(0.002)
    assert costs.cost(8) == pytest.approx(0.006 * CPU.ratio(8) / CPU.ratio(4) + 0.0028)
    costs.observe(4, 0.006)  # drafting again at once: this aftermath is the next draft's to pay
    costs.observe(4, 0.006)
    assert costs.aftermath() == pytest.approx(0.75 * 0.0028)  # the first of the two was followed by a draft
    for _ in range(20):  # as on a machine without the effect: the steps after a draft cost what others do
        for _ in range(AFTERMATH_CYCLES + 2):
            costs.observe(0, 0.0019)
        costs.observe(4, 0.006)
    assert costs.aftermath() < 0.01 * 0.0019 and costs.plain_step() < 0.002


def test_without_any_effect_the_aftermath_costs_nothing() -> None:
    """The CPU backend has no graphs to replay: steps after a draft cost what others do, noise aside."""
    costs = CycleCosts(CPU)
    rng = random.Random(3)
    learned = []
    for i in range(2000):
        k = 4 if i % 5 == 0 and i > 10 else 0
        costs.observe(k, 0.035 * CPU.ratio(k) * rng.uniform(0.95, 1.05))  # steps vary by 5% either way
        learned.append(costs.aftermath())
    assert statistics.mean(learned) < 0.02 * 0.035  # noise, kept from going below none


def test_the_gate_learns_a_draft_s_first_token_apart_from_its_later_ones() -> None:
    """Half the drafts lose their first token, the rest are kept whole: a first token is kept half the time, a later
    one (once the ones before were) almost always; one figure for both would say 0.77. Later tokens not yet seen are
    taken to be kept as SmolLM2's were, and never less often than first ones."""
    split = DraftAcceptance()
    assert split.first == pytest.approx(0.5) and split.alpha == pytest.approx(LATER_TOKENS_PRIOR)
    for _ in range(10):
        split.observe(3, 0)
        split.observe(3, 3)
    assert split.first == pytest.approx(0.5, abs=0.05) and split.alpha > 0.9
    unlucky = DraftAcceptance()
    for _ in range(3):
        unlucky.observe(3, 1)
    for _ in range(20):
        unlucky.observe(1, 1)  # kept one-token drafts teach the later tokens' figure nothing
    assert unlucky.later_tokens.alpha < 0.5 and unlucky.alpha == unlucky.first > 0.8


@pytest.mark.parametrize(("runs", "longer"), [
    ([(1, 0)] * 3 + [(2, 2)], True),  # first tokens kept a quarter of the time, later ones always (one figure: 0.4)
    ([(1, 0)] * 3 + [(2, 1)], False),  # a later token no more often than a first
])
def test_where_a_drafter_s_first_tokens_are_often_wrong_but_its_runs_are_right_the_gate_drafts_more_than_one(
    runs: list[tuple[int, int]], longer: bool
) -> None:
    """Measured on unseen HumanEval prompts (F32 pair, SmolLM2 alone, one fresh policy each, same runs): with one
    figure the gate ran at 1.61x, 1.77x, 1.67x and 1.79x, with the first token's apart 1.82x, 1.88x, 1.75x and 1.90x.
    Judged by one figure (0.4 here) one token a draft would pay best; it does where later tokens are kept no more
    often than first ones."""
    policy = GatedPolicy(16, CycleCosts(F32_PROFILE), model_misses=True)
    for _ in range(3):
        policy.observe(0, 0, 0, 1.0)
    for k in (1, 2, 3, 4, 6, 8):
        for _ in range(3):
            policy.costs.observe(k, F32_PROFILE.ratio(k) + 0.05 * k)
    for _ in range(10):
        for run in runs:
            policy.acceptance.observe(*run)
    k = policy.draft_length()
    assert k > 1 if longer else k == 1


def test_a_policy_tells_its_costs_when_a_generation_begins() -> None:
    policy = GatedPolicy(4)
    policy.observe(0, 0, 0, 0.040)
    policy.begin(DraftContext(text=b""))
    policy.observe(0, 0, 0, 0.090)
    assert policy.plain_step_seconds() == pytest.approx(0.040)


def _probe_cycles(policy: GatedPolicy, cycles: int = 600) -> list[int]:
    """The cycles at which ``policy`` drafts a drafter whose every draft is rejected and costs 3 plain steps."""
    policy.observe(0, 0, 0, STEP)
    probes = []
    for cycle in range(cycles):
        k = policy.draft_length()
        if k:
            probes.append(cycle)
        policy.observe(k, k, 0, STEP * (3 if k else 1))
    return probes


def test_a_models_dear_probe_waits_until_it_would_cost_a_small_share_of_the_lull() -> None:
    """A useless model drafter whose rejected probe costs 2 plain steps more than a plain step is probed at most once
    in 2 / PROBE_SHARE cycles, and less often as the lull goes on."""
    from ds4spec.policy.probing import FIRST_PROBE_AFTER, MAX_PROBE_INTERVAL, PROBE_SHARE

    probes = _probe_cycles(GatedPolicy(16, CycleCosts(CPU), model_misses=True))
    gaps = [b - a for a, b in pairwise(probes)]
    assert probes and all(gap >= 2 / PROBE_SHARE for gap in gaps), probes
    assert all(later >= min(2 * earlier, MAX_PROBE_INTERVAL) for earlier, later in pairwise(gaps)), probes
    assert 2 / PROBE_SHARE > 2 * FIRST_PROBE_AFTER  # what this case tells apart from lookup's back-off below


def test_a_model_drafter_that_offers_nothing_is_a_rejected_draft_and_no_measure_of_a_cycle() -> None:
    """Asked for 16 tokens it offered none usable: the cycle cost a plain step and the drafter's call. Learned as a
    cycle drafting 16, drafts that long would look cheaper than the verify pass over them alone."""
    gate = GatedPolicy(16, CycleCosts(CPU), model_misses=True)
    gate.observe(0, 0, 0, CPU.spans[1])
    before, first = gate.costs.cost(16), gate.acceptance.first
    gate.observe(16, 0, 0, 1.1 * CPU.spans[1])
    assert not gate.costs.measured(16) and gate.costs.cost(16) == pytest.approx(before)
    assert gate.costs.cost(16) >= CPU.seconds(16)
    assert gate.acceptance.first < first  # a draft whose first token was rejected


def test_lookups_probe_keeps_the_short_back_off() -> None:
    """Lookup's probe costs nothing without a match, and a match in a copying answer is the copy to find quickly
    (with the model's budget, the edits after HumanEval fell from 1.59x to 1.27x with lookup alone)."""
    from ds4spec.policy.probing import FIRST_PROBE_AFTER

    probes = _probe_cycles(GatedPolicy(16, CycleCosts(CPU), source="lookup"))
    assert probes[1] - probes[0] == FIRST_PROBE_AFTER, probes


# The verify curve measured on a 2-core CPU with Qwen2.5-Coder-1.5B Q4_K_M (seconds per span length).
CPU = VerifyProfile({1: 0.031, 2: 0.059, 4: 0.104, 8: 0.233, 12: 0.294, 16: 0.285, 32: 0.446, 64: 0.721}, "measured")


def _simulate_on(profile: VerifyProfile, alpha: float, draft_per_token: float, draft_max: int = 64,
                 cycles: int = 400) -> list[int]:
    """Cycles on a machine whose verify passes follow ``profile`` and whose drafter costs ``draft_per_token``
    plain steps per drafted token."""
    policy = GatedPolicy(draft_max, CycleCosts(profile))
    rng = random.Random(0)
    chosen = []
    for _ in range(cycles):
        k = policy.draft_length()
        chosen.append(k)
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        # A cycle: the loop's own overhead, the verify pass the profile measured, and the drafter's tokens.
        pass_seconds = profile.spans[1] * profile.ratio(k)
        policy.observe(k, k, accepted, STEP - profile.spans[1] + pass_seconds + STEP * draft_per_token * k)
    return chosen


def test_with_a_measured_profile_the_gate_drafts_where_the_curve_pays_best() -> None:
    """Free drafts that are nearly always right: the gate finds the length with the best expected rate on the
    real curve (past its jump at 8 tokens), without climbing through every length."""
    alpha = 0.97

    def true_rate(k: int) -> float:  # tokens per second on the simulated machine
        return expected_tokens(alpha, k) / (STEP - CPU.spans[1] + CPU.spans[1] * CPU.ratio(k))

    best = max(range(1, 65), key=true_rate)
    late = _simulate_on(CPU, alpha, draft_per_token=0.0)[-100:]
    drafted = [k for k in late if k]
    assert best > 8 and min(drafted) > 8 and len(late) - len(drafted) <= 3, (best, late)  # 0: plain refreshes
    achieved = sum(map(true_rate, late)) / len(late)
    assert achieved > 0.95 * true_rate(best), (best, late)


def test_with_a_measured_profile_a_drafter_that_cannot_pay_is_left_after_a_try() -> None:
    """SmolLM2 on a 2-core CPU: 70% acceptance and 0.3 steps per drafted token never beat a plain step."""
    chosen = _simulate_on(CPU, alpha=0.7, draft_per_token=0.3)
    assert sum(1 for k in chosen[:20] if k) <= 2
    assert sum(1 for k in chosen[20:] if k) <= 8  # probes with back-off only


def test_on_a_flat_curve_the_same_drafter_drafts_long() -> None:
    """A GPU: verify passes cost about one step whatever their length, so 70% acceptance pays."""
    flat = VerifyProfile({1: 0.035, 16: 0.0385, 64: 0.049}, "measured")
    late = _simulate_on(flat, alpha=0.7, draft_per_token=0.05)[-100:]
    assert sum(1 for k in late if k) >= 97 and statistics.median(late) >= 3, late


def test_measured_lengths_cost_what_they_cost_and_others_follow_the_profile_from_them() -> None:
    costs = CycleCosts(CPU)
    costs.observe(0, 0.035)
    costs.observe(1, 0.060)
    costs.observe(15, 0.300)
    assert costs.cost(1) == 0.060 and costs.cost(15) == 0.300
    # Beyond the longest measured length: its scale along the profile, drawn toward the scale the measured lengths
    # share by how often it was measured (once here, as 1 was).
    own = {n: costs.cost(n) / CPU.ratio(n) for n in (1, 15)}
    drawn = (own[15] + SHARED_SCALE_WEIGHT * (own[1] + own[15]) / 2) / (1 + SHARED_SCALE_WEIGHT)
    assert costs.cost(31) == pytest.approx(drawn * CPU.ratio(31))
    # Between two: each one's scaled estimate, weighted by closeness; the jump at 8 tokens is kept.
    from_1, from_15 = 0.060 * CPU.ratio(7) / CPU.ratio(1), 0.300 * CPU.ratio(7) / CPU.ratio(15)
    assert costs.cost(7) == pytest.approx(from_1 + (from_15 - from_1) * 6 / 14)
    assert costs.cost(7) > costs.cost(6) * 1.1


def test_one_noisy_cycle_beside_a_well_measured_length_does_not_price_the_longer_drafts_out() -> None:
    """Lookup in a long copy (AVX2 kernels): 31 tokens measured often, one 46-token cycle 8% dear. The lengths past
    it are priced near the scale the measured ones share, so the draft goes on past 31 where the profile says so."""
    costs = CycleCosts(CPU)
    for _ in range(4):
        costs.observe(0, 0.031)
    for _ in range(MEASURES_COUNTED):
        costs.observe(31, 0.031 * CPU.ratio(31))
    costs.observe(46, 0.031 * CPU.ratio(46) * 1.08)
    for n in (47, 63):
        assert costs.cost(n) < 1.04 * 0.031 * CPU.ratio(n)
    alpha = 0.99  # where 63 tokens beat 31 by 6% on the profile: less than one cycle's noise
    assert best_length(costs, alpha, costs.ranked_lengths(64))[0] > 46


def test_a_plain_steps_small_drift_leaves_the_estimates_standing_and_a_larger_one_renews_them() -> None:
    """Every cycle measures something; re-estimating every length after each plain step cost a GPU target's cycle
    4% of its time. Estimates scaled from the plain step are renewed once it has moved by ``ESTIMATE_DRIFT``."""
    costs = CycleCosts(CPU)
    for _ in range(4):  # past the settling steps: from here on the plain step is an average
        costs.observe(0, 0.035)
    first = costs.cost(3)
    assert first == pytest.approx(0.035 * CPU.ratio(3))
    costs.observe(0, 0.036)  # the average moves by 0.7%
    assert costs.plain_step() != 0.035 and costs.cost(3) == first
    while abs(costs.plain_step() - 0.035) <= ESTIMATE_DRIFT * 0.035:
        costs.observe(0, 0.045)
    assert costs.cost(3) == pytest.approx(costs.plain_step() * CPU.ratio(3))


def test_a_drafting_cycles_measurement_renews_the_estimates_at_once() -> None:
    costs = CycleCosts(CPU)
    for _ in range(4):
        costs.observe(0, 0.035)
    costs.observe(1, 0.060)
    before = costs.cost(3)
    costs.observe(1, 0.070)
    assert costs.cost(3) > before
    assert costs.cost(3) == pytest.approx(costs.cost(1) * CPU.ratio(3) / CPU.ratio(1))


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.97])
def test_the_remembered_best_length_is_the_one_ranking_the_lengths_now_gives(alpha: float) -> None:
    costs = CycleCosts(CPU)
    rng = random.Random(7)
    for k in [0, 0, 0, 0, 1, 0, 4, 0, 0, 16, 0, 1, 0]:
        costs.observe(k, 0.035 * CPU.ratio(k) * rng.uniform(0.9, 1.1))
        lengths = costs.ranked_lengths(64)
        fresh = max(lengths, key=lambda n: (expected_tokens(alpha, n) / costs.cost(n), -n))
        assert best_length(costs, alpha, lengths) == (fresh, expected_tokens(alpha, fresh) / costs.cost(fresh))
        assert best_length(costs, alpha, lengths) == best_length(costs, alpha, lengths)  # asked again: remembered


@pytest.mark.parametrize("profile", [None, CPU], ids=["prior", "cpu-profile"])
def test_the_version_moves_whenever_a_drafting_lengths_cost_does(profile: VerifyProfile | None) -> None:
    """A policy keeps rates computed from the costs while ``version`` stands (the triggers' idle check): plain steps
    that drift, drafts, aftermaths and a plain step that has drifted far must all be seen."""
    costs = CycleCosts(profile)
    rng = random.Random(7)
    lengths = (1, 2, 4, 7, 16)
    seen: dict[int, tuple[float, ...]] = {}
    moves = 0
    for i in range(600):
        k = rng.choice(lengths) if rng.random() < 0.15 else 0
        step = 0.035 * (1.5 if 200 <= i < 260 else 1.0)  # a stretch where the machine is slower
        costs.observe(k, step * (costs.profile.ratio(k) if k else 1.0) * rng.uniform(0.9, 1.3))
        now = tuple(costs.cost(n) for n in lengths)
        if costs.version in seen:
            assert seen[costs.version] == now, i
        else:
            moves += 1
        seen[costs.version] = now
    assert 10 < moves < 300  # it stands between changes
