"""The policies replayed over the target's own answers, each cycle priced by a verify profile: lookup's decisions
compared offline, without the noise of timed runs.

    .venv/bin/python scripts/policy_replay.py --answers /tmp/answers.json
    .venv/bin/python scripts/policy_replay.py --answers /tmp/answers.json --fresh --profile 1:1,2:1.6,3:2,17:4.2

The first run writes the target's plain greedy answers (128 tokens) to prompts of every workload (HumanEval 5 to
60, edits 5 to 59 and files 5 to 29 by twos, prose 5 to 23: 116 prompts, about 20 minutes on 2 cores) to
``--answers``; later runs read them. Each answer is then written again as ``ds4spec bench`` would with the
lookup drafter alone: the policy (the triggers, or with ``--gate`` the gate) decides each cycle's length, lookup
proposes, the draft is aligned to the target's tokens, and the answer's own tokens say how many are kept (greedy
output equals the plain answer, so the verdicts are exact). A cycle costs what the profile says a pass over its
tokens costs, in plain steps; the policies learn from those costs as they would from timed ones. Printed: each
answer's speedup (tokens over plain steps spent), and per workload the total. Policies learn from answer to answer
in the order above, as one bench mode does, or start afresh for each (``--fresh``, as ``ds4spec complete``).

A timed cost is noisy, and a policy that decides on a near-tie can go either way: with ``--noise 0.1`` each cost the
policy sees is drawn about 10% either side of the profile's (``--seed``), the tally still counting the profile's.

What it leaves out: the model drafter (it would have to run), timing noise but for ``--noise``, the loop's own cost,
and launching plain steps ahead. Its figures are for comparing policies on the same answers, not for quoting as
speedups.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ds4spec.backend.target import LlamaTarget
from ds4spec.backend.tokenizer import LlamaTokenizer
from ds4spec.bench.modes import task_language
from ds4spec.bench.workloads import Task, load_tasks
from ds4spec.core.align import align_draft
from ds4spec.core.contracts import DraftPolicy
from ds4spec.core.events import Finished
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.core.speculative import ALIGN_WINDOW
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.loading import load_rules, load_target
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error
from ds4spec.policy.memory import PolicyMemory
from ds4spec.policy.profile import VerifyProfile, profile_for

SAMPLE = {"humaneval": range(5, 61), "edits": range(5, 61, 2), "files": range(5, 30, 2), "prose": range(5, 24)}
MAX_TOKENS = 128
PLAIN_STEP = 0.07  # seconds: any unit works, the policies compare costs with a plain step's


def write_answers(target: LlamaTarget, path: Path, workloads: Iterable[str]) -> None:
    """The target's plain greedy answers to SAMPLE's prompts of ``workloads``, as token ids, to ``path``."""
    rows = []
    for workload in workloads:
        tasks = load_tasks(workload)
        for i in (i for i in SAMPLE[workload] if i < len(tasks)):
            task = tasks[i]
            request = GenerationRequest(task.prompt_tokens(target), MAX_TOKENS, stop=task.stop)
            finished = [e for e in generate_plain(target, request) if isinstance(e, Finished)][-1]
            rows.append({"workload": workload, "task": task.task_id, "tokens": list(finished.tokens)})
            print(f"{workload} {task.task_id}: {len(finished.tokens)} tokens", flush=True)
    path.write_text(json.dumps(rows))


def load_answers_target(path: Path, name: str | None, workloads: Iterable[str] = SAMPLE) -> LlamaTarget:
    """The target, after writing its answers to ``path`` where the file is missing."""
    try:
        target = load_target(Settings(target=name))
    except Ds4Error as exc:
        raise SystemExit(f"{Path(sys.argv[0]).name}: {exc}") from None
    if not path.exists():
        write_answers(target, path, workloads)
    return target


def answers(path: Path) -> list[tuple[Task, list[int]]]:
    """The answers in ``path``, each with its prompt's task, in the order they were written; a file that is not
    such a list is a one-line error."""
    tasks: dict[tuple[str, str], Task] = {}
    try:
        rows = [(row["workload"], row["task"], [int(t) for t in row["tokens"]]) for row in json.loads(path.read_text())]
        for workload, task_id, _ in rows:
            if (workload, task_id) not in tasks:
                tasks.update(((workload, t.task_id), t) for t in load_tasks(workload))
        return [(tasks[(workload, task_id)], tokens) for workload, task_id, tokens in rows]
    except (OSError, ValueError, TypeError, KeyError, Ds4Error) as exc:
        raise SystemExit(f"{Path(sys.argv[0]).name}: {path} is not an answers file written by policy_replay.py "
                         f"({type(exc).__name__}: {exc})") from None


def replay(policy: DraftPolicy, task: Task, tokens: list[int], tok: LlamaTokenizer, profile: VerifyProfile,
           noise: float = 0.0, rng: random.Random | None = None) -> tuple[float, int, int]:
    """Plain steps the answer ``tokens`` takes under ``policy`` with lookup drafting, its drafted and kept tokens."""
    context = task.draft_context()
    drafter = LookupDrafter()
    drafter.begin(context)
    policy.begin(context)
    first = tok.piece(tokens[0])  # the prompt's pass chose it
    drafter.extend(first)
    policy.extend(first)
    at, steps, drafted, kept = 1, 1.0, 0, 0
    while at < len(tokens):
        k, draft = 0, []
        if not drafter.may_propose():
            policy.pass_over()
        elif (k := min(policy.draft_length(), MAX_TOKENS - at)) > 0:
            policy.observe_reading(0.0)
            text = drafter.propose(k + 2).text
            if text:
                draft = align_draft(tok, tokens[max(0, at - ALIGN_WINDOW) : at], text, max_tokens=k,
                                    window=ALIGN_WINDOW)
        accepted = 0
        while accepted < len(draft) and at + accepted < len(tokens) and draft[accepted] == tokens[at + accepted]:
            accepted += 1
        cost = profile.ratio(len(draft)) if draft else 1.0
        seen = cost * math.exp(rng.gauss(0.0, noise)) if noise and rng else cost
        policy.observe(k, len(draft), accepted, seen * PLAIN_STEP, "lookup" if draft else "none")
        committed = tokens[at : at + accepted + 1]
        at += len(committed)
        steps, drafted, kept = steps + cost, drafted + len(draft), kept + accepted
        if at < len(tokens):
            text = tok.detokenize(committed)
            drafter.extend(text)
            policy.extend(text)
    return steps, drafted, kept


def parse_profile(spec: str) -> VerifyProfile:
    """``1:1,2:1.64,17:4.2``: a pass over n tokens (the pending one included) in plain steps."""
    try:
        spans = {int(n): float(r) for n, r in (item.split(":") for item in spec.split(","))}
    except ValueError:
        raise SystemExit(f"policy_replay: --profile wants n:steps pairs separated by commas, got {spec!r}") from None
    if spans.get(1) != 1.0:
        raise SystemExit("policy_replay: --profile must give a pass over 1 token as 1 plain step (1:1)")
    return VerifyProfile(spans, "measured")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=Path, required=True, help="the answers' file: written if missing")
    parser.add_argument("--target", default=None, help="a model name or GGUF path (default: the default pair's)")
    parser.add_argument("--profile", default=None,
                        help="verify profile as n:steps,... (default: the target's, measured or cached)")
    parser.add_argument("--gate", action="store_true", help="the gate of lookup alone (default: the triggers)")
    parser.add_argument("--fresh", action="store_true", help="a fresh policy for each answer")
    parser.add_argument("--workload", action="append", choices=sorted(SAMPLE), help="only these workloads")
    parser.add_argument("--noise", type=float, default=0.0, help="spread of the costs the policy sees (0.1: 10%%)")
    parser.add_argument("--seed", type=int, default=0, help="of the noise")
    args = parser.parse_args()
    workloads = args.workload or list(SAMPLE)
    target = load_answers_target(args.answers, args.target, workloads)
    profile = parse_profile(args.profile) if args.profile else profile_for(target)
    settings = Settings(target=args.target)
    rules = None if args.gate else load_rules(settings)
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0, 0])
    memory: PolicyMemory | None = None
    rng = random.Random(args.seed)
    for task, tokens in answers(args.answers):
        if task.workload not in workloads:
            continue
        if memory is None or args.fresh:
            memory = PolicyMemory(profile, LookupDrafter.sources)
        policy = memory.policy(rules, task_language(task), settings.draft_max)
        steps, drafted, kept = replay(policy, task, tokens, target.tokenizer, profile, args.noise, rng)
        print(f"{task.workload:9} {task.task_id:14} {len(tokens) / steps:5.2f}x  drafted {drafted:4d}  kept {kept:4d}")
        total = totals[task.workload]
        for i, value in enumerate((steps, len(tokens), drafted, kept)):
            total[i] += value
    for workload, (steps, n, drafted, kept) in totals.items():
        print(f"{workload:9} {'all':14} {n / steps:5.3f}x  drafted {int(drafted):4d}  kept {int(kept):4d}")


if __name__ == "__main__":
    main()
