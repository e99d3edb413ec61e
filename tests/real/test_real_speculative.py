"""Speculative decoding on the real default pair: lossless on benchmark prompts, and alignment proven by an
oracle drafter whose text the target accepts almost entirely."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from spec_helpers import OracleDrafter, assert_lossless, run_plain, run_spec

from ds4spec.decode import GenerationRequest
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.llama_runtime import init_llama
from ds4spec.policy import FixedLength
from ds4spec.target import LlamaTarget
from ds4spec.tokenizer import LlamaTokenizer
from ds4spec.workloads import Task, load_tasks

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
    # Each flip was checked above to be a near-tie that the two kernels disagree on; a real bug fails that
    # check, not this count. Measured here from empty contexts: 5 of 22 (4 of them prose, drafting 6 tokens
    # every cycle).
    assert accepted > 0 and flips <= len(tasks) // 3


def test_oracle_drafter_with_another_tokenizer_gets_95_percent_accepted(
    real_target: LlamaTarget, default_pair_paths: dict
) -> None:
    """Proves the alignment: the target's own future text, cut into SmolLM2 tokens, is accepted."""
    init_llama()
    from ds4spec.target import TargetOptions

    with LlamaTarget(default_pair_paths["drafter"], TargetOptions(n_ctx=64)) as smol:
        smol_tok: LlamaTokenizer = smol.tokenizer

        def smol_pieces(data: bytes) -> list[bytes]:
            return [smol_tok.piece(t) for t in smol_tok.tokenize(data)]

        drafted = accepted = 0
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
    print(f"oracle: {accepted}/{drafted} drafted tokens accepted")
    assert drafted > 200 and accepted / drafted >= 0.95
