"""Who decided each piece of an answer, kept while it streams and drawn in two colours.

Text accepted from a draft is the drafter's work; everything else (plain steps, corrections, bonus tokens)
is the target's own. The spans live in memory only: a session reopened from disk shows its text as the
target's, because the store keeps words, not provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text

from ds4spec.core.events import Provenance
from ds4spec.faces.shared.visible import visible

DRAFT_STYLE = "bold green"
TARGET_STYLE = "cyan"
UNKNOWN_STYLE = "default"



@dataclass(slots=True)
class ProvenanceSpans:
    """The answer as (text, provenance) runs; neighbouring chunks of one provenance merge into one run."""

    runs: list[tuple[str, Provenance | None]] = field(default_factory=list)

    def add(self, text: str, provenance: Provenance | None) -> None:
        if not text:
            return
        if self.runs and self.runs[-1][1] == provenance:
            self.runs[-1] = (self.runs[-1][0] + text, provenance)
        else:
            self.runs.append((text, provenance))

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.runs)

    def share(self, provenance: Provenance) -> float:
        """The fraction of characters with ``provenance`` (0 for an empty answer)."""
        total = sum(len(t) for t, _ in self.runs)
        return sum(len(t) for t, p in self.runs if p == provenance) / total if total else 0.0

    def render(self) -> Text:
        out = Text(no_wrap=False)
        for text, provenance in self.runs:
            out.append(visible(text), style=_style(provenance))
        return out


def _style(provenance: Provenance | None) -> str:
    if provenance is Provenance.DRAFT:
        return DRAFT_STYLE
    if provenance is Provenance.TARGET:
        return TARGET_STYLE
    return UNKNOWN_STYLE


def legend() -> Text:
    """The key to the colours, shown above the conversation in the provenance view."""
    out = Text("provenance: ")
    out.append("accepted from drafts", style=DRAFT_STYLE)
    out.append(" · ")
    out.append("the target's own tokens", style=TARGET_STYLE)
    out.append(" · ")
    out.append("not recorded (reopened)", style=UNKNOWN_STYLE)
    return out
