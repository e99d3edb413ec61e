"""Two variants of one mode in the real loop, timed: each prompt run plain and with both variants, in rotated order,
one process, each variant its own policy memory learning across prompts as the bench's does. Prints per prompt the
speedups over plain (seconds a token), whether the outputs equal plain's, and per variant the drafted, accepted tokens
and target passes with their syntax events.

Variants: ``heal`` (a model drafter that heals its context's last token, and one that does not: ``--no-heal``) and
``blank_line`` (the triggers with the ``blank_line`` event, and with it merged into ``newline`` as before run 57).

    python docs/bench/cpu/ab_interleaved.py heal humaneval 0 15 [triggers|pair [f16]]
    python docs/bench/cpu/ab_interleaved.py blank_line humaneval 0 15 triggers f16
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable

from ds4spec.bench.command import _last, warm_up
from ds4spec.bench.modes import ModePlan, load_mode
from ds4spec.bench.workloads import load_tasks
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import generate_speculative
from ds4spec.engine.loading import load_target, spec_settings
from ds4spec.engine.settings import load_settings
from ds4spec.policy.profile import profile_for
from ds4spec.policy.syntax import SyntaxTracker

Patch = Callable[[DraftPolicy], None]


def _as_before_blank_lines(policy: DraftPolicy) -> None:
    """The policy's syntax tracker names a blank line's start ``newline``, as it did before the event was split."""
    tracker = getattr(policy, "tracker", None)
    if not isinstance(tracker, SyntaxTracker):
        return
    event = tracker.event

    def merged():  # type: ignore[no-untyped-def]
        family, name = event()
        return family, "newline" if name == "blank_line" else name

    tracker.event = merged  # type: ignore[method-assign]


def _unchanged(policy: DraftPolicy) -> None:
    return None


VARIANTS: dict[str, dict[str, tuple[dict[str, object], Patch]]] = {
    "heal": {"healed": ({}, _unchanged), "unhealed": ({"heal": False}, _unchanged)},
    "blank_line": {"split": ({}, _unchanged), "merged": ({}, _as_before_blank_lines)},
}


def main(variant: str, workload: str, skip: int, limit: int, mode: str = "triggers", pair: str = "f16") -> None:
    arms = VARIANTS[variant]
    settings = load_settings({"pair": pair})
    target = load_target(settings)
    profile = profile_for(target)
    plans: dict[str, tuple[ModePlan, Patch]] = {
        name: (load_mode(load_settings({"pair": pair, **overrides}), mode, profile), patch)
        for name, (overrides, patch) in arms.items()
    }
    tasks = load_tasks(workload, limit, skip=skip)
    warm_up(target, [plan for plan, _ in plans.values()], tasks[0])
    names = ("plain", *arms)
    totals = {a: [0.0, 0, 0, 0, 0] for a in names}  # seconds, tokens, drafted, accepted, passes
    ratios: dict[str, list[float]] = {a: [] for a in arms}
    for i, task in enumerate(tasks):
        request = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)
        per, counts, outs = {}, {}, {}
        for arm in names[i % len(names):] + names[:i % len(names)]:
            target.reset()
            if arm == "plain":
                finished = _last(generate_plain(target, request))
            else:
                plan, patch = plans[arm]
                policy = plan.policy(task, False)
                patch(policy)
                finished = _last(generate_speculative(target, plan.drafter, request, task.draft_context(),
                                                      spec_settings(plan.settings), policy=policy))
            st = finished.stats
            per[arm] = st.generation_seconds / max(1, st.committed_tokens)
            events = {k: (v.cycles, v.drafted_tokens, v.accepted_tokens) for k, v in st.events.items()}
            counts[arm] = (st.drafted_tokens, st.accepted_tokens, st.target_forward_passes, events)
            outs[arm] = finished.tokens
            for j, value in enumerate((st.generation_seconds, st.committed_tokens, st.drafted_tokens,
                                       st.accepted_tokens, st.target_forward_passes)):
                totals[arm][j] += value
        for a in arms:
            ratios[a].append(per["plain"] / per[a])
        line = "  ".join(f"{a} {ratios[a][-1]:.3f}x" for a in arms)
        same = {a: outs[a] == outs["plain"] for a in arms}
        print(f"{task.task_id:14s} plain {per['plain'] * 1000:.0f} ms/tok  {line}  same {same}", flush=True)
        for a in arms:
            print("   ", a, counts[a], flush=True)
    for a in names:
        s, n, drafted, accepted, passes = totals[a]
        print(f"{a:9s} {n} tokens {s:.1f} s  {n / s:.2f} tok/s  drafted {drafted} accepted {accepted} passes {passes}")
    for a in arms:
        over_all = (totals["plain"][0] / totals["plain"][1]) / (totals[a][0] / totals[a][1])
        geomean = math.exp(statistics.fmean(map(math.log, ratios[a])))
        print(f"{a}: over all tokens {over_all:.3f}x, geomean {geomean:.3f}x")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:7])
