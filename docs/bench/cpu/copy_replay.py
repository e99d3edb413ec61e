"""Lookup's drafts replayed over the target's plain answers to edits: what predicts a long draft rejected early (a
measuring aid, not part of the product). Usage, from the repository root:

    .venv/bin/python docs/bench/cpu/copy_replay.py answers /tmp/answers.json    # plain answers, default target
    .venv/bin/python docs/bench/cpu/copy_replay.py replay /tmp/answers.json

``answers`` writes the plain greedy answers (256 tokens) to the ten prompts of ``docs/bench/prompts/edit-kinds.jsonl``,
edits 21 to 32 and files 41 to 46. ``replay`` then proposes lookup's draft at every token of the answers while the
text copies its prompt and prints, by edit kind (the renames of the shipped workloads, the other kinds):

- by how the copy's window occurs in the prompt (once; several times, the same bytes next; several times, different
  bytes next) and whether the answer already copied ``LONG_COPY`` bytes: acceptance of 16-token drafts and how many
  are rejected at their first token;
- a fixed-length policy (every cycle in a copy drafts k tokens) priced by a verify profile, with drafts whole, cut at
  their first line end, cut there only once the answer's copies broke at line starts more often than mid-line, or cut
  before the bytes that preceded earlier rejections (where they saw more rejections than drafts going through them):
  tokens per plain step.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
from collections import defaultdict
from pathlib import Path

from ds4spec.bench.workloads import Task, load_prompt_file, load_tasks
from ds4spec.core.drafting import DraftContext
from ds4spec.core.events import Finished
from ds4spec.core.messages import ChatMessage
from ds4spec.core.plain import GenerationRequest, generate_plain
from ds4spec.drafters.lookup import LookupDrafter
from ds4spec.engine.loading import load_target
from ds4spec.engine.settings import Settings
from ds4spec.policy.copying import COPY_WINDOW, LONG_COPY, copy_source

EDIT_KINDS = Path("docs/bench/prompts/edit-kinds.jsonl")
# The default pair's verify profile on the 2-core AVX-512 machine (run 49): a pass over n tokens, in plain steps.
PROFILE = {1: 1.0, 2: 1.9, 3: 2.66, 4: 3.33, 6: 4.8, 8: 7.48, 12: 9.32, 16: 9.27, 24: 13.25, 32: 15.03, 48: 20.55,
           64: 26.84}
LINE_END = re.compile(rb"\n[ \t]*")
AT_LINE_START = re.compile(rb"\n[ \t]*$")


def tasks() -> list[Task]:
    return [*load_prompt_file(EDIT_KINDS), *load_tasks("edits", 12, skip=20), *load_tasks("files", 6, skip=40)]


def write_answers(out: Path) -> None:
    target = load_target(Settings())
    rows = []
    for task in tasks():
        target.reset()
        request = GenerationRequest(task.prompt_tokens(target), 256, stop=task.stop)
        finished = [e for e in generate_plain(target, request) if isinstance(e, Finished)][-1]
        pieces = [target.tokenizer.detokenize([t]).decode("latin-1") for t in finished.tokens]
        rows.append({"id": task.task_id, "pieces": pieces, "messages": [m.content for m in task.messages or ()],
                     "text": task.text})
    out.write_text(json.dumps(rows), encoding="utf-8")


def context_of(row: dict) -> DraftContext:
    if row["text"] is not None:
        return DraftContext(text=row["text"].encode())
    return DraftContext(messages=[ChatMessage("user", m) for m in row["messages"]])


def kind_of(row: dict) -> str:
    return "renames" if row["id"].startswith(("Edit/", "File/")) else "kinds"


def accepted(draft: bytes, pieces: list[bytes], limit: int) -> int:
    spelled, n = b"", 0
    for piece in pieces[:limit]:
        spelled += piece
        if not draft.startswith(spelled):
            break
        n += 1
    return n


def pass_cost(n: int) -> float:
    spans = sorted(PROFILE)
    for a, b in itertools.pairwise(spans):
        if a <= n <= b:
            return PROFILE[a] + (PROFILE[b] - PROFILE[a]) * (n - a) / (b - a)
    return PROFILE[spans[-1]] * n / spans[-1]


def window_kind(source: bytes, window: bytes) -> str:
    starts, at = [], source.find(window)
    while at >= 0:
        starts.append(at)
        at = source.find(window, at + 1)
    if len(starts) == 1:
        return "once"
    nexts = {source[a + COPY_WINDOW : a + COPY_WINDOW + 8] for a in starts}
    return "repeated, same next" if len(nexts) == 1 else "repeated, other next"


def by_window(rows: list[dict]) -> None:
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for row in rows:
        pieces = [p.encode("latin-1") for p in row["pieces"]]
        context = context_of(row)
        source, drafter, answer, long_seen = copy_source(context), LookupDrafter(), b"", False
        drafter.begin(context)
        for i in range(len(pieces)):
            tail = answer[-COPY_WINDOW:]
            if len(tail) == COPY_WINDOW and tail in source:
                long_seen = long_seen or (len(answer) >= LONG_COPY and answer[-LONG_COPY:] in source)
                if draft := drafter.propose(16).text:
                    n = accepted(draft, pieces[i:], 16)
                    state = f"{'long' if long_seen else 'short'}, {window_kind(source, tail)}"
                    row_total = totals[(kind_of(row), state)]
                    row_total[0] += 1
                    row_total[1] += n
                    row_total[2] += n + (n < 16 and i + n < len(pieces))
                    row_total[3] += n == 0
            drafter.extend(pieces[i])
            answer += pieces[i]
    print(f"{'edits':8} {'copy, window':28} {'drafts':>6} {'acc/draft':>9} {'alpha':>6} {'first rejected':>14}")
    for (kind, state), (drafts, acc, trials, first) in sorted(totals.items()):
        print(f"{kind:8} {state:28} {drafts:6d} {acc / drafts:9.2f} {acc / max(trials, 1):6.3f} {first / drafts:14.1%}")


class BreakContexts:
    """The ``size`` bytes before each point where a draft was rejected, and how often a draft went through them since:
    a draft is cut before such bytes where they saw more rejections than passes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.seen: dict[bytes, list[int]] = {}  # bytes before the point -> [rejections there, passes through]
        self.cut_at: tuple[bytes, bytes] | None = None  # the last cut: the bytes before it, the draft's bytes after

    def cut(self, answer: bytes, draft: bytes) -> bytes:
        self.cut_at = None
        text = answer + draft
        for j in range(1, len(draft)):
            before = text[len(answer) + j - self.size : len(answer) + j]
            rejected, passed = self.seen.get(before, (0, 0))
            if rejected > passed:
                self.cut_at = (before, draft[j : j + 4])
                return draft[:j]
        return draft

    def learn(self, answer: bytes, kept: bytes, rejected: bool, following: bytes) -> None:
        """After a draft: ``kept`` accepted, then rejected or not; ``following`` is the target's next token."""
        text = answer + kept
        for j in range(1, len(kept)):
            if (before := text[len(answer) + j - self.size : len(answer) + j]) in self.seen:
                self.seen[before][1] += 1
        if rejected:
            self.seen.setdefault(text[-self.size :], [0, 0])[0] += 1
        elif self.cut_at and following and self.cut_at[1].startswith(following[: len(self.cut_at[1])]):
            self.seen[self.cut_at[0]][1] += 1  # the copy went on where the draft was cut


