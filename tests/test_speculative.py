"""Losslessness of speculative decoding on tiny real llama.cpp models, for every drafter and both tokenizers.

The oracle is built in: speculative output must equal plain output, token for token (greedy), and with the
same seed also when sampling, since the verifier draws its random numbers as plain decoding does. The only
allowed difference is a flip at a near-tie between batched and single-token arithmetic (field notes, §3).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from spec_helpers import (
    GarbageDrafter,
    LostDrafter,
    OracleDrafter,
    RaisingDrafter,
    SlowDrafter,
    assert_lossless,
    first_difference,
    run_plain,
    run_spec,
)

from ds4spec.backend import runtime
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core import speculative
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import CHECKED, Draft, DraftContext, Drafter, Enough, Worth
from ds4spec.core.events import Finished, FinishReason, TextChunk
from ds4spec.core.plain import GenerationRequest
from ds4spec.core.sampling import Sampler, SamplingSettings
from ds4spec.core.speculative import SpecSettings, generate_speculative
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.drafters.hybrid import HybridDrafter
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.policy.copying import LookupAcceptance, LookupGate
from ds4spec.policy.cycle_costs import CycleCosts
from ds4spec.policy.gate import FixedLength, GatedPolicy
from ds4spec.policy.profile import VerifyProfile
from ds4spec.policy.rules import RuleBook, load_rulebook
from ds4spec.policy.triggers import TriggerPolicy

PROMPTS = [
    b"def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n",
    b"import os\nimport sys\nimport os\n",
    b"for i in range(10):\n    print(i)\nfor i in range(",
    b"# Notes\n\n- caf\xc3\xa9 \xe2\x86\x92 d\xc3\xa9j\xc3\xa0 vu\n- ",
    b"class Node:\n    def __init__(self, value):\n        self.value = value\n",
    b"x = [1, 2, 3]\ny = [1, 2, 3]\nz = [",
]


class CheckedLength(FixedLength):
    """Always the same length, asking for lookup's draft where the model agrees (``CHECKED``)."""

    source = CHECKED


# Policies by name, made for a drafter and the prompt's language (only the triggers look at either).
POLICIES: dict[str, Callable[[Drafter, str], DraftPolicy]] = {
    "fixed1": lambda drafter, language: FixedLength(1),
    "fixed4": lambda drafter, language: FixedLength(4),
    "fixed8": lambda drafter, language: FixedLength(8),
    # A hybrid's lookup drafts only where its model's first bytes agree, the model's draft where not.
    "fixed8-checked": lambda drafter, language: CheckedLength(8),
    "gated": lambda drafter, language: GatedPolicy(8),
    # With a measured, nearly flat verify curve (a GPU's): the gate ranks every length and drafts long.
    "gated-flat": lambda drafter, language: GatedPolicy(8, CycleCosts(FLAT_PROFILE)),
    "triggers": lambda drafter, language: TriggerPolicy(_rule_book(), language, 8, drafter.sources),
    # A hybrid whose model could not pay here (ds4spec.policy.costs): only its lookup half is asked.
    "gated-lookup-only": lambda drafter, language: GatedPolicy(8, CycleCosts(FLAT_PROFILE), source="lookup"),
    "triggers-lookup-only": lambda drafter, language: TriggerPolicy(_rule_book(), language, 8, ("lookup",)),
    # Lookup alone: its acceptance apart while the text copies, plain steps there scored against the copy.
    "lookup-gate": lambda drafter, language: LookupGate(8, CycleCosts(FLAT_PROFILE), LookupAcceptance(), "lookup"),
}
OTHER = {"bpe": "spm", "spm": "bpe"}
FLAT_PROFILE = VerifyProfile({1: 1.0, 16: 1.2, 64: 1.6}, "measured")


@cache
def _rule_book() -> RuleBook:
    """The built-in trigger rules (read during a test, so from the isolated DS4SPEC_HOME's config)."""
    return load_rulebook()


def _language(prompt: bytes) -> str:
    """The notes prompt is markdown (prose, bullets); the others are Python."""
    return "markdown" if prompt.startswith(b"# Notes") else "python"


