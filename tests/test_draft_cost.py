"""A drafter source's cost, measured at load: a source that could not pay on this machine is never asked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from spec_helpers import OracleDrafter, TimedModel, run_plain

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import NO_DRAFT, Draft, DraftContext
from ds4spec.core.events import Finished
from ds4spec.core.plain import GenerationRequest
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.drafters.hybrid import HybridDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.engine import Engine
from ds4spec.engine.settings import Settings
from ds4spec.policy.costs import (
    KEPT_FASTEST_S,
    PAY_MARGIN,
    READ_SAMPLE,
    cached_source_costs,
    costs_file,
    measure_source,
    source_costs,
    unasked_note,
)
from ds4spec.policy.cycle_costs import could_pay_on
from ds4spec.policy.gate import FixedLength, GatedPolicy
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.profile import CHECK_EVERY_S, VerifyProfile
from ds4spec.policy.rules import load_rulebook
from ds4spec.policy.triggers import TriggerPolicy

# Measured on a 2-core CPU with Qwen2.5-Coder-1.5B Q4_K_M: seconds per verify span (a plain step is 31 ms).
CPU = VerifyProfile({1: 0.031, 2: 0.059, 4: 0.104, 8: 0.233, 12: 0.294, 16: 0.285, 32: 0.446, 64: 0.721}, "measured")
GPU = VerifyProfile({1: 0.006, 16: 0.0066, 64: 0.0075}, "measured")  # nearly flat


class ClairvoyantLookup(OracleDrafter):
    """The lookup half, knowing the target's future text (the tiny model's output never repeats its input)."""

    sources = ("lookup",)

    def propose(self, max_tokens: int) -> Draft:
        return replace(super().propose(max_tokens), source="lookup")


def test_a_free_drafter_could_pay_on_the_cpu_curve_but_not_at_a_tenth_of_a_step_a_token() -> None:
    assert could_pay_on(CPU, 0.0, 64)  # 1.9 tokens at 90% for a pass over 2 tokens that costs 1.9 steps
    assert not could_pay_on(CPU, 0.1, 64)
    assert not could_pay_on(CPU, 12 / 31, 64)  # SmolLM2-135M beside the 1.5B target, measured
    assert could_pay_on(GPU, 0.3, 64)  # where a pass costs about a step, a drafter at a third of one pays
    assert not could_pay_on(CPU, 0.0, 64, alpha=0.5)


def test_a_source_is_timed_per_drafted_token_after_a_commit_and_per_read() -> None:
    model = TimedModel(0.02, read_per_byte=0.0002)
    per_token, read = measure_source(model, "model")
    assert per_token == pytest.approx(0.02, abs=0.015)
    assert model.proposals > 1  # the fastest of several
    slept = 0.0002 * len(READ_SAMPLE)  # one read, timed once: a busy machine may wake it late, never early
    assert read is not None and slept <= read < slept + 0.5


def test_the_read_measured_at_load_is_what_triggers_charge_before_their_first_read() -> None:
    guard = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.0, read_per_byte=0.0002)))
    memory = PolicyMemory.measure(guard, GPU, 64)
    model = next(c for c in memory.costs if c.source == "model")
    assert model.read_bytes == len(READ_SAMPLE) and model.read_seconds is not None
    slept = 2000 * 0.0002  # fitted from one read of the sample, which a busy machine may wake late, never early
    assert slept * 0.95 <= memory.learning.reading.costs.cost(2000) < slept * 4
    assert PolicyMemory(GPU, guard.sources).learning.reading.costs.cost(2000) == 0.0  # unmeasured: learned in use
    guard.close()


def test_the_drafted_token_measured_at_load_is_what_a_model_s_first_try_is_charged() -> None:
    guard = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.02)))
    memory = PolicyMemory.measure(guard, GPU, 64)
    measured = next(c for c in memory.costs if c.source == "model").seconds_per_token
    assert measured is not None and memory.learning.model_token_seconds == measured
    assert PolicyMemory(GPU, guard.sources).learning.model_token_seconds == 0.0
    guard.close()


def test_a_source_with_nothing_to_offer_is_not_timed() -> None:
    class Mute(TimedModel):
        def propose(self, max_tokens: int) -> Draft:
            return NO_DRAFT

    assert measure_source(Mute(0.0), "model")[0] is None


def test_a_model_too_slow_for_the_profile_is_not_asked_while_lookup_always_is() -> None:
    slow = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.01)))  # a third of the CPU step
    costs = {c.source: c for c in source_costs(slow, CPU, 64)}
    assert costs["lookup"].affordable and costs["lookup"].seconds_per_token is None
    assert not costs["model"].affordable and costs["model"].seconds_per_token == pytest.approx(0.01, abs=0.01)
    fast = GuardedDrafter(TimedModel(0.0))
    assert [c.affordable for c in source_costs(fast, GPU, 64)] == [True]
    slow.close()
    fast.close()


def test_without_a_measured_profile_every_source_may_try_and_nothing_is_timed() -> None:
    model = TimedModel(0.05)
    guard = GuardedDrafter(model)
    assert [c.affordable for c in source_costs(guard, VerifyProfile.prior(), 64)] == [True]
    assert model.proposals == 0
    guard.close()


def test_a_failing_measurement_leaves_the_source_to_online_learning() -> None:
    class Broken(TimedModel):
        def begin(self, context: DraftContext) -> None:
            raise RuntimeError("no model")

    guard = GuardedDrafter(Broken(0.0))
    assert [(c.seconds_per_token, c.affordable) for c in source_costs(guard, CPU, 64)] == [(None, True)]
    guard.close()


def test_the_policies_ask_only_the_sources_that_could_pay() -> None:
    guard = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.01)))
    memory = PolicyMemory.measure(guard, CPU, 64)
    assert memory.sources == ("lookup",)
    gate = memory.policy(None, "python", 64)
    assert isinstance(gate, GatedPolicy) and gate.source == "lookup"
    triggers = memory.policy(load_rulebook(), "python", 64)
    assert isinstance(triggers, TriggerPolicy) and triggers.sources == ("lookup",)
    unchecked = PolicyMemory.measure(guard, CPU, 64, check=False)
    assert unchecked.sources == ("lookup", "model") and unchecked.policy(None, "python", 64).source == "any"
    guard.close()


def test_with_no_source_that_could_pay_every_cycle_is_a_plain_step() -> None:
    guard = GuardedDrafter(TimedModel(0.01))
    policy = PolicyMemory.measure(guard, CPU, 64).policy(None, None, 64)
    assert isinstance(policy, FixedLength) and policy.draft_length() == 0
    guard.close()


def test_the_user_is_told_in_one_line_which_model_is_not_asked_and_how_to_ask_it() -> None:
    hybrid = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.01)))
    note = unasked_note("smollm2", source_costs(hybrid, CPU, 64), CPU)
    assert note is not None and "\n" not in note
    assert note.startswith("smollm2 drafts too slowly") and "31.0 ms target step" in note
    assert "text lookup only" in note and "--no-cost-check" in note
    alone = GuardedDrafter(TimedModel(0.01))
    assert "speculating with no drafts" in (unasked_note("timed", source_costs(alone, CPU, 64), CPU) or "")
    fast = GuardedDrafter(TimedModel(0.0))
    assert unasked_note("fast", source_costs(fast, GPU, 64), GPU) is None
    for guard in (hybrid, alone, fast):
        guard.close()


def test_a_drafters_times_are_kept_for_the_hour_and_judged_again_against_each_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot ``ds4spec complete`` spent 0.4 s of its 3.5 s timing SmolLM2: the times are kept on disk per
    drafter, target and machine, as the verify profile is, and whether the model could pay is judged from them
    and the profile in use."""
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    # 3 ms a token: affordable on GPU up to 5 ms (a busy machine's late wake-ups), never on CPU (from 2 ms).
    timed = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.003)))
    first = {c.source: c for c in cached_source_costs(timed, GPU, 64, "key", now=1000.0)}
    assert first["model"].seconds_per_token == pytest.approx(0.003, abs=0.003) and first["model"].affordable
    other = TimedModel(0.02)  # timed again, this one would be too slow for either profile
    again = GuardedDrafter(HybridDrafter(LookupDrafter(), other))
    kept = {c.source: c for c in cached_source_costs(again, GPU, 64, "key", now=1000.0 + CHECK_EVERY_S - 1)}
    assert other.proposals == 0 and kept == first
    on_cpu = {c.source: c for c in cached_source_costs(again, CPU, 64, "key", now=1001.0)}
    assert other.proposals == 0 and not on_cpu["model"].affordable and on_cpu["lookup"].affordable
    cached_source_costs(again, GPU, 64, "another drafter", now=1001.0)
    assert other.proposals > 0  # another key is timed
    other.proposals = 0
    stale = {c.source: c for c in cached_source_costs(again, GPU, 64, "key", now=1000.0 + CHECK_EVERY_S)}
    assert other.proposals > 0 and stale["model"] == first["model"]  # timed again, slower: the faster timing stands
    other.proposals = 0
    later = {c.source: c for c in cached_source_costs(again, GPU, 64, "key", now=1000.0 + KEPT_FASTEST_S + 1)}
    assert other.proposals > 0 and later["model"].seconds_per_token == pytest.approx(0.02, abs=0.015)
    costs_file().write_text("{not json")
    assert cached_source_costs(again, GPU, 64, "key")[1].seconds_per_token is not None  # a broken cache: timed
    for guard in (timed, again):
        guard.close()