def fixed_policy(row: dict, k: int, cut: str) -> tuple[float, int, int]:
    """Tokens per plain step where every cycle in a copy drafts ``k`` tokens (cut as named) and others step, and how
    many drafts were rejected at a line start and elsewhere."""
    pieces = [p.encode("latin-1") for p in row["pieces"]]
    context = context_of(row)
    source, drafter, answer = copy_source(context), LookupDrafter(), b""
    drafter.begin(context)
    i, steps, line_breaks, mid_breaks = 0, 0.0, 0, 0
    contexts = BreakContexts(int(cut.split()[-2].strip("(")) if cut.startswith("at break contexts") else 0)
    while i < len(pieces):
        tail = answer[-COPY_WINDOW:]
        draft = drafter.propose(k).text if len(tail) == COPY_WINDOW and tail in source else b""
        if draft and (cut == "at line ends" or (cut == "after line-start breaks" and line_breaks > mid_breaks)):
            end = LINE_END.search(draft)
            draft = draft[: end.end()] if end and end.end() < len(draft) else draft
        elif draft and contexts.size:
            draft = contexts.cut(answer, draft)
        step = 1
        if draft:
            n = accepted(draft, pieces[i:], k)
            drafted = min(k, max(n, math.ceil(len(draft) / drafter.bytes_per_token)))
            steps += pass_cost(drafted + 1)
            if contexts.size:
                following = pieces[i + n] if i + n < len(pieces) else b""
                contexts.learn(answer, b"".join(pieces[i : i + n]), n < drafted and bool(following), following)
            if n < drafted and i + n < len(pieces):
                if AT_LINE_START.search(answer + b"".join(pieces[i : i + n])):
                    line_breaks += 1
                else:
                    mid_breaks += 1
            step = n + 1
        else:
            steps += 1
        for piece in pieces[i : i + step]:
            drafter.extend(piece)
            answer += piece
        i += step
    return len(pieces) / steps, line_breaks, mid_breaks


def by_cut(rows: list[dict]) -> None:
    print(f"\n{'cut':28} {'k':>3} {'renames':>8} {'kinds':>8}   (tokens per plain step, mean over answers; drafts "
          "rejected at a line start / elsewhere, renames and kinds)")
    for cut in ("none", "at line ends", "after line-start breaks", "at break contexts (5 bytes)",
                "at break contexts (12 bytes)"):
        for k in (8, 15, 31):
            speeds: dict[str, list[float]] = defaultdict(list)
            breaks: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for row in rows:
                speed, at_line_start, elsewhere = fixed_policy(row, k, cut)
                speeds[kind_of(row)].append(speed)
                breaks[kind_of(row)][0] += at_line_start
                breaks[kind_of(row)][1] += elsewhere
            mean = {kind: sum(v) / len(v) for kind, v in speeds.items()}
            counts = ", ".join(f"{breaks[kind][0]} / {breaks[kind][1]}" for kind in ("renames", "kinds"))
            print(f"{cut:28} {k:3d} {mean['renames']:8.3f} {mean['kinds']:8.3f}   {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("answers", "replay"))
    parser.add_argument("file", type=Path)
    args = parser.parse_args()
    if args.step == "answers":
        write_answers(args.file)
        return
    rows = json.loads(args.file.read_text(encoding="utf-8"))
    by_window(rows)
    by_cut(rows)


if __name__ == "__main__":
    main()