@pytest.fixture(scope="module", params=["bpe", "spm", "bpe-launching-ahead"])
def target(request: pytest.FixtureRequest, tiny_models: dict[str, Path]) -> Iterator[LlamaTarget]:
    """Each tokenizer family, and a target that launches each plain step ahead of the last one's bookkeeping as on
    a GPU (on a CPU the pass runs inside the launch: the path is the GPU's, the timing is not)."""
    kind = request.param.split("-")[0]
    ahead = True if request.param.endswith("launching-ahead") else None
    with LlamaTarget(tiny_models[kind], TargetOptions(n_ctx=1024, n_gpu_layers=0, launch_ahead=ahead)) as t:
        t.kind = kind  # type: ignore[attr-defined]
        yield t


def _request(target: LlamaTarget, prompt: bytes, **kw: object) -> GenerationRequest:
    return GenerationRequest(target.tokenizer.tokenize(prompt, add_special=True), **kw)  # type: ignore[arg-type]


def _drafters(target: LlamaTarget, tiny_models: dict[str, Path], future: bytes) -> dict[str, Drafter]:
    other = tiny_models[OTHER[target.kind]]  # type: ignore[attr-defined]
    return {
        "oracle": OracleDrafter(future),
        "lookup": LookupDrafter(),
        "llama-other-tokenizer": LlamaDrafter(other, n_ctx=1024, p_min=0.0),
        "llama-other-tokenizer-unhealed": LlamaDrafter(other, n_ctx=1024, p_min=0.0, heal=False),
        "hybrid": HybridDrafter(LookupDrafter(), LlamaDrafter(other, n_ctx=1024, p_min=0.0)),
    }


def test_greedy_speculative_output_equals_plain_for_every_drafter_and_policy(
    target: LlamaTarget, tiny_models: dict[str, Path]
) -> None:
    flips = runs = accepted = 0
    for prompt in PROMPTS:
        request = _request(target, prompt, max_tokens=48)
        plain = run_plain(target, request)
        future = target.tokenizer.detokenize(plain.tokens)
        for name, drafter in _drafters(target, tiny_models, future).items():
            # Every policy with the oracle (it exercises acceptance); the others with a fixed one, the gate and
            # the triggers (which ask a hybrid drafter's lookup or model half by name).
            policies = POLICIES if name == "oracle" else ["fixed4", "fixed8-checked", "gated", "gated-flat", "triggers",
                                                          "gated-lookup-only", "triggers-lookup-only", "lookup-gate"]
            for policy in policies:
                spec, _, guarded = run_spec(target, drafter, request, prompt,
                                            policy=POLICIES[policy](drafter, _language(prompt)))
                flips += assert_lossless(target, request, plain, spec)
                runs += 1
                accepted += spec.stats.accepted_tokens
                assert guarded.failures.total == 0
            drafter.close()
    assert accepted > 0, "the accepting path must be exercised"
    print(f"{runs} speculative runs, {flips} near-tie flips")
    assert flips <= runs // 10


class RecordingDrafter(LlamaDrafter):
    """Keeps each draft it was asked for with a stopping rule: the rule, its own tokens and the draft."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.asked: list[tuple[int, Enough, list[int], Draft]] = []

    def propose_until(self, max_tokens: int, enough: Enough, source: str = "any", worth: Worth | None = None) -> Draft:
        draft = super().propose_until(max_tokens, enough, source, worth)
        self.asked.append((max_tokens, enough, list(self.last_draft), draft))
        return draft


def _lossless_drafting_four(target: LlamaTarget, drafter: LlamaDrafter) -> tuple[Finished, GuardedDrafter]:
    """A 48-token answer with ``drafter`` asked for 4 target tokens every cycle, checked equal to plain's."""
    prompt = PROMPTS[1]
    request = _request(target, prompt, max_tokens=48)
    plain = run_plain(target, request)
    spec, _, guarded = run_spec(target, drafter, request, prompt, policy=FixedLength(4))
    assert_lossless(target, request, plain, spec)
    return spec, guarded


def test_a_model_drafts_no_more_of_its_tokens_than_the_target_needs(
    target: LlamaTarget, tiny_models: dict[str, Path]
) -> None:
    """The loop tells a model drafter when its text gives the target the tokens it asked for (what the aligner
    keeps of it), and the drafter stops there: one token fewer would not have been enough. (A draft may also end
    earlier: at a special token, or at the cap on its length.)"""
    drafter = RecordingDrafter(tiny_models[OTHER[target.kind]], n_ctx=1024, p_min=0.0)  # type: ignore[attr-defined]
    _, guarded = _lossless_drafting_four(target, drafter)
    enough_drafts = 0
    for _, enough, tokens, draft in drafter.asked:
        if enough(draft.text):
            enough_drafts += 1
            assert not enough(drafter._unfinished_removed(b"".join(map(drafter._piece, tokens[:-1]))))
    assert enough_drafts > 0
    guarded.close()


