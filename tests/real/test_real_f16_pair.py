"""The memory-bound pair (the 1.5B target stored as F16, the SmolLM2 drafter of another tokenizer family): greedy
speculative output equals plain greedy output, with SmolLM2 drafting, with lookup, and with the triggers routing
between them as the engine does by default.

`scripts/setup.sh test` derives the F16 file from the verified Q4_K_M one (about a minute, 3.5 GB).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from spec_helpers import assert_lossless, run_plain, run_spec

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.target_options import TargetOptions
from ds4spec.bench.modes import task_language
from ds4spec.bench.workloads import Task, load_tasks
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.drafting import Drafter
from ds4spec.core.plain import GenerationRequest
from ds4spec.drafters.hybrid import HybridDrafter
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.policy.gate import FixedLength
from ds4spec.policy.rules import load_rulebook
from ds4spec.policy.trigger_learning import TriggerLearning
from ds4spec.policy.triggers import TriggerPolicy

MAX_TOKENS = 40


@pytest.fixture(scope="module")
def f16_target(f16_pair_paths: dict[str, Path]) -> Iterator[LlamaTarget]:
    with LlamaTarget(f16_pair_paths["target"], TargetOptions(n_ctx=2048)) as target:
        yield target


@pytest.fixture(scope="module")
def smollm(f16_pair_paths: dict[str, Path]) -> Iterator[LlamaDrafter]:
    drafter = LlamaDrafter(f16_pair_paths["drafter"], n_ctx=2048)
    yield drafter
    drafter.close()


def _tasks() -> list[Task]:
    return load_tasks("humaneval", 3) + load_tasks("edits", 2) + load_tasks("prose", 2)


def _check(target: LlamaTarget, tasks: list[Task], drafter_for: Callable[[Task], Drafter],
           policy_for: Callable[[Task], DraftPolicy]) -> tuple[int, int]:
    """Runs each task plain and speculative; returns the accepted draft tokens and the near-tie flips."""
    accepted = flips = 0
    for task in tasks:
        request = GenerationRequest(task.prompt_tokens(target), MAX_TOKENS, stop=task.stop)
        plain = run_plain(target, request)
        spec, _, guarded = run_spec(target, drafter_for(task), request, task.draft_context(), policy=policy_for(task))
        flips += assert_lossless(target, request, plain, spec)
        accepted += spec.stats.accepted_tokens
        assert guarded.failures.total == 0
    return accepted, flips


def test_smollm2_drafting_for_the_f16_target_is_lossless(f16_target: LlamaTarget, smollm: LlamaDrafter) -> None:
    """Every cycle drafts 4 target tokens' worth of SmolLM2 text (lookup on the edits, which copy their input)."""
    accepted, flips = _check(
        f16_target, _tasks(),
        lambda task: LookupDrafter() if task.workload == "edits" else smollm,
        lambda task: FixedLength(4),
    )
    print(f"fixed drafts: {accepted} accepted draft tokens, {flips} near-tie flips")
    assert accepted > 0


def test_the_default_triggers_on_the_f16_pair_are_lossless(f16_target: LlamaTarget, smollm: LlamaDrafter,
                                                          tmp_path: Path) -> None:
    """The engine's default: a hybrid of lookup and SmolLM2, the triggers choosing source and length per event and
    learning across the prompts."""
    book = load_rulebook(user_dir=tmp_path)
    learning = TriggerLearning()
    accepted, flips = _check(
        f16_target, _tasks(),
        lambda task: HybridDrafter(LookupDrafter(), smollm),
        lambda task: TriggerPolicy(book, task_language(task), 64, ("lookup", "model"), learning),
    )
    print(f"triggers: {accepted} accepted draft tokens, {flips} near-tie flips")
    assert accepted > 0
    assert learning.costs.tables["model"].drafts_measured  # SmolLM2's drafts went through the verifier too
