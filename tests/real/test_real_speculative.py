"""Speculative decoding on the real default pair: lossless on benchmark prompts, and alignment proven by an
oracle drafter whose text the target accepts almost entirely."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from spec_helpers import EveryOtherCycle, OracleDrafter, assert_lossless, run_plain, run_spec

from ds4spec.backend.runtime import init_llama
from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.bench.workloads import Task, load_tasks
from ds4spec.core.plain import GenerationRequest
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.policy.gate import FixedLength

MAX_TOKENS = 40


def _tasks() -> list[Task]:
    # 22 prompts: code generation, edits and prose, as the issue asks (at least 20).
    return load_tasks("humaneval", 8) + load_tasks("edits", 8) + load_tasks("prose", 6)


@pytest.fixture(scope="module")
def smollm(default_pair_paths: dict) -> Iterator[LlamaDrafter]:
    drafter = LlamaDrafter(default_pair_paths["drafter"], n_ctx=2048)
    yield drafter
    drafter.close()


def test_greedy_output_equals_plain_on_benchmark_prompts(real_target: LlamaTarget, smollm: LlamaDrafter) -> None:
    flips = accepted = 0
    tasks = _tasks()
    for task in tasks:
        request = GenerationRequest(task.prompt_tokens(real_target), MAX_TOKENS, stop=task.stop)
        plain = run_plain(real_target, request)
        # The SmolLM2 drafter for code and prose, lookup for edits: each where it is meant to pay.
        drafter = LookupDrafter() if task.workload == "edits" else smollm
        spec, _, guarded = run_spec(real_target, drafter, request, task.draft_context(), policy=FixedLength(6))
        flips += assert_lossless(real_target, request, plain, spec)
        accepted += spec.stats.accepted_tokens
        assert guarded.failures.total == 0
    print(f"{len(tasks)} prompts, {accepted} accepted draft tokens, {flips} near-tie flips")
    # No bound on the number of flips: each one was proven above to be a near-tie within the disagreement of
    # the two kernels at that very position, and how many near-ties a CPU's kernels flip is a fact of the
    # machine (measured on one CPU: 5 of these 22 prompts with its AVX-512 build, 4 with an AVX2-only build),
    # not of ds4spec. A count could only ever restate that check or the machine it was measured on.
    assert accepted > 0


def test_greedy_output_equals_plain_when_plain_steps_are_launched_ahead(
        default_pair_paths: dict, smollm: LlamaDrafter) -> None:
    """The GPU's path (``TargetOptions.launch_ahead``) on the real pair: every draft follows a plain step launched
    ahead, and is judged by that step's row before its own pass."""
    from ds4spec.backend.target_options import TargetOptions

    accepted = 0
    with LlamaTarget(default_pair_paths["target"], TargetOptions(n_ctx=2048, launch_ahead=True)) as target:
        for task in load_tasks("humaneval", 4) + load_tasks("edits", 4):
            request = GenerationRequest(task.prompt_tokens(target), MAX_TOKENS, stop=task.stop)
            plain = run_plain(target, request)
            drafter = LookupDrafter() if task.workload == "edits" else smollm
            spec, _, guarded = run_spec(target, drafter, request, task.draft_context(), policy=EveryOtherCycle(6))
            assert_lossless(target, request, plain, spec)
            accepted += spec.stats.accepted_tokens
            assert guarded.failures.total == 0
    assert accepted > 0


def test_oracle_drafter_with_another_tokenizer_gets_95_percent_accepted(
    real_target: LlamaTarget, default_pair_paths: dict
) -> None:
    """Proves the alignment: the target's own future text, cut into SmolLM2 tokens, is accepted."""
    init_llama()
    from ds4spec.backend.target_options import TargetOptions

    with LlamaTarget(default_pair_paths["drafter"], TargetOptions(n_ctx=64)) as smol:
        smol_tok: LlamaTokenizer = smol.tokenizer

        def smol_pieces(data: bytes) -> list[bytes]:
            return [smol_tok.piece(t) for t in smol_tok.tokenize(data)]

        drafted = accepted = answered = counted = 0
        for task in _tasks()[:12]:
            request = GenerationRequest(task.prompt_tokens(real_target), 64, stop=task.stop)
            plain = run_plain(real_target, request)
            future = real_target.tokenizer.detokenize(plain.tokens)
            spec, _, _ = run_spec(real_target, OracleDrafter(future, smol_pieces), request, task.draft_context(),
                                  policy=FixedLength(8))
            if assert_lossless(real_target, request, plain, spec):
                continue  # a kernel flip: past it the oracle's text is no longer the target's future
            drafted += spec.stats.drafted_tokens
            accepted += spec.stats.accepted_tokens
            answered += len(plain.tokens)
            counted += 1
    print(f"oracle: {accepted}/{drafted} drafted tokens accepted over {counted} prompts ({answered} answer tokens)")
    # Bounds from what this run measured, not from a machine: the oracle drafts 8 tokens of the answer's own
    # text a cycle, so at least half of every counted answer is drafted (a pass adds one token of its own).
    assert counted > 0, "every prompt flipped a near-tie: nothing left to measure the alignment on"
    assert drafted >= answered // 2 and accepted / drafted >= 0.95
