"""Healed against unhealed model drafts in the real loop, timed: each prompt run plain, with a mode whose model drafter
heals and with one whose drafter does not, in rotated order, one process, each arm its own policy memory learning
across prompts as the bench's does. Prints per prompt the speedups over plain (seconds a token), whether the outputs
equal plain's, and per arm the drafted, accepted tokens and target passes with their syntax events.

    python docs/bench/cpu/healing_interleaved.py humaneval 0 15 [triggers|pair [f16]]
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


def main(workload, skip, limit, mode="triggers", pair="f16"):
    settings = load_settings({"pair": pair})
    target = load_target(settings)
    profile = profile_for(target)
    plans = {"healed": load_mode(settings, mode, profile),
             "unhealed": load_mode(load_settings({"pair": pair, "heal": False}), mode, profile)}
    tasks = load_tasks(workload, limit, skip=skip)
    warm_up(target, list(plans.values()), tasks[0])
    arms = ("plain", "healed", "unhealed")
    tot = {a: [0.0, 0] for a in arms}
    acc = {a: [0, 0, 0] for a in arms}
    ratios = {"healed": [], "unhealed": []}
    for i, task in enumerate(tasks):
        request = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)
        order = arms[i % 3:] + arms[:i % 3]
        per = {}
        counts = {}
        outs = {}
        for arm in order:
            target.reset()
            if arm == "plain":
                fin = _last(generate_plain(target, request))
            else:
                plan = plans[arm]
                fin = _last(generate_speculative(target, plan.drafter, request, task.draft_context(),
                                                 spec_settings(plan.settings), policy=plan.policy(task, False)))
            st = fin.stats
            per[arm] = st.generation_seconds / max(1, st.committed_tokens)
            counts[arm] = (st.drafted_tokens, st.accepted_tokens, st.target_forward_passes, dict(st.events))
            outs[arm] = fin.tokens
            tot[arm][0] += st.generation_seconds
            tot[arm][1] += st.committed_tokens
            acc[arm][0] += st.drafted_tokens
            acc[arm][1] += st.accepted_tokens
            acc[arm][2] += st.target_forward_passes
        for a in ("healed", "unhealed"):
            ratios[a].append(per["plain"] / per[a])
        same = {a: outs[a] == outs["plain"] for a in ("healed", "unhealed")}
        print(f"{task.task_id:14s} plain {per['plain']*1000:.0f} ms/tok  healed {ratios['healed'][-1]:.3f}x "
              f"unhealed {ratios['unhealed'][-1]:.3f}x  same {same}", flush=True)
        for a in ("healed", "unhealed"):
            events = {k: (v.cycles, v.drafted_tokens, v.accepted_tokens) for k, v in counts[a][3].items()}
            print("   ", a, counts[a][:3], events, flush=True)
    for a in arms:
        s, n = tot[a]
        print(f"{a:9s} {n} tokens {s:.1f} s  {n / s:.2f} tok/s  drafted {acc[a][0]} accepted {acc[a][1]} "
              f"passes {acc[a][2]}")
    for a in ("healed", "unhealed"):
        print(f"{a}: over all tokens {(tot['plain'][0]/tot['plain'][1])/(tot[a][0]/tot[a][1]):.3f}x, "
              f"geomean {math.exp(statistics.fmean(map(math.log, ratios[a]))):.3f}x")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:6])
