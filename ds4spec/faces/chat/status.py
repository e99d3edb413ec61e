"""The status bar: which models run, what the chat is doing, and how speculation pays.

The numbers come from the last generation's ``GenerationStats``; while an answer streams, acceptance and
mean accepted length are counted live from its ``CycleReport``s and the trigger event in force is the
latest report's. Everything shown is in ``StatusState``, so a test can draw the bar from fixed numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.widgets import Static

from ds4spec.core.events import CycleReport
from ds4spec.core.stats import GenerationStats


@dataclass(slots=True)
class StatusState:
    target: str = ""
    drafter: str | None = None
    speculating: bool = False
    phase: str = "starting"  # loading, ready, generating, cancelled, error, ...: one word or a short phrase
    stats: GenerationStats | None = None
    event: str = ""  # the trigger event in force (CycleReport.event); "" when none
    live: GenerationStats = field(default_factory=GenerationStats)  # counted from this answer's reports

    def start_answer(self) -> None:
        self.live = GenerationStats()
        self.event = ""

    def cycle(self, report: CycleReport) -> None:
        self.live.drafted_tokens += report.drafted
        self.live.accepted_tokens += report.accepted
        self.live.verify_passes_with_draft += 1 if report.drafted else 0
        self.event = report.event


def status_text(state: StatusState) -> Text:
    """Two lines: the models and what the chat is doing; then tokens/s, acceptance, mean accepted length,
    speedup over plain decoding and the trigger event in force (two lines fit an 80-column terminal)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    _models(out, state)
    out.append(" · ", style="dim")
    out.append(state.phase, style="italic")
    out.append("\n")
    generating = state.phase == "generating"
    stats = state.live if generating else state.stats
    parts: list[str] = []
    if stats is not None:
        if not generating:
            parts.append(f"{stats.tokens_per_second:.1f} tok/s")
        parts.append(f"accept {stats.acceptance_rate:.0%}")
        parts.append(f"mean accepted {stats.mean_accepted_length:.2f}")
        if not generating and stats.speedup_over_plain:
            parts.append(f"{stats.speedup_over_plain:.2f}x plain")
    else:
        parts.append("no answer yet")
    parts.append(f"event {state.event or '-'}")
    out.append(" · ".join(parts))
    return out


def _models(out: Text, state: StatusState) -> None:
    if not state.target:
        out.append("models not loaded", style="dim")
        return
    out.append("target ", style="dim")
    out.append(state.target, style="bold")
    out.append(" · drafter ", style="dim")
    if state.drafter and state.speculating:
        out.append(state.drafter, style="bold green")
    elif state.drafter:
        out.append(f"{state.drafter} (idle: /spec on)")
    else:
        out.append("none (plain decoding)")


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar {
        height: 2;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, state: StatusState | None = None, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.state = state or StatusState()

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        """Redraws from ``self.state``; callers change the state, then call this."""
        self.update(status_text(self.state))
