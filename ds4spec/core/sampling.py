"""The target's sampler: turns one row of logits into one token.

It is ours, not llama.cpp's, because speculative verification must sample the target's own token at each
drafted position with exactly the settings and random stream that plain decoding would use. Each call to
``choose`` draws at most one uniform number, so plain decoding and speculative decoding with the same seed
consume the generator identically and produce identical output.

Filter order follows llama.cpp's default chain: repeat penalty, top-k, top-p, min-p, temperature.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_SEED = 2**64 - 1  # llama.cpp's seeds are 64-bit; -1 asks for a random one (``RANDOM_SEED``)
RANDOM_SEED = -1


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    temperature: float = 0.0  # 0 means greedy (argmax)
    top_k: int = 40  # 0 disables
    top_p: float = 0.95  # 1 disables
    min_p: float = 0.05  # 0 disables
    repeat_penalty: float = 1.0  # 1 disables
    repeat_last_n: int = 64
    seed: int | None = None  # None draws a random seed (reported in the statistics)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def validate(self) -> None:
        """Raises ValueError naming the first setting that is out of range."""
        if not (math.isfinite(self.temperature) and self.temperature >= 0):  # NaN compares false: sampled junk
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top-k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top-p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min-p must be in [0, 1], got {self.min_p}")
        if not (math.isfinite(self.repeat_penalty) and self.repeat_penalty > 0):
            raise ValueError(f"repeat-penalty must be > 0, got {self.repeat_penalty}")
        if self.repeat_last_n < 0:
            raise ValueError(f"repeat-last-n must be >= 0, got {self.repeat_last_n}")
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be from 0 to 2^64-1, or -1 for a random one, got {self.seed}")


class Sampler:
    def __init__(self, settings: SamplingSettings) -> None:
        settings.validate()
        self.settings = settings
        self.seed = settings.seed if settings.seed is not None else secrets.randbits(32)
        self._rng = np.random.default_rng(self.seed)

    def choose(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        """The token for one position. ``history`` is the context so far (for the repeat penalty)."""
        s = self.settings
        scores = self.penalized(logits, history)
        if s.greedy:
            return int(np.argmax(scores))
        ids, probs = self._candidates(scores)
        # One uniform per call, always: the random stream must not depend on the candidate count.
        u = self._rng.random()
        cdf = np.cumsum(probs)
        pick = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
        return int(ids[min(pick, len(ids) - 1)])

    def distribution(self, logits: np.ndarray, history: Sequence[int] = ()) -> dict[int, float]:
        """The probabilities ``choose`` samples from (for tests and diagnostics)."""
        scores = self.penalized(logits, history)
        if self.settings.greedy:
            return {int(np.argmax(scores)): 1.0}
        ids, probs = self._candidates(scores)
        probs = probs / probs.sum()
        return {int(i): float(p) for i, p in zip(ids, probs, strict=True)}

    def penalized(self, logits: np.ndarray, history: Sequence[int]) -> np.ndarray:
        """The scores ``choose`` picks from after ``history``: ``logits`` with the repeat penalty applied."""
        s = self.settings
        if s.repeat_penalty == 1.0 or s.repeat_last_n == 0 or not history:
            return logits
        recent = np.unique(np.asarray(history[-s.repeat_last_n :], dtype=np.int64))
        scores = np.array(logits, dtype=np.float32, copy=True)
        vals = scores[recent]
        scores[recent] = np.where(vals > 0, vals / s.repeat_penalty, vals * s.repeat_penalty)
        return scores

    def _candidates(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids sorted by descending score and their (unnormalised) sampling weights."""
        s = self.settings
        n = scores.shape[0]
        ids = np.argpartition(-scores, s.top_k - 1)[:s.top_k] if 0 < s.top_k < n else np.arange(n)
        # Stable sort on (score desc, id asc) so that ties resolve the same way on every run.
        order = np.lexsort((ids, -scores[ids].astype(np.float64)))
        ids = ids[order]
        vals = scores[ids].astype(np.float64)
        probs = np.exp(vals - vals[0])
        probs /= probs.sum()
        keep = len(ids)
        if s.top_p < 1.0:
            keep = min(keep, int(np.searchsorted(np.cumsum(probs), s.top_p, side="left")) + 1)
        if s.min_p > 0.0:
            keep = min(keep, int(np.count_nonzero(probs >= s.min_p * probs[0])))
        keep = max(keep, 1)
        ids, vals = ids[:keep], vals[:keep]
        weights = np.exp((vals - vals[0]) / s.temperature)
        return ids, weights