def test_a_slower_timing_within_a_day_does_not_rule_out_a_source_a_faster_one_let_pay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed while another process loaded its models, SmolLM2 measured three times slower: kept for the hour, that
    verdict ruled it out of every command in it, and a source never asked is never measured again."""
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    busy = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.02)))
    quiet = GuardedDrafter(HybridDrafter(LookupDrafter(), TimedModel(0.003)))
    assert not {c.source: c for c in cached_source_costs(busy, GPU, 64, "key", now=0.0)}["model"].affordable
    faster = {c.source: c for c in cached_source_costs(quiet, GPU, 64, "key", now=CHECK_EVERY_S)}
    assert faster["model"].affordable  # a faster timing replaces a slower one at once
    slower = {c.source: c for c in cached_source_costs(busy, GPU, 64, "key", now=2 * CHECK_EVERY_S)}
    assert slower["model"] == faster["model"]
    for guard in (busy, quiet):
        guard.close()


def test_a_failed_or_unprofiled_timing_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))

    class Broken(TimedModel):
        def begin(self, context: DraftContext) -> None:
            raise RuntimeError("no model")

    broken = GuardedDrafter(Broken(0.0))
    assert [c.seconds_per_token for c in cached_source_costs(broken, CPU, 64, "key")] == [None]
    timed = GuardedDrafter(TimedModel(0.0))
    assert [c.seconds_per_token for c in cached_source_costs(timed, VerifyProfile.prior(), 64, "key")] == [None]
    assert not costs_file().exists()
    for guard in (broken, timed):
        guard.close()


# -- an engine on a tiny real model ------------------------------------------------------------------------


@pytest.fixture
def target(tiny_bpe_gguf: Path) -> Iterator[LlamaTarget]:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=1024, n_gpu_layers=0)) as t:
        yield t


@pytest.mark.parametrize("background", [False, True], ids=["on-demand", "background"])
@pytest.mark.parametrize("triggers", [True, False], ids=["triggers", "gate"])
def test_an_engine_never_asks_a_model_that_cannot_pay_and_its_output_equals_plain(
    target: LlamaTarget, triggers: bool, background: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model a hundred times slower than the tiny target's step: measured once at load, never asked again, and
    not told of the text either (with a GPU it would read it beside the target's passes)."""
    prompt = "import os\nimport sys\nimport os\nimport sys\nimport os\n"
    plain = run_plain(target, GenerationRequest(target.tokenizer.tokenize(prompt.encode(), add_special=True),
                                                max_tokens=48))
    model = TimedModel(0.05)
    lookup = ClairvoyantLookup(target.tokenizer.detokenize(plain.tokens))
    drafter = GuardedDrafter(HybridDrafter(lookup, model), background=background)
    rules = load_rulebook() if triggers else None
    engine = Engine.assemble(Settings(warmup=0, max_tokens=48, language="python"), target, drafter, rules)
    assert engine.memory is not None and engine.memory.sources == ("lookup",)
    # The user is told, on stderr.
    assert "ds4spec: note: hybrid(oracle+timed) drafts too slowly" in capsys.readouterr().err
    # Earlier answers found lookup right (its oracle is), so it drafts from the first cycle on whatever verify
    # profile this machine measured for the tiny target; untaught, it would wait for a probe.
    for figure in (engine.memory.learning.lookup.fresh, engine.memory.gate_lookup.fresh):
        for _ in range(8):
            figure.observe(8, 8)
    measured, begun = model.proposals, model.begins
    finished = list(engine.complete(prompt))[-1]
    assert isinstance(finished, Finished)
    assert finished.tokens == plain.tokens
    assert drafter.settle()
    assert (model.proposals, model.begins) == (measured, begun)  # not one draft asked of it, no text told
    assert finished.stats.accepted_tokens > 0  # lookup is still asked
    drafter.close()


