"""The drafter contract: propose text that may follow the committed text. Nothing more.

A drafter never sees target tokens: drafts travel as text (bytes), so a drafter may use any tokenizer.
The engine calls, per generation::

    drafter.begin(context)          # the prompt: raw text (completion) or messages (chat)
    loop:
        draft = drafter.propose(n)  # up to n of the drafter's own tokens of continuation, as bytes
        ...verification...
        drafter.extend(committed)   # the bytes committed this cycle (accepted draft + target token)

``prepare()`` may come before a ``propose``: a model reads the text then, so that drafting is timed alone.

``extend`` must cost the same at token 50 and at token 5,000: a drafter re-tokenizes only a bounded
tail of its text and keeps its KV cache for the unchanged prefix. A drafter may raise, be slow, or return
nonsense: the engine survives all three and the output does not change (the verifier decides).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ds4spec.core.messages import ChatMessage


@dataclass(frozen=True, slots=True)
class DraftContext:
    """What the generation starts from. Exactly one of ``text`` and ``messages`` is set.

    ``text``: completion mode, the raw prompt text (for FIM, the text before the cursor).
    ``messages``: chat mode; the drafter renders them with its own chat template and an open assistant turn.
    """

    text: bytes | None = None
    messages: Sequence[ChatMessage] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ValueError("a DraftContext holds either text or messages")

    def content(self) -> bytes:
        """The prompt's text as an answer may copy it and a drafter reads it: a completion's text, or a chat's message
        contents joined by new lines (without any template's markup)."""
        if self.text is not None:
            return self.text
        return b"\n".join(m.content.encode() for m in self.messages or ())


@dataclass(frozen=True, slots=True)
class Draft:
    """A proposed continuation of the committed text.

    ``text`` may end inside a UTF-8 character or a word; the aligner cuts what is not yet stable.
    ``confidences`` are the drafter's own probabilities of its tokens, when it has them (for the policy), and
    ``ends`` the length of ``text`` after each of them (a token that only finishes committed text ends at 0).
    """

    text: bytes
    source: str  # "model" or "lookup"
    drafter_tokens: int = 0  # how many of its own tokens the drafter generated (cost accounting)
    confidences: Sequence[float] = field(default_factory=tuple)
    ends: Sequence[int] = field(default_factory=tuple)
    # Seconds spent reading the prompt before this draft (a drafter that waits its turn reads it when first asked):
    # paid once per generation, not a cost of this draft's length.
    sync_seconds: float = 0.0
    # Seconds spent reading all the text not yet read before this draft (the prompt included): a cost that depends on
    # how much text the drafter was not asked for, not on the draft's length.
    read_seconds: float = 0.0


NO_DRAFT = Draft(b"", "none")

# Whether a draft's text so far already gives the target all the tokens it asked for: a model drafter that is told
# stops there, rather than paying forward passes for text the aligner would cut.
Enough = Callable[[bytes], bool]
# Whether a model's draft takes its next token, given its own probabilities of its tokens so far with the next one's
# last: a policy that knows what a longer verify pass costs and how often tokens that sure are kept stops it there.
Worth = Callable[[Sequence[float]], bool]
# A source a policy may ask a hybrid drafter for: lookup's draft where the model's first bytes agree with it, else the
# model's (``ds4spec.drafters.hybrid``); a drafter of one source reads it as ``any``.
CHECKED = "checked"


class Drafter(ABC):
    """Proposes text. Implementations: llama.cpp, transformers, text lookup, hybrid."""

    name: str = "drafter"
    sources: tuple[str, ...] = ("model",)  # what ``propose_from`` can be asked for: model and/or lookup

    @abstractmethod
    def begin(self, context: DraftContext) -> None:
        """Starts a generation from ``context``, forgetting any earlier one (its caches may be reused)."""

    @abstractmethod
    def extend(self, committed: bytes) -> None:
        """Appends bytes the target committed (they follow the prompt and everything extended before)."""

    @abstractmethod
    def propose(self, max_tokens: int) -> Draft:
        """Up to ``max_tokens`` of the drafter's own tokens of continuation; ``NO_DRAFT`` when it has none.

        A model drafter stops early when its top probability falls below its ``p_min``.
        """

    def prepare(self, source: str = "any") -> None:  # noqa: B027 - optional: only a model has text to read
        """Reads the committed text now (a model evaluates it), so that the next ``propose`` from ``source`` only
        drafts. A drafter without a model has nothing to do."""

    def may_propose(self) -> bool:
        """False only when ``propose`` would surely come back empty now (text lookup: the text's end occurs nowhere
        earlier), so that the loop need not weigh a draft length at all. A model can always try."""
        return True

    def follow_only(self, sources: tuple[str, ...]) -> None:  # noqa: B027 - optional: one source has nothing to drop
        """Only ``sources`` will be asked from now on (the cost check ruled the others out): a drafter of several
        sources may stop following the text for the others, whose reading would be work for nothing."""

    def propose_from(self, source: str, max_tokens: int) -> Draft:
        """A draft from ``source`` only (one of ``sources``); a drafter with one source just proposes."""
        return self.propose(max_tokens)

    def propose_until(self, max_tokens: int, enough: Enough, source: str = "any", worth: Worth | None = None) -> Draft:
        """As ``propose_from`` (``propose`` for ``any``), stopping once ``enough(text)`` holds for the text so far, or
        (a model) before a token after the first that ``worth`` does not take. A drafter whose tokens cost nothing
        (lookup) may ignore both."""
        return self.propose(max_tokens) if source == "any" else self.propose_from(source, max_tokens)

    def close(self) -> None:  # noqa: B027 - optional hook; most drafters hold nothing to release
        """Releases models and memory."""