class TakingAtMost(FixedLength):
    """Drafts 8 target tokens a cycle, a model's draft taking at most ``most`` of its own tokens; records what the
    loop asks and tells."""

    def __init__(self, most: int) -> None:
        super().__init__(8)
        self.most = most
        self.asked: list[tuple[list[float], int]] = []
        self.outcomes: list[tuple[list[float], int, int]] = []

    def takes_next(self, confidences: Sequence[float], aligned: int, wanted: int) -> bool:
        assert aligned < wanted <= 8
        self.asked.append((list(confidences), aligned))
        return len(confidences) <= self.most

    def observe_confidences(self, confidences: Sequence[float], held: int, verified: int) -> None:
        self.outcomes.append((list(confidences), held, verified))


@pytest.mark.parametrize("stop", [True, False], ids=["confidence-stop", "no-confidence-stop"])
def test_the_policy_ends_a_model_draft_and_hears_which_of_its_tokens_were_kept(
    target: LlamaTarget, tiny_models: dict[str, Path], stop: bool
) -> None:
    """Before each of a model's tokens after the first the policy is asked whether the draft takes it (unless the
    confidence stop is off), and after verification it is told how many of the drafter's tokens the target kept
    whole and how many were verified at all; the output stays plain decoding's."""
    drafter = LlamaDrafter(tiny_models[OTHER[target.kind]], n_ctx=1024, p_min=0.0)  # type: ignore[attr-defined]
    prompt = PROMPTS[1]
    request = _request(target, prompt, max_tokens=48)
    plain = run_plain(target, request)
    policy = TakingAtMost(2)
    spec, cycles, guarded = run_spec(target, drafter, request, prompt, policy=policy, confidence_stop=stop)
    assert_lossless(target, request, plain, spec)
    assert len(policy.outcomes) == len(cycles) > 0  # every draft here is the model's
    for (confidences, held, verified), cycle in zip(policy.outcomes, cycles, strict=True):
        assert 0 <= held <= verified <= len(confidences)
        if not cycle.accepted:
            assert held == 0  # none of its tokens' text was kept
        if cycle.accepted == cycle.drafted:
            assert held == verified  # all that was verified was kept
    longest = max(len(confidences) for confidences, _, _ in policy.outcomes)
    if stop:
        assert longest == 2 and policy.asked
    else:
        assert longest > 2 and not policy.asked
    guarded.close()


@pytest.mark.parametrize("offered", [True, False], ids=["tail-offered", "tail-dropped"])
def test_a_model_draft_offers_its_last_word_as_it_stands(
    target: LlamaTarget, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, offered: bool
) -> None:
    """A model stops as soon as its text gives the tokens asked for, counting its last word, which may still grow:
    that word is verified as the model spelled it, and the output stays the target's own. Dropped (the switch
    off), no alignment offers more than the stable part."""
    monkeypatch.setattr(speculative, "OFFER_MODEL_TAIL", offered)
    beyond_stable = 0
    align = speculative.align_draft

    def recorded(tok: object, committed: Sequence[int], draft: bytes, **kwargs: object) -> list[int]:
        nonlocal beyond_stable
        got = align(tok, committed, draft, **kwargs)  # type: ignore[arg-type]
        stable = align(tok, committed, draft, **{**kwargs, "unstable_tail": False})  # type: ignore[arg-type]
        beyond_stable += len(got) > len(stable)
        return got

    monkeypatch.setattr(speculative, "align_draft", recorded)
    drafter = LlamaDrafter(tiny_models[OTHER[target.kind]], n_ctx=1024, p_min=0.0)  # type: ignore[attr-defined]
    spec, guarded = _lossless_drafting_four(target, drafter)
    assert spec.stats.drafted_tokens > 0
    assert (beyond_stable > 0) == offered
    guarded.close()


