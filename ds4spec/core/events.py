"""The stream of events that every face (complete, chat, REPL, editor server) consumes.

Vocabulary, used with exactly these meanings everywhere in ds4spec:

- **drafted**: target tokens proposed by a drafter for one verify pass, after its text was aligned to the
  target's tokenizer.
- **accepted**: drafted tokens the verifier kept because the target would have produced them itself.
- **corrected**: the target's own token emitted at the first position where a draft was rejected.
- **bonus**: the target's own token emitted after a draft was accepted in full (the verify pass yields it
  for free).
- **nothing to draft** (``NOTHING_TO_DRAFT``, as a syntax event's name): a cycle in which the drafter had nothing to
  offer (text lookup alone, the text's end occurring nowhere earlier), so no draft length was weighed: a plain step.
- **no draft pays** (``NO_DRAFT_PAYS``, as a syntax event's name): a cycle in which text lookup, the only source worth
  asking, had a match, but by what it has learned no draft of it could pay at any syntax event, so the event was not
  looked up: a plain step.
- **committed**: tokens that are final: they will be part of the output and are in the target's context.
  Every committed token is either accepted (provenance ``DRAFT``) or the target's own (provenance
  ``TARGET``: plain steps, corrections and bonus tokens).

A generator yields ``TextChunk`` events as text is committed (and, when speculating, a ``CycleReport`` per
verify pass), then exactly one ``Finished``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ds4spec.core.stats import GenerationStats

NOTHING_TO_DRAFT = "drafter.nothing"
NO_DRAFT_PAYS = "drafter.no_gain"


class Provenance(StrEnum):
    """Who decided a piece of committed text."""

    TARGET = "target"
    DRAFT = "draft"


class FinishReason(StrEnum):
    EOG = "eog"  # the target produced an end-of-generation token
    STOP = "stop"  # a stop string appeared; the output ends just before it
    LENGTH = "length"  # max_tokens were committed
    CONTEXT = "context"  # the context window is full
    CANCELLED = "cancelled"  # the consumer asked to stop


@dataclass(frozen=True, slots=True)
class TextChunk:
    """Committed text, always whole UTF-8 characters."""

    text: str
    provenance: Provenance


@dataclass(frozen=True, slots=True)
class CycleReport:
    """One speculative cycle: ``drafted`` tokens verified in one target pass, ``accepted`` of them kept,
    plus the target's own token (correction or bonus). Emitted before the cycle's text."""

    drafted: int
    accepted: int
    draft_seconds: float
    verify_seconds: float
    event: str = ""  # the syntax event (``ds4spec.triggers``) that set this draft's length; "" without triggers


@dataclass(frozen=True, slots=True)
class Finished:
    reason: FinishReason
    stats: GenerationStats
    tokens: tuple[int, ...] = ()  # the committed token ids, in order (end-of-generation tokens excluded)


Event = TextChunk | CycleReport | Finished
