"""Token healing of the model drafter, counted (no timing): teacher-forced at every token boundary of the target's own
greedy answers, and in the real loop at a fixed draft length.

    python docs/bench/cpu/healing.py teacher humaneval 0 10     # SmolLM2 Q8_0 drafting 4 of its tokens everywhere
    python docs/bench/cpu/healing.py loop humaneval 0 10 2      # generate_speculative, SmolLM2 alone, 2 target tokens

The target is the default pair's Q4_K_M file (the F16 file holds the same weights; its greedy answers are the same but
for near-ties), the drafter the F16 pair's SmolLM2 Q8_0, run unhealed and healed. ``teacher`` prints, by what the
committed text's last target token is (a newline, spaces, other), the drafted and accepted target tokens; ``loop``
the drafted and accepted tokens, the target's passes and the drafter's tokens.
"""

from __future__ import annotations

import sys
from collections import Counter

from ds4spec.bench.command import _last
from ds4spec.bench.workloads import Task, load_tasks
from ds4spec.core.align import align_draft
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.sampling import SamplingSettings
from ds4spec.core.speculative import SpecSettings, generate_speculative
from ds4spec.drafters.guard import GuardedDrafter
from ds4spec.drafters.llama_drafter import LlamaDrafter
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import load_settings
from ds4spec.policy.gate import FixedLength
from ds4spec.store.local import resolve_model

DRAFTER = "smollm2-135m-q8_0"


def _kind(piece: bytes) -> str:
    if piece.endswith(b"\n"):
        return "newline"
    return "spaces" if piece and not piece.strip(b" \t") else "other"


def teacher(target: object, tasks: list[Task], heal: bool) -> None:
    tok = target.tokenizer  # type: ignore[attr-defined]
    drafter = LlamaDrafter(resolve_model(DRAFTER).path, n_threads=2, heal=heal)
    counts: dict[str, Counter[str]] = {}
    for task in tasks:
        target.reset()  # type: ignore[attr-defined]
        prompt = task.prompt_tokens(target)  # type: ignore[arg-type]
        answer = list(_last(generate_plain(target, GenerationRequest(prompt, 128, SamplingSettings(),  # type: ignore[arg-type]
                                                                     task.stop))).tokens)
        drafter.begin(task.draft_context())
        for i in range(len(answer)):
            if i:
                drafter.extend(tok.piece(answer[i - 1]))
            draft = drafter.propose(4)
            aligned = align_draft(tok, prompt + answer[:i], draft.text, max_tokens=8, unstable_tail=True)
            accepted = 0
            while accepted < len(aligned) and i + accepted < len(answer) and aligned[accepted] == answer[i + accepted]:
                accepted += 1
            c = counts.setdefault(_kind(tok.piece(answer[i - 1]) if i else b""), Counter())
            c.update(positions=1, drafted=len(aligned), accepted=accepted, first=accepted > 0)
    drafter.close()
    print("healed" if heal else "unhealed", {k: dict(v) for k, v in counts.items()},
          "accepted in all", sum(c["accepted"] for c in counts.values()), flush=True)


def loop(target: object, tasks: list[Task], heal: bool, length: int) -> None:
    drafter = LlamaDrafter(resolve_model(DRAFTER).path, n_threads=2, heal=heal)
    guarded = GuardedDrafter(drafter, deadline_s=10.0, background=False, inline=True)
    total: Counter[str] = Counter()
    for task in tasks:
        target.reset()  # type: ignore[attr-defined]
        request = GenerationRequest(task.prompt_tokens(target), 128, SamplingSettings(), task.stop)  # type: ignore[arg-type]
        stats = _last(generate_speculative(target, guarded, request, task.draft_context(),  # type: ignore[arg-type]
                                           SpecSettings(), policy=FixedLength(length))).stats
        total.update(drafted=stats.drafted_tokens, accepted=stats.accepted_tokens,
                     target_passes=stats.target_forward_passes, committed=stats.committed_tokens)
    guarded.settle()
    total["drafter_tokens"] = drafter.stats.drafted_tokens
    guarded.close()
    print("healed" if heal else "unhealed", dict(total), flush=True)


def main(how: str, workload: str, skip: int, limit: int, length: int = 2) -> None:
    target = load_target(load_settings({"pair": "default"}))
    tasks = load_tasks(workload, limit, skip=skip)
    for heal in (False, True):
        if how == "teacher":
            teacher(target, tasks, heal)
        else:
            loop(target, tasks, heal, length)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), *map(int, sys.argv[5:6]))