class SlowOracle(OracleDrafter):
    """The target's own future text, at several of the tiny target's steps a token: the cost check would rule it out."""

    proposals = 0

    def propose(self, max_tokens: int) -> Draft:
        self.proposals += 1
        time.sleep(0.002 * max_tokens)
        return super().propose(max_tokens)


def test_a_fixed_length_asks_a_model_that_cannot_pay_every_cycle_and_its_output_equals_plain(
    target: LlamaTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--draft-fixed``: no cost check and no policy; the model is asked for ``draft_max`` tokens every cycle."""
    prompt = "import os\nimport sys\n"
    plain = run_plain(target, GenerationRequest(target.tokenizer.tokenize(prompt.encode(), add_special=True),
                                                max_tokens=24))
    model = SlowOracle(target.tokenizer.detokenize(plain.tokens))
    drafter = GuardedDrafter(model, background=False)
    engine = Engine.assemble(Settings(warmup=0, max_tokens=24, draft_max=3, draft_fixed=True), target, drafter, None)
    assert "drafts too slowly" not in capsys.readouterr().err
    assert isinstance(engine.policy(engine.completion_prompt(prompt)), FixedLength)
    finished = list(engine.complete(prompt))[-1]
    assert isinstance(finished, Finished)
    assert finished.tokens == plain.tokens
    stats = finished.stats
    assert model.proposals == stats.target_forward_passes  # one draft a cycle (and none measured at load)
    # The oracle's text is the target's, but a draft's last word is offered as it stands (``OFFER_MODEL_TAIL``),
    # which the target may spell with other tokens (14 of 15 drafted tokens accepted here).
    assert stats.drafted_tokens > 0 and 2 * stats.accepted_tokens > stats.drafted_tokens
    drafter.close()


def test_an_engine_loaded_twice_times_the_drafter_its_settings_name_once(
    tiny_bpe_gguf: Path, tiny_spm_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ``ds4spec complete`` calls in a row: the second reads the drafter's times from the first. An engine
    given a drafter the settings do not name (``assemble``) times it each time: its times are not the named one's."""
    import ds4spec.policy.costs as costs

    monkeypatch.setenv("DS4SPEC_HOME", str(tmp_path))
    timed: list[str] = []
    real = costs.measure_source
    monkeypatch.setattr(costs, "measure_source", lambda drafter, source: timed.append(source) or real(drafter, source))
    # p_min 0: the tiny drafter proposes whatever its top probability, so that it is timed on any kernels
    settings = Settings(target=str(tiny_bpe_gguf), draft=str(tiny_spm_gguf), warmup=0, max_tokens=8, p_min=0.0)
    for _ in range(2):
        with Engine.load(settings) as engine:
            assert engine.profile is not None and engine.profile.measured
    assert timed == ["model"]
    with Engine.load(settings) as engine:
        drafter = engine.drafter
        assert drafter is not None
        Engine.assemble(settings, engine.target, drafter)
    assert timed == ["model", "model"]


def test_a_source_whose_best_case_beats_plain_by_less_than_the_margin_is_not_asked() -> None:
    """The bound leaves out the model's reads, the loop's work and acceptance below 90%: a source is asked only where
    even so its best case is a tenth faster than plain decoding (``PAY_MARGIN``)."""
    # The Zen 5 guest's Q4_K_M curve: SmolLM2 there (0.23 plain steps a token) is 3% faster in its best case.
    zen5 = VerifyProfile({1: 0.026, 2: 0.0436, 3: 0.0566, 4: 0.0695, 8: 0.120}, "measured")
    assert could_pay_on(zen5, 0.23, 64) and not could_pay_on(zen5, 0.23, 64, margin=PAY_MARGIN)
    assert could_pay_on(zen5, 0.15, 64, margin=PAY_MARGIN)  # 10.1% faster
    assert could_pay_on(GPU, 0.3, 64, margin=PAY_MARGIN)  # where a pass costs about a step, by far
    slow, fast = (GuardedDrafter(TimedModel(steps * zen5.spans[1])) for steps in (0.2, 0.08))
    assert [c.affordable for c in source_costs(slow, zen5, 64)] == [False]  # 5% faster at best: not asked
    assert [c.affordable for c in source_costs(fast, zen5, 64)] == [True]  # 18%
    slow.close()
    fast.close()