@pytest.mark.parametrize("inline", [False, True], ids=["on-its-worker", "on-the-targets-thread"])
@pytest.mark.parametrize("policy", ["fixed4", "gated-flat", "triggers"])
def test_greedy_output_is_unchanged_when_the_drafter_catches_up_only_when_asked(
    target: LlamaTarget, tiny_models: dict[str, Path], policy: str, inline: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without cores to spare the drafter only records the text and reads it when asked for a draft; inline, every
    llama.cpp call of the generation, the target's and the drafter's, runs on one thread (one OpenMP pool)."""
    threads: set[int] = set()
    decode = runtime.llama_cpp.llama_decode

    def recorded_decode(*args: object) -> int:
        threads.add(threading.get_ident())
        return decode(*args)

    monkeypatch.setattr(runtime.llama_cpp, "llama_decode", recorded_decode)
    accepted = 0
    for prompt in PROMPTS:
        request = _request(target, prompt, max_tokens=40)
        plain = run_plain(target, request)
        for name, drafter in _drafters(target, tiny_models, target.tokenizer.detokenize(plain.tokens)).items():
            threads.clear()
            spec, _, guarded = run_spec(target, drafter, request, prompt, background=False, inline=inline,
                                        policy=POLICIES[policy](drafter, _language(prompt)))
            assert_lossless(target, request, plain, spec)
            assert guarded.failures.total == 0, name
            if inline:
                assert threads == {threading.get_ident()}, name
            accepted += spec.stats.accepted_tokens
            drafter.close()
    assert accepted > 0


def test_torch_drafter_keeps_output_identical(target: LlamaTarget, tmp_path: Path) -> None:
    from tinytorch import build_tiny_transformers_model

    from ds4spec.drafters.torch_drafter import TorchDrafter

    drafter = TorchDrafter(build_tiny_transformers_model(tmp_path / "hf"), p_min=0.0)
    for prompt in PROMPTS[:3]:
        request = _request(target, prompt, max_tokens=32)
        plain = run_plain(target, request)
        spec, cycles, _ = run_spec(target, drafter, request, prompt, policy=FixedLength(4))
        assert cycles, "the torch drafter must have drafted"
        assert_lossless(target, request, plain, spec)
    drafter.close()


def test_greedy_output_with_a_repeat_penalty_equals_plain(target: LlamaTarget) -> None:
    """The penalty makes each position's choice depend on the tokens before it, the span's own included: the
    verifier must give the sampler each position's history."""
    sampling = SamplingSettings(repeat_penalty=3.0, repeat_last_n=16)
    accepted = penalised = 0
    for prompt in [*PROMPTS[:4], b"x = 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]:
        request = _request(target, prompt, max_tokens=40, sampling=sampling)
        plain = run_plain(target, request)
        penalised += plain.tokens != run_plain(target, _request(target, prompt, max_tokens=40)).tokens
        drafter = OracleDrafter(target.tokenizer.detokenize(plain.tokens))
        spec, _, _ = run_spec(target, drafter, request, prompt, policy=FixedLength(6))
        accepted += spec.stats.accepted_tokens
        assert_lossless(target, request, plain, spec)
    assert accepted > 0 and penalised, "the penalty must change what plain decoding writes"


def test_each_position_is_chosen_with_the_history_plain_decoding_gives_it(
        target: LlamaTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """One choice a position, in order, whether the position was verified in a span or stepped alone: the history
    the sampler is given (for its repeat penalty) is the context before that position, exactly as in plain
    decoding."""
    histories: list[tuple[int, ...]] = []
    choose = Sampler.choose

    def recording(self: Sampler, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        histories.append(tuple(history))
        return choose(self, logits, history)

    monkeypatch.setattr(Sampler, "choose", recording)
    sampling = SamplingSettings(repeat_penalty=1.1, repeat_last_n=16)
    for prompt in PROMPTS[:3]:
        request = _request(target, prompt, max_tokens=40, sampling=sampling)
        histories.clear()
        plain = run_plain(target, request)
        plain_histories = list(histories)
        histories.clear()
        spec, _, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(plain.tokens)), request, prompt,
                              policy=FixedLength(6))
        assert spec.stats.accepted_tokens > 0
        same = first_difference(plain.tokens, spec.tokens)  # a near-tie flip ends the comparison there
        n = len(plain.tokens) if same is None else same + 1
        assert histories[:n] == plain_histories[:n]
        # Plain decoding's own: position i after the prompt sees the last 16 tokens of the prompt and i tokens.
        assert [len(h) for h in plain_histories[:n]] == [min(16, len(request.prompt_tokens) + i) for i in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["fixed6", "triggers"])
def test_sampled_speculative_output_equals_plain_with_the_same_seed(
    target: LlamaTarget, seed: int, policy: str
) -> None:
    sampling = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
    accepted = 0
    for prompt in PROMPTS[:4]:
        request = _request(target, prompt, max_tokens=40, sampling=sampling)
        plain = run_plain(target, request)
        drafter = OracleDrafter(target.tokenizer.detokenize(plain.tokens))
        chosen = FixedLength(6) if policy == "fixed6" else POLICIES[policy](drafter, _language(prompt))
        spec, _, _ = run_spec(target, drafter, request, prompt, policy=chosen)
        accepted += spec.stats.accepted_tokens
        assert_lossless(target, request, plain, spec)
    assert accepted > 0


def test_sampled_output_with_triggers_equals_plain_for_every_drafter(
    target: LlamaTarget, tiny_models: dict[str, Path]
) -> None:
    sampling = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=7)
    drafted = 0
    for prompt in PROMPTS[:4]:
        request = _request(target, prompt, max_tokens=40, sampling=sampling)
        plain = run_plain(target, request)
        for drafter in _drafters(target, tiny_models, target.tokenizer.detokenize(plain.tokens)).values():
            spec, _, guarded = run_spec(target, drafter, request, prompt,
                                        policy=POLICIES["triggers"](drafter, _language(prompt)))
            assert_lossless(target, request, plain, spec)
            assert guarded.failures.total == 0 and spec.stats.events
            drafted += spec.stats.drafted_tokens
            drafter.close()
    assert drafted > 0


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 5, 8, 13])
def test_token_budget_inside_an_accepted_span_ends_where_plain_ends(target: LlamaTarget, max_tokens: int) -> None:
    prompt = PROMPTS[0]
    full = run_plain(target, _request(target, prompt, max_tokens=40))
    request = _request(target, prompt, max_tokens=max_tokens)
    plain = run_plain(target, request)
    spec, _, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(full.tokens)), request, prompt,
                          policy=FixedLength(8))
    assert spec.tokens == plain.tokens and spec.reason == plain.reason
    assert spec.stats.committed_tokens == plain.stats.committed_tokens


