"""What the loop needs from the parts around it, and nothing more: a target and its tokenizer (implemented by
``ds4spec.backend``), a drafter behind its guard (``ds4spec.drafters.guard``) and a draft-length policy
(``ds4spec.policy``). The core depends on these contracts, never on the classes that implement them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, TypeVar

import numpy as np

from ds4spec.core.drafting import Draft, DraftContext, Drafter, Enough, Worth
from ds4spec.core.early_launch import EarlyLaunch

T = TypeVar("T")


class Tokenizer(Protocol):
    """The target's tokenizer, on bytes (a token may hold part of a UTF-8 character)."""

    def tokenize(self, text: bytes, *, add_special: bool = False, parse_special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> bytes: ...

    def piece(self, token: int) -> bytes: ...

    def is_eog(self, token: int) -> bool: ...

    def is_control(self, token: int) -> bool: ...


LaunchAhead = Literal["never", "where_it_pays", "always"]


class Target(Protocol):
    """One sequence evaluated by the target model, with exact rollback (``ds4spec.backend.target``)."""

    tokenizer: Tokenizer
    n_ctx: int
    n_batch: int

    @property
    def n_past(self) -> int: ...

    @property
    def tokens(self) -> list[int]: ...

    def recent_tokens(self, n: int) -> list[int]: ...

    def resync(self) -> None: ...

    def read_prompt(self, tokens: Sequence[int], cancelled: Callable[[], bool]) -> np.ndarray | None:
        """The logits after the last of ``tokens`` (1-D), or None when ``cancelled`` said so between chunks."""
        ...

    def eval_span(self, tokens: Sequence[int]) -> np.ndarray:
        """ONE forward pass; row i predicts the token after ``tokens[i]``: shape (len(tokens), n_vocab)."""
        ...

    def eval_span_view(self, tokens: Sequence[int]) -> np.ndarray:
        """``eval_span`` whose rows are not to be written and valid only until the next pass or rollback (no copy)."""
        ...

    def launch(self, tokens: Sequence[int]) -> None:
        """Starts ``eval_span_view``'s pass (the context holds ``tokens`` from here on); ``span_rows`` has its rows."""
        ...

    def span_rows(self) -> np.ndarray:
        """The rows of the pass ``launch`` started, once it is done."""
        ...

    @property
    def launches_ahead(self) -> LaunchAhead:
        """Whether a plain step may start before the bookkeeping of the token before it: ``never`` where a pass runs
        inside its launch (a CPU), ``where_it_pays`` where it runs beside the caller (a GPU), ``always`` (tests)."""
        ...

    def checkpoint(self) -> None: ...

    def rollback(self, n: int) -> None:
        """Forgets every position from ``n`` on."""
        ...


class DrafterFailureCount(Protocol):
    @property
    def total(self) -> int: ...


class Proposer(Protocol):
    """A drafter as the loop and the policies see it: behind a deadline and an exception barrier, so that
    whatever the drafter does, ``propose`` returns a ``Draft`` (``NO_DRAFT`` on any failure)."""

    name: str
    sources: tuple[str, ...]
    failures: DrafterFailureCount

    @property
    def available(self) -> bool: ...

    def begin(self, context: DraftContext) -> None: ...

    def warm(self) -> None: ...

    def extend(self, committed: bytes) -> None: ...

    def may_propose(self) -> bool:
        """False only when ``propose`` would surely give nothing now (``Drafter.may_propose``)."""
        ...

    def propose(self, max_tokens: int, source: str = "any", enough: Enough | None = None,
                worth: Worth | None = None) -> Draft: ...

    def call_alone(self, call: Callable[[Drafter], T]) -> T | None:
        """``call(drafter)`` between generations (a measurement); None when it raises or hangs."""
        ...


class DraftPolicy(ABC):
    """Decides the draft length of each cycle (and which drafter source to ask) and learns from its outcome.

    Like a drafter, a policy may follow the committed text (``begin``/``extend``); ``event`` names the
    syntax event behind its last decision ("" when it does not look at syntax) and ``source`` the drafter
    source it asks for: ``any`` (the drafter decides), ``lookup`` or ``model`` (a hybrid drafter's halves), or
    ``checked`` (lookup's draft where the model agrees, ``ds4spec.core.drafting.CHECKED``).
    """

    draft_max: int
    event: str = ""
    source: str = "any"
    # Whether the policy charges a drafter's reads itself (``observe_reading``): its cycles are then timed whole,
    # the prompt's read included; else that read is spread over the drafting cycles after it.
    charges_reading: bool = False
    early_launch: EarlyLaunch | None = None  # what launching plain steps early cost so far (None: a generation's own)

    def begin(self, context: DraftContext) -> None:  # noqa: B027 - optional: most policies ignore the text
        """A generation starts from ``context``."""

    def extend(self, committed: bytes) -> None:  # noqa: B027
        """Bytes the target committed."""

    def observe_reading(self, seconds: float) -> None:  # noqa: B027
        """Seconds the drafter spent reading text it had not seen before this cycle's draft (part of the cycle)."""

    @abstractmethod
    def draft_length(self) -> int:
        """Target tokens to draft this cycle; 0 means a plain step."""

    def pass_over(self) -> None:  # noqa: B027 - optional: a policy with per-cycle state drops it
        """This cycle is a plain step without asking ``draft_length``: the drafter had nothing to offer."""

    def observe(self, requested: int, drafted: int, accepted: int, cycle_seconds: float,  # noqa: B027
                source: str = "") -> None:
        """The outcome of a cycle: ``requested`` tokens asked for, ``drafted`` of them aligned and verified,
        ``accepted`` kept; ``cycle_seconds`` is its whole wall time; ``source`` is where the draft came from
        (``model``, ``lookup``, or ``none`` when the drafter had nothing)."""

    def takes_next(self, confidences: Sequence[float], aligned: int, wanted: int) -> bool:
        """Whether a model's draft takes its next token: ``confidences`` are the drafter's probabilities of its tokens
        so far, the next one's last; ``aligned`` is how many target tokens the draft gives without it, of the
        ``wanted`` asked for. By default a draft takes every token the drafter offers, up to that length."""
        return True

    def observe_confidences(self, confidences: Sequence[float], held: int, verified: int) -> None:  # noqa: B027
        """A model draft's outcome by its tokens: of the drafter's tokens, with these ``confidences``, the first
        ``held`` were kept whole and the first ``verified`` were inside the verified draft."""

    def plain_step_seconds(self) -> float | None:
        """The measured cost of a plain step, when the policy measures one (for the statistics)."""
        return None
