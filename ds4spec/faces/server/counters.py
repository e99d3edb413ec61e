"""What the ``stats`` method reports: totals since the server started, and the last generation's statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ds4spec.core.stats import GenerationStats, acceptance_rate
from ds4spec.faces.shared.generating import Outcome


@dataclass(slots=True)
class Counters:
    requests: int = 0  # requests received (notifications excluded), answered or not yet
    generations: int = 0  # complete and chat requests that ran on the engine
    cancelled: int = 0  # by cancel (queued or running)
    superseded: int = 0  # by a newer complete for the same document
    committed_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    generation_seconds: float = 0.0
    last: GenerationStats | None = field(default=None)

    def add(self, outcome: Outcome) -> None:
        stats = outcome.stats
        self.generations += 1
        self.committed_tokens += stats.committed_tokens
        self.drafted_tokens += stats.drafted_tokens
        self.accepted_tokens += stats.accepted_tokens
        self.generation_seconds += stats.generation_seconds
        self.last = stats

    def as_dict(self) -> dict[str, Any]:
        rate = self.committed_tokens / self.generation_seconds if self.generation_seconds > 0 else 0.0
        return {
            "requests": self.requests,
            "generations": self.generations,
            "cancelled": self.cancelled,
            "superseded": self.superseded,
            "committed_tokens": self.committed_tokens,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": round(acceptance_rate(self.accepted_tokens, self.drafted_tokens), 4),
            "generation_seconds": round(self.generation_seconds, 4),
            "tokens_per_second": round(rate, 3),
            "last": self.last.as_dict() if self.last else None,
        }
