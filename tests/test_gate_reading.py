"""The gate charges a model drafter's reads: a model that waits its turn reads what it has not seen (the prompt, and
what was committed since it last drafted) before it drafts, and a draft pays only if it wins that read back.

Charged nothing of it but the first read's instalments, the default pair's gate (SmolLM2 for the Q4_K_M target, on a
2-core AVX-512 machine where the cost check let it draft) read each HumanEval prompt, 10 to 30 plain steps, to draft a
token or two an answer: 0.83x to 0.90x of plain on code, 0.84x on edits, and the hybrid gate 1.12x on edits where lookup
alone ran at 1.8x.
"""

from __future__ import annotations

import pytest
from measured_profiles import F32_PROFILE, Q4_AVX512_PROFILE

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.acceptance import DraftAcceptance
from ds4spec.policy.copying import LookupAcceptance, LookupGate
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import GatedPolicy
from ds4spec.policy.probing import PROBE_SHARE
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.reading import ModelReading

STEP = 0.04  # seconds per plain step
PROMPT = b"#" * 400


def _reading(prompt_steps: float) -> ModelReading:
    """A drafter whose read of ``PROMPT`` costs ``prompt_steps`` plain steps (as the load-time check measures it)."""
    reading = ModelReading()
    reading.costs.observe(len(PROMPT), prompt_steps * STEP)
    return reading


def _gate(profile: VerifyProfile, prompt_steps: float, token_steps: float) -> GatedPolicy:
    """A gate for a model alone, its drafted token at ``token_steps`` plain steps, after one plain step of a generation
    whose prompt it has not read."""
    gate = GatedPolicy(64, CycleCosts(profile), model_misses=True, reading=_reading(prompt_steps),
                       model_token_seconds=token_steps * STEP)
    gate.begin(DraftContext(text=PROMPT))
    gate.observe(0, 0, 0, STEP)
    return gate


@pytest.mark.parametrize(("profile", "prompt_steps", "token_steps", "tried"), [
    # SmolLM2 beside the Q4_K_M target on 2 cores: a HumanEval prompt's read cost 10 to 30 plain steps
    pytest.param(Q4_AVX512_PROFILE, 11.0, 0.21, False, id="compute-bound-target-dear-read"),
    # the same drafter where its cache holds the prompt (a chat's later turn): a draft of a few tokens could pay
    pytest.param(Q4_AVX512_PROFILE, 0.0, 0.21, True, id="compute-bound-target-nothing-to-read"),
    # the F32 pair (memory-bound): the prompt's read is a step or two, a draft of several tokens costs about one
    pytest.param(F32_PROFILE, 1.5, 0.05, True, id="memory-bound-target"),
])
def test_a_models_first_try_is_made_only_where_a_draft_could_win_back_its_read(
        profile: VerifyProfile, prompt_steps: float, token_steps: float, tried: bool) -> None:
    """Before any draft was measured, the model is tried only if some length could beat a plain step at the
    acceptance the cost check gives the benefit of (0.9), charged its pass, its tokens and its share of the read."""
    gate = _gate(profile, prompt_steps, token_steps)
    lengths = []
    for _ in range(40):
        lengths.append(gate.draft_length())
        if lengths[-1]:
            break
        gate.observe(0, 0, 0, STEP)
        gate.extend(b"x = 1\n")
    assert any(lengths) == tried, lengths


def _after_a_losing_draft(reading_steps: float) -> GatedPolicy:
    """A gate whose model was tried once (it had read the prompt then), its one-token cycle 2 plain steps dearer than
    a plain step and rejected; the next generation's prompt costs ``reading_steps`` to read."""
    gate = _gate(Q4_AVX512_PROFILE, 0.0, 0.0)
    assert gate.draft_length() == 1
    gate.observe_reading(0.0)
    gate.observe(1, 1, 0, 3 * STEP, "model")
    gate = GatedPolicy(64, gate.costs, gate.acceptance, model_misses=True, reading=_reading(reading_steps))
    gate.begin(DraftContext(text=b"*" * len(PROMPT)))  # another prompt, as long: read anew
    return gate


@pytest.mark.parametrize("reading_steps", [0.0, 20.0], ids=["nothing-to-read", "prompt-read-20-steps"])
def test_a_models_probe_waits_until_its_read_too_would_cost_a_small_share_of_the_lull(reading_steps: float) -> None:
    """A probe of a model that does not pay loses its cycle and all it must read first: it waits until that is at
    most ``PROBE_SHARE`` of the cycles without drafting. Counted without the read, a probe of each HumanEval answer
    read its prompt (10 to 30 plain steps) to draft one token."""
    gate = _after_a_losing_draft(reading_steps)
    lost = gate.costs.steps_lost(1) + reading_steps
    first_probe = None
    for cycle in range(1000):
        if gate.draft_length():
            first_probe = cycle
            break
        gate.observe(0, 0, 0, STEP)
    assert first_probe is not None and first_probe + 1 >= lost / PROBE_SHARE, (first_probe, lost)


def _hybrid(profile: VerifyProfile, prompt_steps: float) -> LookupGate:
    gate = LookupGate(64, CycleCosts(profile), LookupAcceptance(), model_acceptance=DraftAcceptance(),
                      reading=_reading(prompt_steps), model_token_seconds=0.2 * STEP)
    gate.begin(DraftContext(text=PROMPT))
    gate.observe(0, 0, 0, STEP)
    return gate


@pytest.mark.parametrize(("profile", "prompt_steps", "source"), [
    pytest.param(Q4_AVX512_PROFILE, 11.0, "lookup", id="dear-read-lookup-alone"),
    pytest.param(F32_PROFILE, 1.5, "any", id="cheap-read-lookup-then-model"),
])
def test_a_hybrid_asks_lookup_alone_where_its_models_read_would_not_pay(
        profile: VerifyProfile, prompt_steps: float, source: str) -> None:
    """A hybrid's lookup misses cost nothing; its model, asked where lookup has no match, first reads all it has not
    seen. Where that read does not pay, lookup is asked alone, at the length its own drafts (a copy) say."""
    gate = _hybrid(profile, prompt_steps)
    gate.extend(PROMPT[:80])  # the answer copies its prompt
    assert gate.draft_length() == 1 and gate.source == source  # the first try
    gate.observe(1, 1, 1, profile.ratio(1) * STEP, "lookup")
    lengths = []
    for _ in range(6):  # lookup's drafts of the copy, kept whole: its figure says draft, longer and longer
        gate.extend(b"#" * 4)
        lengths.append(gate.draft_length())
        assert gate.source == source
        gate.observe(lengths[-1], lengths[-1], lengths[-1], profile.ratio(lengths[-1]) * STEP, "lookup")
    assert all(lengths) and lengths[-1] > 1, lengths


def test_a_hybrids_model_is_judged_by_its_own_drafts_not_by_lookups_copies() -> None:
    """Learned as one figure, lookup's copies (kept 98% of the time on edits) priced the model's guesses as well, and
    the hybrid gate asked it where lookup had no match, reading what lookup had copied (F32 pair)."""
    gate = _hybrid(F32_PROFILE, 1.5)
    gate.draft_length()
    for _ in range(8):
        gate.observe(8, 8, 8, F32_PROFILE.ratio(8) * STEP, "lookup")
        gate.observe(2, 2, 0, F32_PROFILE.ratio(2) * STEP, "model")
        gate.draft_length()
    first = gate.model_acceptance.first
    assert gate.acceptance.alpha > 0.9 and first is not None and first < 0.5
