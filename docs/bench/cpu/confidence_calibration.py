"""Runs `ds4spec bench` and prints, by the model drafter's probability of its tokens, how many of them the target
kept, of those whose tokens before were kept (a measuring aid, not part of the product). Usage, from the repository
root, with drafts of a fixed length so that no stop chooses which tokens are verified:

    .venv/bin/python docs/bench/cpu/confidence_calibration.py bench --pair f32 --workload humaneval --skip 5 \\
        --limit 12 --mode pair --fixed --draft-max 8 --no-confidence-stop
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections import Counter

import ds4spec.core.speculative as speculative
from ds4spec.cli import main
from ds4spec.policy.confidence import EDGES

SEEN: Counter[int] = Counter()
KEPT: Counter[int] = Counter()
FIRST_SEEN: Counter[int] = Counter()
FIRST_KEPT: Counter[int] = Counter()
_observe = speculative._Cycle._observe_confidences


def observe(self: speculative._Cycle, draft: list[int], accepted: int) -> None:
    ends = self.proposal.ends
    judged = bisect_right(ends, 0)  # a healed first token that only finished the committed text was not judged
    held = bisect_right(ends, len(self.tok.detokenize(draft[:accepted]))) - judged
    verified = bisect_right(ends, len(self.tok.detokenize(draft))) - judged
    for i, confidence in enumerate(self.proposal.confidences[judged:][: min(verified, held + 1)]):
        b = bisect_right(EDGES, confidence)
        SEEN[b] += 1
        KEPT[b] += i < held
        FIRST_SEEN[b] += i == 0
        FIRST_KEPT[b] += i == 0 and i < held
    _observe(self, draft, accepted)


speculative._Cycle._observe_confidences = observe  # type: ignore[method-assign]
code = main(sys.argv[1:])
bounds = (0.0, *EDGES, 1.0)
print("\nthe drafter's probability: tokens verified, the share kept | a draft's first token: verified, kept")
for b in range(len(bounds) - 1):
    share = KEPT[b] / SEEN[b] if SEEN[b] else float("nan")
    first = FIRST_KEPT[b] / FIRST_SEEN[b] if FIRST_SEEN[b] else float("nan")
    print(f"[{bounds[b]:.2f}, {bounds[b + 1]:.2f}): {SEEN[b]:4d} {share:.2f} | {FIRST_SEEN[b]:4d} {first:.2f}")
sys.exit(code)
