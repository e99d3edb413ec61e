"""On a GPU llama.cpp returns from a pass's launch at once and the rows wait for it (H200: 0.14 ms, then 1.93 ms), so
the next plain step is launched before the bookkeeping of the token before it. What must hold: the same output as
plain decoding, the context left as plain decoding leaves it, and a draft decided after such a step verified against
that step's row first. On a CPU the pass runs inside the launch, so these tests force the path (``launch_ahead``);
that a CPU target does not choose it by itself is tested against real llama.cpp timings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from spec_helpers import EveryOtherCycle, OracleDrafter, run_plain, run_spec

from ds4spec.backend.target import LlamaTarget, PassTiming
from ds4spec.backend.target_options import TargetOptions
from ds4spec.core.drafting import Draft, DraftContext, Drafter
from ds4spec.core.early_launch import EarlyLaunch
from ds4spec.core.events import FinishReason
from ds4spec.core.plain import GenerationRequest
from ds4spec.core.sampling import SamplingSettings

PROMPTS = [
    b"def fibonacci(n):\n    ",
    b"import os\nimport sys\n",
    b"# Notes\n\nThe drafter proposes text; the target",
    b"class Counter:\n    def __init__(self):\n        self.",
]
GREEDY = SamplingSettings()
SAMPLED = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=11)


@pytest.fixture(scope="module")
def targets(tiny_bpe_gguf: Path) -> Iterator[tuple[LlamaTarget, LlamaTarget]]:
    """The same model twice: launching plain steps ahead, and not."""
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0, launch_ahead=True)) as ahead, \
            LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0, launch_ahead=False)) as plain:
        yield ahead, plain


class WrongFirstWord(Drafter):
    """Proposes the target's own future text with its first byte changed: rejected at its first token."""

    name = "wrong-first"

    def __init__(self, future: bytes) -> None:
        self.oracle = OracleDrafter(future)

    def begin(self, context: DraftContext) -> None:
        self.oracle.begin(context)

    def extend(self, committed: bytes) -> None:
        self.oracle.extend(committed)

    def propose(self, max_tokens: int) -> Draft:
        draft = self.oracle.propose(max_tokens)
        return Draft(b"\x07" + draft.text[1:], draft.source, draft.drafter_tokens) if draft.text else draft


