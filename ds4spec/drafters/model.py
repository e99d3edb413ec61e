"""Incremental sync of a model drafter with the committed text, shared by the llama.cpp and torch drafters.

Why: re-tokenizing and re-evaluating the whole text each cycle costs O(context) (the naive prototype did it).
:class:`TokenSync` keeps the drafter's tokens for (prompt + committed bytes) and re-tokenizes only a window of
the last ``lookback`` tokens plus the new bytes, starting where the fresh tokenization agrees with the old one
(a real boundary, so the list stays canonical; it looks back up to ``max_lookback`` tokens for one).
:class:`ModelDrafter` keeps the KV cache equal to that list lazily: it rolls back only what changed and
evaluates the rest at the next ``propose``. Draft tokens stay cached: once accepted they need no evaluation.
"""

from __future__ import annotations

import codecs
from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ds4spec.core.drafting import NO_DRAFT, Draft, DraftContext, Drafter, Enough, Worth
from ds4spec.drafters.healing import PrefixIndex


@dataclass
class SyncStats:
    """Work counters (tests compare them at short and long contexts: the per-cycle cost must not grow)."""

    tokenize_calls: int = 0
    tokenized_bytes: int = 0
    evaluated_tokens: int = 0  # fed to the model to catch up with the committed text
    reused_tokens: int = 0  # found already evaluated by comparison: accepted draft tokens, a reused prompt
    drafted_tokens: int = 0


class TokenSync:
    """The drafter's tokens for ``head`` (never re-tokenized: BOS, chat markup) + the committed text.

    ``tokenize(bytes)`` takes valid UTF-8 and must neither add nor parse special tokens; ``piece(id)`` gives
    a token's bytes. Tokenizers that prepend a space to every text (SentencePiece's dummy prefix) are
    handled: the text's first token keeps it, as a fresh tokenization of the text does; windows that
    start later are tokenized so that they add nothing.
    """

    def __init__(self, tokenize: Callable[[bytes], list[int]], piece: Callable[[int], bytes], *,
                 lookback: int = 8, max_lookback: int = 32, stats: SyncStats | None = None) -> None:
        self._tokenize_raw, self.piece = tokenize, piece
        self.lookback, self.max_lookback = lookback, max(lookback, max_lookback)
        self.stats = stats or SyncStats()
        probe = b"".join(map(piece, tokenize(b"x")))
        self._dummy = probe[:-1] if probe.endswith(b"x") else b""  # b" " for SentencePiece-style tokenizers
        self.reset([], at_text_start=True)

    def reset(self, head: Sequence[int], *, at_text_start: bool) -> None:
        """Starts over with ``head``; ``at_text_start``: the text begins a document (completion mode)."""
        self.tokens: list[int] = list(head)
        self.fixed = len(head)
        self._region_dummy = self._dummy if at_text_start else b""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def pending(self) -> bytes:
        """Committed bytes of an unfinished UTF-8 character, not yet tokenized."""
        return self._decoder.getstate()[0]

    def extend(self, data: bytes) -> int:
        """Appends ``data``; returns the index of the first token that changed (or was added).

        Invalid UTF-8 becomes U+FFFD: tokenizers do that anyway, and the drafter only needs similar text.
        """
        text = self._decoder.decode(data).encode("utf-8")
        n = len(self.tokens)
        if not text:
            return n
        found: tuple[int, list[int]] | None = None
        for start in self._starts(n):
            new = self._tokenize_window(start, text)
            if new is None:
                continue
            found = (start, new)
            if start in (self.fixed, n) or new[0] == self.tokens[start]:
                break  # the seam agrees with the old tokenization: a real boundary
        if found is None:  # a normalising tokenizer (NFC, lower case): the drafter's text drifts a little
            found = (n, self._tokenize(text))
        start, new = found
        same = next((i for i, (a, b) in enumerate(zip(self.tokens[start:], new, strict=False)) if a != b),
                    min(n - start, len(new)))
        self.tokens[start + same :] = new[same:]
        return start + same

    def _starts(self, n: int) -> Iterator[int]:
        """Window starts to try, nearest first; then ``n`` (new bytes alone) as the last resort."""
        first, last = max(self.fixed, n - self.lookback), max(self.fixed, n - self.max_lookback)
        for start in range(first, last - 1, -1):
            if start == n or self.piece(self.tokens[start])[:1] not in _CONTINUATION_BYTES:
                yield start
        if first != n:
            yield n

    def _tokenize_window(self, start: int, text: bytes) -> list[int] | None:
        """The tokens of the bytes of ``tokens[start:]`` followed by ``text``, or None if not exactly them."""
        kept = b"".join(map(self.piece, self.tokens[start:]))
        if start == self.fixed and self._region_dummy:  # the text's first token: a fresh tokenization
            window = kept.removeprefix(self._region_dummy) + text
            return self._exact(self._tokenize(window), self._region_dummy + window)
        window = kept + text
        attempts = [window, window[1:] if window.startswith(b" ") else None, b"\n" + window]
        for source in attempts:
            if source is not None and (got := self._exact(self._tokenize(source), window)) is not None:
                return got
        return None

    def _exact(self, tokens: list[int], want: bytes) -> list[int] | None:
        """``tokens`` less a leading run whose bytes are not part of ``want`` (an anchor, a dummy space)."""
        pieces = [self.piece(t) for t in tokens]
        extra = sum(map(len, pieces)) - len(want)
        cut = 0
        while extra > 0 and cut < len(pieces):
            extra -= len(pieces[cut])
            cut += 1
        if extra != 0 or b"".join(pieces[cut:]) != want or not pieces[cut:]:
            return None
        return tokens[cut:]

    def _tokenize(self, text: bytes) -> list[int]:
        self.stats.tokenize_calls += 1
        self.stats.tokenized_bytes += len(text)
        return self._tokenize_raw(text)


