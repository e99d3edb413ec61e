"""Runs `ds4spec bench` and writes each triggers answer with its drafting cycles marked in the text (a measuring aid,
not part of the product). Usage, from the repository root:

    CYCLES=/tmp/cycles.txt .venv/bin/python docs/bench/cpu/cycle_sources.py bench --pair f16 --mode triggers ...

Each mark, before the text its cycle committed: ``[event kK SOURCE D/A m0.50 L0.90s]``: the syntax event, the length
the policy asked for, the source it asked (lookup, model, or any: lookup, else the model), the tokens drafted and
accepted, the event's acceptance figure for the model, lookup's figure where the text was, and the copy state there
(n: copies nothing of the prompt, s: a short copy, l: in or after a long one); lookup alone's cycles show drafted and
accepted only. The bench's first answers are its warm-up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import ds4spec.bench.command as command
from ds4spec.cli import main
from ds4spec.core.events import CycleReport, Event, Finished, TextChunk
from ds4spec.policy.triggers import TriggerPolicy

OUT = open(os.environ.get("CYCLES", "/tmp/cycles.txt"), "w", encoding="utf-8")  # noqa: SIM115 - held to the end
DECIDED: list[str] = []  # the last cycle's decision, read when its report comes
_draft_length = TriggerPolicy.draft_length
_generate = command.generate_speculative


def draft_length(self: TriggerPolicy) -> int:
    k = _draft_length(self)
    model = self._current
    figure = f"m{model.acceptance.alpha:.2f}" if model else "m-"
    DECIDED[:] = [f"k{k} {self.source}", f"{figure} L{self.copies.figure().alpha:.2f}{self.copies.copy[0]}"]
    return k


def generate(*args: object, **kwargs: object) -> Iterator[Event]:
    parts: list[str] = []
    for event in _generate(*args, **kwargs):  # type: ignore[arg-type]
        if isinstance(event, CycleReport):
            decided, DECIDED[:] = DECIDED[:] or ["", ""], []  # another policy (lookup alone) decides nothing here
            if event.drafted:
                name = event.event.split(".")[-1]
                parts.append(f"[{name} {decided[0]} {event.drafted}/{event.accepted} {decided[1]}]")
        elif isinstance(event, TextChunk):
            parts.append(event.text)
        elif isinstance(event, Finished):
            OUT.write(f"==== {event.stats.committed_tokens} tokens, {event.stats.target_forward_passes} passes\n")
            OUT.write("".join(parts) + "\n")
            OUT.flush()
        yield event


TriggerPolicy.draft_length = draft_length  # type: ignore[method-assign]
command.generate_speculative = generate  # type: ignore[assignment]
sys.exit(main(sys.argv[1:]))
