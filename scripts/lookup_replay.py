"""Lookup's drafts replayed over the target's own answers: how often they are right while the text copies and elsewhere.

    .venv/bin/python scripts/lookup_replay.py --target qwen2.5-coder-1.5b

The target writes its plain greedy answers (128 tokens) to prompts that ``ds4spec bench`` does not run (HumanEval
0 to 38 by twos, edits 5 to 59 by threes, prose 0 to 11: 51 prompts). At every token of each answer, the lookup
drafter proposes 16 tokens' worth of bytes, and the tokens of the answer that the proposal spells are counted as
accepted. Per workload, and by where the text's last ``COPY_WINDOW`` bytes occur earlier (in the prompt: copying as
``ds4spec.policy.copying`` sees it, split by how long the copy has gone on, ``prompt16`` for 16 to 31 bytes up to
``prompt128`` for 128 or more, and for short ones whether the answer already copied ``LONG_COPY`` bytes in one run;
only earlier in the answer; nowhere), it prints the drafts and alpha (accepted over accepted plus rejections).
docs/speculation.md and docs/benchmarks.md (run 19) quote the figures.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from ds4spec.bench.workloads import Task, load_tasks
from ds4spec.core.events import Finished
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import Settings
from ds4spec.errors import Ds4Error
from ds4spec.policy.copying import COPY_WINDOW, LONG_COPY

SAMPLE = {"humaneval": range(0, 40, 2), "edits": range(5, 60, 3), "prose": range(12)}
DRAFT_TOKENS = 16
RUNS = (COPY_WINDOW, 32, 64, 128)  # the answer's last n bytes occur in the prompt: a copy of n bytes or more so far


def replay(task: Task, pieces: list[bytes], totals: dict[tuple[str, str], list[int]]) -> None:
    """Adds (positions, drafts, accepted, trials) at each token of the answer ``pieces`` to ``totals``."""
    context = task.draft_context()
    source = context.content()
    drafter = LookupDrafter()
    drafter.begin(context)
    answer = b""
    copied_long = False  # whether the answer already copied LONG_COPY bytes of the prompt in one run
    for i in range(len(pieces)):
        tail = answer[-COPY_WINDOW:]
        where = "nowhere"
        if len(tail) == COPY_WINDOW and tail in source:
            run = max(n for n in RUNS if n <= len(answer) and answer[-n:] in source)  # how long the copy has gone on
            where = f"prompt{run}" + ("" if run >= LONG_COPY or not copied_long else " after a long copy")
            copied_long = copied_long or run >= LONG_COPY
        elif len(tail) == COPY_WINDOW and answer.find(tail, 0, len(answer) - 1) >= 0:
            where = "answer"
        row = totals[(task.workload, where)]
        row[0] += 1
        draft = drafter.propose(DRAFT_TOKENS).text
        if draft:
            accepted, spelled = 0, b""
            for piece in pieces[i : i + DRAFT_TOKENS]:
                spelled += piece
                if not draft.startswith(spelled):
                    break
                accepted += 1
            rejected = accepted < DRAFT_TOKENS and i + accepted < len(pieces)
            row[1] += 1
            row[2] += accepted
            row[3] += accepted + rejected
        drafter.extend(pieces[i])
        answer += pieces[i]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default=None, help="a model name or GGUF path (default: the default pair's)")
    args = parser.parse_args()
    try:
        target = load_target(Settings(target=args.target))
    except Ds4Error as exc:
        raise SystemExit(f"lookup_replay: {exc}") from None
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for workload, sample in SAMPLE.items():
        tasks = load_tasks(workload)
        for i in sample:
            task = tasks[i]
            request = GenerationRequest(task.prompt_tokens(target), 128, stop=task.stop)
            finished = [e for e in generate_plain(target, request) if isinstance(e, Finished)][-1]
            replay(task, [target.tokenizer.detokenize([t]) for t in finished.tokens], totals)
    print(f"{'workload':10} {'repeats':26} {'positions':>9} {'drafts':>6} {'acc/draft':>9} {'alpha':>5}")
    for (workload, where), (positions, drafts, accepted, trials) in sorted(totals.items()):
        print(f"{workload:10} {where:26} {positions:9d} {drafts:6d} "
              f"{accepted / max(drafts, 1):9.2f} {accepted / max(trials, 1):5.2f}")


if __name__ == "__main__":
    main()
