"""Plain counters of one generation, kept apart from logging and display.

The words (drafted, accepted, corrected, bonus, committed) mean what ``ds4spec.events`` defines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
    seed: int | None = None

    @property
    def tokens_per_second(self) -> float:
        return self.committed_tokens / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        data: dict[str, float | int | None] = asdict(self)
        data["tokens_per_second"] = round(self.tokens_per_second, 3)
        data["acceptance_rate"] = round(self.acceptance_rate, 4)
        return data

    def summary_line(self) -> str:
        """One human line for ``--stats`` on stderr."""
        return (
            f"prompt {self.prompt_tokens} tokens in {self.prompt_seconds:.2f} s; "
            f"generated {self.committed_tokens} tokens in {self.generation_seconds:.2f} s "
            f"({self.tokens_per_second:.2f} tokens/s, {self.target_forward_passes} target passes)"
        )
