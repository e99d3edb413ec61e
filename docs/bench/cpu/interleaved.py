"""Plain decoding and one mode, answer by answer and interleaved, in one process: where a 5-prompt `ds4spec bench`
run cannot tell 1% from the VM's drift (answers that drafted nothing there ran from 0.87x to 1.07x of plain).

Each prompt runs ``REPS`` times in each of three ways, in alternating order: plain, the mode with a fresh policy (as
one `ds4spec complete` a prompt) and the mode with the policy that learns across answers (as a session). Prints per
prompt the ratios of the median seconds a token to plain's (a token, not an answer: a near-tie flip can make an
answer longer or shorter than plain's), the drafted tokens, and their geometric means.

    python docs/bench/cpu/interleaved.py humaneval 5 5 6 [triggers [f16]]
"""

from __future__ import annotations

import math
import statistics
import sys

from ds4spec.bench.command import _last, warm_up
from ds4spec.bench.modes import load_mode
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.engine.loading import load_target, spec_settings
from ds4spec.engine.settings import load_settings
from ds4spec.policy.profile import profile_for

WAYS = ("plain", "fresh", "learned")


def main(workload: str, skip: int, limit: int, reps: int, mode: str = "triggers", pair: str = "default") -> None:
    settings = load_settings({"pair": pair})
    target = load_target(settings)
    plan = load_mode(settings, mode, profile_for(target))
    tasks = load_tasks(workload, limit, skip=skip)
    warm_up(target, [plan], tasks[0])
    ratios: dict[str, list[float]] = {"fresh": [], "learned": []}
    for task in tasks:
        request = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        drafted: dict[str, int] = {way: 0 for way in WAYS}
        for rep in range(reps):
            for way in WAYS if rep % 2 else reversed(WAYS):
                target.reset()
                if way == "plain":
                    finished = _last(generate_plain(target, request))
                else:
                    policy = plan.fresh_policy(task) if way == "fresh" else plan.policy(task, False)
                    finished = _last(generate_speculative(target, plan.drafter, request, task.draft_context(),
                                                          spec_settings(plan.settings), policy=policy))
                seconds[way].append(finished.stats.generation_seconds / max(1, finished.stats.committed_tokens))
                drafted[way] += finished.stats.drafted_tokens
        plain = statistics.median(seconds["plain"])
        row = []
        for way in ("fresh", "learned"):
            ratios[way].append(plain / statistics.median(seconds[way]))
            row.append(f"{way} {ratios[way][-1]:.3f}x ({drafted[way]} drafted)")
        print(f"{task.task_id:14s} plain {plain * 1000:.1f} ms a token  " + "  ".join(row), flush=True)
    means = "  ".join(f"{way} {math.exp(statistics.fmean(map(math.log, r))):.3f}x" for way, r in ratios.items())
    print(f"{pair} pair, {workload} {mode}, geometric mean over {len(tasks)} prompts, {reps} runs each: {means}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:7])
