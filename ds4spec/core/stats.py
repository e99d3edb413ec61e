"""Plain counters of one generation, kept apart from logging and display.

The words (drafted, accepted, corrected, bonus, committed) mean what ``ds4spec.core.events`` defines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def acceptance_rate(accepted: int, drafted: int) -> float:
    """Accepted over drafted tokens; 0 when nothing was drafted."""
    return accepted / drafted if drafted else 0.0


def mean_accepted_length(accepted: int, passes_with_draft: int) -> float:
    """Accepted tokens per verify pass that carried a draft; 0 when none did."""
    return accepted / passes_with_draft if passes_with_draft else 0.0


@dataclass(slots=True)
class EventCounts:
    """Cycles begun at one syntax event (``ds4spec.policy.syntax``): how many, and what their drafts got."""

    cycles: int = 0
    verify_passes_with_draft: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0

    def add(self, drafted: int, accepted: int) -> None:
        self.cycles += 1
        if drafted:
            self.verify_passes_with_draft += 1
            self.drafted_tokens += drafted
            self.accepted_tokens += accepted

    def merge(self, other: EventCounts) -> None:
        self.cycles += other.cycles
        self.verify_passes_with_draft += other.verify_passes_with_draft
        self.drafted_tokens += other.drafted_tokens
        self.accepted_tokens += other.accepted_tokens

    @property
    def acceptance_rate(self) -> float:
        return acceptance_rate(self.accepted_tokens, self.drafted_tokens)

    @property
    def mean_accepted_length(self) -> float:
        return mean_accepted_length(self.accepted_tokens, self.verify_passes_with_draft)


_SUMMED = ("prompt_tokens", "committed_tokens", "target_forward_passes", "drafted_tokens", "accepted_tokens",
           "corrected_tokens", "bonus_tokens", "verify_passes_with_draft", "drafter_failures", "prompt_seconds",
           "generation_seconds", "draft_seconds", "verify_seconds", "loop_seconds")


@dataclass(slots=True)
class GenerationStats:
    prompt_tokens: int = 0
    committed_tokens: int = 0
    target_forward_passes: int = 0  # during generation; prompt evaluation is not counted
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    corrected_tokens: int = 0
    bonus_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0  # from the first generated token's evaluation to the end
    draft_seconds: float = 0.0  # drafter proposals and their alignment to target tokens
    verify_seconds: float = 0.0  # target forward passes over [pending, *draft] and the verdicts
    verify_passes_with_draft: int = 0
    drafter_failures: int = 0  # cycles where the drafter raised, missed its deadline or returned garbage
    plain_step_seconds: float = 0.0  # measured (or estimated) cost of one plain decoding step
    loop_seconds: float = 0.0  # speculation's own work outside model calls and the consumer, over all cycles
    loop_median_seconds: float = 0.0  # the same, the median cycle's
    seed: int | None = None
    events: dict[str, EventCounts] = field(default_factory=dict)  # per syntax event, with triggers on

    @property
    def tokens_per_second(self) -> float:
        return self.committed_tokens / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        return acceptance_rate(self.accepted_tokens, self.drafted_tokens)

    @property
    def mean_accepted_length(self) -> float:
        return mean_accepted_length(self.accepted_tokens, self.verify_passes_with_draft)

    @property
    def tokens_per_target_pass(self) -> float:
        return self.committed_tokens / self.target_forward_passes if self.target_forward_passes else 0.0

    @property
    def other_seconds(self) -> float:
        return max(self.generation_seconds - self.draft_seconds - self.verify_seconds, 0.0)

    @property
    def speedup_over_plain(self) -> float:
        """Tokens/s over the plain rate (one token per measured plain step); 0 when not measured."""
        if self.plain_step_seconds <= 0 or self.generation_seconds <= 0:
            return 0.0
        return self.tokens_per_second * self.plain_step_seconds

    def add(self, other: GenerationStats) -> None:
        """Adds another generation's counters and times (a session's totals, a bench row); the plain step's cost
        is the latest one measured, and the median cycle is not a sum (each run keeps its own)."""
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.plain_step_seconds = other.plain_step_seconds or self.plain_step_seconds
        for name, counts in other.events.items():
            self.events.setdefault(name, EventCounts()).merge(counts)

    def as_dict(self) -> dict[str, float | int | None]:
        data: dict[str, float | int | None] = asdict(self)
        data["tokens_per_second"] = round(self.tokens_per_second, 3)
        data["acceptance_rate"] = round(self.acceptance_rate, 4)
        data["mean_accepted_length"] = round(self.mean_accepted_length, 3)
        data["tokens_per_target_pass"] = round(self.tokens_per_target_pass, 3)
        data["other_seconds"] = round(self.other_seconds, 4)
        data["speedup_over_plain"] = round(self.speedup_over_plain, 3)
        data["events"] = {
            name: {**asdict(c), "acceptance_rate": round(c.acceptance_rate, 4),
                   "mean_accepted_length": round(c.mean_accepted_length, 3)}
            for name, c in sorted(self.events.items())
        }
        return data

    def event_lines(self) -> list[str]:
        """One line per syntax event, busiest first, for ``--stats``."""
        rows = sorted(self.events.items(), key=lambda kv: -kv[1].cycles)
        return [f"{name:<24} {c.cycles:>5} cycles, drafted {c.drafted_tokens:>5}, accepted {c.accepted_tokens:>5} "
                f"({c.acceptance_rate:.0%}, {c.mean_accepted_length:.2f} per verify pass)" for name, c in rows]

    def summary_line(self) -> str:
        """One human line for ``--stats`` on stderr."""
        line = (
            f"prompt {self.prompt_tokens} tokens in {self.prompt_seconds:.2f} s; "
            f"generated {self.committed_tokens} tokens in {self.generation_seconds:.2f} s "
            f"({self.tokens_per_second:.2f} tokens/s, {self.target_forward_passes} target passes)"
        )
        if self.drafted_tokens or self.drafter_failures:
            line += (
                f"; drafted {self.drafted_tokens}, accepted {self.accepted_tokens} "
                f"({self.acceptance_rate:.0%}, {self.mean_accepted_length:.2f} per verify pass), "
                f"{self.tokens_per_target_pass:.2f} tokens per target pass; time drafting "
                f"{self.draft_seconds:.2f} s, verifying {self.verify_seconds:.2f} s, other {self.other_seconds:.2f} s"
            )
            if self.speedup_over_plain:
                line += f"; {self.speedup_over_plain:.2f}x the plain rate"
            if self.drafter_failures:
                line += f"; drafter failed {self.drafter_failures} times"
        return line
