"""The verifier: accepts or rejects drafted tokens against the target's logits.

One rule serves greedy and sampled decoding alike (the SLEM rule, Timor et al. 2025): at each drafted
position the target chooses its own token with the user's sampler, exactly as plain decoding would at
that position, and the draft is accepted while that choice equals the drafted token. The first choice
that differs is emitted instead (the correction); after a fully accepted draft, the choice at the next
position is emitted too (the bonus). Every emitted token is therefore a genuine target choice, and the
sampler draws its random numbers in the same order as plain decoding: same seed, same output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one verify pass: the first ``accepted`` drafted tokens are kept, then ``token``.

    ``token`` is the target's own choice after them: a correction when ``accepted < len(draft)``, the bonus
    token otherwise. The caller commits them in order and may stop early (end of generation, a stop string,
    the token budget) exactly where plain decoding would have stopped.
    """

    accepted: int
    token: int


def verify_draft(rows: np.ndarray, draft: Sequence[int], choose: Callable[[np.ndarray, int], int]) -> Verdict:
    """Verifies ``draft`` against ``rows``, the logits of one forward pass over ``[pending, *draft]``.

    ``choose(row, i)`` is the target's sampler at position ``i`` of the span (the caller supplies the
    history its repeat penalty needs).
    """
    if len(rows) != len(draft) + 1:
        raise ValueError(f"{len(rows)} rows of logits for a draft of {len(draft)} tokens")
    for i, drafted in enumerate(draft):
        own = choose(rows[i], i)
        if own != drafted:
            return Verdict(i, own)
    return Verdict(len(draft), choose(rows[len(draft)], len(draft)))