class ObservedLength(FixedLength):
    """A fixed length that keeps how many tokens each observed cycle drafted."""

    def __init__(self, draft_max: int) -> None:
        super().__init__(draft_max)
        self.drafted: list[int] = []

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float, source: str = "") -> None:
        self.drafted.append(drafted)


@pytest.mark.parametrize("max_tokens", [8, 13])
def test_the_cycle_that_ends_the_answer_is_observed(target: LlamaTarget, max_tokens: int) -> None:
    """A policy's figures outlive one answer, so the drafting cycle that reaches the budget is told to it like any
    other: every drafting cycle the loop reported is one the policy observed."""
    prompt = PROMPTS[0]
    full = run_plain(target, _request(target, prompt, max_tokens=40))
    policy = ObservedLength(8)
    _, reports, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(full.tokens)),
                             _request(target, prompt, max_tokens=max_tokens), prompt, policy=policy)
    assert reports  # the oracle drafted: there are drafting cycles to be told of
    assert [d for d in policy.drafted if d] == [r.drafted for r in reports]


def test_stop_string_inside_an_accepted_span_ends_where_plain_ends(target: LlamaTarget) -> None:
    for prompt in PROMPTS:
        full = run_plain(target, _request(target, prompt, max_tokens=40))
        text = target.tokenizer.detokenize(full.tokens).decode("utf-8", errors="replace")
        if len(text) < 12:
            continue
        request = _request(target, prompt, max_tokens=40, stop=[text[8:11]])
        plain = run_plain(target, request)
        spec, _, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(full.tokens)), request, prompt,
                              policy=FixedLength(8))
        assert plain.reason is FinishReason.STOP
        assert spec.tokens == plain.tokens and spec.reason is FinishReason.STOP


@pytest.mark.parametrize("background", [True, False], ids=["background", "catch-up-when-asked"])
@pytest.mark.parametrize("faulty", [RaisingDrafter, SlowDrafter, GarbageDrafter, LostDrafter])
def test_faulty_drafters_leave_the_output_unchanged(target: LlamaTarget, faulty: type[Drafter],
                                                    background: bool) -> None:
    request = _request(target, PROMPTS[1], max_tokens=24)
    plain = run_plain(target, request)
    spec, _, guarded = run_spec(target, faulty(), request, PROMPTS[1], policy=FixedLength(4), deadline_s=0.2,
                                background=background)
    assert spec.tokens == plain.tokens and spec.reason == plain.reason
    assert spec.stats.drafter_failures > 0 and guarded.failures.total == spec.stats.drafter_failures


