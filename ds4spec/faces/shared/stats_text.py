"""Statistics as the chat faces show them: a short line after each answer, and per-session totals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from ds4spec.core.stats import EventCounts, GenerationStats

_FIELDS = {f.name for f in fields(GenerationStats)}
_EVENT_FIELDS = {f.name for f in fields(EventCounts)}


def answer_line(stats: GenerationStats, finish: str = "") -> str:
    """``42 tokens, 12.3 tokens/s · accepted 70% of 30 drafted, 2.10 per verify pass · 1.6x plain``."""
    parts = [f"{stats.committed_tokens} tokens, {stats.tokens_per_second:.1f} tokens/s"]
    if stats.drafted_tokens:
        parts.append(f"accepted {stats.acceptance_rate:.0%} of {stats.drafted_tokens} drafted, "
                     f"{stats.mean_accepted_length:.2f} per verify pass")
    else:
        parts.append("no drafts")
    if stats.speedup_over_plain:
        parts.append(f"{stats.speedup_over_plain:.2f}x plain")
    if finish and finish not in ("eog", "stop"):
        parts.append(finish)  # length, context or cancelled: the answer did not end by itself
    return " · ".join(parts)


def from_dict(data: Mapping[str, Any]) -> GenerationStats:
    """A ``GenerationStats`` back from its stored ``as_dict()`` (derived values and unknown keys ignored)."""
    stats = GenerationStats(**{k: v for k, v in data.items() if k in _FIELDS and k != "events"})
    for name, counts in (data.get("events") or {}).items():
        stats.events[name] = EventCounts(**{k: v for k, v in counts.items() if k in _EVENT_FIELDS})
    return stats


def totals(all_stats: Iterable[GenerationStats]) -> GenerationStats:
    """The sum of several answers' counters and times (the plain-step cost is the latest one measured)."""
    total = GenerationStats()
    for s in all_stats:
        total.add(s)
    return total
