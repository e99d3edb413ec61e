"""What it costs a model drafter to read text it has not seen: the prompt, and what lookup or the target wrote while
it was not asked.

A drafter that waits its turn reads that text when it is next asked, inside that cycle. After lookup copied a few
hundred bytes of an edited file, or at its first draft of a chat answer whose prompt holds the file, that read costs
more than the draft (measured on the F16 pair's edits: SmolLM2 read a prompt for 0.6 to 1.2 s, 9 to 17 plain steps,
for a draft of 5 tokens). The cost is fitted as ``fixed + per_byte * bytes`` by least squares over recent reads,
the most recent weighing most: the fixed part is the forward pass that yields the draft's first token, the rest
grows with the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ds4spec.core.drafting import DraftContext
from ds4spec.policy.stalls import stalled

DECAY = 0.9  # weight of a read after each newer one: a few dozen reads make the fit
# Tokens an answer is expected to hold until its length is known (a completion, a chat's first answer) and as many
# have not been written yet: HumanEval's answers average about 25, a chat's run to hundreds. A first read of the prompt
# serves every draft of the answer, so this is how many tokens it is expected to serve.
ANSWER_PRIOR = 32
# How much an answer's length moves the length answers are expected to have, from ``ANSWER_PRIOR`` on: one answer is
# a poor guide (HumanEval's run from 7 tokens to past 128). Taken as the next one's length, a 94-token answer and one
# cut at 128 each had the next answer bet a read of its prompt on SmolLM2 (default pair, 2-core AVX-512): answers of
# 25 and 37 tokens, at 0.77x and 0.81x of plain (unseen prompts, run 70).
ANSWER_WEIGHT = 1 / 3
GAIN_DECAY = 0.8  # weight of an answer's figures after each newer one
# Answer tokens' worth the policy's own estimate of what a model's drafts win is held as, beside the first answer that
# measured it (then less, as that answer's figures fade)
GAIN_PRIOR_TOKENS = 16.0


class ReadingCosts:
    """Seconds to read ``n`` unseen bytes, fitted online; 0 until a read was measured.

    A read far above what the fit expected is taken for a stall (``stalls``) and learned as nothing, unless the read
    before it was taken for one too: a stall comes alone, a dearer drafter (a longer text, another model) stays dear,
    and is learned from its second read."""

    def __init__(self) -> None:
        self._w = self._x = self._y = self._xx = self._xy = 0.0
        self._fit: tuple[float, float] | None = None  # a policy prices several lengths a cycle with one fit
        self._set_aside = False  # whether the last read was taken for a stall, and learned as nothing

    def observe(self, nbytes: int, seconds: float) -> None:
        if self._w:
            self._set_aside = stalled(seconds, self.cost(nbytes)) and not self._set_aside
            if self._set_aside:
                return
        self._fit = None
        self._w = DECAY * self._w + 1
        self._x = DECAY * self._x + nbytes
        self._y = DECAY * self._y + seconds
        self._xx = DECAY * self._xx + nbytes * nbytes
        self._xy = DECAY * self._xy + nbytes * seconds

    def fit(self) -> tuple[float, float]:
        """(fixed seconds, seconds per byte); reads of one size only give a cost proportional to the bytes."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[float, float]:
        if self._w == 0:
            return 0.0, 0.0
        spread = self._w * self._xx - self._x * self._x
        if spread <= 1e-6 * self._w * self._xx or not self._x:
            return (0.0, self._y / self._x) if self._x else (self._y / self._w, 0.0)
        slope = max(0.0, (self._w * self._xy - self._x * self._y) / spread)
        return max(0.0, (self._y - slope * self._x) / self._w), slope

    def cost(self, nbytes: int) -> float:
        fixed, per_byte = self.fit()
        return fixed + per_byte * nbytes


@dataclass(slots=True)
class ReadText:
    """What a model drafter has read, as far as its policy can tell: a generation's prompt (its messages' contents,
    joined by new lines) and the first ``read`` bytes of the answer after it. Its cache keeps the prefix a new prompt
    shares with that text (a chat's earlier turns, an editor's file) and reads only the rest: charged all of the
    prompt, a chat's later turns priced the model's first read of each answer whole, and learned the few milliseconds
    it took as a read of every byte (F32 pair, a prompt the drafter held: 652 bytes in 1.3 ms), after which each
    later read was priced at the average read (30 to 50 ms, 0.15 to 0.25 plain steps, against the 8 ms of a pass)."""

    prompt: bytes
    answer: bytearray
    read: int = 0
    chat: bool = False

    def unread_of(self, prompt: bytes) -> int:
        """How many bytes of ``prompt`` follow the prefix it shares with this text."""
        held = self.prompt + (b"\n" if self.chat else b"") + bytes(self.answer[: self.read])
        return len(prompt) - shared_prefix(held, prompt)