@pytest.mark.parametrize("ahead", [None, True], ids=["", "launching-ahead"])
def test_snapshot_rollback_keeps_output_identical(tiny_bpe_gguf: Path, ahead: bool | None) -> None:
    """The path recurrent and hybrid models take: state snapshots instead of dropping a tail."""
    options = TargetOptions(n_ctx=512, n_gpu_layers=0, force_snapshots=True, launch_ahead=ahead)
    with LlamaTarget(tiny_bpe_gguf, options) as t:
        request = GenerationRequest(t.tokenizer.tokenize(PROMPTS[0]), max_tokens=32)
        plain = run_plain(t, request)
        spec, _, _ = run_spec(t, OracleDrafter(t.tokenizer.detokenize(plain.tokens)), request, PROMPTS[0],
                              policy=FixedLength(5))
        assert spec.stats.accepted_tokens > 0
        assert spec.tokens == plain.tokens


@pytest.mark.parametrize("ahead", [None, True], ids=["", "launching-ahead"])
def test_a_full_context_ends_speculation_where_plain_ends(tiny_bpe_gguf: Path, ahead: bool | None) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=64, n_gpu_layers=0, n_batch=64, launch_ahead=ahead)) as t:
        request = GenerationRequest(t.tokenizer.tokenize(PROMPTS[0]), max_tokens=1000)
        plain = run_plain(t, request)
        spec, _, _ = run_spec(t, OracleDrafter(t.tokenizer.detokenize(plain.tokens)), request, PROMPTS[0],
                              policy=FixedLength(8))
        assert spec.tokens == plain.tokens and spec.reason == plain.reason


def test_no_draft_before_the_warmup(target: LlamaTarget) -> None:
    request = _request(target, PROMPTS[0], max_tokens=10)
    plain = run_plain(target, request)
    spec, cycles, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(plain.tokens)), request,
                               PROMPTS[0], policy=FixedLength(4), warmup=10_000)
    assert not cycles and spec.stats.drafted_tokens == 0
    assert spec.tokens == plain.tokens


def test_statistics_add_up(target: LlamaTarget) -> None:
    request = _request(target, PROMPTS[0], max_tokens=40)
    plain = run_plain(target, request)
    spec, cycles, _ = run_spec(target, OracleDrafter(target.tokenizer.detokenize(plain.tokens)), request,
                               PROMPTS[0], policy=FixedLength(4))
    s = spec.stats
    assert s.drafted_tokens == sum(c.drafted for c in cycles)
    assert s.accepted_tokens == sum(c.accepted for c in cycles)
    assert s.verify_passes_with_draft == len(cycles)
    assert s.corrected_tokens + s.bonus_tokens == len(cycles)
    assert s.committed_tokens == len(spec.tokens)
    assert s.target_forward_passes < s.committed_tokens  # drafts were accepted: fewer passes than tokens


def test_the_loops_own_time_leaves_out_the_models_and_the_consumer(target: LlamaTarget) -> None:
    """A face that holds every chunk for 50 ms (a slow terminal) adds nothing to the loop's own time, which
    is what speculation costs beyond the models: every cycle's is measured, and the median is one of them."""
    request = _request(target, PROMPTS[0], max_tokens=40)
    future = target.tokenizer.detokenize(run_plain(target, request).tokens)
    target.reset()
    drafter = GuardedDrafter(OracleDrafter(future), background=False)
    held = 0.0
    for event in generate_speculative(target, drafter, request, DraftContext(text=PROMPTS[0]),
                                      SpecSettings(warmup_tokens=0), policy=FixedLength(4)):
        if isinstance(event, Finished):
            s = event.stats
        elif isinstance(event, TextChunk):  # the face shows it
            time.sleep(0.05)
            held += 0.05
    drafter.close()
    assert held >= 0.5 and 0 < s.loop_median_seconds <= s.loop_seconds
    # Counted in, the 50 ms would be in most cycles; the median stands whatever one stall of the machine adds.
    assert s.loop_median_seconds < 0.025, (s.loop_median_seconds, held)
    assert s.loop_seconds < s.generation_seconds - held


