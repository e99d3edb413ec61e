"""`ds4spec bench` warms up before its first timed run: a GPU backend loads the kernels of each span length on first
use, and a mode's first drafter and policy calls cost more than later ones (measured on an H200: the first prompt's
first speculative run took 50 to 90 ms longer than its plain run, a third of a 46-token answer's time)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ds4spec.bench.command import WARM_UP_SPANS, warm_up
from ds4spec.bench.modes import load_mode
from ds4spec.bench.workloads import load_tasks
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import Settings
from ds4spec.policy.profile import VerifyProfile

PROFILE = VerifyProfile({1: 0.01, 2: 0.011, 4: 0.012, 8: 0.014, 16: 0.02, 64: 0.05}, "measured")


@pytest.mark.parametrize("drafter", ["lookup", "model"])
def test_the_warm_up_meets_every_span_length_and_runs_each_mode_once_without_teaching_its_policy(
    tiny_models: dict[str, Path], drafter: str
) -> None:
    settings = Settings(target=str(tiny_models["bpe"]), ctx=1024, gpu_layers=0, warmup=0, cost_check=False)
    target = load_target(settings)
    plan = load_mode(settings, "lookup" if drafter == "lookup" else str(tiny_models["spm"]), PROFILE)
    spans: list[int] = []
    evaluate = target.eval_span

    def recording(tokens: Sequence[int]) -> np.ndarray:
        spans.append(len(tokens))
        return evaluate(tokens)

    target.eval_span = recording  # type: ignore[method-assign]
    begun: list[object] = []
    begin = plan.drafter.begin
    plan.drafter.begin = lambda context: (begun.append(context), begin(context))[-1]  # type: ignore[method-assign]
    learned = pickle.dumps(plan.memory)
    try:
        warm_up(target, [plan], load_tasks("humaneval", 1)[0])
    finally:
        plan.drafter.close()
        target.close()
    assert set(WARM_UP_SPANS) <= set(spans)
    assert len(begun) == 1  # one speculative run of the mode
    assert pickle.dumps(plan.memory) == learned  # its policy learned nothing from it


def test_after_the_warm_up_a_model_drafter_keeps_nothing_of_the_first_prompt(tiny_models: dict[str, Path]) -> None:
    """The warm-up runs the first prompt with a line before it: run as it stands, it left the prompt in the model
    drafter's cache, and the first measured answer's drafter read it for nothing (1 ms where it took 0.19 s)."""
    settings = Settings(target=str(tiny_models["bpe"]), ctx=1024, gpu_layers=0, warmup=0, cost_check=False)
    target = load_target(settings)
    plan = load_mode(settings, str(tiny_models["spm"]), PROFILE)
    task = load_tasks("humaneval", 1)[0]
    try:
        warm_up(target, [plan], task)
        model = plan.drafter.drafter  # the guarded model drafter
        before = replace(model.stats)
        model.begin(task.draft_context())
        model.prepare()
        reused = model.stats.reused_tokens - before.reused_tokens
        read = model.stats.evaluated_tokens - before.evaluated_tokens
    finally:
        plan.drafter.close()
        target.close()
    assert read > 50 and reused <= 1  # at most the BOS token before the text