def _request(target: LlamaTarget, prompt: bytes, sampling: SamplingSettings = GREEDY, **kw: object
             ) -> GenerationRequest:
    return GenerationRequest(target.tokenizer.tokenize(prompt, add_special=True), sampling=sampling,
                             **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("max_tokens", [1, 2, 7, 40])
def test_plain_decoding_launched_ahead_writes_what_plain_writes_and_leaves_the_same_context(
        targets: tuple[LlamaTarget, LlamaTarget], sampling: SamplingSettings, max_tokens: int) -> None:
    ahead, plain = targets
    for prompt in PROMPTS:
        expected = run_plain(plain, _request(plain, prompt, sampling, max_tokens=max_tokens))
        got = run_plain(ahead, _request(ahead, prompt, sampling, max_tokens=max_tokens))
        assert (got.tokens, got.reason) == (expected.tokens, expected.reason)
        assert ahead.tokens == plain.tokens  # no step launched for a token that ended the answer stays


def test_a_stop_string_takes_back_the_step_launched_for_its_last_token(
        targets: tuple[LlamaTarget, LlamaTarget]) -> None:
    ahead, plain = targets
    stopped = 0
    for prompt in PROMPTS:
        text = plain.tokenizer.detokenize(run_plain(plain, _request(plain, prompt, max_tokens=40)).tokens)
        if len(text) < 12:
            continue
        stop = text[8:11].decode("utf-8", errors="ignore")
        if not stop:
            continue
        expected = run_plain(plain, _request(plain, prompt, max_tokens=40, stop=[stop]))
        got = run_plain(ahead, _request(ahead, prompt, max_tokens=40, stop=[stop]))
        assert (got.tokens, got.reason) == (expected.tokens, expected.reason)
        assert ahead.tokens == plain.tokens
        stopped += got.reason is FinishReason.STOP
    assert stopped


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_a_draft_after_a_step_launched_ahead_holds_its_first_token_and_takes_a_second_pass(
        targets: tuple[LlamaTarget, LlamaTarget], sampling: SamplingSettings) -> None:
    ahead, plain = targets
    accepted = 0
    for prompt in PROMPTS:
        request = _request(plain, prompt, sampling, max_tokens=40)
        expected = run_plain(plain, request)
        future = plain.tokenizer.detokenize(expected.tokens)
        policy = EveryOtherCycle(4)
        spec, reports, _ = run_spec(ahead, OracleDrafter(future), request, prompt, policy=policy)
        assert (spec.tokens, spec.reason) == (expected.tokens, expected.reason)
        # Every cycle has its step; a draft whose first token held, a second pass over the draft.
        held = sum(r.accepted > 0 for r in reports)
        assert spec.stats.target_forward_passes == policy.cycles + held
        accepted += spec.stats.accepted_tokens
    assert accepted


def test_a_draft_rejected_at_its_first_token_costs_no_pass_beyond_the_step(
        targets: tuple[LlamaTarget, LlamaTarget]) -> None:
    ahead, plain = targets
    for prompt in PROMPTS:
        request = _request(plain, prompt, max_tokens=40)
        expected = run_plain(plain, request)
        future = plain.tokenizer.detokenize(expected.tokens)
        policy = EveryOtherCycle(4)
        spec, reports, _ = run_spec(ahead, WrongFirstWord(future), request, prompt, policy=policy)
        assert (spec.tokens, spec.reason) == (expected.tokens, expected.reason)
        rejected = sum(r.accepted == 0 for r in reports)
        assert rejected >= len(reports) / 2 > 0
        assert spec.stats.target_forward_passes == policy.cycles + len(reports) - rejected


def test_a_cpu_target_does_not_launch_ahead_by_itself(tiny_bpe_gguf: Path) -> None:
    """On a CPU llama.cpp computes the pass inside the launch: the rows are there at once."""
    with LlamaTarget(tiny_bpe_gguf, TargetOptions(n_ctx=512, n_gpu_layers=0)) as target:
        run_plain(target, _request(target, PROMPTS[0], max_tokens=24))
        assert target.pass_timing.samples >= PassTiming.SAMPLES
        assert target.launches_ahead == "never"


@pytest.mark.parametrize(("launch_ms", "wait_ms", "beside"), [(0.14, 1.93, True), (35.0, 0.01, False)],
                         ids=["h200", "cpu"])
def test_a_pass_runs_beside_the_caller_where_its_rows_wait_longer_than_its_launch(
        launch_ms: float, wait_ms: float, beside: bool) -> None:
    timing = PassTiming()
    for _ in range(PassTiming.SAMPLES - 1):
        timing.observe(launch_ms / 1e3, wait_ms / 1e3)
    assert not timing.runs_beside()  # not before a few passes were timed
    timing.observe(launch_ms / 1e3, wait_ms / 1e3)
    assert timing.runs_beside() is beside


def test_steps_are_launched_early_where_drafts_rarely_follow_a_plain_step_and_not_where_they_often_do() -> None:
    """H200-like figures: a 2.2 ms step, 0.15 ms of bookkeeping hidden. On code a held draft follows one plain step in
    a hundred (the overlap pays); on an edit, one in four (each costs a step: it does not), until the copies end."""
    early = EarlyLaunch()

    def share_launched(steps: int, every: int) -> float:
        launched = 0
        for i in range(steps):
            launched += early.pays()
            early.plain_step(0.0022, 0.00015)
            early.after_plain_step(every > 0 and i % every == every - 1)
        return launched / steps

    assert share_launched(300, 100) > 0.95  # code
    assert share_launched(100, 4) < 0.25  # an edit's copies
    assert share_launched(100, 0) > 0.8  # new code after them, once a dozen plain steps have passed