def test_sampled_continuations_follow_the_plain_distribution(tiny_bpe_gguf: Path) -> None:
    """Chi-square two-sample test: 3-token continuations from plain and speculative sampling, with disjoint
    seeds, come from the same distribution. The drafter proposes the target's greedy text, so drafts are
    often accepted and the SLEM rule does the sampling."""
    from collections import Counter

    from scipy.stats import chi2_contingency

    n = 400
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=256, n_gpu_layers=0)) as t:
        prompt = t.tokenizer.tokenize(PROMPTS[2])
        greedy = run_plain(t, GenerationRequest(prompt, 8))
        future = t.tokenizer.detokenize(greedy.tokens)

        def sample(seed: int, speculative: bool) -> tuple[int, ...]:
            sampling = SamplingSettings(temperature=1.5, top_k=3, top_p=1.0, min_p=0.0, seed=seed)
            request = GenerationRequest(prompt, 3, sampling)
            if not speculative:
                return run_plain(t, request).tokens
            return run_spec(t, OracleDrafter(future), request, PROMPTS[2], policy=FixedLength(3))[0].tokens

        plain = Counter(sample(seed, False) for seed in range(n))
        spec = Counter(sample(seed, True) for seed in range(n, 2 * n))
    # Pool rare continuations so that every cell expects at least ~5 samples.
    common = [c for c in plain | spec if plain[c] + spec[c] >= 10]
    table = [[plain[c] for c in common] + [n - sum(plain[c] for c in common)],
             [spec[c] for c in common] + [n - sum(spec[c] for c in common)]]
    if table[0][-1] + table[1][-1] == 0:
        table = [row[:-1] for row in table]
    assert len(common) >= 3, "the test needs several distinct continuations"
    assert chi2_contingency(table).pvalue > 1e-3


def test_a_stop_asked_during_a_long_prompt_ends_speculation_within_one_chunk(tiny_bpe_gguf: Path) -> None:
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0, n_batch=16)) as t:
        request = GenerationRequest(t.tokenizer.tokenize(PROMPTS[0] * 6, add_special=True), max_tokens=10)
        assert len(request.prompt_tokens) > 3 * 16
        guarded = GuardedDrafter(LookupDrafter())
        events = list(generate_speculative(t, guarded, request, DraftContext(text=PROMPTS[0] * 6), SpecSettings(),
                                           policy=FixedLength(4), cancelled=lambda: t.n_past >= 2 * 16))
        assert len(events) == 1 and isinstance(events[0], Finished)
        assert events[0].reason is FinishReason.CANCELLED and events[0].stats.committed_tokens == 0
        assert t.n_past == 2 * 16
        guarded.close()


class CountingFixedLength(FixedLength):
    """Drafts ``draft_max`` tokens whenever asked, and counts how often it is asked and passed over."""

    def __init__(self, draft_max: int) -> None:
        super().__init__(draft_max)
        self.asked = self.passed_over = 0

    def draft_length(self) -> int:
        self.asked += 1
        return super().draft_length()

    def pass_over(self) -> None:
        self.passed_over += 1


def test_a_cycle_whose_lookup_has_no_match_weighs_no_length_and_changes_no_output(target: LlamaTarget) -> None:
    """Text lookup alone, inline: where the text's end occurs nowhere earlier, the policy is not asked (weighing
    lengths and syntax events cost more than the search); every other cycle asks it; output stays plain's."""
    passed_over = 0
    for prompt in PROMPTS:
        request = _request(target, prompt, max_tokens=48)
        plain = run_plain(target, request)
        policy = CountingFixedLength(4)
        spec, cycles, _ = run_spec(target, LookupDrafter(), request, prompt, policy=policy, background=False,
                                   inline=True)
        assert_lossless(target, request, plain, spec)  # equal, or a kernel near-tie flip (another machine's kernels)
        assert policy.asked + policy.passed_over == spec.stats.target_forward_passes
        assert len(cycles) <= policy.asked  # every draft was asked for (an aligned draft may come back empty)
        passed_over += policy.passed_over
        for name in ("lookup-gate", "triggers-lookup-only"):
            chosen = POLICIES[name](LookupDrafter(), _language(prompt))
            spec, _, _ = run_spec(target, LookupDrafter(), request, prompt, policy=chosen, background=False,
                                  inline=True)
            assert_lossless(target, request, plain, spec)
    assert passed_over > 0, "cycles without a match must be exercised"