def shared_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (slices compared in C: a chat's history in
    microseconds)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class ReadGains:
    """Plain steps a model's drafts won a token of the answer, after the model read the answer's prompt: measured per
    answer (each model cycle's tokens less its cost in plain steps, the prompt's read aside, over every token written
    from that read to the answer's end) and per text family where it read (code and prose differ), the most recent
    answers weighing most.

    A policy prices the prompt's read against the tokens an answer has left at this figure. Estimated instead from the
    event's acceptance and cost, as if the model wrote every token left, reads of 2.5 to 8 plain steps looked won
    back on unseen HumanEval prompts with the default pair (2-core AVX-512): the answers after them won 0.07 plain
    steps a token (-0.05 in short answers, 0.18 in long ones), where the F16 pair's won 0.2 to 0.6 (run 70). The
    estimate is held as ``GAIN_PRIOR_TOKENS`` beside the first answers measured, and fades as they do."""

    def __init__(self) -> None:
        self._figures: dict[str, tuple[float, float, float]] = {}  # family: won, tokens, the estimate's weight
        self._family: str | None = None  # where the model read this answer's prompt; None: it has not
        self._won = 0.0
        self._tokens = 0

    def read_prompt(self, family: str) -> None:
        if self._family is None:
            self._family = family

    def wrote(self, tokens: int, won: float) -> None:
        """``tokens`` written in a cycle whose draft won ``won`` plain steps (0 where the model had no part in it)."""
        if self._family is not None:
            self._tokens += tokens
            self._won += won

    def new_generation(self) -> None:
        if self._family is not None and self._tokens:
            won, tokens, prior = self._figures.get(self._family, (0.0, 0.0, GAIN_PRIOR_TOKENS))
            self._figures[self._family] = (GAIN_DECAY * won + self._won, GAIN_DECAY * tokens + self._tokens,
                                           GAIN_DECAY * prior)
        self._family, self._won, self._tokens = None, 0.0, 0

    def per_token(self, family: str, estimate: float) -> float:
        """Plain steps the model's drafts are expected to win a token of the answer where ``family``'s text is:
        ``estimate`` until answers measured it."""
        won, tokens, prior = self._figures.get(family, (0.0, 0.0, GAIN_PRIOR_TOKENS))
        return (won + estimate * prior) / (tokens + prior)


@dataclass(slots=True)
class ModelReading:
    """One model drafter's reads, kept across generations by whoever holds the drafter and shared by its policies: what
    reading costs it, the text its cache holds (what it read last; None before it read anything), and how many tokens
    a read serves: an answer's, learned (``answer_tokens``, None until an answer ended), less those written, and what
    the model's drafts won a token after it read a prompt (``gains``)."""

    costs: ReadingCosts = field(default_factory=ReadingCosts)
    gains: ReadGains = field(default_factory=ReadGains)
    held: ReadText | None = None
    answer_tokens: float | None = None  # tokens an answer holds, on average (``ANSWER_WEIGHT``)
    written: int = 0  # tokens committed in this generation

    def new_generation(self) -> None:
        self.gains.new_generation()
        if self.written:
            known = ANSWER_PRIOR if self.answer_tokens is None else self.answer_tokens
            self.answer_tokens = known + ANSWER_WEIGHT * (self.written - known)
        self.written = 0

    def wrote(self, tokens: int) -> None:
        self.written += tokens

    def tokens_left(self) -> float:
        """Tokens this answer is expected still to write: until an answer's length is known (a ``ds4spec complete``, a
        chat's first answer), as many as were written, and at least ``ANSWER_PRIOR`` in all."""
        expected = self.answer_tokens if self.answer_tokens is not None else max(ANSWER_PRIOR, 2.0 * self.written)
        return expected - self.written


class UnreadText:
    """What a model drafter that waits its turn has yet to read in this generation: the part of the prompt its cache
    does not hold, and the bytes committed since it last read. A policy asks it for a draft at ``asked`` and tells
    ``read`` once the drafter has read all that was unread then."""

    def __init__(self, reading: ModelReading) -> None:
        self.reading = reading
        self.prompt = 0  # bytes of the prompt it has not read
        self.answer = 0  # bytes committed since it last read
        self._text = ReadText(b"", bytearray())  # the prompt and this generation's text, its read of it
        self._asked = (0, 0, 0)  # prompt and answer unread, and the answer's length, when it was last asked

    def begin(self, context: DraftContext) -> None:
        prompt = context.content()
        held = self.reading.held
        self.prompt = held.unread_of(prompt) if held is not None else len(prompt)
        self._text = ReadText(prompt, bytearray(), chat=context.text is None)
        self.answer = 0

    def extend(self, committed: bytes) -> None:
        self.answer += len(committed)
        self._text.answer += committed

    @property
    def total(self) -> int:
        return self.prompt + self.answer

    def cost(self) -> float:
        """Seconds to read all of it, as reads so far priced it."""
        return self.reading.costs.cost(self.total)

    def charge(self, tokens: float, spread: bool = False, shared: bool = True) -> float:
        """Seconds of reading charged to a cycle expected to write ``tokens``: all of reading what was committed since
        the drafter last read, and of the prompt's first read the share of the tokens left that the cycle writes (that
        read serves every later draft of the answer), or all of it unless ``shared``. With ``spread``, what was
        committed since is charged by that share too, but for the fixed part of a read (the pass that yields the
        draft's first token)."""
        costs = self.reading.costs
        if not shared:
            return self.cost()
        text = costs.cost(self.answer)
        spread = spread and self.answer > 0
        if not (self.prompt or spread):
            return text
        share = min(1.0, tokens / max(self.reading.tokens_left(), tokens))
        whole_part = min(text, costs.fit()[0]) if spread else text
        return whole_part + (self.cost() - whole_part) * share

    def asked(self) -> None:
        self._asked = (self.prompt, self.answer, len(self._text.answer))

    def read(self, seconds: float) -> bool:
        """The drafter read all it had not seen when last asked, in ``seconds`` (0: beside the target, not timed);
        whether that held some of the prompt."""
        prompt, answer, length = self._asked
        if seconds > 0:
            self.reading.costs.observe(prompt + answer, seconds)
        self.prompt = 0
        self.answer -= answer
        self._text.read = length
        self.reading.held = self._text
        return prompt > 0