_CONTINUATION_BYTES = frozenset(bytes([b]) for b in range(0x80, 0xC0))
_KEPT_PREDICTIONS = 64
_KEPT_ROWS = 16  # a draft's positions: the row before the token the target corrects is among them


def top_probability(logits: np.ndarray) -> tuple[int, float]:
    """The argmax of ``logits`` and its softmax probability, without materialising the softmax."""
    top = int(np.argmax(logits))
    return top, float(1.0 / np.exp(logits.astype(np.float64) - float(logits[top])).sum())


class ModelDrafter(Drafter):
    """begin/extend/propose for a causal LM with a KV cache; subclasses provide the tokenizer and the model.

    ``p_min``: drafting stops before a token whose probability is below ``p_min``, except the first token,
    which is always proposed (with its probability in ``Draft.confidences``): whether to draft at all is the
    engine's policy, and it needs the drafter's confidence to decide. End-of-generation and other special
    tokens end a draft and are never part of it. ``heal``: a draft starts by choosing the committed text's last
    token again (``ds4spec.drafters.healing``), at no extra forward pass; off, a draft is the model's greedy
    continuation of exactly the committed tokens.
    """

    def __init__(self, *, p_min: float, lookback: int = 8, heal: bool = True) -> None:
        self.p_min = p_min
        self.heal = heal
        # Built at load (0.15 to 0.5 s for SmolLM2's 49,152 tokens), not in a generation's first timed cycle.
        self._index = PrefixIndex(self.n_vocab, self._piece, self._is_stop) if heal else None
        self._rows: dict[int, np.ndarray] = {}  # cache length -> the logits after it (recent positions only)
        self.stats = SyncStats()
        self._sync = TokenSync(self._tokenize_text, self._piece, lookback=lookback, stats=self.stats)
        self._valid = 0  # the cache holds sync.tokens[:_valid] for sure; beyond that it must be compared
        self._predictions: dict[int, tuple[int, float]] = {}  # cache length -> (next token, its probability)
        self._started = False
        self.last_draft: list[int] = []  # the drafter's own tokens of the last draft (tests, telemetry)

    # -- what a model backend provides -------------------------------------------------------------------

    @abstractmethod
    def _prompt(self, context: DraftContext) -> tuple[list[int], bytes]:
        """(head tokens, text): completion gives (BOS if any, the text), chat the rendered turns and b""."""

    @abstractmethod
    def _tokenize_text(self, text: bytes) -> list[int]:
        """Plain text to tokens: no BOS added, special-token text stays text."""

    @abstractmethod
    def _piece(self, token: int) -> bytes: ...

    @abstractmethod
    def _is_stop(self, token: int) -> bool:
        """End-of-generation and control tokens: their text must never reach a draft."""

    @abstractmethod
    def _cache_tail(self, start: int) -> list[int]: ...  # the tokens the KV cache holds from ``start`` on

    @abstractmethod
    def _cache_len(self) -> int: ...

    @abstractmethod
    def _truncate(self, n: int) -> None: ...  # forgets cache positions from ``n`` on

    @abstractmethod
    def _forward(self, tokens: list[int], rows: int) -> np.ndarray:
        """Evaluates ``tokens`` after the cache in one pass; returns the logits after each of the last ``rows``
        (``rows`` <= ``len(tokens)``; fewer only where the backend cannot give them)."""

    @property
    @abstractmethod
    def n_ctx(self) -> int | None: ...  # the longest context the drafter drafts in; None: no limit

    @property
    @abstractmethod
    def n_vocab(self) -> int: ...

    # -- the Drafter contract ----------------------------------------------------------------------------

    @property
    def tokens(self) -> list[int]:
        """The drafter's tokens for the prompt and the committed text (less ``pending``)."""
        return list(self._sync.tokens)

    @property
    def pending(self) -> bytes:
        return self._sync.pending

    def begin(self, context: DraftContext) -> None:
        head, text = self._prompt(context)
        self._sync.reset(head, at_text_start=context.text is not None)
        self._sync.extend(text)
        self._valid = 0  # the cache may still hold a common prefix from the last generation: reused lazily
        self._started = True

    def extend(self, committed: bytes) -> None:
        self._valid = min(self._valid, self._sync.extend(committed))

    def prepare(self, source: str = "any") -> None:
        tokens = self._sync.tokens
        if self._started and tokens and (self.n_ctx is None or len(tokens) < self.n_ctx):
            self._catch_up(tokens, rows=2 if self.heal else 1)  # the row before the last token, for healing

    def propose(self, max_tokens: int) -> Draft:
        return self._draft(max_tokens, None)

    def propose_until(self, max_tokens: int, enough: Enough, source: str = "any", worth: Worth | None = None) -> Draft:
        return self._draft(max_tokens, enough, worth)

    def _draft(self, max_tokens: int, enough: Enough | None, worth: Worth | None = None) -> Draft:
        tokens = self._sync.tokens
        if self.n_ctx is not None:
            max_tokens = min(max_tokens, self.n_ctx - len(tokens) - 1)
        if not self._started or max_tokens <= 0 or not tokens:
            return NO_DRAFT
        healed = self._healed(tokens)
        top, prob = healed or self._catch_up(tokens)
        written = len(self._piece(tokens[-1])) if healed else 0  # the healed token's bytes already committed
        out: list[int] = []
        confidences: list[float] = []
        ends: list[int] = []
        text = b""
        while not self._is_stop(top) and (not out or self._takes(prob, confidences, ends, worth, text)):
            out.append(top)
            confidences.append(prob)
            text += self._piece(top)[written:]
            ends.append(len(text))
            written = 0
            if len(out) >= max_tokens or self._hopeless(text):
                break
            # Each forward pass costs what the whole alignment does many times over: stop as soon as it is enough.
            if enough is not None and enough(self._unfinished_removed(text)):
                break
            top, prob = self._eval([top])
        self.stats.drafted_tokens += len(out)
        self.last_draft = out
        if not out:
            return NO_DRAFT
        finished = len(self._sync.pending) if text.startswith(self._sync.pending) else 0  # see _unfinished_removed
        return Draft(self._unfinished_removed(text), "model", drafter_tokens=len(out), confidences=tuple(confidences),
                     ends=tuple(max(0, end - finished) for end in ends))

    def _takes(self, prob: float, confidences: list[float], ends: list[int], worth: Worth | None, text: bytes) -> bool:
        """Whether a draft whose tokens so far had ``confidences`` and ``ends`` and wrote ``text`` takes a next token of
        probability ``prob``: ``worth`` is not asked while the draft has written nothing new (a healed token may only
        finish the committed text), as stopping there would leave no draft at all, and is not told of such tokens."""
        if prob < self.p_min:
            return False
        if worth is None or not self._unfinished_removed(text):
            return True
        return worth([*confidences[bisect_right(ends, 0):], prob])

    def _hopeless(self, text: bytes) -> bool:
        """Whether the draft failed to finish the unfinished character it continues: nothing after can be used."""
        pending = self._sync.pending
        return bool(pending) and not (text.startswith(pending) or pending.startswith(text))

    def _unfinished_removed(self, text: bytes) -> bytes:
        """The draft as a continuation of the committed text: the model saw the text up to an unfinished character
        (``pending``), so its draft must begin by finishing it; those bytes are committed already."""
        pending = self._sync.pending
        if not pending:
            return text
        return text[len(pending) :] if text.startswith(pending) else b""

    # -- the cache ---------------------------------------------------------------------------------------

    def _healed(self, tokens: list[int]) -> tuple[int, float] | None:
        """The committed text's last token chosen again (see ``heal``), where another one wins: the cache then
        holds ``tokens[:-1]`` and the answer is the chosen token and its probability among the candidates.

        The row before the last token is most often at hand: the last draft's positions, where the target
        corrected it. Otherwise the catch-up's one pass returns it beside the last token's, so healing never adds
        a pass; it only drops the last token's evaluation when another token wins.
        """
        n = len(tokens)
        if self._index is None or not self.heal or self._sync.pending or n - 1 < max(1, self._sync.fixed):
            return None
        last = self._piece(tokens[-1])
        if last.endswith((b" ", b"\t")):  # spaces the target ended: they fix the indentation that follows
            return None
        candidates = self._index.starting_with(last)
        if len(candidates) < 2:
            return None
        if self._held_prefix(tokens) < n - 1 or (n - 1) not in self._rows:
            self._catch_up(tokens, rows=2)
        row = self._rows.get(n - 1)
        if row is None:  # the catch-up's last chunk held one token
            return None
        best, prob = top_probability(row[candidates])  # its probability among the candidates
        top = int(candidates[best])
        if top == tokens[-1]:
            return None
        self._truncate_cache(min(self._cache_len(), n - 1))
        self._valid = n - 1
        return top, prob

    def _held_prefix(self, tokens: list[int]) -> int:
        """How many of ``tokens`` the cache holds: compared only from ``_valid`` on (the tail that ``extend``
        changed, plus draft tokens), so that the cost does not depend on the length of the context."""
        same = self._valid
        for held in self._cache_tail(self._valid):
            if same == len(tokens) or held != tokens[same]:
                break
            same += 1
        self.stats.reused_tokens += same - self._valid
        self._valid = same
        return same

    def _catch_up(self, tokens: list[int], rows: int = 1) -> tuple[int, float]:
        """Makes the cache hold exactly ``tokens``; returns the prediction after the last one (and keeps the
        logits after each of the last ``rows``)."""
        same = self._held_prefix(tokens)
        rows = min(rows, len(tokens))
        if rows == 2 and same >= len(tokens) - 1 and len(tokens) - 1 in self._rows:
            rows = 1  # the row before the last token is at hand: the last draft's, or the last catch-up's
        if same == len(tokens) and same in self._predictions and rows == 1:
            self._truncate_cache(same)
        else:
            same = min(same, len(tokens) - rows)  # evaluate enough tokens for the rows asked for
            self._truncate_cache(same)
            self._valid = same
            self.stats.evaluated_tokens += len(tokens) - same
            self._eval(tokens[same:], rows)
        self._valid = len(tokens)
        return self._predictions[len(tokens)]

    def _truncate_cache(self, n: int) -> None:
        self._truncate(n)
        self._predictions = {k: v for k, v in self._predictions.items() if k <= n}
        self._rows = {k: v for k, v in self._rows.items() if k <= n}

    def _eval(self, tokens: list[int], rows: int = 1) -> tuple[int, float]:
        logits = self._forward(tokens, rows)
        n = self._cache_len()
        if self.heal:
            for i, row in enumerate(logits, start=n - len(logits) + 1):
                self._rows[i] = row
            for k in sorted(self._rows)[:-_KEPT_ROWS]:
                del self._rows[k]
        prediction = top_probability(logits[-1])
        self._predictions[n] = prediction
        if len(self._predictions) > _KEPT_PREDICTIONS:  # only recent ones are ever asked for again
            del self._predictions[min(self._predictions)]
        return prediction
