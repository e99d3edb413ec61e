"""Whether speculative decoding starts a plain step before the bookkeeping of the one before it (where the target
runs passes beside the caller), learned from what that costs: kept by an engine across generations, with the policy's
other figures."""

from __future__ import annotations


class EarlyLaunch:
    """Whether a plain step's cycle launches the next plain step before its bookkeeping (where the target runs passes
    beside the caller, ``Target.launches_ahead``). It hides the bookkeeping (the loop's own time: on an H200's host
    0.1 to 0.2 ms of a 2.2 ms step); it costs a step wherever the cycle after it drafts and the draft's first token
    holds, as the draft then takes a pass of its own after the step instead of one pass over both. So it launches
    while the share of plain steps followed by such a draft, times a step, is below the time it hides: on code, where
    drafts are rare, nearly always; on an edit, where lulls between copies are short, rarely."""

    WEIGHT = 0.1

    def __init__(self) -> None:
        self.held_after = 0.0  # share of plain steps followed by a draft whose first token held (moving average)
        self.step = 0.0  # seconds of a plain step's pass
        self.hidden = 0.0  # seconds of a plain step's cycle outside model calls

    def after_plain_step(self, held: bool) -> None:
        self.held_after += self.WEIGHT * (held - self.held_after)

    def plain_step(self, pass_seconds: float, loop_seconds: float) -> None:
        first = self.step == 0.0
        self.step += (1.0 if first else self.WEIGHT) * (pass_seconds - self.step)
        self.hidden += (1.0 if first else self.WEIGHT) * (loop_seconds - self.hidden)

    def pays(self) -> bool:
        return self.held_after * self.step < self.hidden
