"""Where a speculative answer first differs from plain decoding's, and whether that is a near-tie.

Greedy speculative decoding must write what plain decoding writes. It evaluates the same context in batches of
other sizes, and llama.cpp's kernels for other batch sizes round differently, so where the target's two best tokens
are a hair apart either may come out on top: both answers are then the target's own. Anything else would be a
defect. So the bench checks every answer that differs: it reads the prompt and plain's answer up to the first token
that differs in one pass, and compares the target's logits for the two tokens written there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ds4spec.backend.target import LlamaTarget

# Logits this close are a near-tie: the two flips in the default pair's prose answers (AVX2 machine, lookup and
# triggers alike) were 0.009 and 0.119 apart; a token that the target did not nearly choose is whole logits behind.
NEAR_TIE_LOGITS = 0.25


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first position where two answers differ, and how far apart the target's logits for them are there."""

    at: int  # tokens of the answer before the first that differs
    gap: float  # |logit(plain's token) - logit(the other)|, the context read in one pass

    @property
    def near_tie(self) -> bool:
        return self.gap <= NEAR_TIE_LOGITS

    def as_dict(self) -> dict[str, object]:
        return {"at": self.at, "gap": round(self.gap, 4) if math.isfinite(self.gap) else None,
                "near_tie": self.near_tie}


def first_divergence(target: LlamaTarget, prompt: Sequence[int], plain: Sequence[int],
                     other: Sequence[int]) -> Divergence | None:
    """Where ``other`` first differs from ``plain`` (both answers to ``prompt``), or None where they are the same.
    Where one stopped before the other, the end-of-generation token (not in the answer) is the one that differs:
    no gap is measured, and that is no near-tie."""
    at = next((i for i, (a, b) in enumerate(zip(plain, other, strict=False)) if a != b), None)
    if at is None:
        return None if len(plain) == len(other) else Divergence(min(len(plain), len(other)), math.inf)
    target.reset()
    logits = target.eval_prompt([*prompt, *plain[:at]])
    target.reset()
    return Divergence(at, abs(float(logits[plain[at]]) - float(logits[other[at]])))
