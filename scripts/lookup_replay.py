"""Lookup's drafts replayed over the target's own answers: how often they are right while the text copies and elsewhere.

    .venv/bin/python scripts/lookup_replay.py --answers /tmp/answers.json

The answers are the target's plain greedy answers (128 tokens) to 116 prompts, written by
``scripts/policy_replay.py`` to ``--answers`` if the file is missing (HumanEval 5 to 60, edits 5 to 59 and files 5
to 29 by twos, prose 5 to 23; about 20 minutes on 2 cores). At every token of each answer, the lookup drafter
proposes 16 tokens' worth of bytes (``--draft``), and the tokens of the answer that the proposal spells are counted
as accepted. Per workload, and by where the text's last ``COPY_WINDOW`` bytes occur earlier (in the prompt: copying
as ``ds4spec.policy.copying`` sees it, split by how long the copy has gone on, ``prompt16`` for 16 to 31 bytes up to
``prompt128`` for 128 or more, and for short ones whether the answer already copied ``LONG_COPY`` bytes in one run;
only earlier in the answer; nowhere), it prints the drafts, alpha (accepted over accepted plus rejections), and
apart the share of drafts whose first token was kept and alpha over the later tokens once it was.
docs/speculation.md and docs/benchmarks.md (runs 19, 70 and 71) quote the figures.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from policy_replay import answers, load_answers_target

from ds4spec.bench.workloads import Task
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.policy.copying import COPY_WINDOW, LONG_COPY

RUNS = (COPY_WINDOW, 32, 64, 128)  # the answer's last n bytes occur in the prompt: a copy of n bytes or more so far


def replay(task: Task, pieces: list[bytes], totals: dict[tuple[str, str], list[int]], draft_tokens: int) -> None:
    """Adds (positions, drafts, accepted, trials, first tokens kept) at each token of the answer ``pieces`` to
    ``totals``."""
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
        draft = drafter.propose(draft_tokens).text
        if draft:
            accepted, spelled = 0, b""
            for piece in pieces[i : i + draft_tokens]:
                spelled += piece
                if not draft.startswith(spelled):
                    break
                accepted += 1
            rejected = accepted < draft_tokens and i + accepted < len(pieces)
            row[1] += 1
            row[2] += accepted
            row[3] += accepted + rejected
            row[4] += accepted > 0
        drafter.extend(pieces[i])
        answer += pieces[i]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=Path, required=True, help="the answers' file: written if missing")
    parser.add_argument("--target", default=None, help="a model name or GGUF path (default: the default pair's)")
    parser.add_argument("--draft", type=int, default=16, help="tokens a draft proposes (default 16)")
    args = parser.parse_args()
    target = load_answers_target(args.answers, args.target)
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for task, tokens in answers(args.answers):
        replay(task, [target.tokenizer.piece(t) for t in tokens], totals, args.draft)
    print(f"{'workload':10} {'repeats':26} {'positions':>9} {'drafts':>6} {'acc/draft':>9} {'alpha':>5} "
          f"{'first':>5} {'later':>5}")
    for (workload, where), (positions, drafts, accepted, trials, first) in sorted(totals.items()):
        later = (accepted - first) / max(trials - drafts, 1)  # kept after a kept first token: trials less firsts
        print(f"{workload:10} {where:26} {positions:9d} {drafts:6d} {accepted / max(drafts, 1):9.2f} "
              f"{accepted / max(trials, 1):5.2f} {first / max(drafts, 1):5.2f} {later:5.2f}")


if __name__ == "__main__":
    main()
